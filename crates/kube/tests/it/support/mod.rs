//! Shared helpers of the Kubernetes tests: a running source, an event log, waiting, a registry,
//! object manifests, and a whole control plane over the test cluster (`meshpilot_testing::Plane`).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use api::Kind;
use meshpilot_kube::{KubeSource, KubeSourceOptions, testenv::TestEnv};
use model::{Config, ConfigStoreController, Event, ShutdownTrigger, shutdown_channel};

/// Events received by a handler: (event, namespace/name, resource version).
pub type Log = Arc<Mutex<Vec<(Event, String, String)>>>;

/// A started source with a recording handler per kind.
pub struct Running {
    pub source: KubeSource,
    pub log: Log,
    _trigger: ShutdownTrigger,
}

/// Creates a namespace (ignoring "already exists").
pub fn namespace(env: &TestEnv, name: &str) {
    let _ = env.kubectl(&["create", "namespace", name]);
}

/// Starts a source over `env` restricted to `namespaces` (empty: all), with fast retries, and records
/// every event of `kinds`.
pub async fn start(env: &TestEnv, namespaces: &[&str], kinds: &[Kind]) -> Running {
    let options = KubeSourceOptions {
        namespaces: namespaces.iter().map(|s| (*s).to_string()).collect(),
        ..KubeSourceOptions::default()
    };
    start_with(env, options, kinds).await
}

/// Starts a source over `env` with `options` (fast retries), recording every event of `kinds`.
pub async fn start_with(env: &TestEnv, options: KubeSourceOptions, kinds: &[Kind]) -> Running {
    let config = env.client_config().await.expect("kubeconfig");
    let options =
        KubeSourceOptions { backoff: (Duration::from_millis(100), Duration::from_secs(1)), ..options };
    let source = KubeSource::new(config, options);
    let log: Log = Arc::default();
    for kind in kinds {
        let log = log.clone();
        source.register_event_handler(
            *kind,
            Arc::new(move |_old: Option<&Arc<Config>>, new: &Arc<Config>, event| {
                log.lock().unwrap().push((
                    event,
                    format!("{}/{}", new.meta.namespace, new.meta.name),
                    new.meta.resource_version.clone(),
                ));
                Ok(())
            }),
        );
    }
    let (trigger, shutdown) = shutdown_channel();
    tokio::spawn(source.run(shutdown));
    Running { source, log, _trigger: trigger }
}

/// Polls `check` until it holds; panics naming `what` after 120 s (a hang guard, not a timing
/// assertion: with the binary's test environments starting at once on a loaded 2-core CI machine, a
/// first list of every kind once took over 60 s).
pub async fn wait_for(what: &str, check: impl FnMut() -> bool) {
    meshpilot_testing::wait_until(what, Duration::from_secs(120), check).await.unwrap();
}

/// A whole control plane reading `namespace` of the test cluster (Istio config through a
/// KubeSource, services through the Kubernetes registry), ready.
pub async fn start_plane(env: &TestEnv, namespace: &str) -> meshpilot_testing::Plane {
    let config = env.client_config().await.expect("kubeconfig");
    meshpilot_testing::Plane::start_with(meshpilot_testing::PlaneOptions::kube(config, namespace))
        .await
        .unwrap()
}

impl Running {
    /// The events so far.
    pub fn events(&self) -> Vec<(Event, String, String)> {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the source has synced.
    pub async fn synced(&self) {
        wait_for("has_synced", || self.source.has_synced()).await;
    }

    /// `true` once an event `event` for `ns/name` arrived.
    pub fn saw(&self, event: Event, object: &str) -> bool {
        self.events().iter().any(|(e, o, _)| *e == event && o == object)
    }
}

/// A VirtualService routing `host` to `dest`.
pub fn virtual_service(namespace: &str, name: &str, host: &str, dest: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         spec:\n  hosts: [\"{host}\"]\n  http:\n  - route:\n    - destination: {{host: {dest}}}\n"
    )
}

/// A DestinationRule for `host`.
pub fn destination_rule(namespace: &str, name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         spec:\n  host: {host}\n"
    )
}

