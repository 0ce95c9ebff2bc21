//! Rules of the group-B analyzers (injection, serviceentry, deployment, envoyfilter,
//! externalcontrolplane, webhook, telemetry, multicluster, k8sgateway, conditions, authn, authz) that
//! Istio's case table (`analyzer_cases.rs`) does not exercise: inputs are Istio's test files where
//! they exist without a case, otherwise small objects written here.

use std::path::{Path, PathBuf};

use meshpilot_analysis::{
    Filter, Message,
    analyzers::{self, multicluster},
    resource::{LoadOptions, Resources},
};

fn testdata(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/istio-testdata/pkg/config/analysis/analyzers/testdata")
        .join(file)
}

/// Objects as Istio's analyzer tests read them: runtime kinds from files, no default namespace.
fn resources(texts: &[&str]) -> Resources {
    let mut r =
        Resources::new(LoadOptions { default_namespace: String::new(), runtime_kinds_from_files: true });
    for (i, text) in texts.iter().enumerate() {
        r.add_text(&format!("input{i}.yaml"), text, true);
    }
    assert!(r.load_errors.is_empty(), "{:?}", r.load_errors);
    r
}

fn run(analyzer: &str, r: &Resources) -> Vec<Message> {
    let a = analyzers::find(analyzer).unwrap_or_else(|| panic!("no analyzer {analyzer}"));
    meshpilot_analysis::analyze(r, &[a], &Filter::default()).messages
}

/// `CODE Kind ns/name` per message, sorted.
fn codes(messages: &[Message]) -> Vec<String> {
    let mut v: Vec<String> =
        messages.iter().map(|m| format!("{} {}", m.code(), m.origin.friendly_name())).collect();
    v.sort();
    v
}

fn read(file: &str) -> String {
    std::fs::read_to_string(testdata(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn envoy_filter_priority_silences_relative_operations() {
    let r = resources(&[&read("envoy-filter-patch-operation.yaml")]);
    // test-patch-1 (priority 10): REPLACE on CLUSTER is always wrong; its HTTP_FILTER REPLACE is fine.
    // test-patch-2 (no priority): REPLACE on HTTP_FILTER is relative; ADD on CLUSTER is fine.
    // test-patch-3 (priority 10): nothing.
    assert_eq!(
        codes(&run("envoyfilter.EnvoyPatchAnalyzer", &r)),
        ["IST0151 EnvoyFilter bookinfo/test-patch-2", "IST0152 EnvoyFilter bookinfo/test-patch-1"]
    );
}

#[test]
fn multicluster_services_are_compared_across_clusters() {
    let one = resources(&[&read("multicluster/inconsistent-service-1.yaml")]);
    let two = resources(&[&read("multicluster/inconsistent-service-2.yaml")]);
    let messages = multicluster::inconsistent_services(&[("cluster1", &one), ("cluster2", &two)]);
    assert_eq!(
        codes(&messages),
        [
            "IST0170 Service my-namespace/extra-port",
            "IST0170 Service my-namespace/inconsistent-port-name",
            "IST0170 Service my-namespace/mixed-mode",
            "IST0170 Service my-namespace/mixed-port-protocol",
            "IST0170 Service my-namespace/mixed-type",
        ]
    );
    let mixed = messages.iter().find(|m| m.origin.name == "mixed-mode").expect("mixed-mode");
    assert_eq!(
        mixed.text,
        "The service mixed-mode in namespace \"my-namespace\" is inconsistent across clusters [\"cluster1\" \
         \"cluster2\"], which can lead to undefined behaviors. The inconsistent behaviors are: service has mixed \
         mode like headless and clusterIP."
    );
    // One cluster alone, as an ordinary analysis: nothing to compare.
    assert!(run("multicluster.ServiceAnalyzer", &one).is_empty());
}

const TELEMETRIES: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: app-1, namespace: apps, labels: {app: web}}
spec: {containers: [{name: web, image: web}]}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: web-a, namespace: apps}
spec: {selector: {matchLabels: {app: web}}}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: web-b, namespace: apps}
spec: {selector: {matchLabels: {app: web}}}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: nobody, namespace: apps}
spec: {selector: {matchLabels: {app: gone, tier: x}}}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: ns-wide-1, namespace: apps}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: ns-wide-2, namespace: apps}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: ns-wide, namespace: other}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: dotted, namespace: other}
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: none
"#;

