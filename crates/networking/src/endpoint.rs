//! EDS: a `ClusterLoadAssignment` per requested cluster name (Istio's `pilot/pkg/xds/endpoints/`).
//!
//! Endpoints come from the snapshot's endpoint index (`ServiceDiscovery::endpoints` per service port);
//! a subset cluster keeps the endpoints whose labels match the subset of the DestinationRule that
//! applies to the proxy. Endpoints are grouped by locality (`region/zone/subzone`); each locality gets
//! a `load_balancing_weight`, the sum of its endpoints' weights (proxyless gRPC ignores localities
//! without one). Terminating endpoints are left out; unhealthy (not ready) ones are sent as `UNHEALTHY`
//! unless the cluster's outlier detection sets `minHealthPercent` ([`sends_unhealthy`]); draining ones
//! are sent as `DRAINING` (Istio's `EndpointBuilder`). An unknown cluster name gets an empty
//! assignment, so the proxy does not wait for it. Every endpoint carries Istio's endpoint metadata
//! ([`lb_endpoint_metadata`]: the auto-mTLS match, and `istio.workload` with the endpoint's cluster id).

use std::{borrow::Cow, collections::BTreeMap, sync::Arc};

use envoy_types::pb::{
    envoy::config::{
        core::v3::{HealthStatus as EnvoyHealth, Locality, Metadata},
        endpoint::v3::{
            ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
        },
    },
    google::protobuf::{Struct, Value, value::Kind},
};
use model::service::{Endpoint, HealthStatus, Labels, Resolution, labels_match};

use prost::Message;

use crate::{
    Snapshot,
    built::Built,
    cache::{AssignmentKey, Encoded, EncodedResource, LocalityKey},
    convert::{address, is_ip, u32v},
    locality,
    naming::{TrafficDirection, parse_cluster_name},
};
use model::{Finding, Severity, push::ProxyContext};

fn locality_of(label: &str) -> Locality {
    let mut parts = label.splitn(3, '/');
    Locality {
        region: parts.next().unwrap_or("").to_string(),
        zone: parts.next().unwrap_or("").to_string(),
        sub_zone: parts.next().unwrap_or("").to_string(),
    }
}

/// Whether a cluster's assignment carries its unhealthy (not ready) endpoints, as `UNHEALTHY`: Istio's
/// `supportsUnhealthyEndpoints` with its defaults (`PILOT_AUTO_SEND_UNHEALTHY_ENDPOINTS` true,
/// `PILOT_SEND_UNHEALTHY_ENDPOINTS` false). Always for a service with a `trafficDistribution` (Envoy
/// needs the health to spill over between zones); otherwise unless the outlier detection that applies
/// to `port` and `subset` of `rule` sets `minHealthPercent` above 0, since Envoy's panic threshold
/// would then send traffic to them. The cluster's panic threshold is 0 otherwise
/// (`crate::cluster`), so Envoy never balances onto them; they only count in its host totals.
pub(crate) fn sends_unhealthy(
    rule: Option<&api::networking::destination_rule::DestinationRule>,
    port: u32,
    subset: &str,
    traffic_distribution: model::service::TrafficDistribution,
) -> bool {
    if traffic_distribution != model::service::TrafficDistribution::Any {
        return true;
    }
    let outlier = rule.and_then(|r| locality::lb_policy_for(r, port, subset).0);
    outlier.is_none_or(|o| o.min_health_percent <= 0)
}

/// The labels istio-proxy's canonical service name is read from, in order (Istio's
/// `kubelabels.CanonicalService`); the workload name when none is set.
const CANONICAL_NAME_LABELS: [&str; 3] = ["service.istio.io/canonical-name", "app.kubernetes.io/name", "app"];
/// The labels the canonical revision is read from, in order; `latest` when none is set.
const CANONICAL_REVISION_LABELS: [&str; 3] =
    ["service.istio.io/canonical-revision", "app.kubernetes.io/version", "version"];

