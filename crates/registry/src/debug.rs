//! JSON for the registry debug endpoints, in Istio's shapes (`pilot/pkg/xds/debug.go`).
//!
//! - [`registryz`] → `/debug/registryz`: the array Istio writes from `ServiceDiscovery.Services()`,
//!   each service as Go's `encoding/json` writes a `model.Service` (Go field names where the struct
//!   has no JSON tag, `null` for empty maps and lists without `omitempty`). Istio makes one `Service`
//!   per (host, address) of a ServiceEntry; a meshpilot service with several addresses is written
//!   as that many entries, one per `defaultAddress`.
//! - [`endpointz`] → `/debug/endpointz` (Istio: "obsolete, use endpointShardz", same body):
//!   `{hostname: {namespace: {"Shards": {"<provider>/<cluster>": [endpoint…]}, "ServiceAccounts":
//!   {account: {}}}}}`.
//! - [`registry_warnings`] → meshpilot's addition, `{"warnings": [{kind, namespace, name, hostname?,
//!   message}]}`: the input problems the registries found (Istio only logs them). Serve it beside the
//!   Istio shapes (e.g. `/debug/registryz?warnings`), since Istio's tools expect a bare array there.

use std::sync::Arc;

use model::service::{Endpoint, EndpointShard, Labels, RegistryWarning, Service};
use serde_json::{Map, Value, json};

/// Go's zero `time.Time`, which Istio writes for a service without creation time.
const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

fn labels_or_null(labels: &Labels) -> Value {
    if labels.is_empty() { Value::Null } else { json!(labels) }
}

/// One `model.Service` as Istio writes it (Go's `encoding/json` of `pilot/pkg/model/service.go`'s
/// `Service`), with `default_address` as its `defaultAddress` (e.g. [`Service::default_address`]).
pub fn service_json(service: &Service, default_address: &str) -> Value {
    let export_to = if service.export_to.is_empty() {
        Value::Null
    } else {
        Value::Object(service.export_to.iter().map(|e| (e.as_str().to_string(), json!({}))).collect())
    };
    let passthrough = if service.passthrough_target_ports.is_empty() {
        Value::Null
    } else {
        Value::Object(
            service.passthrough_target_ports.iter().map(|(k, v)| (k.to_string(), json!(v))).collect(),
        )
    };
    let mut attributes = Map::new();
    attributes.insert("ServiceRegistry".into(), json!(service.registry.as_str()));
    attributes.insert("Name".into(), json!(service.name));
    attributes.insert("Namespace".into(), json!(service.namespace));
    attributes.insert("Labels".into(), labels_or_null(&service.labels));
    attributes.insert("ExportTo".into(), export_to);
    attributes.insert("Visibility".into(), json!(0));
    attributes
        .insert("LabelSelectors".into(), service.label_selector.as_ref().map_or(Value::Null, labels_or_null));
    attributes.insert("Aliases".into(), Value::Null);
    attributes.insert("ClusterExternalAddresses".into(), json!({"Addresses": null}));
    attributes.insert("ClusterExternalPorts".into(), Value::Null);
    attributes.insert("PassthroughTargetPorts".into(), passthrough);
    attributes.insert("Type".into(), json!(""));
    attributes.insert("ExternalName".into(), json!(service.external_name.as_deref().unwrap_or_default()));
    attributes.insert("NodeLocal".into(), json!(false));
    attributes.insert("TrafficDistribution".into(), json!(0));
    attributes.insert("ObjectName".into(), json!(service.object_name));
    attributes.insert("DNSConnectStrategy".into(), json!(0));
    attributes.insert("PublishNotReadyAddresses".into(), json!(false));

    let mut out = Map::new();
    out.insert("Attributes".into(), Value::Object(attributes));
    if !service.ports.is_empty() {
        let ports: Vec<Value> = service
            .ports
            .iter()
            .map(|p| {
                let mut port = Map::new();
                if !p.name.is_empty() {
                    port.insert("name".into(), json!(p.name));
                }
                port.insert("port".into(), json!(p.port));
                port.insert("protocol".into(), json!(p.protocol.as_str()));
                Value::Object(port)
            })
            .collect();
        out.insert("ports".into(), Value::Array(ports));
    }
    if !service.service_accounts.is_empty() {
        out.insert("serviceAccounts".into(), json!(service.service_accounts));
    }
    out.insert("creationTime".into(), json!(service.creation_time.as_deref().unwrap_or(GO_ZERO_TIME)));
    out.insert("hostname".into(), json!(service.hostname));
    out.insert("clusterVIPs".into(), json!({"Addresses": null}));
    out.insert("defaultAddress".into(), json!(default_address));
    out.insert("Resolution".into(), json!(service.resolution.istio_number()));
    out.insert("MeshExternal".into(), json!(service.mesh_external));
    out.insert("ResourceVersion".into(), json!(""));
    Value::Object(out)
}

