//! The DestinationRule cases from Istio's tests (all but load balancing), and the helpers the tests of
//! the submodules share.

use api::networking::DestinationRule;

use super::*;
use crate::testutil::{
    Want::{self, Error, Valid, Warning},
    check, meta, run, spec,
};

pub(super) fn check_all(cases: &[(&str, &str, Want)]) {
    crate::testutil::check_all::<DestinationRule>(validate, &meta("dr", "ns1"), cases);
}

/// A rule for host `reviews` with the given top-level traffic policy (flow-style YAML).
pub(super) fn policy(tp: &str) -> String {
    format!("host: reviews\ntrafficPolicy: {tp}")
}

const TP: &str = "spec.trafficPolicy";

#[test]
fn destination_rule_cases_from_istio() {
    let good_policy = "{loadBalancer: {simple: ROUND_ROBIN}, connectionPool: {tcp: {maxConnections: 7}, http: {http2MaxRequests: 11}}, outlierDetection: {minHealthPercent: 20}}";
    let bad_policy =
        "{loadBalancer: {simple: ROUND_ROBIN}, connectionPool: {}, outlierDetection: {minHealthPercent: 20}}";
    check_all(&[
        (
            "simple destination rule",
            "host: reviews\nsubsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]",
            Valid,
        ),
        (
            "empty selector labels",
            "host: reviews\nsubsets: [{name: v1, labels: {version: v1}}]\nworkloadSelector: {}",
            Warning("spec.workloadSelector", "workload selector specified without labels"),
        ),
        (
            "missing host",
            "subsets: [{name: v1, labels: {version: v1}}]",
            Error("spec.host", "empty domain name not allowed"),
        ),
        ("bad host", "host: foo.*.com", Error("spec.host", "invalid")),
        ("wildcard host", "host: '*.foo.com'", Valid),
        (
            "missing subset name",
            "host: reviews\nsubsets: [{labels: {version: v1}}, {name: v2, labels: {version: v2}}]",
            Error("spec.subsets[0].name", "subset name cannot be empty"),
        ),
        (
            "duplicate subset names",
            "host: reviews\nsubsets: [{name: foo, labels: {version: v1}}, {name: foo, labels: {version: v2}}]",
            Error("spec.subsets[1].name", "duplicate subset names: foo"),
        ),
        (
            "bad subset labels",
            "host: reviews\nsubsets: [{name: v1, labels: {'@bad': v1}}]",
            Error("spec.subsets[0].labels", "invalid tag key"),
        ),
        (
            "valid traffic policy, top level",
            &format!("host: reviews\ntrafficPolicy: {good_policy}\nsubsets: [{{name: v1}}]"),
            Valid,
        ),
        (
            "invalid traffic policy, top level",
            &format!("host: reviews\ntrafficPolicy: {bad_policy}"),
            Error("spec.trafficPolicy.connectionPool", "connection pool must have at least one field"),
        ),
        (
            "valid traffic policy, subset level",
            &format!("host: reviews\nsubsets: [{{name: v1, trafficPolicy: {good_policy}}}]"),
            Valid,
        ),
        (
            "invalid traffic policy, subset level",
            &format!("host: reviews\nsubsets: [{{name: v1, trafficPolicy: {bad_policy}}}, {{name: v2}}]"),
            Error(
                "spec.subsets[0].trafficPolicy.connectionPool",
                "connection pool must have at least one field",
            ),
        ),
        (
            "valid traffic policy, both levels",
            &format!(
                "host: reviews\ntrafficPolicy: {good_policy}\nsubsets: [{{name: v1, trafficPolicy: {good_policy}}}]"
            ),
            Valid,
        ),
    ]);
}

