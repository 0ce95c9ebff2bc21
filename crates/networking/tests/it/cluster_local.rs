//! Cluster-local services in EDS (Istio's `EndpointBuilder`, `pilot/pkg/model/cluster_local.go`): the
//! same services registered by two clusters (`c1`, `c2`: two ServiceEntry registries with those
//! cluster ids); a proxy of `c1` sees both clusters' endpoints of an ordinary service and only `c1`'s
//! of a cluster-local one.

use std::sync::Arc;

use config::{memory::MemoryStore, queue::QueueOptions};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use meshpilot_networking::{
    Snapshot,
    cache::EncodedResource,
    endpoint::{generate_endpoints, generate_endpoints_encoded},
};
use model::{
    ServiceDiscovery,
    push::{
        MeshSettings, ProxyContext, PushContext,
        cluster_local::ServiceSettings,
        node::{NodeMetadata, Proxy},
    },
    service::{Endpoint, Labels, Service, ServiceInstance},
};
use prost::Message;
use registry::{ServiceEntryIndex, ServiceEntryOptions, index_from_configs};

use crate::support::parse;

/// The registries of two clusters as one discovery: services of the first, endpoints of both.
struct TwoClusters(ServiceEntryIndex, ServiceEntryIndex);

impl ServiceDiscovery for TwoClusters {
    fn services(&self) -> Vec<Arc<Service>> {
        self.0.services()
    }
    fn get_service(&self, hostname: &str, namespace: &str) -> Option<Arc<Service>> {
        self.0.get_service(hostname, namespace)
    }
    fn endpoints(
        &self,
        hostname: &str,
        namespace: &str,
        port: u32,
        subset: Option<&Labels>,
    ) -> Vec<Arc<Endpoint>> {
        let mut all = self.0.endpoints(hostname, namespace, port, subset);
        all.extend(self.1.endpoints(hostname, namespace, port, subset));
        all
    }
    fn proxy_instances(&self, _ips: &[String], _namespace: Option<&str>) -> Vec<ServiceInstance> {
        Vec::new()
    }
}

/// A STATIC mesh-internal ServiceEntry for `host` in `namespace` (TCP 53) with one endpoint.
fn entry(name: &str, namespace: &str, host: &str, address: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {namespace}}}\n\
         spec:\n  hosts: [{host}]\n  location: MESH_INTERNAL\n  ports: [{{number: 53, name: tcp, protocol: TCP}}]\n  \
         resolution: STATIC\n  endpoints: [{{address: {address}}}]\n---\n"
    )
}

/// Cluster `cluster` (second octet 1 or 2 of every endpoint address) with `kube-dns` in kube-system,
/// `web` and `db` in `shop`.
fn cluster(cluster: &str, octet: u8) -> ServiceEntryIndex {
    let text = [
        entry(
            "kube-dns",
            "kube-system",
            "kube-dns.kube-system.svc.cluster.local",
            &format!("10.{octet}.0.10"),
        ),
        entry("web", "shop", "web.shop.svc.cluster.local", &format!("10.{octet}.0.20")),
        entry("db", "shop", "db.shop.svc.cluster.local", &format!("10.{octet}.0.30")),
    ]
    .concat();
    let configs = parse(&text, "default");
    assert_eq!(configs.len(), 3);
    let options = ServiceEntryOptions { cluster_id: cluster.to_string(), ..ServiceEntryOptions::default() };
    index_from_configs(configs.iter(), options).0
}

fn push(mesh: MeshSettings) -> Snapshot {
    let store = MemoryStore::new("test", api::Kind::ALL, QueueOptions::default());
    let discovery = TwoClusters(cluster("c1", 1), cluster("c2", 2));
    Snapshot::new(PushContext::new(&store, &discovery, mesh, "v1"))
}

#[test]
fn an_endpoint_update_keeps_cluster_local_services_split() {
    // The incremental EDS path (`with_endpoints`): cluster c2's kube-dns moves; c1's proxies keep
    // seeing only c1's, c2's see the new address.
    let store = MemoryStore::new("test", api::Kind::ALL, QueueOptions::default());
    let before = PushContext::new(
        &store,
        &TwoClusters(cluster("c1", 1), cluster("c2", 2)),
        MeshSettings::default(),
        "v1",
    );
    let moved = TwoClusters(cluster("c1", 1), cluster("c2", 3));
    let changed = [(KUBE_DNS.to_string(), "kube-system".to_string())];
    let after = Snapshot::new(before.with_endpoints(&moved, &changed, "v2"));
    assert_eq!(addresses(&after, &proxy_in("c1"), KUBE_DNS), ["10.1.0.10"]);
    assert_eq!(addresses(&after, &proxy_in("c2"), KUBE_DNS), ["10.3.0.10"]);
    // Services not re-read keep their lists.
    assert_eq!(addresses(&after, &proxy_in("c2"), WEB), ["10.1.0.20", "10.2.0.20"]);
}

