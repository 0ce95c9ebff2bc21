//! Route translation against Istio's expectations, and Envoy as the oracle for what it accepts.

use std::path::{Path, PathBuf};

use api::{
    Kind,
    networking::virtual_service::{Destination, VirtualService},
};
use envoy_types::pb::{
    envoy::{
        config::{
            core::v3::{HeaderValueOption, data_source, header_value_option::HeaderAppendAction},
            route::v3::{
                RedirectAction, RetryPolicy, Route, RouteAction, RouteMatch, WeightedCluster,
                header_matcher::HeaderMatchSpecifier, query_parameter_matcher::QueryParameterMatchSpecifier,
                redirect_action, retry_policy, route, route_action, route_match::PathSpecifier,
                weighted_cluster,
            },
        },
        extensions::{
            filters::{
                common::fault::v3::fault_delay::FaultDelaySecifier,
                http::{
                    cors::v3::CorsPolicy,
                    fault::v3::{HttpFault, fault_abort},
                },
            },
            retry::priority::previous_priorities::v3::PreviousPrioritiesConfig,
        },
        r#type::{
            matcher::v3::{MetadataMatcher, StringMatcher, metadata_matcher, string_matcher, value_matcher},
            v3::{FractionalPercent, fractional_percent::DenominatorType},
        },
    },
    google::protobuf::{BoolValue, Duration, UInt32Value, value},
};
use model::{
    ConfigKey,
    push::{MESH_GATEWAY, resolve_gateway_name},
};
use serde_json::json;

use super::{actions::hundredths, *};
use crate::check::envoy_oracle;

fn key() -> ConfigKey {
    ConfigKey { kind: Kind::VirtualService, namespace: "default".into(), name: "reviews".into() }
}

/// `outbound|<port or 80>|<subset>|<host>`; the host `unknown` is not known (Istio still names its cluster),
/// the host `unnamed` is not known and has no port to name a cluster with.
fn cluster_for(d: &Destination) -> DestinationCluster {
    let port = d.port.as_ref().map_or(80, |p| p.number);
    let name = format!("outbound|{port}|{}|{}", d.subset, d.host);
    match d.host.as_str() {
        "unknown" => DestinationCluster::Unknown(name),
        "unnamed" => DestinationCluster::Unnamed,
        _ => DestinationCluster::Service(name),
    }
}

fn vs(spec: serde_json::Value) -> VirtualService {
    serde_json::from_value(spec).expect("VirtualService spec")
}

struct Table {
    port: u32,
    gateways: Vec<String>,
    labels: BTreeMap<String, String>,
    namespace: String,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            port: 80,
            gateways: vec![MESH_GATEWAY.into()],
            labels: BTreeMap::new(),
            namespace: "default".into(),
        }
    }
}

impl Table {
    fn run_with(&self, vs: &VirtualService, key: &ConfigKey, check: bool) -> (Vec<Route>, Vec<Finding>) {
        let ctx = RouteContext {
            listener_port: self.port,
            gateways: &self.gateways,
            proxy_labels: &self.labels,
            proxy_namespace: &self.namespace,
            cluster_for: &cluster_for,
            hash_for: None,
        };
        let mut findings = Vec::new();
        let routes = translate(vs, key, &ctx, &mut findings, check);
        (routes, findings)
    }
}

fn run(spec: serde_json::Value) -> (Vec<Route>, Vec<Finding>) {
    Table::default().run_with(&vs(spec), &key(), true)
}

// ===== Envoy as the oracle =====

fn corpus_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/istio-testdata"))
}

fn yaml_files(dir: &Path, recursive_networking: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if recursive_networking {
                yaml_files(&path, true, out);
            }
        } else if path.extension().is_some_and(|e| e == "yaml")
            && (!recursive_networking || path.parent().is_some_and(|p| p.ends_with("networking")))
        {
            out.push(path);
        }
    }
}

/// Every VirtualService of the shared corpus.
fn corpus_virtual_services() -> Vec<(ConfigKey, VirtualService, String)> {
    let root = corpus_root();
    assert!(root.exists(), "shared Istio test data not found at {}", root.display());
    let mut files = Vec::new();
    yaml_files(&root.join("tests/testdata/config"), false, &mut files);
    yaml_files(&root.join("samples"), true, &mut files);
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read corpus file");
        let name = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        for doc in config::parse::parse_text(&name, &text, &config::parse::ParseOptions::default()) {
            if let Some(config) = doc.config
                && let api::Spec::VirtualService(vs) = &config.spec
            {
                out.push((config.key(), (**vs).clone(), name.clone()));
            }
        }
    }
    out
}

/// Route tables that exercise as many matches of `vs` as possible: the mesh with no labels, and
/// every gateway the VirtualService names with the union of its `sourceLabels`.
fn tables_for(vs: &VirtualService, key: &ConfigKey) -> Vec<Table> {
    let mut gateways: Vec<String> = vec![MESH_GATEWAY.into()];
    let mut labels = BTreeMap::new();
    let mut namespace = key.namespace.clone();
    for g in vs
        .gateways
        .iter()
        .chain(vs.http.iter().flat_map(|h| h.r#match.iter().flat_map(|m| m.gateways.iter())))
    {
        if g != MESH_GATEWAY {
            gateways.push(resolve_gateway_name(g, &key.namespace));
        }
    }
    for m in vs.http.iter().flat_map(|h| h.r#match.iter()) {
        labels.extend(m.source_labels.clone());
        if !m.source_namespace.is_empty() {
            namespace = m.source_namespace.clone();
        }
    }
    vec![Table { port: 0, ..Table::default() }, Table { port: 0, gateways, labels, namespace }]
}

// ===== Helpers for assertions =====

fn action(r: &Route) -> &RouteAction {
    match &r.action {
        Some(route::Action::Route(a)) => a,
        other => panic!("not a route action: {other:?}"),
    }
}

fn cluster(r: &Route) -> &str {
    match &action(r).cluster_specifier {
        Some(route_action::ClusterSpecifier::Cluster(c)) => c,
        other => panic!("not a single cluster: {other:?}"),
    }
}

fn weighted(r: &Route) -> &WeightedCluster {
    match &action(r).cluster_specifier {
        Some(route_action::ClusterSpecifier::WeightedClusters(w)) => w,
        other => panic!("not weighted clusters: {other:?}"),
    }
}

fn rmatch(r: &Route) -> &RouteMatch {
    r.r#match.as_ref().expect("match")
}

fn fault(r: &Route) -> HttpFault {
    use prost::Message;
    HttpFault::decode(r.typed_per_filter_config[FAULT_FILTER].value.as_slice()).expect("HTTPFault")
}

fn cors(r: &Route) -> CorsPolicy {
    use prost::Message;
    CorsPolicy::decode(r.typed_per_filter_config[CORS_FILTER].value.as_slice()).expect("CorsPolicy")
}

fn exact(v: &str) -> Option<HeaderMatchSpecifier> {
    Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
        match_pattern: Some(string_matcher::MatchPattern::Exact(v.into())),
        ..Default::default()
    }))
}

