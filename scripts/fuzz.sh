#!/usr/bin/env bash
# Real fuzzing (nightly, libFuzzer) of meshpilot's fuzz targets; CI only replays the corpora
# (`cargo test -p meshpilot-fuzzing --test it replay::`).
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS]     default: all targets, 60 s each
#   FUZZ_MAX_LEN=N scripts/fuzz.sh ...         libFuzzer's -max_len (default 3145728: meshpilot's largest
#                                              document, docs/SECURITY.md; libFuzzer's own default of
#                                              4096 never reached the alias and nesting limits)
#   FUZZ_BUILD=-O scripts/fuzz.sh ...          build flags for cargo fuzz (default none: cargo-fuzz's
#                                              optimized build with debug assertions and overflow
#                                              checks; -O drops those, as the release binary does)
#
# Targets: yaml_config, validate, ads_requests, node_id, grpc_frames (fuzz/fuzz_targets/; bodies in crates/fuzzing).
# Each run starts from the checked-in corpus (fuzz/corpus/TARGET) plus the local one
# (fuzz/target/corpus/TARGET, kept between runs, not in git), fuzzes into a scratch directory
# (fuzz/target/work/TARGET), then merges only the inputs that add coverage (libFuzzer -merge=1) into
# the local corpus. FUZZ_MERGE=repo merges into the checked-in fuzz/corpus/TARGET instead: a few
# minutes of fuzzing adds thousands of files there, so do it rarely (or after `cargo fuzz cmin`);
# the checked-in corpora are the seeds plus every crash input.
# One process per target (no -jobs): the machine is shared. A crash leaves its input in
# fuzz/artifacts/TARGET/ and makes the script exit non-zero: fix the panic, copy the input into the
# corpus and add a named regression test (docs/RELIABILITY.md, "Fuzzing").
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TARGETS=(yaml_config validate ads_requests node_id grpc_frames)
target="${1:-all}"
seconds="${2:-60}"
read -r -a build <<<"${FUZZ_BUILD:-}"
if [[ "$target" == all ]]; then
  selected=("${TARGETS[@]}")
elif [[ " ${TARGETS[*]} " == *" $target "* ]]; then
  selected=("$target")
else
  echo "unknown target '$target' (one of: ${TARGETS[*]}, all)" >&2
  exit 2
fi
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz missing: cargo install cargo-fuzz" >&2; exit 2; }

cd "$ROOT/fuzz"
mkdir -p target/logs
status=0
for t in "${selected[@]}"; do
  work="target/work/$t"
  local_corpus="target/corpus/$t"
  merge_into="$local_corpus"
  [[ "${FUZZ_MERGE:-}" == repo ]] && merge_into="corpus/$t"
  log="target/logs/$t.log"
  rm -rf "$work"
  mkdir -p "$work" "corpus/$t" "$local_corpus"
  echo "== $t: fuzzing for ${seconds}s (log: fuzz/$log)"
  if ! cargo +nightly fuzz run "${build[@]}" "$t" "$work" "corpus/$t" "$local_corpus" -- \
      -max_total_time="$seconds" -max_len="${FUZZ_MAX_LEN:-3145728}" -rss_limit_mb=2048 -timeout=10 \
      -print_final_stats=1 >"$log" 2>&1; then
    echo "!! $t: crash or failure; input(s) in fuzz/artifacts/$t/:" >&2
    ls -1 "artifacts/$t" 2>/dev/null | sed 's/^/   /' >&2 || true
    grep -m1 -A3 "panicked at" "$log" >&2 || tail -20 "$log" >&2
    status=1
  fi
  grep -E "^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)|^Done [0-9]+ runs" "$log" | sed "s/^/   $t /" || true
  before=$(find "$merge_into" -type f | wc -l)
  cargo +nightly fuzz run "${build[@]}" "$t" "$merge_into" "$work" -- -merge=1 >"target/logs/$t.merge.log" 2>&1 || true
  after=$(find "$merge_into" -type f | wc -l)
  echo "   $t corpus fuzz/$merge_into: $before -> $after files"
done
exit "$status"
