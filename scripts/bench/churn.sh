#!/usr/bin/env bash
# Endpoint churn: one WorkloadEntry moves every 100 ms (CHANGES times) while 2,000 sidecars of the
# 1,000-service mesh are connected; every sidecar watches the moving endpoint's service. Changes do
# not wait for each other; a sidecar that sees a later address has converged on the earlier ones.
source "$(dirname "$0")/common.sh"
setup churn
"$XDS_LOAD" gen --out "$CONFIG" --services 1000 --workloads 2000 --namespaces 50 --sidecar-scope
runs --proxies 2000 --ramp "${RAMP:-500}" --change workload-entry --changes "${CHANGES:-100}" \
  --interval "${INTERVAL:-100ms}" --change-timeout 30s
