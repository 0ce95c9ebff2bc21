#!/usr/bin/env bash
# Golden comparison of meshpilot's mTLS config with real istiod's for the same inputs (docs/MTLS.md,
# "Compared with istiod").
#
#   scripts/peer/compare-mtls.sh [OUT_DIR]
#
# For each variant of one config directory (the objects of the secure_port test
# `mtls_between_real_sidecars_follows_peer_authentication`: ServiceEntry echo.mesh.local MESH_INTERNAL,
# WorkloadEntry with tlsMode istio, Sidecar ingress bound on the server, DestinationRule without TLS;
# plus a namespace PeerAuthentication STRICT / PERMISSIVE / DISABLE, a workload PeerAuthentication with
# portLevelMtls, a workload PeerAuthentication DISABLE, a DestinationRule ISTIO_MUTUAL with subsets),
# runs real istiod (`--configDir`, PILOT_ENABLE_METADATA_EXCHANGE=false PILOT_ENABLE_ALPN_FILTER=false)
# and then meshpilot (`discovery --config-dir --secure-grpc-addr --ca-dir`), attaches the same two real
# sidecars (pilot-agent + upstream Envoy: client 127.0.0.21, server 127.0.0.22 as workload echo-1)
# to each in turn and saves each Envoy's /config_dump?include_eds. Addresses differ from the test's
# so that both can run at once: client 127.0.0.21, server 127.0.0.22, service port 18080 (the test:
# .11, .12, 8080), app 127.0.0.1:19080 (nothing needs to listen there); the WorkloadEntry also has
# `version: v1` for subsets.  scripts/peer/mtls-golden.py then extracts the TLS-relevant parts
# into OUT_DIR/<variant>/{istiod,meshpilot}.json and the differences into OUT_DIR/<variant>/diff
# (`diff -u istiod meshpilot`), with the input as OUT_DIR/<variant>/input.yaml.  OUT_DIR defaults to
# docs/golden/mtls. Differences explained in docs/MTLS.md.
#
# Environment: WORK (scratch directory, default a new mktemp -d; raw dumps and logs stay there),
# MESHPILOT (binary; default target/debug/meshpilot of this tree, else of /work/main), VARIANTS
# (space-separated subset), KEEP=1 keeps WORK. Ports: istiod 25xxx, meshpilot 26xxx, sidecars
# 16000 / 17000 (admin), the client's outbound listener 127.0.0.1:18080. Needs scripts/istio-peer.sh
# build and scripts/kube-testenv.sh build done; starts its own kube test env and stops everything.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-$ROOT/docs/golden/mtls}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
VARIANTS="${VARIANTS:-base ns-strict ns-permissive ns-disable workload-port-level workload-disable dr-istio-mutual-subsets}"
MESHPILOT="${MESHPILOT:-}"
if [ -z "$MESHPILOT" ]; then
  for m in "$ROOT/target/debug/meshpilot" /work/main/target/debug/meshpilot; do
    [ -x "$m" ] && MESHPILOT="$m" && break
  done
fi
[ -x "$MESHPILOT" ] || { echo "compare-mtls: no meshpilot binary (set MESHPILOT)" >&2; exit 1; }
WORK_IS_TEMP=""
if [ -z "${WORK:-}" ]; then WORK="$(mktemp -d /tmp/compare-mtls.XXXXXX)"; WORK_IS_TEMP=1; fi
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
KUBECTL="$("$ROOT/scripts/kube-testenv.sh" bin-dir)/kubectl"
log() { echo "compare-mtls: $*" >&2; }

MP_PID=""
cleanup() {
  "$ROOT/scripts/run-pilot-agent.sh" stop "$WORK/run/client" || true
  "$ROOT/scripts/run-pilot-agent.sh" stop "$WORK/run/server" || true
  "$ROOT/scripts/peer/run-istiod.sh" stop "$WORK/istiod" || true
  if [ -n "$MP_PID" ]; then kill "$MP_PID" 2>/dev/null || true; wait "$MP_PID" 2>/dev/null || true; fi
  "$ROOT/scripts/kube-testenv.sh" stop "$WORK/kube" >/dev/null 2>&1 || true
  [ "${KEEP:-}" = 1 ] || [ -z "${WORK_IS_TEMP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

# ------------------------------------------------------------------------------------------ inputs
base_config() { # the secure_port test's objects (echo's app on 127.0.0.1:19080)
  cat <<'YAML'
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: default}
spec:
  hosts: [echo.mesh.local]
  ports: [{number: 18080, name: http, protocol: HTTP}]
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: echo}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: echo-1, namespace: default}
spec:
  address: 127.0.0.22
  serviceAccount: default
  labels: {app: echo, version: v1, security.istio.io/tlsMode: istio}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: echo, namespace: default}
