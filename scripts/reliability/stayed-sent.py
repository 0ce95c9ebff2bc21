#!/usr/bin/env python3
"""When meshpilot sent a storm run's change to the streams that stayed connected.

Reads a storm run's output directory (scripts/reliability/storm.sh: OUT/config with xds-load's marker
file, OUT/meshpilot-1.log written with --log-format=json) and prints, over the stayed streams (the first
STAYED connections: connection ids end in their registration number), the time from the marker file's
write (its mtime) to the first pushed response logged for that stream after it, p50 / p99 / max in ms.

Usage: scripts/reliability/stayed-sent.py OUT [STAYED]   (STAYED defaults to 500, storm.sh's default)
"""
import datetime
import glob
import json
import os
import sys


def main() -> None:
    out = sys.argv[1]
    stayed = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    markers = glob.glob(os.path.join(out, "config", "*marker*"))
    if not markers:
        sys.exit(f"no xds-load marker file under {out}/config")
    written = max(os.stat(m).st_mtime_ns for m in markers) / 1e9
    first = {}
    with open(os.path.join(out, "meshpilot-1.log")) as log:
        for line in log:
            if "PUSH" not in line or "(request)" in line:
                continue
            entry = json.loads(line)
            connection = entry["fields"].get("connection", "")
            try:
                number = int(connection.rsplit("-", 1)[1])
            except (IndexError, ValueError):
                continue
            if number > stayed:
                continue
            at = datetime.datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp()
            if at >= written:
                first.setdefault(number, at)
    if not first:
        sys.exit("no push to a stayed stream after the marker was written")
    latencies = sorted((at - written) * 1000 for at in first.values())
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
    print(f"{out}: change sent to {len(latencies)} stayed streams: "
          f"p50 {pick(0.5):.0f} p99 {pick(0.99):.0f} max {latencies[-1]:.0f} ms")


if __name__ == "__main__":
    main()