#[test]
fn insecure_skip_verify_cases_from_istio() {
    let tls = |t: &str| policy(&format!("{{tls: {t}}}"));
    let at = "spec.trafficPolicy.tls.insecureSkipVerify";
    check_all(&[
        (
            "simple, CA",
            &tls("{mode: SIMPLE, caCertificates: test, subjectAltNames: [reviews.default.svc]}"),
            Valid,
        ),
        (
            "simple, credential",
            &tls("{mode: SIMPLE, credentialName: test, subjectAltNames: [reviews.default.svc]}"),
            Valid,
        ),
        (
            "simple, skip false, CA",
            &tls("{mode: SIMPLE, caCertificates: test, subjectAltNames: [r], insecureSkipVerify: false}"),
            Valid,
        ),
        (
            "simple, skip true, credential",
            &tls("{mode: SIMPLE, credentialName: test, insecureSkipVerify: true}"),
            Error(
                at,
                "cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true",
            ),
        ),
        (
            "simple, skip true, CA",
            &tls("{mode: SIMPLE, caCertificates: test, insecureSkipVerify: true}"),
            Error(at, "cannot specify CaCertificates or CredentialName or SubjectAltNames"),
        ),
        (
            "simple, skip true, SAN",
            &tls("{mode: SIMPLE, subjectAltNames: [reviews.default.svc], insecureSkipVerify: true}"),
            Error(at, "cannot specify CaCertificates or CredentialName or SubjectAltNames"),
        ),
        (
            "mutual, CA",
            &tls(
                "{mode: MUTUAL, caCertificates: test, privateKey: key, clientCertificate: cert, subjectAltNames: [r]}",
            ),
            Valid,
        ),
        ("mutual, credential", &tls("{mode: MUTUAL, credentialName: test, subjectAltNames: [r]}"), Valid),
        (
            "mutual, skip true, CA",
            &tls(
                "{mode: MUTUAL, caCertificates: test, privateKey: key, clientCertificate: cert, insecureSkipVerify: true}",
            ),
            Error(at, "cannot specify CaCertificates or SubjectAltNames when InsecureSkipVerify is set true"),
        ),
        (
            "mutual, skip true, credential",
            &tls("{mode: MUTUAL, credentialName: test, insecureSkipVerify: true}"),
            Valid,
        ),
        (
            "mutual, skip true, no CA",
            &tls("{mode: MUTUAL, privateKey: key, clientCertificate: cert, insecureSkipVerify: true}"),
            Valid,
        ),
        (
            "mutual, skip true, SAN",
            &tls(
                "{mode: MUTUAL, privateKey: key, clientCertificate: cert, subjectAltNames: [r], insecureSkipVerify: true}",
            ),
            Error(at, "cannot specify CaCertificates or SubjectAltNames"),
        ),
    ]);
}

#[test]
fn client_tls_cases_from_istio() {
    let tls = |t: &str| policy(&format!("{{tls: {t}}}"));
    let at = |f: &'static str| -> &'static str {
        match f {
            "credentialName" => "spec.trafficPolicy.tls.credentialName",
            "clientCertificate" => "spec.trafficPolicy.tls.clientCertificate",
            _ => "spec.trafficPolicy.tls.privateKey",
        }
    };
    let both = "cannot specify client certificates or CA certificate or CA CRL If credentialName is set";
    check_all(&[
        ("SIMPLE: credential name", &tls("{mode: SIMPLE, credentialName: some credential}"), Valid),
        (
            "SIMPLE: credential and cert",
            &tls("{mode: SIMPLE, credentialName: c, clientCertificate: cert}"),
            Error(at("credentialName"), both),
        ),
        (
            "SIMPLE: credential and key",
            &tls("{mode: SIMPLE, credentialName: c, privateKey: key}"),
            Error(at("credentialName"), both),
        ),
        (
            "SIMPLE: credential and CA",
            &tls("{mode: SIMPLE, credentialName: c, caCertificates: ca}"),
            Error(at("credentialName"), both),
        ),
        ("MUTUAL: credential name", &tls("{mode: MUTUAL, credentialName: some credential}"), Valid),
        (
            "MUTUAL: credential and cert",
            &tls("{mode: MUTUAL, credentialName: c, clientCertificate: cert}"),
            Error(at("credentialName"), both),
        ),
        (
            "MUTUAL: credential and CRL",
            &tls("{mode: MUTUAL, credentialName: c, caCrl: ca}"),
            Error(at("credentialName"), both),
        ),
        ("MUTUAL: cert and key", &tls("{mode: MUTUAL, clientCertificate: cert, privateKey: key}"), Valid),
        (
            "MUTUAL: key missing",
            &tls("{mode: MUTUAL, clientCertificate: cert}"),
            Error(at("privateKey"), "private key required for mutual tls"),
        ),
        (
            "MUTUAL: cert missing",
            &tls("{mode: MUTUAL, privateKey: key}"),
            Error(at("clientCertificate"), "client certificate required for mutual tls"),
        ),
        ("ISTIO_MUTUAL", &tls("{mode: ISTIO_MUTUAL}"), Valid),
        (
            "configmap credential in own namespace",
            &tls("{mode: SIMPLE, credentialName: 'configmap://ns1/ca'}"),
            Valid,
        ),
        (
            "configmap credential in another namespace",
            &tls("{mode: SIMPLE, credentialName: 'configmap://ns2/ca'}"),
            Error(at("credentialName"), "namespace must match the configuration namespace \"ns1\""),
        ),
        (
            "configmap credential without namespace",
            &tls("{mode: SIMPLE, credentialName: 'configmap://ca'}"),
            Error(
                at("credentialName"),
                "invalid resource name \"configmap://ca\". Expected namespace and name",
            ),
        ),
    ]);
}

