//! Builder behaviour beyond the goldens: fail-closed translation, dry-run, TCP dropping, CUSTOM
//! providers, trust domains, filter order.

use std::sync::Arc;

use ::config::parse::{ParseOptions, parse_text};
use ::model::{Config, Severity, push::extension_provider::parse_extension_providers};
use envoy_types::pb::envoy::{
    config::{
        listener::v3::{Filter, filter},
        rbac::v3::{Policy, Rbac, permission, principal, rbac},
    },
    extensions::filters::{
        http::rbac::v3::Rbac as HttpRbac,
        network::{
            http_connection_manager::v3::{HttpFilter, http_filter},
            rbac::v3::Rbac as TcpRbac,
        },
    },
    r#type::matcher::v3::string_matcher::MatchPattern,
};
use prost::Message;

use super::{
    AuthzContext, build_http, build_tcp,
    model::{GenError, names_in_nested_brackets, parse_port},
};

fn policies(yaml: &str) -> Vec<Arc<Config>> {
    let options = ParseOptions { default_namespace: "foo".into(), ..ParseOptions::default() };
    parse_text("t.yaml", yaml, &options)
        .into_iter()
        .map(|d| Arc::new(d.config.unwrap_or_else(|| panic!("invalid test policy: {:?}", d.errors))))
        .collect()
}

/// Validation rejects what these tests need (Istio's webhook does too, but objects can predate it or
/// bypass it): parse a valid policy, then break it with `f`.
fn broken(yaml: &str, index: usize, f: impl FnOnce(&mut Config)) -> Vec<Arc<Config>> {
    let mut out = policies(yaml);
    f(Arc::get_mut(&mut out[index]).unwrap());
    out
}

fn spec(c: &mut Config) -> &mut api::security::AuthorizationPolicy {
    let api::spec::Spec::AuthorizationPolicy(p) = &mut c.spec else { panic!("not an AuthorizationPolicy") };
    p
}

fn ctx() -> AuthzContext<'static> {
    AuthzContext {
        trust_domain: "cluster.local",
        trust_domain_aliases: &[],
        providers: &[],
        services: &[],
        is_gateway: false,
    }
}

fn http_rbac(f: &HttpFilter) -> HttpRbac {
    assert_eq!(f.name, "envoy.filters.http.rbac");
    let Some(http_filter::ConfigType::TypedConfig(any)) = &f.config_type else { panic!("{f:?}") };
    HttpRbac::decode(&*any.value).unwrap()
}

fn tcp_rbac(f: &Filter) -> TcpRbac {
    assert_eq!(f.name, "envoy.filters.network.rbac");
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else { panic!("{f:?}") };
    TcpRbac::decode(&*any.value).unwrap()
}

fn action(r: &Option<Rbac>) -> Option<rbac::Action> {
    r.as_ref().map(|r| rbac::Action::try_from(r.action).unwrap())
}

fn is_match_all(p: &Policy) -> bool {
    matches!(p.permissions[..], [ref perm] if perm.rule == Some(permission::Rule::Any(true)))
        && matches!(p.principals[..], [ref pr] if pr.identifier == Some(principal::Identifier::Any(true)))
}

const HEADER: &str =
    "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  namespace: foo\n";

fn policy(name: &str, extra_meta: &str, spec: &str) -> String {
    format!("---\n{HEADER}  name: {name}\n{extra_meta}spec:\n{spec}")
}

#[test]
fn untranslatable_allow_rule_denies_all_and_leaves_other_policies_alone() {
    let yaml = policy("bad", "", "  rules:\n  - when:\n    - key: request.headers[x]\n      values: [x]\n")
        + &policy("good", "", "  rules:\n  - to:\n    - operation:\n        methods: [GET]\n");
    let input = broken(&yaml, 0, |c| spec(c).rules[0].when[0].key = "request.nope".into());
    let out = build_http(&input, &ctx());
    assert_eq!(out.filters.len(), 2, "{out:?}");
    let deny = http_rbac(&out.filters[0]);
    assert_eq!(action(&deny.rules), Some(rbac::Action::Deny));
    let rules = deny.rules.unwrap();
    assert_eq!(rules.policies.len(), 1);
    assert!(is_match_all(&rules.policies["ns[foo]-policy[bad]-rule[0]"]));
    let allow = http_rbac(&out.filters[1]).rules.unwrap();
    assert_eq!(allow.policies.keys().collect::<Vec<_>>(), ["ns[foo]-policy[good]-rule[0]"]);
    assert_eq!(out.findings.len(), 1);
    let f = &out.findings[0];
    assert_eq!(f.severity, Severity::Dropped);
    assert_eq!(f.config.as_ref().unwrap().name, "bad");
    assert_eq!(f.path, "spec.rules[0].when[0].key");
    assert!(f.message.contains("unknown attribute request.nope"), "{f}");
}

