#!/usr/bin/env bash
# Shared by the scenario scripts: release binaries (built once), output directory, repeated runs and
# medians. Sourced, not run.
#
# Environment:
#   RUNS=3          runs per scenario (the summary reports medians)
#   OUT=DIR         results (default target/bench/<scenario>); each run writes run-<n>.json and a log
#   MESHPILOT=BIN   control plane binary (default target/release/meshpilot, built if missing)
#   XDS_LOAD=BIN    load tool (default target/release/xds-load, built if missing)
#   BUILD=1         rebuild both in release first
#   PROTOCOL=sotw   sotw | delta
#   SECURE=1        connect to the secure port (--secure-grpc-addr, TLS with client certificates signed
#                   by the CA kept in $OUT/ca; see xds-load run --ca-dir) instead of the plaintext one
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUNS="${RUNS:-3}"
PROTOCOL="${PROTOCOL:-sotw}"
MESHPILOT="${MESHPILOT:-$ROOT/target/release/meshpilot}"
XDS_LOAD="${XDS_LOAD:-$ROOT/target/release/xds-load}"

build() {
  if [[ "${BUILD:-0}" == 1 || ! -x "$MESHPILOT" || ! -x "$XDS_LOAD" ]]; then
    (cd "$ROOT" && cargo build --release -p meshpilot -p xds-load)
  fi
}

# setup NAME: the output directory and a fresh config directory under it.
setup() {
  SCENARIO="$1"
  OUT="${OUT:-$ROOT/target/bench/$SCENARIO}"
  CONFIG="$OUT/config"
  rm -rf "$OUT"
  mkdir -p "$OUT"
  build
  echo "== $SCENARIO: $RUNS run(s), results in $OUT"
  echo "machine: $(nproc) CPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/{print $2}') GiB RAM, load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# runs ARGS...: xds-load run RUNS times against a fresh meshpilot each time (spawned by xds-load).
runs() {
  local secure=()
  if [[ "${SECURE:-0}" == 1 ]]; then secure=(--ca-dir "$OUT/ca"); fi
  for n in $(seq 1 "$RUNS"); do
    echo "-- run $n/$RUNS"
    "$XDS_LOAD" run --config-dir "$CONFIG" --meshpilot "$MESHPILOT" \
      --meshpilot-log "$OUT/meshpilot-$n.log" --meshpilot-arg=--log-format=json \
      --protocol "$PROTOCOL" --label "$SCENARIO" --json "$OUT/run-$n.json" \
      "${secure[@]}" "$@"
  done
  median
}

# median: medians over the runs' JSON summaries of the figures BENCHMARKS.md records (summary.py).
median() {
  python3 "$ROOT/scripts/bench/summary.py" "$OUT"
}

# istiod_env: the real istiod's settings of the side-by-side scripts: ISTIOD_PORT_BASE (default 25000),
# PILOT_MAX_REQUESTS_PER_SECOND (default 10000, istiod's 25/s lifted so that the ramp is the same for
# both control planes), ISTIOD_BIN exported when given.
istiod_env() {
  ISTIOD_PORT_BASE="${ISTIOD_PORT_BASE:-25000}"
  export PILOT_MAX_REQUESTS_PER_SECOND="${PILOT_MAX_REQUESTS_PER_SECOND:-10000}"
  if [[ -n "${ISTIOD_BIN:-}" ]]; then export ISTIOD_BIN; fi
}

# istiod_kube: names the istiod binary and starts the private kube-testenv (etcd + kube-apiserver) istiod
# needs even with --configDir, in $KUBE (the caller stops it on exit).
istiod_kube() {
  echo "istiod: ${ISTIOD_BIN:-$("$ROOT/scripts/istio-peer.sh" bin-dir)/pilot-discovery}, PILOT_MAX_REQUESTS_PER_SECOND=$PILOT_MAX_REQUESTS_PER_SECOND"
  "$ROOT/scripts/kube-testenv.sh" start "$KUBE" >"$OUT/kube-testenv.log" 2>&1 ||
    { cat "$OUT/kube-testenv.log" >&2; exit 1; }
}
