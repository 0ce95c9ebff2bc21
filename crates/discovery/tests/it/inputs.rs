//! The one door into the push model (`discovery::input`): mesh settings and the Gateway API's cluster
//! objects sent as inputs are put in force by the server's loop with a full push (reason `global`), and
//! inputs equal to what is in force push nothing. No peer process: the in-process control plane only.

use std::{collections::BTreeMap, time::Duration};

use meshpilot_discovery::{Input, push_log::PushRecord};
use meshpilot_testing::{Plane, wait_for};
use model::push::{MeshSettings, OutboundTrafficPolicy, PushRequest, TriggerReason};

const LIMIT: Duration = Duration::from_secs(10);

/// The pushes recorded after the first `after` ones, oldest first.
fn pushes_since(plane: &Plane, after: u64) -> Vec<PushRecord> {
    let log = plane.server.push_log();
    let new = usize::try_from(log.total().saturating_sub(after)).unwrap();
    let mut records: Vec<PushRecord> = log.recent().into_iter().take(new).collect();
    records.reverse();
    records
}

fn has_reason(record: &PushRecord, reason: TriggerReason) -> bool {
    record.reasons.iter().any(|(r, _)| r == reason.as_str())
}

/// Sends `input`, then a forced push with reason `debug` as a marker, and returns the pushes up to the
/// one carrying the marker: inputs are taken in order, so whatever `input` caused is among them.
async fn send_then_marker(plane: &Plane, input: Input) -> Vec<PushRecord> {
    let before = plane.server.push_log().total();
    plane.server.inputs().send(input);
    plane.server.inputs().send(Input::Config(PushRequest::forced(TriggerReason::Debug)));
    wait_for("the marker push", LIMIT, async || {
        let pushes = pushes_since(plane, before);
        pushes.iter().any(|p| has_reason(p, TriggerReason::Debug)).then_some(pushes)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_settings_sent_as_input_push_once_and_equal_settings_push_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plane = Plane::start(dir.path()).await;
    let in_force = (*plane.server.mesh()).clone();
    assert_ne!(in_force.outbound_traffic_policy, OutboundTrafficPolicy::RegistryOnly);

    let registry_only =
        MeshSettings { outbound_traffic_policy: OutboundTrafficPolicy::RegistryOnly, ..in_force.clone() };
    let pushes = send_then_marker(&plane, Input::Mesh(Box::new(registry_only.clone()))).await;
    assert!(pushes.iter().any(|p| p.full && has_reason(p, TriggerReason::Global)), "{pushes:?}");
    assert_eq!(*plane.server.mesh(), registry_only);
    let ctx = plane.server.push_context().unwrap();
    assert_eq!(ctx.mesh().outbound_traffic_policy, OutboundTrafficPolicy::RegistryOnly);

    let pushes = send_then_marker(&plane, Input::Mesh(Box::new(registry_only))).await;
    assert!(
        !pushes.iter().any(|p| has_reason(p, TriggerReason::Global)),
        "equal settings pushed: {pushes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tracing_only_mesh_change_pushes_and_trace_sampling_stays_the_servers() {
    let dir = tempfile::tempdir().unwrap();
    let plane = Plane::start(dir.path()).await;
    let in_force = (*plane.server.mesh()).clone();
    assert!(in_force.enable_tracing);
    // `trace_sampling` is PILOT_TRACE_SAMPLING, the server's: an input cannot change it.
    let no_tracing = MeshSettings { enable_tracing: false, trace_sampling: 42.0, ..in_force.clone() };
    let pushes = send_then_marker(&plane, Input::Mesh(Box::new(no_tracing))).await;
    assert!(pushes.iter().any(|p| p.full && has_reason(p, TriggerReason::Global)), "{pushes:?}");
    let ctx = plane.server.push_context().unwrap();
    assert!(!ctx.mesh().enable_tracing);
    assert_eq!(ctx.mesh().trace_sampling, in_force.trace_sampling);
    let providers =
        MeshSettings { enable_tracing: false, default_tracing_providers: vec!["zipkin".into()], ..in_force };
    let pushes = send_then_marker(&plane, Input::Mesh(Box::new(providers))).await;
    assert!(pushes.iter().any(|p| p.full && has_reason(p, TriggerReason::Global)), "{pushes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_api_cluster_objects_sent_as_input_push_only_when_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let plane = Plane::start(dir.path()).await;
    let objects = gateway::KubeObjects {
        namespaces: BTreeMap::from([("default".to_string(), BTreeMap::new())]),
        ..gateway::KubeObjects::default()
    };
    let pushes = send_then_marker(&plane, Input::GatewayApiObjects(objects.clone())).await;
    assert!(pushes.iter().any(|p| p.full && has_reason(p, TriggerReason::Global)), "{pushes:?}");
    let pushes = send_then_marker(&plane, Input::GatewayApiObjects(objects)).await;
    assert!(
        !pushes.iter().any(|p| has_reason(p, TriggerReason::Global)),
        "unchanged objects pushed: {pushes:?}"
    );
}

/// Mesh networks arrive on their own input: a change is a global push whose push context has the new
/// gateways, equal networks push nothing, and a later mesh config (which carries no networks) keeps
/// them in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_networks_sent_as_input_push_once_and_survive_a_mesh_config_change() {
    use model::network::{MeshNetwork, MeshNetworkGateway, MeshNetworks};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let plane = Plane::start(dir.path()).await;
    assert!(!plane.server.push_context().unwrap().network_gateways().is_multi_network());
    let gateway = MeshNetworkGateway { address: "192.0.2.10".into(), port: 15443, ..Default::default() };
    let networks = Arc::new(MeshNetworks {
        networks: [("net-b".to_string(), MeshNetwork { endpoints: Vec::new(), gateways: vec![gateway] })]
            .into(),
    });

    let pushes = send_then_marker(&plane, Input::MeshNetworks(networks.clone())).await;
    assert!(pushes.iter().any(|p| p.full && has_reason(p, TriggerReason::Global)), "{pushes:?}");
    let listed: Vec<(String, u32, String)> = plane
        .server
        .push_context()
        .unwrap()
        .network_gateways()
        .all()
        .map(|g| (g.address.clone(), g.port, g.network.clone()))
        .collect();
    assert_eq!(listed, [("192.0.2.10".to_string(), 15443, "net-b".to_string())]);

    let pushes = send_then_marker(&plane, Input::MeshNetworks(networks.clone())).await;
    assert!(
        !pushes.iter().any(|p| has_reason(p, TriggerReason::Global)),
        "equal networks pushed: {pushes:?}"
    );

    let registry_only = MeshSettings {
        outbound_traffic_policy: OutboundTrafficPolicy::RegistryOnly,
        ..MeshSettings::default()
    };
    send_then_marker(&plane, Input::Mesh(Box::new(registry_only))).await;
    assert_eq!(plane.server.mesh().mesh_networks, networks, "the mesh config does not reset the networks");
    assert!(plane.server.push_context().unwrap().network_gateways().is_multi_network());
}