fn header_kv(o: &HeaderValueOption) -> (&str, &str, i32) {
    let h = o.header.as_ref().expect("header");
    (h.key.as_str(), h.value.as_str(), o.append_action)
}

fn paths(findings: &[Finding], severity: Severity) -> Vec<&str> {
    findings.iter().filter(|f| f.severity == severity).map(|f| f.path.as_str()).collect()
}

const OVERWRITE: i32 = HeaderAppendAction::OverwriteIfExistsOrAdd as i32;
const APPEND: i32 = HeaderAppendAction::AppendIfExistsOrAdd as i32;

fn dest(host: &str) -> serde_json::Value {
    json!({"destination": {"host": host}})
}

// ===== Matches =====

#[test]
fn a_route_without_match_is_a_catch_all_and_ends_the_virtual_service() {
    let (routes, findings) = run(json!({"http": [
        {"route": [dest("a")]},
        {"match": [{"uri": {"prefix": "/x"}}], "route": [dest("b")]},
    ]}));
    assert!(findings.is_empty(), "{findings:?}");
    assert_eq!(routes.len(), 1);
    let m = rmatch(&routes[0]);
    assert_eq!(m.path_specifier, Some(PathSpecifier::Prefix("/".into())));
    assert_eq!(m.case_sensitive, None);
    assert_eq!(routes[0].name, "");
}

#[test]
fn one_route_per_match_named_as_istio_does() {
    let (routes, _) = run(json!({"http": [
        {"name": "canary", "match": [{"name": "jason", "uri": {"exact": "/a"}}, {"uri": {"exact": "/b"}}],
         "route": [dest("a")]},
        {"match": [{"name": "only-match", "uri": {"exact": "/c"}}], "route": [dest("a")]},
    ]}));
    let names: Vec<&str> = routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["canary.jason", "canary", ".only-match"]);
}

#[test]
fn uri_matches() {
    let (routes, _) = run(json!({"http": [{"match": [
        {"uri": {"exact": "/exact"}},
        {"uri": {"prefix": "/prefix"}, "ignoreUriCase": true},
        {"uri": {"regex": "/re/[0-9]+"}},
    ], "route": [dest("a")]}]}));
    assert_eq!(rmatch(&routes[0]).path_specifier, Some(PathSpecifier::Path("/exact".into())));
    assert_eq!(rmatch(&routes[0]).case_sensitive, Some(BoolValue { value: true }));
    assert_eq!(rmatch(&routes[1]).path_specifier, Some(PathSpecifier::Prefix("/prefix".into())));
    assert_eq!(rmatch(&routes[1]).case_sensitive, Some(BoolValue { value: false }));
    let Some(PathSpecifier::SafeRegex(re)) = &rmatch(&routes[2]).path_specifier else { panic!("regex") };
    assert_eq!(re.regex, "/re/[0-9]+");
    // Like Istio, no engine is named: Envoy's default (and only) engine is Google RE2.
    assert_eq!(re.engine_type, None);
}

#[test]
fn header_matches_follow_istio() {
    let (routes, _) = run(json!({"http": [{"match": [{
        "headers": {
            "x-exact": {"exact": "v"},
            "x-prefix": {"prefix": "p"},
            "x-regex": {"regex": "r.*"},
            "x-present": {},
            "x-star": {"regex": "*"},
        },
        "withoutHeaders": {"x-absent": {}, "x-not": {"exact": "no"}},
        "method": {"exact": "GET"},
        "authority": {"prefix": "api."},
        "scheme": {"exact": "https"},
    }], "route": [dest("a")]}]}));
    let headers = &rmatch(&routes[0]).headers;
    let names: Vec<&str> = headers.iter().map(|h| h.name.as_str()).collect();
    // Header and withoutHeaders matchers sorted by name, then :method, :authority, :scheme.
    assert_eq!(
        names,
        [
            "x-absent",
            "x-exact",
            "x-not",
            "x-prefix",
            "x-present",
            "x-regex",
            "x-star",
            ":method",
            ":authority",
            ":scheme"
        ]
    );
    let by_name = |n: &str| headers.iter().find(|h| h.name == n).unwrap();
    assert_eq!(by_name("x-exact").header_match_specifier, exact("v"));
    assert_eq!(by_name("x-present").header_match_specifier, Some(HeaderMatchSpecifier::PresentMatch(true)));
    assert_eq!(by_name("x-star").header_match_specifier, Some(HeaderMatchSpecifier::PresentMatch(true)));
    let Some(HeaderMatchSpecifier::StringMatch(re)) = &by_name("x-regex").header_match_specifier else {
        panic!()
    };
    assert!(
        matches!(&re.match_pattern, Some(string_matcher::MatchPattern::SafeRegex(r)) if r.regex == "r.*")
    );
    let absent = by_name("x-absent");
    assert!(absent.invert_match);
    assert!(!absent.treat_missing_header_as_empty);
    assert_eq!(absent.header_match_specifier, Some(HeaderMatchSpecifier::PresentMatch(true)));
    let not = by_name("x-not");
    assert!(not.invert_match && not.treat_missing_header_as_empty);
    assert_eq!(by_name(":method").header_match_specifier, exact("GET"));
    assert!(!by_name(":method").invert_match);
}

#[test]
fn query_parameter_matches() {
    let (routes, _) = run(json!({"http": [{"match": [{
        "queryParams": {"a": {"exact": "1"}, "b": {"regex": "\\d+"}, "c": {}},
    }], "route": [dest("a")]}]}));
    let q = &rmatch(&routes[0]).query_parameters;
    assert_eq!(q.len(), 3);
    assert_eq!(q[0].name, "a");
    assert_eq!(
        q[0].query_parameter_match_specifier,
        Some(QueryParameterMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::Exact("1".into())),
            ..Default::default()
        }))
    );
    assert_eq!(q[2].query_parameter_match_specifier, Some(QueryParameterMatchSpecifier::PresentMatch(true)));
}

