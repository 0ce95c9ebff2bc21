//! The generated Gateway API workload of the benchmarks: one Gateway (`istio-system/gw`, class
//! `istio`, an HTTP listener on port 80 admitting routes from every namespace) and `routes` HTTPRoutes
//! `ns{i % 10}/r{i}`, each with its own hostname `h{i}.example.com` and two rules: a path prefix and
//! header match with a request-header filter and a 90/10 split over `svc{i % 100}` /
//! `svc{(i + 1) % 100}` port 80, then a catch-all to `svc{i % 100}`.
//!
//! Shared by `crates/gateway/benches/translate.rs` (conversion) and
//! `crates/networking/benches/gateway_api.rs` (RDS of the resulting gateway).

/// The workload as one multi-document YAML text.
pub fn generated(routes: usize) -> String {
    let mut out = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: istio}\nspec: {controllerName: istio.io/gateway-controller}\n\
         ---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: istio-system}\n\
         spec:\n  gatewayClassName: istio\n  listeners:\n  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}\n",
    );
    for i in 0..routes {
        out.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i}, namespace: ns{}}}\n\
             spec:\n  parentRefs: [{{name: gw, namespace: istio-system}}]\n  hostnames: [h{i}.example.com]\n  rules:\n  \
             - matches: [{{path: {{type: PathPrefix, value: /api}}, headers: [{{name: x-user, value: u{i}}}]}}]\n    \
             filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{set: [{{name: x-route, value: r{i}}}]}}}}]\n    \
             backendRefs: [{{name: svc{}, port: 80, weight: 90}}, {{name: svc{}, port: 80, weight: 10}}]\n  \
             - backendRefs: [{{name: svc{}, port: 80}}]\n",
            i % 10,
            i % 100,
            (i + 1) % 100,
            i % 100
        ));
    }
    out
}