spec:
  workloadSelector: {labels: {app: echo}}
  ingress:
  - port: {number: 18080, protocol: HTTP, name: http}
    bind: 127.0.0.22
    defaultEndpoint: 127.0.0.1:19080
  egress:
  - hosts: [istio-system/*]
YAML
}

default_dr() {
  cat <<'YAML'
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: default}
spec:
  host: echo.mesh.local
  trafficPolicy: {connectionPool: {http: {maxRequestsPerConnection: 1}}}
YAML
}

ns_pa() { # MODE
  cat <<YAML
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: default}
spec:
  mtls: {mode: $1}
YAML
}

variant_config() { # VARIANT
  base_config
  case "$1" in
  base) default_dr ;;
  ns-strict) default_dr; ns_pa STRICT ;;
  ns-permissive) default_dr; ns_pa PERMISSIVE ;;
  ns-disable) default_dr; ns_pa DISABLE ;;
  workload-port-level)
    default_dr
    cat <<'YAML'
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: echo, namespace: default}
spec:
  selector: {matchLabels: {app: echo}}
  mtls: {mode: DISABLE}
  portLevelMtls:
    18080: {mode: STRICT}
YAML
    ;;
  workload-disable)
    default_dr
    cat <<'YAML'
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: echo, namespace: default}
spec:
  selector: {matchLabels: {app: echo}}
  mtls: {mode: DISABLE}
YAML
    ;;
  dr-istio-mutual-subsets)
    cat <<'YAML'
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: default}
spec:
  host: echo.mesh.local
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
  subsets:
  - name: v1
    labels: {version: v1}
  - name: v2
    labels: {version: v2}
    trafficPolicy:
      tls: {mode: ISTIO_MUTUAL, sni: v2.echo.mesh.local, subjectAltNames: ["spiffe://cluster.local/ns/default/sa/echo-v2"]}
YAML
    ;;
  *) echo "compare-mtls: unknown variant $1" >&2; exit 1 ;;
  esac
}

# ----------------------------------------------------------------------------------- control planes
start_istiod() { # CONFIG_DIR -> sets CP_ADDR, CP_ROOT, CP_HTTP
  PILOT_ENABLE_METADATA_EXCHANGE=false PILOT_ENABLE_ALPN_FILTER=false ISTIOD_ARGS="--configDir $1" \
    "$ROOT/scripts/peer/run-istiod.sh" start "$WORK/istiod" "$WORK/kube/kubeconfig" 25000
  CP_ADDR=127.0.0.1:25012 CP_ROOT="$WORK/istiod/root-cert.pem" CP_HTTP=127.0.0.1:25080
}
stop_istiod() { "$ROOT/scripts/peer/run-istiod.sh" stop "$WORK/istiod"; }

start_meshpilot() { # CONFIG_DIR
  mkdir -p "$WORK/meshpilot"
  RUST_LOG=info "$MESHPILOT" discovery --config-dir "$1" --kubeconfig "$WORK/kube/kubeconfig" \
    --grpc-addr 127.0.0.1:26010 --http-addr 127.0.0.1:26080 --monitoring-addr 127.0.0.1:26014 \
    --secure-grpc-addr 127.0.0.1:26012 --ca-dir "$WORK/meshpilot/ca" --root-ca-dir "$WORK/meshpilot/no-plugged-ca" \
    >/dev/null 2>>"$WORK/meshpilot/meshpilot.log" </dev/null &
  MP_PID=$!
  for _ in $(seq 1 240); do
    kill -0 "$MP_PID" 2>/dev/null || { log "meshpilot exited; see $WORK/meshpilot/meshpilot.log"; exit 1; }
    [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:26080/ready || true)" = 200 ] && break
    sleep 0.25
  done
  CP_ADDR=127.0.0.1:26012 CP_ROOT="$WORK/meshpilot/ca/root-cert.pem" CP_HTTP=127.0.0.1:26080
}
stop_meshpilot() {
  kill "$MP_PID" 2>/dev/null || true
  wait "$MP_PID" 2>/dev/null || true
  MP_PID=""
}

# The dumps are kept once the client has the echo cluster with its endpoint and the server its ingress
# listener, and the extracted TLS parts of two dumps 3 s apart agree.
dump() { # ADMIN_PORT FILE
  curl -sf "http://127.0.0.1:$1/config_dump?include_eds" >"$2"
}
settled() { # RAW_DIR
  python3 - "$1" <<'PY'
import json, sys
d = sys.argv[1]
g = json.load(open(f"{d}/golden.json"))
eps = g["client"]["clusters"].get("outbound|18080||echo.mesh.local", {}).get("endpoints")
sys.exit(0 if eps and "127.0.0.22_18080" in g["server"]["listeners"] else 1)
PY
}
capture() { # CP VARIANT
  local cp="$1" variant="$2" raw="$WORK/raw/$2/$1"
  mkdir -p "$raw"
  rm -rf "$WORK/run"
  POD_NAME=echo-1 ISTIO_METAJSON_LABELS='{"app":"echo","version":"v1"}' \
    "$ROOT/scripts/run-pilot-agent.sh" start "$WORK/run/server" "$CP_ADDR" "$CP_ROOT" "$WORK/token" 127.0.0.22 17000 >/dev/null
  "$ROOT/scripts/run-pilot-agent.sh" start "$WORK/run/client" "$CP_ADDR" "$CP_ROOT" "$WORK/token" 127.0.0.21 16000 >/dev/null
  local ok="" golden="$ROOT/scripts/peer/mtls-golden.py"
  for _ in $(seq 1 30); do
    sleep 1
    dump 16000 "$raw/client.json" && dump 17000 "$raw/server.json" || continue
    python3 "$golden" "$raw" >"$raw/golden.json" && settled "$raw" || continue
    sleep 3
    mkdir -p "$raw/again"
    dump 16000 "$raw/again/client.json" && dump 17000 "$raw/again/server.json" || continue
    python3 "$golden" "$raw/again" >"$raw/again/golden.json" || continue
    if cmp -s "$raw/golden.json" "$raw/again/golden.json"; then
      ok=1
      break
    fi
  done
  rm -rf "$raw/again"
  cp "$WORK/run/client/agent.log" "$raw/client.log" 2>/dev/null || true
  cp "$WORK/run/server/agent.log" "$raw/server.log" 2>/dev/null || true
  "$ROOT/scripts/run-pilot-agent.sh" stop "$WORK/run/client"
  "$ROOT/scripts/run-pilot-agent.sh" stop "$WORK/run/server"
  [ -n "$ok" ] || { log "$cp/$variant: config did not settle in 60 s (dumps in $raw)"; return 1; }
  log "$cp/$variant: captured"
}

# ------------------------------------------------------------------------------------------------ run
log "work directory $WORK"
"$ROOT/scripts/kube-testenv.sh" start "$WORK/kube" >"$WORK/kube-testenv.log" 2>&1 ||
  { log "kube test env did not start; see $WORK/kube-testenv.log"; exit 1; }
"$KUBECTL" --kubeconfig "$WORK/kube/kubeconfig" -n default get serviceaccount default >/dev/null 2>&1 ||
  "$KUBECTL" --kubeconfig "$WORK/kube/kubeconfig" -n default create serviceaccount default >/dev/null
"$KUBECTL" --kubeconfig "$WORK/kube/kubeconfig" -n default create token default --audience istio-ca \
  --duration 2h >"$WORK/token"

for variant in $VARIANTS; do
  cfg="$WORK/config/$variant"
  mkdir -p "$cfg"
  variant_config "$variant" >"$cfg/mesh.yaml"
  start_istiod "$cfg"
  capture istiod "$variant"
  stop_istiod
  start_meshpilot "$cfg"
  capture meshpilot "$variant"
  stop_meshpilot
  mkdir -p "$OUT/$variant"
  cp "$cfg/mesh.yaml" "$OUT/$variant/input.yaml"
  for cp in istiod meshpilot; do cp "$WORK/raw/$variant/$cp/golden.json" "$OUT/$variant/$cp.json"; done
  (cd "$OUT/$variant" && diff -u --label istiod.json --label meshpilot.json istiod.json meshpilot.json >diff || true)
  log "$variant: $(grep -c '^[-+][^-+]' "$OUT/$variant/diff" || true) differing lines ($OUT/$variant/diff)"
done
