use api::telemetry::tracing::{Environment, Formatter, Literal};

use super::*;

#[test]
fn join_path_is_gos_url_join_path_for_host_and_path() {
    assert_eq!(join_path("otel.ns.svc.cluster.local", "/v1/traces"), "otel.ns.svc.cluster.local/v1/traces");
    assert_eq!(join_path("otel.ns.svc.cluster.local", "v1/traces"), "otel.ns.svc.cluster.local/v1/traces");
    assert_eq!(join_path("dt.example", ""), "dt.example");
}

#[test]
fn custom_tags_take_one_type_and_formatters_only_from_telemetry() {
    let tag = |literal: Option<&str>, env: Option<&str>, formatter: Option<&str>| CustomTag {
        literal: literal.map(|v| Literal { value: v.into() }),
        environment: env.map(|n| Environment { name: n.into(), default_value: "d".into() }),
        header: None,
        formatter: formatter.map(|v| Formatter { value: v.into() }),
    };
    let lit = envoy_tag("a", &tag(Some("v"), None, None), true).unwrap();
    assert_eq!(lit.r#type, Some(custom_tag::Type::Literal(custom_tag::Literal { value: "v".into() })));
    let env = envoy_tag("b", &tag(None, Some("POD_NAME"), None), false).unwrap();
    assert_eq!(
        env.r#type,
        Some(custom_tag::Type::Environment(custom_tag::Environment {
            name: "POD_NAME".into(),
            default_value: "d".into()
        }))
    );
    let f = envoy_tag("c", &tag(None, None, Some("%REQ(:PATH)%")), true).unwrap();
    assert_eq!(f.r#type, Some(custom_tag::Type::Value("%REQ(:PATH)%".into())));
    assert_eq!(envoy_tag("c", &tag(None, None, Some("%REQ(:PATH)%")), false), None);
    assert_eq!(envoy_tag("d", &tag(None, None, None), true), None, "no type: left out");
}

#[test]
fn dry_run_tags_read_the_rbac_filters_shadow_metadata() {
    let tags = dry_run_tags();
    assert_eq!(tags.len(), 4);
    let Some(custom_tag::Type::Metadata(m)) = &tags[0].r#type else { panic!("{:?}", tags[0]) };
    let key = m.metadata_key.as_ref().unwrap();
    assert_eq!(key.key, "envoy.filters.http.rbac");
    assert_eq!(
        key.path[0].segment,
        Some(path_segment::Segment::Key("istio_dry_run_allow_shadow_effective_policy_id".into()))
    );
}

#[test]
fn the_fingerprint_tells_tracings_apart() {
    let none = HcmTracing::default();
    let one = HcmTracing { tracing: Some(sampled(1.0)), ..HcmTracing::default() };
    let other = HcmTracing { tracing: Some(sampled(2.0)), ..HcmTracing::default() };
    let by_id = HcmTracing { use_request_id_for_trace_sampling: false, ..HcmTracing::default() };
    let prints = [none.fingerprint(), one.fingerprint(), other.fingerprint(), by_id.fingerprint()];
    for (i, a) in prints.iter().enumerate() {
        for b in &prints[i + 1..] {
            assert_ne!(a, b);
        }
    }
}
