//! The resource names a stream follows, read with light protobuf decodes: only the fields needed
//! (prost skips the rest), never a full Envoy message.
//!
//! - Cluster → its EDS name: `eds_cluster_config.service_name`, else the cluster name, when the
//!   discovery type is EDS (Envoy's rule);
//! - Listener → the RDS route configuration names of its HTTP connection managers (filter chains and
//!   the default filter chain).

use envoy_types::pb::google::protobuf::Any;
use prost::Message;

/// Envoy's `Cluster.DiscoveryType.EDS`.
const EDS: i32 = 3;
const HCM_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

#[derive(Clone, PartialEq, Message)]
struct ClusterLite {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(int32, optional, tag = "2")]
    discovery_type: Option<i32>,
    #[prost(message, optional, tag = "3")]
    eds_cluster_config: Option<EdsConfigLite>,
}

#[derive(Clone, PartialEq, Message)]
struct EdsConfigLite {
    #[prost(string, tag = "2")]
    service_name: String,
}

#[derive(Clone, PartialEq, Message)]
struct ListenerLite {
    #[prost(message, repeated, tag = "3")]
    filter_chains: Vec<FilterChainLite>,
    #[prost(message, optional, tag = "25")]
    default_filter_chain: Option<FilterChainLite>,
}

#[derive(Clone, PartialEq, Message)]
struct FilterChainLite {
    #[prost(message, repeated, tag = "3")]
    filters: Vec<FilterLite>,
}

#[derive(Clone, PartialEq, Message)]
struct FilterLite {
    #[prost(message, optional, tag = "4")]
    typed_config: Option<Any>,
}

#[derive(Clone, PartialEq, Message)]
struct HcmLite {
    #[prost(message, optional, tag = "3")]
    rds: Option<RdsLite>,
}

#[derive(Clone, PartialEq, Message)]
struct RdsLite {
    #[prost(string, tag = "2")]
    route_config_name: String,
}

/// The EDS name a cluster asks for, if it is an EDS cluster. `None` also for bytes that do not decode.
pub fn eds_name(cluster: &[u8]) -> Option<String> {
    let c = ClusterLite::decode(cluster).ok()?;
    if c.discovery_type != Some(EDS) {
        return None;
    }
    match c.eds_cluster_config {
        Some(e) if !e.service_name.is_empty() => Some(e.service_name),
        _ => Some(c.name),
    }
}

/// The route configuration names a listener's HTTP connection managers fetch over RDS, appended to
/// `out`. Bytes that do not decode add nothing.
pub fn rds_names(listener: &[u8], out: &mut Vec<String>) {
    let Ok(l) = ListenerLite::decode(listener) else { return };
    for chain in l.filter_chains.iter().chain(l.default_filter_chain.as_ref()) {
        for f in &chain.filters {
            let Some(any) = &f.typed_config else { continue };
            if any.type_url != HCM_TYPE {
                continue;
            }
            if let Ok(HcmLite { rds: Some(rds) }) = HcmLite::decode(any.value.as_slice())
                && !rds.route_config_name.is_empty()
            {
                out.push(rds.route_config_name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::{
        config::{
            cluster::v3::{
                Cluster,
                cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig},
            },
            listener::v3::{Filter, FilterChain, Listener, filter::ConfigType},
        },
        extensions::filters::network::http_connection_manager::v3::{
            HttpConnectionManager, Rds, http_connection_manager::RouteSpecifier,
        },
    };

    use super::*;

    #[test]
    fn eds_names_follow_envoy() {
        let mut c = Cluster {
            name: "outbound|80||a".into(),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
            ..Default::default()
        };
        assert_eq!(eds_name(&c.encode_to_vec()).as_deref(), Some("outbound|80||a"));
        c.eds_cluster_config = Some(EdsClusterConfig { service_name: "svc".into(), ..Default::default() });
        assert_eq!(eds_name(&c.encode_to_vec()).as_deref(), Some("svc"));
        c.cluster_discovery_type = Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32));
        assert_eq!(eds_name(&c.encode_to_vec()), None);
        c.cluster_discovery_type = None;
        assert_eq!(eds_name(&c.encode_to_vec()), None);
    }

    #[test]
    fn rds_names_come_from_connection_managers() {
        let hcm = |name: &str| Filter {
            name: "envoy.filters.network.http_connection_manager".into(),
            config_type: Some(ConfigType::TypedConfig(Any {
                type_url: HCM_TYPE.into(),
                value: HttpConnectionManager {
                    route_specifier: Some(RouteSpecifier::Rds(Rds {
                        route_config_name: name.into(),
                        ..Default::default()
                    })),
                    ..Default::default()
                }
                .encode_to_vec(),
            })),
        };
        let l = Listener {
            filter_chains: vec![FilterChain { filters: vec![hcm("80")], ..Default::default() }],
            default_filter_chain: Some(FilterChain { filters: vec![hcm("8080")], ..Default::default() }),
            ..Default::default()
        };
        let mut out = Vec::new();
        rds_names(&l.encode_to_vec(), &mut out);
        assert_eq!(out, ["80", "8080"]);
    }
}
