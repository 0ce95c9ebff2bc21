//! `ServiceEntry` (`networking.istio.io`): adds services (hosts, ports, endpoints) to Istio's
//! service registry, e.g. external APIs or VMs.
//!
//! Follows `networking/v1alpha3/service_entry.proto` of the Istio API (package
//! `istio.networking.v1alpha3`). The enums nested in `ServiceEntry` ([`Location`], [`Resolution`]) live
//! in this module, which is the `service_entry` module prost-build would generate for them.

use serde::{Deserialize, Serialize};

use crate::wkt::is_default;

/// A service added to the mesh's service registry.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceEntry {
    /// Host names of the service (a leading `*.` wildcard is allowed, `*` alone is not). Required.
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub hosts: Vec<String>,
    /// Virtual IPs or CIDR prefixes of the service; empty identifies traffic by port alone.
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub addresses: Vec<String>,
    /// Ports of the service (exactly one for Unix socket endpoints).
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub ports: Vec<ServicePort>,
    /// Whether the service is inside or outside the mesh (default `MESH_EXTERNAL`).
    #[prost(enumeration = "Location", tag = "4")]
    #[serde(with = "Location", skip_serializing_if = "is_default")]
    pub location: i32,
    /// How the proxy finds the endpoints' IP addresses (default `NONE`).
    #[prost(enumeration = "Resolution", tag = "5")]
    #[serde(with = "Resolution", skip_serializing_if = "is_default")]
    pub resolution: i32,
    /// Endpoints of the service; at most one of `endpoints` and `workloadSelector` may be set.
    #[prost(message, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub endpoints: Vec<super::workload_entry::WorkloadEntry>,
    /// Selects pods and WorkloadEntries (same namespace) as endpoints; `MESH_INTERNAL` only.
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub workload_selector: Option<super::sidecar::WorkloadSelector>,
    /// Namespaces the service is visible to (`.` = own, `*` = all); empty exports everywhere.
    #[prost(string, repeated, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub export_to: Vec<String>,
    /// Subject alternative names the server certificate must match one of.
    #[prost(string, repeated, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub subject_alt_names: Vec<String>,
}

crate::proto_enum! {
    /// Whether a ServiceEntry's service is part of the mesh.
    pub enum Location {
        /// Outside the mesh (e.g. an external API); no mTLS to it.
        MeshExternal = 0 => "MESH_EXTERNAL",
        /// Part of the mesh (e.g. VMs added to it).
        MeshInternal = 1 => "MESH_INTERNAL",
    }
}

crate::proto_enum! {
    /// How the proxy resolves a ServiceEntry's endpoint addresses.
    pub enum Resolution {
        /// Connections are already resolved; forward to the original destination IP.
        None = 0 => "NONE",
        /// Use the static IPs of `endpoints`.
        Static = 1 => "STATIC",
        /// Resolve the endpoints' (or the hosts') DNS names asynchronously, using all addresses.
        Dns = 2 => "DNS",
        /// Resolve DNS names, connecting to the first address returned only.
        DnsRoundRobin = 3 => "DNS_ROUND_ROBIN",
        /// Resolve the Host header / SNI name at request time (wildcard hosts only).
        DynamicDns = 4 => "DYNAMIC_DNS",
    }
}

/// A port of a ServiceEntry's service.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServicePort {
    /// Port number (1–65535). Required.
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub number: u32,
    /// Protocol: `HTTP`, `HTTPS`, `GRPC`, `HTTP2`, `MONGO`, `TCP` or `TLS`.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub protocol: String,
    /// Name of the port. Required.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Port on the endpoints that receives the traffic; 0 means the same as `number`.
    #[prost(uint32, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_port: u32,
}

/// The `status` of a ServiceEntry: the addresses Istio assigned to it.
///
/// The proto also has the common Istio status fields `conditions` (1) and `validationMessages` (2),
/// whose types (`istio.meta.v1alpha1.IstioCondition`, `istio.analysis.v1alpha1.AnalysisMessageBase`,
/// with `google.protobuf.Timestamp`) are not part of this crate yet; protobuf decoding skips them and
/// JSON reading reports them as unknown.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceEntryStatus {
    /// The object generation this status describes.
    #[prost(int64, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub observed_generation: i64,
    /// Addresses assigned to the ServiceEntry's hosts.
    #[prost(message, repeated, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub addresses: Vec<ServiceEntryAddress>,
}

/// An address assigned to a ServiceEntry, with the host it belongs to.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceEntryAddress {
    /// The IP address, e.g. `240.240.0.1`.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub value: String,
    /// The host the address was assigned for.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub host: String,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prost::Message;

    use super::*;
    use crate::{de::from_node, yaml::parse_documents};

    fn spec<T: serde::de::DeserializeOwned>(text: &str) -> (T, Vec<String>) {
        let root = parse_documents(text).remove(0).unwrap().root.unwrap();
        let (v, unknown) = from_node::<T>(&root, "spec").unwrap();
        (v, unknown.into_iter().map(|u| u.path).collect())
    }

    const SE: &str = r#"
