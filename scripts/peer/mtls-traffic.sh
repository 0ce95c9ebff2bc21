#!/usr/bin/env bash
# Companion of compare-mtls.sh: sends one request through the two real sidecars under istiod and then
# under meshpilot for one config directory and prints the HTTP status and the TLS stats of both Envoys
# (negotiated TLS version, handshakes). Used for differences D3 and D8 of docs/MTLS.md.
#
#   scripts/peer/mtls-traffic.sh INPUT_YAML
#       INPUT_YAML: one of compare-mtls.sh's inputs, e.g. docs/golden/mtls/base/input.yaml (copied into a
#       config directory of its own)
#
# Same addresses and ports as compare-mtls.sh (which must not run at the same time); the app is a
# Python HTTP server on 127.0.0.1:19080. WORK (default mktemp -d) keeps logs with KEEP=1.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: $0 INPUT_YAML" >&2; exit 1; }
MESHPILOT="${MESHPILOT:-}"
for m in "$ROOT/target/debug/meshpilot" /work/main/target/debug/meshpilot; do
  [ -n "$MESHPILOT" ] || { [ -x "$m" ] && MESHPILOT="$m"; }
done
W="${WORK:-$(mktemp -d /tmp/mtls-traffic.XXXXXX)}"
mkdir -p "$W/config"
CFG="$W/config"
cp "$1" "$CFG/mesh.yaml"
K="$("$ROOT/scripts/kube-testenv.sh" bin-dir)/kubectl --kubeconfig $W/kube/kubeconfig"
# Istio's bootstrap keeps only some stats; these are needed.
export PROXY_CONFIG_EXTRA='"proxyStatsMatcher":{"inclusionRegexps":[".*ssl.*",".*cx_total.*"]}'
APP="" MP=""
cleanup() {
  "$ROOT/scripts/run-pilot-agent.sh" stop "$W/run/client"
  "$ROOT/scripts/run-pilot-agent.sh" stop "$W/run/server"
  "$ROOT/scripts/peer/run-istiod.sh" stop "$W/istiod"
  [ -z "$MP" ] || { kill "$MP" 2>/dev/null; wait "$MP" 2>/dev/null; }
  [ -z "$APP" ] || { kill "$APP" 2>/dev/null; wait "$APP" 2>/dev/null; }
  "$ROOT/scripts/kube-testenv.sh" stop "$W/kube" >/dev/null 2>&1
  [ "${KEEP:-}" = 1 ] || [ -n "${WORK:-}" ] || rm -rf "$W"
}
trap cleanup EXIT

"$ROOT/scripts/kube-testenv.sh" start "$W/kube" >"$W/kube.log" 2>&1 || { echo "kube test env failed: $W/kube.log" >&2; exit 1; }
$K -n default create serviceaccount default >/dev/null 2>&1
$K -n default create token default --audience istio-ca --duration 2h >"$W/token"
python3 -m http.server 19080 --bind 127.0.0.1 >"$W/app.log" 2>&1 &
APP=$!

for cp in istiod meshpilot; do
  if [ $cp = istiod ]; then
    PILOT_ENABLE_METADATA_EXCHANGE=false PILOT_ENABLE_ALPN_FILTER=false ISTIOD_ARGS="--configDir $CFG" \
      "$ROOT/scripts/peer/run-istiod.sh" start "$W/istiod" "$W/kube/kubeconfig" 25000 2>/dev/null
    addr=127.0.0.1:25012 root="$W/istiod/root-cert.pem"
  else
    "$MESHPILOT" discovery --config-dir "$CFG" --kubeconfig "$W/kube/kubeconfig" --grpc-addr 127.0.0.1:26010 \
      --http-addr 127.0.0.1:26080 --monitoring-addr 127.0.0.1:26014 --secure-grpc-addr 127.0.0.1:26012 \
      --ca-dir "$W/mp/ca" --root-ca-dir "$W/mp/none" >/dev/null 2>"$W/meshpilot.log" &
    MP=$!
    for _ in $(seq 1 240); do
      [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:26080/ready)" = 200 ] && break
      sleep 0.25
    done
    addr=127.0.0.1:26012 root="$W/mp/ca/root-cert.pem"
  fi
  POD_NAME=echo-1 ISTIO_METAJSON_LABELS='{"app":"echo","version":"v1"}' \
    "$ROOT/scripts/run-pilot-agent.sh" start "$W/run/server" "$addr" "$root" "$W/token" 127.0.0.22 17000 >/dev/null 2>&1
  "$ROOT/scripts/run-pilot-agent.sh" start "$W/run/client" "$addr" "$root" "$W/token" 127.0.0.21 16000 >/dev/null 2>&1
  sleep 4
  code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: echo.mesh.local' http://127.0.0.1:18080/)
  echo "$cp: client sidecar -> server sidecar -> app: HTTP $code"
  curl -s http://127.0.0.1:16000/stats | grep -E '\.(ssl\.(versions|handshake|connection_error)|upstream_cx_total)' |
    grep 'echo.mesh.local' | grep -v ': 0$' | sed "s/^/  $cp client: /"
  curl -s http://127.0.0.1:17000/stats | grep -E '^listener\.127\.0\.0\.22_18080\.(ssl\.(versions|handshake|connection_error)|downstream_cx_total)' |
    grep -v ': 0$' | sed "s/^/  $cp server: /"
  "$ROOT/scripts/run-pilot-agent.sh" stop "$W/run/client"
  "$ROOT/scripts/run-pilot-agent.sh" stop "$W/run/server"
  if [ $cp = istiod ]; then
    "$ROOT/scripts/peer/run-istiod.sh" stop "$W/istiod"
  else
    kill "$MP"; wait "$MP" 2>/dev/null; MP=""
  fi
done
