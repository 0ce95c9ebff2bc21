//! AuthorizationPolicy and RequestAuthentication on an ingress gateway, through a real Envoy: a
//! router (`istio: ingressgateway` in `istio-system`) serves a classic Gateway (plain HTTP, hosts
//! `*`) whose VirtualService routes to a local echo server, so every request crosses the gateway
//! server's HTTP connection manager that carries the policy filters. Policies are written into the
//! watched config directory while Envoy runs. Needs Envoy (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::write_atomic;
use meshpilot_testing::{AdsApi, EchoServer, Envoy, Plane, PlaneOptions, free_port, wait_for};
use support::{NS, RBAC_DENIED, Traffic};

/// The gateway proxy's namespace, also the mesh root namespace.
const GW_NS: &str = "istio-system";
/// The classic Gateway's name.
const GW: &str = "public-gw";

/// The Gateway `GW` in `gw_ns` (selector `istio: <istio>`, HTTP on `port`, hosts `*`), a
/// VirtualService on it routing to `echo.<NS>.svc.cluster.local:8080`, and that service
/// (ServiceEntry + WorkloadEntry at `echo`).
fn gateway_config(gw_ns: &str, istio: &str, port: u16, echo: SocketAddr) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: {GW}, namespace: {gw_ns}}}\n\
         spec:\n  selector: {{istio: {istio}}}\n  servers:\n  - port: {{number: {port}, name: http, protocol: HTTP}}\n    \
         hosts: [\"*\"]\n\
         ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: echo, namespace: {gw_ns}}}\n\
         spec:\n  hosts: [\"*\"]\n  gateways: [{GW}]\n  http:\n  - route:\n    - destination: {{host: echo.{NS}.svc.cluster.local, port: {{number: 8080}}}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: {NS}}}\n\
         spec:\n  hosts: [echo.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: 8080, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: echo}}\n\
         ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: echo-1, namespace: {NS}}}\n\
         spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: echo}}\n",
        echo.port()
    )
}

/// An AuthorizationPolicy `name` in `namespace` selecting the ingress gateway by label, with
/// `spec_rest` (YAML lines under `spec:` after the selector, indented two spaces).
fn gateway_policy(name: &str, namespace: &str, spec_rest: &str) -> String {
    policy_selecting("ingressgateway", name, namespace, spec_rest)
}

/// An AuthorizationPolicy `name` in `namespace` selecting `istio: <istio>`, with `spec_rest`.
fn policy_selecting(istio: &str, name: &str, namespace: &str, spec_rest: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  \
         selector: {{matchLabels: {{istio: {istio}}}}}\n{spec_rest}"
    )
}

struct Setup {
    dir: tempfile::TempDir,
    _echo: EchoServer,
    plane: Plane,
    traffic: Traffic,
}

/// The ingress gateway (`istio: ingressgateway` in `istio-system`) serving `GW` in `istio-system`.
async fn setup() -> Setup {
    setup_in(GW_NS, "ingressgateway").await
}

/// A gateway proxy labelled `istio: <istio>` in `gw_ns` (Istio's `router` node) serving `GW` in
/// `gw_ns`.
async fn setup_in(gw_ns: &str, istio: &str) -> Setup {
    let echo = EchoServer::start("echo").await.unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write_atomic(dir.path(), "gateway.yaml", &gateway_config(gw_ns, istio, port, echo.addr));
    let plane = Plane::start_with(PlaneOptions::config_dir(dir.path())).await.unwrap();
    let mut bootstrap = plane.router(AdsApi::Sotw);
    if gw_ns != GW_NS || istio != "ingressgateway" {
        bootstrap.node_id = format!("router~127.0.0.1~{istio}-1.{gw_ns}~{gw_ns}.svc.cluster.local");
        bootstrap.node_cluster = format!("{istio}.{gw_ns}");
        bootstrap.metadata["NAMESPACE"] = gw_ns.into();
        bootstrap.metadata["LABELS"] = serde_json::json!({"istio": istio});
    }
    let envoy = Envoy::start(&bootstrap).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let s = Setup { dir, _echo: echo, plane, traffic: Traffic { envoy, addr, host: "shop.example.com" } };
    let r = s.wait_status("the gateway without policies", "GET", "/admin/users", &[], 200).await;
    assert_eq!(r.body, "echo", "routed to the echo server: {r:?}");
    s
}

