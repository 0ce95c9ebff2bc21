#!/usr/bin/env bash
# Memory of three control-plane replicas with 2,000 sidecars spread over them (issue 39), and of one
# replica holding all 2,000, in the same run. The workload is side-by-side.sh's: 1,000 services / 2,000
# workloads / 50 namespaces with Sidecar scoping (xds-load gen), read by every replica from the same
# config directory (the file config source; no cluster).
#
#   three:  REPLICAS meshpilot processes (release build) on distinct ports; one xds-load process per
#           replica, all started together, with disjoint workload ranges (--first-index: sidecars
#           0-666 → replica 1, 667-1333 → replica 2, 1334-1999 → replica 3) at RAMP/REPLICAS streams/s
#           each, so the whole ramp is RAMP/s as in side-by-side.sh.
#   one:    one meshpilot process, one xds-load process with all PROXIES sidecars at RAMP/s.
#
# Each xds-load samples its replica's /proc (--pid): VmRSS before the first stream, VmRSS as soon as every
# one of its streams has its full config (xds-load's "ready": CDS, EDS, LDS, RDS all ACKed), VmHWM (peak)
# and CPU (utime + stime). The streams then stay connected for HOLD seconds, so all PROXIES streams are
# connected at once as long as the replicas' "all ready after" times differ by less than HOLD (the summary
# warns otherwise). The summary is one table: per replica streams / RSS / peak / CPU, the total
# over the replicas, and the single replica.
#
# One xds-load process per replica rather than one process dialling several addresses: --first-index
# exists to split a layout over several xds-load processes, each process samples exactly one control
# plane (its report has one), and real sidecars of different replicas are independent too.
#
# ISTIOD=1 does the same for the real istiod (pilot-discovery cached by scripts/istio-peer.sh, started by
# scripts/peer/run-istiod.sh with --configDir on the same config and port bases ISTIOD_PORT_BASE,
# +200, +400, against one private kube-testenv, as side-by-side.sh does for one), for a side-by-side
# table.
#
# Environment (besides common.sh's OUT, MESHPILOT, XDS_LOAD, BUILD, PROTOCOL; RUNS is not used: one run):
#   PROXIES=2000      sidecar streams in total
#   REPLICAS=3        replicas sharing them
#   RAMP=500          streams opened per second, in total
#   HOLD=10           seconds the streams stay connected after all of one xds-load are ready
#   PORT_BASE=26000   meshpilot replica k (0-based) uses grpc BASE+200k+10, http +80, monitoring +14
#   ISTIOD=0          1: istiod too
#   ISTIOD_PORT_BASE=25000, PILOT_MAX_REQUESTS_PER_SECOND=10000 (as side-by-side.sh)
source "$(dirname "$0")/common.sh"
PROXIES="${PROXIES:-2000}"
REPLICAS="${REPLICAS:-3}"
RAMP="${RAMP:-500}"
HOLD="${HOLD:-10}"
PORT_BASE="${PORT_BASE:-26000}"
ISTIOD="${ISTIOD:-0}"
istiod_env
[[ "$REPLICAS" -ge 1 && "$PROXIES" -ge "$REPLICAS" ]] || {
  echo "replicas-memory: need 1 ≤ REPLICAS ≤ PROXIES (got REPLICAS=$REPLICAS PROXIES=$PROXIES)" >&2
  exit 2
}

RUNS=1
setup replicas-memory
KUBE="$OUT/kube"
MESHPILOT_PIDS=()
ISTIOD_DIRS=()
cleanup() {
  for p in "${MESHPILOT_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for d in "${ISTIOD_DIRS[@]}"; do "$ROOT/scripts/peer/run-istiod.sh" stop "$d" >/dev/null 2>&1 || true; done
  if [[ "$ISTIOD" == 1 ]]; then "$ROOT/scripts/kube-testenv.sh" stop "$KUBE" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$XDS_LOAD" gen --out "$CONFIG" --services 1000 --workloads "$PROXIES" --namespaces 50 --sidecar-scope >/dev/null

# start_meshpilot DIR K: replica K (0-based) in the background; sets ADDR and PID once /ready is 200.
start_meshpilot() {
  local dir="$1" k="$2" base=$((PORT_BASE + 200 * $2))
  local http="127.0.0.1:$((base + 80))"
  ADDR="127.0.0.1:$((base + 10))"
  # No cluster: KUBECONFIG unset, secure ports off (no CA place), config from the directory only.
  env -u KUBECONFIG "$MESHPILOT" discovery --config-dir "$CONFIG" --grpc-addr "$ADDR" --http-addr "$http" \
    --monitoring-addr "127.0.0.1:$((base + 14))" --secureGRPCAddr= --httpsAddr= --log-format=json \
    >"$dir/meshpilot-$k.log" 2>&1 </dev/null &
  PID=$!
  MESHPILOT_PIDS+=("$PID")
  for _ in $(seq 1 600); do
    kill -0 "$PID" 2>/dev/null || { echo "meshpilot replica $k exited; see $dir/meshpilot-$k.log" >&2; exit 1; }
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$http/ready" || true)" == 200 ]] && return 0
    sleep 0.2
  done
  echo "meshpilot replica $k not ready after 120 s; see $dir/meshpilot-$k.log" >&2
  exit 1
}