/// A sidecar in `shop` whose node says `CLUSTER_ID: cluster_id`.
fn proxy_in(cluster_id: &str) -> ProxyContext {
    let metadata = NodeMetadata { cluster_id: cluster_id.to_string(), ..NodeMetadata::default() };
    let proxy = Proxy::parse("sidecar~10.9.0.1~app.shop~shop.svc.cluster.local", metadata).unwrap();
    ProxyContext::from_proxy(&proxy).unwrap()
}

/// The endpoint addresses of cluster `host` port 53 for `proxy`, sorted.
fn addresses(push: &Snapshot, proxy: &ProxyContext, host: &str) -> Vec<String> {
    let name = format!("outbound|53||{host}");
    let out = generate_endpoints(push, proxy, std::slice::from_ref(&name));
    let mut found: Vec<String> = out.resources[0]
        .endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier::Endpoint(ep)) => {
                match ep.address.as_ref()?.address.as_ref()? {
                    envoy_types::pb::envoy::config::core::v3::address::Address::SocketAddress(s) => {
                        Some(s.address.clone())
                    }
                    _ => None,
                }
            }
            _ => None,
        })
        .collect();
    found.sort();
    found
}

const KUBE_DNS: &str = "kube-dns.kube-system.svc.cluster.local";
const WEB: &str = "web.shop.svc.cluster.local";
const DB: &str = "db.shop.svc.cluster.local";

#[test]
fn kube_system_endpoints_come_only_from_the_proxys_cluster() {
    let push = push(MeshSettings::default());
    assert_eq!(addresses(&push, &proxy_in("c1"), KUBE_DNS), ["10.1.0.10"]);
    assert_eq!(addresses(&push, &proxy_in("c2"), KUBE_DNS), ["10.2.0.10"]);
    // As istiod: a proxy of another (or no) cluster sees none of a cluster-local service.
    assert!(addresses(&push, &proxy_in("c3"), KUBE_DNS).is_empty());
    assert!(addresses(&push, &proxy_in(""), KUBE_DNS).is_empty());
    // An ordinary service: both clusters, whatever the proxy's cluster.
    assert_eq!(addresses(&push, &proxy_in("c1"), WEB), ["10.1.0.20", "10.2.0.20"]);
    assert_eq!(addresses(&push, &proxy_in(""), WEB), ["10.1.0.20", "10.2.0.20"]);
}

#[test]
fn mesh_service_settings_make_services_cluster_local_or_global() {
    let mesh = MeshSettings {
        service_settings: vec![
            ServiceSettings { hosts: vec!["*.shop.svc.cluster.local".into()], cluster_local: true },
            ServiceSettings {
                hosts: vec![DB.into(), "*.kube-system.svc.cluster.local".into()],
                cluster_local: false,
            },
        ],
        ..MeshSettings::default()
    };
    let push = push(mesh);
    assert!(push.is_cluster_local(WEB) && !push.is_cluster_local(DB) && !push.is_cluster_local(KUBE_DNS));
    assert_eq!(addresses(&push, &proxy_in("c2"), WEB), ["10.2.0.20"]);
    assert_eq!(addresses(&push, &proxy_in("c2"), DB), ["10.1.0.30", "10.2.0.30"]);
    assert_eq!(addresses(&push, &proxy_in("c2"), KUBE_DNS), ["10.1.0.10", "10.2.0.10"]);
}

#[test]
fn proxies_of_different_clusters_do_not_share_an_assignment() {
    // The encoded path caches assignments per endpoint list: each cluster has its own list, and proxies
    // of one cluster share theirs.
    let push = push(MeshSettings::default());
    let names = [format!("outbound|53||{KUBE_DNS}")];
    let encoded =
        |cluster: &str| generate_endpoints_encoded(&push, &proxy_in(cluster), &names, false).resources;
    let (c1, c2, again) = (encoded("c1"), encoded("c2"), encoded("c1"));
    let decode = |r: &[EncodedResource]| ClusterLoadAssignment::decode(r[0].bytes()).unwrap();
    let only = |cla: ClusterLoadAssignment| {
        let eps: Vec<_> = cla.endpoints.iter().flat_map(|l| &l.lb_endpoints).collect();
        assert_eq!(eps.len(), 1);
        format!("{:?}", eps[0].host_identifier)
    };
    assert!(only(decode(&c1)).contains("10.1.0.10"));
    assert!(only(decode(&c2)).contains("10.2.0.10"));
    assert!(Arc::ptr_eq(&c1[0].encoded, &again[0].encoded), "proxies of one cluster share the assignment");
}
