//! `/debug/config_dump?proxyID=` body: what would be sent to a proxy, as JSON summaries (names,
//! types and key fields of clusters, listeners, routes and endpoints, plus the findings), written by
//! hand from the envoy-types messages (no protobuf reflection).

use envoy_types::pb::envoy::{
    config::{
        cluster::v3::{
            Cluster,
            cluster::{ClusterDiscoveryType, DiscoveryType, LbPolicy},
        },
        core::v3::Metadata,
        core::v3::{Address, HealthStatus, address},
        endpoint::v3::{ClusterLoadAssignment, lb_endpoint},
        listener::v3::{Filter, FilterChain, Listener, filter},
        route::v3::{
            RouteConfiguration, VirtualHost, route::Action, route_action::ClusterSpecifier,
            route_match::PathSpecifier,
        },
    },
    extensions::filters::network::{
        http_connection_manager::v3::{HttpConnectionManager, http_connection_manager::RouteSpecifier},
        tcp_proxy::v3::{TcpProxy, tcp_proxy},
    },
};
use envoy_types::pb::google::protobuf::value::Kind;
use prost::Message;
use serde_json::{Map, Value, json};

use crate::{
    Snapshot,
    cluster::generate_clusters,
    endpoint::generate_endpoints,
    filters::{HTTP_CONNECTION_MANAGER, TCP_PROXY},
    listener::generate_listeners,
    rds::generate_routes,
};
use model::{
    Finding, Severity,
    push::{ProxyContext, ProxyKind},
};

fn duration(d: &Option<envoy_types::pb::google::protobuf::Duration>) -> Value {
    match d {
        Some(d) if d.nanos == 0 => json!(format!("{}s", d.seconds)),
        Some(d) => json!(format!("{}.{:09}s", d.seconds, d.nanos)),
        None => Value::Null,
    }
}

fn address_text(a: &Option<Address>) -> String {
    match a.as_ref().and_then(|a| a.address.as_ref()) {
        Some(address::Address::SocketAddress(s)) => match &s.port_specifier {
            Some(envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(p)) => {
                format!("{}:{p}", s.address)
            }
            _ => s.address.clone(),
        },
        Some(address::Address::Pipe(p)) => format!("unix://{}", p.path),
        _ => String::new(),
    }
}

/// A cluster as JSON: name, type, load balancing, timeouts, EDS name, inline endpoints, TLS.
pub fn cluster_summary(c: &Cluster) -> Value {
    let kind = match c.cluster_discovery_type {
        Some(ClusterDiscoveryType::Type(t)) => {
            DiscoveryType::try_from(t).map(|t| t.as_str_name()).unwrap_or("UNKNOWN")
        }
        _ => "CUSTOM",
    };
    let mut m = Map::new();
    m.insert("name".into(), json!(c.name));
    m.insert("type".into(), json!(kind));
    m.insert(
        "lb_policy".into(),
        json!(LbPolicy::try_from(c.lb_policy).map(|p| p.as_str_name()).unwrap_or("UNKNOWN")),
    );
    m.insert("connect_timeout".into(), duration(&c.connect_timeout));
    if let Some(eds) = &c.eds_cluster_config {
        m.insert("eds_service_name".into(), json!(eds.service_name));
    }
    if let Some(la) = &c.load_assignment {
        m.insert("endpoints".into(), endpoints_summary(la)["localities"].clone());
    }
    if let Some(cb) = c.circuit_breakers.as_ref().and_then(|cb| cb.thresholds.first()) {
        m.insert(
            "circuit_breakers".into(),
            json!({
                "max_connections": cb.max_connections.as_ref().map(|v| v.value),
                "max_pending_requests": cb.max_pending_requests.as_ref().map(|v| v.value),
                "max_requests": cb.max_requests.as_ref().map(|v| v.value),
                "max_retries": cb.max_retries.as_ref().map(|v| v.value),
            }),
        );
    }
    if let Some(o) = &c.outlier_detection {
        m.insert(
            "outlier_detection".into(),
            json!({
                "consecutive_5xx": o.consecutive_5xx.as_ref().map(|v| v.value),
                "interval": duration(&o.interval),
                "base_ejection_time": duration(&o.base_ejection_time),
                "max_ejection_percent": o.max_ejection_percent.as_ref().map(|v| v.value),
            }),
        );
    }
    if let Some(ts) = &c.transport_socket {
        m.insert("transport_socket".into(), json!(ts.name));
    }
    if !c.typed_extension_protocol_options.is_empty() {
        m.insert("http_protocol_options".into(), json!(true));
    }
    Value::Object(m)
}

fn filter_summary(f: &Filter) -> Value {
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else { return json!({"name": f.name}) };
    if f.name == HTTP_CONNECTION_MANAGER
        && let Ok(hcm) = HttpConnectionManager::decode(any.value.as_slice())
    {
        return hcm_summary(&f.name, &hcm);
    }
    if f.name == TCP_PROXY
        && let Ok(tcp) = TcpProxy::decode(any.value.as_slice())
    {
        let target = match &tcp.cluster_specifier {
            Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => json!({"cluster": c}),
            Some(tcp_proxy::ClusterSpecifier::WeightedClusters(w)) => json!({
                "weighted_clusters": w.clusters.iter().map(|c| json!({"name": c.name, "weight": c.weight})).collect::<Vec<_>>()
            }),
            None => Value::Null,
        };
        return json!({"name": f.name, "stat_prefix": tcp.stat_prefix, "target": target});
    }
    json!({"name": f.name})
}

