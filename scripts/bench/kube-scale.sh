#!/usr/bin/env bash
# Kubernetes-scale churn, meshpilot and the real istiod (pilot-discovery, cached by scripts/istio-peer.sh)
# side by side (issue 44): both read the same private kube-testenv API server (etcd + kube-apiserver, no
# kubelet or controllers) holding PODS pods over SERVICES Services with their EndpointSlices, written by
# scripts/bench/kube-scale.py (status.podIP and Ready through the status subresource, slices as the
# EndpointSlice controller writes them); RESTART of those pods belong to DEPLOYMENTS deployments.
#
# For each run and control plane (istiod first, then meshpilot; each on a freshly populated API server):
#   1. the control plane starts; "ready after start" is the time from its start until /ready answers 200
#      (all informers synced; polled every 20 ms for meshpilot, every 0.5 s by scripts/peer/run-istiod.sh
#      for istiod, so istiod's is an upper bound, 0.5 s coarse);
#   2. xds-load opens PROXIES sidecar streams (the layout's pods: node identities of real pods) at RAMP/s
#      and, once all are ready, runs a rolling restart of RESTART pods, one pod every PACE, round-robin
#      over the deployments (kube-scale.py restart, as xds-load's --change command helper): a new pod at a
#      new IP becomes ready (the change: its IP is the EDS marker every sidecar must receive), then an old
#      pod terminates and is removed, in Kubernetes' order;
#   3. xds-load reports per-change convergence (p50/p99: T0 = just before the helper writes the change,
#      converged = the sidecar received and ACKed EDS with the new IP), responses and bytes per stream and
#      change, CPU and peak RSS of the control plane's PID.
# The summary is one table: figure | istiod | meshpilot | ratio (istiod/meshpilot), medians of the runs.
#
# Not measured here (yet): stale-endpoint time (an old pod's endpoint still sent after its removal),
# API-server requests (watch vs list).
#
# Environment (besides common.sh's RUNS, OUT, MESHPILOT, XDS_LOAD, BUILD, PROTOCOL):
#   RUNS=1            runs per control plane
#   PODS=10000        pods in the API server (RESTART of them in the deployments)
#   SERVICES=500      Services (DEPLOYMENTS of them are the deployments')
#   NAMESPACES=50
#   PROXIES=PODS-RESTART  sidecar streams (the layout's pods)
#   RAMP=500          streams opened per second
#   RESTART=2000      pods restarted (a multiple of DEPLOYMENTS)
#   DEPLOYMENTS=20
#   PACE=100ms        one pod replaced every PACE (xds-load --interval)
#   ISTIOD_BIN, ISTIOD_PORT_BASE, PILOT_MAX_REQUESTS_PER_SECOND: as side-by-side.sh
RUNS="${RUNS:-1}"
source "$(dirname "$0")/common.sh"
PODS="${PODS:-10000}"
SERVICES="${SERVICES:-500}"
NAMESPACES="${NAMESPACES:-50}"
RESTART="${RESTART:-2000}"
DEPLOYMENTS="${DEPLOYMENTS:-20}"
PROXIES="${PROXIES:-$((PODS - RESTART))}"
RAMP="${RAMP:-500}"
PACE="${PACE:-100ms}"
istiod_env
# One connection per stream on both ends.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