/// istio-proxy's compressed telemetry label of an endpoint (Istio's `AppendLbEndpointMetadata`,
/// filter metadata `istio.workload`): `WORKLOAD;NAMESPACE;CANONICAL_NAME;CANONICAL_REVISION;CLUSTER`.
/// The canonical name and revision come from the workload's labels (see
/// [`CANONICAL_NAME_LABELS`], [`CANONICAL_REVISION_LABELS`]); a revision `latest` is written empty, as
/// Istio does not send the default.
pub(crate) fn workload_label(workload: &str, namespace: &str, labels: &Labels, cluster: &str) -> String {
    let first = |keys: &[&str]| keys.iter().find_map(|k| labels.get(*k)).map(String::as_str);
    let name = first(&CANONICAL_NAME_LABELS).unwrap_or(workload);
    let revision = first(&CANONICAL_REVISION_LABELS).filter(|r| *r != "latest").unwrap_or("");
    format!("{workload};{namespace};{name};{revision};{cluster}")
}

/// An endpoint's metadata as Istio writes it (`AppendLbEndpointMetadata`): the auto-mTLS match for
/// `tls_mode` when given ([`crate::mtls::endpoint_tls_metadata`]; `None`: not sent to this proxy) and
/// `istio.workload` = `workload` ([`workload_label`]), which istio-proxy's telemetry reads (upstream
/// Envoy ignores it).
pub(crate) fn lb_endpoint_metadata(tls_mode: Option<&str>, workload: String) -> Metadata {
    let mut metadata = tls_mode.and_then(crate::mtls::endpoint_tls_metadata).unwrap_or_default();
    let value = Value { kind: Some(Kind::StringValue(workload)) };
    metadata.filter_metadata.insert(
        ISTIO_METADATA_KEY.to_string(),
        Struct { fields: [(WORKLOAD_KEY.to_string(), value)].into() },
    );
    metadata
}

/// The filter-metadata namespace of Istio's own endpoint metadata.
const ISTIO_METADATA_KEY: &str = "istio";
/// The field of [`ISTIO_METADATA_KEY`] holding [`workload_label`].
const WORKLOAD_KEY: &str = "workload";

/// Groups `endpoints` by locality into Envoy's shape. `dns` allows host names as addresses (STRICT_DNS
/// and LOGICAL_DNS clusters); otherwise an endpoint whose address is not an IP or a Unix socket is left
/// out and reported against `resource`. `unhealthy` keeps unhealthy endpoints, as `UNHEALTHY`
/// ([`sends_unhealthy`]); terminating ones are always left out. `tls_metadata` (None: never) says per endpoint whether it gets
/// the auto-mTLS match metadata ([`crate::mtls::endpoint_tls_metadata`]; only endpoints labelled
/// `security.istio.io/tlsMode: istio` carry it).
pub(crate) fn locality_lb_endpoints<'a>(
    endpoints: impl IntoIterator<Item = &'a Endpoint>,
    dns: bool,
    unhealthy: bool,
    tls_metadata: Option<&dyn Fn(&Endpoint) -> bool>,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> Vec<LocalityLbEndpoints> {
    locality_groups(endpoints, dns, unhealthy, tls_metadata, resource, findings).0
}

