//! Mesh networks (Istio's `MeshNetworks`: the `--networksConfig` file or the `istio` ConfigMap's
//! `meshNetworks` key): read and checked as istiod's `mesh.ParseMeshNetworks` does (strict protobuf
//! JSON, then `agent.ValidateMeshNetworks`); the checked JSON becomes `model::network::MeshNetworks`
//! (networks of endpoints, east-west gateways). The value in force is shown in the debug endpoints.
//!
//! ```yaml
//! networks:
//!   network1:
//!     endpoints: [{fromRegistry: Kubernetes}, {fromCidr: 10.0.0.0/8}]
//!     gateways: [{registryServiceName: istio-eastwestgateway.istio-system.svc.cluster.local, port: 15443}, {address: 1.2.3.4, port: 15443, locality: us-east1}]
//! ```

use serde_json::Value;

/// Reads mesh networks YAML (or JSON) into its JSON form, `{"networks": {…}}` (an empty document is
/// no networks, `{}`).
///
/// # Errors
/// Unreadable YAML, a field Istio's `MeshNetworks` does not have, a wrong type, two members of one
/// oneof, or a value `ValidateMeshNetworks` refuses (`fromCidr` not a CIDR, `fromRegistry` not a DNS
/// label, a gateway `registryServiceName` not an FQDN, `address` neither an IP nor a DNS name —
/// `RESOLVE_HOSTNAME_GATEWAYS` is true by default —, `port` not 1-65535). The message names the
/// field path, e.g. `networks.n1.gateways[0].port`.
pub fn parse_mesh_networks(text: &str) -> Result<Value, String> {
    let docs = api::yaml::parse_documents(text);
    let root = match docs.into_iter().next() {
        None => return Ok(Value::Object(Default::default())),
        Some(Err(e)) => return Err(format!("line {}: {}", e.mark.line, e.message)),
        Some(Ok(doc)) => doc.root.map(|n| n.to_json()).unwrap_or(Value::Null),
    };
    let root = match root {
        Value::Null => return Ok(Value::Object(Default::default())),
        Value::Object(map) => map,
        _ => return Err("mesh networks must be a YAML map".into()),
    };
    for (key, value) in &root {
        match key.as_str() {
            "networks" => {
                let networks = object(value, "networks")?;
                for (name, network) in networks {
                    check_network(network, &format!("networks.{name}"))?;
                }
            }
            other => return Err(format!("unknown field {other:?} in MeshNetworks")),
        }
    }
    Ok(Value::Object(root))
}

fn object<'a>(value: &'a Value, path: &str) -> Result<&'a serde_json::Map<String, Value>, String> {
    value.as_object().ok_or_else(|| format!("{path}: expected a map, got {value}"))
}

fn list<'a>(value: &'a Value, path: &str) -> Result<&'a Vec<Value>, String> {
    value.as_array().ok_or_else(|| format!("{path}: expected a list, got {value}"))
}

fn string<'a>(value: &'a Value, path: &str) -> Result<&'a str, String> {
    value.as_str().ok_or_else(|| format!("{path}: expected a string, got {value}"))
}

/// A field's value by its JSON name or its proto (snake_case) name, as protobuf JSON accepts both.
fn field<'a>(map: &'a serde_json::Map<String, Value>, json: &str, proto: &str) -> Option<&'a Value> {
    map.get(json).or_else(|| map.get(proto))
}

/// Fails on a key that is none of `allowed` (JSON and proto names).
fn known(map: &serde_json::Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), String> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("{path}: unknown field {k:?}")),
        None => Ok(()),
    }
}

