//! The VirtualService cases from Istio's tests that concern the whole object, and the helpers the
//! tests of the submodules share.

use super::*;
use crate::testutil::{
    Want::{self, Error, Valid, Warning},
    check, meta, run, spec,
};

pub(super) fn check_all(cases: &[(&str, &str, Want)]) {
    crate::testutil::check_all::<VirtualService>(validate, &meta("vs", "ns1"), cases);
}

/// A VirtualService for `foo.bar` with one HTTP route (a flow-style YAML mapping).
pub(super) fn http(route: &str) -> String {
    format!("hosts: [foo.bar]\nhttp: [{route}]")
}

/// A VirtualService for `foo.bar` with one HTTP route to `foo.baz` plus the given fields.
pub(super) fn routed(fields: &str) -> String {
    http(&format!("{{route: [{{destination: {{host: foo.baz}}}}], {fields}}}"))
}

const SIMPLE: &str = "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}}]}]";

#[test]
fn virtual_service_cases_from_istio() {
    check_all(&[
        ("simple", SIMPLE, Valid),
        (
            "allow sni based domains",
            "hosts: [outbound_.15010_._.istiod.istio-system.svc.cluster.local]\ngateways: [ns1/gateway]\ntls: [{match: [{sniHosts: [outbound_.15010_._.istiod.istio-system.svc.cluster.local]}], route: [{destination: {host: istio.istio-system.svc.cluster.local}}]}]",
            Valid,
        ),
        (
            "duplicate hosts",
            "hosts: ['*.foo.bar', '*.bar']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Error("spec.hosts[1]", "duplicate hosts in virtual service: *.foo.bar & *.bar"),
        ),
        (
            "with no destination",
            "hosts: ['*.foo.bar', '*.bar']\nhttp: [{route: [{}]}]",
            Error("spec.http[0].route[0].destination", "destination is required"),
        ),
        (
            "destination without host",
            "hosts: [foo.bar]\nhttp: [{route: [{destination: {}}]}]",
            Error("spec.http[0].route[0].destination.host", "empty domain name not allowed"),
        ),
        ("delegate with no hosts", "http: [{route: [{destination: {host: foo.baz}}]}]", Valid),
        (
            "bad host",
            "hosts: [foo.ba!r]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Error("spec.hosts[0]", "domain name \"ba!r\" invalid (label \"ba!r\" invalid)"),
        ),
        ("ip host", "hosts: [10.0.0.1]\nhttp: [{route: [{destination: {host: foo.baz}}]}]", Valid),
        (
            "no tcp or http routing",
            "hosts: [foo.bar]",
            Error("spec", "http, tcp or tls must be provided in virtual service"),
        ),
        (
            "bad gateway",
            "hosts: [foo.bar]\ngateways: [b@dgateway]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Error("spec.gateways[0]", "b@dgateway"),
        ),
        (
            "FQDN for gateway",
            "hosts: [foo.bar]\ngateways: [gateway.example.com]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Warning(
                "spec.gateways[0]",
                "using legacy gatewayName format \"gateway.example.com\"; prefer the <namespace>/<name> format: \"example/gateway\"",
            ),
        ),
        (
            "namespace/name for gateway",
            "hosts: [foo.bar]\ngateways: [ns1/gateway]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Valid,
        ),
        (
            "namespace/* for gateway",
            "hosts: [foo.bar]\ngateways: ['ns1/*']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Error("spec.gateways[0]", "invalid value for gateway name: \"*\""),
        ),
        (
            "*/name for gateway",
            "hosts: [foo.bar]\ngateways: ['*/gateway']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Error("spec.gateways[0]", "invalid value for namespace: \"*\""),
        ),
        (
            "wildcard for mesh gateway",
            "hosts: ['*']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Error(
                "spec.hosts[0]",
                "wildcard host * is not allowed for virtual services bound to the mesh gateway",
            ),
        ),
        (
            "wildcard for mesh gateway, explicitly",
            "hosts: ['*']\ngateways: [mesh, ns1/gw]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Error("spec.hosts[0]", "wildcard host * is not allowed"),
        ),
        (
            "wildcard for non-mesh gateway",
            "hosts: ['*']\ngateways: [somegateway]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Valid,
        ),
        (
            "missing tcp route",
            "hosts: [foo.bar]\ntcp: [{match: [{port: 999}]}]",
            Error("spec.tcp[0].route", "TCP route is required"),
        ),
        (
            "missing tls route",
            "hosts: [foo.bar]\ntls: [{match: [{port: 999, sniHosts: [foo.bar]}]}]",
            Error("spec.tls[0].route", "TLS route is required"),
        ),
        (
            "deprecated mirror",
            "hosts: [foo.bar]\ngateways: [ns1/gateway]\nhttp: [{mirrorPercent: 5, route: [{destination: {host: foo.baz}}]}]",
            Warning(
                "spec.http[0].mirrorPercent",
                "using deprecated setting \"mirrorPercent\", use \"mirrorPercentage\" instead",
            ),
        ),
        ("set authority", &routed("headers: {request: {set: {':authority': foo}}}"), Valid),
        (
            "set authority in destination",
            "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: foo.baz}, headers: {request: {set: {':authority': foo}}}}]}]",
            Valid,
        ),
        (
            "set authority in rewrite and header",
            &routed("headers: {request: {set: {':authority': foo}}}, rewrite: {authority: bar}"),
            Error(
                "spec.http[0].headers.request.set.:authority",
                "authority header cannot be set multiple times: have \"bar\", attempting to set \"foo\"",
            ),
        ),
        (
            "non-method-get",
            &routed(
                "match: [{uri: {prefix: /api/v1/product}}, {uri: {prefix: /api/v1/products}, method: {exact: GET}}]",
            ),
            Warning(
                "spec.http[0].match[1]",
                "virtualService rule #0 match #1 of prefix /api/v1/products is not used (duplicate/overlapping match in rule #0 of prefix /api/v1/product on #0)",
            ),
        ),
        (
            "uri-with-prefix-exact",
            &routed("match: [{uri: {prefix: /}}, {uri: {exact: /}, method: {exact: GET}}]"),
            Valid,
        ),
        (
            "jwt claim route without gateway",
            "hosts: [foo.bar]\ngateways: [mesh]\nhttp: [{route: [{destination: {host: foo.baz}}], match: [{uri: {prefix: /}, headers: {'@request.auth.claims.foo': {exact: bar}}}]}]",
            Error(
                "spec.http[0].match[0].headers.@request.auth.claims.foo",
                "JWT claim based routing (key: @request.auth.claims.foo) is only supported for gateway, found no gateways: [mesh]",
            ),
        ),
        (
            "jwt claim route on a gateway",
            "hosts: [foo.bar]\ngateways: [ns1/gw]\nhttp: [{route: [{destination: {host: foo.baz}}], match: [{headers: {'@request.auth.claims.foo': {exact: bar}}}]}]",
            Valid,
        ),
        (
            "ip address as sni host",
            "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}], match: [{port: 999, sniHosts: [1.1.1.1]}]}]",
            Warning(
                "spec.tls[0].match[0].sniHosts[0]",
                "using an IP address (\"1.1.1.1\") goes against SNI spec and most clients do not support this",
            ),
        ),
        (
            "invalid wildcard as sni host",
            "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}], match: [{port: 999, sniHosts: [foo.*.com]}]}]",
            Error("spec.tls[0].match[0].sniHosts[0]", "invalid"),
        ),
        (
            "sni host outside the hosts",
            "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}], match: [{sniHosts: [other.bar]}]}]",
            Error(
                "spec.tls[0].match[0].sniHosts[0]",
                "SNI host \"other.bar\" is not a compatible subset of any of the virtual service hosts: [foo.bar]",
            ),
        ),
        (
            "sni host under a wildcard host",
            "hosts: ['*.bar']\ntls: [{route: [{destination: {host: foo.baz}}], match: [{sniHosts: [a.bar]}]}]",
            Valid,
        ),
        (
            "tls route without match",
            "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}]}]",
            Error("spec.tls[0].match", "TLS route must have at least one match condition"),
        ),
        (
            "tls match without sni hosts",
            "hosts: [foo.bar]\ntls: [{route: [{destination: {host: foo.baz}}], match: [{port: 443}]}]",
            Error("spec.tls[0].match[0].sniHosts", "TLS match must have at least one SNI host"),
        ),
        (
            "export to",
            "hosts: [foo.bar]\nexportTo: [.]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Valid,
        ),
        (
            "export to public and private",
            "hosts: [foo.bar]\nexportTo: [., '*']\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Error(
                "spec.exportTo",
                "cannot have both public (*) and non-public exportTo values for a resource",
            ),
        ),
    ]);
}

