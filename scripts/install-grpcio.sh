#!/usr/bin/env bash
# Installs Python grpcio (PyPI wheel, which includes the xDS resolver and load-balancing policies)
# into .venv-grpc at the repository root, for the proxyless gRPC end-to-end tests
# (crates/discovery/tests/it/peer/grpc_proxyless.rs), and xds-protos (Envoy's generated Python protos) with
# PyYAML for the AuthorizationPolicy golden comparison (scripts/authz-golden.py,
# crates/networking/tests/it/peer/authz_golden.rs). Idempotent: does nothing if the right versions are there.
# Prints the path of the venv's python on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

GRPCIO_VERSION=1.85.1
TYPING_EXTENSIONS_VERSION=4.16.0  # grpcio's one dependency
XDS_PROTOS_VERSION=1.85.0
PROTOBUF_VERSION=7.36.2           # xds-protos' dependency (besides grpcio)
PYYAML_VERSION=6.0.3
VENV=.venv-grpc
PY="$PWD/$VENV/bin/python"

installed() {
  [ -x "$PY" ] && [ "$("$PY" -c '
import importlib.metadata as m
import grpc, yaml, google.protobuf, envoy.config.rbac.v3.rbac_pb2
print(grpc.__version__, m.version("xds-protos"), m.version("protobuf"), yaml.__version__)
' 2>/dev/null)" = "$GRPCIO_VERSION $XDS_PROTOS_VERSION $PROTOBUF_VERSION $PYYAML_VERSION" ]
}

if installed; then
  echo "$PY"
  exit 0
fi

[ -x "$PY" ] || python3 -m venv "$VENV" >&2
"$VENV/bin/pip" install --quiet --disable-pip-version-check "grpcio==$GRPCIO_VERSION" \
  "typing-extensions==$TYPING_EXTENSIONS_VERSION" "xds-protos==$XDS_PROTOS_VERSION" \
  "protobuf==$PROTOBUF_VERSION" "pyyaml==$PYYAML_VERSION" >&2

if ! installed; then
  echo "error: $PY cannot import grpcio $GRPCIO_VERSION, xds-protos $XDS_PROTOS_VERSION, protobuf $PROTOBUF_VERSION and PyYAML $PYYAML_VERSION after installation" >&2
  exit 1
fi
echo "$PY"
