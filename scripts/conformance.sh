#!/usr/bin/env bash
# Differential xDS against real istiod (docs/CONFORMANCE.md): runs crates/meshpilot/tests/it/peer/conformance.rs with
# the scenarios selected and writes the report.
#
#   scripts/conformance.sh [SCENARIOS]
#       SCENARIOS: `all` (default: the CI scenarios and the 16 rendered benchmark workloads of
#       ../shared/istio-testdata/_derived/xds/benchmarks/rendered), `ci` (what `cargo test` runs), or a
#       substring of scenario names (e.g. `benchmark: http`).
#
# Environment: OUT (report directory; default /tmp/meshpilot-conformance), CARGO_TARGET_DIR as usual.
# Builds (or finds cached) kube-apiserver and istiod first: scripts/kube-testenv.sh build,
# scripts/istio-peer.sh build. The report is OUT/report.md (table, differences, field-level diffs) and
# OUT/report.json (everything). Exits non-zero when a difference is not in the test's allow-list.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-/tmp/meshpilot-conformance}"
SCENARIOS="${1:-all}"
cd "$ROOT"
scripts/kube-testenv.sh build
scripts/istio-peer.sh build
mkdir -p "$OUT"
status=0
CONFORMANCE_SCENARIOS="$SCENARIOS" CONFORMANCE_OUT="$OUT" \
  cargo test -p meshpilot --test it conformance:: -- --nocapture >"$OUT/test.log" 2>&1 || status=$?
if [ -f "$OUT/report.md" ]; then
  echo "conformance: report in $OUT/report.md ($OUT/report.json); test log $OUT/test.log"
else
  tail -50 "$OUT/test.log" >&2
fi
exit "$status"
