#!/usr/bin/env python3
"""Load on an injection webhook (`POST /inject`): N AdmissionReviews of one pod over one keep-alive
HTTPS connection per worker, answers checked (allowed with a JSONPatch), latency percentiles and
throughput printed. Works against meshpilot and istiod alike (same path, same review).

    scripts/bench/inject-load.py --url https://127.0.0.1:15017/inject --pod pod.yaml -n 2000 -c 2

The pod file is a Pod manifest (YAML or JSON; PyYAML needed for YAML). TLS is not verified (a loopback
benchmark). Latency includes this client's own time (Python, one request at a time per worker).
"""

import argparse
import http.client
import json
import ssl
import statistics
import threading
import time
import urllib.parse


def load_pod(path):
    text = open(path).read()
    try:
        return json.loads(text)
    except ValueError:
        import yaml  # noqa: PLC0415

        return yaml.safe_load(text)


def review(pod, uid):
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": pod.get("metadata", {}).get("namespace", "default"),
                "operation": "CREATE",
                "object": pod,
            },
        }
    ).encode()


def worker(url, body, count, latencies, errors):
    parsed = urllib.parse.urlparse(url)
    context = ssl._create_unverified_context()
    conn = http.client.HTTPSConnection(parsed.hostname, parsed.port, context=context, timeout=30)
    for _ in range(count):
        start = time.perf_counter()
        conn.request("POST", parsed.path, body=body, headers={"Content-Type": "application/json"})
        answer = conn.getresponse().read()
        latencies.append(time.perf_counter() - start)
        response = json.loads(answer).get("response", {})
        if not response.get("allowed") or response.get("patchType") != "JSONPatch":
            errors.append(answer[:300])
    conn.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--pod", required=True)
    parser.add_argument("-n", type=int, default=2000, help="requests in all")
    parser.add_argument("-c", type=int, default=1, help="workers (connections)")
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    body = review(load_pod(args.pod), "bench")
    worker(args.url, body, args.warmup, [], [])
    latencies, errors = [], []
    per = args.n // args.c
    threads = [threading.Thread(target=worker, args=(args.url, body, per, latencies, errors)) for _ in range(args.c)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    latencies.sort()
    q = statistics.quantiles(latencies, n=100)
    print(
        json.dumps(
            {
                "requests": len(latencies),
                "errors": len(errors),
                "per_second": round(len(latencies) / elapsed, 1),
                "p50_ms": round(q[49] * 1000, 2),
                "p99_ms": round(q[98] * 1000, 2),
                "max_ms": round(latencies[-1] * 1000, 2),
            }
        )
    )
    if errors:
        print("first error:", errors[0])
        raise SystemExit(1)


if __name__ == "__main__":
    main()
