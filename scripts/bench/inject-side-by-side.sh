#!/usr/bin/env bash
# `/inject` side by side: real istiod (pinned, scripts/istio-peer.sh) and meshpilot (release build), both
# against one test kube-apiserver (scripts/kube-testenv.sh), both with the injector config, values and mesh
# config Istio's charts render by default (`istioctl manifest generate`), both answering the same
# AdmissionReview of one pod (Istio's curl sample, defaulted by the API server with --dry-run=server).
# scripts/bench/inject-load.py drives each webhook in turn and prints requests/s and latency percentiles;
# the peak RSS of each process after its run is printed too. Results go in BENCHMARKS.md.
#
#   scripts/bench/inject-side-by-side.sh [-n REQUESTS] [-c CONNECTIONS]
#
# MESHPILOT_BIN (default target/release/meshpilot) names the binary; build it with
# `cargo build --release -p meshpilot`.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$PWD"

n=4000
c=2
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="$2"; shift 2 ;;
    -c) c="$2"; shift 2 ;;
    *) echo "usage: $0 [-n REQUESTS] [-c CONNECTIONS]" >&2; exit 2 ;;
  esac
done
MESHPILOT_BIN="${MESHPILOT_BIN:-${CARGO_TARGET_DIR:-target}/release/meshpilot}"
[ -x "$MESHPILOT_BIN" ] || { echo "no $MESHPILOT_BIN (cargo build --release -p meshpilot)" >&2; exit 1; }
MESHPILOT_BIN="$(cd "$(dirname "$MESHPILOT_BIN")" && pwd)/$(basename "$MESHPILOT_BIN")"

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/peer/run-istiod.sh stop "$work/istiod" >/dev/null 2>&1 || true
  scripts/kube-testenv.sh stop "$work/kube" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

scripts/kube-testenv.sh build >/dev/null
scripts/istio-peer.sh build >/dev/null
scripts/kube-testenv.sh start "$work/kube" >/dev/null
kubeconfig="$work/kube/kubeconfig"
kubectl="$(scripts/kube-testenv.sh bin-dir)/kubectl --kubeconfig $kubeconfig"
$kubectl create namespace istio-system >/dev/null

# The chart's injector files and mesh config, where istiod (and meshpilot) read them.
istioctl="$(scripts/istio-peer.sh bin-dir)/istioctl"
"$istioctl" manifest generate >"$work/manifest.yaml"
python3 - "$work" <<'PY'
import json, os, subprocess, sys
work = sys.argv[1]
docs = subprocess.run(["python3", "-c", "import sys,yaml,json;[print(json.dumps(d)) for d in yaml.safe_load_all(open(sys.argv[1])) if d]", f"{work}/manifest.yaml"], capture_output=True, text=True, check=True).stdout.splitlines()
maps = {d["metadata"]["name"]: d for d in map(json.loads, docs) if d.get("kind") == "ConfigMap"}
for side in ("istiod", "meshpilot"):
    inject = f"{work}/{side}/var/lib/istio/inject"
    os.makedirs(inject, exist_ok=True)
    open(f"{inject}/config", "w").write(maps["istio-sidecar-injector"]["data"]["config"])
    open(f"{inject}/values", "w").write(maps["istio-sidecar-injector"]["data"]["values"])
    open(f"{work}/{side}/mesh.yaml", "w").write(maps["istio"]["data"]["mesh"])
PY

# Istio's curl sample pod, as the API server hands it to webhooks.
python3 - "$ROOT" "$work" <<'PY'
import json, subprocess, sys, yaml
root, work = sys.argv[1], sys.argv[2]
for doc in yaml.safe_load_all(open(f"{root}/../shared/istio-testdata/samples/curl/curl.yaml")):
    if doc and doc.get("kind") == "Deployment":
        t = doc["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(t.get("metadata", {}), name="curl-0", namespace="default"), "spec": t["spec"]}
        pod["spec"].pop("serviceAccountName", None)
        json.dump(pod, open(f"{work}/pod-raw.json", "w"))
PY
$kubectl create --dry-run=server -o json -f "$work/pod-raw.json" >"$work/pod.json"

base=$((20000 + RANDOM % 20000))
ISTIOD_ARGS="--httpsAddr 127.0.0.1:$((base + 17))" scripts/peer/run-istiod.sh start "$work/istiod" "$kubeconfig" "$base" >/dev/null
istiod_pid="$(cat "$work/istiod/istiod.pid")"
mp=$((base + 100))
(cd "$work/meshpilot" && POD_NAMESPACE=istio-system exec "$MESHPILOT_BIN" discovery --kubeconfig "$kubeconfig" \
  --meshConfig "$work/meshpilot/mesh.yaml" --grpcAddr "127.0.0.1:$((mp + 10))" --httpAddr "127.0.0.1:$((mp + 80))" \
  --monitoringAddr "127.0.0.1:$((mp + 14))" --secureGRPCAddr= --httpsAddr "127.0.0.1:$((mp + 17))" \
  >"$work/meshpilot.log" 2>&1) &
pids+=($!)
mp_pid=$!

load() { # NAME URL PID LOG
  local out up=""
  for _ in $(seq 1 120); do
    if curl -sk -o /dev/null -H 'Content-Type: application/json' --data-binary "{}" "$2"; then up=1; break; fi
    sleep 0.5
  done
  [ -n "$up" ] || { echo "$1 does not answer on $2; its log:" >&2; tail -20 "$4" >&2; exit 1; }
  out="$(python3 scripts/bench/inject-load.py --url "$2" --pod "$work/pod.json" -n "$n" -c "$c")"
  local rss
  rss="$(awk '/VmHWM/ {print $2}' "/proc/$3/status")"
  echo "$1 $out peak_rss_kib=$rss"
}
load istiod "https://127.0.0.1:$((base + 17))/inject" "$istiod_pid" "$work/istiod/istiod.log"
load meshpilot "https://127.0.0.1:$((mp + 17))/inject" "$mp_pid" "$work/meshpilot.log"
