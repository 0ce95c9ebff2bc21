//! EnvoyFilter patches on generated resources (crate `envoyfilter` through the generators): each
//! `applyTo` kind, selection by namespace and workload, Istio's order, and the check that keeps a patch
//! Envoy would reject from reaching it (reported on the EnvoyFilter).

use crate::support;

use envoy_types::pb::envoy::{
    config::{
        cluster::v3::Cluster,
        listener::v3::{Listener, filter},
        route::v3::{RouteConfiguration, route},
    },
    extensions::filters::{
        http::lua::v3::Lua,
        network::http_connection_manager::v3::{HttpConnectionManager, http_filter},
    },
};
use meshpilot_networking::{cluster::generate_clusters, listener::generate_listeners, rds::generate_routes};
use model::{Finding, Severity};
use prost::Message;
use support::*;

/// A Lua HTTP filter patch (value of an HTTP_FILTER patch) whose code is `code`.
fn lua(code: &str) -> String {
    format!(
        r#"{{name: envoy.filters.http.lua, typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, inlineCode: "{code}"}}}}"#
    )
}

/// An EnvoyFilter document.
fn envoy_filter(namespace: &str, name: &str, extra_spec: &str, patches: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n{extra_spec}  configPatches:\n{patches}\n---\n"
    )
}

/// HTTP filter patch on the outbound port-80 listener's connection manager, `op` relative to the router.
fn http_patch(op: &str, value: &str) -> String {
    format!(
        r#"  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener:
        portNumber: 80
        filterChain: {{filter: {{name: envoy.filters.network.http_connection_manager, subFilter: {{name: envoy.filters.http.router}}}}}}
    patch: {{operation: {op}, value: {value}}}"#
    )
}

fn world(extra: &str) -> World {
    World::new(parse(&format!("{WEB_AND_DB}{extra}"), "ns1"))
}

/// The HTTP filter names of every connection manager of `listener`, per filter chain.
fn http_filters(listener: &Listener) -> Vec<Vec<String>> {
    connection_managers(listener)
        .iter()
        .map(|h| h.http_filters.iter().map(|f| f.name.clone()).collect())
        .collect()
}

fn connection_managers(listener: &Listener) -> Vec<HttpConnectionManager> {
    let mut out = Vec::new();
    for fc in listener.filter_chains.iter().chain(&listener.default_filter_chain) {
        for f in &fc.filters {
            if let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type
                && any.type_url.ends_with("HttpConnectionManager")
            {
                out.push(HttpConnectionManager::decode(any.value.as_slice()).unwrap());
            }
        }
    }
    out
}

fn listener<'a>(listeners: &'a [Listener], name: &str) -> &'a Listener {
    listeners.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("no listener {name}"))
}

fn lua_code(listener: &Listener) -> Vec<String> {
    let mut out = Vec::new();
    for hcm in connection_managers(listener) {
        for f in hcm.http_filters {
            if let Some(http_filter::ConfigType::TypedConfig(any)) = &f.config_type
                && any.type_url.ends_with("lua.v3.Lua")
            {
                #[allow(deprecated)]
                out.push(Lua::decode(any.value.as_slice()).unwrap().inline_code);
            }
        }
    }
    out
}

fn findings_of<'a>(findings: &'a [Finding], name: &str) -> Vec<&'a Finding> {
    findings.iter().filter(|f| f.config.as_ref().is_some_and(|k| k.name == name)).collect()
}

#[test]
fn http_filter_inserted_before_the_router_of_the_matched_listener_only() {
    let ef = envoy_filter("ns1", "lua", "", &http_patch("INSERT_BEFORE", &lua("-- hi")));
    let built = generate_listeners(&world(&ef).push(), &sidecar("ns1", &[]), &[]);
    let port80 = listener(&built.resources, "0.0.0.0_80");
    let filters = http_filters(port80);
    assert!(!filters.is_empty());
    for chain in &filters {
        let n = chain.len();
        assert_eq!(&chain[n - 2..], ["envoy.filters.http.lua", "envoy.filters.http.router"], "{chain:?}");
    }
    assert_eq!(lua_code(port80), ["-- hi"]);
    // Other listeners (virtualInbound's HTTP chains, the TCP listener) are untouched.
    for l in built.resources.iter().filter(|l| l.name != "0.0.0.0_80") {
        assert!(lua_code(l).is_empty(), "{} patched", l.name);
    }
    assert!(built.findings.iter().all(|f| f.config.is_none()), "{:?}", built.findings);
}