#[test]
fn untranslatable_deny_rule_denies_all() {
    let yaml = policy(
        "d",
        "",
        "  action: DENY\n  rules:\n  - from:\n    - source:\n        ipBlocks: [10.0.0.1, 10.0.0.3]\n  - to:\n    - operation:\n        ports: [\"80\"]\n",
    );
    let input = broken(&yaml, 0, |c| {
        spec(c).rules[0].from[0].source.as_mut().unwrap().ip_blocks[1] = "10.0.0.300".into()
    });
    let out = build_http(&input, &ctx());
    assert_eq!(out.filters.len(), 1);
    let rules = http_rbac(&out.filters[0]).rules.unwrap();
    assert!(is_match_all(&rules.policies["ns[foo]-policy[d]-rule[0]"]));
    assert!(!is_match_all(&rules.policies["ns[foo]-policy[d]-rule[1]"]));
    assert_eq!(out.findings[0].path, "spec.rules[0].from[0].source.ipBlocks[1]");
}

#[test]
fn bad_port_of_allow_rule_fails_closed() {
    let yaml = policy("p", "", "  rules:\n  - to:\n    - operation:\n        notPorts: [\"9999\"]\n");
    let input = broken(&yaml, 0, |c| {
        spec(c).rules[0].to[0].operation.as_mut().unwrap().not_ports[0] = "99999".into()
    });
    let out = build_http(&input, &ctx());
    assert_eq!(out.filters.len(), 2);
    assert!(is_match_all(&http_rbac(&out.filters[0]).rules.unwrap().policies["ns[foo]-policy[p]-rule[0]"]));
    assert!(http_rbac(&out.filters[1]).rules.unwrap().policies.is_empty());
    assert_eq!(out.findings[0].path, "spec.rules[0].to[0].operation.notPorts[0]");
}

#[test]
fn dry_run_and_audit_rules_are_skipped_not_enforced() {
    let yaml = policy(
        "dry",
        "  annotations:\n    istio.io/dry-run: \"true\"\n",
        "  action: DENY\n  rules:\n  - when:\n    - key: source.ip\n      values: [1.2.3.4]\n",
    ) + &policy(
        "audit",
        "",
        "  action: AUDIT\n  rules:\n  - when:\n    - key: source.ip\n      values: [1.2.3.4]\n",
    );
    let mut input = broken(&yaml, 0, |c| spec(c).rules[0].when[0].key = "nope".into());
    spec(Arc::get_mut(&mut input[1]).unwrap()).rules[0].when[0].key = "nope".into();
    let out = build_http(&input, &ctx());
    // AUDIT then DENY (dry-run only: no enforced rules).
    assert_eq!(out.filters.len(), 2);
    let audit = http_rbac(&out.filters[0]);
    assert_eq!(action(&audit.rules), Some(rbac::Action::Log));
    assert!(audit.rules.unwrap().policies.is_empty());
    let deny = http_rbac(&out.filters[1]);
    assert_eq!(deny.rules, None);
    assert_eq!(deny.shadow_rules_stat_prefix, "istio_dry_run_deny_");
    assert!(deny.shadow_rules.unwrap().policies.is_empty());
    assert_eq!(out.findings.len(), 2);
    assert!(out.findings.iter().all(|f| f.message.contains("skipped")), "{:?}", out.findings);
}