#[test]
fn traffic_policy_cases_from_istio() {
    check_all(&[
        ("empty policy", &policy("{}"), Error(TP, "traffic policy must have at least one field")),
        (
            "missing port in port level settings",
            &policy(
                "{portLevelSettings: [{loadBalancer: {simple: ROUND_ROBIN}, outlierDetection: {minHealthPercent: 20}}]}",
            ),
            Error("spec.trafficPolicy.portLevelSettings[0].port", "portTrafficPolicy must have valid port"),
        ),
        (
            "empty port level settings",
            &policy("{portLevelSettings: [{port: {number: 80}}]}"),
            Error(
                "spec.trafficPolicy.portLevelSettings[0]",
                "port traffic policy must have at least one field",
            ),
        ),
        (
            "port level settings are validated",
            &policy(
                "{portLevelSettings: [{port: {number: 80}, outlierDetection: {maxEjectionPercent: 105}}]}",
            ),
            Error(
                "spec.trafficPolicy.portLevelSettings[0].outlierDetection.maxEjectionPercent",
                "percentage 105 is not in range 0..100",
            ),
        ),
        (
            "bad max connection duration",
            &policy("{connectionPool: {tcp: {maxConnectionDuration: 0.0000005s}}}"),
            Error(
                "spec.trafficPolicy.connectionPool.tcp.maxConnectionDuration",
                "duration must be greater than 1ms",
            ),
        ),
        (
            "panic threshold too low",
            &policy("{outlierDetection: {minHealthPercent: -1}}"),
            Error(
                "spec.trafficPolicy.outlierDetection.minHealthPercent",
                "percentage -1 is not in range 0..100",
            ),
        ),
        (
            "both upgrade and use client protocol set",
            &policy("{connectionPool: {http: {h2UpgradePolicy: UPGRADE, useClientProtocol: true}}}"),
            Error(
                "spec.trafficPolicy.connectionPool.http.useClientProtocol",
                "use client protocol must not be true when H2UpgradePolicy is UPGRADE",
            ),
        ),
        (
            "tunnel with proxy protocol",
            &policy("{tunnel: {targetHost: example.com, targetPort: 8443}, proxyProtocol: {version: V2}}"),
            Error(TP, "tunnel and proxyProtocol must not be set together"),
        ),
        ("tunnel", &policy("{tunnel: {protocol: CONNECT, targetHost: 10.0.0.1, targetPort: 8443}}"), Valid),
        (
            "tunnel with bad protocol",
            &policy("{tunnel: {protocol: GET, targetHost: example.com, targetPort: 8443}}"),
            Error("spec.trafficPolicy.tunnel.protocol", "tunnel protocol must be \"CONNECT\" or \"POST\""),
        ),
        (
            "tunnel with bad host",
            &policy("{tunnel: {targetHost: 'bad host', targetPort: 8443}}"),
            Error(
                "spec.trafficPolicy.tunnel.targetHost",
                "tunnel target host must be valid FQDN or IP address",
            ),
        ),
        (
            "tunnel without port",
            &policy("{tunnel: {targetHost: example.com}}"),
            Error(
                "spec.trafficPolicy.tunnel.targetPort",
                "tunnel target port is invalid: port number 0 must be in the range 1..65535",
            ),
        ),
        ("proxy protocol", &policy("{proxyProtocol: {version: V2}}"), Valid),
        (
            "retry budget over 100",
            &policy("{retryBudget: {percent: 150}}"),
            Error(
                "spec.trafficPolicy.retryBudget.percent",
                "Invalid value: 150: should be less than or equal to 100",
            ),
        ),
        ("retry budget", &policy("{retryBudget: {percent: 20, minRetryConcurrency: 3}}"), Valid),
    ]);
}

