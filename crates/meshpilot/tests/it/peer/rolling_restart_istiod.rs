//! Endpoints through a Kubernetes rolling restart, side by side with real istiod (issue 44): one real
//! kube-apiserver (no kubelet, no controllers), real istiod and the real `meshpilot discovery` binary
//! reading it, a real Envoy sidecar on meshpilot. The test plays the kubelet and the EndpointSlice
//! controller: a Deployment's pods get `status.podIP` and their Ready condition through the status
//! subresource, and the Service's EndpointSlice is written as the controller writes it (`ready`,
//! `serving`, `terminating`, a Pod `targetRef`). The restart goes in Kubernetes' order (maxSurge 1,
//! maxUnavailable 0): a new pod is created, gets its IP not ready, becomes ready; then an old pod
//! terminates (`deletionTimestamp`; not ready, `serving` true or false, `terminating` true) and is
//! removed (the Pod first, then its slice endpoint) — once per old pod; at the end one pod is
//! force-deleted (scale down).
//!
//! After every step, waiting on what each side serves (never on time): istiod's EDS equals the set
//! istiod's rules give (pinned Istio, defaults: ready → `HEALTHY`; not ready → `UNHEALTHY`, sent since
//! `PILOT_AUTO_SEND_UNHEALTHY_ENDPOINTS` is true; terminating → absent, `serving` or not, as the
//! Service has no persistent-session label), meshpilot's EDS equals istiod's, and the real Envoy's
//! `/clusters` shows the same set. Both ADS watches record every EDS response: once a pod's endpoint is
//! gone from a side (it terminated), no later response of that side carries it again, and Envoy never
//! shows it again either.

use super::conformance::{
    Meshpilot,
    ads::{next_response, open_stream},
    node as conformance_node,
    scenarios::ProxySpec,
};
use crate::istio_peer::Istiod;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use envoy_types::pb::envoy::{
    config::{
        core::v3::{HealthStatus, Node, address},
        endpoint::v3::{ClusterLoadAssignment, lb_endpoint},
    },
    service::discovery::v3::DiscoveryRequest,
};
use kube_source::testenv::TestEnv;
use meshpilot_testing::{AdsApi, Bootstrap, Envoy, wait_for};
use prost::Message;
use serde_json::Value;

const NS: &str = "rollout";
const MESH: &str = "trustDomain: cluster.local\nrootNamespace: istio-config\n";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// The Service's ports: (service port, port name, container port).
const PORTS: [(u16, &str, u16); 2] = [(80, "http", 8080), (9090, "grpc", 9090)];
/// How long one side may take to serve a step (a limit, not a timing assertion).
const LIMIT: Duration = Duration::from_secs(60);

/// The endpoints of one cluster as a proxy sees them: `(IP:port, health status name)`.
type Endpoints = BTreeSet<(String, String)>;

fn clusters() -> Vec<String> {
    PORTS.iter().map(|(p, _, _)| format!("outbound|{p}||web.{NS}.svc.cluster.local")).collect()
}

// ------------------------------------------------------------------------------------------ EDS watch

/// What one ADS stream has received: each cluster's current endpoints, and every assignment received
/// in order.
#[derive(Default)]
struct Seen {
    current: BTreeMap<String, Endpoints>,
    updates: Vec<(String, Endpoints)>,
    error: Option<String>,
}

/// A SotW ADS stream asking for the EDS of [`clusters`] as one sidecar, every response ACKed and
/// recorded; aborted on drop.
struct EdsWatch {
    side: &'static str,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl EdsWatch {
    fn start(side: &'static str, addr: SocketAddr, node: Node) -> EdsWatch {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let record = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            if let Err(e) = watch(addr, node, &record).await {
                record.lock().unwrap().error = Some(e);
            }
        });
        EdsWatch { side, seen, task }
    }

    /// The current endpoints of `cluster` (empty before its first assignment).
    fn current(&self, cluster: &str) -> Endpoints {
        let seen = self.seen.lock().unwrap();
        assert!(seen.error.is_none(), "{} EDS stream: {:?}", self.side, seen.error);
        seen.current.get(cluster).cloned().unwrap_or_default()
    }

    /// How many assignments have been received.
    fn received(&self) -> usize {
        self.seen.lock().unwrap().updates.len()
    }

    /// An assignment received after the first `since` that carries `ip`.
    fn carried_after(&self, ip: &str, since: usize) -> Option<String> {
        let seen = self.seen.lock().unwrap();
        seen.updates[since..]
            .iter()
            .find(|(_, eps)| eps.iter().any(|(a, _)| a.rsplit_once(':').is_some_and(|(h, _)| h == ip)))
            .map(|(c, eps)| format!("{c}: {eps:?}"))
    }
}

