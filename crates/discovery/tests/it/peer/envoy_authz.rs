//! AuthorizationPolicy and RequestAuthentication through a real Envoy: a sidecar whose Sidecar
//! `ingress` port (bound on 127.0.0.1, plaintext: an Envoy connected directly has no workload
//! certificates) forwards to a local echo app, so every request crosses the inbound chain that
//! carries the policy filters. Policies are written into the watched config directory while Envoy
//! runs: every change takes effect live. Needs Envoy (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::write_atomic;
use meshpilot_testing::{
    AdsApi, EchoOptions, EchoServer, Envoy, Plane, PlaneOptions, free_port, request_method, wait_for,
};
use support::{NS, RBAC_DENIED, Traffic};

/// The Sidecar of workload `app` with one HTTP ingress port forwarding to `app`.
fn sidecar_yaml(workload: &str, port: u16, app: SocketAddr) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: {workload}, namespace: {NS}}}\nspec:\n  \
         workloadSelector: {{labels: {{app: {workload}}}}}\n  ingress:\n  \
         - port: {{number: {port}, protocol: HTTP, name: http}}\n    defaultEndpoint: 127.0.0.1:{}\n",
        app.port()
    )
}

/// An AuthorizationPolicy `name` for workload `app` with `spec_rest` (YAML lines under `spec:` after
/// the selector, indented two spaces).
fn authz_policy(name: &str, workload: &str, spec_rest: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  \
         selector: {{matchLabels: {{app: {workload}}}}}\n{spec_rest}"
    )
}

struct Setup {
    dir: tempfile::TempDir,
    _app: EchoServer,
    plane: Plane,
    traffic: Traffic,
}

async fn setup(mesh_config: &str, extra: &[(&str, String)]) -> Setup {
    let app = EchoServer::start_with("app", EchoOptions { echo_head: true, ..EchoOptions::default() })
        .await
        .unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    write_atomic(dir.path(), "sidecar.yaml", &sidecar_yaml("app", port, app.addr));
    for (file, text) in extra {
        write_atomic(dir.path(), file, text);
    }
    let plane = Plane::start_with(PlaneOptions {
        mesh_config: mesh_config.to_string(),
        ..PlaneOptions::config_dir(dir.path())
    })
    .await
    .unwrap();
    let envoy = Envoy::start(&plane.sidecar("app", NS, AdsApi::Sotw)).await.unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    Setup { dir, _app: app, plane, traffic: Traffic { envoy, addr, host: "app.example" } }
}

impl std::ops::Deref for Setup {
    type Target = Traffic;

