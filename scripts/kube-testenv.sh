#!/usr/bin/env bash
# A real Kubernetes control plane (etcd + kube-apiserver, no kubelet or controller-manager) for meshpilot's
# Kubernetes tests, the way controller-runtime's envtest runs one (docs/design PEERS.md §5.2).
#
#   scripts/kube-testenv.sh build        build kube-apiserver, kubectl (Kubernetes v1.36.1) and etcd (the
#                                        v3.6.x that Kubernetes pins) from the Go module proxy into the
#                                        cache; a no-op when the binaries are there.
#   scripts/kube-testenv.sh start DIR    start etcd + kube-apiserver on free loopback ports with certs,
#                                        tokens and service-account keys generated in DIR; wait for /readyz;
#                                        install the Istio CRDs; write DIR/kubeconfig and DIR/env.
#                                        With --watch-pid PID, stops them and removes DIR when PID exits.
#   scripts/kube-testenv.sh stop DIR     stop both processes (pids in DIR/*.pid).
#   scripts/kube-testenv.sh stop-apiserver DIR / start-apiserver DIR
#                                        restart only the API server (etcd keeps the data), same port.
#   scripts/kube-testenv.sh bin-dir      print the directory with the binaries.
#
# Webhooks given as a Service (Istio's charts: Service istiod port 443 → 15017) are called at an address of
# the Service's EndpointSlices (--enable-aggregator-routing: kube-apiserver's buildServiceResolver then
# resolves a service to a ready endpoint, not to the ClusterIP, which nothing routes here without
# kube-proxy); a test writes the EndpointSlice as the endpointslice controller would.
#
# Tokens (static token file, RBAC authorization): DIR/admin.token is user "meshpilot-admin" in group
# system:masters; DIR/viewer.token is user "meshpilot-viewer" with no RBAC bindings (every request is
# forbidden), for tests of 403 handling.
#
# Environment: MESHPILOT_CACHE (default ~/.cache/meshpilot), KUBE_TESTENV_CRDS (CRD file; default the
# Istio corpus beside the repository), GOFLAGS/GOPROXY as usual for Go.
set -euo pipefail

K8S_VERSION=v1.36.1
STAGING_VERSION=v0.36.1
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${MESHPILOT_CACHE:-$HOME/.cache/meshpilot}/kube/$K8S_VERSION"
BIN="$CACHE/bin"
CRDS="${KUBE_TESTENV_CRDS:-$ROOT/../shared/istio-testdata/manifests/charts/base/files/crd-all.gen.yaml}"

log() { echo "kube-testenv: $*" >&2; }
die() {
  echo "kube-testenv: error: $*" >&2
  exit 1
}

# ---------------------------------------------------------------------------------------------- build