setup kube-scale
KUBE="$OUT/kube"
ISTIOD_DIR="$OUT/istiod-run"
MESHPILOT_PID=""
cleanup() {
  "$ROOT/scripts/peer/run-istiod.sh" stop "$ISTIOD_DIR" >/dev/null 2>&1 || true
  if [[ -n "$MESHPILOT_PID" ]]; then kill "$MESHPILOT_PID" 2>/dev/null || true; fi
  "$ROOT/scripts/kube-testenv.sh" stop "$KUBE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
echo "istiod: ${ISTIOD_BIN:-$("$ROOT/scripts/istio-peer.sh" bin-dir)/pilot-discovery}, PILOT_MAX_REQUESTS_PER_SECOND=$PILOT_MAX_REQUESTS_PER_SECOND"
SCALE=(--namespaces "$NAMESPACES" --restart "$RESTART" --deployments "$DEPLOYMENTS")

# fresh_cluster: a new API server populated with the pods, Services and slices; the layout in $CONFIG.
fresh_cluster() {
  "$ROOT/scripts/kube-testenv.sh" stop "$KUBE" >/dev/null 2>&1 || true
  rm -rf "$KUBE" "$CONFIG"
  mkdir -p "$CONFIG"
  "$ROOT/scripts/kube-testenv.sh" start "$KUBE" >"$OUT/kube-testenv.log" 2>&1 ||
    { cat "$OUT/kube-testenv.log" >&2; exit 1; }
  python3 "$ROOT/scripts/bench/kube-scale.py" populate --kube "$KUBE" --pods "$PODS" --services "$SERVICES" \
    --config-dir "$CONFIG" "${SCALE[@]}"
}

# now_ms: wall clock in milliseconds.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# load NAME N ADDRESS PID: xds-load's streams and the rolling restart against one control plane; the
# time to ready (READY_MS) is added to its JSON summary as control_plane_ready_ms.
load() {
  local name="$1" n="$2" address="$3" pid="$4" dir="$OUT/$1"
  "$XDS_LOAD" run --config-dir "$CONFIG" --address "$address" --pid "$pid" --protocol "$PROTOCOL" \
    --proxies "$PROXIES" --ramp "$RAMP" --ready-timeout 600s --hold 3s \
    --change command --changes "$RESTART" --interval "$PACE" --change-timeout 120s \
    --command "python3 $ROOT/scripts/bench/kube-scale.py restart --kube $KUBE ${SCALE[*]}" \
    --label "kube-scale $name" --json "$dir/run-$n.json"
  python3 - "$dir/run-$n.json" "$READY_MS" <<'PY'
import json, sys
path, ready = sys.argv[1], int(sys.argv[2])
r = json.load(open(path))
r["control_plane_ready_ms"] = ready
json.dump(r, open(path, "w"), indent=1)
PY
}

run_istiod() {
  local n="$1" dir="$OUT/istiod" start
  rm -rf "$ISTIOD_DIR"
  start=$(now_ms)
  "$ROOT/scripts/peer/run-istiod.sh" start "$ISTIOD_DIR" "$KUBE/kubeconfig" "$ISTIOD_PORT_BASE" 2>>"$dir/istiod-start.log"
  # run-istiod.sh returns once /ready answered (polled every 0.5 s) and istiod's root ConfigMap is
  # there (published while it syncs): the time to ready is an upper bound, 0.5 s coarse.
  READY_MS=$(($(now_ms) - start))
  echo "istiod ready after start: $READY_MS ms ($PODS pods)"
  load istiod "$n" "http://$(sed -n 's/^XDS_ADDR=//p' "$ISTIOD_DIR/env")" "$(cat "$ISTIOD_DIR/istiod.pid")"
  "$ROOT/scripts/peer/run-istiod.sh" stop "$ISTIOD_DIR"
  cp "$ISTIOD_DIR/istiod.log" "$dir/istiod-$n.log"
}

run_meshpilot() {
  local n="$1" dir="$OUT/meshpilot" start grpc http mon
  read -r grpc http mon < <(python3 -c 'import socket
s=[socket.socket() for _ in range(3)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
  start=$(now_ms)
  "$MESHPILOT" discovery --config-dir "$CONFIG" --kubeconfig "$KUBE/kubeconfig" \
    --grpc-addr "127.0.0.1:$grpc" --http-addr "127.0.0.1:$http" --monitoring-addr "127.0.0.1:$mon" \
    --secureGRPCAddr= --httpsAddr= --log-format=json >"$dir/meshpilot-$n.log" 2>&1 &
  MESHPILOT_PID=$!
  until [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http/ready" || true)" == 200 ]]; do
    kill -0 "$MESHPILOT_PID" 2>/dev/null || { tail -20 "$dir/meshpilot-$n.log" >&2; exit 1; }
    sleep 0.02
  done
  READY_MS=$(($(now_ms) - start))
  echo "meshpilot ready after start: $READY_MS ms ($PODS pods)"
  load meshpilot "$n" "http://127.0.0.1:$grpc" "$MESHPILOT_PID"
  kill "$MESHPILOT_PID"
  wait "$MESHPILOT_PID" 2>/dev/null || true
  MESHPILOT_PID=""
}

mkdir -p "$OUT/istiod" "$OUT/meshpilot"
for n in $(seq 1 "$RUNS"); do
  echo "-- run $n/$RUNS: istiod"
  fresh_cluster
  run_istiod "$n"
  echo "-- run $n/$RUNS: meshpilot"
  fresh_cluster
  run_meshpilot "$n"
done

echo
echo "machine: $(nproc) CPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg); protocol $PROTOCOL, $PODS pods / $SERVICES services, $PROXIES proxies at $RAMP/s, restart of $RESTART pods in $DEPLOYMENTS deployments, one every $PACE"
python3 "$ROOT/scripts/bench/summary.py" --compare istiod "$OUT/istiod" meshpilot "$OUT/meshpilot"
