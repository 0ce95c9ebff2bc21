#!/usr/bin/env bash
# istio.io's scalability reference point: 1,000 services and 2,000 sidecars with namespace isolation
# (a Sidecar per namespace importing ./* and istio-system/*), 50 namespaces. All sidecars connect
# (ramped at RAMP/s), stay connected, then a WorkloadEntry address changes CHANGES times (endpoint-only,
# EDS marker, every sidecar affected: the marker service is in istio-system).
# Targets (issue 6): RSS ≤ 300 MB with all connected; endpoint change p99 ≤ 500 ms.
source "$(dirname "$0")/common.sh"
setup scale-1000-2000
"$XDS_LOAD" gen --out "$CONFIG" --services 1000 --workloads 2000 --namespaces 50 --sidecar-scope
runs --proxies 2000 --ramp "${RAMP:-500}" --change workload-entry --changes "${CHANGES:-5}" --hold 3s