# start_istiod DIR K: istiod replica K against the private API server; sets ADDR and PID.
start_istiod() {
  local dir="$1/istiod-$2"
  rm -rf "$dir"
  ISTIOD_DIRS+=("$dir")
  POD_NAME="istiod-$2" ISTIOD_ARGS="--configDir $CONFIG" "$ROOT/scripts/peer/run-istiod.sh" start "$dir" \
    "$KUBE/kubeconfig" $((ISTIOD_PORT_BASE + 200 * $2)) 2>>"$1/istiod-start.log"
  PID="$(cat "$dir/istiod.pid")"
  ADDR="$(sed -n 's/^XDS_ADDR=//p' "$dir/env")"
}

# stop_all: every control plane started so far.
stop_all() {
  for p in "${MESHPILOT_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${MESHPILOT_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for d in "${ISTIOD_DIRS[@]}"; do "$ROOT/scripts/peer/run-istiod.sh" stop "$d" >/dev/null 2>&1 || true; done
  MESHPILOT_PIDS=()
  ISTIOD_DIRS=()
}

# phase CP N: N replicas of control plane CP (meshpilot | istiod), PROXIES sidecars spread over them
# evenly, one xds-load per replica, all at once; JSON summaries in $OUT/CP-N/replica-K.json.
phase() {
  local cp="$1" n="$2" dir="$OUT/$1-$2"
  mkdir -p "$dir"
  echo "-- $cp: $n replica(s), $PROXIES sidecars"
  local addrs=() pids=()
  for k in $(seq 0 $((n - 1))); do
    "start_$cp" "$dir" "$k"
    addrs+=("$ADDR")
    pids+=("$PID")
  done
  local loads=() first=0 ramp
  ramp="$(python3 -c "print($RAMP / $n)")"
  for k in $(seq 0 $((n - 1))); do
    # Replica k gets sidecars [first, first + count): the remainder goes to the first replicas.
    local count=$((PROXIES / n + (k < PROXIES % n ? 1 : 0)))
    "$XDS_LOAD" run --config-dir "$CONFIG" --address "http://${addrs[$k]}" --pid "${pids[$k]}" \
      --proxies "$count" --first-index "$first" --ramp "$ramp" --hold "${HOLD}s" --protocol "$PROTOCOL" \
      --label "$cp $n replicas: replica $((k + 1))" --json "$dir/replica-$((k + 1)).json" \
      >"$dir/xds-load-$((k + 1)).txt" 2>&1 &
    loads+=($!)
    first=$((first + count))
  done
  local failed=0
  for k in "${!loads[@]}"; do
    if ! wait "${loads[$k]}"; then
      echo "xds-load for $cp replica $((k + 1)) failed:" >&2
      cat "$dir/xds-load-$((k + 1)).txt" >&2
      failed=1
    fi
  done
  stop_all
  [[ "$failed" == 0 ]] || exit 1
}

if [[ "$ISTIOD" == 1 ]]; then istiod_kube; fi
CPS=(meshpilot)
if [[ "$ISTIOD" == 1 ]]; then CPS+=(istiod); fi
for cp in "${CPS[@]}"; do
  phase "$cp" "$REPLICAS"
  phase "$cp" 1
done

echo
echo "machine: $(nproc) CPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load $(cut -d' ' -f1-3 /proc/loadavg); protocol $PROTOCOL, $PROXIES sidecars at $RAMP/s in total, hold ${HOLD} s"
python3 - "$OUT" "$REPLICAS" "$HOLD" "${CPS[@]}" <<'PY'
import json, sys
out, n, hold, cps = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
mib = lambda b: b / 1048576
print("| control plane | replica | streams ready | all ready after | RSS idle | RSS all ready | peak (VmHWM) | CPU connecting | CPU total |")
print("|---|---|---|---|---|---|---|---|---|")
def row(cp, name, runs):
    s = lambda f: sum(f(r) for r in runs)
    c = lambda r: r["control_plane"]
    # The xds-load processes of a phase start together: the slowest one's time is the phase's.
    ready_s = max(r["all_ready_ms"] or float("nan") for r in runs) / 1000
    print(f"| {cp} | {name} | {s(lambda r: r['ready']):,} of {s(lambda r: r['streams']):,} | {ready_s:.1f} s "
          f"| {mib(s(lambda r: c(r)['baseline_rss'])):.0f} MiB | {mib(s(lambda r: c(r)['connected_rss'])):.0f} MiB "
          f"| {mib(s(lambda r: c(r)['peak_rss'])):.0f} MiB | {s(lambda r: c(r)['cpu_seconds_connect']):.2f} s "
          f"| {s(lambda r: c(r)['cpu_seconds_total']):.2f} s |")
for cp in cps:
    runs = [json.load(open(f"{out}/{cp}-{n}/replica-{k}.json")) for k in range(1, n + 1)]
    for k, r in enumerate(runs, 1):
        row(cp, f"{k} of {n}", [r])
    row(cp, f"**total of {n}**", runs)
    row(cp, "**one alone**", [json.load(open(f"{out}/{cp}-1/replica-1.json"))])
    ready = [r["all_ready_ms"] / 1000 for r in runs]
    if max(ready) - min(ready) >= hold:
        print(f"WARNING: {cp}'s replicas were ready {min(ready):.1f}-{max(ready):.1f} s after their start, "
              f"further apart than HOLD={hold:g} s: not all streams were connected at once")
PY