/// A started Kubernetes registry with a log of its notifications.
pub struct RunningRegistry {
    pub registry: meshpilot_kube::KubeRegistry,
    pub events: Arc<Mutex<Vec<model::service::RegistryEvent>>>,
    _trigger: ShutdownTrigger,
}

/// Starts a Kubernetes registry over `env` restricted to `namespaces`, recording its notifications,
/// and waits until it has synced.
pub async fn start_registry(env: &TestEnv, namespaces: &[&str]) -> RunningRegistry {
    let options = meshpilot_kube::KubeRegistryOptions {
        namespaces: namespaces.iter().map(|s| (*s).to_string()).collect(),
        ..meshpilot_kube::KubeRegistryOptions::default()
    };
    start_registry_with(env, options).await
}

/// Starts a Kubernetes registry over `env` with `options` (fast retries), recording its
/// notifications, and waits until it has synced.
pub async fn start_registry_with(
    env: &TestEnv,
    options: meshpilot_kube::KubeRegistryOptions,
) -> RunningRegistry {
    use model::service::ServiceController;
    let config = env.client_config().await.expect("kubeconfig");
    let options = meshpilot_kube::KubeRegistryOptions {
        backoff: (Duration::from_millis(100), Duration::from_secs(1)),
        ..options
    };
    let registry = meshpilot_kube::KubeRegistry::new(config, options);
    let events: Arc<Mutex<Vec<model::service::RegistryEvent>>> = Arc::default();
    let log = events.clone();
    registry.append_event_handler(Arc::new(move |e| log.lock().unwrap().push(e.clone())));
    let (trigger, shutdown) = shutdown_channel();
    tokio::spawn(registry.run(shutdown));
    wait_for("registry has_synced", || registry.has_synced()).await;
    RunningRegistry { registry, events, _trigger: trigger }
}

/// A non-loopback IPv4 address of this machine (the API server refuses loopback endpoint and pod
/// addresses): the source address of a route to a documentation address (no packet is sent).
pub fn host_ip() -> std::net::Ipv4Addr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
    socket.connect("198.51.100.1:9").expect("a default route (needed for a non-loopback host address)");
    match socket.local_addr().expect("local address").ip() {
        std::net::IpAddr::V4(ip) if !ip.is_loopback() => ip,
        other => panic!("no non-loopback IPv4 address on this machine (got {other})"),
    }
}

/// A Pod manifest (`status` is set separately with [`set_pod_ip`]).
pub fn pod(namespace: &str, name: &str, labels: &str, account: &str, node: &str, ports: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {namespace}, labels: {{{labels}}}}}\n\
         spec:\n  serviceAccountName: {account}\n  nodeName: {node}\n  automountServiceAccountToken: false\n  \
         containers: [{{name: app, image: example.invalid/app, ports: [{ports}]}}]\n"
    )
}

/// Sets a pod's `status.podIP(s)` (no kubelet does it here).
pub fn set_pod_ip(env: &TestEnv, namespace: &str, name: &str, ip: &str) {
    let patch = format!(
        "{{\"status\":{{\"phase\":\"Running\",\"podIP\":\"{ip}\",\"podIPs\":[{{\"ip\":\"{ip}\"}}]}}}}"
    );
    env.kubectl(&[
        "-n",
        namespace,
        "patch",
        "pod",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ])
    .expect("patch pod status");
}

/// An EndpointSlice of `service` with `ports` (`name: port` YAML flow items) and `endpoints` (YAML
/// flow items).
pub fn slice(namespace: &str, name: &str, service: &str, ports: &str, endpoints: &[String]) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}, namespace: {namespace}, \
         labels: {{kubernetes.io/service-name: {service}}}}}\naddressType: IPv4\nports: [{ports}]\nendpoints: [{}]\n",
        endpoints.join(", ")
    )
}

/// One slice endpoint at `ip` pointing at pod `pod` (empty: no targetRef) with `ready`/`terminating`.
pub fn slice_endpoint(ip: &str, pod: &str, ready: bool, terminating: bool) -> String {
    let target =
        if pod.is_empty() { String::new() } else { format!(", targetRef: {{kind: Pod, name: {pod}}}") };
    format!("{{addresses: [{ip}], conditions: {{ready: {ready}, terminating: {terminating}}}{target}}}")
}
