#!/usr/bin/env bash
# REST-JSON xDS (issue 45): the mesh of scale.sh (1,000 services, 2,000 sidecars, 50 namespaces,
# Sidecar scoping) served to 2,000 proxies polling CDS+LDS every INTERVAL (Envoy's api_type: REST,
# 48 KB requests: 300 node extensions), against the same 2,000 on ADS streams. One fresh meshpilot
# per run (spawned by xds-load); the control plane's CPU and RSS come from /proc.
#   POLL: warm-up (every poller's first 200 of each type), then WINDOW of steady polling (304s).
#   ADS:  all 2,000 streams ready (ramped at RAMP/s), then the same WINDOW held (no change).
# Environment: INTERVAL=1s WINDOW=30s RAMP=500 (+ common.sh).
source "$(dirname "$0")/common.sh"
setup rest-poll-2000
"$XDS_LOAD" gen --out "$CONFIG" --services 1000 --workloads 2000 --namespaces 50 --sidecar-scope
WINDOW="${WINDOW:-30s}"
for n in $(seq 1 "$RUNS"); do
  echo "-- run $n/$RUNS: REST pollers (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$XDS_LOAD" poll --config-dir "$CONFIG" --meshpilot "$MESHPILOT" --meshpilot-log "$OUT/meshpilot-poll-$n.log" \
    --proxies 2000 --interval "${INTERVAL:-1s}" --types cds,lds --duration "$WINDOW" \
    --label rest-poll --json "$OUT/poll-$n.json"
  echo "-- run $n/$RUNS: ADS streams (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$XDS_LOAD" run --config-dir "$CONFIG" --meshpilot "$MESHPILOT" --meshpilot-log "$OUT/meshpilot-ads-$n.log" \
    --proxies 2000 --ramp "${RAMP:-500}" --change none --hold "$WINDOW" \
    --label rest-poll-ads --json "$OUT/ads-$n.json"
done
