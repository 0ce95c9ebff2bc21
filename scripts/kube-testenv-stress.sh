#!/usr/bin/env bash
# Starts and stops the Kubernetes test environment N times in a row (default 30) and reports failures and
# the time of each start (issue 12: a start must never fail at random). Not part of CI; run it after
# changing scripts/kube-testenv.sh:
#
#   scripts/kube-testenv-stress.sh [N]
#
# Exits non-zero if any start failed or any etcd / kube-apiserver of this run was left running.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-30}"
scripts/kube-testenv.sh build
base="$(mktemp -d)"
trap 'rm -rf "$base"' EXIT
failures=0
times=()
for i in $(seq 1 "$n"); do
  dir="$base/env-$i"
  t0=$(date +%s%N)
  if out="$(scripts/kube-testenv.sh start "$dir" 2>&1)"; then
    ms=$((($(date +%s%N) - t0) / 1000000))
    times+=("$ms")
    echo "start $i/$n: ok in $ms ms ($(tail -n 1 <<<"$out" | sed 's/^kube-testenv: //'))"
  else
    failures=$((failures + 1))
    echo "start $i/$n: FAILED"
    sed 's/^/    /' <<<"$out"
  fi
  scripts/kube-testenv.sh stop "$dir"
  rm -rf "$dir"
done
# Any process of this run still alive (its command line names the run's directory) is a leak.
leaks="$(pgrep -f -- "$base" || true)"
if [ ${#times[@]} -gt 0 ]; then
  sorted="$(printf '%s\n' "${times[@]}" | sort -n)"
  echo "starts: ${#times[@]} ok, $failures failed; ms min $(head -n1 <<<"$sorted")" \
    "median $(sed -n "$(((${#times[@]} + 1) / 2))p" <<<"$sorted") max $(tail -n1 <<<"$sorted")"
else
  echo "starts: 0 ok, $failures failed"
fi
if [ -n "$leaks" ]; then
  echo "left running: $leaks" >&2
  exit 1
fi
[ "$failures" -eq 0 ]
