//! `Sidecar` (`networking.istio.io`): the listeners and reachable hosts of the sidecar proxies of
//! selected workloads.
//!
//! Follows `networking/v1alpha3/sidecar.proto` of the Istio API (package `istio.networking.v1alpha3`).
//! [`WorkloadSelector`] here is the networking one (a plain `labels` map), also used by
//! `ServiceEntry`, `EnvoyFilter`, `Gateway` and `DestinationRule`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wkt::is_default;

/// Configures the sidecar proxy of the selected workloads: which inbound ports it exposes, which
/// services it can reach and how it treats unknown outbound traffic.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sidecar {
    /// Workloads this Sidecar applies to; unset applies it to every workload in the namespace.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub workload_selector: Option<WorkloadSelector>,
    /// Inbound listeners; unset lets Istio derive them from the workload's services.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub ingress: Vec<IstioIngressListener>,
    /// Outbound listeners and the hosts each one exposes; unset inherits the namespace/global default.
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub egress: Vec<IstioEgressListener>,
    /// Connection limits for every inbound listener (overridable per ingress port); same shape as
    /// a DestinationRule's `connectionPool`.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub inbound_connection_pool: Option<super::destination_rule::ConnectionPoolSettings>,
    /// How outbound traffic to unknown destinations is handled (Istio's default is `ALLOW_ANY`).
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub outbound_traffic_policy: Option<OutboundTrafficPolicy>,
}

/// An inbound listener of the sidecar.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IstioIngressListener {
    /// The port the listener accepts traffic on. Required.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: Option<SidecarPort>,
    /// IPv4/IPv6 address to bind to (no Unix sockets); empty lets Istio choose.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub bind: String,
    /// How traffic reaches this listener.
    #[prost(enumeration = "CaptureMode", tag = "3")]
    #[serde(with = "CaptureMode", skip_serializing_if = "is_default")]
    pub capture_mode: i32,
    /// Where accepted traffic is forwarded: `127.0.0.1:PORT`, `[::1]:PORT`, `0.0.0.0:PORT`,
    /// `[::]:PORT` or `unix:///path`.
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub default_endpoint: String,
    /// TLS termination for traffic from outside the mesh (`SIMPLE` or `MUTUAL` modes only).
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub tls: Option<super::gateway::ServerTlsSettings>,
    /// Connection limits for this port; overrides `inboundConnectionPool` and DestinationRule settings.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub connection_pool: Option<super::destination_rule::ConnectionPoolSettings>,
}

/// An outbound listener of the sidecar and the hosts reachable through it.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IstioEgressListener {
    /// The listener port (number 0 for a Unix socket bind); unset derives ports from the hosts.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: Option<SidecarPort>,
    /// IP address or `unix://` socket to bind to; needs `port` when set. Defaults to 127.0.0.1 with
    /// capture mode `NONE`.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub bind: String,
    /// How traffic reaches this listener (`DEFAULT` or `NONE` for Unix socket binds).
    #[prost(enumeration = "CaptureMode", tag = "3")]
    #[serde(with = "CaptureMode", skip_serializing_if = "is_default")]
    pub capture_mode: i32,
    /// Hosts exposed, as `namespace/dnsName` (`*`, `.`, `~` namespaces; `~ns/…` excludes). Required.
    #[prost(string, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub hosts: Vec<String>,
}

/// Selects workloads by labels (the `networking.istio.io` selector, JSON `labels`).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadSelector {
    /// Labels a workload must all carry to be selected, within the config's namespace; no `*`.
    #[prost(btree_map = "string, string", tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub labels: BTreeMap<String, String>,
}

/// What the sidecar does with outbound traffic to destinations it does not know.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutboundTrafficPolicy {
    /// Allow or drop unknown outbound traffic (the proto default is `REGISTRY_ONLY`).
    #[prost(enumeration = "outbound_traffic_policy::Mode", tag = "1")]
    #[serde(with = "outbound_traffic_policy::Mode", skip_serializing_if = "is_default")]
    pub mode: i32,
    /// Egress proxy unknown traffic is sent to in `ALLOW_ANY` mode; its host must be imported in `egress`.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub egress_proxy: Option<super::virtual_service::Destination>,
}

