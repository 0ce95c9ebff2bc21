//! istiod's debug types over xDS (`pilot/pkg/xds/statusgen.go`, `debuggen.go`): what `istioctl
//! proxy-status`, `istioctl x version` and `istioctl x internal-debug` ask the control plane
//! on its xDS ports.
//!
//! | type | resource names | answer |
//! |---|---|---|
//! | `istio.io/debug/syncz` | none | one `envoy.service.status.v3.ClientConfig` per proxy, with the response's `control_plane` set |
//! | `istio.io/debug/config_dump` | exactly one proxy id (`pod.namespace`) | the Envoy admin `ConfigDump` sections of that proxy ([`config_dump`]) |
//! | `istio.io/debug` | exactly one debug path (`syncz`, `config_dump?proxyID=…`) | one resource whose bytes are the HTTP handler's body |
//!
//! The engine hands these types to the [`NetworkingSource`](crate::NetworkingSource), which answers a
//! request (never a push) through the [`DebugGenerator`] installed on the
//! [`DiscoveryServer`](crate::DiscoveryServer) ([`DiscoveryServer::set_debug_generator`](crate::DiscoveryServer::set_debug_generator)):
//! the HTTP crate implements it over the same data as its `/debug/*` handlers, with the same
//! authorisation (docs/SECURITY.md). Without a verified identity (the plaintext port) the stream ends
//! with `Unauthenticated` "authentication required", as istiod's `ENABLE_DEBUG_ENDPOINT_AUTH`.

use std::{
    collections::BTreeSet,
    sync::{Arc, OnceLock},
};

use envoy_types::pb::{
    envoy::admin::v3::{
        BootstrapConfigDump, ClustersConfigDump, ConfigDump, EcdsConfigDump, EndpointsConfigDump,
        ListenersConfigDump, RoutesConfigDump, ScopedRoutesConfigDump, SecretsConfigDump,
        clusters_config_dump::DynamicCluster,
        ecds_config_dump::EcdsFilterConfig,
        endpoints_config_dump::DynamicEndpointConfig,
        listeners_config_dump::{DynamicListener, DynamicListenerState},
        routes_config_dump::DynamicRouteConfig,
    },
    envoy::{
        admin::v3::UpdateFailureState,
        config::core::v3::Node,
        service::status::v3::{ClientConfig, ConfigStatus, client_config::GenericXdsConfig},
    },
    google::protobuf::{Any, Struct, Timestamp, Value as ProtoValue, value::Kind},
};
use model::push::{ProxyContext, node::Proxy};
use networking::Snapshot;
use prost::{Message, Name};
use xds::{ConnectionSnapshot, Generated, SourceError, TypeStatus, type_url};

use crate::source::generate_type;

/// One request for a debug type, as the engine received it.
#[derive(Debug)]
pub struct DebugRequest<'a> {
    /// The type ([`type_url::is_debug_type`]).
    pub type_url: &'a str,
    /// The requested resource names.
    pub names: &'a BTreeSet<String>,
    /// The requesting node, with the identities its caller proved (`verified_identities`; empty on
    /// the plaintext port).
    pub caller: &'a Proxy,
}

/// Answers the debug types (see the module docs). Implemented by the HTTP crate over its debug
/// handlers' data.
pub trait DebugGenerator: Send + Sync + 'static {
    /// The answer to `request`.
    ///
    /// # Errors
    /// [`SourceError::Unauthenticated`] without a verified identity, [`SourceError::Denied`] for a
    /// path the caller's namespace may not read, [`SourceError::InvalidRequest`] for a generic
    /// request without exactly one name: each ends the stream with its status, as istiod's.
    fn generate(&self, request: &DebugRequest<'_>) -> Result<Generated, SourceError>;
}

/// Where a [`DebugGenerator`] is installed after the sources are made (the HTTP crate's state is
/// built after the xDS servers): shared by the server and every [`NetworkingSource`](crate::NetworkingSource).
pub type DebugSlot = Arc<OnceLock<Arc<dyn DebugGenerator>>>;

/// Which sections [`config_dump`] fills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpOptions {
    /// Add the `EndpointsConfigDump` (istiod's `include_eds`; Envoy's admin `?include_eds`).
    pub include_eds: bool,
}

