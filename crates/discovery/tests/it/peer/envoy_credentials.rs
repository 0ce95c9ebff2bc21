//! `credentialName` secrets served over SDS to a real Envoy router: Kubernetes Secrets written in the
//! config directory, an Istio Gateway with `credentialName` (and `kubernetes-gateway://` names allowed
//! by a ReferenceGrant), the router connected to the secure xDS port with a workload certificate of
//! its namespace (istiod sends credentials only to authenticated proxies). HTTPS through the router
//! presents the Secret's certificate; rewriting the Secret rotates it without a restart; a proxy of
//! another namespace, or a name no ReferenceGrant allows, gets nothing. Needs Envoy
//! (scripts/install-envoy.sh).

use crate::support;

use std::{collections::BTreeSet, net::SocketAddr, time::Duration};

use meshpilot_testing::{EchoServer, Envoy, Plane, free_port, wait_for};

use support::{
    secure::{GW_NS, Secure},
    tls::{HOST, TestCa, https_get},
};

/// A `kubernetes.io/tls` Secret document with `stringData`.
fn secret_yaml(namespace: &str, name: &str, (cert, key, _): &(String, String, Vec<u8>)) -> String {
    let indent = |s: &str| s.lines().map(|l| format!("    {l}\n")).collect::<String>();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {namespace}}}\ntype: kubernetes.io/tls\n\
         stringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
        indent(cert),
        indent(key)
    )
}