/// Items nested in [`OutboundTrafficPolicy`].
pub mod outbound_traffic_policy {
    crate::proto_enum! {
        /// Treatment of outbound traffic to unknown destinations.
        pub enum Mode {
            /// Drop it: destinations must be registered (e.g. with a ServiceEntry). Not a security control.
            RegistryOnly = 0 => "REGISTRY_ONLY",
            /// Let it through (with reduced features such as observability).
            AllowAny = 1 => "ALLOW_ANY",
        }
    }
}

crate::proto_enum! {
    /// How traffic is captured into a listener bound to an IP.
    pub enum CaptureMode {
        /// Whatever the environment defines.
        Default = 0 => "DEFAULT",
        /// Redirected with iptables.
        Iptables = 1 => "IPTABLES",
        /// Not captured: the application connects to the listener explicitly.
        None = 2 => "NONE",
    }
}

/// A port of a sidecar listener.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SidecarPort {
    /// Port number (0 for Unix sockets).
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub number: u32,
    /// Protocol: `HTTP`, `HTTPS`, `GRPC`, `HTTP2`, `MONGO`, `TCP` or `TLS`.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub protocol: String,
    /// Name of the port.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Deprecated: has no effect; kept so old configs still read.
    #[prost(uint32, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_port: u32,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prost::Message;

    use super::*;
    use crate::{de::from_node, yaml::parse_documents};

    fn spec<T: serde::de::DeserializeOwned>(text: &str) -> (T, Vec<String>) {
        let doc = parse_documents(text).remove(0).unwrap();
        let root = doc.root.unwrap();
        let (v, unknown) = from_node::<T>(&root, "spec").unwrap();
        (v, unknown.into_iter().map(|u| u.path).collect())
    }

    const SIDECAR: &str = r#"
workloadSelector:
  labels:
    app: ratings
ingress:
- port:
    number: 9080
    protocol: HTTP
    name: somename
  bind: 0.0.0.0
  captureMode: IPTABLES
  defaultEndpoint: unix:///var/run/someuds.sock
egress:
- port:
    number: 3306
    protocol: MYSQL
    name: egressmysql
  captureMode: NONE
  bind: 127.0.0.1
  hosts:
  - "*/mysql.foo.com"
- hosts:
  - "istio-system/*"
  - "~prod-us2/*"
outboundTrafficPolicy:
  mode: REGISTRY_ONLY