/// istiod's `connectionConfigDump`: what the proxy gets now from `push`, as Envoy's admin
/// `ConfigDump` (`envoy.admin.v3`), in Envoy's order: bootstrap (empty: the control plane does not
/// know the proxy's bootstrap), clusters, endpoints (with [`DumpOptions::include_eds`]), listeners,
/// scoped routes (empty), routes, secrets, ECDS filters. Every section carries `push`'s version.
///
/// Secrets: the section lists no secret. istiod puts the proxy's SDS secrets there, private keys
/// included; meshpilot never sends key material to a debug caller (docs/SECURITY.md).
///
/// The resources are generated exactly as the xDS server generates them (EnvoyFilter patches
/// included), so `istioctl proxy-status POD` can diff them against the proxy's own dump.
pub fn config_dump(push: &Snapshot, proxy: &ProxyContext, options: DumpOptions) -> ConfigDump {
    let version = push.version().to_string();
    let bodies = |type_url: &str| -> Vec<(String, Any)> {
        generate_type(push, proxy, type_url, &[], false)
            .map(|(resources, _)| resources.into_iter().map(|r| (r.name, r.body)).collect())
            .unwrap_or_default()
    };
    let clusters = ClustersConfigDump {
        version_info: version.clone(),
        dynamic_active_clusters: bodies(type_url::CLUSTER)
            .into_iter()
            .map(|(_, cluster)| DynamicCluster { cluster: Some(cluster), ..Default::default() })
            .collect(),
        ..Default::default()
    };
    let listeners = ListenersConfigDump {
        version_info: version.clone(),
        dynamic_listeners: bodies(type_url::LISTENER)
            .into_iter()
            .map(|(name, listener)| DynamicListener {
                name,
                active_state: Some(DynamicListenerState {
                    version_info: version.clone(),
                    listener: Some(listener),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let routes = RoutesConfigDump {
        dynamic_route_configs: bodies(type_url::ROUTE)
            .into_iter()
            .map(|(_, route)| DynamicRouteConfig {
                version_info: version.clone(),
                route_config: Some(route),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let ecds = EcdsConfigDump {
        ecds_filters: bodies(type_url::EXTENSION_CONFIG)
            .into_iter()
            .map(|(_, filter)| EcdsFilterConfig {
                version_info: version.clone(),
                ecds_filter: Some(filter),
                ..Default::default()
            })
            .collect(),
    };
    let mut configs = vec![pack(&BootstrapConfigDump::default()), pack(&clusters)];
    if options.include_eds {
        let endpoints = EndpointsConfigDump {
            dynamic_endpoint_configs: bodies(type_url::ENDPOINT)
                .into_iter()
                .map(|(_, assignment)| DynamicEndpointConfig {
                    version_info: version.clone(),
                    endpoint_config: Some(assignment),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        configs.push(pack(&endpoints));
    }
    configs.extend([
        pack(&listeners),
        pack(&ScopedRoutesConfigDump::default()),
        pack(&routes),
        pack(&SecretsConfigDump::default()),
        pack(&ecds),
    ]);
    ConfigDump { configs }
}

/// `dump` as JSON with Envoy's admin field names (`dynamic_active_clusters`, each `Any` expanded with
/// its `@type`), as Envoy's `/config_dump` and istiod's `/debug/config_dump` print it.
///
/// # Errors
/// A message when a packed resource is not an Envoy type this build knows (not expected).
pub fn config_dump_json(dump: &ConfigDump, pretty: bool) -> Result<Vec<u8>, String> {
    let pool = envoyfilter::descriptors::pool();
    let desc = pool
        .get_message_by_name(ConfigDump::full_name().as_str())
        .ok_or_else(|| "envoy.admin.v3.ConfigDump is not in the descriptor pool".to_string())?;
    let message = prost_reflect::DynamicMessage::decode(desc, dump.encode_to_vec().as_slice())
        .map_err(|e| format!("config dump: {e}"))?;
    let options = prost_reflect::SerializeOptions::new().use_proto_field_name(true);
    let mut out = Vec::new();
    let result = if pretty {
        let mut ser = serde_json::Serializer::pretty(&mut out);
        message.serialize_with_options(&mut ser, &options)
    } else {
        let mut ser = serde_json::Serializer::new(&mut out);
        message.serialize_with_options(&mut ser, &options)
    };
    result.map_err(|e| format!("config dump: {e}"))?;
    Ok(out)
}

/// Whether a connection is a debug client (`istioctl` asking a debug type) rather than a proxy:
/// it watches debug types only. istiod leaves out nodes without `PROXY_CONFIG` metadata ("probably
/// istioctl queries"); meshpilot keeps every node that asked for an xDS resource type, so Envoys
/// started without pilot-agent are listed too.
pub fn is_debug_client<N>(connection: &ConnectionSnapshot<N>) -> bool {
    !connection.types.is_empty() && connection.types.keys().all(|t| type_url::is_debug_type(t))
}

/// istiod's `debugSyncStatus`: `ERROR` when the last response was rejected, `NOT_SENT` before any
/// response, `SYNCED` when the last one sent was ACKed, else `STALE`.
pub fn config_status(t: &TypeStatus) -> ConfigStatus {
    if t.last_error.as_deref().is_some_and(|e| !e.is_empty()) {
        ConfigStatus::Error
    } else if t.nonce_sent.is_empty() {
        ConfigStatus::NotSent
    } else if t.nonce_sent == t.nonce_acked {
        ConfigStatus::Synced
    } else {
        ConfigStatus::Stale
    }
}

/// One proxy's `ClientConfig` in istiod's `istio.io/debug/syncz` answer: the node (id and metadata
/// `CLUSTER_ID`, `NAMESPACE`, `ISTIO_VERSION`) and per watched type its status and last send time
/// (and the rejection as `error_state`), sorted by type URL.
pub fn client_config(c: &ConnectionSnapshot<Proxy>) -> ClientConfig {
    let meta = &c.proxy.metadata;
    let mut fields = std::collections::BTreeMap::new();
    for (key, value) in [
        ("CLUSTER_ID", &meta.cluster_id),
        ("NAMESPACE", &c.proxy.config_namespace),
        ("ISTIO_VERSION", &meta.istio_version),
    ] {
        if !value.is_empty() {
            fields.insert(key.to_string(), ProtoValue { kind: Some(Kind::StringValue(value.clone())) });
        }
    }
    let generic_xds_configs = c
        .types
        .iter()
        .filter(|(url, _)| !type_url::is_debug_type(url))
        .map(|(url, t)| {
            let last_updated = t.last_send_time.map(timestamp);
            GenericXdsConfig {
                type_url: url.clone(),
                config_status: config_status(t) as i32,
                last_updated,
                error_state: t.last_error.as_ref().filter(|e| !e.is_empty()).map(|details| {
                    UpdateFailureState {
                        last_update_attempt: last_updated,
                        details: details.clone(),
                        ..Default::default()
                    }
                }),
                ..Default::default()
            }
        })
        .collect();
    ClientConfig {
        node: Some(Node {
            id: c.proxy.id.clone(),
            metadata: Some(Struct { fields: fields.into_iter().collect() }),
            ..Default::default()
        }),
        generic_xds_configs,
        ..Default::default()
    }
}

/// The `control_plane.identifier` istiod sets on its syncz answers (`IstioControlPlaneInstance` as
/// JSON: `{"Component":"istiod","ID":<id>,"Info":{"version":…,…}}`); `version` is meshpilot's, in
/// the `Info.version` `istioctl x version` prints as the control plane version.
pub fn control_plane_identifier(id: &str, version: &str) -> String {
    serde_json::json!({
        "Component": "istiod",
        "ID": id,
        "Info": {"version": version, "revision": "", "golang_version": "", "status": "", "tag": version},
    })
    .to_string()
}

fn timestamp(t: std::time::SystemTime) -> Timestamp {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Timestamp {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

fn pack<M: Message + Name>(message: &M) -> Any {
    Any { type_url: M::type_url(), value: message.encode_to_vec() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_status_is_istiods_debug_sync_status() {
        let sent = |sent: &str, acked: &str, error: Option<&str>| TypeStatus {
            nonce_sent: sent.into(),
            nonce_acked: acked.into(),
            last_error: error.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(config_status(&sent("", "", None)), ConfigStatus::NotSent);
        assert_eq!(config_status(&sent("n1", "n1", None)), ConfigStatus::Synced);
        assert_eq!(config_status(&sent("n2", "n1", None)), ConfigStatus::Stale);
        assert_eq!(config_status(&sent("n2", "n1", Some("bad cluster"))), ConfigStatus::Error);
        assert_eq!(config_status(&sent("n2", "n2", Some(""))), ConfigStatus::Synced);
    }

    #[test]
    fn control_plane_identifier_is_istiods_json() {
        let v: serde_json::Value =
            serde_json::from_str(&control_plane_identifier("istiod-0", "1.2.3")).unwrap();
        assert_eq!(v["Component"], "istiod");
        assert_eq!(v["ID"], "istiod-0");
        assert_eq!(v["Info"]["version"], "1.2.3");
    }
}