impl Drop for EdsWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn watch(addr: SocketAddr, node: Node, seen: &Mutex<Seen>) -> Result<(), String> {
    let names = clusters();
    let ask = |version: String, nonce: String| DiscoveryRequest {
        type_url: EDS.into(),
        resource_names: names.clone(),
        version_info: version,
        response_nonce: nonce,
        ..Default::default()
    };
    let first = DiscoveryRequest { node: Some(node), ..ask(String::new(), String::new()) };
    let (tx, mut responses) = open_stream(addr, first).await?;
    loop {
        let resp = next_response(&mut responses, addr).await?;
        {
            let mut seen = seen.lock().unwrap();
            for any in &resp.resources {
                let cla = ClusterLoadAssignment::decode(any.value.as_slice()).map_err(|e| e.to_string())?;
                let eps = assignment_endpoints(&cla);
                seen.current.insert(cla.cluster_name.clone(), eps.clone());
                seen.updates.push((cla.cluster_name, eps));
            }
        }
        tx.send(ask(resp.version_info, resp.nonce))
            .await
            .map_err(|_| "request channel closed".to_string())?;
    }
}

/// The endpoints of an assignment, every locality and priority together.
fn assignment_endpoints(cla: &ClusterLoadAssignment) -> Endpoints {
    let mut out = Endpoints::new();
    for lb in cla.endpoints.iter().flat_map(|l| l.lb_endpoints.iter()) {
        let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = &lb.host_identifier else { continue };
        let Some(address::Address::SocketAddress(sa)) = ep.address.as_ref().and_then(|a| a.address.as_ref())
        else {
            continue;
        };
        let port = match sa.port_specifier {
            Some(envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(p)) => p,
            _ => 0,
        };
        let health = HealthStatus::try_from(lb.health_status).map_or("?", |h| h.as_str_name());
        out.insert((format!("{}:{port}", sa.address), health.to_string()));
    }
    out
}

/// The hosts of `cluster` in Envoy's `/clusters?format=json`, with their EDS health status (`None`
/// while Envoy has no such cluster).
async fn envoy_endpoints(envoy: &Envoy, cluster: &str) -> Option<Endpoints> {
    let (200, body) = envoy.admin_get("/clusters?format=json").await.ok()? else { return None };
    let json: Value = serde_json::from_str(&body).ok()?;
    let status = json["cluster_statuses"].as_array()?.iter().find(|c| c["name"] == cluster)?;
    let hosts = status["host_statuses"].as_array().cloned().unwrap_or_default();
    Some(
        hosts
            .iter()
            .map(|h| {
                let sa = &h["address"]["socket_address"];
                let addr = format!("{}:{}", sa["address"].as_str().unwrap_or(""), sa["port_value"]);
                let health = h["health_status"]["eds_health_status"].as_str().unwrap_or("UNKNOWN");
                (addr, health.to_string())
            })
            .collect(),
    )
}

// ------------------------------------------------------------------------------------------ cluster

/// A slice endpoint's conditions, as the EndpointSlice controller writes them.
#[derive(Clone, Copy, Debug)]
struct Conditions {
    ready: bool,
    serving: bool,
    terminating: bool,
}

const NOT_READY: Conditions = Conditions { ready: false, serving: false, terminating: false };
const READY: Conditions = Conditions { ready: true, serving: true, terminating: false };

/// One endpoint of the Service's slice.
#[derive(Clone, Debug)]
struct Member {
    pod: String,
    ip: String,
    conditions: Conditions,
}

/// The Deployment, its Service's one EndpointSlice and the sides that serve it.
struct Rollout<'e> {
    env: &'e TestEnv,
    members: Vec<Member>,
    /// Pods in the API server.
    pods: BTreeSet<String>,
    istiod: Option<EdsWatch>,
    meshpilot: Option<EdsWatch>,
    envoy: Option<Envoy>,
    /// Per gone pod IP, the number of assignments each watch had received when it saw it gone
    /// (istiod, meshpilot; `None`: not yet gone there).
    gone: BTreeMap<String, (Option<usize>, Option<usize>)>,
    /// Logs for failure messages.
    logs: Vec<std::path::PathBuf>,
}