#[test]
fn workload_selector_and_namespace_decide_who_is_patched() {
    let ef = envoy_filter(
        "ns1",
        "lua",
        "  workloadSelector: {labels: {app: a}}\n",
        &http_patch("INSERT_BEFORE", &lua("-- a")),
    );
    let w = world(&ef);
    let push = w.push();
    let selected = generate_listeners(&push, &sidecar("ns1", &[("app", "a")]), &[]);
    let other = generate_listeners(&push, &sidecar("ns1", &[("app", "b")]), &[]);
    let elsewhere = generate_listeners(&push, &sidecar("ns2", &[("app", "a")]), &[]);
    assert_eq!(lua_code(listener(&selected.resources, "0.0.0.0_80")), ["-- a"]);
    assert!(lua_code(listener(&other.resources, "0.0.0.0_80")).is_empty());
    assert!(elsewhere.resources.iter().all(|l| lua_code(l).is_empty()));
}

#[test]
fn patches_apply_in_istio_order_priority_then_root_namespace_then_age() {
    // Each INSERT_FIRST puts its filter in front, so the filter applied last comes first.
    let first = |code: &str| {
        format!(
            "  - applyTo: HTTP_FILTER\n    match: {{context: SIDECAR_OUTBOUND, listener: {{portNumber: 80}}}}\n    patch: {{operation: INSERT_FIRST, value: {}}}",
            lua(code)
        )
    };
    let docs = [
        envoy_filter("ns1", "late", "  priority: 10\n", &first("ns1 priority 10")),
        envoy_filter("ns1", "b-local", "", &first("ns1 b")),
        envoy_filter("istio-system", "z-root", "", &first("root z")),
        envoy_filter("ns1", "a-local", "", &first("ns1 a")),
        envoy_filter("istio-system", "early", "  priority: -5\n", &first("root priority -5")),
    ]
    .concat();
    let built = generate_listeners(&world(&docs).push(), &sidecar("ns1", &[]), &[]);
    let codes = lua_code(listener(&built.resources, "0.0.0.0_80"));
    // Applied: root -5, root z (root first at equal priority), ns1 a, ns1 b (by name), ns1 10.
    assert_eq!(codes, ["ns1 priority 10", "ns1 b", "ns1 a", "root z", "root priority -5"]);
}

#[test]
fn a_filter_added_after_the_router_is_kept_from_envoy_and_reported_and_other_filters_still_apply() {
    let docs = [
        envoy_filter("ns1", "good", "", &http_patch("INSERT_BEFORE", &lua("-- good"))),
        envoy_filter(
            "ns1",
            "bad",
            "",
            "  - applyTo: HTTP_FILTER\n    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 80}}\n    patch: {operation: ADD, value: {name: after.router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua}}}",
        ),
    ]
    .concat();
    let built = generate_listeners(&world(&docs).push(), &sidecar("ns1", &[]), &[]);
    let port80 = listener(&built.resources, "0.0.0.0_80");
    for chain in http_filters(port80) {
        assert_eq!(chain.last().map(String::as_str), Some("envoy.filters.http.router"), "{chain:?}");
        assert!(!chain.contains(&"after.router".to_string()));
    }
    assert_eq!(lua_code(port80), ["-- good"]);
    let bad = findings_of(&built.findings, "bad");
    assert_eq!(bad.len(), 1, "{:?}", built.findings);
    assert_eq!(bad[0].severity, Severity::Dropped);
    assert_eq!(bad[0].resource, "0.0.0.0_80");
    assert!(bad[0].message.contains("envoy.filters.http.router"), "{}", bad[0].message);
    assert!(findings_of(&built.findings, "good").is_empty());
}

#[test]
fn a_value_that_is_not_its_envoy_type_is_reported_with_its_field_path_and_skipped() {
    let docs = [
        envoy_filter("ns1", "typo", "", &http_patch("INSERT_BEFORE", "{name: x, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, inlineCode: 7, nope: 1}}")),
        envoy_filter("ns1", "fine", "", &http_patch("INSERT_BEFORE", &lua("-- fine"))),
    ]
    .concat();
    let built = generate_listeners(&world(&docs).push(), &sidecar("ns1", &[]), &[]);
    assert_eq!(lua_code(listener(&built.resources, "0.0.0.0_80")), ["-- fine"]);
    let typo = findings_of(&built.findings, "typo");
    assert_eq!(typo.len(), 1, "{:?}", built.findings);
    assert_eq!(typo[0].path, "spec.configPatches[0].patch.value");
    assert_eq!(typo[0].severity, Severity::Dropped);
}