    fn deref(&self) -> &Traffic {
        &self.traffic
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deny_allow_and_when_rules_take_effect_live() {
    let s = setup("", &[]).await;
    s.wait_status("the app without policies", "POST", "/admin/users", &[], 200).await;

    // DENY by path and method: only POST under /admin is refused, with Envoy's RBAC body.
    let deny = authz_policy(
        "deny-admin-writes",
        "app",
        "  action: DENY\n  rules:\n  - to:\n    - operation: {methods: [POST], paths: [\"/admin/*\"]}\n",
    );
    write_atomic(s.dir.path(), "policy.yaml", &deny);
    let r = s.wait_status("POST /admin denied", "POST", "/admin/users", &[], 403).await;
    assert_eq!(r.body.trim(), RBAC_DENIED, "{r:?}");
    assert_eq!(s.status("GET", "/admin/users", &[]).await, 200, "GET is not denied");
    assert_eq!(s.status("POST", "/public", &[]).await, 200, "other paths are not denied");

    // ALLOW list: only what it names passes; the DENY policy is gone (same file replaced).
    let allow = authz_policy(
        "allow-public",
        "app",
        "  action: ALLOW\n  rules:\n  - to:\n    - operation: {paths: [\"/public\", \"/static/*\"]}\n",
    );
    write_atomic(s.dir.path(), "policy.yaml", &allow);
    s.wait_status("GET /private refused by the ALLOW list", "GET", "/private", &[], 403).await;
    assert_eq!(s.status("GET", "/public", &[]).await, 200);
    assert_eq!(s.status("GET", "/static/app.js", &[]).await, 200);
    assert_eq!(s.status("POST", "/admin/users", &[]).await, 403, "not on the list");

    // `when` on a request header, in an ALLOW policy.
    let when = authz_policy(
        "allow-with-header",
        "app",
        "  action: ALLOW\n  rules:\n  - when:\n    - key: request.headers[x-access]\n      values: [\"granted\", \"team-*\"]\n",
    );
    write_atomic(s.dir.path(), "policy.yaml", &when);
    s.wait_status("a request with the header", "GET", "/private", &[("x-access", "team-blue")], 200).await;
    assert_eq!(s.status("GET", "/private", &[]).await, 403, "no header");
    assert_eq!(s.status("GET", "/private", &[("x-access", "denied")]).await, 403, "other value");

    // Removing the policy restores access.
    std::fs::remove_file(s.dir.path().join("policy.yaml")).unwrap();
    s.wait_status("access restored", "GET", "/private", &[], 200).await;
    s.assert_no_nack().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_untranslatable_policy_denies_its_workload_only() {
    // Workload `other` on a second Envoy has no policy of its own and must keep working.
    let other_app = EchoServer::start("other").await.unwrap();
    let other_port = free_port();
    let s = setup("", &[("other-sidecar.yaml", sidecar_yaml("other", other_port, other_app.addr))]).await;
    let other = Envoy::start(&s.plane.sidecar("other", NS, AdsApi::Sotw)).await.unwrap();
    let other_addr: SocketAddr = ([127, 0, 0, 1], other_port).into();
    s.wait_status("the app without policies", "GET", "/", &[], 200).await;

    // A CUSTOM policy naming a provider the mesh config does not declare cannot be translated: as
    // Istio, its workload denies the requests the policy would have sent to the authorizer (rather
    // than letting them through unchecked); other requests are served.
    let custom = authz_policy(
        "custom-missing-provider",
        "app",
        "  action: CUSTOM\n  provider: {name: not-declared}\n  rules:\n  - to:\n    - operation: {paths: [\"/secure/*\"]}\n",
    );
    write_atomic(s.dir.path(), "custom.yaml", &custom);
    let r = s.wait_status("the app denies what the policy selects", "GET", "/secure/x", &[], 403).await;
    assert_eq!(r.body.trim(), RBAC_DENIED, "{r:?}");
    assert_eq!(s.status("GET", "/", &[]).await, 200, "requests the policy does not select");

    let r = wait_for("the other workload", Duration::from_secs(15), async || {
        request_method(other_addr, "GET", "other.example", "/", &[]).await.ok().filter(|r| r.status == 200)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", other.log_tail(40)));
    assert!(r.body.starts_with("other"), "{r:?}");
    s.assert_no_nack().await;

    // The finding names the policy and the field.
    let (status, body) =
        meshpilot_testing::http_get(s.plane.http, "/debug/configstatusz", &[]).await.unwrap();
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let findings = json["generationFindings"].as_array().unwrap();
    let finding = findings
        .iter()
        .find(|f| f["config"].as_str().is_some_and(|c| c.contains("custom-missing-provider")))
        .unwrap_or_else(|| panic!("no finding for the policy: {json:#}"));
    assert!(finding["path"].as_str().unwrap().starts_with("spec.provider"), "{finding:#}");
    assert!(finding["message"].as_str().unwrap().contains("not-declared"), "{finding:#}");
}

/// A minimal HTTP authorizer (Envoy's `ext_authz` HTTP service): allows a check carrying
/// `x-ext-authz: allow`, answers 403 otherwise; counts the checks it saw.
struct Authorizer {
    addr: SocketAddr,
    checks: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl Authorizer {
    async fn start() -> Authorizer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let checks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = checks.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    // One check per connection is enough for the test; keep reading heads until close.
                    loop {
                        let Ok(n) = conn.read(&mut chunk).await else { return };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                            buf.drain(..end + 4);
                            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            let allowed = head.lines().any(|l| l.trim() == "x-ext-authz: allow");
                            let reply = if allowed {
                                "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_string()
                            } else {
                                let body = "denied by ext-authz";
                                format!(
                                    "HTTP/1.1 403 Forbidden\r\ncontent-length: {}\r\n\r\n{body}",
                                    body.len()
                                )
                            };
                            if conn.write_all(reply.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        Authorizer { addr, checks, _task: task }
    }

    fn checks(&self) -> usize {
        self.checks.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn custom_action_asks_the_external_authorizer() {
    let authz = Authorizer::start().await;
    let port = authz.addr.port();
    let mesh = format!(
        "extensionProviders:\n- name: test-authz\n  envoyExtAuthzHttp:\n    service: ext-authz.{NS}.svc.cluster.local\n    \
         port: {port}\n    includeRequestHeadersInCheck: [x-ext-authz]\n"
    );
    let service = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: ext-authz, namespace: {NS}}}\nspec:\n  \
         hosts: [ext-authz.{NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
         - {{number: {port}, name: http, protocol: HTTP}}\n  resolution: STATIC\n  endpoints:\n  - address: 127.0.0.1\n"
    );
    let s = setup(&mesh, &[("ext-authz.yaml", service)]).await;
    s.wait_status("the app without policies", "GET", "/protected/x", &[], 200).await;

    let custom = authz_policy(
        "ext-authz",
        "app",
        "  action: CUSTOM\n  provider: {name: test-authz}\n  rules:\n  - to:\n    - operation: {paths: [\"/protected/*\"]}\n",
    );
    write_atomic(s.dir.path(), "custom.yaml", &custom);
    let r = s.wait_status("the authorizer refuses", "GET", "/protected/x", &[], 403).await;
    assert_eq!(r.body, "denied by ext-authz", "the authorizer's answer reaches the client: {r:?}");
    let r =
        s.wait_status("the authorizer allows", "GET", "/protected/x", &[("x-ext-authz", "allow")], 200).await;
    assert!(r.body.starts_with("app"), "{r:?}");
    let before = authz.checks();
    assert!(before >= 2, "the authorizer was asked");
    // Paths the policy does not name never reach the authorizer (its shadow rules select requests).
    assert_eq!(s.status("GET", "/open", &[]).await, 200);
    assert_eq!(s.status("GET", "/protected/y", &[("x-ext-authz", "allow")]).await, 200);
    assert_eq!(authz.checks(), before + 1, "only the /protected request was checked");
    s.assert_no_nack().await;
}

/// Serves `body` as `application/json` at every path (a JWKS endpoint); counts requests.
async fn serve_json(body: String) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 2048];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
            });
        }
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn request_authentication_validates_tokens_and_policies_require_principals() {
    use meshpilot_testing::jwt::{TestKey, claims, tamper};
    const ISSUER: &str = "https://issuer.meshpilot.test";
    const REMOTE_ISSUER: &str = "https://remote.meshpilot.test";
    let key = TestKey::generate();
    let remote_key = TestKey::generate();
    let (jwks_addr, _jwks_server) = serve_json(remote_key.jwks_json()).await;

    let s = setup("", &[]).await;
    s.wait_status("the app without policies", "GET", "/", &[], 200).await;

    // One inline key set, one fetched by meshpilot from a jwksUri.
    let jwks_inline = key.jwks_json().replace('\'', "''");
    let request_authn = format!(
        "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {{name: jwt, namespace: {NS}}}\nspec:\n  \
         selector: {{matchLabels: {{app: app}}}}\n  jwtRules:\n  \
         - issuer: {ISSUER}\n    jwks: '{jwks_inline}'\n  \
         - issuer: {REMOTE_ISSUER}\n    jwksUri: http://{jwks_addr}/jwks.json\n"
    );
    write_atomic(s.dir.path(), "request-authn.yaml", &request_authn);
    let token = key.sign(&claims(ISSUER, "alice", 3600));
    let bearer = format!("Bearer {token}");
    // A tampered token is refused (401) once the filter is in place.
    let tampered = format!("Bearer {}", tamper(&token));
    let r = s.wait_status("a tampered token refused", "GET", "/", &[("authorization", &tampered)], 401).await;
    assert!(r.body.contains("Jwt verification fails"), "Envoy's jwt_authn body: {r:?}");
    assert_eq!(s.status("GET", "/", &[("authorization", &bearer)]).await, 200, "a valid token");
    assert_eq!(s.status("GET", "/", &[]).await, 200, "no token: allowed without a policy requiring one");
    // The key set behind jwksUri arrives after meshpilot fetched it (then a push).
    let remote = format!("Bearer {}", remote_key.sign(&claims(REMOTE_ISSUER, "carol", 3600)));
    s.wait_status("a token of the fetched key set", "GET", "/", &[("authorization", &remote)], 200).await;
    // A token signed by another key for the same issuer is refused.
    let forged = format!("Bearer {}", remote_key.sign(&claims(ISSUER, "mallory", 3600)));
    assert_eq!(s.status("GET", "/", &[("authorization", &forged)]).await, 401, "wrong key");

    // An ALLOW policy naming a request principal: no token → 403, alice → 200, carol → 403.
    let require = authz_policy(
        "require-alice",
        "app",
        &format!(
            "  action: ALLOW\n  rules:\n  - from:\n    - source: {{requestPrincipals: [\"{ISSUER}/alice\"]}}\n"
        ),
    );
    write_atomic(s.dir.path(), "require.yaml", &require);
    let r = s.wait_status("no token refused by the policy", "GET", "/", &[], 403).await;
    assert_eq!(r.body.trim(), RBAC_DENIED, "{r:?}");
    assert_eq!(s.status("GET", "/", &[("authorization", &bearer)]).await, 200, "alice is allowed");
    assert_eq!(s.status("GET", "/", &[("authorization", &remote)]).await, 403, "carol is not");
    s.assert_no_nack().await;
}

/// `jwtRules[].presence: REQUIRED` (istio.io/api v1.32.0) through a real Envoy, as Istio's own example
/// uses it: two tokens in two headers. A request without the required rule's token is refused (401) even
/// with the optional rule's valid token; the required token alone is enough; an invalid optional token
/// is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_required_jwt_rule_refuses_requests_without_its_token() {
    use meshpilot_testing::jwt::{TestKey, claims, tamper};
    const REQUIRED: &str = "https://required.meshpilot.test";
    const OPTIONAL: &str = "https://optional.meshpilot.test";
    let (required_key, optional_key) = (TestKey::generate(), TestKey::generate());
    let s = setup("", &[]).await;
    s.wait_status("the app without policies", "GET", "/", &[], 200).await;

    let inline = |key: &TestKey| key.jwks_json().replace('\'', "''");
    let request_authn = format!(
        "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {{name: jwt, namespace: {NS}}}\nspec:\n  \
         selector: {{matchLabels: {{app: app}}}}\n  jwtRules:\n  \
         - issuer: {REQUIRED}\n    jwks: '{}'\n    presence: REQUIRED\n  \
         - issuer: {OPTIONAL}\n    jwks: '{}'\n    fromHeaders: [{{name: x-scope-token}}]\n",
        inline(&required_key),
        inline(&optional_key)
    );
    write_atomic(s.dir.path(), "request-authn.yaml", &request_authn);
    let r = s.wait_status("no token: the required one is missing", "GET", "/", &[], 401).await;
    assert!(r.body.contains("Jwt is missing"), "Envoy's jwt_authn body: {r:?}");
    let required = format!("Bearer {}", required_key.sign(&claims(REQUIRED, "alice", 3600)));
    let scope = optional_key.sign(&claims(OPTIONAL, "bob", 3600));
    let auth = |v: &str| ("authorization", v.to_string());
    let statuses = [
        (vec![auth(&required)], 200, "the required token alone"),
        (vec![("x-scope-token", scope.clone())], 401, "only the optional token"),
        (vec![auth(&required), ("x-scope-token", scope.clone())], 200, "both tokens"),
        (vec![auth(&required), ("x-scope-token", tamper(&scope))], 401, "an invalid optional token"),
    ];
    for (headers, want, what) in statuses {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(s.status("GET", "/", &headers).await, want, "{what}");
    }
    s.assert_no_nack().await;
}