impl Rollout<'_> {
    fn create_pod(&mut self, name: &str, hash: &str) {
        let ports: Vec<String> =
            PORTS.iter().map(|(_, n, p)| format!("{{name: {n}, containerPort: {p}}}")).collect();
        // A node name: deleting the pod is then graceful (deletionTimestamp) until "the kubelet"
        // removes it, as in a cluster.
        self.env
            .kubectl_apply(&format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {NS}, \
                 labels: {{app: web, pod-template-hash: {hash}}}}}\nspec:\n  nodeName: rollout-node\n  \
                 automountServiceAccountToken: false\n  \
                 containers: [{{name: app, image: example.invalid/web, ports: [{}]}}]\n",
                ports.join(", ")
            ))
            .unwrap();
        self.pods.insert(name.to_string());
    }

    /// The kubelet's status write: running at `ip`, Ready `ready`.
    fn pod_status(&self, name: &str, ip: &str, ready: bool) {
        let status = if ready { "True" } else { "False" };
        let patch = format!(
            "{{\"status\":{{\"phase\":\"Running\",\"podIP\":\"{ip}\",\"podIPs\":[{{\"ip\":\"{ip}\"}}],\
             \"conditions\":[{{\"type\":\"Ready\",\"status\":\"{status}\"}}]}}}}"
        );
        self.env
            .kubectl(&["-n", NS, "patch", "pod", name, "--subresource=status", "--type=merge", "-p", &patch])
            .unwrap();
    }

    /// The EndpointSlice controller's write of the current members.
    fn write_slice(&self) {
        let ports: Vec<String> =
            PORTS.iter().map(|(_, n, p)| format!("{{name: {n}, port: {p}, protocol: TCP}}")).collect();
        let endpoints: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                let c = m.conditions;
                format!(
                    "{{addresses: [{}], conditions: {{ready: {}, serving: {}, terminating: {}}}, \
                     nodeName: rollout-node, targetRef: {{kind: Pod, name: {}, namespace: {NS}}}}}",
                    m.ip, c.ready, c.serving, c.terminating, m.pod
                )
            })
            .collect();
        self.env
            .kubectl_apply(&format!(
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: web-x7k2p, \
                 namespace: {NS}, labels: {{kubernetes.io/service-name: web, \
                 endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}}}}\n\
                 addressType: IPv4\nports: [{}]\nendpoints: [{}]\n",
                ports.join(", "),
                endpoints.join(", ")
            ))
            .unwrap();
    }

    fn set(&mut self, pod: &str, conditions: Conditions) {
        self.members.iter_mut().find(|m| m.pod == pod).unwrap().conditions = conditions;
        self.write_slice();
    }

    fn ip_of(&self, pod: &str) -> String {
        self.members.iter().find(|m| m.pod == pod).unwrap().ip.clone()
    }

    /// What istiod sends for cluster `i` of [`clusters`] (pinned Istio's `endpointHealthStatus` and
    /// `EndpointBuilder` filter with default features): ready → HEALTHY, terminating → left out, else
    /// UNHEALTHY; an endpoint whose Pod is not in the API server is left out.
    fn expected(&self, i: usize) -> Endpoints {
        let port = PORTS[i].2;
        self.members
            .iter()
            .filter(|m| self.pods.contains(&m.pod))
            .filter_map(|m| {
                let c = m.conditions;
                let health = if c.ready {
                    "HEALTHY"
                } else if c.terminating {
                    return None;
                } else {
                    "UNHEALTHY"
                };
                Some((format!("{}:{port}", m.ip), health.to_string()))
            })
            .collect()
    }

    fn context(&self) -> String {
        self.logs
            .iter()
            .map(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                format!("--- {} ---\n{}", p.display(), lines[lines.len().saturating_sub(30)..].join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// After step `what`: istiod serves the expected sets, meshpilot the same, Envoy shows them; no gone
    /// pod's endpoint is carried again by either side or shown by Envoy.
    async fn check(&self, what: &str) {
        self.check_sides(what, true).await;
    }

    /// [`Rollout::check`], istiod left out when `with_istiod` is false.
    async fn check_sides(&self, what: &str, with_istiod: bool) {
        let names = clusters();
        let expected: Vec<Endpoints> = (0..names.len()).map(|i| self.expected(i)).collect();
        let (istiod, meshpilot) = (self.istiod.as_ref().unwrap(), self.meshpilot.as_ref().unwrap());
        let sides = if with_istiod { vec![istiod, meshpilot] } else { vec![meshpilot] };
        for watch in sides {
            let r = wait_for(&format!("{}: {} EDS", what, watch.side), LIMIT, async || {
                names.iter().zip(&expected).all(|(c, want)| watch.current(c) == *want).then_some(())
            })
            .await;
            if let Err(e) = r {
                let now: Vec<Endpoints> = names.iter().map(|c| watch.current(c)).collect();
                let other: Vec<Endpoints> = names
                    .iter()
                    .map(|c| [istiod, meshpilot][usize::from(watch.side == "istiod")].current(c))
                    .collect();
                panic!(
                    "{e}\nexpected (istiod's rules): {expected:#?}\n{}: {now:#?}\nthe other side: {other:#?}\n{}",
                    watch.side,
                    self.context()
                );
            }
        }
        let envoy = self.envoy.as_ref().unwrap();
        let gone: BTreeSet<&str> = self.gone.keys().map(String::as_str).collect();
        let mut last = Vec::new();
        let r = wait_for(&format!("{what}: Envoy's /clusters"), LIMIT, async || {
            let mut all = Vec::new();
            for c in &names {
                all.push(envoy_endpoints(envoy, c).await.unwrap_or_default());
            }
            for (c, eps) in names.iter().zip(&all) {
                let stale: Vec<_> = eps
                    .iter()
                    .filter(|(a, _)| gone.iter().any(|g| a.starts_with(&format!("{g}:"))))
                    .collect();
                assert!(stale.is_empty(), "{what}: Envoy shows gone pods' endpoints in {c}: {stale:?}");
            }
            let done = all == expected;
            last = all;
            done.then_some(())
        })
        .await;
        if let Err(e) = r {
            panic!("{e}\nexpected: {expected:#?}\nEnvoy: {last:#?}\n{}", envoy.log_tail(30));
        }
        for (ip, (since_istiod, since_meshpilot)) in &self.gone {
            for (watch, since) in [(istiod, *since_istiod), (meshpilot, *since_meshpilot)] {
                if let Some(update) = since.and_then(|since| watch.carried_after(ip, since)) {
                    panic!("{what}: {} sent gone pod IP {ip} again: {update}", watch.side);
                }
            }
        }
        let agree = if with_istiod { "istiod = meshpilot = Envoy" } else { "meshpilot = Envoy" };
        println!("{what}: {agree}: {expected:?}");
    }

    /// Marks `pod`'s endpoint gone from meshpilot, and from istiod with `istiod`, from now on (after a
    /// check that saw it gone there).
    fn mark_gone(&mut self, pod: &str, istiod: bool) {
        let ip = self.ip_of(pod);
        let entry = self.gone.entry(ip).or_default();
        entry.1 = Some(self.meshpilot.as_ref().unwrap().received());
        if istiod {
            entry.0 = Some(self.istiod.as_ref().unwrap().received());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_endpoints_match_istiod_and_reach_envoy() {
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", NS]);
    let _ = env.kubectl(&["create", "namespace", "istio-config"]);
    let ports: Vec<String> =
        PORTS.iter().map(|(p, n, _)| format!("{{name: {n}, port: {p}, targetPort: {n}}}")).collect();
    env.kubectl_apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: {NS}}}\nspec:\n  \
         selector: {{app: web}}\n  ports: [{}]\n",
        ports.join(", ")
    ))
    .unwrap();
    let mut rollout = Rollout {
        env,
        members: Vec::new(),
        pods: BTreeSet::new(),
        istiod: None,
        meshpilot: None,
        envoy: None,
        gone: BTreeMap::new(),
        logs: Vec::new(),
    };
    // The Deployment at revision "old": three ready pods.
    let old: Vec<String> = (0..3).map(|i| format!("web-5d8f7c-{i}")).collect();
    for (i, pod) in old.iter().enumerate() {
        let ip = format!("10.244.1.{}", i + 1);
        rollout.create_pod(pod, "5d8f7c");
        rollout.pod_status(pod, &ip, true);
        rollout.members.push(Member { pod: pod.clone(), ip, conditions: READY });
    }
    rollout.write_slice();

    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    let istiod_dir = work.path().join("istiod");
    std::fs::create_dir_all(&istiod_dir).unwrap();
    std::fs::write(istiod_dir.join("mesh.yaml"), MESH).unwrap();
    let kubeconfig = env.kubeconfig();
    let istiod = Istiod::start(&istiod_dir, &kubeconfig, "");
    let mp = Meshpilot::start_with_mesh(work.path(), &config, &kubeconfig, MESH).await;
    rollout.logs = vec![istiod.log_path(), mp.log.clone()];
    let watcher = ProxySpec {
        label: "sidecar",
        node_type: "sidecar",
        name: "watcher-0",
        namespace: NS,
        ip: "10.250.0.9",
        labels: &[("app", "watcher")],
        metadata: &[],
    };
    rollout.istiod = Some(EdsWatch::start("istiod", istiod.xds(), conformance_node(&watcher)));
    rollout.meshpilot = Some(EdsWatch::start("meshpilot", mp.grpc, conformance_node(&watcher)));
    let envoy = Envoy::start(&Bootstrap::sidecar_in("client", NS, mp.grpc, AdsApi::Sotw)).await.unwrap();
    rollout.envoy = Some(envoy);
    rollout.check("start: three ready pods").await;

    // The rolling restart to revision "new", one pod at a time.
    for (i, old_pod) in old.iter().enumerate() {
        let new_pod = format!("web-7b9c4d-{i}");
        let ip = format!("10.244.2.{}", i + 1);
        rollout.create_pod(&new_pod, "7b9c4d");
        rollout.pod_status(&new_pod, &ip, false);
        rollout.members.push(Member { pod: new_pod.clone(), ip: ip.clone(), conditions: NOT_READY });
        rollout.write_slice();
        rollout.check(&format!("{new_pod} running, not ready")).await;

        rollout.pod_status(&new_pod, &ip, true);
        rollout.set(&new_pod, READY);
        rollout.check(&format!("{new_pod} ready")).await;

        // The old pod terminates: graceful deletion, then the kubelet's and the controller's writes.
        // Even pods are still serving while they terminate, odd ones are not.
        let serving = i % 2 == 0;
        env.kubectl(&["-n", NS, "delete", "pod", old_pod.as_str(), "--wait=false"]).unwrap();
        let old_ip = rollout.ip_of(old_pod);
        rollout.pod_status(old_pod, &old_ip, serving);
        rollout.set(old_pod, Conditions { ready: false, serving, terminating: true });
        rollout.check(&format!("{old_pod} terminating (serving {serving})")).await;
        rollout.mark_gone(old_pod, true);

        // The kubelet removes the pod, then the controller its endpoint.
        env.kubectl(&["-n", NS, "delete", "pod", old_pod.as_str(), "--grace-period=0", "--force"]).unwrap();
        rollout.pods.remove(old_pod);
        rollout.members.retain(|m| &m.pod != old_pod);
        rollout.write_slice();
        rollout.check(&format!("{old_pod} removed")).await;
    }

    // Scale down by force: a ready pod's Pod goes first, its slice endpoint after. meshpilot leaves
    // out an endpoint whose Pod the API server no longer has at once (a deleted pod's endpoint is never
    // served); istiod only looks the pod up when the slice changes (`updateEndpointCacheForSlice`),
    // so it keeps sending the endpoint until then: istiod is compared again after the slice write.
    let last = "web-7b9c4d-2";
    env.kubectl(&["-n", NS, "delete", "pod", last, "--grace-period=0", "--force"]).unwrap();
    rollout.pods.remove(last);
    rollout.check_sides(&format!("{last} force-deleted, still in the slice (meshpilot)"), false).await;
    rollout.mark_gone(last, false);
    rollout.members.retain(|m| m.pod != last);
    rollout.write_slice();
    rollout.check(&format!("{last} out of the slice")).await;

    let envoy = rollout.envoy.as_ref().unwrap();
    assert_eq!(envoy.stat("cluster_manager.cds.update_rejected").await.unwrap().unwrap_or(0), 0);
    envoy.assert_no_rejected_updates().await;
}