#[test]
fn jwt_claim_headers_become_dynamic_metadata_matchers() {
    let (routes, _) = run(json!({"http": [{"match": [{
        "headers": {"@request.auth.claims.group": {"exact": "admin"}},
        "withoutHeaders": {"@request.auth.claims[org][team]": {"prefix": "x"}},
    }], "route": [dest("a")]}]}));
    let m = rmatch(&routes[0]);
    assert!(m.headers.is_empty());
    assert_eq!(m.dynamic_metadata.len(), 2);
    let keys = |mm: &MetadataMatcher| -> Vec<String> {
        mm.path
            .iter()
            .map(|s| match &s.segment {
                Some(metadata_matcher::path_segment::Segment::Key(k)) => k.clone(),
                None => String::new(),
            })
            .collect()
    };
    assert_eq!(m.dynamic_metadata[0].filter, "envoy.filters.http.jwt_authn");
    assert_eq!(keys(&m.dynamic_metadata[0]), ["payload", "group"]);
    assert!(!m.dynamic_metadata[0].invert);
    assert_eq!(keys(&m.dynamic_metadata[1]), ["payload", "org", "team"]);
    assert!(m.dynamic_metadata[1].invert);
    // The value matches the claim or any element of a list claim.
    let Some(value_matcher::MatchPattern::OrMatch(or)) =
        &m.dynamic_metadata[0].value.as_ref().unwrap().match_pattern
    else {
        panic!("or matcher")
    };
    assert_eq!(or.value_matchers.len(), 2);
    assert!(matches!(or.value_matchers[0].match_pattern, Some(value_matcher::MatchPattern::ListMatch(_))));
}

#[test]
fn a_catch_all_match_ends_the_virtual_service() {
    let (routes, _) = run(json!({"http": [
        {"match": [{"uri": {"prefix": "/"}}, {"uri": {"prefix": "/never"}}], "route": [dest("a")]},
        {"route": [dest("b")]},
    ]}));
    assert_eq!(routes.len(), 1);
    // A prefix `/` with a header condition is not a catch-all.
    let (routes, _) = run(json!({"http": [
        {"match": [{"uri": {"prefix": "/"}, "headers": {"x": {"exact": "1"}}}], "route": [dest("a")]},
        {"route": [dest("b")]},
    ]}));
    assert_eq!(routes.len(), 2);
}

#[test]
fn port_gateways_and_source_are_evaluated_for_the_proxy() {
    let spec = vs(json!({"http": [{"match": [
        {"name": "port-8080", "port": 8080, "uri": {"prefix": "/1"}},
        {"name": "port-80", "port": 80, "uri": {"prefix": "/2"}},
        {"name": "gw-short", "gateways": ["my-gw"], "uri": {"prefix": "/3"}},
        {"name": "gw-mesh", "gateways": ["mesh"], "uri": {"prefix": "/4"}},
        {"name": "labels", "sourceLabels": {"app": "web"}, "uri": {"prefix": "/5"}},
        {"name": "labels-ns", "sourceLabels": {"app": "web"}, "sourceNamespace": "other", "uri": {"prefix": "/6"}},
    ], "route": [dest("a")]}]}));
    let names = |t: &Table| -> Vec<String> {
        t.run_with(&spec, &key(), true).0.into_iter().map(|r| r.name).collect()
    };
    assert_eq!(names(&Table::default()), [".port-80", ".gw-mesh"]);
    let web = Table { labels: BTreeMap::from([("app".into(), "web".into())]), ..Table::default() };
    assert_eq!(names(&web), [".port-80", ".gw-mesh", ".labels"]);
    let gateway = Table { gateways: vec!["default/my-gw".into()], ..Table::default() };
    assert_eq!(names(&gateway), [".port-80", ".gw-short"]);
    // Port 0: the route table serves several ports, so no port is excluded.
    let any_port = Table { port: 0, ..Table::default() };
    assert_eq!(names(&any_port), [".port-8080", ".port-80", ".gw-mesh"]);
}

#[test]
fn stat_prefix_is_set_from_the_match() {
    let (routes, findings) = run(
        json!({"http": [{"match": [{"uri": {"prefix": "/a"}, "statPrefix": "canary"}], "route": [dest("a")]}]}),
    );
    assert!(findings.is_empty());
    assert_eq!(routes[0].stat_prefix, "canary");
}

// ===== Destinations =====

#[test]
fn single_destination_with_istio_defaults() {
    let (routes, findings) = run(json!({"http": [{"match": [{"uri": {"prefix": "/api"}}], "route": [
        {"destination": {"host": "reviews.default.svc.cluster.local", "subset": "v2", "port": {"number": 9080}}}
    ]}]}));
    assert!(findings.is_empty());
    let r = &routes[0];
    assert_eq!(cluster(r), "outbound|9080|v2|reviews.default.svc.cluster.local");
    let a = action(r);
    // No timeout unless the VirtualService sets one.
    assert_eq!(a.timeout, Some(Duration { seconds: 0, nanos: 0 }));
    #[allow(deprecated)]
    let max_grpc = a.max_grpc_timeout;
    assert_eq!(max_grpc, Some(Duration { seconds: 0, nanos: 0 }));
    // Istio's default retry policy.
    let retry = a.retry_policy.as_ref().expect("default retry policy");
    assert_eq!(retry.num_retries, Some(UInt32Value { value: 2 }));
    assert_eq!(retry.retry_on, "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes");
    assert!(retry.retriable_status_codes.is_empty());
    assert_eq!(retry.host_selection_retry_max_attempts, 5);
    assert_eq!(retry.retry_host_predicate.len(), 1);
    assert_eq!(retry.retry_host_predicate[0].name, "envoy.retry_host_predicates.previous_hosts");
    let Some(retry_policy::retry_host_predicate::ConfigType::TypedConfig(any)) =
        &retry.retry_host_predicate[0].config_type
    else {
        panic!("typed config")
    };
    assert_eq!(
        any.type_url,
        "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"
    );
    assert_eq!(r.decorator.as_ref().unwrap().operation, "reviews.default.svc.cluster.local:9080/api*");
    let meta = &r.metadata.as_ref().unwrap().filter_metadata["istio"].fields["config"];
    assert_eq!(
        meta.kind,
        Some(value::Kind::StringValue(
            "/apis/networking.istio.io/v1/namespaces/default/virtual-service/reviews".into()
        ))
    );
}