#[test]
fn connection_pool_cases_from_istio() {
    let pool = |p: &str| policy(&format!("{{connectionPool: {p}}}"));
    let http = |f: &'static str| -> String { format!("spec.trafficPolicy.connectionPool.http.{f}") };
    let tcp = |f: &'static str| -> String { format!("spec.trafficPolicy.connectionPool.tcp.{f}") };
    let cases: Vec<(&str, String, Want, Option<String>)> = vec![
        (
            "tcp and http",
            pool(
                "{tcp: {maxConnections: 7, connectTimeout: 2s}, http: {http1MaxPendingRequests: 2, http2MaxRequests: 11, maxRequestsPerConnection: 5, maxRetries: 4, idleTimeout: 30s, maxConcurrentStreams: 5}}",
            ),
            Valid,
            None,
        ),
        ("tcp only", pool("{tcp: {maxConnections: 7, connectTimeout: 2s}}"), Valid, None),
        ("http only", pool("{http: {http1MaxPendingRequests: 2, http2MaxRequests: 11}}"), Valid, None),
        ("http2 keepalive", pool("{http: {http2KeepAlive: {interval: 15s, timeout: 5s}}}"), Valid, None),
        (
            "empty",
            pool("{}"),
            Error("spec.trafficPolicy.connectionPool", "connection pool must have at least one field"),
            None,
        ),
        (
            "bad max connections",
            pool("{tcp: {maxConnections: -1}}"),
            Error("", "max connections must be non-negative"),
            Some(tcp("maxConnections")),
        ),
        (
            "bad connect timeout",
            pool("{tcp: {connectTimeout: 2.000000005s}}"),
            Error("", "only durations to ms precision are supported"),
            Some(tcp("connectTimeout")),
        ),
        (
            "bad max pending requests",
            pool("{http: {http1MaxPendingRequests: -1}}"),
            Error("", "http1 max pending requests must be non-negative"),
            Some(http("http1MaxPendingRequests")),
        ),
        (
            "bad max requests",
            pool("{http: {http2MaxRequests: -1}}"),
            Error("", "http2 max requests must be non-negative"),
            Some(http("http2MaxRequests")),
        ),
        (
            "bad max requests per connection",
            pool("{http: {maxRequestsPerConnection: -1}}"),
            Error("", "max requests per connection must be non-negative"),
            Some(http("maxRequestsPerConnection")),
        ),
        (
            "bad max retries",
            pool("{http: {maxRetries: -1}}"),
            Error("", "max retries must be non-negative"),
            Some(http("maxRetries")),
        ),
        (
            "bad idle timeout",
            pool("{http: {idleTimeout: 30.000000005s}}"),
            Error("", "only durations to ms precision"),
            Some(http("idleTimeout")),
        ),
        ("tcp idle timeout disabled", pool("{tcp: {idleTimeout: 0s}}"), Valid, None),
        (
            "bad tcp idle timeout",
            pool("{tcp: {idleTimeout: 1.0000001s}}"),
            Error("", "only durations to ms precision"),
            Some(tcp("idleTimeout")),
        ),
        (
            "bad max concurrent streams",
            pool("{http: {maxConcurrentStreams: -1}}"),
            Error("", "max concurrent streams must be non-negative"),
            Some(http("maxConcurrentStreams")),
        ),
        (
            "keepalive without interval",
            pool("{http: {http2KeepAlive: {timeout: 5s}}}"),
            Error("", "http2 keepalive interval is required"),
            Some(http("http2KeepAlive.interval")),
        ),
        (
            "keepalive without timeout",
            pool("{http: {http2KeepAlive: {interval: 15s}}}"),
            Error("", "http2 keepalive timeout is required"),
            Some(http("http2KeepAlive.timeout")),
        ),
        (
            "bad keepalive interval",
            pool("{http: {http2KeepAlive: {interval: 15.000000005s, timeout: 5s}}}"),
            Error("", "only durations to ms precision"),
            Some(http("http2KeepAlive.interval")),
        ),
        (
            "bad tcp keepalive time",
            pool("{tcp: {tcpKeepalive: {time: 0.0001s}}}"),
            Error("", "duration must be greater than 1ms"),
            Some(tcp("tcpKeepalive.time")),
        ),
    ];
    for (name, yaml, want, path) in cases {
        let report = run(validate, &meta("dr", "ns1"), &spec::<DestinationRule>(&yaml));
        match (want, path) {
            (Error(_, text), Some(path)) => {
                assert!(
                    report.errors.iter().any(|i| i.path == path && i.message.contains(text)),
                    "{name}: expected error {path}: {text}, got {report:?}"
                );
            }
            (want, _) => check(name, &report, want),
        }
    }
}

