#!/usr/bin/env bash
# 10,000 simulated sidecars (100 services, 10 namespaces, namespace isolation) connect at RAMP/s and
# must all be ready with no errors; then one ServiceEntry change (CDS marker) reaches all of them.
# Target (issue 6): all 10,000 ready within 60 s with no errors.
# File descriptors: one connection per stream on both ends (ulimit -n ≥ 12,000), or set
# STREAMS_PER_CONN to multiplex.
source "$(dirname "$0")/common.sh"
setup proxies-10k
"$XDS_LOAD" gen --out "$CONFIG" --services 100 --workloads 10000 --namespaces 10 --sidecar-scope
runs --proxies 10000 --ramp "${RAMP:-500}" --streams-per-conn "${STREAMS_PER_CONN:-1}" \
  --change service-entry --changes "${CHANGES:-2}" --ready-timeout 120s --change-timeout 60s
