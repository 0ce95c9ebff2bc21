//! The MCP client source against a small in-test MCP server: objects arrive; an edit and a delete
//! propagate; an invalid object is NACKed with its field path while the others apply; MeshConfig
//! reaches the mesh handler; a server that is down at start keeps the source unsynced with the
//! reason; a server that goes away leaves the config in force, and its restart re-syncs with no
//! spurious delete.

use crate::support;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use api::Kind;
use config::ReadOnlySource;
use meshpilot_mcp::{McpOptions, McpSource, NodeIdentity};
use meshpilot_testing::wait_for;
use model::{ConfigStore, ConfigStoreController, Event, shutdown_channel};
use support::{FakeServer, State, mesh_config, vs};

const WAIT: Duration = Duration::from_secs(20);
const VS: &str = "networking.istio.io/v1/VirtualService";

fn options(addr: std::net::SocketAddr) -> McpOptions {
    let mut o = McpOptions::new(addr.to_string());
    o.kinds = vec![Kind::VirtualService, Kind::DestinationRule];
    o.backoff = (Duration::from_millis(50), Duration::from_millis(200));
    o.node = NodeIdentity {
        pod_name: "istiod-1".into(),
        pod_namespace: "istio-system".into(),
        ip: Some("10.1.2.3".into()),
    };
    o
}

/// Every event the source raised, as `event kind/ns/name@version`.
fn record(source: &ReadOnlySource) -> Arc<Mutex<Vec<String>>> {
    let events = Arc::new(Mutex::new(Vec::new()));
    for kind in source.schemas().to_vec() {
        let events = events.clone();
        source.register_event_handler(
            kind,
            Arc::new(move |_old, new, event: Event| {
                let m = &new.meta;
                events.lock().unwrap().push(format!(
                    "{event} {}/{}/{}@{}",
                    new.kind(),
                    m.namespace,
                    m.name,
                    m.resource_version
                ));
                Ok(())
            }),
        );
    }
    events
}