#[test]
fn weighted_destinations() {
    let (routes, findings) = run(json!({"http": [{"route": [
        {"destination": {"host": "a", "subset": "v1"}, "weight": 75,
         "headers": {"request": {"set": {"x-v": "1", ":authority": "a.internal"}}, "response": {"remove": ["x-debug"]}}},
        {"destination": {"host": "a", "subset": "v2"}, "weight": 25},
        {"destination": {"host": "a", "subset": "v3"}, "weight": 0},
    ]}]}));
    assert!(findings.is_empty(), "{findings:?}");
    let w = weighted(&routes[0]);
    let got: Vec<(&str, u32)> =
        w.clusters.iter().map(|c| (c.name.as_str(), c.weight.unwrap().value)).collect();
    assert_eq!(got, [("outbound|80|v1|a", 75), ("outbound|80|v2|a", 25)]);
    // Envoy sums the weights itself (Istio no longer sets the deprecated total_weight).
    #[allow(deprecated)]
    let total = w.total_weight;
    assert_eq!(total, None);
    let v1 = &w.clusters[0];
    assert_eq!(header_kv(&v1.request_headers_to_add[0]), ("x-v", "1", OVERWRITE));
    assert_eq!(v1.response_headers_to_remove, ["x-debug"]);
    assert_eq!(
        v1.host_rewrite_specifier,
        Some(weighted_cluster::cluster_weight::HostRewriteSpecifier::HostRewriteLiteral("a.internal".into()))
    );
    // Several clusters: the decorator names the VirtualService.
    assert_eq!(routes[0].decorator.as_ref().unwrap().operation, "reviews:80/*");
}

#[test]
fn all_zero_weights_drop_the_route() {
    let (routes, findings) = run(json!({"http": [
        {"match": [{"uri": {"prefix": "/a"}}],
         "route": [{"destination": {"host": "a"}, "weight": 0}, {"destination": {"host": "b"}, "weight": 0}]},
        {"route": [dest("c")]},
    ]}));
    assert_eq!(routes.len(), 1);
    assert_eq!(cluster(&routes[0]), "outbound|80||c");
    assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[0].route"]);
}

#[test]
fn unknown_destination_host_keeps_the_route_with_a_warning() {
    // Istio keeps a route to a host no service defines (`GetDestinationCluster` names the cluster anyway):
    // Envoy answers 503 for it, and the later route must not catch its requests.
    let (routes, findings) = run(json!({"http": [
        {"match": [{"uri": {"prefix": "/a"}}, {"uri": {"prefix": "/b"}}], "route": [dest("unknown")]},
        {"route": [dest("c")]},
    ]}));
    assert_eq!(routes.len(), 3, "both matches of the first route, then the second");
    assert_eq!(cluster(&routes[0]), "outbound|80||unknown");
    assert_eq!(cluster(&routes[1]), "outbound|80||unknown");
    assert_eq!(cluster(&routes[2]), "outbound|80||c");
    // One finding for the HTTP route, not one per match.
    assert_eq!(paths(&findings, Severity::Warning), ["spec.http[0].route[0].destination.host"]);
    assert!(findings[0].message.contains("\"unknown\""), "{}", findings[0].message);
    assert!(paths(&findings, Severity::Dropped).is_empty());
}

#[test]
fn destination_port_follows_istios_get_destination_cluster() {
    // The destination's port wins, even over a single-port service and the table's port.
    assert_eq!(destination_port(8080, Some(9080), 80), Some(8080));
    // No port: the service's only port (a gateway table on 80 routing to details:9080).
    assert_eq!(destination_port(0, Some(9080), 80), Some(9080));
    // No port and no single-port service (unknown host, or several ports): the table's port.
    assert_eq!(destination_port(0, None, 80), Some(80));
    // A table serving several ports has none to give.
    assert_eq!(destination_port(0, None, 0), None);
    assert_eq!(destination_port(0, Some(9080), 0), Some(9080));
}

#[test]
fn unknown_destination_host_without_a_port_drops_the_route() {
    let (routes, findings) = run(json!({"http": [
        {"match": [{"uri": {"prefix": "/a"}}], "route": [dest("unnamed")]},
        {"route": [dest("c")]},
    ]}));
    assert_eq!(routes.len(), 1);
    assert_eq!(cluster(&routes[0]), "outbound|80||c");
    assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[0].route[0].destination.host"]);
}

// ===== Redirects and direct responses =====

fn redirect(r: &Route) -> &RedirectAction {
    match &r.action {
        Some(route::Action::Redirect(a)) => a,
        other => panic!("not a redirect: {other:?}"),
    }
}

#[test]
fn redirects() {
    let (routes, findings) = run(json!({"http": [
        {"match": [{"uri": {"exact": "/a"}}], "redirect": {"uri": "/new", "authority": "new.example.com"}},
        {"match": [{"uri": {"exact": "/b"}}], "redirect": {"uri": "/b2", "scheme": "https", "port": 8443, "redirectCode": 308}},
        {"match": [{"uri": {"exact": "/c"}}], "redirect": {"derivePort": "FROM_REQUEST_PORT", "redirectCode": 302}},
        {"match": [{"uri": {"exact": "/d"}}], "redirect": {"scheme": "https", "port": 443, "redirectCode": 307}},
        {"match": [{"uri": {"prefix": "/e"}}], "redirect": {"prefixRewrite": "/f", "redirectCode": 303}},
    ]}));
    assert!(findings.is_empty(), "{findings:?}");
    use redirect_action::{
        PathRewriteSpecifier as P, RedirectResponseCode as C, SchemeRewriteSpecifier as S,
    };
    let a = redirect(&routes[0]);
    assert_eq!(a.host_redirect, "new.example.com");
    assert_eq!(a.path_rewrite_specifier, Some(P::PathRedirect("/new".into())));
    assert_eq!(a.response_code, C::MovedPermanently as i32);
    assert_eq!(a.port_redirect, 0);
    let b = redirect(&routes[1]);
    assert_eq!(b.scheme_rewrite_specifier, Some(S::SchemeRedirect("https".into())));
    assert_eq!((b.port_redirect, b.response_code), (8443, C::PermanentRedirect as i32));
    // FROM_REQUEST_PORT is the listener's port; 80 with http is left implicit.
    let c = redirect(&routes[2]);
    assert_eq!((c.port_redirect, c.response_code), (0, C::Found as i32));
    let d = redirect(&routes[3]);
    assert_eq!((d.port_redirect, d.response_code), (0, C::TemporaryRedirect as i32));
    let e = redirect(&routes[4]);
    assert_eq!(e.path_rewrite_specifier, Some(P::PrefixRewrite("/f".into())));
    assert_eq!(e.response_code, C::SeeOther as i32);

    let on_8080 = Table { port: 8080, ..Table::default() };
    let spec = vs(json!({"http": [{"redirect": {"derivePort": "FROM_REQUEST_PORT"}}]}));
    let (routes, _) = on_8080.run_with(&spec, &key(), true);
    assert_eq!(redirect(&routes[0]).port_redirect, 8080);
}

