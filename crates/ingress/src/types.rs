//! The Kubernetes objects read: `networking.k8s.io/v1` Ingress and IngressClass, with the fields Istio's
//! converter and status writer use. Deserialized from Kubernetes JSON (what the API server returns, or
//! a YAML document turned into JSON); unknown fields are ignored, missing ones take Kubernetes' zero
//! values. Field names follow the Kubernetes API (`ingressClassName`, `defaultBackend`, …).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The part of `metadata` read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (empty for cluster-scoped kinds).
    pub namespace: String,
    /// `metadata.labels`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `metadata.creationTimestamp`, RFC 3339 in UTC with second precision as the API server writes it
    /// (so that text order is time order); `None` when absent (objects from files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// `metadata.resourceVersion` (empty when absent).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// `metadata.generation` (0 when absent).
    #[serde(skip_serializing_if = "is_zero")]
    pub generation: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A `networking.k8s.io/v1` Ingress.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Ingress {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    pub spec: IngressSpec,
    /// `status`.
    pub status: IngressStatus,
}

/// `Ingress.spec`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressSpec {
    /// The IngressClass to use (`spec.ingressClassName`).
    pub ingress_class_name: Option<String>,
    /// The backend for requests no rule matches; Istio ignores it (it would conflict with any
    /// explicit VirtualService for `*`).
    pub default_backend: Option<IngressBackend>,
    /// TLS settings: each entry becomes an HTTPS server of port 443.
    pub tls: Vec<IngressTls>,
    /// Host rules.
    pub rules: Vec<IngressRule>,
}

/// One `spec.tls` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressTls {
    /// Hosts of the certificate (empty: `*`).
    pub hosts: Vec<String>,
    /// The Secret with the certificate (in the Ingress's namespace); Istio's `credentialName`.
    pub secret_name: String,
}

/// One `spec.rules` entry: a host and its HTTP paths.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressRule {
    /// The host (empty: every host, `*`).
    pub host: String,
    /// The paths; a rule without them is ignored.
    pub http: Option<HttpIngressRuleValue>,
}

/// `rules[].http`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpIngressRuleValue {
    /// The paths, in the order written.
    pub paths: Vec<HttpIngressPath>,
}

/// One path of a rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpIngressPath {
    /// The path (`/api`, or the legacy forms `/api/*`, `/api.*`).
    pub path: String,
    /// `Exact`, `Prefix` or `ImplementationSpecific` (`None`: as `ImplementationSpecific`).
    pub path_type: Option<String>,
    /// Where matching requests go.
    pub backend: IngressBackend,
}

/// A backend: a Service port (resource backends are not supported by Istio).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressBackend {
    /// The Service backend.
    pub service: Option<IngressServiceBackend>,
}

/// `backend.service`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressServiceBackend {
    /// Service name, in the Ingress's namespace.
    pub name: String,
    /// The port, by number or by name.
    pub port: ServiceBackendPort,
}

/// `backend.service.port`: `number`, or `name` resolved against the Service's ports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceBackendPort {
    /// Port name (used when `number` is 0).
    pub name: String,
    /// Port number (0: unset).
    pub number: i32,
}

/// `Ingress.status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressStatus {
    /// `status.loadBalancer`.
    pub load_balancer: IngressLoadBalancerStatus,
}

/// `status.loadBalancer`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressLoadBalancerStatus {
    /// The addresses the Ingress is reachable at.
    pub ingress: Vec<IngressLoadBalancerIngress>,
}

/// One address: an IP or a host name.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressLoadBalancerIngress {
    /// Host name (empty for an IP).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// IP address (empty for a host name).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ip: String,
}

/// A `networking.k8s.io/v1` IngressClass (cluster-scoped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressClass {
    /// Metadata (the class name is `metadata.name`).
    pub metadata: ObjectMeta,
    /// `spec`.
    pub spec: IngressClassSpec,
}

/// `IngressClass.spec`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressClassSpec {
    /// The controller implementing the class; Istio's is `istio.io/ingress-controller`.
    pub controller: String,
}

impl Ingress {
    /// Reads an Ingress from Kubernetes JSON.
    ///
    /// # Errors
    /// A field of the wrong type, as `Ingress NAMESPACE/NAME: FIELD…: message`.
    pub fn from_json(value: &serde_json::Value) -> Result<Ingress, String> {
        serde_json::from_value(value.clone()).map_err(|e| format!("Ingress {}: {e}", object_ref(value)))
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.metadata.namespace, self.metadata.name)
    }
}

impl IngressClass {
    /// Reads an IngressClass from Kubernetes JSON.
    ///
    /// # Errors
    /// A field of the wrong type, as `IngressClass NAME: message`.
    pub fn from_json(value: &serde_json::Value) -> Result<IngressClass, String> {
        serde_json::from_value(value.clone()).map_err(|e| format!("IngressClass {}: {e}", object_ref(value)))
    }
}

fn object_ref(value: &serde_json::Value) -> String {
    let meta = &value["metadata"];
    let name = meta["name"].as_str().unwrap_or("<unnamed>");
    match meta["namespace"].as_str() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}