#[test]
fn invalid_dry_run_annotation_is_enforced_and_reported() {
    let yaml = policy("p", "  annotations:\n    istio.io/dry-run: \"true\"\n", "  rules:\n  - {}\n");
    let input = broken(&yaml, 0, |c| {
        c.meta.annotations.insert("istio.io/dry-run".into(), "maybe".into());
    });
    let out = build_http(&input, &ctx());
    let r = http_rbac(&out.filters[0]);
    assert!(r.rules.is_some() && r.shadow_rules.is_none());
    assert_eq!(out.findings[0].path, "metadata.annotations[istio.io/dry-run]");
}

#[test]
fn policy_without_rules_never_matches() {
    let out = build_http(&policies(&policy("none", "", "  action: ALLOW\n")), &ctx());
    let p = &http_rbac(&out.filters[0]).rules.unwrap().policies["ns[foo]-policy[none]-rule[0]"];
    assert!(matches!(p.permissions[0].rule, Some(permission::Rule::NotRule(_))));
    assert!(out.findings.is_empty());
}

#[test]
fn tcp_drops_http_only_fields_as_istio() {
    let yaml = policy(
        "a",
        "",
        "  rules:\n  - to:\n    - operation:\n        methods: [GET]\n        ports: [\"80\"]\n",
    ) + &policy(
        "d",
        "",
        "  action: DENY\n  rules:\n  - to:\n    - operation:\n        paths: [/x]\n        ports: [\"81\"]\n",
    );
    let out = build_tcp(&policies(&yaml), &ctx());
    assert_eq!(out.filters.len(), 2);
    let deny = tcp_rbac(&out.filters[0]);
    assert_eq!(deny.stat_prefix, "tcp.");
    let deny_rules = deny.rules.unwrap();
    let p = &deny_rules.policies["ns[foo]-policy[d]-rule[0]"];
    let Some(permission::Rule::AndRules(set)) = &p.permissions[0].rule else { panic!("{p:?}") };
    assert_eq!(set.rules.len(), 1, "only the port is left: {set:?}");
    let allow = tcp_rbac(&out.filters[1]).rules.unwrap();
    assert!(allow.policies.is_empty(), "ALLOW rule with a method is left out on TCP");
    let paths: Vec<&str> = out.findings.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["spec.rules[0].to[0].operation.paths[0]", "spec.rules[0].to[0].operation.methods[0]"]);
    // The same policies on HTTP have no finding.
    assert!(build_http(&policies(&yaml), &ctx()).findings.is_empty());
}

#[test]
fn filter_order_is_custom_audit_deny_allow() {
    let providers = parse_extension_providers(&serde_json::json!([
        {"name": "ext", "envoyExtAuthzGrpc": {"service": "foo/authz.foo.svc.cluster.local", "port": 9000}}
    ]))
    .unwrap();
    let services = [super::extauthz::tests_support::service("authz.foo.svc.cluster.local", "foo")];
    let ctx = AuthzContext { providers: &providers, services: &services, ..ctx() };
    let yaml = policy("allow", "", "  rules:\n  - {}\n")
        + &policy("deny", "", "  action: DENY\n  rules:\n  - {}\n")
        + &policy("audit", "", "  action: AUDIT\n  rules:\n  - {}\n")
        + &policy("custom", "", "  action: CUSTOM\n  provider:\n    name: ext\n  rules:\n  - {}\n");
    let out = build_http(&policies(&yaml), &ctx);
    let names: Vec<&str> = out.filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "envoy.filters.http.rbac",
            "envoy.filters.http.ext_authz",
            "envoy.filters.http.rbac",
            "envoy.filters.http.rbac",
            "envoy.filters.http.rbac"
        ]
    );
    let custom = http_rbac(&out.filters[0]);
    assert_eq!(custom.shadow_rules_stat_prefix, "istio_ext_authz_");
    assert!(
        custom
            .shadow_rules
            .unwrap()
            .policies
            .contains_key("istio-ext-authz-ext-ns[foo]-policy[custom]-rule[0]")
    );
    let actions: Vec<_> = out.filters[2..].iter().map(|f| action(&http_rbac(f).rules).unwrap()).collect();
    assert_eq!(actions, [rbac::Action::Log, rbac::Action::Deny, rbac::Action::Allow]);
    // On TCP, the gRPC provider gives a network ext_authz.
    let tcp = build_tcp(&policies(&yaml), &ctx);
    assert_eq!(tcp.filters[1].name, "envoy.filters.network.ext_authz");
}