fn https_server(port: u16, credential: &str) -> String {
    format!(
        "  - port: {{number: {port}, name: https-{port}, protocol: HTTPS}}\n    hosts: [{HOST}]\n    \
         tls: {{mode: SIMPLE, credentialName: \"{credential}\"}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_serves_credential_name_secrets_from_the_config_dir_and_rotates_them() {
    let config = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    let first = ca.issue("first");
    let app = ca.issue("app");
    let backend = EchoServer::start("credential-backend").await.unwrap();
    let (port, granted_port, denied_port) = (free_port(), free_port(), free_port());
    // `denied_port` belongs to the Gateway `probe`, which only the SDS probe below selects.
    std::fs::write(
        config.path().join("gateway.yaml"),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: secure, namespace: {GW_NS}}}\n\
             spec:\n  selector: {{istio: ingressgateway}}\n  servers:\n{}{}\
             ---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: probe, namespace: {GW_NS}}}\n\
             spec:\n  selector: {{istio: ingressgateway, probe: \"true\"}}\n  servers:\n{}\
             ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: secure, namespace: {GW_NS}}}\n\
             spec:\n  hosts: [{HOST}]\n  gateways: [secure]\n  http:\n  - route:\n    - destination: {{host: backend.{GW_NS}.svc.cluster.local, port: {{number: 8080}}}}\n\
             ---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: backend, namespace: {GW_NS}}}\n\
             spec:\n  hosts: [backend.{GW_NS}.svc.cluster.local]\n  location: MESH_INTERNAL\n  ports:\n  \
             - {{number: 8080, name: http, protocol: HTTP}}\n  resolution: STATIC\n  workloadSelector:\n    labels: {{app: backend}}\n\
             ---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: backend-1, namespace: {GW_NS}}}\n\
             spec:\n  address: 127.0.0.1\n  ports: {{http: {}}}\n  labels: {{app: backend}}\n\
             ---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: allow-gw, namespace: apps}}\n\
             spec:\n  from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: {GW_NS}}}]\n  to: [{{group: \"\", kind: Secret, name: app-cert}}]\n",
            https_server(port, "gw-cert"),
            https_server(granted_port, "kubernetes-gateway://apps/app-cert"),
            https_server(denied_port, "kubernetes-gateway://apps/denied-cert"),
            backend.addr.port()
        ),
    )
    .unwrap();
    let secrets_file = config.path().join("secrets.yaml");
    let write_secrets = |gw: &(String, String, Vec<u8>)| {
        let docs = [
            secret_yaml(GW_NS, "gw-cert", gw),
            secret_yaml("apps", "app-cert", &app),
            secret_yaml("apps", "denied-cert", &app),
            secret_yaml("other", "own-cert", &app),
        ];
        std::fs::write(&secrets_file, docs.join("---\n")).unwrap();
    };
    write_secrets(&first);

    let plane = Plane::start(config.path()).await;
    let (trigger, shutdown) = model::shutdown_channel();
    let reader = sds::ConfigDirSecrets::new(
        vec![config.path().to_path_buf()],
        plane.server.credentials().clone(),
        None,
    );
    let inputs = plane.server.inputs().clone();
    tokio::spawn(reader.run(shutdown, move |keys| {
        inputs
            .send(meshpilot_discovery::Input::Secrets(meshpilot_discovery::SecretsChanged::kubernetes(keys)))
    }));
    let secure = Secure::start(&plane).await;
    let envoy = Envoy::start_json(&secure.router_bootstrap(&plane)).await.unwrap();
    let client = ca.client();
    let at = |p: u16| -> SocketAddr { ([127, 0, 0, 1], p).into() };

    let first_try = wait_for("HTTPS with the credentialName secret", Duration::from_secs(15), async || {
        https_get(&client, at(port)).await.ok()
    })
    .await;
    let (status, body, served) = match first_try {
        Ok(r) => r,
        Err(e) => {
            let last = https_get(&client, at(port)).await.err();
            let (_, dump) = envoy.admin_get("/config_dump?resource=dynamic_active_secrets").await.unwrap();
            panic!(
                "{e}: last error {last:?}\nsecrets: {}\n{}",
                &dump[..dump.len().min(3000)],
                envoy.log_tail(10)
            )
        }
    };
    assert_eq!((status, body.as_str()), (200, "credential-backend"));
    assert_eq!(served, first.2, "Envoy presents the Secret's certificate");

    // kubernetes-gateway:// across namespaces, allowed by the ReferenceGrant.
    let (status, _, served) =
        wait_for("HTTPS with the granted secret", Duration::from_secs(15), async || {
            https_get(&client, at(granted_port)).await.ok()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    assert_eq!((status, served == app.2), (200, true));

    // Rotation: the Secret document is rewritten; Envoy gets the new certificate over SDS.
    let second = ca.issue("second");
    write_secrets(&second);
    wait_for("the rotated certificate served", Duration::from_secs(15), async || {
        https_get(&client, at(port)).await.ok().filter(|(_, _, served)| *served == second.2)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
    let (status, _, served) = https_get(&client, at(port)).await.unwrap();
    assert_eq!((status, served == second.2), (200, true));

    // Authorization, each in one request/response: the router's own namespace and the granted
    // Gateway API name are sent; the ungranted one is not.
    let got = secure
        .sds_names(
            GW_NS,
            "istio-ingressgateway",
            &[
                "kubernetes://gw-cert",
                "kubernetes-gateway://apps/app-cert",
                "kubernetes-gateway://apps/denied-cert",
            ],
        )
        .await;
    assert_eq!(
        got,
        BTreeSet::from([
            "kubernetes-gateway://apps/app-cert".to_string(),
            "kubernetes://gw-cert".to_string()
        ])
    );
    // A router of another namespace gets its own namespace's Secret, never istio-system's.
    let got = secure
        .sds_names(
            "other",
            "default",
            &[
                "kubernetes://own-cert",
                "kubernetes://istio-system/gw-cert",
                "kubernetes-gateway://apps/app-cert",
            ],
        )
        .await;
    assert_eq!(got, BTreeSet::from(["kubernetes://own-cert".to_string()]));

    let conns = plane.server.connections().snapshot();
    let router = conns.iter().find(|c| c.proxy.id.starts_with("istio-ingressgateway")).unwrap();
    assert!(router.types.values().all(|t| t.rejects == 0), "{:#?}", router.types);
    let (_, stats) = envoy.admin_get("/stats?filter=update_rejected").await.unwrap();
    assert!(stats.lines().all(|l| l.ends_with(": 0")), "{stats}");
    drop(trigger);
}
