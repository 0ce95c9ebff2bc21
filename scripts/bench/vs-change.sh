#!/usr/bin/env bash
# A VirtualService change on the 1,000 services / 2,000 sidecars mesh: the VirtualService of svc-0
# (namespace ns-0) gets a new route prefix CHANGES times; with namespace isolation only ns-0's
# sidecars (40) import it, so only they are expected to converge (RDS marker). The others must not
# be disturbed (responses/stream/change shows push amplification).
# Target (issue 6): converged on all affected proxies p99 ≤ 1 s.
source "$(dirname "$0")/common.sh"
setup vs-change
"$XDS_LOAD" gen --out "$CONFIG" --services 1000 --workloads 2000 --namespaces 50 --sidecar-scope
runs --proxies 2000 --ramp "${RAMP:-500}" --change virtual-service --changes "${CHANGES:-5}"
