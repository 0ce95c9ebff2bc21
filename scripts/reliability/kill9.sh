#!/usr/bin/env bash
# kill -9 of meshpilot under load (docs/RELIABILITY.md, "kill -9 under traffic"): a sidecar and an ingress
# gateway Envoy carry a steady load from hey (RELIAB_RATE req/s each, default 1000), meshpilot is killed
# with SIGKILL, stays down RELIAB_DOWN_SECS (default 5) and restarts on the same ports; once with SotW,
# once with Delta. Prints the failed requests, the seconds to reconnect and to re-converge, Envoy's
# CDS/LDS and churn counters, meshpilot's pushes and RSS. Exits non-zero if a request failed or a
# cluster/listener changed across the restart.
#
#   scripts/reliability/kill9.sh                              # debug build (as the test suite)
#   RELIAB_CARGO_FLAGS=--release scripts/reliability/kill9.sh  # optimized meshpilot
#
# Needs Envoy (scripts/install-envoy.sh) and Go (hey is built from the Go module proxy, cached).
set -euo pipefail
cd "$(dirname "$0")/../.."
HEY_BIN="$(scripts/reliability/install-hey.sh)"
export HEY_BIN
exec cargo test -p meshpilot ${RELIAB_CARGO_FLAGS:-} --test it kill9_load::kill9_under_load -- --ignored --nocapture