#[test]
fn outlier_detection_cases_from_istio() {
    let od = |o: &str| policy(&format!("{{outlierDetection: {o}}}"));
    let at = |f: &str| format!("spec.trafficPolicy.outlierDetection.{f}");
    let interval = at("interval");
    let base = at("baseEjectionTime");
    let max = at("maxEjectionPercent");
    let min = at("minHealthPercent");
    let errors = at("consecutiveErrors");
    let local = at("consecutiveLocalOriginFailures");
    let codes = at("outlierDetectionHttpErrorCodes[0]");
    let cases: Vec<(&str, String, Want, &str)> = vec![
        ("valid", od("{interval: 2s, baseEjectionTime: 2s, maxEjectionPercent: 50}"), Valid, ""),
        (
            "bad interval",
            od("{interval: 2.000000005s}"),
            Error("", "only durations to ms precision"),
            &interval,
        ),
        (
            "bad base ejection time",
            od("{baseEjectionTime: 2.000000005s}"),
            Error("", "only durations to ms precision"),
            &base,
        ),
        (
            "bad max ejection percent",
            od("{maxEjectionPercent: 105}"),
            Error("", "percentage 105 is not in range 0..100"),
            &max,
        ),
        (
            "panic threshold too low",
            od("{minHealthPercent: -1}"),
            Error("", "percentage -1 is not in range 0..100"),
            &min,
        ),
        (
            "panic threshold too high",
            od("{minHealthPercent: 101}"),
            Error("", "percentage 101 is not in range 0..100"),
            &min,
        ),
        (
            "deprecated consecutive errors",
            od("{consecutiveErrors: 101}"),
            Warning(
                "",
                "outlier detection consecutive errors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead",
            ),
            &errors,
        ),
        (
            "local origin failures without split",
            od("{consecutiveLocalOriginFailures: 10}"),
            Error(
                "",
                "outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false",
            ),
            &local,
        ),
        (
            "local origin failures with split",
            od("{consecutiveLocalOriginFailures: 10, splitExternalLocalOriginErrors: true}"),
            Valid,
            "",
        ),
        (
            "http error code out of range",
            od("{outlierDetectionHttpErrorCodes: [600]}"),
            Error("", "should be less than or equal to 599"),
            &codes,
        ),
        ("http error codes", od("{outlierDetectionHttpErrorCodes: [500, 503]}"), Valid, ""),
    ];
    for (name, yaml, want, path) in cases {
        let report = run(validate, &meta("dr", "ns1"), &spec::<DestinationRule>(&yaml));
        let want = match want {
            Error(_, text) => {
                assert!(
                    report.errors.iter().any(|i| i.path == path && i.message.contains(text)),
                    "{name}: {report:?}"
                );
                continue;
            }
            Warning(_, text) => {
                assert!(report.errors.is_empty(), "{name}: {report:?}");
                assert!(
                    report.warnings.iter().any(|i| i.path == path && i.message.contains(text)),
                    "{name}: {report:?}"
                );
                continue;
            }
            Valid => Valid,
        };
        check(name, &report, want);
    }
}

#[test]
fn export_to_and_workload_selector() {
    check_all(&[
        ("export to own namespace", "host: reviews\nexportTo: [., ns2]", Valid),
        (
            "export to public and more",
            "host: reviews\nexportTo: ['*', ns2]",
            Error("spec.exportTo", "cannot have both public (*) and non-public exportTo values"),
        ),
        (
            "export to none",
            "host: reviews\nexportTo: ['~']",
            Error("spec.exportTo", "exportTo ~ (none) is not allowed for Istio configuration objects"),
        ),
        (
            "duplicate export",
            "host: reviews\nexportTo: [ns1, .]",
            Error("spec.exportTo", "duplicate entries in exportTo: . and current namespace ns1"),
        ),
        (
            "selector, export to own namespace",
            "host: reviews\nworkloadSelector: {matchLabels: {app: a}}\nexportTo: [.]",
            Valid,
        ),
        (
            "selector, export beyond own namespace",
            "host: reviews\nworkloadSelector: {matchLabels: {app: a}}\nexportTo: [ns2]",
            Error(
                "spec.exportTo",
                "destination rule with workload selector cannot have exportTo beyond current namespace",
            ),
        ),
        (
            "selector with wildcard",
            "host: reviews\nworkloadSelector: {matchLabels: {app: '*'}}",
            Error("spec.workloadSelector", "wildcard is not supported in selector: \"app=*\""),
        ),
        (
            "selector with a long value",
            "host: reviews\nworkloadSelector: {matchLabels: {app: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}",
            Error("spec.workloadSelector.matchLabels.app", "Too long: may not be more than 63 bytes"),
        ),
    ]);
}

#[test]
fn namespace_defaults_to_default() {
    let rule = spec::<DestinationRule>(
        "host: reviews\nexportTo: [.]\ntrafficPolicy: {tls: {mode: SIMPLE, credentialName: 'configmap://default/ca'}}",
    );
    check("no namespace", &run(validate, &meta("dr", ""), &rule), Valid);
}
