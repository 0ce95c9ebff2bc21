#!/usr/bin/env bash
# Installs Python grpcio (PyPI wheel, which includes the xDS resolver and load-balancing policies)
# into .venv-grpc at the repository root, for the proxyless gRPC end-to-end tests
# (crates/discovery/tests/grpc_proxyless.rs). Idempotent: does nothing if the right version is there.
# Prints the path of the venv's python on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

GRPCIO_VERSION=1.85.1
TYPING_EXTENSIONS_VERSION=4.16.0  # grpcio's one dependency
VENV=.venv-grpc
PY="$PWD/$VENV/bin/python"

installed() {
  [ -x "$PY" ] && [ "$("$PY" -c 'import grpc; print(grpc.__version__)' 2>/dev/null)" = "$GRPCIO_VERSION" ]
}

if installed; then
  echo "$PY"
  exit 0
fi

python3 -m venv "$VENV" >&2
"$VENV/bin/pip" install --quiet --disable-pip-version-check "grpcio==$GRPCIO_VERSION" "typing-extensions==$TYPING_EXTENSIONS_VERSION" >&2

if ! installed; then
  echo "error: $PY cannot import grpcio $GRPCIO_VERSION after installation" >&2
  exit 1
fi
echo "$PY"