#[test]
fn multiple_custom_providers_deny_what_they_match() {
    let yaml = policy("c1", "", "  action: CUSTOM\n  provider:\n    name: a\n  rules:\n  - {}\n")
        + &policy("c2", "", "  action: CUSTOM\n  provider:\n    name: b\n  rules:\n  - {}\n");
    let out = build_http(&policies(&yaml), &ctx());
    assert_eq!(out.filters.len(), 2);
    let a = http_rbac(&out.filters[0]).rules.unwrap();
    assert_eq!(
        a.policies.keys().collect::<Vec<_>>(),
        ["istio-ext-authz-a-ns[foo]-policy[c1]-rule[0]-deny-due-to-bad-CUSTOM-action"]
    );
    assert_eq!(out.findings.len(), 2);
    assert!(out.findings[0].message.contains("multiple CUSTOM"));
}

#[test]
fn unknown_provider_denies_what_the_policy_matches() {
    let yaml = policy("c", "", "  action: CUSTOM\n  provider:\n    name: nope\n  rules:\n  - {}\n");
    let out = build_tcp(&policies(&yaml), &ctx());
    assert_eq!(out.filters.len(), 1);
    let r = tcp_rbac(&out.filters[0]);
    assert_eq!(action(&r.rules), Some(rbac::Action::Deny));
    assert!(out.findings[0].message.contains("available providers"), "{}", out.findings[0]);
}

fn principal_names(p: &Policy) -> Vec<String> {
    let Some(principal::Identifier::AndIds(and)) = &p.principals[0].identifier else { panic!("{p:?}") };
    let Some(principal::Identifier::OrIds(or)) = &and.ids[0].identifier else { panic!("{p:?}") };
    or.ids
        .iter()
        .map(|id| {
            let Some(principal::Identifier::Authenticated(a)) = &id.identifier else { panic!("{id:?}") };
            match a.principal_name.as_ref().unwrap().match_pattern.as_ref().unwrap() {
                MatchPattern::Exact(s) | MatchPattern::Prefix(s) => s.clone(),
                other => format!("{other:?}"),
            }
        })
        .collect()
}

#[test]
fn principals_follow_trust_domain_aliases() {
    let yaml = policy(
        "p",
        "",
        "  rules:\n  - from:\n    - source:\n        principals: [cluster.local/ns/foo/sa/sleep, other-td/ns/foo/sa/x, '*/ns/foo/sa/y']\n",
    );
    let name = "ns[foo]-policy[p]-rule[0]";
    let get = |td: &str, aliases: &[String]| {
        let out = build_http(
            &policies(&yaml),
            &AuthzContext { trust_domain: td, trust_domain_aliases: aliases, ..ctx() },
        );
        principal_names(&http_rbac(&out.filters[0]).rules.unwrap().policies[name])
    };
    let same = get("cluster.local", &[]);
    assert_eq!(same[..2], ["spiffe://cluster.local/ns/foo/sa/sleep", "spiffe://other-td/ns/foo/sa/x"]);
    assert_eq!(same.len(), 3, "the `*` trust domain is left alone: {same:?}");
    // cluster.local is rewritten to the mesh trust domain, and each alias added.
    let got = get("td1", &["old-td".into()]);
    assert_eq!(
        got[..3],
        ["spiffe://td1/ns/foo/sa/sleep", "spiffe://old-td/ns/foo/sa/sleep", "spiffe://other-td/ns/foo/sa/x"]
    );
    let got = get("td1", &["other-td".into()]);
    assert_eq!(
        got[..3],
        ["spiffe://td1/ns/foo/sa/sleep", "spiffe://other-td/ns/foo/sa/sleep", "spiffe://td1/ns/foo/sa/x"]
    );
}

