#!/usr/bin/env bash
# Shared by the scenario scripts: release binaries (built once), output directory, repeated runs and
# medians. Sourced, not run.
#
# Environment:
#   RUNS=3          runs per scenario (the summary reports medians)
#   OUT=DIR         results (default target/bench/<scenario>); each run writes run-<n>.json and a log
#   MESHPILOT=BIN   control plane binary (default target/release/meshpilot, built if missing)
#   XDS_LOAD=BIN    load tool (default target/release/xds-load, built if missing)
#   BUILD=1         rebuild both in release first
#   PROTOCOL=sotw   sotw | delta
#   SECURE=1        connect to the secure port (--secure-grpc-addr, TLS with client certificates signed
#                   by the CA kept in $OUT/ca; see xds-load run --ca-dir) instead of the plaintext one
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUNS="${RUNS:-3}"
PROTOCOL="${PROTOCOL:-sotw}"
MESHPILOT="${MESHPILOT:-$ROOT/target/release/meshpilot}"
XDS_LOAD="${XDS_LOAD:-$ROOT/target/release/xds-load}"

build() {
  if [[ "${BUILD:-0}" == 1 || ! -x "$MESHPILOT" || ! -x "$XDS_LOAD" ]]; then
    (cd "$ROOT" && cargo build --release -p meshpilot -p xds-load)
  fi
}

# setup NAME: the output directory and a fresh config directory under it.
setup() {
  SCENARIO="$1"
  OUT="${OUT:-$ROOT/target/bench/$SCENARIO}"
  CONFIG="$OUT/config"
  rm -rf "$OUT"
  mkdir -p "$OUT"
  build
  echo "== $SCENARIO: $RUNS run(s), results in $OUT"
  echo "machine: $(nproc) CPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/{print $2}') GiB RAM, load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# runs ARGS...: xds-load run RUNS times against a fresh meshpilot each time (spawned by xds-load).
runs() {
  local secure=()
  if [[ "${SECURE:-0}" == 1 ]]; then secure=(--ca-dir "$OUT/ca"); fi
  for n in $(seq 1 "$RUNS"); do
    echo "-- run $n/$RUNS"
    "$XDS_LOAD" run --config-dir "$CONFIG" --meshpilot "$MESHPILOT" \
      --meshpilot-log "$OUT/meshpilot-$n.log" --meshpilot-arg=--log-format=json \
      --protocol "$PROTOCOL" --label "$SCENARIO" --json "$OUT/run-$n.json" \
      "${secure[@]}" "$@"
  done
  median
}

# median: medians over the runs' JSON summaries of the figures BENCHMARKS.md records.
median() {
  python3 - "$OUT" <<'PY'
import json, glob, statistics, sys
runs = [json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + "/run-*.json"))]
def med(f):
    vals = [f(r) for r in runs]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None
cp = lambda r, k: (r.get("control_plane") or {}).get(k)
rows = [
    ("streams ready", lambda r: r["ready"], "{:.0f}"),
    ("all ready after (ms)", lambda r: r["all_ready_ms"], "{:.0f}"),
    ("connect→ready p50 (ms)", lambda r: r["startup"]["p50_ms"], "{:.1f}"),
    ("connect→ready p99 (ms)", lambda r: r["startup"]["p99_ms"], "{:.1f}"),
    ("convergence p50 (ms)", lambda r: r["convergence"]["p50_ms"] if r["changes"] else None, "{:.1f}"),
    ("convergence p90 (ms)", lambda r: r["convergence"]["p90_ms"] if r["changes"] else None, "{:.1f}"),
    ("convergence p99 (ms)", lambda r: r["convergence"]["p99_ms"] if r["changes"] else None, "{:.1f}"),
    ("convergence max (ms)", lambda r: r["convergence"]["max_ms"] if r["changes"] else None, "{:.1f}"),
    ("not converged", lambda r: r["not_converged"], "{:.0f}"),
    ("responses/stream/change", lambda r: statistics.mean(c["responses_per_stream"] for c in r["changes"]) if r["changes"] else None, "{:.2f}"),
    ("kB/stream/change", lambda r: statistics.mean(c["bytes_per_stream"] for c in r["changes"]) / 1000 if r["changes"] else None, "{:.1f}"),
    ("RSS idle (MiB)", lambda r: cp(r, "baseline_rss") and cp(r, "baseline_rss") / 2**20, "{:.1f}"),
    ("RSS connected (MiB)", lambda r: cp(r, "connected_rss") and cp(r, "connected_rss") / 2**20, "{:.1f}"),
    ("peak RSS (MiB)", lambda r: cp(r, "peak_rss") and cp(r, "peak_rss") / 2**20, "{:.1f}"),
    ("CPU s connecting", lambda r: cp(r, "cpu_seconds_connect"), "{:.2f}"),
    ("CPU s during changes", lambda r: cp(r, "cpu_seconds_changes"), "{:.2f}"),
    ("errors (streams)", lambda r: r["streams_with_errors"], "{:.0f}"),
]
print(f"| median of {len(runs)} run(s) | value |\n|---|---|")
for name, f, fmt in rows:
    v = med(f)
    if v is not None:
        print(f"| {name} | {fmt.format(v)} |")
PY
}