#[test]
fn unsupported_redirect_code_drops_the_route() {
    let (routes, findings) = run(json!({"http": [
        {"match": [{"uri": {"exact": "/a"}}], "redirect": {"uri": "/b", "redirectCode": 305}},
        {"route": [dest("c")]},
    ]}));
    assert_eq!(routes.len(), 1);
    assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[0].redirect.redirectCode"]);
}

#[test]
fn redirect_reports_the_fields_it_ignores() {
    let (routes, findings) = run(json!({"http": [{
        "redirect": {"uri": "/b"}, "timeout": "1s", "retries": {"attempts": 3}, "mirror": {"host": "m"},
        "headers": {"request": {"set": {"host": "x"}}},
    }]}));
    assert_eq!(routes.len(), 1);
    assert_eq!(
        paths(&findings, Severity::Unsupported),
        [
            "spec.http[0].timeout",
            "spec.http[0].retries",
            "spec.http[0].mirror",
            "spec.http[0].headers.request.set.host"
        ]
    );
}

#[test]
fn direct_responses() {
    let (routes, _) = run(json!({"http": [
        {"match": [{"uri": {"exact": "/gone"}}], "directResponse": {"status": 410, "body": {"string": "gone"}}},
        {"match": [{"uri": {"exact": "/bin"}}], "directResponse": {"status": 200, "body": {"bytes": "aGk="}}},
        {"match": [{"uri": {"exact": "/empty"}}], "directResponse": {"status": 204}},
    ]}));
    let direct = |r: &Route| match &r.action {
        Some(route::Action::DirectResponse(d)) => d.clone(),
        other => panic!("not a direct response: {other:?}"),
    };
    let gone = direct(&routes[0]);
    assert_eq!(gone.status, 410);
    assert_eq!(gone.body.unwrap().specifier, Some(data_source::Specifier::InlineString("gone".into())));
    assert_eq!(
        direct(&routes[1]).body.unwrap().specifier,
        Some(data_source::Specifier::InlineBytes(b"hi".to_vec()))
    );
    assert_eq!(direct(&routes[2]).body, None);
    assert_eq!(routes[0].decorator.as_ref().unwrap().operation, "reviews:80/gone");
}

// ===== Rewrites, timeouts, retries =====

#[test]
fn rewrites() {
    let (routes, _) = run(json!({"http": [
        {"match": [{"uri": {"prefix": "/a"}}], "rewrite": {"uri": "/b", "authority": "b.internal"}, "route": [dest("a")]},
        {"match": [{"uri": {"prefix": "/c"}}], "rewrite": {"uriRegexRewrite": {"match": "^/c/(.*)$", "rewrite": "/\\1"}},
         "route": [dest("a")]},
        // A request authority set in headers rewrites the host; rewrite.authority wins over it.
        {"match": [{"uri": {"prefix": "/d"}}], "headers": {"request": {"set": {":authority": "hdr.internal"}}},
         "route": [dest("a")]},
        {"match": [{"uri": {"prefix": "/e"}}], "headers": {"request": {"add": {"Host": "hdr.internal"}}},
         "rewrite": {"authority": "rw.internal"}, "route": [dest("a")]},
        // The destination's authority applies only when the route sets none.
        {"match": [{"uri": {"prefix": "/f"}}], "rewrite": {"authority": "rw.internal"},
         "route": [{"destination": {"host": "a"}, "headers": {"request": {"set": {"host": "dst.internal"}}}}]},
        {"match": [{"uri": {"prefix": "/g"}}],
         "route": [{"destination": {"host": "a"}, "headers": {"request": {"set": {"host": "dst.internal"}}}}]},
    ]}));
    let host = |r: &Route| match &action(r).host_rewrite_specifier {
        Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(h)) => h.clone(),
        _ => String::new(),
    };
    assert_eq!(action(&routes[0]).prefix_rewrite, "/b");
    assert_eq!(host(&routes[0]), "b.internal");
    let rr = action(&routes[1]).regex_rewrite.as_ref().expect("regex rewrite");
    assert_eq!(rr.pattern.as_ref().unwrap().regex, "^/c/(.*)$");
    assert_eq!(rr.substitution, "/\\1");
    assert_eq!(action(&routes[1]).prefix_rewrite, "");
    assert_eq!(host(&routes[2]), "hdr.internal");
    assert!(routes[2].request_headers_to_add.is_empty());
    assert_eq!(host(&routes[3]), "rw.internal");
    assert_eq!(host(&routes[4]), "rw.internal");
    assert_eq!(host(&routes[5]), "dst.internal");
}

#[test]
fn timeout() {
    let (routes, _) = run(json!({"http": [{"timeout": "1.5s", "route": [dest("a")]}]}));
    let a = action(&routes[0]);
    assert_eq!(a.timeout, Some(Duration { seconds: 1, nanos: 500_000_000 }));
    #[allow(deprecated)]
    let max_grpc = a.max_grpc_timeout;
    assert_eq!(max_grpc, Some(Duration { seconds: 1, nanos: 500_000_000 }));
}

fn retry_of(retries: serde_json::Value) -> Option<RetryPolicy> {
    let (routes, _) = run(json!({"http": [{"retries": retries, "route": [dest("a")]}]}));
    action(&routes[0]).retry_policy.clone()
}