impl std::ops::Deref for Setup {
    type Target = Traffic;

    fn deref(&self) -> &Traffic {
        &self.traffic
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn selector_deny_and_allow_policies_take_effect_live() {
    let s = setup().await;

    // DENY by path, selecting the gateway by its labels: only /admin is refused.
    let deny = gateway_policy(
        "deny-admin",
        GW_NS,
        "  action: DENY\n  rules:\n  - to:\n    - operation: {paths: [\"/admin/*\"]}\n",
    );
    write_atomic(s.dir.path(), "policy.yaml", &deny);
    let r = s.wait_status("/admin denied at the gateway", "GET", "/admin/users", &[], 403).await;
    assert_eq!(r.body.trim(), RBAC_DENIED, "{r:?}");
    assert_eq!(s.status("GET", "/public", &[]).await, 200, "other paths are not denied");
    assert_eq!(s.status("POST", "/shop/cart", &[]).await, 200, "other paths are not denied");

    // An ALLOW list: only what it names passes. The DENY policy is gone (same file replaced), so
    // /admin is now refused by the ALLOW list.
    let allow = gateway_policy(
        "allow-shop",
        GW_NS,
        "  action: ALLOW\n  rules:\n  - to:\n    - operation: {paths: [\"/shop/*\"], methods: [GET]}\n",
    );
    write_atomic(s.dir.path(), "policy.yaml", &allow);
    let r = s.wait_status("/public refused by the ALLOW list", "GET", "/public", &[], 403).await;
    assert_eq!(r.body.trim(), RBAC_DENIED, "{r:?}");
    assert_eq!(s.status("GET", "/shop/cart", &[]).await, 200, "named by the policy");
    assert_eq!(s.status("POST", "/shop/cart", &[]).await, 403, "method not named");
    assert_eq!(s.status("GET", "/admin/users", &[]).await, 403, "path not named");

    // Removing the policy restores access.
    std::fs::remove_file(s.dir.path().join("policy.yaml")).unwrap();
    s.wait_status("access restored", "GET", "/public", &[], 200).await;
    s.assert_no_nack().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_target_ref_to_a_classic_gateway_is_refused_as_in_istio() {
    let s = setup().await;

    // Istio's validation accepts `targetRefs` to Services, ServiceEntries, Gateway API Gateways and
    // GatewayClasses only, and a proxy that is not a Gateway API gateway ignores policies with
    // `targetRefs` (`WorkloadPolicyMatcher.ShouldAttachPolicy`): an ALLOW policy naming the classic
    // `networking.istio.io` Gateway is refused (its file is reported) and never restricts the gateway.
    let allow = format!(
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: allow-shop-by-ref, namespace: {GW_NS}}}\n\
         spec:\n  targetRefs:\n  - {{group: networking.istio.io, kind: Gateway, name: {GW}}}\n  action: ALLOW\n  rules:\n  \
         - to:\n    - operation: {{paths: [\"/shop/*\"]}}\n"
    );
    write_atomic(s.dir.path(), "target-ref.yaml", &allow);
    let status = wait_for("the file refused", Duration::from_secs(15), async || {
        let (code, body) =
            meshpilot_testing::http_get(s.plane.http, "/debug/configstatusz", &[]).await.ok()?;
        (code == 200 && body.contains("target-ref.yaml")).then_some(body)
    })
    .await
    .unwrap();
    assert!(status.contains("targetRef must be to one of"), "{status}");
    assert!(status.contains("networking.istio.io/Gateway"), "{status}");
    assert_eq!(s.status("GET", "/public", &[]).await, 200, "the refused policy does not attach");
    s.assert_no_nack().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn request_authentication_on_the_gateway_requires_a_valid_token() {
    use meshpilot_testing::jwt::{TestKey, claims, tamper};
    const ISSUER: &str = "https://issuer.meshpilot.test";
    let key = TestKey::generate();
    let s = setup().await;

    let jwks_inline = key.jwks_json().replace('\'', "''");
    let config = format!(
        "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {{name: jwt, namespace: {GW_NS}}}\nspec:\n  \
         selector: {{matchLabels: {{istio: ingressgateway}}}}\n  jwtRules:\n  - issuer: {ISSUER}\n    jwks: '{jwks_inline}'\n\
         ---\n{}",
        gateway_policy(
            "require-jwt",
            GW_NS,
            "  action: ALLOW\n  rules:\n  - from:\n    - source: {requestPrincipals: [\"*\"]}\n"
        )
    );
    write_atomic(s.dir.path(), "jwt.yaml", &config);
    let r = s.wait_status("no token refused", "GET", "/", &[], 403).await;
    assert_eq!(r.body.trim(), RBAC_DENIED, "{r:?}");
    let token = key.sign(&claims(ISSUER, "alice", 3600));
    let r = s
        .wait_status("a valid token", "GET", "/", &[("authorization", &format!("Bearer {token}"))], 200)
        .await;
    assert_eq!(r.body, "echo", "{r:?}");
    let tampered = format!("Bearer {}", tamper(&token));
    let r = s.send("GET", "/", &[("authorization", &tampered)]).await.unwrap();
    assert_eq!(r.status, 401, "a tampered token: {r:?}");
    assert!(r.body.contains("Jwt verification fails"), "Envoy's jwt_authn body: {r:?}");
    // A token of another key for the same issuer is refused as well.
    let forged = TestKey::generate().sign(&claims(ISSUER, "mallory", 3600));
    assert_eq!(s.status("GET", "/", &[("authorization", &format!("Bearer {forged}"))]).await, 401);
    s.assert_no_nack().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_root_namespace_and_own_namespace_policies_apply_to_the_gateway() {
    let s = setup().await;

    // Both policies select `istio: ingressgateway` and arrive in one file (one config snapshot): the
    // one in the root namespace (the gateway's own namespace here) applies; the one in `default`
    // only applies to workloads in `default`, so /other stays open.
    let config = format!(
        "{}---\n{}",
        gateway_policy(
            "deny-root",
            GW_NS,
            "  action: DENY\n  rules:\n  - to:\n    - operation: {paths: [\"/root-denied\"]}\n"
        ),
        gateway_policy(
            "deny-other-namespace",
            NS,
            "  action: DENY\n  rules:\n  - to:\n    - operation: {paths: [\"/other\"]}\n"
        )
    );
    write_atomic(s.dir.path(), "policies.yaml", &config);
    let r = s.wait_status("the root-namespace policy applies", "GET", "/root-denied", &[], 403).await;
    assert_eq!(r.body.trim(), RBAC_DENIED, "{r:?}");
    assert_eq!(s.status("GET", "/other", &[]).await, 200, "a policy in another namespace does not apply");
    assert_eq!(s.status("GET", "/", &[]).await, 200);
    s.assert_no_nack().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_outside_the_root_namespace_takes_root_and_own_namespace_policies() {
    // A gateway deployment `istio: team-gateway` in namespace `team`: policies selecting its labels
    // apply from the root namespace and from `team`, not from `default` (Istio's rule).
    let s = setup_in("team", "team-gateway").await;
    let deny = |name: &str, ns: &str, path: &str| {
        policy_selecting(
            "team-gateway",
            name,
            ns,
            &format!("  action: DENY\n  rules:\n  - to:\n    - operation: {{paths: [\"{path}\"]}}\n"),
        )
    };
    let config = format!(
        "{}---\n{}---\n{}",
        deny("deny-root", GW_NS, "/root-denied"),
        deny("deny-own", "team", "/own-denied"),
        deny("deny-other", NS, "/other")
    );
    write_atomic(s.dir.path(), "policies.yaml", &config);
    let r = s.wait_status("the root-namespace policy applies", "GET", "/root-denied", &[], 403).await;
    assert_eq!(r.body.trim(), RBAC_DENIED, "{r:?}");
    assert_eq!(s.status("GET", "/own-denied", &[]).await, 403, "the gateway's own namespace applies");
    assert_eq!(s.status("GET", "/other", &[]).await, 200, "a policy in another namespace does not apply");
    assert_eq!(s.status("GET", "/", &[]).await, 200);
    s.assert_no_nack().await;
}
