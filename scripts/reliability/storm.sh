#!/usr/bin/env bash
# Connection storm (issue 20, docs/RELIABILITY.md "Connection storms"): PROXIES + STAYED simulated
# sidecars connect (RAMP/s) and settle; then PROXIES of them drop their streams and connections and
# reconnect at once on new connections (a control-plane failover as the proxies see it), retrying with
# jittered backoff when meshpilot's admission control (PILOT_MAX_REQUESTS_PER_SECOND) refuses them with
# RESOURCE_EXHAUSTED, while a ServiceEntry change (CDS marker) is applied at the same moment and timed
# on the STAYED sidecars that kept their connection. Reported: storm → all ready again, refusals, RSS
# steady → peak → settled (target: settled within 10 % of steady), the change's convergence on the
# stayed sidecars (target: ≤ 1 s).
#
# Environment (besides scripts/bench/common.sh's): PROXIES=10000 STAYED=500 RAMP=500 RUNS=1, and
# PILOT_MAX_REQUESTS_PER_SECOND (passed to meshpilot; unset: its default). One connection per stream
# on both ends: ulimit -n ≥ 2 × (PROXIES + STAYED) + slack when both run here.
RUNS="${RUNS:-1}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
MESHPILOT="${MESHPILOT:-$TARGET/release/meshpilot}"
XDS_LOAD="${XDS_LOAD:-$TARGET/release/xds-load}"
source "$ROOT/scripts/bench/common.sh"
PROXIES="${PROXIES:-10000}"
STAYED="${STAYED:-500}"
TOTAL=$((PROXIES + STAYED))
setup "storm-${PROXIES}"
echo "PILOT_MAX_REQUESTS_PER_SECOND=${PILOT_MAX_REQUESTS_PER_SECOND:-<default>}"
"$XDS_LOAD" gen --out "$CONFIG" --services 100 --workloads "$TOTAL" --namespaces 10 --sidecar-scope
runs --proxies "$TOTAL" --ramp "${RAMP:-500}" --storm "$PROXIES" \
  --change service-entry --changes 1 --hold "${HOLD:-5s}" --ready-timeout 300s --change-timeout 60s