/// `/debug/registryz`: the services as Istio's array of `model.Service` (see the module docs).
pub fn registryz(services: &[Arc<Service>]) -> Value {
    let mut out = Vec::with_capacity(services.len());
    for service in services {
        if service.addresses.is_empty() {
            out.push(service_json(service, service.default_address()));
        } else {
            out.extend(service.addresses.iter().map(|a| service_json(service, a)));
        }
    }
    Value::Array(out)
}

/// One `IstioEndpoint` as Istio writes it.
pub fn endpoint_json(endpoint: &Endpoint) -> Value {
    json!({
        "Labels": labels_or_null(&endpoint.labels),
        "Addresses": endpoint.addresses,
        "ServicePortName": endpoint.service_port_name,
        "LegacyClusterPortKey": endpoint.legacy_cluster_port_key,
        "ServiceAccount": endpoint.service_account,
        "Network": endpoint.network,
        "Locality": {"Label": endpoint.locality.label, "ClusterID": endpoint.locality.cluster_id},
        "EndpointPort": endpoint.endpoint_port,
        "LbWeight": endpoint.lb_weight,
        "TLSMode": endpoint.tls_mode,
        "Namespace": endpoint.namespace,
        "WorkloadName": endpoint.workload_name,
        "HostName": "",
        "SubDomain": "",
        "HealthStatus": endpoint.health_status.istio_number(),
        "SendUnhealthyEndpoints": false,
        "NodeName": "",
    })
}

/// `/debug/endpointz`: endpoints by hostname, namespace and shard, with the service accounts (see
/// the module docs). Shards of the same service from several registries are merged under it.
pub fn endpointz(shards: &[EndpointShard]) -> Value {
    let mut out = Map::new();
    for shard in shards {
        let by_namespace = out.entry(shard.hostname.clone()).or_insert_with(|| json!({}));
        let Some(by_namespace) = by_namespace.as_object_mut() else { continue };
        let entry = by_namespace
            .entry(shard.namespace.clone())
            .or_insert_with(|| json!({"Shards": {}, "ServiceAccounts": {}}));
        if let Some(shards) = entry.get_mut("Shards").and_then(Value::as_object_mut) {
            shards.insert(
                shard.shard.to_string(),
                Value::Array(shard.endpoints.iter().map(|e| endpoint_json(e)).collect()),
            );
        }
        if let Some(accounts) = entry.get_mut("ServiceAccounts").and_then(Value::as_object_mut) {
            for account in &shard.service_accounts {
                accounts.insert(account.clone(), json!({}));
            }
        }
    }
    Value::Object(out)
}

/// The registries' input problems: `{"warnings": [{"kind", "namespace", "name", "hostname"?,
/// "message"}]}`, in the order given.
pub fn registry_warnings(warnings: &[RegistryWarning]) -> Value {
    let list: Vec<Value> = warnings
        .iter()
        .map(|w| {
            let mut item = Map::new();
            item.insert("kind".into(), json!(w.object.kind.as_str()));
            item.insert("namespace".into(), json!(w.object.namespace));
            item.insert("name".into(), json!(w.object.name));
            if let Some(hostname) = &w.hostname {
                item.insert("hostname".into(), json!(hostname));
            }
            item.insert("message".into(), json!(w.message));
            Value::Object(item)
        })
        .collect();
    json!({ "warnings": list })
}