hosts:
- mymongodb.somedomain
addresses:
- 192.192.192.192/24
ports:
- number: 27018
  name: mongodb
  protocol: MONGO
  targetPort: 27017
location: MESH_INTERNAL
resolution: STATIC
endpoints:
- address: 2.2.2.2
- address: 3.3.3.3
  ports:
    mongodb: 27019
  labels:
    version: v2
  locality: us/east
  weight: 3
  network: net1
  serviceAccount: mongo
exportTo: ["."]
subjectAltNames: ["spiffe://cluster.local/ns/ns1/sa/mongo"]
"#;

    #[test]
    fn reads_yaml() {
        let (se, unknown) = spec::<ServiceEntry>(SE);
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(se.hosts, vec!["mymongodb.somedomain"]);
        assert_eq!(se.addresses, vec!["192.192.192.192/24"]);
        assert_eq!(
            se.ports,
            vec![ServicePort {
                number: 27018,
                protocol: "MONGO".into(),
                name: "mongodb".into(),
                target_port: 27017
            }]
        );
        assert_eq!(se.location, Location::MeshInternal as i32);
        assert_eq!(se.resolution, Resolution::Static as i32);
        let ep = &se.endpoints[1];
        assert_eq!(ep.ports, BTreeMap::from([("mongodb".to_string(), 27019)]));
        assert_eq!(ep.labels["version"], "v2");
        assert_eq!((ep.weight, ep.network.as_str()), (3, "net1"));
        assert_eq!(ep.service_account, "mongo");
        assert_eq!(se.export_to, vec!["."]);
        assert!(se.workload_selector.is_none());

        let (se, unknown) = spec::<ServiceEntry>(
            "hosts: [a.b]\nworkloadSelector:\n  labels: {app: x}\n  matchLabels: {app: x}\nendpoints:\n- adress: 1.1.1.1\n",
        );
        assert_eq!(se.workload_selector.unwrap().labels["app"], "x");
        assert_eq!(unknown, vec!["spec.workloadSelector.matchLabels", "spec.endpoints[0].adress"]);
    }

    #[test]
    fn bad_enum_names_path() {
        let root = parse_documents("resolution: DNS_RR\n").remove(0).unwrap().root.unwrap();
        let err = from_node::<ServiceEntry>(&root, "spec").unwrap_err();
        assert_eq!(err.path, "spec.resolution");
        assert!(err.message.contains("DYNAMIC_DNS"), "{err}");
    }

    #[test]
    fn protobuf_round_trip_and_wire() {
        let (se, _) = spec::<ServiceEntry>(SE);
        assert_eq!(ServiceEntry::decode(&*se.encode_to_vec()).unwrap(), se);

        // resolution = 5 (0x28) DNS = 2; workload_selector = 9 (0x4a) { labels = 1 (0x0a) entry
        // { key = 1 (0x0a) "a", value = 2 (0x12) "b" } }.
        let se = ServiceEntry {
            resolution: Resolution::Dns as i32,
            workload_selector: Some(super::super::sidecar::WorkloadSelector {
                labels: BTreeMap::from([("a".to_string(), "b".to_string())]),
            }),
            ..Default::default()
        };
        assert_eq!(se.encode_to_vec(), vec![0x28, 2, 0x4a, 8, 0x0a, 6, 0x0a, 1, b'a', 0x12, 1, b'b']);

        let status = ServiceEntryStatus {
            observed_generation: 2,
            addresses: vec![ServiceEntryAddress { value: "1".into(), host: "h".into() }],
        };
        // observed_generation = 3 (0x18); addresses = 10 (0x52) { value = 1, host = 2 }.
        assert_eq!(status.encode_to_vec(), vec![0x18, 2, 0x52, 6, 0x0a, 1, b'1', 0x12, 1, b'h']);
        assert_eq!(ServiceEntryStatus::decode(&*status.encode_to_vec()).unwrap(), status);
    }

    #[test]
    fn json_output() {
        let (se, _) = spec::<ServiceEntry>(SE);
        let v = serde_json::to_value(&se).unwrap();
        assert_eq!(v["location"], "MESH_INTERNAL");
        assert_eq!(v["resolution"], "STATIC");
        assert_eq!(v["ports"][0]["targetPort"], 27017);
        assert_eq!(v["subjectAltNames"][0], "spiffe://cluster.local/ns/ns1/sa/mongo");
        assert_eq!(v["exportTo"][0], ".");
        assert_eq!(v["endpoints"][0], serde_json::json!({"address": "2.2.2.2"}));
        assert_eq!(v["endpoints"][1]["serviceAccount"], "mongo");
        // Defaults (MESH_EXTERNAL, NONE, empty lists) are omitted.
        let v = serde_json::to_value(ServiceEntry { hosts: vec!["x".into()], ..Default::default() }).unwrap();
        assert_eq!(v, serde_json::json!({"hosts": ["x"]}));
    }
}
