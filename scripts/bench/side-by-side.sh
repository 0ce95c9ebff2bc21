#!/usr/bin/env bash
# meshpilot and the real istiod (pilot-discovery, cached by scripts/istio-peer.sh) on the same config in one
# run: the scale scenario (scale.sh: WorkloadEntry endpoint changes, EDS marker, every sidecar affected)
# and the VirtualService-change scenario (vs-change.sh: RDS marker, only ns-0's 40 sidecars affected) on
# 1,000 services / 2,000 workloads / 50 namespaces with Sidecar scoping. For each scenario and run, xds-load
# runs against a fresh istiod (--configDir on a fresh copy of the generated config, its PID sampled for
# RSS/CPU, plaintext xDS) and then a fresh meshpilot (spawned by xds-load on another fresh copy); the
# summary is one table per scenario: figure | istiod | meshpilot | ratio (istiod/meshpilot), medians of
# the runs (scripts/bench/summary.py). istiod needs a Kubernetes API server even with --configDir: one
# private kube-testenv (etcd + kube-apiserver) is started for the whole run and stopped on exit.
#
# Environment (besides common.sh's RUNS, OUT, MESHPILOT, XDS_LOAD, BUILD, PROTOCOL):
#   RUNS=3            runs per scenario and control plane (alternating istiod, meshpilot)
#   PROXIES=2000      sidecar streams (the first PROXIES workloads)
#   RAMP=500          streams opened per second
#   CHANGES=5         marker changes per run
#   PROTOCOL=sotw     sotw | delta (both control planes)
#   SCENARIOS="scale vs-change"
#   ISTIOD_BIN=BIN    pilot-discovery (default the one scripts/istio-peer.sh caches)
#   ISTIOD_PORT_BASE=25000   istiod's ports (plaintext xDS on BASE+10; see scripts/peer/run-istiod.sh)
#   PILOT_MAX_REQUESTS_PER_SECOND=10000   istiod's xDS connection admission (default 25/s there), lifted
#                     so that the ramp is the same for both; other PILOT_* variables pass through to istiod.
source "$(dirname "$0")/common.sh"
PROXIES="${PROXIES:-2000}"
RAMP="${RAMP:-500}"
CHANGES="${CHANGES:-5}"
SCENARIOS="${SCENARIOS:-scale vs-change}"
istiod_env

setup side-by-side
KUBE="$OUT/kube"
ISTIOD_DIR="$OUT/istiod"
cleanup() {
  "$ROOT/scripts/peer/run-istiod.sh" stop "$ISTIOD_DIR" || true
  "$ROOT/scripts/kube-testenv.sh" stop "$KUBE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$XDS_LOAD" gen --out "$OUT/config.orig" --services 1000 --workloads 2000 --namespaces 50 --sidecar-scope >/dev/null
istiod_kube

# fresh_config: the control plane's config directory, reset to the generated config.
fresh_config() {
  rm -rf "$CONFIG"
  cp -a "$OUT/config.orig" "$CONFIG"
}

# scenario_args NAME: xds-load's load and change arguments of a scenario (as scale.sh / vs-change.sh).
scenario_args() {
  case "$1" in
  scale) echo "--proxies $PROXIES --ramp $RAMP --change workload-entry --changes $CHANGES --hold 3s" ;;
  vs-change) echo "--proxies $PROXIES --ramp $RAMP --change virtual-service --changes $CHANGES" ;;
  *) echo "side-by-side: unknown scenario $1" >&2; return 1 ;;
  esac
}

# run_istiod SCENARIO N ARGS...: one run against a fresh istiod.
run_istiod() {
  local scenario="$1" n="$2" dir="$OUT/$1/istiod"
  shift 2
  fresh_config
  rm -rf "$ISTIOD_DIR"
  ISTIOD_ARGS="--configDir $CONFIG" "$ROOT/scripts/peer/run-istiod.sh" start "$ISTIOD_DIR" "$KUBE/kubeconfig" \
    "$ISTIOD_PORT_BASE" 2>>"$dir/istiod-start.log"
  local pid addr
  pid="$(cat "$ISTIOD_DIR/istiod.pid")"
  addr="$(sed -n 's/^XDS_ADDR=//p' "$ISTIOD_DIR/env")"
  "$XDS_LOAD" run --config-dir "$CONFIG" --address "http://$addr" --pid "$pid" \
    --protocol "$PROTOCOL" --label "$scenario istiod" --json "$dir/run-$n.json" "$@"
  "$ROOT/scripts/peer/run-istiod.sh" stop "$ISTIOD_DIR"
  cp "$ISTIOD_DIR/istiod.log" "$dir/istiod-$n.log"
}

# run_meshpilot SCENARIO N ARGS...: one run against a fresh meshpilot (spawned by xds-load).
run_meshpilot() {
  local scenario="$1" n="$2" dir="$OUT/$1/meshpilot"
  shift 2
  fresh_config
  "$XDS_LOAD" run --config-dir "$CONFIG" --meshpilot "$MESHPILOT" \
    --meshpilot-log "$dir/meshpilot-$n.log" --meshpilot-arg=--log-format=json \
    --protocol "$PROTOCOL" --label "$scenario meshpilot" --json "$dir/run-$n.json" "$@"
}

for scenario in $SCENARIOS; do
  read -r -a args <<<"$(scenario_args "$scenario")"
  mkdir -p "$OUT/$scenario/istiod" "$OUT/$scenario/meshpilot"
  for n in $(seq 1 "$RUNS"); do
    echo "-- $scenario run $n/$RUNS: istiod"
    run_istiod "$scenario" "$n" "${args[@]}"
    echo "-- $scenario run $n/$RUNS: meshpilot"
    run_meshpilot "$scenario" "$n" "${args[@]}"
  done
done

echo
echo "machine: $(nproc) CPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg); protocol $PROTOCOL, $PROXIES proxies at $RAMP/s, $CHANGES changes"
for scenario in $SCENARIOS; do
  echo
  echo "### $scenario"
  python3 "$ROOT/scripts/bench/summary.py" --compare istiod "$OUT/$scenario/istiod" meshpilot "$OUT/$scenario/meshpilot"
done