#[test]
fn retries() {
    let r = retry_of(
        json!({"attempts": 3, "perTryTimeout": "2s", "retryOn": "gateway-error,connect-failure,503",
                            "retryRemoteLocalities": true, "backoff": "0.1s"}),
    )
    .unwrap();
    assert_eq!(r.num_retries, Some(UInt32Value { value: 3 }));
    assert_eq!(r.per_try_timeout, Some(Duration { seconds: 2, nanos: 0 }));
    assert_eq!(r.retry_on, "gateway-error,connect-failure,retriable-status-codes");
    assert_eq!(r.retriable_status_codes, [503]);
    assert_eq!(r.host_selection_retry_max_attempts, 5);
    let priority = r.retry_priority.as_ref().expect("retry priority");
    assert_eq!(priority.name, "envoy.retry_priorities.previous_priorities");
    let Some(retry_policy::retry_priority::ConfigType::TypedConfig(any)) = &priority.config_type else {
        panic!()
    };
    use prost::Message;
    assert_eq!(PreviousPrioritiesConfig::decode(any.value.as_slice()).unwrap().update_frequency, 2);
    assert_eq!(r.retry_back_off.unwrap().base_interval, Some(Duration { seconds: 0, nanos: 100_000_000 }));

    // Istio's parseRetryOn examples.
    let r = retry_of(json!({"attempts": 2, "retryOn": "some,fake,5xx,404,conditions,503"})).unwrap();
    assert_eq!(r.retry_on, "some,fake,5xx,conditions,retriable-status-codes");
    assert_eq!(r.retriable_status_codes, [404, 503]);
    let r = retry_of(json!({"attempts": 2, "retryOn": "gateway-error,retriable-status-codes,503"})).unwrap();
    assert_eq!(r.retry_on, "gateway-error,retriable-status-codes");
    let r = retry_of(json!({"attempts": 2, "retryOn": "some,fake,conditions,1000"})).unwrap();
    assert_eq!(r.retry_on, "some,fake,conditions,1000");
    assert!(r.retriable_status_codes.is_empty());
    // No retryOn: the default conditions.
    let r = retry_of(json!({"attempts": 5})).unwrap();
    assert_eq!(r.retry_on, DEFAULT_RETRY_ON);
    assert_eq!(r.retry_host_predicate.len(), 1);
    let r = retry_of(json!({"attempts": 5, "retryIgnorePreviousHosts": false})).unwrap();
    assert!(r.retry_host_predicate.is_empty());
    // attempts 0 disables retries.
    assert_eq!(retry_of(json!({"attempts": 0, "retryOn": "5xx"})), None);
}

// ===== Fault, mirror, CORS, headers =====

#[test]
fn fault_injection() {
    let (routes, findings) = run(json!({"http": [{"fault": {
        "delay": {"fixedDelay": "5s", "percentage": {"value": 0.5}},
        "abort": {"httpStatus": 503, "percentage": {"value": 10}},
    }, "route": [dest("a")]}]}));
    assert!(findings.is_empty());
    let f = fault(&routes[0]);
    let delay = f.delay.unwrap();
    assert_eq!(
        delay.percentage,
        Some(FractionalPercent { numerator: 5000, denominator: DenominatorType::Million as i32 })
    );
    assert_eq!(
        delay.fault_delay_secifier,
        Some(FaultDelaySecifier::FixedDelay(Duration { seconds: 5, nanos: 0 }))
    );
    let abort = f.abort.unwrap();
    assert_eq!(abort.error_type, Some(fault_abort::ErrorType::HttpStatus(503)));
    assert_eq!(
        abort.percentage,
        Some(FractionalPercent { numerator: 100_000, denominator: DenominatorType::Million as i32 })
    );

    let (routes, _) = run(json!({"http": [{"fault": {
        "delay": {"fixedDelay": "1s", "percent": 10},
        "abort": {"grpcStatus": "UNAVAILABLE"},
    }, "route": [dest("a")]}]}));
    let f = fault(&routes[0]);
    assert_eq!(f.delay.unwrap().percentage, Some(FractionalPercent { numerator: 10, denominator: 0 }));
    let abort = f.abort.unwrap();
    assert_eq!(abort.error_type, Some(fault_abort::ErrorType::GrpcStatus(14)));
    assert_eq!(abort.percentage, None);
}

#[test]
fn untranslatable_faults_are_reported() {
    let (routes, findings) = run(json!({"http": [{"fault": {
        "delay": {"exponentialDelay": "1s"},
        "abort": {"http2Error": "CANCEL"},
    }, "route": [dest("a")]}]}));
    assert!(!routes[0].typed_per_filter_config.contains_key(FAULT_FILTER));
    assert_eq!(
        paths(&findings, Severity::Unsupported),
        ["spec.http[0].fault.delay.exponentialDelay", "spec.http[0].fault.abort.http2Error"]
    );
}

#[test]
fn mirrors() {
    let (routes, findings) = run(json!({"http": [
        {"match": [{"uri": {"prefix": "/a"}}], "mirror": {"host": "m"}, "route": [dest("a")]},
        {"match": [{"uri": {"prefix": "/b"}}], "mirror": {"host": "m", "subset": "v1"},
         "mirrorPercentage": {"value": 25.5}, "route": [dest("a")]},
        {"match": [{"uri": {"prefix": "/c"}}], "mirror": {"host": "m"}, "mirrorPercentage": {"value": 0}, "route": [dest("a")]},
        {"match": [{"uri": {"prefix": "/d"}}], "mirror": {"host": "m"}, "mirrorPercent": 40, "route": [dest("a")]},
        {"match": [{"uri": {"prefix": "/e"}}], "route": [dest("a")], "mirrors": [
            {"destination": {"host": "m1"}}, {"destination": {"host": "m2"}, "percentage": {"value": 1}},
            {"destination": {"host": "unnamed"}},
        ]},
    ]}));
    let mirrors = |r: &Route| action(r).request_mirror_policies.clone();
    let a = &mirrors(&routes[0])[0];
    assert_eq!(a.cluster, "outbound|80||m");
    assert_eq!(a.runtime_fraction.as_ref().unwrap().default_value, Some(hundredths(100)));
    assert_eq!(a.trace_sampled, Some(BoolValue { value: false }));
    assert!(a.disable_shadow_host_suffix_append);
    let b = &mirrors(&routes[1])[0];
    assert_eq!(b.cluster, "outbound|80|v1|m");
    assert_eq!(
        b.runtime_fraction.as_ref().unwrap().default_value,
        Some(FractionalPercent { numerator: 255_000, denominator: DenominatorType::Million as i32 })
    );
    assert!(mirrors(&routes[2]).is_empty());
    assert_eq!(mirrors(&routes[3])[0].runtime_fraction.as_ref().unwrap().default_value, Some(hundredths(40)));
    let e = mirrors(&routes[4]);
    assert_eq!(
        e.iter().map(|m| m.cluster.as_str()).collect::<Vec<_>>(),
        ["outbound|80||m1", "outbound|80||m2"]
    );
    // An unknown mirror is left out; the route stays.
    assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[4].mirrors[2].destination.host"]);
}

