#!/usr/bin/env python3
"""A TLS gRPC pass-through that records what a client sends (meshpilot's own tool, for docs/PILOT-AGENT.md).

    grpc-tap.py LISTEN_PORT UPSTREAM_HOST:PORT UPSTREAM_ROOT SERVING_CERT SERVING_KEY [SERVER_NAME]

Listens on 127.0.0.1:LISTEN_PORT with TLS (SERVING_CERT/KEY), forwards every unary or bidi-streaming call
to UPSTREAM over TLS verified with UPSTREAM_ROOT (SERVER_NAME overrides the name checked, e.g.
istiod.istio-system.svc), copying the request metadata, and prints one JSON line per call to stdout: method,
metadata, and for istio.v1.auth.IstioCertificateService/CreateCertificate the decoded request (csr, its
text via openssl, validity_duration, metadata) and the chain length of the answer. The first message of an
xDS stream is summarised (type URL, node id). With TAP_CLIENT_ROOT=FILE it asks for a client certificate
(not required) and records the one presented, if any (subject alternative names). Needs grpcio (scripts/install-grpcio.sh's venv).
"""
import json
import os
import subprocess
import sys
import threading
from concurrent import futures

import grpc


def varint(b, i):
    shift = result = 0
    while True:
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return result, i


def fields(b):
    """Protobuf wire format -> list of (field number, wire type, value); length-delimited values stay bytes."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i : i + n], i + n
        elif wt == 1:
            v, i = b[i : i + 8], i + 8
        elif wt == 5:
            v, i = b[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        out.append((num, wt, v))
    return out


def value(b):
    """google.protobuf.Value -> Python."""
    for num, _, v in fields(b):
        if num == 1:
            return None
        if num == 3:
            return v.decode()
        if num == 4:
            return bool(v)
        if num == 5:
            return struct(v)
        if num == 2:
            import struct as s

            return s.unpack("<d", v)[0]
        if num == 6:
            return [value(x) for n, _, x in fields(v) if n == 1]
    return None


def struct(b):
    """google.protobuf.Struct -> dict."""
    d = {}
    for num, _, entry in fields(b):
        if num != 1:
            continue
        k, v = None, None
        for n, _, x in fields(entry):
            if n == 1:
                k = x.decode()
            elif n == 2:
                v = value(x)
        d[k] = v
    return d


def csr_request(b):
    r = {}
    for num, _, v in fields(b):
        if num == 1:
            r["csr"] = v.decode()
        elif num == 3:
            r["validity_duration"] = v
        elif num == 4:
            r["metadata"] = struct(v)
    if "csr" in r:
        p = subprocess.run(["openssl", "req", "-noout", "-text"], input=r["csr"].encode(), capture_output=True)
        r["csr_text"] = p.stdout.decode()
    return r


def node_id(b):
    for num, _, v in fields(b):
        if num == 1:
            return v.decode(errors="replace")
    return None


def summarise_xds(b, delta):
    r = {}
    for num, wt, v in fields(b):
        if (delta and num == 1) or (not delta and num == 2):
            if wt == 2:
                r["node_id"] = node_id(v)
        if (delta and num == 2) or (not delta and num == 4):
            if wt == 2:
                r["type_url"] = v.decode()
    return r


def client_cert(ctx):
    """The SANs of the client certificate the caller presented, or None."""
    auth = ctx.auth_context()
    pem = auth.get("x509_pem_cert")
    if not pem:
        return None
    p = subprocess.run(["openssl", "x509", "-noout", "-serial", "-ext", "subjectAltName"], input=pem[0], capture_output=True)
    return p.stdout.decode()


LOCK = threading.Lock()


def emit(d):
    with LOCK:
        print(json.dumps(d), flush=True)


def main():
    port, upstream, root, cert, key = sys.argv[1:6]
    name = sys.argv[6] if len(sys.argv) > 6 else None
    creds = grpc.ssl_channel_credentials(root_certificates=open(root, "rb").read())
    opts = [("grpc.ssl_target_name_override", name)] if name else []
    chan = grpc.secure_channel(upstream, creds, options=opts)
    ident = lambda x: x

    class Handler(grpc.GenericRpcHandler):
        def service(self, details):
            method = details.method
            md = [(k, v) for k, v in details.invocation_metadata]
            peer_cert = lambda ctx: client_cert(ctx)
            if method.endswith("CreateCertificate"):

                def unary(req, ctx):
                    rec = {"method": method, "metadata": md, "peer": ctx.peer(), "client_cert": peer_cert(ctx)}
                    rec["request"] = csr_request(req)
                    try:
                        resp = chan.unary_unary(method, ident, ident)(req, metadata=md, timeout=30)
                    except grpc.RpcError as e:
                        rec["error"] = f"{e.code()}: {e.details()}"
                        emit(rec)
                        ctx.abort(e.code(), e.details())
                    chain = [v.decode() for n, _, v in fields(resp) if n == 1]
                    rec["response_chain_len"] = len(chain)
                    p = subprocess.run(
                        ["openssl", "x509", "-noout", "-subject", "-issuer", "-dates", "-ext", "subjectAltName"],
                        input=chain[0].encode(),
                        capture_output=True,
                    )
                    rec["leaf"] = p.stdout.decode()
                    emit(rec)
                    return resp

                return grpc.unary_unary_rpc_method_handler(unary, ident, ident)

            delta = "Delta" in method

            def stream(reqs, ctx):
                first = {"done": False}

                def gen():
                    for r in reqs:
                        if not first["done"]:
                            first["done"] = True
                            emit({"method": method, "metadata": md, "peer": ctx.peer(), "client_cert": peer_cert(ctx),
                                  "first": summarise_xds(r, delta)})
                        yield r

                try:
                    for resp in chan.stream_stream(method, ident, ident)(gen(), metadata=md):
                        yield resp
                except grpc.RpcError as e:
                    emit({"method": method, "error": f"{e.code()}: {e.details()}"})
                    ctx.abort(e.code(), e.details())

            return grpc.stream_stream_rpc_method_handler(stream, ident, ident)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), handlers=[Handler()])
    client_root = os.environ.get("TAP_CLIENT_ROOT")
    server.add_secure_port(
        f"127.0.0.1:{port}",
        grpc.ssl_server_credentials(
            [(open(key, "rb").read(), open(cert, "rb").read())],
            root_certificates=open(client_root, "rb").read() if client_root else None,
            require_client_auth=False,
        ),
    )
    server.start()
    emit({"listening": f"127.0.0.1:{port}", "upstream": upstream})
    server.wait_for_termination()


if __name__ == "__main__":
    main()