fn hcm_summary(name: &str, hcm: &HttpConnectionManager) -> Value {
    let routes = match &hcm.route_specifier {
        Some(RouteSpecifier::Rds(rds)) => json!({"rds": rds.route_config_name}),
        Some(RouteSpecifier::RouteConfig(rc)) => json!({"inline": route_summary(rc)}),
        _ => Value::Null,
    };
    json!({
        "name": name,
        "stat_prefix": hcm.stat_prefix,
        "routes": routes,
        "http_filters": hcm.http_filters.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
    })
}

/// A filter chain as JSON: name, match (server names, destination port, transport and application
/// protocols, destination prefix ranges), TLS, filters.
fn chain_summary(c: &FilterChain) -> Value {
    let m = c.filter_chain_match.as_ref();
    json!({
        "name": c.name,
        "server_names": m.map(|m| m.server_names.clone()).unwrap_or_default(),
        "destination_port": m.and_then(|m| m.destination_port.as_ref()).map(|p| p.value),
        "transport_protocol": m.map(|m| m.transport_protocol.clone()).unwrap_or_default(),
        "application_protocols": m.map(|m| m.application_protocols.clone()).unwrap_or_default(),
        "prefix_ranges": m.map(|m| m.prefix_ranges.iter().map(|r| format!("{}/{}", r.address_prefix, r.prefix_len.as_ref().map_or(0, |p| p.value))).collect::<Vec<_>>()).unwrap_or_default(),
        "tls": c.transport_socket.is_some(),
        "filters": c.filters.iter().map(filter_summary).collect::<Vec<_>>(),
    })
}

/// A listener as JSON: name, address, binding, listener filters, filter chains with their matches and
/// filters (route configuration names, TCP proxy targets), API listener.
pub fn listener_summary(l: &Listener) -> Value {
    let chains: Vec<Value> = l.filter_chains.iter().map(chain_summary).collect();
    let mut m = Map::new();
    m.insert("name".into(), json!(l.name));
    m.insert("address".into(), json!(address_text(&l.address)));
    if let Some(b) = &l.bind_to_port {
        m.insert("bind_to_port".into(), json!(b.value));
    }
    if let Some(b) = &l.use_original_dst {
        m.insert("use_original_dst".into(), json!(b.value));
    }
    m.insert(
        "listener_filters".into(),
        json!(l.listener_filters.iter().map(|f| f.name.clone()).collect::<Vec<_>>()),
    );
    m.insert("filter_chains".into(), json!(chains));
    if let Some(c) = &l.default_filter_chain {
        m.insert("default_filter_chain".into(), chain_summary(c));
    }
    if !l.additional_addresses.is_empty() {
        let extra: Vec<String> = l.additional_addresses.iter().map(|a| address_text(&a.address)).collect();
        m.insert("additional_addresses".into(), json!(extra));
    }
    if let Some(api) = l.api_listener.as_ref().and_then(|a| a.api_listener.as_ref())
        && let Ok(hcm) = HttpConnectionManager::decode(api.value.as_slice())
    {
        m.insert("api_listener".into(), hcm_summary(HTTP_CONNECTION_MANAGER, &hcm));
    }
    Value::Object(m)
}

