//! `WorkloadEntry` (`networking.istio.io`): a non-Kubernetes workload (VM, bare metal) as a mesh
//! endpoint; also the endpoint type of `ServiceEntry.endpoints` and `WorkloadGroup.template`.
//!
//! Follows `networking/v1alpha3/workload_entry.proto` of the Istio API (package
//! `istio.networking.v1alpha3`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wkt::is_default;

/// One network endpoint of a workload, with its ports, labels and placement.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadEntry {
    /// IP address or DNS name (DNS resolution only) without port, or `unix:///absolute/path`; when
    /// empty, `network` is required.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub address: String,
    /// Service port name → port on this endpoint (1–65535); takes precedence over `targetPort`. Not
    /// for `unix://` addresses.
    #[prost(btree_map = "string, uint32", tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub ports: BTreeMap<String, u32>,
    /// Labels of the endpoint.
    #[prost(btree_map = "string, string", tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub labels: BTreeMap<String, String>,
    /// The L3 network the endpoint is in (endpoints of one network reach each other directly).
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub network: String,
    /// Failure-domain locality, `region/zone/subzone…` separated by `/`.
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub locality: String,
    /// Load-balancing weight; higher weights get proportionally more traffic.
    #[prost(uint32, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub weight: u32,
    /// Service account of the workload (in the config's namespace), used for its identity.
    #[prost(string, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub service_account: String,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prost::Message;

    use super::*;
    use crate::{de::from_node, yaml::parse_documents};

    fn spec(text: &str) -> (WorkloadEntry, Vec<String>) {
        let root = parse_documents(text).remove(0).unwrap().root.unwrap();
        let (v, unknown) = from_node::<WorkloadEntry>(&root, "spec").unwrap();
        (v, unknown.into_iter().map(|u| u.path).collect())
    }

    const WE: &str = r#"
address: 2.2.2.2
ports:
  http: 8080
  grpc: "9090"
labels:
  app: details-legacy
  instance-id: vm1
network: vm-network
locality: us-east1/us-east1-b
weight: 10
serviceAccount: details-legacy
"#;

    #[test]
    fn reads_yaml() {
        let (we, unknown) = spec(WE);
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(we.address, "2.2.2.2");
        assert_eq!(we.ports, BTreeMap::from([("grpc".to_string(), 9090), ("http".to_string(), 8080)]));
        assert_eq!(we.labels["instance-id"], "vm1");
        assert_eq!(we.network, "vm-network");
        assert_eq!(we.locality, "us-east1/us-east1-b");
        assert_eq!(we.weight, 10);
        assert_eq!(we.service_account, "details-legacy");

        let (_, unknown) = spec("address: 1.1.1.1\nserviceaccount: x\n");
        assert_eq!(unknown, vec!["spec.serviceaccount"]);
        let (we, unknown) = spec("service_account: x\n");
        assert!(unknown.is_empty());
        assert_eq!(we.service_account, "x");
    }

    #[test]
    fn protobuf_round_trip_and_wire() {
        let (we, _) = spec(WE);
        assert_eq!(WorkloadEntry::decode(&*we.encode_to_vec()).unwrap(), we);

        // ports = 2 (0x12) entry { key = 1 (0x0a) "h", value = 2 (0x10) 80 }; weight = 6 (0x30) 5;
        // service_account = 7 (0x3a) "s".
        let we = WorkloadEntry {
            ports: BTreeMap::from([("h".to_string(), 80)]),
            weight: 5,
            service_account: "s".into(),
            ..Default::default()
        };
        assert_eq!(we.encode_to_vec(), vec![0x12, 5, 0x0a, 1, b'h', 0x10, 80, 0x30, 5, 0x3a, 1, b's']);
    }

    #[test]
    fn json_output() {
        let (we, _) = spec(WE);
        let v = serde_json::to_value(&we).unwrap();
        assert_eq!(v["serviceAccount"], "details-legacy");
        assert_eq!(v["ports"], serde_json::json!({"grpc": 9090, "http": 8080}));
        let v =
            serde_json::to_value(WorkloadEntry { address: "1.1.1.1".into(), ..Default::default() }).unwrap();
        assert_eq!(v, serde_json::json!({"address": "1.1.1.1"}));
    }
}
