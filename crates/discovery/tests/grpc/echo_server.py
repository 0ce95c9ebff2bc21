"""A plain gRPC server on 127.0.0.1 for the proxyless end-to-end tests.

Usage: echo_server.py NAME PORT

Serves the unary method /meshpilot.test.Echo/Hello with raw-bytes (de)serializers, so no generated
code is needed. The reply is a JSON object {"server": NAME, "metadata": {key: value, ...}} naming
this server and echoing the request's metadata. Prints "ready" on stdout once serving; runs until
killed.
"""

import json
import sys
from concurrent import futures

import grpc


def main():
    name, port = sys.argv[1], int(sys.argv[2])

    def hello(_request, context):
        metadata = {k: v for k, v in context.invocation_metadata() if not k.endswith("-bin")}
        return json.dumps({"server": name, "metadata": metadata}).encode()

    handler = grpc.method_handlers_generic_handler(
        "meshpilot.test.Echo", {"Hello": grpc.unary_unary_rpc_method_handler(hello)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