#[test]
fn cors_policy() {
    let (routes, _) = run(json!({"http": [
        {"match": [{"uri": {"prefix": "/a"}}], "route": [dest("a")], "corsPolicy": {
            "allowOrigins": [{"exact": "https://example.com"}, {"regex": ".*\\.example\\.org"}],
            "allowMethods": ["GET", "POST"], "allowHeaders": ["x-foo", "x-bar"], "exposeHeaders": ["x-baz"],
            "maxAge": "86400s", "allowCredentials": true, "unmatchedPreflights": "IGNORE",
        }},
        {"match": [{"uri": {"prefix": "/b"}}], "route": [dest("a")], "corsPolicy": {"allowOrigin": ["*"]}},
    ]}));
    let c = cors(&routes[0]);
    assert_eq!(c.allow_origin_string_match.len(), 2);
    assert_eq!(
        c.allow_origin_string_match[0].match_pattern,
        Some(string_matcher::MatchPattern::Exact("https://example.com".into()))
    );
    assert_eq!(c.allow_methods, "GET,POST");
    assert_eq!(c.allow_headers, "x-foo,x-bar");
    assert_eq!(c.expose_headers, "x-baz");
    assert_eq!(c.max_age, "86400");
    assert_eq!(c.allow_credentials, Some(BoolValue { value: true }));
    assert_eq!(c.forward_not_matching_preflights, Some(BoolValue { value: false }));
    assert_eq!(c.filter_enabled.unwrap().default_value, Some(hundredths(100)));
    let c = cors(&routes[1]);
    assert_eq!(
        c.allow_origin_string_match[0].match_pattern,
        Some(string_matcher::MatchPattern::Exact("*".into()))
    );
    assert_eq!(c.forward_not_matching_preflights, Some(BoolValue { value: true }));
    assert_eq!(c.allow_credentials, None);
    assert_eq!(c.max_age, "");
}

#[test]
fn header_operations_follow_istio() {
    let (routes, findings) = run(json!({"http": [{
        "headers": {
            "request": {"set": {"x-b": "2", "x-a": "1", ":path": "/no"}, "add": {"x-c": "3"}, "remove": ["x-d", "host"]},
            "response": {"set": {"x-e": "5"}, "add": {"x-f": "6"}, "remove": ["x-g"]},
        },
        "route": [{"destination": {"host": "a"}, "headers": {"request": {"add": {"x-h": "8"}}, "response": {"remove": ["x-i"]}}}],
    }]}));
    let r = &routes[0];
    let req: Vec<_> = r.request_headers_to_add.iter().map(header_kv).collect();
    assert_eq!(
        req,
        [("x-a", "1", OVERWRITE), ("x-b", "2", OVERWRITE), ("x-c", "3", APPEND), ("x-h", "8", APPEND)]
    );
    assert_eq!(r.request_headers_to_remove, ["x-d"]);
    let resp: Vec<_> = r.response_headers_to_add.iter().map(header_kv).collect();
    assert_eq!(resp, [("x-e", "5", OVERWRITE), ("x-f", "6", APPEND)]);
    assert_eq!(r.response_headers_to_remove, ["x-g", "x-i"]);
    assert_eq!(
        paths(&findings, Severity::Unsupported),
        ["spec.http[0].headers.request.set.:path", "spec.http[0].headers.request.remove[1]"]
    );
}

#[test]
fn delegate_is_reported_unsupported() {
    let (routes, findings) = run(json!({"http": [
        {"match": [{"uri": {"prefix": "/team"}}], "delegate": {"name": "team-routes", "namespace": "team"}},
        {"route": [dest("a")]},
    ]}));
    assert_eq!(routes.len(), 1);
    assert_eq!(paths(&findings, Severity::Unsupported), ["spec.http[0].delegate"]);
    assert_eq!(findings[0].config, Some(key()));
}

// ===== Pre-send check =====

#[test]
fn odd_input_never_panics() {
    let weird = [
        "",
        "\u{0}",
        "é",
        "@request.auth.claims",
        "@request.auth.claims[]",
        "@REQUEST.AUTH.CLAIMS.",
        "a|b|c",
        "%",
    ];
    for w in weird {
        let (_, _) = run(json!({"hosts": [w], "gateways": [w], "http": [{
            "name": w,
            "match": [{"name": w, "uri": {"regex": w}, "headers": {w: {"regex": w}}, "withoutHeaders": {w: {}},
                       "queryParams": {w: {"prefix": w}}, "gateways": [w, "mesh"], "sourceNamespace": w}],
            "route": [{"destination": {"host": w, "subset": w}, "weight": -1,
                       "headers": {"request": {"set": {w: w}, "remove": [w]}}},
                      {"destination": {"host": w}, "weight": 2}],
            "rewrite": {"uri": w, "authority": w, "uriRegexRewrite": {"match": w, "rewrite": w}},
            "retries": {"attempts": -1, "retryOn": w},
            "fault": {"abort": {"grpcStatus": w}, "delay": {"percent": -5, "fixedDelay": "-1s"}},
            "corsPolicy": {"allowOrigins": [{}, {"regex": w}], "maxAge": "-3s"},
            "mirrorPercentage": {"value": -1.0e308},
            "timeout": "-10s",
        }]}));
    }
}

/// Tests that run a real Envoy (`--skip peer::` leaves them out: docs/ARCHITECTURE.md, "Testing").
mod peer {
    use super::*;

    #[test]
    fn a_bad_regex_drops_exactly_that_route() {
        let spec = json!({"http": [
            {"name": "r", "match": [{"name": "bad", "uri": {"regex": "/foo("}}, {"name": "good", "uri": {"regex": "/foo"}}],
             "route": [dest("a")]},
            {"route": [dest("b")]},
        ]});
        let (routes, findings) = run(spec.clone());
        assert_eq!(routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["r.good", ""]);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::Dropped);
        assert_eq!(f.config, Some(key()));
        assert_eq!(f.path, "spec.http[0].match[0].uri.regex");
        assert_eq!(f.resource, "route r.bad");
        assert!(f.message.contains("missing closing )"), "{}", f.message);

