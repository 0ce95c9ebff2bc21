//! `/debug/registryz`, `/debug/endpointz` and the warnings list, in Istio's shapes.

use crate::support;

use api::networking::service_entry::Resolution as SeResolution;
use meshpilot_registry::{
    ServiceEntryOptions,
    debug::{endpointz, registry_warnings, registryz},
    index_from_configs,
};
use serde_json::json;
use support::*;

#[test]
fn registryz_writes_services_as_istio_does_one_entry_per_address() {
    let se = created_at(
        mk_service_entry("ns1", "mongo", &["mongo.example.com"], |se| {
            se.addresses = vec!["10.0.0.1".into(), "10.0.0.2".into()];
            se.ports = vec![port(27017, "mongo", "MONGO"), port(9000, "", "")];
            se.export_to = vec![".".into()];
            se.subject_alt_names = vec!["spiffe://cluster.local/ns/ns1/sa/mongo".into()];
            se.endpoints = vec![endpoint("1.1.1.1")];
        }),
        "2024-03-01T12:00:00Z",
    );
    let index = index_from_configs([&se], ServiceEntryOptions::default()).0;
    let body = registryz(&index.services());
    let list = body.as_array().unwrap();
    assert_eq!(list.len(), 2, "one per address");
    assert_eq!(list[1]["defaultAddress"], "10.0.0.2");
    assert_eq!(
        list[0],
        json!({
            "Attributes": {
                "ServiceRegistry": "External",
                "Name": "mongo.example.com",
                "Namespace": "ns1",
                "Labels": null,
                "ExportTo": {".": {}},
                "Visibility": 0,
                "LabelSelectors": null,
                "Aliases": null,
                "ClusterExternalAddresses": {"Addresses": null},
                "ClusterExternalPorts": null,
                "PassthroughTargetPorts": null,
                "Type": "",
                "ExternalName": "",
                "NodeLocal": false,
                "TrafficDistribution": 0,
                "ObjectName": "mongo",
                "DNSConnectStrategy": 0,
                "PublishNotReadyAddresses": false
            },
            "ports": [
                {"name": "mongo", "port": 27017, "protocol": "Mongo"},
                {"port": 9000, "protocol": "UnsupportedProtocol"}
            ],
            "serviceAccounts": ["spiffe://cluster.local/ns/ns1/sa/mongo"],
            "creationTime": "2024-03-01T12:00:00Z",
            "hostname": "mongo.example.com",
            "clusterVIPs": {"Addresses": null},
            "defaultAddress": "10.0.0.1",
            "Resolution": 0,
            "MeshExternal": false,
            "ResourceVersion": ""
        })
    );
}

#[test]
fn registryz_without_addresses_uses_the_unspecified_ip_and_go_zero_time() {
    let se = mk_service_entry("egress", "dns", &["api.example.com"], |se| {
        se.resolution = SeResolution::Dns as i32
    });
    let index = index_from_configs([&se], ServiceEntryOptions::default()).0;
    let body = registryz(&index.services());
    assert_eq!(body[0]["defaultAddress"], "0.0.0.0");
    assert_eq!(body[0]["creationTime"], "0001-01-01T00:00:00Z");
    assert_eq!(body[0]["Resolution"], 1, "DNSLB");
    assert!(body[0].get("serviceAccounts").is_none(), "omitempty");
}

#[test]
fn endpointz_groups_by_hostname_namespace_and_shard() {
    let configs = [
        mk_selecting_entry("vms", "app", "app.vms.example", &[("app", "a")]),
        mk_workload_entry("vms", "vm-1", "10.0.0.1", &[("app", "a")], |we| {
            we.service_account = "app".into();
            we.ports.insert("http".into(), 8080);
        }),
    ];
    let index = index_from_configs(&configs, ServiceEntryOptions::default()).0;
    let body = endpointz(&index.endpoint_shards());
    assert_eq!(
        body,
        json!({
            "app.vms.example": {
                "vms": {
                    "Shards": {
                        "External/Kubernetes": [{
                            "Labels": {"app": "a", "topology.istio.io/cluster": "Kubernetes"},
                            "Addresses": ["10.0.0.1"],
                            "ServicePortName": "http",
                            "LegacyClusterPortKey": 80,
                            "ServiceAccount": "spiffe://cluster.local/ns/vms/sa/app",
                            "Network": "",
                            "Locality": {"Label": "", "ClusterID": "Kubernetes"},
                            "EndpointPort": 8080,
                            "LbWeight": 0,
                            "TLSMode": "istio",
                            "Namespace": "vms",
                            "WorkloadName": "vm-1",
                            "HostName": "",
                            "SubDomain": "",
                            "HealthStatus": 0, // unset for WorkloadEntry endpoints, as in istiod
                            "SendUnhealthyEndpoints": false,
                            "NodeName": ""
                        }]
                    },
                    "ServiceAccounts": {"spiffe://cluster.local/ns/vms/sa/app": {}}
                }
            }
        })
    );
}

#[test]
fn warnings_are_listed_for_the_debug_endpoint() {
    let configs = [
        mk_service_entry("ns", "no-endpoints", &["empty.example.com"], |_| {}),
        mk_workload_entry("ns", "stray", "10.0.0.1", &[("app", "nobody")], |_| {}),
        mk_service_entry("a", "dup-a", &["dup.example.com"], |se| se.resolution = SeResolution::None as i32),
        mk_service_entry("b", "dup-b", &["dup.example.com"], |se| se.resolution = SeResolution::None as i32),
    ];
    let index = index_from_configs(&configs, ServiceEntryOptions::default()).0;
    let body = registry_warnings(&index.warnings());
    let list = body["warnings"].as_array().unwrap();
    let objects: Vec<String> = list
        .iter()
        .map(|w| {
            format!(
                "{}/{}/{}",
                w["kind"].as_str().unwrap(),
                w["namespace"].as_str().unwrap(),
                w["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        objects,
        [
            "ServiceEntry/a/dup-a",
            "ServiceEntry/b/dup-b",
            "ServiceEntry/ns/no-endpoints",
            "WorkloadEntry/ns/stray"
        ]
    );
    assert_eq!(list[0]["hostname"], "dup.example.com");
    assert!(list[2].get("hostname").is_none());
    assert!(list[3]["message"].as_str().unwrap().contains("{app=nobody}"), "{}", list[3]);
    // Everything is still served: no service was dropped.
    assert_eq!(index.services().len(), 3);
}
