#!/usr/bin/env python3
"""Medians of xds-load JSON summaries (run-*.json) for the figures BENCHMARKS.md records.

    summary.py DIR                          one table: figure | value (medians over DIR/run-*.json)
    summary.py --compare NAME_A DIR_A NAME_B DIR_B
                                            figure | NAME_A | NAME_B | ratio (A/B)

Used by scripts/bench/common.sh (median) and scripts/bench/side-by-side.sh.
"""
import glob
import json
import statistics
import sys


def cp(r, k):
    return (r.get("control_plane") or {}).get(k)


def mib(r, k):
    v = cp(r, k)
    return v / 2**20 if v is not None else None


def conv(k):
    return lambda r: r["convergence"][k] if r["changes"] else None


ROWS = [
    ("control plane ready after start (ms)", lambda r: r.get("control_plane_ready_ms"), "{:.0f}"),
    ("streams ready", lambda r: r["ready"], "{:.0f}"),
    ("all ready after (ms)", lambda r: r["all_ready_ms"], "{:.0f}"),
    ("connect→ready p50 (ms)", lambda r: r["startup"]["p50_ms"], "{:.1f}"),
    ("connect→ready p99 (ms)", lambda r: r["startup"]["p99_ms"], "{:.1f}"),
    ("convergence p50 (ms)", conv("p50_ms"), "{:.1f}"),
    ("convergence p90 (ms)", conv("p90_ms"), "{:.1f}"),
    ("convergence p99 (ms)", conv("p99_ms"), "{:.1f}"),
    ("convergence max (ms)", conv("max_ms"), "{:.1f}"),
    ("not converged", lambda r: r["not_converged"], "{:.0f}"),
    ("responses/stream/change", lambda r: statistics.mean(c["responses_per_stream"] for c in r["changes"]) if r["changes"] else None, "{:.2f}"),
    ("kB/stream/change", lambda r: statistics.mean(c["bytes_per_stream"] for c in r["changes"]) / 1000 if r["changes"] else None, "{:.1f}"),
    ("RSS idle (MiB)", lambda r: mib(r, "baseline_rss"), "{:.1f}"),
    ("RSS connected (MiB)", lambda r: mib(r, "connected_rss"), "{:.1f}"),
    ("peak RSS (MiB)", lambda r: mib(r, "peak_rss"), "{:.1f}"),
    ("CPU s connecting", lambda r: cp(r, "cpu_seconds_connect"), "{:.2f}"),
    ("CPU s during changes", lambda r: cp(r, "cpu_seconds_changes"), "{:.2f}"),
    ("errors (streams)", lambda r: r["streams_with_errors"], "{:.0f}"),
]


def load(d):
    return [json.load(open(p)) for p in sorted(glob.glob(d + "/run-*.json"))]


def med(runs, f):
    vals = [v for v in (f(r) for r in runs) if v is not None]
    return statistics.median(vals) if vals else None


def single(d):
    runs = load(d)
    print(f"| median of {len(runs)} run(s) | value |\n|---|---|")
    for name, f, fmt in ROWS:
        v = med(runs, f)
        if v is not None:
            print(f"| {name} | {fmt.format(v)} |")


def compare(name_a, dir_a, name_b, dir_b):
    a, b = load(dir_a), load(dir_b)
    print(f"| median of {len(a)} / {len(b)} run(s) | {name_a} | {name_b} | ratio ({name_a}/{name_b}) |")
    print("|---|---|---|---|")
    for name, f, fmt in ROWS:
        va, vb = med(a, f), med(b, f)
        if va is None and vb is None:
            continue
        ratio = f"{va / vb:.2f}" if va is not None and vb else "–"
        sa = fmt.format(va) if va is not None else "–"
        sb = fmt.format(vb) if vb is not None else "–"
        print(f"| {name} | {sa} | {sb} | {ratio} |")


if __name__ == "__main__":
    if len(sys.argv) == 2:
        single(sys.argv[1])
    elif len(sys.argv) == 6 and sys.argv[1] == "--compare":
        compare(*sys.argv[2:])
    else:
        sys.exit(__doc__)