#[test]
fn unknown_fields_are_ignored_with_a_warning_as_istiod_reads_leniently() {
    let ef = envoy_filter(
        "ns1",
        "newer",
        "",
        &http_patch(
            "INSERT_BEFORE",
            "{name: envoy.filters.http.lua, fromTheFuture: true, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, inlineCode: '-- new'}}",
        ),
    );
    let built = generate_listeners(&world(&ef).push(), &sidecar("ns1", &[]), &[]);
    assert_eq!(lua_code(listener(&built.resources, "0.0.0.0_80")), ["-- new"]);
    let newer = findings_of(&built.findings, "newer");
    assert_eq!(newer.len(), 1);
    assert_eq!(newer[0].severity, Severity::Warning);
    assert!(newer[0].message.contains("fromTheFuture"), "{}", newer[0].message);
}

#[test]
fn network_filter_merge_merges_the_connection_manager_config() {
    let ef = envoy_filter(
        "ns1",
        "server-name",
        "",
        "  - applyTo: NETWORK_FILTER\n    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 80, filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}\n    patch:\n      operation: MERGE\n      value: {typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, server_name: meshpilot-test, stream_idle_timeout: 7s}}",
    );
    let built = generate_listeners(&world(&ef).push(), &sidecar("ns1", &[]), &[]);
    let hcms = connection_managers(listener(&built.resources, "0.0.0.0_80"));
    assert!(!hcms.is_empty());
    for h in hcms {
        assert_eq!(h.server_name, "meshpilot-test");
        assert_eq!(h.stream_idle_timeout.map(|d| d.seconds), Some(7));
        // The rest of the generated config survives the merge.
        assert!(h.http_filters.iter().any(|f| f.name == "envoy.filters.http.router"));
    }
}

#[test]
fn listener_remove_add_and_merge() {
    let docs = envoy_filter(
        "ns1",
        "listeners",
        "",
        r#"  - applyTo: LISTENER
    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 5432}}
    patch: {operation: REMOVE}
  - applyTo: LISTENER
    match: {context: SIDECAR_OUTBOUND, listener: {name: 0.0.0.0_80}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 1024}}
  - applyTo: LISTENER
    patch:
      operation: ADD
      value:
        name: extra
        address: {socket_address: {address: 127.0.0.1, port_value: 9999}}
        filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: extra, cluster: BlackHoleCluster}}]}]"#,
    );
    let built = generate_listeners(&world(&docs).push(), &sidecar("ns1", &[]), &[]);
    let names: Vec<&str> = built.resources.iter().map(|l| l.name.as_str()).collect();
    assert!(!names.contains(&"10.1.1.2_5432"), "{names:?}");
    assert!(names.contains(&"extra"), "{names:?}");
    assert_eq!(
        listener(&built.resources, "0.0.0.0_80").per_connection_buffer_limit_bytes.map(|v| v.value),
        Some(1024)
    );
    // Gateways do not get a sidecar-only ADD... but this one has no context (ANY): it goes to gateways too.
    let gw = generate_listeners(&world(&docs).push(), &router("ns1", &[]), &[]);
    assert!(gw.resources.iter().any(|l| l.name == "extra"));
}