/// `filter_metadata.istio.config` (`/apis/<group>/<version>/namespaces/<ns>/<kind>/<name>`), when set.
fn istio_config(metadata: &Option<Metadata>) -> Option<String> {
    let fields = &metadata.as_ref()?.filter_metadata.get("istio")?.fields;
    match fields.get("config")?.kind.as_ref()? {
        Kind::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn vhost_summary(v: &VirtualHost) -> Value {
    let routes: Vec<Value> = v
        .routes
        .iter()
        .map(|r| {
            let matcher = match r.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()) {
                Some(PathSpecifier::Prefix(p)) => json!({"prefix": p}),
                Some(PathSpecifier::Path(p)) => json!({"path": p}),
                Some(PathSpecifier::SafeRegex(re)) => json!({"regex": re.regex}),
                Some(PathSpecifier::PathSeparatedPrefix(p)) => json!({"path_separated_prefix": p}),
                Some(_) => json!("other"),
                None => Value::Null,
            };
            let action = match &r.action {
                Some(Action::Route(a)) => match &a.cluster_specifier {
                    Some(ClusterSpecifier::Cluster(c)) => json!({"cluster": c, "timeout": duration(&a.timeout)}),
                    Some(ClusterSpecifier::WeightedClusters(w)) => json!({
                        "weighted_clusters": w.clusters.iter().map(|c| json!({"name": c.name, "weight": c.weight.as_ref().map(|w| w.value)})).collect::<Vec<_>>(),
                        "timeout": duration(&a.timeout),
                    }),
                    _ => json!("route"),
                },
                Some(Action::Redirect(r)) => json!({"redirect": {"host": r.host_redirect, "response_code": r.response_code}}),
                Some(Action::DirectResponse(d)) => json!({"direct_response": d.status}),
                Some(Action::NonForwardingAction(_)) => json!("non_forwarding"),
                _ => Value::Null,
            };
            let mut route = json!({"name": r.name, "match": matcher, "action": action});
            // Istio's `filter_metadata.istio.config`: the VirtualService the route came from.
            if let Some(config) = istio_config(&r.metadata) {
                route["config"] = json!(config);
            }
            route
        })
        .collect();
    json!({"name": v.name, "domains": v.domains, "require_tls": v.require_tls, "routes": routes})
}

/// A route configuration as JSON: name and virtual hosts (domains, routes with match and action).
pub fn route_summary(rc: &RouteConfiguration) -> Value {
    json!({"name": rc.name, "virtual_hosts": rc.virtual_hosts.iter().map(vhost_summary).collect::<Vec<_>>()})
}

/// An assignment as JSON: cluster name and localities with weights and endpoints.
pub fn endpoints_summary(la: &ClusterLoadAssignment) -> Value {
    let localities: Vec<Value> = la
        .endpoints
        .iter()
        .map(|l| {
            let loc = l.locality.as_ref().map(|l| format!("{}/{}/{}", l.region, l.zone, l.sub_zone)).unwrap_or_default();
            let eps: Vec<Value> = l
                .lb_endpoints
                .iter()
                .map(|e| {
                    let addr = match &e.host_identifier {
                        Some(lb_endpoint::HostIdentifier::Endpoint(ep)) => address_text(&ep.address),
                        _ => String::new(),
                    };
                    json!({
                        "address": addr,
                        "weight": e.load_balancing_weight.as_ref().map(|w| w.value),
                        "health": HealthStatus::try_from(e.health_status).map(|h| h.as_str_name()).unwrap_or("UNKNOWN"),
                    })
                })
                .collect();
            json!({"locality": loc, "weight": l.load_balancing_weight.as_ref().map(|w| w.value), "endpoints": eps})
        })
        .collect();
    json!({"cluster_name": la.cluster_name, "localities": localities})
}

/// [`cluster_summary`] plus `config`, the DestinationRule applied to an `outbound|port|subset|host`
/// cluster (Istio puts it in the cluster's `filter_metadata.istio.config`; meshpilot's clusters do
/// not carry it, so it is looked up here as cluster generation does).
fn with_destination_rule(push: &Snapshot, proxy: &ProxyContext, c: &Cluster) -> Value {
    let mut out = cluster_summary(c);
    let mut parts = c.name.split('|');
    let (Some("outbound"), Some(_), Some(_), Some(host), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return out;
    };
    let scope = push.sidecar_scope(proxy);
    let Some(service) = scope.services().iter().find(|s| s.hostname.eq_ignore_ascii_case(host)) else {
        return out;
    };
    if let Some(key) = push.destination_rule(proxy, service).and_then(|dr| dr.keys.first().cloned()) {
        out["config"] = json!(crate::route::config_path(&key));
    }
    out
}

fn finding_json(f: &Finding) -> Value {
    json!({
        "severity": match f.severity { Severity::Dropped => "dropped", Severity::Unsupported => "unsupported", Severity::Warning => "warning" },
        "config": f.config.as_ref().map(|k| k.to_string()),
        "path": f.path,
        "resource": f.resource,
        "message": f.message,
    })
}

/// What meshpilot would send to `proxy` from `push`: `{version, proxy, clusters, listeners, routes,
/// endpoints, findings}`.
pub fn config_dump(push: &Snapshot, proxy: &ProxyContext) -> Value {
    let clusters = generate_clusters(push, proxy, &[]);
    let listeners = generate_listeners(push, proxy, &[]);
    let routes = generate_routes(push, proxy, &[]);
    let endpoints = generate_endpoints(push, proxy, &[]);
    let mut findings: Vec<&Finding> = push
        .findings()
        .iter()
        .chain(&clusters.findings)
        .chain(&listeners.findings)
        .chain(&routes.findings)
        .chain(&endpoints.findings)
        .collect();
    findings.sort();
    findings.dedup();
    json!({
        "version": push.version(),
        "proxy": {
            "id": proxy.id,
            "type": match proxy.kind { ProxyKind::Sidecar => "sidecar", ProxyKind::Router => "router" },
            "namespace": proxy.namespace,
            "ips": proxy.ips,
            "labels": proxy.labels,
            "proxyless_grpc": proxy.proxyless_grpc,
        },
        "clusters": clusters.resources.iter().map(|c| with_destination_rule(push, proxy, c)).collect::<Vec<_>>(),
        "listeners": listeners.resources.iter().map(listener_summary).collect::<Vec<_>>(),
        "routes": routes.resources.iter().map(route_summary).collect::<Vec<_>>(),
        "endpoints": endpoints.resources.iter().map(endpoints_summary).collect::<Vec<_>>(),
        "findings": findings.into_iter().map(finding_json).collect::<Vec<_>>(),
    })
}