"#;

    #[test]
    fn reads_yaml() {
        let (s, unknown) = spec::<Sidecar>(SIDECAR);
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(
            s.workload_selector.as_ref().unwrap().labels,
            BTreeMap::from([("app".to_string(), "ratings".to_string())])
        );
        let ing = &s.ingress[0];
        assert_eq!(
            ing.port,
            Some(SidecarPort {
                number: 9080,
                protocol: "HTTP".into(),
                name: "somename".into(),
                target_port: 0
            })
        );
        assert_eq!(ing.capture_mode, CaptureMode::Iptables as i32);
        assert_eq!(ing.default_endpoint, "unix:///var/run/someuds.sock");
        assert_eq!(s.egress[0].capture_mode, CaptureMode::None as i32);
        assert_eq!(s.egress[0].bind, "127.0.0.1");
        assert_eq!(s.egress[1].hosts, vec!["istio-system/*", "~prod-us2/*"]);
        assert!(s.egress[1].port.is_none());
        let otp = s.outbound_traffic_policy.unwrap();
        assert_eq!(otp.mode, outbound_traffic_policy::Mode::RegistryOnly as i32);

        let (_, unknown) = spec::<Sidecar>(
            "egress:\n- hosts: [a/b]\n  port: {number: 80, protocl: HTTP}\noutboundTrafficPolicy: {mode: ALLOW_ANY, egressProxy: {}}\n",
        );
        assert_eq!(unknown, vec!["spec.egress[0].port.protocl"]);
    }

    #[test]
    fn snake_case_and_bad_enum() {
        let (s, unknown) = spec::<Sidecar>("outbound_traffic_policy: {mode: ALLOW_ANY}\n");
        assert!(unknown.is_empty());
        assert_eq!(s.outbound_traffic_policy.unwrap().mode, 1);
        let root = parse_documents("ingress:\n- captureMode: NOPE\n").remove(0).unwrap().root.unwrap();
        let err = from_node::<Sidecar>(&root, "spec").unwrap_err();
        assert_eq!(err.path, "spec.ingress[0].captureMode");
    }

    #[test]
    fn protobuf_round_trip_and_wire() {
        let (s, _) = spec::<Sidecar>(SIDECAR);
        assert_eq!(Sidecar::decode(&*s.encode_to_vec()).unwrap(), s);

        // outbound_traffic_policy = 4 (0x22), len 2, { mode = 1 (0x08) ALLOW_ANY = 1 }.
        let s = Sidecar {
            outbound_traffic_policy: Some(OutboundTrafficPolicy { mode: 1, egress_proxy: None }),
            ..Default::default()
        };
        assert_eq!(s.encode_to_vec(), vec![0x22, 2, 0x08, 1]);

        // egress = 3 (0x1a) { capture_mode = 3 (0x18) NONE = 2, hosts = 4 (0x22) "a/*" }.
        let s = Sidecar {
            egress: vec![IstioEgressListener {
                capture_mode: CaptureMode::None as i32,
                hosts: vec!["a/*".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(s.encode_to_vec(), vec![0x1a, 7, 0x18, 2, 0x22, 3, b'a', b'/', b'*']);

        // ingress = 2 (0x12) { port = 1 (0x0a) { number = 1 (0x08) 80, target_port = 4 (0x20) 8080 } }.
        let s = Sidecar {
            ingress: vec![IstioIngressListener {
                port: Some(SidecarPort { number: 80, target_port: 8080, ..Default::default() }),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(s.encode_to_vec(), vec![0x12, 7, 0x0a, 5, 0x08, 80, 0x20, 0x90, 0x3f]);
    }

    #[test]
    fn json_output() {
        let (s, _) = spec::<Sidecar>(SIDECAR);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["workloadSelector"]["labels"]["app"], "ratings");
        assert_eq!(v["ingress"][0]["captureMode"], "IPTABLES");
        assert_eq!(v["ingress"][0]["defaultEndpoint"], "unix:///var/run/someuds.sock");
        // Defaults are omitted: REGISTRY_ONLY (0) mode, targetPort 0, unset egress port.
        assert_eq!(v["outboundTrafficPolicy"], serde_json::json!({}));
        assert!(v["ingress"][0]["port"].get("targetPort").is_none());
        assert_eq!(v["egress"][1], serde_json::json!({"hosts": ["istio-system/*", "~prod-us2/*"]}));
        assert!(v.get("inboundConnectionPool").is_none());
    }

    /// Every valid corpus document of ServiceEntry, WorkloadEntry, WorkloadGroup, Sidecar, EnvoyFilter
    /// and ProxyConfig decodes with no error and no unknown field.
    #[test]
    fn corpus_decodes() {
        use super::super::{
            envoy_filter::EnvoyFilter, proxy_config::ProxyConfig, service_entry::ServiceEntry,
            workload_entry::WorkloadEntry, workload_group::WorkloadGroup,
        };
        use crate::{
            Kind,
            test_corpus::{Scope, check_corpus},
        };
        assert!(check_corpus::<ServiceEntry>(Kind::ServiceEntry, Scope::Valid, &[]) > 0);
        assert!(check_corpus::<WorkloadEntry>(Kind::WorkloadEntry, Scope::Valid, &[]) > 0);
        assert!(check_corpus::<WorkloadGroup>(Kind::WorkloadGroup, Scope::Valid, &[]) > 0);
        assert!(check_corpus::<Sidecar>(Kind::Sidecar, Scope::Valid, &[]) > 0);
        assert!(check_corpus::<EnvoyFilter>(Kind::EnvoyFilter, Scope::Valid, &[]) > 0);
        assert!(check_corpus::<ProxyConfig>(Kind::ProxyConfig, Scope::Valid, &[]) > 0);
    }
}