#[test]
fn chaining_cases_from_istio() {
    check_all(&[
        (
            "root simple",
            "hosts: [foo.bar]\ngateways: [test-gateway]\nhttp: [{delegate: {name: test, namespace: test}}]",
            Valid,
        ),
        (
            "root applies to sidecar with delegate",
            "hosts: [foo.bar]\nhttp: [{delegate: {name: test, namespace: test}}]",
            Valid,
        ),
        (
            "root with delegate and destination in one route",
            "hosts: [foo.bar]\nhttp: [{delegate: {name: test, namespace: test}, route: [{destination: {host: foo.baz}}]}]",
            Error("spec.http[0].route", "root HTTP route  must not specify route"),
        ),
        (
            "root with delegate and redirect",
            "hosts: [foo.bar]\nhttp: [{name: r, delegate: {name: test}, redirect: {uri: /lerp, authority: foo.biz}}]",
            Error("spec.http[0].redirect", "root HTTP route r must not specify redirect"),
        ),
        (
            "delegate with no destination",
            "hosts: []\nhttp: [{}]",
            Error("spec.http[0].route", "HTTP route, redirect or direct_response is required"),
        ),
        (
            "delegate with delegate",
            "http: [{delegate: {name: test, namespace: test}}]",
            Error("spec.http[0].delegate", "delegate HTTP route cannot contain delegate"),
        ),
        (
            "delegate with TCP route",
            "tcp: [{route: [{destination: {host: foo.baz}}]}]",
            Error("spec.tcp", "delegate virtual service must have no tcp route specified"),
        ),
        (
            "delegate with TLS route",
            "tls: [{match: [{sniHosts: [a.b]}], route: [{destination: {host: foo.baz}}]}]",
            Error("spec.tls", "delegate virtual service must have no tls route specified"),
        ),
        (
            "delegate with gateway",
            "gateways: [test]\nhttp: [{route: [{destination: {host: foo.baz}}]}]",
            Error("spec.gateways", "delegate virtual service must have no gateways specified"),
        ),
        (
            "delegate with sourceNamespace",
            "http: [{match: [{sourceNamespace: test}], route: [{destination: {host: foo.baz}}]}]",
            Valid,
        ),
    ]);
}