        // Envoy takes what is left, and would have rejected the whole table with the bad route in it.
        envoy_oracle::validate(routes).unwrap();
        let (unchecked, _) = Table::default().run_with(&vs(spec), &key(), false);
        let err = envoy_oracle::validate(unchecked).unwrap_err();
        assert!(err.contains("missing )"), "{err}");
    }

    #[test]
    fn corpus_routes_validate_in_envoy() {
        let corpus = corpus_virtual_services();
        assert!(corpus.len() >= 20, "only {} VirtualServices in the corpus", corpus.len());
        let mut all = Vec::new();
        let mut findings = Vec::new();
        let mut with_routes = 0;
        for (key, vs, file) in &corpus {
            let mut produced = 0;
            for table in tables_for(vs, key) {
                let (routes, f) = table.run_with(vs, key, true);
                produced += routes.len();
                all.extend(routes);
                findings.extend(f.into_iter().map(|f| (file.clone(), f)));
            }
            if produced > 0 {
                with_routes += 1;
            }
        }
        for (file, f) in &findings {
            eprintln!("{file}: {f}");
        }
        eprintln!(
            "{} VirtualServices, {with_routes} with HTTP routes, {} Envoy routes",
            corpus.len(),
            all.len()
        );
        assert!(all.len() >= 50, "only {} routes", all.len());
        if let Err(out) = envoy_oracle::validate(all) {
            panic!("Envoy rejected the corpus routes:\n{out}");
        }
    }

    #[test]
    fn every_feature_together_validates_in_envoy() {
        let (routes, findings) = run(json!({"http": [
            {"name": "canary",
             "match": [{"name": "jason", "uri": {"prefix": "/api/v1"}, "ignoreUriCase": true,
                        "headers": {"end-user": {"exact": "jason"}, "x-debug": {}, "cookie": {"regex": "^(.*?;)?(user=dev-123)(;.*)?"},
                                    "@request.auth.claims.group": {"exact": "admin"}},
                        "withoutHeaders": {"x-skip": {"prefix": "1"}, "x-gone": {}},
                        "queryParams": {"q": {"regex": "\\d+"}, "p": {"exact": "1"}, "flag": {}},
                        "method": {"exact": "GET"}, "authority": {"prefix": "api."}, "scheme": {"exact": "https"},
                        "statPrefix": "canary"}],
             "route": [
                {"destination": {"host": "reviews", "subset": "v2", "port": {"number": 9080}}, "weight": 80,
                 "headers": {"request": {"set": {"x-env": "canary", "host": "reviews.internal"}, "add": {"x-trace": "%REQ(x-request-id)%"}, "remove": ["x-internal"]},
                             "response": {"set": {"x-served-by": "v2"}}}},
                {"destination": {"host": "reviews", "subset": "v1"}, "weight": 20},
             ],
             "headers": {"response": {"add": {"x-route": "canary"}, "remove": ["server"]}},
             "rewrite": {"authority": "reviews.internal", "uriRegexRewrite": {"match": "^/api/(.*)$", "rewrite": "/\\1"}},
             "timeout": "1.5s",
             "retries": {"attempts": 3, "perTryTimeout": "2s", "retryOn": "gateway-error,connect-failure,503",
                         "retryRemoteLocalities": true, "retryIgnorePreviousHosts": false, "backoff": "0.1s"},
             "fault": {"delay": {"fixedDelay": "5s", "percentage": {"value": 0.5}}, "abort": {"grpcStatus": "UNAVAILABLE", "percentage": {"value": 10}}},
             "mirror": {"host": "reviews-shadow"}, "mirrorPercentage": {"value": 25.5},
             "mirrors": [{"destination": {"host": "audit"}, "percentage": {"value": 1}}],
             "corsPolicy": {"allowOrigins": [{"exact": "https://example.com"}, {"regex": ".*\\.example\\.org"}, {"prefix": "https://"}],
                            "allowMethods": ["GET", "POST"], "allowHeaders": ["x-foo"], "exposeHeaders": ["x-bar"],
                            "maxAge": "86400s", "allowCredentials": false, "unmatchedPreflights": "IGNORE"}},
            {"match": [{"uri": {"exact": "/old"}}], "redirect": {"uri": "/new", "authority": "new.example.com", "derivePort": "FROM_REQUEST_PORT", "scheme": "https", "redirectCode": 308}},
            {"match": [{"uri": {"prefix": "/shop"}}], "redirect": {"prefixRewrite": "/store", "port": 8443}},
            {"match": [{"uri": {"prefix": "/gone"}}], "directResponse": {"status": 410, "body": {"string": "gone"}},
             "fault": {"abort": {"httpStatus": 503}}},
            {"match": [{"uri": {"prefix": "/bin"}}], "directResponse": {"status": 200, "body": {"bytes": "aGk="}}},
            {"match": [{"uri": {"prefix": "/noretry"}}], "retries": {"attempts": 0}, "rewrite": {"uri": "/"}, "route": [dest("ratings")]},
            {"route": [dest("reviews")]},
        ]}));
        assert_eq!(paths(&findings, Severity::Dropped), Vec::<&str>::new(), "{findings:?}");
        assert_eq!(routes.len(), 7);
        envoy_oracle::validate(routes).unwrap();
    }

    #[test]
    fn corpus_with_a_bad_regex_still_validates_in_envoy() {
        let mut all = Vec::new();
        for (key, vs, _) in corpus_virtual_services() {
            all.extend(Table { port: 0, ..Table::default() }.run_with(&vs, &key, true).0);
        }
        let corpus_routes = all.len();
        let bad = vs(json!({"hosts": ["bad"], "http": [
            {"match": [{"headers": {"x-user": {"regex": "[unclosed"}}}], "route": [dest("bad")]},
            {"match": [{"uri": {"prefix": "/fine"}}], "route": [dest("fine")]},
        ]}));
        let (routes, findings) = Table::default().run_with(&bad, &key(), true);
        assert_eq!(paths(&findings, Severity::Dropped), ["spec.http[0].match[0].headers.x-user.regex"]);
        assert_eq!(routes.len(), 1);
        all.extend(routes);
        assert_eq!(all.len(), corpus_routes + 1);
        envoy_oracle::validate(all).unwrap();
    }

    #[test]
    fn route_level_problems_drop_every_route_of_that_http_route_only() {
        let (routes, findings) = run(json!({"http": [
            {"match": [{"uri": {"prefix": "/a"}}, {"uri": {"prefix": "/b"}}], "route": [dest("a")],
             "corsPolicy": {"allowOrigins": [{"regex": "*.example.com"}]}},
            {"match": [{"headers": {"x": {"regex": "(unclosed"}}}], "route": [dest("b")]},
            {"match": [{"uri": {"prefix": "/c"}}], "route": [dest("c")],
             "headers": {"request": {"set": {"x-trace": "%REQ(x-id)"}}}},
            {"route": [dest("d")]},
        ]}));
        assert_eq!(routes.len(), 1);
        assert_eq!(cluster(&routes[0]), "outbound|80||d");
        assert_eq!(
            paths(&findings, Severity::Dropped),
            [
                "spec.http[0].corsPolicy.allowOrigins[0].regex",
                "spec.http[0].corsPolicy.allowOrigins[0].regex",
                "spec.http[1].match[0].headers.x.regex",
                "spec.http[2].headers.request.set.x-trace",
            ]
        );
        envoy_oracle::validate(routes).unwrap();
    }
}
