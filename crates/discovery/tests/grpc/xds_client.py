"""A proxyless gRPC client for the end-to-end tests: one xds:/// channel, driven over stdin.

Usage: GRPC_XDS_BOOTSTRAP=bootstrap.json xds_client.py TARGET

Opens one channel to TARGET (e.g. xds:///echo.default.svc.cluster.local:7070), so gRPC's xDS client
fetches listener, route, cluster and endpoints from the server named in the bootstrap and keeps its
ADS stream open. Then, for every JSON line on stdin {"calls": N, "metadata": {key: value}}, it makes
N calls to /meshpilot.test.Echo/Hello (waiting for the channel to be ready, 5 s deadline each; the
batch stops at the first failure) and prints one JSON line
{"servers": [name per successful call], "errors": ["CODE: details"],
 "metadata": {the request metadata the first answering server saw}}.
Exits at end of input.
"""

import json
import sys

import grpc


def main():
    channel = grpc.insecure_channel(sys.argv[1])
    hello = channel.unary_unary("/meshpilot.test.Echo/Hello")
    for line in sys.stdin:
        request = json.loads(line)
        metadata = list(request.get("metadata", {}).items())
        servers, errors, seen = [], [], {}
        for _ in range(request["calls"]):
            try:
                reply = hello(b"", metadata=metadata, timeout=5, wait_for_ready=True)
                reply = json.loads(reply)
                servers.append(reply["server"])
                seen = seen or reply["metadata"]
            except grpc.RpcError as e:
                errors.append(f"{e.code().name}: {e.details()}")
                break  # the rest would most likely fail the same way, each after the deadline
        print(json.dumps({"servers": servers, "errors": errors, "metadata": seen}), flush=True)
    channel.close()


if __name__ == "__main__":
    main()
