#!/usr/bin/env bash
# Real istiod (pilot-discovery, built by scripts/istio-peer.sh) on loopback against a Kubernetes API
# server (scripts/kube-testenv.sh), with its self-signed CA and secure xDS port, as the reference peer for
# pilot-agent tests (docs/PILOT-AGENT.md).
#
#   scripts/peer/run-istiod.sh start DIR KUBECONFIG PORT_BASE
#       Creates namespace istio-system if missing and starts istiod with plaintext xDS on
#       127.0.0.1:BASE+10, TLS xDS + CA on 127.0.0.1:BASE+12, HTTP debug on 127.0.0.1:BASE+80 and
#       monitoring on 127.0.0.1:BASE+14, ControlZ on BASE+76 (Istio's 15010/15012/8080/15014/9876), webhook
#       HTTPS off. Waits for /ready, then writes istiod's self-signed root to DIR/root-cert.pem (from ConfigMap
#       istio-ca-root-cert, which istiod publishes in every namespace). DIR/istiod.log, DIR/env.
#       Extra istiod environment (PILOT_*, ...) passes through; ISTIOD_ARGS adds flags; ISTIOD_BIN names
#       another pilot-discovery binary (default the cached one). DIR/istiod.pid is pilot-discovery's PID.
#       For sidecars with upstream Envoy set PILOT_ENABLE_METADATA_EXCHANGE=false and PILOT_ENABLE_ALPN_FILTER=false
#       (istiod's clusters and HTTP listeners otherwise name istio-proxy-only filters that Envoy NACKs).
#   scripts/peer/run-istiod.sh stop DIR
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"

log() { echo "run-istiod: $*" >&2; }
die() {
  echo "run-istiod: error: $*" >&2
  exit 1
}

start() { # DIR KUBECONFIG PORT_BASE
  [ $# -eq 3 ] || die "usage: $0 start DIR KUBECONFIG PORT_BASE"
  local dir="$1" kubeconfig="$2" base="$3"
  local bin kubectl discovery
  bin="$("$ROOT/scripts/istio-peer.sh" bin-dir)"
  discovery="${ISTIOD_BIN:-$bin/pilot-discovery}"
  kubectl="$("$ROOT/scripts/kube-testenv.sh" bin-dir)/kubectl"
  [ -x "$discovery" ] || die "no $discovery (run scripts/istio-peer.sh build)"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  kubeconfig="$(cd "$(dirname "$kubeconfig")" && pwd)/$(basename "$kubeconfig")"
  "$kubectl" --kubeconfig "$kubeconfig" get namespace istio-system >/dev/null 2>&1 ||
    "$kubectl" --kubeconfig "$kubeconfig" create namespace istio-system >/dev/null
  [ -f "$dir/mesh.yaml" ] || printf 'trustDomain: cluster.local\n' >"$dir/mesh.yaml"
  local http=$((base + 80))
  cat >"$dir/env" <<ENV
XDS_ADDR=127.0.0.1:$((base + 10))
SECURE_XDS_ADDR=127.0.0.1:$((base + 12))
HTTP_ADDR=127.0.0.1:$http
MONITORING_ADDR=127.0.0.1:$((base + 14))
ENV
  (
    cd "$dir"
    export POD_NAMESPACE=istio-system POD_NAME="${POD_NAME:-istiod-0}"
    # shellcheck disable=SC2086
    exec setsid "$discovery" discovery --kubeconfig "$kubeconfig" --meshConfig "$dir/mesh.yaml" \
      --grpcAddr "127.0.0.1:$((base + 10))" --secureGRPCAddr "127.0.0.1:$((base + 12))" \
      --httpAddr "127.0.0.1:$http" --monitoringAddr "127.0.0.1:$((base + 14))" --httpsAddr "" \
      --ctrlz_port $((base + 76)) ${ISTIOD_ARGS:-} >"$dir/istiod.log" 2>&1 </dev/null
  ) &
  echo $! >"$dir/istiod.pid"
  local ok=""
  for _ in $(seq 1 240); do
    kill -0 "$(cat "$dir/istiod.pid")" 2>/dev/null || die "istiod exited; see $dir/istiod.log"
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http/ready" || true)" = 200 ]; then
      ok=1
      break
    fi
    sleep 0.5
  done
  [ -n "$ok" ] || die "istiod not ready after 120 s; see $dir/istiod.log"
  for _ in $(seq 1 120); do
    if "$kubectl" --kubeconfig "$kubeconfig" -n istio-system get configmap istio-ca-root-cert \
      -o jsonpath='{.data.root-cert\.pem}' >"$dir/root-cert.pem" 2>/dev/null && [ -s "$dir/root-cert.pem" ]; then
      log "ready: secure xDS 127.0.0.1:$((base + 12)), http 127.0.0.1:$http, root $dir/root-cert.pem"
      return 0
    fi
    sleep 0.5
  done
  die "no ConfigMap istio-ca-root-cert in istio-system after 60 s; see $dir/istiod.log"
}

stop() { # DIR
  local f="$1/istiod.pid"
  [ -f "$f" ] || return 0
  local pid
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 200); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) [ $# -ge 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 start DIR KUBECONFIG PORT_BASE | stop DIR" ;;
esac