/// [`locality_lb_endpoints`] with each group's endpoints, in the same order (`members[i][j]` belongs
/// to `groups[i].lb_endpoints[j]`): what split-horizon EDS and failover priority read.
pub(crate) fn locality_groups<'a>(
    endpoints: impl IntoIterator<Item = &'a Endpoint>,
    dns: bool,
    unhealthy: bool,
    tls_metadata: Option<&dyn Fn(&Endpoint) -> bool>,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> (Vec<LocalityLbEndpoints>, Vec<Vec<&'a Endpoint>>) {
    let mut by_locality: BTreeMap<&str, (u32, Vec<LbEndpoint>, Vec<&'a Endpoint>)> = BTreeMap::new();
    for ep in endpoints {
        let health = match ep.health_status {
            HealthStatus::Healthy => EnvoyHealth::Healthy,
            HealthStatus::Unknown => EnvoyHealth::Unknown,
            HealthStatus::Draining => EnvoyHealth::Draining,
            HealthStatus::Unhealthy if unhealthy => EnvoyHealth::Unhealthy,
            HealthStatus::Unhealthy | HealthStatus::Terminating => continue,
        };
        let addr = ep.first_address();
        let usable = !addr.is_empty()
            && !addr.contains('*')
            && (dns || is_ip(addr) || addr.starts_with(model::service::UNIX_ADDRESS_PREFIX));
        if !usable {
            findings.push(Finding {
                severity: Severity::Dropped,
                config: None,
                path: String::new(),
                resource: resource.to_string(),
                message: format!(
                    "endpoint address {addr:?} is not an IP address or Unix socket; endpoint left out"
                ),
            });
            continue;
        }
        let weight = ep.load_balancing_weight();
        let entry = by_locality.entry(ep.locality.label.as_str()).or_default();
        entry.0 = entry.0.saturating_add(weight);
        let tls_mode = tls_metadata.is_some_and(|f| f(ep)).then_some(ep.tls_mode.as_str());
        let workload = workload_label(&ep.workload_name, &ep.namespace, &ep.labels, &ep.locality.cluster_id);
        entry.1.push(LbEndpoint {
            metadata: Some(lb_endpoint_metadata(tls_mode, workload)),
            health_status: health as i32,
            load_balancing_weight: Some(u32v(weight)),
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
                address: Some(address(addr, ep.endpoint_port)),
                ..Default::default()
            })),
        });
        entry.2.push(ep);
    }
    by_locality
        .into_iter()
        .map(|(label, (weight, lb_endpoints, members))| {
            let group = LocalityLbEndpoints {
                locality: Some(locality_of(label)),
                lb_endpoints,
                load_balancing_weight: Some(u32v(weight.max(1))),
                ..Default::default()
            };
            (group, members)
        })
        .unzip()
}

/// What a cluster's assignment is made of: the snapshot's endpoint list of the service port (`None`:
/// the port has none), the subset's labels, whether unhealthy endpoints are sent ([`sends_unhealthy`]),
/// the service's resolution, and the locality load balancing that ranks the endpoints for the proxy
/// (`None`: none applies).
struct ClusterSource<'p, 'q> {
    endpoints: Option<&'p Arc<[Arc<Endpoint>]>>,
    subset: Option<Labels>,
    unhealthy: bool,
    resolution: Resolution,
    locality: Option<LocalityRanking<'q>>,
    networks: NetworkSource<'q>,
}

/// What split-horizon EDS needs of a cluster: the proxy's network when any network gateway is known
/// (`None`: the filter does not apply), and whether the cluster is an `AUTO_PASSTHROUGH` SNI-DNAT
/// cluster (`outbound_.PORT_.SUBSET_.HOST`, mTLS endpoints only).
#[derive(Clone, Copy)]
struct NetworkSource<'q> {
    proxy_network: Option<&'q str>,
    /// The IP families of the proxy's addresses, `(IPv4, IPv6)`.
    ip_families: (bool, bool),
    sni_dnat: bool,
}

impl NetworkSource<'_> {
    fn key(&self) -> Option<(String, bool, bool)> {
        self.proxy_network.map(|n| (n.to_string(), self.ip_families.0, self.ip_families.1))
    }
}

/// The IP families of `ips`, `(IPv4, IPv6)` (Istio's `Proxy.SupportsIPv4` / `SupportsIPv6`).
fn ip_families(ips: &[String]) -> (bool, bool) {
    let parsed: Vec<std::net::IpAddr> = ips.iter().filter_map(|ip| ip.parse().ok()).collect();
    (parsed.iter().any(std::net::IpAddr::is_ipv4), parsed.iter().any(std::net::IpAddr::is_ipv6))
}

/// A proxy-relative ranking of a cluster's endpoints: the DestinationRule it comes from (kept alive
/// for the setting it borrows), whether the cluster has outlier detection, the service's traffic
/// distribution, and the proxy's locality and labels.
struct LocalityRanking<'q> {
    rule: Option<Arc<model::push::IndexedDestinationRule>>,
    port: u32,
    subset: &'q str,
    traffic_distribution: model::service::TrafficDistribution,
    locality: &'q model::push::node::Locality,
    labels: &'q Labels,
}