fn host_of(source: &ReadOnlySource, name: &str) -> Option<String> {
    let config = source.get(Kind::VirtualService, "ns", name)?;
    config.spec.to_json()["hosts"][0].as_str().map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_edits_deletes_nacks_and_mesh_config() {
    let mut state = State::new();
    state.insert(
        VS.into(),
        (1, vec![vs("ns/a", "1", "a.example.com", "a"), vs("ns/b", "1", "b.example.com", "b")]),
    );
    let server = FakeServer::start("127.0.0.1:0".parse().unwrap(), state).await;
    let meshes = Arc::new(Mutex::new(Vec::new()));
    let mut opts = options(server.addr);
    let seen = meshes.clone();
    opts.mesh_handler = Some(Arc::new(move |json: &serde_json::Value| {
        if json["rootNamespace"] == "bad" {
            return Err("rootNamespace: bad is refused by this test".into());
        }
        seen.lock().unwrap().push(json.clone());
        Ok(Vec::new())
    }));
    let mcp = McpSource::new(opts).unwrap();
    let source = ReadOnlySource::new(mcp.clone());
    let events = record(&source);
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(source.run(shutdown));

    // First answer of every kind (DestinationRule: none) → synced, objects in force.
    wait_for("synced", WAIT, async || source.has_synced().then_some(())).await.unwrap();
    assert_eq!(host_of(&source, "a").as_deref(), Some("a.example.com"));
    assert_eq!(
        source.source_of(Kind::VirtualService, "ns", "a").as_deref(),
        Some(format!("xds://{}", server.addr).as_str())
    );
    assert!(source.not_synced_reason().is_none());
    let first = server.requests.lock().unwrap()[0].clone();
    let node = first.node.expect("the first request carries the node");
    assert_eq!(node.id, "sidecar~10.1.2.3~istiod-1.istio-system~istio-system.svc.cluster.local");
    let generator = &node.metadata.unwrap().fields["GENERATOR"];
    assert_eq!(
        format!("{generator:?}"),
        format!(
            "{:?}",
            envoy_types::pb::google::protobuf::Value {
                kind: Some(envoy_types::pb::google::protobuf::value::Kind::StringValue("api".into()))
            }
        )
    );
    let subscribed: Vec<String> = server
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.response_nonce.is_empty())
        .map(|r| r.type_url.clone())
        .collect();
    assert_eq!(subscribed, [api::mcp::MESH_CONFIG_TYPE_URL, "networking.istio.io/v1/DestinationRule", VS]);

    // An edit (new version) and a delete (missing from the full state).
    server.set(VS, vec![vs("ns/a", "2", "a2.example.com", "a")]);
    wait_for("edit and delete", WAIT, async || {
        (host_of(&source, "a").as_deref() == Some("a2.example.com") && host_of(&source, "b").is_none())
            .then_some(())
    })
    .await
    .unwrap();
    let log = events.lock().unwrap().clone();
    assert!(log.contains(&"update VirtualService/ns/a@2".to_string()), "{log:?}");
    assert!(log.contains(&"delete VirtualService/ns/b@1".to_string()), "{log:?}");

    // An invalid new version of `a` and a valid new `c`: `c` applied, `a` keeps version 2, NACK.
    server.set(VS, vec![vs("ns/a", "3", "bad host!", "a"), vs("ns/c", "1", "c.example.com", "c")]);
    let nack = wait_for("NACK", WAIT, async || {
        server.replies().into_iter().find(|r| r.type_url == VS && r.error_detail.is_some())
    })
    .await
    .unwrap();
    let detail = nack.error_detail.unwrap();
    assert_eq!(detail.code, 3);
    assert!(detail.message.contains("- VirtualService ns/a: spec.hosts[0]: "), "{}", detail.message);
    assert!(!detail.message.contains("ns/c"), "{}", detail.message);
    assert_eq!(
        host_of(&source, "c").as_deref(),
        Some("c.example.com"),
        "the valid object of a NACKed response applies"
    );
    assert_eq!(host_of(&source, "a").as_deref(), Some("a2.example.com"), "the last good copy stays");
    assert_eq!(mcp.status().invalid.len(), 1);
    assert_ne!(nack.version_info, "", "a NACK carries the last accepted version");

    // MeshConfig: decoded and handed to the handler; a refused one is NACKed.
    server.set(
        api::mcp::MESH_CONFIG_TYPE_URL,
        vec![mesh_config(&serde_json::json!({"rootNamespace": "mesh-root"}))],
    );
    let mesh = wait_for("mesh config", WAIT, async || meshes.lock().unwrap().first().cloned()).await.unwrap();
    assert_eq!(mesh, serde_json::json!({"rootNamespace": "mesh-root"}));
    server
        .set(api::mcp::MESH_CONFIG_TYPE_URL, vec![mesh_config(&serde_json::json!({"rootNamespace": "bad"}))]);
    let nack = wait_for("mesh NACK", WAIT, async || {
        server
            .replies()
            .into_iter()
            .find(|r| r.type_url == api::mcp::MESH_CONFIG_TYPE_URL && r.error_detail.is_some())
    })
    .await
    .unwrap();
    assert_eq!(nack.error_detail.unwrap().message, "MeshConfig: rootNamespace: bad is refused by this test");

    trigger.trigger();
    run.await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_down_at_start_then_lost_then_back_keeps_config_and_deletes_nothing() {
    // A port with nothing listening: the source never answered.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mcp = McpSource::new(options(addr)).unwrap();
    let source = ReadOnlySource::new(mcp.clone());
    let events = record(&source);
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(source.run(shutdown));
    let reason =
        wait_for("a failed dial", WAIT, async || source.not_synced_reason().filter(|r| r.contains(": ")))
            .await
            .unwrap();
    assert!(reason.starts_with(&format!("config source xds://{addr} has not answered: ")), "{reason}");
    assert!(reason.to_lowercase().contains("refused"), "{reason}");
    assert!(!source.has_synced());

    // The server comes up on that address: the source connects on its own and syncs.
    let mut state = State::new();
    state.insert(VS.into(), (1, vec![vs("ns/a", "1", "a.example.com", "a")]));
    let server = FakeServer::start(addr, state).await;
    wait_for("synced", WAIT, async || source.has_synced().then_some(())).await.unwrap();
    assert_eq!(host_of(&source, "a").as_deref(), Some("a.example.com"));

    // The server goes away: the config stays in force.
    let state = server.state();
    server.stop().await;
    wait_for("disconnect noticed", WAIT, async || (!mcp.status().connected).then_some(())).await.unwrap();
    assert_eq!(host_of(&source, "a").as_deref(), Some("a.example.com"));
    assert!(source.has_synced(), "a source that answered once stays synced");

    // It comes back with the same state and one more object: re-synced, nothing deleted.
    let server = FakeServer::start(addr, state).await;
    server.set(VS, vec![vs("ns/a", "1", "a.example.com", "a"), vs("ns/z", "1", "z.example.com", "z")]);
    wait_for("re-synced", WAIT, async || host_of(&source, "z")).await.unwrap();
    assert!(mcp.status().connections >= 2);
    let log = events.lock().unwrap().clone();
    assert_eq!(
        log,
        ["add VirtualService/ns/a@1", "add VirtualService/ns/z@1"],
        "no spurious delete or update"
    );

    trigger.trigger();
    run.await.unwrap();
    server.stop().await;
}
