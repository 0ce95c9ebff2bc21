#!/usr/bin/env python3
"""TLS-relevant parts of two Envoy config dumps (client.json, server.json in DIR), normalised for a diff.

    scripts/peer/mtls-golden.py DIR > golden.json

Used by scripts/peer/compare-mtls.sh. Keeps, per sidecar:
  listeners: name, address, listener filters; per filter chain its match (transport protocol,
    application protocols, destination port, ...), transport socket (DownstreamTlsContext: client
    certificate requirement, SDS secret names and config source, validation context / SAN matchers,
    ALPN, TLS parameters), network filter names, and for an HTTP connection manager its XFCC settings
    (forward_client_cert_details, set_current_client_cert_details) and HTTP filter names;
  clusters (inbound|*, outbound|*, not the agent's own): type, transport_socket,
    transport_socket_matches (UpstreamTlsContext: SNI, ALPN, SAN matchers, SDS);
  endpoints of those clusters: address and the envoy.transport_socket_match metadata.
Dropped: versions, timestamps, stat prefixes, route tables, everything not about TLS. Keys are sorted; lists
keep Envoy's order except where noted.
"""
import json
import sys

SKIP_CLUSTERS = {"sds-grpc", "xds-grpc", "prometheus_stats", "agent", "zipkin", "BlackHoleCluster",
                 "PassthroughCluster", "InboundPassthroughCluster", "InboundPassthroughClusterIpv4",
                 "InboundPassthroughClusterIpv6"}
HCM = "envoy.filters.network.http_connection_manager"
ECHO_HOST = "echo.mesh.local"
ECHO_PORT = 18080


def type_name(tc):
    return (tc or {}).get("@type", "").rsplit("/", 1)[-1]


def compact_sds(v):
    """SDS config sources are written on one line: they repeat in every TLS context."""
    if isinstance(v, dict):
        return {k: (json.dumps(x, sort_keys=True) if k == "sds_config" else compact_sds(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [compact_sds(x) for x in v]
    return v


def transport_socket(ts):
    if not ts:
        return None
    tc = ts.get("typed_config", {})
    out = {"name": ts.get("name"), "type": type_name(tc)}
    body = compact_sds({k: v for k, v in tc.items() if k != "@type"})
    if body:
        out["config"] = body
    return out


def hcm_summary(tc):
    return {
        "forward_client_cert_details": tc.get("forward_client_cert_details", "SANITIZE (default)"),
        "set_current_client_cert_details": tc.get("set_current_client_cert_details"),
        "http_filters": [f.get("name") for f in tc.get("http_filters", [])],
    }


def filter_chain(fc):
    out = {
        "name": fc.get("name"),
        "filter_chain_match": fc.get("filter_chain_match", {}),
        "transport_socket": transport_socket(fc.get("transport_socket")),
        "filters": [],
    }
    for f in fc.get("filters", []):
        entry = {"name": f.get("name")}
        tc = f.get("typed_config", {})
        if f.get("name") == HCM or type_name(tc).endswith("HttpConnectionManager"):
            entry["http_connection_manager"] = hcm_summary(tc)
        out["filters"].append(entry)
    return out


def listener_filter(f):
    tc = f.get("typed_config", {})
    out = {"name": f.get("name"), "type": type_name(tc)}
    body = {k: v for k, v in tc.items() if k != "@type"}
    if body:
        out["config"] = body
    return out


def listener(l):
    return {
        "name": l.get("name"),
        "address": l.get("address"),
        "listener_filters": [listener_filter(f) for f in l.get("listener_filters", [])],
        "listener_filters_timeout": l.get("listener_filters_timeout"),
        "continue_on_listener_filters_timeout": l.get("continue_on_listener_filters_timeout"),
        "filter_chains": [filter_chain(fc) for fc in l.get("filter_chains", [])],
        "default_filter_chain": filter_chain(l["default_filter_chain"]) if "default_filter_chain" in l else None,
    }


def cluster(c):
    out = {"type": c.get("type"), "transport_socket": transport_socket(c.get("transport_socket"))}
    matches = c.get("transport_socket_matches")
    if matches:
        out["transport_socket_matches"] = [
            {"name": m.get("name"), "match": m.get("match", {}), "transport_socket": transport_socket(m.get("transport_socket"))}
            for m in matches
        ]
    return out


def endpoints(cla):
    out = []
    for group in cla.get("endpoints", []):
        for lb in group.get("lb_endpoints", []):
            addr = lb.get("endpoint", {}).get("address", {}).get("socket_address", {})
            md = lb.get("metadata", {}).get("filter_metadata", {}).get("envoy.transport_socket_match")
            out.append({"address": f"{addr.get('address')}:{addr.get('port_value')}", "transport_socket_match": md})
    return sorted(out, key=lambda e: e["address"])


def sidecar(path):
    with open(path) as f:
        dump = json.load(f)
    listeners, clusters, eps = {}, {}, {}
    for cfg in dump.get("configs", []):
        t = type_name(cfg)
        if t == "envoy.admin.v3.ListenersConfigDump":
            for dl in cfg.get("dynamic_listeners", []):
                l = (dl.get("active_state") or dl.get("warming_state") or {}).get("listener")
                if l:
                    listeners[l["name"]] = listener(l)
                if dl.get("error_state"):
                    listeners.setdefault(dl["name"], {})["error"] = dl["error_state"].get("details")
        elif t == "envoy.admin.v3.ClustersConfigDump":
            for dc in cfg.get("dynamic_active_clusters", []) + cfg.get("dynamic_warming_clusters", []):
                c = dc.get("cluster", {})
                if c.get("name") not in SKIP_CLUSTERS:
                    clusters[c["name"]] = cluster(c)
        elif t == "envoy.admin.v3.EndpointsConfigDump":
            for de in cfg.get("dynamic_endpoint_configs", []) + cfg.get("static_endpoint_configs", []):
                cla = de.get("endpoint_config", {})
                name = cla.get("cluster_name")
                if name and name not in SKIP_CLUSTERS:
                    eps[name] = endpoints(cla)
    # Kept: the echo service's outbound clusters and listeners, inbound clusters, and listeners on the
    # echo port or virtualInbound (the API server's `kubernetes` Service is not about mTLS here).
    keep = {n: c for n, c in clusters.items() if n.startswith("inbound|") or ECHO_HOST in n}
    listeners = {n: l for n, l in listeners.items() if n == "virtualInbound" or n.endswith(f"_{ECHO_PORT}")}
    for n, c in keep.items():
        if n in eps:
            c["endpoints"] = eps[n]
        elif c.get("type") == "STATIC" or c.get("type") == "EDS":
            c["endpoints"] = None
    return {"listeners": listeners, "clusters": keep}


def main():
    d = sys.argv[1]
    out = {"client": sidecar(f"{d}/client.json"), "server": sidecar(f"{d}/server.json")}
    json.dump(out, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