#[test]
fn telemetry_selectors() {
    let r = resources(&[TELEMETRIES]);
    let selector = run("telemetry.SelectorAnalyzer", &r);
    assert_eq!(
        codes(&selector),
        [
            "IST0101 Telemetry apps/nobody",
            "IST0101 Telemetry other/dotted",
            "IST0159 Telemetry apps/web-a",
            "IST0159 Telemetry apps/web-b"
        ]
    );
    let texts: Vec<&str> = selector.iter().map(|m| m.text.as_str()).collect();
    assert!(texts.contains(&"Referenced selector not found: \"app=gone,tier=x\""), "{texts:?}");
    assert!(
        texts.contains(
            &"The Telemetries [web-a web-b] in namespace \"apps\" select the same workload pod \"app-1\", which can \
              lead to undefined behavior."
        ),
        "{texts:?}"
    );
    let line_of = |name: &str| selector.iter().find(|m| m.origin.name == name).and_then(|m| m.origin.line);
    let line_with = |text: &str| TELEMETRIES.lines().position(|l| l.contains(text)).map(|i| i as u32 + 1);
    assert_eq!(line_of("nobody"), line_with("app: gone"));
    assert_eq!(line_of("dotted"), line_with("app.kubernetes.io/name: none"), "a label key with dots");
    assert_eq!(
        codes(&run("telemetry.DefaultSelectorAnalyzer", &r)),
        ["IST0160 Telemetry apps/ns-wide-1", "IST0160 Telemetry apps/ns-wide-2"]
    );
}

const AUTHZ: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: apps, labels: {istio-injection: enabled}}
---
apiVersion: v1
kind: Namespace
metadata: {name: empty}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: apps, labels: {app: web}}
spec: {containers: [{name: web, image: web}]}
---
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: empty, labels: {app: plain}}
spec: {containers: [{name: plain, image: plain}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: web, namespace: apps}
spec:
  selector: {matchLabels: {app: web}}
  rules:
  - from:
    - source: {namespaces: ["apps", "team-*", "*-prod", "missing"], notNamespaces: ["gone"]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: db, namespace: apps}
spec: {selector: {matchLabels: {app: db}}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: all, namespace: empty}
spec: {}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-web, namespace: istio-system}
spec: {selector: {matchLabels: {app: web}}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-none, namespace: istio-system}
spec: {selector: {matchLabels: {app: none}}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-wide, namespace: istio-system}
spec: {}
"#;

#[test]
fn authorization_policies_without_workloads_or_namespaces() {
    let r = resources(&[AUTHZ]);
    let messages = run("authz.AuthorizationPoliciesAnalyzer", &r);
    // `team-*` and `*-prod` match no namespace either: only `apps` exists besides `empty`.
    assert_eq!(
        codes(&messages),
        [
            "IST0101 AuthorizationPolicy apps/web",
            "IST0101 AuthorizationPolicy apps/web",
            "IST0101 AuthorizationPolicy apps/web",
            "IST0101 AuthorizationPolicy apps/web",
            "IST0127 AuthorizationPolicy apps/db",
            "IST0127 AuthorizationPolicy empty/all",
            "IST0127 AuthorizationPolicy istio-system/mesh-none",
        ]
    );
    let refs: Vec<&str> =
        messages.iter().filter(|m| m.code() == "IST0101").map(|m| m.text.as_str()).collect();
    for ns in ["team-*", "*-prod", "missing", "gone"] {
        assert!(refs.contains(&format!("Referenced namespace not found: {ns:?}").as_str()), "{refs:?}");
    }
    // Istio's name for `--analyzer` and `--list-analyzers`.
    assert!(analyzers::find("auth.AuthorizationPoliciesAnalyzer").is_some());
}

const WEBHOOKS: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: istio-sidecar-injector-canary, labels: {istio.io/rev: canary}}
webhooks:
- name: rev.namespace.sidecar-injector.istio.io
  clientConfig: {service: {name: istiod-canary, namespace: istio-system}}
  namespaceSelector:
    matchExpressions:
    - {key: istio.io/rev, operator: In, values: [canary]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: istio-revision-tag-default, labels: {istio.io/rev: canary, istio.io/tag: default}}
webhooks:
- name: rev.namespace.sidecar-injector.istio.io
  clientConfig: {service: {name: istiod-canary, namespace: istio-system}}
  namespaceSelector:
    matchExpressions:
    - {key: istio.io/rev, operator: In, values: [canary]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: unrelated}
webhooks:
- name: other.example.com
  clientConfig: {service: {name: nowhere, namespace: x}}
---
apiVersion: v1
kind: Service
metadata: {name: istiod-canary, namespace: istio-system}
"#;