impl LocalityRanking<'_> {
    /// The setting and whether the cluster has outlier detection.
    fn setting<'s>(&'s self, push: &'s Snapshot) -> Option<(locality::LbSetting<'s>, bool)> {
        let (outlier, lb) = self.rule.as_deref().map_or((false, None), |r| {
            let (outlier, lb) = locality::lb_policy_for(&r.rule, self.port, self.subset);
            (outlier.is_some(), lb)
        });
        let setting = locality::effective_setting(push.mesh(), lb, self.traffic_distribution)?;
        setting.changes_assignment(outlier).then_some((setting, outlier))
    }

    /// The cache key part: what the ranking depends on.
    fn key(&self, push: &Snapshot) -> Option<LocalityKey> {
        let (setting, outlier) = self.setting(push)?;
        Some(LocalityKey {
            rule: self.rule.as_ref().map_or(0, |r| Arc::as_ptr(r) as usize),
            outlier_detection: outlier,
            locality: self.locality.clone(),
            labels: setting
                .failover_priority()
                .iter()
                .map(|k| self.labels.get(k.split('=').next().unwrap_or(k)).cloned())
                .collect(),
        })
    }
}

impl ClusterSource<'_, '_> {
    fn endpoints(&self) -> impl Iterator<Item = &Endpoint> {
        self.endpoints
            .into_iter()
            .flat_map(|l| l.iter())
            .filter(|e| self.subset.as_ref().is_none_or(|l| labels_match(l, &e.labels)))
            .map(AsRef::as_ref)
    }
}

/// The source of a cluster's endpoints, or `None` for a name that is not an outbound cluster of a
/// service the proxy sees.
fn cluster_source<'p, 'q>(
    push: &'p Snapshot,
    proxy: &'q ProxyContext,
    name: &'q str,
) -> Option<ClusterSource<'p, 'q>> {
    let (key, sni_dnat) = match parse_cluster_name(name) {
        Some(key) => (key, false),
        None => (crate::naming::parse_sni_dnat_cluster_name(name)?, true),
    };
    if key.direction != TrafficDirection::Outbound {
        return None;
    }
    let scope = push.sidecar_scope(proxy);
    let service = scope.service(key.host)?;
    service.port_by_number(key.port)?;
    let dr = push.destination_rule(proxy, service);
    let subset: Option<Labels> = if key.subset.is_empty() {
        None
    } else {
        Some(dr.as_ref()?.rule.subsets.iter().find(|s| s.name == key.subset)?.labels.clone())
    };
    let unhealthy =
        sends_unhealthy(dr.as_deref().map(|r| &r.rule), key.port, key.subset, service.traffic_distribution);
    let ranking = LocalityRanking {
        rule: dr,
        port: key.port,
        subset: key.subset,
        traffic_distribution: service.traffic_distribution,
        locality: &proxy.locality,
        labels: &proxy.labels,
    };
    Some(ClusterSource {
        // Cluster-local services: only the proxy's own cluster (`model::push::cluster_local`).
        endpoints: push.endpoint_list_seen_from(
            &service.hostname,
            &service.namespace,
            key.port,
            proxy.cluster_id(),
        ),
        subset,
        unhealthy,
        resolution: service.resolution,
        locality: ranking.setting(push).is_some().then_some(ranking),
        networks: NetworkSource {
            proxy_network: push.network_gateways().is_multi_network().then(|| proxy.network()),
            ip_families: ip_families(&proxy.ips),
            sni_dnat,
        },
    })
}

/// Whether an endpoint's own workload accepts mutual TLS on its port: its effective
/// PeerAuthentication (namespace, labels, port-level) is not `DISABLE`. Istio drops the endpoint's
/// `tlsMode: istio` match metadata otherwise, so auto mTLS sends plaintext to it.
/// Only endpoints labelled `tlsMode: istio` are looked up (the others carry no metadata anyway).
pub(crate) fn endpoint_accepts_mtls(push: &Snapshot, ep: &Endpoint) -> bool {
    ep.tls_mode != model::service::TLS_MODE_ISTIO
        || push.workload_mtls_mode(&ep.namespace, &ep.labels, ep.endpoint_port)
            != model::push::authn::MtlsMode::Disable
}

