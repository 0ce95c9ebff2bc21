#!/usr/bin/env bash
# Hostile clients (issue 20, docs/RELIABILITY.md "Slow and hostile clients"): PROXIES well-behaved
# sidecars connect and settle; then HOSTILE misbehaving connections are opened (round robin: ADS
# streams that never read, garbage-request floods, HTTP/1 and half HTTP/2 prefaces on the gRPC port,
# slowloris on the debug port) and kept while CHANGES ServiceEntry changes are applied every INTERVAL.
# Reported: meshpilot's RSS before / with them / after the changes (target: < 50 MiB per 1,000), how
# meshpilot closed each kind, and the changes' convergence on the well-behaved sidecars (every change
# must reach all of them).
#
# Environment (besides scripts/bench/common.sh's): PROXIES=100 HOSTILE=1000 CHANGES=20 INTERVAL=500ms
# HOLD=40s (longer than the debug port's 30 s header read timeout), RUNS=1, HOSTILE_KINDS (comma list
# of never-read, nonce-flood, http1-on-grpc, grpc-slowloris, http-slowloris, name-flood; default the
# first five: what one kind costs), HOSTILE_NAMES (EDS names each nonce-flood / name-flood stream
# watches; default 20000, 0 for none, 100000 for a watch over the server's limit).
RUNS="${RUNS:-1}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
MESHPILOT="${MESHPILOT:-$TARGET/release/meshpilot}"
XDS_LOAD="${XDS_LOAD:-$TARGET/release/xds-load}"
source "$ROOT/scripts/bench/common.sh"
PROXIES="${PROXIES:-100}"
HOSTILE="${HOSTILE:-1000}"
setup "hostile-${HOSTILE}"
"$XDS_LOAD" gen --out "$CONFIG" --services 100 --workloads "$PROXIES" --namespaces 10 --sidecar-scope
runs --proxies "$PROXIES" --hostile "$HOSTILE" ${HOSTILE_KINDS:+--hostile-kinds "$HOSTILE_KINDS"} \
  ${HOSTILE_NAMES:+--hostile-names "$HOSTILE_NAMES"} --change service-entry --changes "${CHANGES:-20}" \
  --interval "${INTERVAL:-500ms}" --hold "${HOLD:-40s}" --ready-timeout 120s --change-timeout 60s