#[test]
fn webhooks_of_one_revision_overlap() {
    let r = resources(&[WEBHOOKS]);
    let messages = run("webhook.Analyzer", &r);
    assert_eq!(
        codes(&messages),
        [
            "IST0139 MutatingWebhookConfiguration istio-revision-tag-default",
            "IST0139 MutatingWebhookConfiguration istio-sidecar-injector-canary"
        ]
    );
    assert_eq!(
        messages[1].text,
        "Webhook overlaps with others: [istio-revision-tag-default/rev.namespace.sidecar-injector.istio.io]. This \
         may cause injection to occur twice."
    );
}

const INJECTED_IMAGES: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: istio-sidecar-injector, namespace: istio-system}
data:
  values: '{"global": {"hub": "docker.io/istio", "tag": "1.30.0", "proxy": {"image": "proxyv2"}}}'
---
apiVersion: v1
kind: Namespace
metadata: {name: apps, labels: {istio-injection: enabled}}
---
apiVersion: networking.istio.io/v1beta1
kind: ProxyConfig
metadata: {name: distroless, namespace: istio-system}
spec: {image: {imageType: distroless}}
---
apiVersion: v1
kind: Pod
metadata: {name: root-default, namespace: apps}
spec: {containers: [{name: istio-proxy, image: docker.io/istio/proxyv2:1.30.0-distroless}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: annotated-default
  namespace: apps
  annotations: {proxy.istio.io/config: "image: {imageType: default}"}
spec: {containers: [{name: istio-proxy, image: docker.io/istio/proxyv2:1.30.0}]}
---
apiVersion: v1
kind: Pod
metadata: {name: stale, namespace: apps}
spec: {containers: [{name: istio-proxy, image: docker.io/istio/proxyv2:1.29.0-distroless}]}
---
apiVersion: v1
kind: Pod
metadata: {name: old, namespace: apps}
spec: {initContainers: [{name: istio-proxy, image: docker.io/istio/proxyv2:1.28.0}]}
"#;

#[test]
fn proxy_image_type_comes_from_the_root_proxy_config_and_the_pod_annotation() {
    let r = resources(&[INJECTED_IMAGES]);
    let messages = run("injection.ImageAnalyzer", &r);
    assert_eq!(codes(&messages), ["IST0158 Namespace apps"]);
    assert!(messages[0].text.contains("(pod names: [old stale])"), "{}", messages[0].text);
}

const NAMESPACES: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: istio-sidecar-injector-canary, namespace: istio-system}
data:
  values: '{"sidecarInjectorWebhook": {"enableNamespacesByDefault": true}}'
---
apiVersion: v1
kind: Namespace
metadata: {name: istio-system}
---
apiVersion: v1
kind: Namespace
metadata: {name: canary, labels: {istio.io/rev: canary}}
---
apiVersion: v1
kind: Namespace
metadata: {name: unlabelled}
---
apiVersion: v1
kind: Namespace
metadata: {name: ambient, labels: {istio.io/dataplane-mode: ambient}}
"#;

#[test]
fn namespaces_without_injection_and_the_ambient_and_istio_system_exceptions() {
    let r = resources(&[NAMESPACES]);
    let messages = run("injection.Analyzer", &r);
    // The canary revision's ConfigMap enables namespaces by default; Istio keeps that value for the
    // next namespace, whose own (default) ConfigMap does not exist.
    assert_eq!(codes(&messages), ["IST0148 Namespace unlabelled"]);
    let r = resources(&[
        &NAMESPACES.replace("enableNamespacesByDefault\": true", "enableNamespacesByDefault\": false")
    ]);
    let messages = run("injection.Analyzer", &r);
    assert_eq!(codes(&messages), ["IST0102 Namespace unlabelled"]);
    assert_eq!(
        messages[0].text,
        "The namespace is not enabled for Istio injection. Run 'kubectl label namespace unlabelled \
         istio-injection=enabled' to enable it, or 'kubectl label namespace unlabelled istio-injection=disabled' \
         to explicitly mark it as not needing injection."
    );
}

#[test]
fn service_entry_conflicts_are_reported_once_per_service_entry() {
    let text = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: http, namespace: a}
spec: {hosts: [example.com, example.org], ports: [{name: p, number: 80, protocol: HTTP}], resolution: DNS}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: tcp, namespace: b}
spec: {hosts: [example.com, example.org], ports: [{name: p, number: 80, protocol: TCP}], resolution: DNS, exportTo: ["."]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: lower, namespace: c}
spec: {hosts: [example.net], ports: [{name: p, number: 80, protocol: http}], resolution: DNS, exportTo: ["."]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: upper, namespace: c}
spec: {hosts: [example.net], ports: [{name: p, number: 80, protocol: HTTP}], resolution: DNS, exportTo: ["."]}
"#;
    let r = resources(&[text]);
    let messages = run("serviceentry.ConflictingServiceEntryProtocolAnalyzer", &r);
    // A global ServiceEntry conflicts with a namespace-local one on the same host and port; protocols
    // differing only in case do not conflict.
    assert_eq!(codes(&messages), ["IST0177 ServiceEntry a/http", "IST0177 ServiceEntry b/tcp"]);
    assert_eq!(
        messages[0].text,
        "Multiple ServiceEntries (a/http, b/tcp) define the same host \"example.com\" and port 80 with conflicting \
         protocols (HTTP, TCP)."
    );
}