fn check_network(network: &Value, path: &str) -> Result<(), String> {
    let network = object(network, path)?;
    known(network, &["endpoints", "gateways"], path)?;
    if let Some(endpoints) = network.get("endpoints") {
        for (i, endpoint) in list(endpoints, &format!("{path}.endpoints"))?.iter().enumerate() {
            let path = format!("{path}.endpoints[{i}]");
            let endpoint = object(endpoint, &path)?;
            known(endpoint, &["fromCidr", "from_cidr", "fromRegistry", "from_registry"], &path)?;
            match (field(endpoint, "fromCidr", "from_cidr"), field(endpoint, "fromRegistry", "from_registry"))
            {
                (Some(_), Some(_)) => return Err(format!("{path}: only one of fromCidr and fromRegistry")),
                (Some(cidr), None) => {
                    let cidr = string(cidr, &format!("{path}.fromCidr"))?;
                    validation::common::validate_ip_subnet(cidr)
                        .map_err(|e| format!("{path}.fromCidr: {e}"))?;
                }
                (None, Some(registry)) => {
                    let registry = string(registry, &format!("{path}.fromRegistry"))?;
                    if !validation::common::is_dns1123_label(registry) {
                        return Err(format!("{path}.fromRegistry: invalid registry name: {registry}"));
                    }
                }
                (None, None) => {}
            }
        }
    }
    if let Some(gateways) = network.get("gateways") {
        for (i, gateway) in list(gateways, &format!("{path}.gateways"))?.iter().enumerate() {
            let path = format!("{path}.gateways[{i}]");
            let gateway = object(gateway, &path)?;
            known(
                gateway,
                &["registryServiceName", "registry_service_name", "address", "port", "locality"],
                &path,
            )?;
            let service = field(gateway, "registryServiceName", "registry_service_name");
            match (service, gateway.get("address")) {
                (Some(_), Some(_)) => {
                    return Err(format!("{path}: only one of registryServiceName and address"));
                }
                (Some(service), None) => {
                    let service = string(service, &format!("{path}.registryServiceName"))?;
                    validation::common::validate_fqdn(service)
                        .map_err(|e| format!("{path}.registryServiceName: {e}"))?;
                }
                (None, Some(address)) => {
                    let address = string(address, &format!("{path}.address"))?;
                    if validation::common::validate_ip_address(address).is_err()
                        && validation::common::validate_fqdn(address).is_err()
                    {
                        return Err(format!(
                            "{path}.address: {address} is not a valid IP address or DNS name"
                        ));
                    }
                }
                (None, None) => {}
            }
            // uint32 in the proto; ValidatePort then wants 1-65535 (0 when left out is refused too).
            let port =
                gateway.get("port").map_or(Some(0), |p| p.as_u64().or_else(|| p.as_str()?.parse().ok()));
            match port {
                Some(1..=65535) => {}
                _ => {
                    let shown = gateway.get("port").map_or_else(|| "0".to_string(), Value::to_string);
                    return Err(format!("{path}.port: port number {shown} must be in the range 1..65535"));
                }
            }
            if let Some(locality) = gateway.get("locality") {
                string(locality, &format!("{path}.locality"))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn istios_example_reads() {
        let text = "networks:\n  network1:\n    endpoints:\n    - fromRegistry: Kubernetes\n    - fromCidr: 10.0.0.0/8\n    \
                    gateways:\n    - registryServiceName: istio-eastwestgateway.istio-system.svc.cluster.local\n      port: 15443\n    \
                    - address: 1.2.3.4\n      port: 15443\n      locality: us-east1\n  network2:\n    gateways:\n    \
                    - address: gw.example.com\n      port: 443\n";
        let networks = parse_mesh_networks(text).unwrap();
        assert_eq!(networks["networks"]["network1"]["gateways"][1]["address"], "1.2.3.4");
        assert_eq!(parse_mesh_networks("").unwrap(), serde_json::json!({}));
        assert_eq!(parse_mesh_networks("networks: {}\n").unwrap(), serde_json::json!({"networks": {}}));
    }

    #[test]
    fn bad_values_name_their_field() {
        for (text, expected) in [
            (
                "networks:\n  n1:\n    endpoints: [{fromCidr: 10.0.0.0/33}]\n",
                "networks.n1.endpoints[0].fromCidr",
            ),
            ("networks:\n  n1:\n    endpoints: [{fromRegistry: Not_A_Label}]\n", "invalid registry name"),
            (
                "networks:\n  n1:\n    gateways: [{address: 1.2.3.4, port: 70000}]\n",
                "networks.n1.gateways[0].port",
            ),
            ("networks:\n  n1:\n    gateways: [{address: 1.2.3.4}]\n", "networks.n1.gateways[0].port"),
            (
                "networks:\n  n1:\n    gateways: [{address: 'bad host!', port: 1}]\n",
                "not a valid IP address or DNS name",
            ),
            (
                "networks:\n  n1:\n    gateways: [{address: 1.2.3.4, registryServiceName: a.b, port: 1}]\n",
                "only one of",
            ),
            ("networks:\n  n1:\n    gateway: []\n", "networks.n1: unknown field \"gateway\""),
            ("network: {}\n", "unknown field \"network\""),
            ("networks: [a]\n", "networks: expected a map"),
            ("networks: {n1: {endpoints: [}\n", "line"),
        ] {
            let err = parse_mesh_networks(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