build() {
  if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kubectl" ] && [ -x "$BIN/etcd" ]; then
    return 0
  fi
  command -v go >/dev/null || die "go is not installed (needed to build kube-apiserver and etcd)"
  mkdir -p "$BIN" "$CACHE/src"
  local t0=$SECONDS
  local flags=(-trimpath -ldflags=-s\ -w)

  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with ./staging/src paths,
  # which are not in the module zip: pin each one to the published v0.36.1 instead.
  local kmod
  kmod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')"
  [ -f "$kmod" ] || die "could not download k8s.io/kubernetes@$K8S_VERSION's go.mod"
  local staging
  staging="$(sed -n 's|^\s*\(k8s.io/[^ ]*\) => ./staging.*|\1|p' "$kmod")"
  [ -n "$staging" ] || die "no staging replace lines found in $kmod"
  local goversion
  goversion="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$kmod")"

  local k="$CACHE/src/kube"
  mkdir -p "$k"
  {
    echo "module meshpilot.local/kube-testenv"
    echo
    echo "go $goversion"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    for m in $staging; do echo "replace $m => $m $STAGING_VERSION"; done
  } >"$k/go.mod"
  # A blank import keeps the requirement in `go mod tidy`; the binaries are built by package path.
  cat >"$k/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
  log "resolving k8s.io/kubernetes $K8S_VERSION ($(echo "$staging" | wc -w) staging modules)"
  (cd "$k" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true)
  (cd "$k" && GOFLAGS=-mod=mod go mod download k8s.io/kubernetes)
  if [ ! -x "$BIN/kube-apiserver" ]; then
    log "building kube-apiserver (minutes on 2 cores)"
    (cd "$k" && GOFLAGS=-mod=mod go build "${flags[@]}" -o "$BIN/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
    mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"
  fi
  if [ ! -x "$BIN/kubectl" ]; then
    log "building kubectl"
    (cd "$k" && GOFLAGS=-mod=mod go build "${flags[@]}" -o "$BIN/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl)
    mv "$BIN/kubectl.tmp" "$BIN/kubectl"
  fi

  if [ ! -x "$BIN/etcd" ]; then
    # The etcd server version Kubernetes itself pins.
    local etcdv
    etcdv="$(sed -n 's|^\s*go.etcd.io/etcd/server/v3 \(v[^ ]*\).*|\1|p' "$kmod")"
    [ -n "$etcdv" ] || die "no go.etcd.io/etcd/server/v3 version in $kmod"
    local e="$CACHE/src/etcd"
    mkdir -p "$e"
    cat >"$e/go.mod" <<EOF
module meshpilot.local/etcd

go $goversion

require go.etcd.io/etcd/server/v3 $etcdv
EOF
    cat >"$e/main.go" <<'EOF'
// Command etcd runs the etcd server (go.etcd.io/etcd/server/v3/etcdmain), built for meshpilot's tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
    log "building etcd $etcdv"
    (cd "$e" && GOFLAGS=-mod=mod go mod tidy && GOFLAGS=-mod=mod go build "${flags[@]}" -o "$BIN/etcd.tmp" .)
    mv "$BIN/etcd.tmp" "$BIN/etcd"
  fi
  log "built in $((SECONDS - t0)) s: $(cd "$BIN" && ls | tr '\n' ' ')"
}


# ---------------------------------------------------------------------------------------------- start

# N distinct free TCP ports on 127.0.0.1 (bound and released together, so they differ).
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# Certificates (CA, API server serving cert for 127.0.0.1/localhost), service-account keys, tokens.
gen_certs() {
  local d="$1/pki"
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=meshpilot-testenv-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$d/apiserver.key" -out "$d/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' \
    >"$d/apiserver.ext"
  openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 3650 \
    -extfile "$d/apiserver.ext" -out "$d/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  openssl rand -hex 16 >"$1/admin.token"
  openssl rand -hex 16 >"$1/viewer.token"
  # token,user,uid,"groups"
  {
    echo "$(cat "$1/admin.token"),meshpilot-admin,meshpilot-admin,\"system:masters\""
    echo "$(cat "$1/viewer.token"),meshpilot-viewer,meshpilot-viewer"
  } >"$d/tokens.csv"
}

kubeconfig_for() { # DIR USER TOKEN
  local ca
  ca="$(base64 -w0 <"$1/pki/ca.crt")"
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: https://127.0.0.1:$(cat "$1/apiserver.port")
    certificate-authority-data: $ca
users:
- name: $2
  user:
    token: $3
contexts:
- name: testenv
  context:
    cluster: testenv
    user: $2
    namespace: default
current-context: testenv
EOF
}

# Starts a process in its own session, output to DIR/NAME.log, pid to DIR/NAME.pid.
launch() { # DIR NAME CMD...
  local dir="$1" name="$2"
  shift 2
  setsid "$@" >"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Polls a command every 0.1 s until it succeeds, for at most LIMIT seconds, while the process in PIDFILE
# stays alive. On failure prints the tail of LOG and dies naming WHAT and why (exited / timed out).
poll_until() { # WHAT LIMIT PIDFILE LOG CMD...
  local what="$1" limit="$2" pidfile="$3" logfile="$4" i
  shift 4
  for i in $(seq 1 $((limit * 10))); do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    if ! alive "$pidfile"; then
      tail -n 30 "$logfile" >&2 || true
      die "$what: the process exited (log: $logfile)"
    fi
    sleep 0.1
  done
  tail -n 30 "$logfile" >&2 || true
  die "$what: not ready after $limit s (log: $logfile)"
}

# etcd's /health says {"health":"true"}.
etcd_healthy() { # PORT
  python3 -c '
import json, sys, urllib.request
with urllib.request.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=2) as r:
    sys.exit(0 if json.load(r).get("health") == "true" else 1)
' "$1"
}

wait_ready() { # DIR
  local dir="$1"
  poll_until "kube-apiserver /readyz" 60 "$dir/apiserver.pid" "$dir/apiserver.log" \
    "$BIN/kubectl" --kubeconfig "$dir/kubeconfig" get --raw /readyz
}

# Prints the CRD names listed in DIR/crds.names whose condition Established is not True (one a line).
# A CRD just created has no status.conditions yet: that is "not established yet", never an error.
crds_not_established() { # DIR
  local dir="$1" established name
  established="$("$BIN/kubectl" --kubeconfig "$dir/kubeconfig" get crd -o \
    'jsonpath={range .items[*]}{.metadata.name}{"="}{.status.conditions[?(@.type=="Established")].status}{"\n"}{end}')" ||
    return 1
  while read -r name; do
    [ -n "$name" ] || continue
    grep -qxF "$name=True" <<<"$established" || echo "$name"
  done <"$dir/crds.names"
}

# Waits (≤ 60 s) until every CRD in DIR/crds.names is Established. `kubectl wait --for condition=...`
# is not used: it fails, instead of waiting, on a CRD whose status.conditions is still absent.
wait_crds_established() { # DIR
  local dir="$1" i pending=""
  for i in $(seq 1 600); do
    if pending="$(crds_not_established "$dir")"; then
      [ -z "$pending" ] && return 0
    else
      pending="(the CRD list could not be read)"
    fi
    alive "$dir/apiserver.pid" || {
      tail -n 30 "$dir/apiserver.log" >&2 || true
      die "kube-apiserver exited while waiting for the CRDs to be established (log: $dir/apiserver.log)"
    }
    sleep 0.1
  done
  die "CRDs not established after 60 s: $(echo $pending | tr '\n' ' ')"
}

start_apiserver() { # DIR
  local dir="$1"
  launch "$dir" apiserver "$dir/apiserver.sh"
  wait_ready "$dir"
}

# Stops what a failed `start` started (called from its EXIT trap; the directory keeps the logs).
start_failed() { # DIR
  local rc=$?
  [ "$rc" -eq 0 ] && return 0
  log "start failed (exit $rc): stopping what it started in $1"
  stop "$1"
  exit "$rc"
}

start() { # DIR [--watch-pid PID]
  local dir="$1"
  shift
  local watch_pid=""
  while [ $# -gt 0 ]; do
    case "$1" in
    --watch-pid) watch_pid="$2"; shift 2 ;;
    *) die "unknown option $1" ;;
    esac
  done
  build
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  alive "$dir/etcd.pid" && die "a test environment is already running in $dir"
  # From here on every exit but the successful one stops what was started.
  # shellcheck disable=SC2064
  trap "start_failed '$dir'" EXIT
  if [ -n "$watch_pid" ]; then
    # Stops the environment and removes DIR when the process that started it is gone (a test binary that
    # exits or dies), also while this start is still running; ends by itself once DIR is removed.
    setsid sh -c "while kill -0 $watch_pid 2>/dev/null && [ -d '$dir' ]; do sleep 1; done; '$ROOT/scripts/kube-testenv.sh' stop '$dir'; rm -rf '$dir'" \
      >/dev/null 2>&1 </dev/null &
  fi
  local t0
  t0=$(date +%s%N)
  gen_certs "$dir"
  local ports etcd_port peer_port api_port
  ports="$(free_ports 3)"
  read -r etcd_port peer_port api_port <<<"$ports"
  echo "$api_port" >"$dir/apiserver.port"
  echo "$etcd_port" >"$dir/etcd.port"

  launch "$dir" etcd "$BIN/etcd" --name testenv --data-dir "$dir/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "testenv=http://127.0.0.1:$peer_port" --unsafe-no-fsync --log-level warn
  poll_until "etcd /health" 30 "$dir/etcd.pid" "$dir/etcd.log" etcd_healthy "$etcd_port"

  # The launcher is kept so that `start-apiserver` restarts it with the same port and flags.
  cat >"$dir/apiserver.sh" <<EOF
#!/bin/sh
exec "$BIN/kube-apiserver" \\
  --etcd-servers=http://127.0.0.1:$etcd_port \\
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=$api_port \\
  --cert-dir="$dir/pki" --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \\
  --client-ca-file="$dir/pki/ca.crt" \\
  --token-auth-file="$dir/pki/tokens.csv" --authorization-mode=RBAC \\
  --service-account-issuer=https://127.0.0.1:$api_port/ \\
  --service-account-key-file="$dir/pki/sa.pub" --service-account-signing-key-file="$dir/pki/sa.key" \\
  --service-cluster-ip-range=10.0.0.0/16 --allow-privileged=true \\
  --disable-admission-plugins=ServiceAccount \\
  --enable-aggregator-routing=true \\
  --v=1
EOF
  chmod +x "$dir/apiserver.sh"
  kubeconfig_for "$dir" meshpilot-admin "$(cat "$dir/admin.token")" >"$dir/kubeconfig"
  kubeconfig_for "$dir" meshpilot-viewer "$(cat "$dir/viewer.token")" >"$dir/viewer.kubeconfig"
  start_apiserver "$dir"
  local t1
  t1=$(date +%s%N)

  if [ -n "$CRDS" ] && [ "$CRDS" != none ]; then
    [ -f "$CRDS" ] || die "CRD file $CRDS not found"
    # `-o name` lists what was applied: customresourcedefinition.apiextensions.k8s.io/NAME.
    "$BIN/kubectl" --kubeconfig "$dir/kubeconfig" apply --server-side -f "$CRDS" -o name |
      sed -n 's|^customresourcedefinition[^/]*/||p' >"$dir/crds.names"
    [ -s "$dir/crds.names" ] || die "no CustomResourceDefinition applied from $CRDS"
    wait_crds_established "$dir"
  fi
  local t2
  t2=$(date +%s%N)
  {
    echo "KUBECONFIG=$dir/kubeconfig"
    echo "KUBE_TESTENV_SERVER=https://127.0.0.1:$api_port"
    echo "KUBE_TESTENV_BIN=$BIN"
  } >"$dir/env"
  trap - EXIT
  log "ready in $(((t2 - t0) / 1000000)) ms (apiserver $(((t1 - t0) / 1000000)) ms, CRDs $(((t2 - t1) / 1000000)) ms): $dir/kubeconfig"
}

stop_pid() { # PIDFILE
  local f="$1" pid i
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop() { # DIR
  [ -d "$1" ] || return 0
  stop_pid "$1/apiserver.pid"
  stop_pid "$1/etcd.pid"
}

case "${1:-}" in
build) build ;;
start) [ $# -ge 2 ] || die "usage: $0 start DIR [--watch-pid PID]"; shift; start "$@" ;;
stop) [ $# -ge 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
stop-apiserver) [ $# -ge 2 ] || die "usage: $0 stop-apiserver DIR"; stop_pid "$2/apiserver.pid" ;;
start-apiserver) [ $# -ge 2 ] || die "usage: $0 start-apiserver DIR"; start_apiserver "$(cd "$2" && pwd)" ;;
bin-dir) echo "$BIN" ;;
*)
  die "usage: $0 build | start DIR | stop DIR | stop-apiserver DIR | start-apiserver DIR | bin-dir"
  ;;
esac