/// Whether `proxy` gets the auto-mTLS match metadata on endpoints (sidecars and routers with
/// workload certificates; never proxyless gRPC).
fn wants_tls_metadata(proxy: &ProxyContext) -> bool {
    proxy.has_workload_certificates() && !proxy.proxyless_grpc
}

fn assignment_of(
    push: &Snapshot,
    name: &str,
    source: Option<&ClusterSource<'_, '_>>,
    tls_metadata: bool,
    findings: &mut Vec<Finding>,
) -> ClusterLoadAssignment {
    let endpoints = match source {
        Some(source) => {
            let accepts_mtls = |ep: &Endpoint| endpoint_accepts_mtls(push, ep);
            let tls_metadata = tls_metadata.then_some(&accepts_mtls as &dyn Fn(&Endpoint) -> bool);
            let (mut groups, members) = locality_groups(
                source.endpoints(),
                source.resolution.is_dns(),
                source.unhealthy,
                tls_metadata,
                name,
                findings,
            );
            let members = split_horizon(push, source.networks, tls_metadata.is_some(), &mut groups, members);
            if let Some(ranking) = &source.locality
                && let Some((setting, outlier)) = ranking.setting(push)
            {
                let labels: Vec<Vec<&Labels>> = members
                    .iter()
                    .map(|m| m.iter().map(|e| e.map_or(&*NO_LABELS, |e| &*e.labels)).collect())
                    .collect();
                let view = locality::ProxyView { locality: ranking.locality, labels: ranking.labels };
                locality::apply_to_assignment(&mut groups, &labels, view, &setting, outlier);
            }
            groups
        }
        None => Vec::new(),
    };
    ClusterLoadAssignment { cluster_name: name.to_string(), endpoints, ..Default::default() }
}

/// Labels of gateway endpoints for failover priority (istiod gives them only topology labels).
static NO_LABELS: std::sync::LazyLock<Labels> = std::sync::LazyLock::new(Labels::new);

/// Split-horizon EDS on a cluster's groups ([`crate::split_horizon::by_network`]) when the proxy sees
/// network gateways, then for SNI-DNAT clusters the mTLS-only filter (istiod's
/// `BuildClusterLoadAssignment`: `EndpointsByNetworkFilter`, then `EndpointsWithMTLSFilter` for
/// `IsDNSSrvSubsetKey` names). An endpoint takes mTLS when it is labelled `tlsMode: istio` and its
/// workload's PeerAuthentication does not disable it (istiod's `checkMtlsEnabled`); its network is its
/// own, else the one the mesh networks give its address and cluster. Returns the members, `None` for
/// gateway endpoints.
fn split_horizon<'a>(
    push: &'a Snapshot,
    networks: NetworkSource<'_>,
    tls_metadata: bool,
    groups: &mut [LocalityLbEndpoints],
    members: Vec<Vec<&'a Endpoint>>,
) -> Vec<Vec<Option<&'a Endpoint>>> {
    let mut members: Vec<Vec<Option<&Endpoint>>> =
        members.into_iter().map(|m| m.into_iter().map(Some).collect()).collect();
    let mtls =
        |ep: &Endpoint| ep.tls_mode == model::service::TLS_MODE_ISTIO && endpoint_accepts_mtls(push, ep);
    if let Some(network) = networks.proxy_network {
        let mesh_networks = &push.mesh().mesh_networks;
        let view = crate::split_horizon::NetworkView {
            network,
            ip_families: networks.ip_families,
            gateways: push.network_gateways(),
            tls_metadata,
        };
        crate::split_horizon::by_network(groups, &mut members, &view, |ep: &'a Endpoint| {
            crate::split_horizon::EndpointFacts {
                network: if ep.network.is_empty() {
                    mesh_networks.network_for(ep.first_address(), &ep.locality.cluster_id).unwrap_or("")
                } else {
                    &ep.network
                },
                cluster: &ep.locality.cluster_id,
                mtls: mtls(ep),
            }
        });
    }
    if networks.sni_dnat {
        crate::split_horizon::mtls_only(groups, &mut members, |ep: &Endpoint| mtls(ep));
    }
    members
}