#[test]
fn unreachable_rules_are_warnings() {
    check_all(&[
        (
            "rule after a catch-all",
            "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: a.b}}]}, {route: [{destination: {host: c.d}}]}]",
            Warning(
                "spec.http[1]",
                "virtualService rule #1 not used (only the last rule can have no matches)",
            ),
        ),
        (
            "match after a catch-all",
            "hosts: [foo.bar]\nhttp: [{route: [{destination: {host: a.b}}]}, {name: late, match: [{uri: {exact: /}}], route: [{destination: {host: c.d}}]}]",
            Warning(
                "spec.http[1]",
                "virtualService rule \"late\" not used (route without matches defined before)",
            ),
        ),
        (
            "duplicate match",
            "hosts: [foo.bar]\nhttp: [{name: a, match: [{name: m, uri: {prefix: /x}}], route: [{destination: {host: a.b}}]}, {name: b, match: [{uri: {prefix: /x}}], route: [{destination: {host: c.d}}]}]",
            Warning(
                "spec.http[1].match[0]",
                "virtualService rule \"b\" match #0 is not used (duplicate/overlapping match in rule \"a\")",
            ),
        ),
        (
            "all matches duplicated",
            "hosts: [foo.bar]\nhttp: [{name: a, match: [{uri: {prefix: /x}}], route: [{destination: {host: a.b}}]}, {name: b, match: [{uri: {prefix: /x}}], route: [{destination: {host: c.d}}]}]",
            Warning("spec.http[1]", "virtualService rule \"b\" not used (all matches used by prior rules)"),
        ),
        (
            "overlap in two rules",
            "hosts: [foo.bar]\nhttp: [{name: a, match: [{uri: {prefix: /api}}], route: [{destination: {host: a.b}}]}, {name: b, match: [{uri: {prefix: /api/v1}}], route: [{destination: {host: c.d}}]}]",
            Warning(
                "spec.http[1].match[0]",
                "virtualService rule \"b\" match #0 of prefix /api/v1 is not used (duplicate/overlapping match in rule #0 of prefix /api on \"a\")",
            ),
        ),
        (
            "no overlap with a different method",
            "hosts: [foo.bar]\nhttp: [{match: [{uri: {prefix: /api}, method: {exact: POST}}], route: [{destination: {host: a.b}}]}, {match: [{uri: {prefix: /api/v1}}], route: [{destination: {host: c.d}}]}]",
            Valid,
        ),
        (
            "no overlap with more headers",
            "hosts: [foo.bar]\nhttp: [{match: [{uri: {prefix: /api}}], route: [{destination: {host: a.b}}]}, {match: [{uri: {prefix: /api/v1}, headers: {x: {exact: y}}}], route: [{destination: {host: c.d}}]}]",
            Valid,
        ),
        (
            "duplicate tcp match",
            "hosts: [foo.bar]\ntcp: [{match: [{port: 80}], route: [{destination: {host: a.b}}]}, {match: [{port: 80}], route: [{destination: {host: c.d}}]}]",
            Warning(
                "spec.tcp[1].match[0]",
                "virtualService rule #1 match #0 is not used (duplicate/overlapping match in rule #0)",
            ),
        ),
        (
            "tcp rule after a catch-all",
            "hosts: [foo.bar]\ntcp: [{route: [{destination: {host: a.b}}]}, {route: [{destination: {host: c.d}}]}]",
            Warning(
                "spec.tcp[1]",
                "virtualService rule #1 not used (only the last rule can have no matches)",
            ),
        ),
        (
            "duplicate tls match",
            "hosts: [foo.bar]\ntls: [{match: [{sniHosts: [foo.bar]}], route: [{destination: {host: a.b}}]}, {match: [{sniHosts: [foo.bar]}], route: [{destination: {host: c.d}}]}]",
            Warning("spec.tls[1]", "virtualService rule #1 not used (all matches used by prior rules)"),
        ),
    ]);
}

