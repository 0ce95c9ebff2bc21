//! `istio.type.v1beta1`: selectors shared by security, telemetry, extensions and ProxyConfig.
//!
//! Follows `type/v1beta1/selector.proto` of the Istio API.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wkt::is_default;

/// Selects the workloads (pods/VMs) a policy applies to, by labels, within the policy's namespace.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadSelector {
    /// Labels a workload must carry (all of them) to be selected. Keys and values contain no `*`.
    #[prost(btree_map = "string, string", tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub match_labels: BTreeMap<String, String>,
}

/// A port by number (1–65535).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortSelector {
    /// The port number. Required.
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub number: u32,
}

crate::proto_enum! {
    /// Whether a selector applies to a workload as client, server or both.
    pub enum WorkloadMode {
        /// Interpreted by the field that uses it.
        Undefined = 0 => "UNDEFINED",
        /// The workload as the source of traffic (and gateways).
        Client = 1 => "CLIENT",
        /// The workload as the destination of traffic.
        Server = 2 => "SERVER",
        /// Either direction.
        ClientAndServer = 3 => "CLIENT_AND_SERVER",
    }
}

/// A reference to a Kubernetes resource a policy attaches to (Gateway API `targetRef` style).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyTargetReference {
    /// API group of the target (empty for the core group).
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub group: String,
    /// Kind of the target, e.g. `Gateway` or `Service`. Required.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub kind: String,
    /// Name of the target. Required.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Namespace of the target; must be empty (cross-namespace references are not supported).
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub namespace: String,
}