/// The assignment for one cluster name (empty for an unknown name).
pub fn load_assignment(
    push: &Snapshot,
    proxy: &ProxyContext,
    name: &str,
    findings: &mut Vec<Finding>,
) -> ClusterLoadAssignment {
    let source = cluster_source(push, proxy, name);
    assignment_of(push, name, source.as_ref(), wants_tls_metadata(proxy), findings)
}

/// The names EDS answers for `proxy`: `names`, or with none, one per EDS cluster the CDS generator
/// makes for the proxy.
fn requested_names<'n>(push: &Snapshot, proxy: &ProxyContext, names: &'n [String]) -> Cow<'n, [String]> {
    if names.is_empty() {
        Cow::Owned(crate::cluster::eds_cluster_names(push, proxy))
    } else {
        Cow::Borrowed(names)
    }
}

/// EDS for `proxy`: one assignment per name in `names`, in that order; with no names, one per EDS
/// cluster the CDS generator makes for the proxy.
pub fn generate_endpoints(
    push: &Snapshot,
    proxy: &ProxyContext,
    names: &[String],
) -> Built<ClusterLoadAssignment> {
    let mut findings = Vec::new();
    let resources = requested_names(push, proxy, names)
        .iter()
        .map(|n| load_assignment(push, proxy, n, &mut findings))
        .collect();
    Built::new(resources, findings)
}