#[test]
fn bracket_names() {
    assert_eq!(names_in_nested_brackets("[a][b]").unwrap(), ["a", "b"]);
    assert_eq!(names_in_nested_brackets("[iss]").unwrap(), ["iss"]);
    assert_eq!(names_in_nested_brackets("[a[b]").unwrap(), ["a[b"]);
    assert!(matches!(names_in_nested_brackets("a"), Err(GenError::Invalid(_))));
    assert!(names_in_nested_brackets("[a]b").is_err());
}

#[test]
fn ports() {
    assert_eq!(parse_port("0"), Ok(0));
    assert_eq!(parse_port("65535"), Ok(65535));
    for bad in ["", "65536", "+80", "-1", "8o", "99999999999"] {
        assert!(parse_port(bad).is_err(), "{bad}");
    }
}

#[test]
fn trust_domain_expansion_and_replacement() {
    use super::model::{expand_trust_domain_aliases, replace_trust_domain_aliases};
    let bundle: Vec<String> = vec!["td1".into(), "old".into()];
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(expand_trust_domain_aliases(&bundle, &s(&["old", "x", "td1"])), s(&["td1", "old", "x"]));
    assert_eq!(
        replace_trust_domain_aliases(
            &bundle,
            &s(&["old/ns/a/sa/b", "*/ns/a/sa/c", "short", "foreign/ns/a/sa/d"])
        ),
        s(&["td1/ns/a/sa/b", "old/ns/a/sa/b", "*/ns/a/sa/c", "short", "foreign/ns/a/sa/d"])
    );
    // A principal in cluster.local is always moved into the bundle.
    assert_eq!(
        replace_trust_domain_aliases(&bundle[..1], &s(&["cluster.local/ns/a/sa/b"])),
        s(&["td1/ns/a/sa/b"])
    );
}

#[test]
fn source_trust_domains_and_namespaces_as_regexes() {
    let yaml = policy(
        "p",
        "",
        "  rules:\n  - from:\n    - source:\n        trustDomains: ['*', td1, '*.corp']\n        namespaces: ['team-*.x']\n",
    );
    let out = build_http(&policies(&yaml), &ctx());
    let p = &http_rbac(&out.filters[0]).rules.unwrap().policies["ns[foo]-policy[p]-rule[0]"];
    let Some(principal::Identifier::AndIds(and)) = &p.principals[0].identifier else { panic!("{p:?}") };
    let pattern = |id: &envoy_types::pb::envoy::config::rbac::v3::Principal| {
        let Some(principal::Identifier::Authenticated(a)) = &id.identifier else { panic!("{id:?}") };
        match a.principal_name.as_ref().unwrap().match_pattern.as_ref().unwrap() {
            MatchPattern::Prefix(s) => format!("prefix {s}"),
            MatchPattern::SafeRegex(r) => format!("regex {}", r.regex),
            other => format!("{other:?}"),
        }
    };
    let or = |i: usize| {
        let Some(principal::Identifier::OrIds(or)) = &and.ids[i].identifier else { panic!("{and:?}") };
        or.ids.iter().map(pattern).collect::<Vec<_>>()
    };
    // trustDomains before namespaces (Istio's insertion order).
    assert_eq!(or(0), ["prefix spiffe://", "prefix spiffe://td1/", r"regex spiffe://[^/]*\.corp/.*"]);
    assert_eq!(or(1), [r"regex .*/ns/team-.*\.x/.*"]);
}

#[test]
fn dry_run_custom_policies_are_left_out_not_enforced() {
    // Validation refuses the annotation on CUSTOM policies (as Istio's); should one get through, Istio's
    // builder would put its rules into the marking filter's enforced DENY `rules`.
    let yaml = policy(
        "dry",
        "",
        "  action: CUSTOM\n  provider:\n    name: ext\n  rules:\n  - to:\n    - operation:\n        paths: [\"/x\"]\n",
    );
    let input = broken(&yaml, 0, |c| {
        c.meta.annotations.insert("istio.io/dry-run".into(), "true".into());
    });
    let out = build_http(&input, &ctx());
    assert!(out.filters.is_empty(), "no filter at all: {:?}", out.filters);
    assert_eq!(out.findings.len(), 1);
    assert_eq!(out.findings[0].path, "metadata.annotations[istio.io/dry-run]");
    assert!(out.findings[0].message.contains("not applied"), "{}", out.findings[0].message);
}