#[test]
fn route_semantics_skip_destination_checks() {
    let mut m = meta("vs", "ns1");
    m.annotations.insert(ROUTE_SEMANTICS_ANNOTATION.into(), "gateway".into());
    let vs = spec::<VirtualService>(
        "hosts: [foo.bar]\ngateways: [ns1/gateway~istio-autogenerated-k8s-gateway~foo]\nhttp: [{route: [{destination: {host: '*'}}]}]",
    );
    check("gateway semantics", &run(validate, &m, &vs), Valid);
    check(
        "same without the annotation",
        &run(validate, &meta("vs", "ns1"), &vs),
        Error("spec.http[0].route[0].destination.host", "invalid destination host *"),
    );
}

#[test]
fn namespace_defaults_to_default() {
    let vs = spec::<VirtualService>(
        "hosts: [d]\nexportTo: [.]\nhttp: [{route: [{destination: {host: c, subset: v1}}]}]",
    );
    check("istioctl exportTo=. case", &run(validate, &meta("vs", ""), &vs), Valid);
}

#[test]
fn istioctl_invalid_virtual_service_has_exactly_the_weight_error() {
    let vs = spec::<VirtualService>(
        "http:\n- route:\n  - destination: {host: c, subset: v1}\n    weight: 75\n  - destination: {host: c, subset: v2}\n    weight: -15\n",
    );
    let report = run(validate, &meta("invalid-virtual-service", ""), &vs);
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert_eq!(report.errors[0].path, "spec.http[0].route[1].weight");
    assert_eq!(report.errors[0].message, "weight -15 < 0");
    assert!(report.warnings.is_empty());
}

#[test]
fn host_matching_follows_istio() {
    assert!(host_matches("foo.com", "foo.com"));
    assert!(!host_matches("foo.com", "bar.com"));
    assert!(host_matches("*.com", "foo.com"));
    assert!(host_matches("bar.com", "*.com"));
    assert!(!host_matches("*.foo.com", "foo.com"));
    assert!(host_matches("*", "foo.com"));
    assert!(host_matches("*", "*.com"));
    assert!(host_subset_of("a.foo.com", "*.foo.com"));
    assert!(host_subset_of("*.a.foo.com", "*.foo.com"));
    assert!(!host_subset_of("*.foo.com", "*.a.foo.com"));
    assert!(!host_subset_of("*.foo.com", "a.foo.com"));
}