#[test]
fn crd_versions_and_external_control_plane_urls() {
    let crd = |name: &str, version: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {name}\n  \
             annotations: {{gateway.networking.k8s.io/bundle-version: {version}}}\n---\n"
        )
    };
    let text = [
        crd("tcproutes.gateway.networking.k8s.io", "v1.6.0-rc.1"),
        crd("tlsroutes.gateway.networking.k8s.io", "v1.5.0-rc.1"),
        crd("httproutes.gateway.networking.k8s.io", "v0.1.0"),
        crd("grpcroutes.gateway.networking.k8s.io", "not-a-version"),
    ]
    .concat();
    let r = resources(&[&text]);
    let messages = run("k8sgateway.CRDVersionAnalyzer", &r);
    // A pre-release of the minimum counts as the minimum; CRDs without a minimum and unparsable
    // versions are skipped.
    assert_eq!(codes(&messages), Vec::<String>::new());
    let r = resources(&[&crd("tcproutes.gateway.networking.k8s.io", "v1.5.9")]);
    let messages = run("k8sgateway.CRDVersionAnalyzer", &r);
    assert_eq!(
        messages.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
        [
            "Gateway API CRD \"tcproutes.gateway.networking.k8s.io\" is at version \"1.5.9\" but Istio requires at \
          least \"1.6.0\"; resources of this kind will not be processed. Upgrade the Gateway API CRDs to satisfy \
          the minimum version."
        ]
    );

    let text = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: istio-validator-remote}
webhooks:
- {name: a.validation.istio.io, clientConfig: {url: "10.0.0.1:15017/validate"}}
- {name: b.validation.istio.io, clientConfig: {url: "https://[fd00::1]:15017/validate"}}
- {name: c.validation.istio.io, clientConfig: {url: ""}}
- {name: d.validation.istio.io, clientConfig: {service: {name: istiod, namespace: istio-system}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: not-istio}
webhooks:
- {name: x.example.com, clientConfig: {}}
"#;
    let messages = run("externalcontrolplane.ExternalControlPlaneAnalyzer", &resources(&[text]));
    let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "The hostname (10.0.0.1:15017/validate) that was provided for the webhook (a.validation.istio.io) to reach \
         the ingress gateway on the external control plane cluster was provided in an invalid format. Traffic may \
         not flow properly.",
            "The address (https://[fd00::1]:15017/validate) that was provided for the webhook (b.validation.istio.io) \
         to reach the ingress gateway on the external control plane cluster is an IP address. This is not \
         recommended for a production environment.",
        ]
    );
}

#[test]
fn conditions_on_gateway_api_and_istio_objects() {
    let text = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route, namespace: default}
spec: {}
status:
  parents:
  - parentRef: {name: gw}
    conditions:
    - {type: Accepted, status: "True", reason: Accepted, message: ok}
    - {type: ResolvedRefs, status: "False", reason: BackendNotFound, message: "backend x not found"}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm, namespace: default}
spec: {address: 10.0.0.1}
status:
  conditions:
  - {type: istio.io/WaypointBound, status: "False", reason: NoWaypoint, message: none}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: t, namespace: default}
status:
  conditions:
  - {type: Accepted, status: "False", reason: Invalid, message: not checked}
"#;
    let messages = run("conditions.ConditionAnalyzer", &resources(&[text]));
    assert_eq!(codes(&messages), ["IST0171 HTTPRoute default/route", "IST0171 WorkloadEntry default/vm"]);
    assert!(messages.iter().any(|m| m.text
        == "A condition with a negative status is present: type=ResolvedRefs, reason=BackendNotFound, message=backend \
            x not found."));
}