#[test]
fn cluster_merge_remove_and_add() {
    let docs = envoy_filter(
        "ns1",
        "clusters",
        "",
        r#"  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: web.ns1.svc.cluster.local, portNumber: 80}}
    patch: {operation: MERGE, value: {connect_timeout: 3s, per_connection_buffer_limit_bytes: 2048}}
  - applyTo: CLUSTER
    match: {cluster: {name: "outbound|5432||db.ns1.svc.cluster.local"}}
    patch: {operation: REMOVE}
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND}
    patch:
      operation: ADD
      value: {name: extra-cluster, type: STATIC, connect_timeout: 1s, load_assignment: {cluster_name: extra-cluster}}"#,
    );
    let built = generate_clusters(&world(&docs).push(), &sidecar("ns1", &[]), &[]);
    let find = |n: &str| built.resources.iter().find(|c| c.name == n);
    let web: &Cluster = find("outbound|80||web.ns1.svc.cluster.local").expect("web cluster");
    // A Duration is replaced whole (Istio's merge), not merged field by field.
    assert_eq!(web.connect_timeout.map(|d| (d.seconds, d.nanos)), Some((3, 0)));
    assert_eq!(web.per_connection_buffer_limit_bytes.map(|v| v.value), Some(2048));
    assert!(find("outbound|5432||db.ns1.svc.cluster.local").is_none());
    assert!(find("extra-cluster").is_some());
    let names: Vec<&str> = built.resources.iter().map(|c| c.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[test]
fn route_configuration_virtual_host_and_route_patches() {
    let docs = envoy_filter(
        "ns1",
        "routes",
        "",
        r#"  - applyTo: ROUTE_CONFIGURATION
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {portNumber: 80}}
    patch: {operation: MERGE, value: {response_headers_to_add: [{header: {key: x-patched, value: "yes"}}]}}
  - applyTo: HTTP_ROUTE
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {portNumber: 80, vhost: {name: "web.ns1.svc.cluster.local:80"}}}
    patch:
      operation: INSERT_FIRST
      value: {name: teapot, match: {prefix: /teapot}, direct_response: {status: 418}}
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: allow_any}}}
    patch: {operation: REMOVE}"#,
    );
    let built = generate_routes(&world(&docs).push(), &sidecar("ns1", &[]), &[]);
    let rc: &RouteConfiguration = built.resources.iter().find(|r| r.name == "80").expect("route 80");
    assert!(
        rc.response_headers_to_add.iter().any(|h| h.header.as_ref().is_some_and(|h| h.key == "x-patched"))
    );
    let web = rc.virtual_hosts.iter().find(|v| v.name == "web.ns1.svc.cluster.local:80").expect("web vhost");
    assert_eq!(web.routes[0].name, "teapot");
    assert!(matches!(web.routes[0].action, Some(route::Action::DirectResponse(_))));
    assert!(web.routes.len() > 1);
    assert!(rc.virtual_hosts.iter().all(|v| v.name != "allow_any"), "allow_any kept");
}

#[test]
fn proxy_version_and_metadata_matches() {
    let docs = envoy_filter(
        "ns1",
        "versioned",
        "",
        r#"  - applyTo: LISTENER
    match: {context: SIDECAR_OUTBOUND, proxy: {proxyVersion: '^1\.2[0-9].*', metadata: {MARK: on}}, listener: {name: 0.0.0.0_80}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 77}}"#,
    );
    let w = world(&docs);
    let push = w.push();
    let limit = |version: &str, mark: Option<&str>| {
        let mut p = sidecar("ns1", &[]);
        p.istio_version = version.to_string();
        if let Some(m) = mark {
            p.metadata = std::sync::Arc::new([("MARK".to_string(), m.to_string())].into_iter().collect());
        }
        listener(&generate_listeners(&push, &p, &[]).resources, "0.0.0.0_80")
            .per_connection_buffer_limit_bytes
            .map(|v| v.value)
    };
    assert_eq!(limit("1.27.0", Some("on")), Some(77));
    assert_eq!(limit("1.19.0", Some("on")), None);
    assert_eq!(limit("", Some("on")), None);
    assert_eq!(limit("1.27.0", None), None);
    assert_eq!(limit("1.27.0", Some("off")), None);
}

#[test]
fn bootstrap_patches_are_reported_not_applied() {
    let docs = envoy_filter(
        "ns1",
        "boot",
        "",
        "  - applyTo: BOOTSTRAP\n    patch: {operation: MERGE, value: {node: {id: x}}}",
    );
    let built = generate_listeners(&world(&docs).push(), &sidecar("ns1", &[]), &[]);
    let boot = findings_of(&built.findings, "boot");
    assert_eq!(boot.len(), 1);
    assert_eq!(boot[0].severity, Severity::Unsupported);
}

#[test]
fn extension_config_patches_are_served_over_ecds_by_name() {
    let docs = envoy_filter(
        "ns1",
        "ecds",
        "",
        r#"  - applyTo: EXTENSION_CONFIG
    patch:
      operation: ADD
      value:
        name: my-lua
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, default_source: {inline_string: "-- ecds"}}
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 80, filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}}
    patch:
      operation: INSERT_BEFORE
      value: {name: my-lua, config_discovery: {config_source: {ads: {}}, type_urls: [type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua]}}"#,
    );
    let w = world(&docs);
    let push = w.push();
    let proxy = sidecar("ns1", &[]);
    let ecds =
        meshpilot_networking::extension::generate_extension_configs(&push, &proxy, &["my-lua".to_string()]);
    assert_eq!(ecds.resources.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["my-lua"]);
    let unknown =
        meshpilot_networking::extension::generate_extension_configs(&push, &proxy, &["other".to_string()]);
    assert!(unknown.resources.is_empty());
    let listeners = generate_listeners(&push, &proxy, &[]);
    for chain in http_filters(listener(&listeners.resources, "0.0.0.0_80")) {
        let n = chain.len();
        assert_eq!(&chain[n - 2..], ["my-lua", "envoy.filters.http.router"]);
    }
}