/// EDS for `proxy`, encoded ([`generate_endpoints`]'s assignments in protobuf wire format). The
/// assignment of a cluster the proxy sees is made once per config generation and endpoint list
/// ([`crate::cache::GenerationCache`]) and shared by every proxy that gets the same one, so a push to
/// many proxies encodes each assignment once (Istio's EDS cache, `pilot/pkg/xds/endpoints`). With
/// `known_only`, names that are not outbound clusters of a service the proxy sees are left out
/// instead of answered empty (a push: the proxy already had its answer for them, and a client watching
/// many unknown names must not cost work on every push).
pub fn generate_endpoints_encoded(
    push: &Snapshot,
    proxy: &ProxyContext,
    names: &[String],
    known_only: bool,
) -> Built<EncodedResource> {
    let mut findings = Vec::new();
    let tls_metadata = wants_tls_metadata(proxy);
    let mut out = Vec::new();
    for name in requested_names(push, proxy, names).iter() {
        let source = cluster_source(push, proxy, name);
        let encoded = match &source {
            Some(source @ ClusterSource { endpoints: Some(list), .. }) => {
                let key = AssignmentKey {
                    name: name.clone(),
                    endpoints: Arc::clone(list),
                    subset: source.subset.clone(),
                    unhealthy: source.unhealthy,
                    dns: source.resolution.is_dns(),
                    tls_metadata,
                    locality: source.locality.as_ref().and_then(|r| r.key(push)),
                    network: source.networks.key(),
                };
                let shared = push.assignment(key, || {
                    let mut found = Vec::new();
                    let cla = assignment_of(push, name, Some(source), tls_metadata, &mut found);
                    (cla.encode_to_vec(), found)
                });
                findings.extend(shared.1.iter().cloned());
                Arc::clone(&shared.0)
            }
            None if known_only => continue,
            source => {
                let cla = assignment_of(push, name, source.as_ref(), tls_metadata, &mut findings);
                Encoded::of(&cla)
            }
        };
        out.push(EncodedResource { name: name.clone(), encoded });
    }
    Built::new(out, findings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::service::Locality as ModelLocality;

    fn ep(addr: &str, locality: &str, weight: u32, health: HealthStatus) -> Endpoint {
        Endpoint {
            addresses: vec![addr.to_string()],
            endpoint_port: 8080,
            locality: ModelLocality { label: locality.to_string(), cluster_id: String::new() },
            lb_weight: weight,
            health_status: health,
            ..Default::default()
        }
    }

    #[test]
    fn the_workload_label_is_istiods_five_fields() {
        let labels = |l: &[(&str, &str)]| -> Labels {
            l.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        // Canonical name and revision from the first label present, in Istio's order.
        let full = labels(&[
            ("app", "a"),
            ("app.kubernetes.io/name", "k"),
            ("service.istio.io/canonical-name", "c"),
            ("version", "v1"),
            ("app.kubernetes.io/version", "2.0"),
        ]);
        assert_eq!(workload_label("w", "ns", &full, "west"), "w;ns;c;2.0;west");
        assert_eq!(workload_label("w", "ns", &labels(&[("app", "a")]), "west"), "w;ns;a;;west");
        // No labels: the workload's name; the default revision `latest` is not sent.
        assert_eq!(workload_label("w", "ns", &labels(&[("version", "latest")]), ""), "w;ns;w;;");
        // A gateway endpoint: its cluster only.
        assert_eq!(workload_label("", "", &Labels::new(), "east"), ";;;;east");
        let m = lb_endpoint_metadata(Some("istio"), "w;ns;w;;".into());
        assert_eq!(m.filter_metadata.len(), 2, "{m:?}");
        assert_eq!(lb_endpoint_metadata(None, String::new()).filter_metadata.len(), 1);
    }

    #[test]
    fn localities_get_summed_weights_and_unhealthy_endpoints_follow_the_cluster() {
        let eps = [
            ep("10.0.0.1", "r1/z1", 0, HealthStatus::Healthy),
            ep("10.0.0.2", "r1/z1", 3, HealthStatus::Healthy),
            ep("10.0.0.3", "r2", 0, HealthStatus::Draining),
            ep("10.0.0.4", "r2", 0, HealthStatus::Unhealthy),
            ep("10.0.0.5", "r2", 0, HealthStatus::Terminating),
            ep("a.example.com", "r2", 0, HealthStatus::Healthy),
        ];
        let mut findings = Vec::new();
        let out = locality_lb_endpoints(&eps, false, false, None, "c", &mut findings);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].locality.as_ref().unwrap().zone, "z1");
        assert_eq!(out[0].load_balancing_weight.as_ref().unwrap().value, 4);
        assert_eq!(out[1].lb_endpoints.len(), 1);
        assert_eq!(out[1].lb_endpoints[0].health_status, EnvoyHealth::Draining as i32);
        assert_eq!(findings.len(), 1, "the host name is reported for an EDS cluster");
        // Sent unhealthy endpoints come as UNHEALTHY; terminating ones never.
        let out = locality_lb_endpoints(&eps, false, true, None, "c", &mut findings);
        let health: Vec<i32> = out[1].lb_endpoints.iter().map(|e| e.health_status).collect();
        assert_eq!(health, [EnvoyHealth::Draining as i32, EnvoyHealth::Unhealthy as i32]);
        let dns = locality_lb_endpoints(&eps[5..], true, true, None, "c", &mut findings);
        assert_eq!(dns[0].lb_endpoints.len(), 1);
    }

    #[test]
    fn unhealthy_endpoints_are_sent_unless_outlier_detection_sets_min_health_percent() {
        use api::networking::destination_rule::{DestinationRule, OutlierDetection, Subset, TrafficPolicy};
        use model::service::TrafficDistribution;
        let policy = |min: i32| TrafficPolicy {
            outlier_detection: Some(OutlierDetection { min_health_percent: min, ..Default::default() }),
            ..Default::default()
        };
        let rule = DestinationRule {
            traffic_policy: Some(policy(50)),
            subsets: vec![Subset {
                name: "v2".into(),
                traffic_policy: Some(policy(0)),
                ..Default::default()
            }],
            ..Default::default()
        };
        let any = TrafficDistribution::Any;
        assert!(sends_unhealthy(None, 80, "", any));
        assert!(sends_unhealthy(Some(&DestinationRule::default()), 80, "", any));
        assert!(!sends_unhealthy(Some(&rule), 80, "", any));
        // The subset's own outlier detection replaces the destination's.
        assert!(sends_unhealthy(Some(&rule), 80, "v2", any));
        // A traffic distribution needs the health, whatever the rule says.
        assert!(sends_unhealthy(Some(&rule), 80, "", TrafficDistribution::PreferSameZone));
    }
}
