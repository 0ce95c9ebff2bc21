#!/usr/bin/env bash
# Every scenario, one after the other (RUNS each).
set -euo pipefail
dir="$(dirname "$0")"
for s in scale vs-change churn proxies-10k; do
  "$dir/$s.sh"
done
