#!/usr/bin/env bash
# The HTTP load generator of the reliability scenarios (docs/RELIABILITY.md): hey, built from the Go module
# proxy (`go install github.com/rakyll/hey@VERSION`) into ${MESHPILOT_CACHE:-~/.cache/meshpilot}/tools/hey-VERSION.
# Cached and idempotent: a no-op when the binary is there. Prints the binary's path on stdout.
set -euo pipefail

HEY_VERSION=v0.1.5
DIR="${MESHPILOT_CACHE:-$HOME/.cache/meshpilot}/tools/hey-$HEY_VERSION"
BIN="$DIR/hey"

if [ ! -x "$BIN" ]; then
  command -v go >/dev/null || { echo "install-hey: error: go is not installed (needed to build hey)" >&2; exit 1; }
  mkdir -p "$DIR"
  echo "install-hey: building github.com/rakyll/hey@$HEY_VERSION into $DIR" >&2
  GOBIN="$DIR" GOFLAGS="${GOFLAGS:-} -trimpath" go install "github.com/rakyll/hey@$HEY_VERSION"
fi
echo "$BIN"
