//! WorkloadEntries selected by ServiceEntries: labels, ports, weights, locality, identity, health,
//! proxy instances. Pure index, by values.

use crate::support;

use std::collections::BTreeMap;

use api::networking::service_entry::Resolution as SeResolution;
use meshpilot_registry::{ServiceEntryIndex, ServiceEntryOptions, index_from_configs};
use model::{
    Config, Event,
    service::{TLS_MODE_DISABLED, TLS_MODE_ISTIO},
};
use support::*;

fn index(configs: &[Config]) -> ServiceEntryIndex {
    index_from_configs(configs, ServiceEntryOptions::default()).0
}

fn names_and_ports(index: &ServiceEntryIndex, host: &str, ns: &str, port: u32) -> Vec<(String, u32)> {
    index.endpoints(host, ns, port, None).iter().map(|e| (e.workload_name.clone(), e.endpoint_port)).collect()
}

fn vm_service(ns: &str) -> Config {
    mk_service_entry(ns, "vm-app", &["app.vms.example"], |se| {
        se.ports = vec![port(80, "http", "HTTP"), {
            let mut p = port(9090, "grpc", "GRPC");
            p.target_port = 9999;
            p
        }];
        se.workload_selector =
            Some(api::networking::sidecar::WorkloadSelector { labels: labels(&[("app", "vm-app")]) });
    })
}

#[test]
fn selector_picks_workload_entries_of_its_namespace_with_their_ports_weights_and_locality() {
    let configs = [
        vm_service("vms"),
        mk_workload_entry("vms", "vm-1", "10.1.0.1", &[("app", "vm-app"), ("version", "v1")], |we| {
            we.ports = BTreeMap::from([("http".to_string(), 8080)]);
            we.weight = 5;
            we.locality = "us-east/us-east-1b/rack7".into();
            we.network = "vm-net".into();
            we.service_account = "vm-app".into();
        }),
        mk_workload_entry("vms", "vm-2", "10.1.0.2", &[("app", "vm-app"), ("version", "v2")], |_| {}),
        mk_workload_entry("vms", "other", "10.1.0.3", &[("app", "other")], |_| {}),
        mk_workload_entry("elsewhere", "vm-3", "10.2.0.1", &[("app", "vm-app")], |_| {}),
    ];
    let index = index(&configs);

    // Port 80: vm-1 maps `http` to 8080, vm-2 uses the port number; port 9090: both use targetPort.
    assert_eq!(
        names_and_ports(&index, "app.vms.example", "vms", 80),
        [("vm-1".into(), 8080), ("vm-2".into(), 80)]
    );
    assert_eq!(
        names_and_ports(&index, "app.vms.example", "vms", 9090),
        [("vm-1".into(), 9999), ("vm-2".into(), 9999)]
    );

    let vm1 = &index.endpoints("app.vms.example", "vms", 80, None)[0];
    assert_eq!(vm1.addresses, ["10.1.0.1"]);
    assert_eq!(vm1.lb_weight, 5);
    assert_eq!(vm1.locality.label, "us-east/us-east-1b/rack7");
    assert_eq!(vm1.network, "vm-net");
    assert_eq!(vm1.service_account, "spiffe://cluster.local/ns/vms/sa/vm-app");
    assert_eq!(vm1.tls_mode, TLS_MODE_ISTIO);
    assert_eq!(
        *vm1.labels,
        labels(&[
            ("app", "vm-app"),
            ("version", "v1"),
            ("topology.kubernetes.io/region", "us-east"),
            ("topology.kubernetes.io/zone", "us-east-1b"),
            ("topology.istio.io/subzone", "rack7"),
            ("topology.istio.io/cluster", "Kubernetes"),
            ("topology.istio.io/network", "vm-net"),
        ])
    );
    let vm2 = &index.endpoints("app.vms.example", "vms", 80, None)[1];
    assert_eq!((vm2.lb_weight, vm2.load_balancing_weight()), (0, 1));
    assert_eq!(vm2.tls_mode, TLS_MODE_DISABLED);

    // DestinationRule-style subsets.
    let v2 = index.endpoints("app.vms.example", "vms", 80, Some(&labels(&[("version", "v2")])));
    assert_eq!(v2.iter().map(|e| e.workload_name.as_str()).collect::<Vec<_>>(), ["vm-2"]);

    // Not selected: a different app, and the same labels in another namespace.
    let unselected: Vec<String> = index
        .warnings()
        .into_iter()
        .filter(|w| w.message.starts_with("selected by no ServiceEntry"))
        .map(|w| w.object.to_string())
        .collect();
    assert_eq!(unselected, ["WorkloadEntry/elsewhere/vm-3", "WorkloadEntry/vms/other"]);
}

#[test]
fn metadata_labels_win_over_spec_labels_for_selection() {
    let mut we = mk_workload_entry("vms", "vm", "10.1.0.1", &[("app", "old")], |_| {});
    we.meta.labels = labels(&[("app", "vm-app")]);
    let index = index(&[vm_service("vms"), we]);
    let eps = index.endpoints("app.vms.example", "vms", 80, None);
    assert_eq!(eps.len(), 1);
    assert_eq!(eps[0].labels["app"], "vm-app");
}

#[test]
fn locality_and_workload_name_come_from_labels_and_annotations_when_set() {
    let mut we =
        mk_workload_entry("vms", "vm", "10.1.0.1", &[("app", "vm-app"), ("istio-locality", "r1.z1")], |_| {});
    we.meta.annotations.insert("istio.io/autoRegistrationGroup".into(), "vm-group".into());
    let mut named = mk_workload_entry("vms", "vm-b", "10.1.0.2", &[("app", "vm-app")], |we| {
        we.labels.insert("topology.istio.io/locality".into(), "r2/z2".into());
        we.labels.insert("security.istio.io/tlsMode".into(), "istio".into());
    });
    named.meta.labels = labels(&[("service.istio.io/workload-name", "reviews-vm")]);
    let index = index(&[vm_service("vms"), we, named]);
    let eps = index.endpoints("app.vms.example", "vms", 80, None);
    assert_eq!((eps[0].locality.label.as_str(), eps[0].workload_name.as_str()), ("r1/z1", "vm-group"));
    assert_eq!((eps[1].locality.label.as_str(), eps[1].workload_name.as_str()), ("r2/z2", "reviews-vm"));
    assert_eq!(eps[1].tls_mode, TLS_MODE_ISTIO, "the tlsMode label wins");
}

#[test]
fn an_empty_selector_selects_every_workload_of_the_namespace() {
    let se = mk_selecting_entry("vms", "all", "all.vms.example", &[]);
    let index = index(&[
        se,
        mk_workload_entry("vms", "a", "10.0.0.1", &[("app", "a")], |_| {}),
        mk_workload_entry("vms", "b", "10.0.0.2", &[], |_| {}),
    ]);
    assert_eq!(index.endpoints("all.vms.example", "vms", 80, None).len(), 2);
}

#[test]
fn dns_name_workloads_serve_only_dns_entries() {
    let dns = mk_service_entry("vms", "dns", &["dns.vms.example"], |se| {
        se.resolution = SeResolution::Dns as i32;
        se.workload_selector =
            Some(api::networking::sidecar::WorkloadSelector { labels: labels(&[("app", "db")]) });
    });
    let static_ = mk_selecting_entry("vms", "static", "static.vms.example", &[("app", "db")]);
    let index = index(&[
        dns,
        static_,
        mk_workload_entry("vms", "by-name", "db.internal.example", &[("app", "db")], |_| {}),
        mk_workload_entry("vms", "by-ip", "10.0.0.9", &[("app", "db")], |_| {}),
    ]);
    assert_eq!(names_and_ports(&index, "dns.vms.example", "vms", 80).len(), 2);
    assert_eq!(names_and_ports(&index, "static.vms.example", "vms", 80), [("by-ip".into(), 80)]);

    // With only the STATIC entry selecting it, the DNS-named workload is flagged.
    let index2 = index_from_configs(
        [
            &mk_selecting_entry("vms", "static", "static.vms.example", &[("app", "db")]),
            &mk_workload_entry("vms", "by-name", "db.internal.example", &[("app", "db")], |_| {}),
        ],
        ServiceEntryOptions::default(),
    )
    .0;
    let warnings = index2.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].message.contains("only DNS-resolved ServiceEntries"), "{warnings:?}");
}

#[test]
fn health_checked_workload_is_an_endpoint_only_when_healthy() {
    let mut we = mk_workload_entry("vms", "vm", "10.1.0.1", &[("app", "vm-app")], |_| {});
    we.meta.annotations.insert("proxy.istio.io/health-checks-enabled".into(), "true".into());
    let mut index = index(&[vm_service("vms"), we.clone()]);
    assert!(index.endpoints("app.vms.example", "vms", 80, None).is_empty(), "unhealthy until probed");
    assert!(index.warnings().iter().any(|w| w.message.contains("Healthy=True")));

    we.status = Some(serde_json::json!({"conditions": [{"type": "Healthy", "status": "True"}]}));
    let events = index.apply(Event::Update, &we);
    assert_eq!(events.len(), 1);
    assert_eq!(index.endpoints("app.vms.example", "vms", 80, None).len(), 1);

    we.status = Some(serde_json::json!({"conditions": [{"type": "Healthy", "status": "False"}]}));
    index.apply(Event::Update, &we);
    assert!(index.endpoints("app.vms.example", "vms", 80, None).is_empty());
}

#[test]
fn proxy_instances_are_found_by_ip_and_namespace() {
    let index = index(&[
        vm_service("vms"),
        mk_selecting_entry("vms", "second", "second.vms.example", &[("tier", "web")]),
        mk_workload_entry("vms", "vm", "10.1.0.1", &[("app", "vm-app"), ("tier", "web")], |_| {}),
    ]);
    let instances = index.proxy_instances(&["10.1.0.1".into()], Some("vms"));
    let got: Vec<(String, u32, u32)> = instances
        .iter()
        .map(|i| (i.service.hostname.clone(), i.service_port.port, i.endpoint.endpoint_port))
        .collect();
    assert_eq!(
        got,
        [
            ("app.vms.example".into(), 80, 80),
            ("app.vms.example".into(), 9090, 9999),
            ("second.vms.example".into(), 80, 80)
        ]
    );
    assert!(index.proxy_instances(&["10.1.0.1".into()], Some("other")).is_empty());
    assert_eq!(index.proxy_instances(&["10.1.0.1".into()], None).len(), 3);
    assert!(index.proxy_instances(&["10.9.9.9".into()], None).is_empty());
}

#[test]
fn moving_and_deleting_workloads_updates_selection() {
    let we = mk_workload_entry("vms", "vm", "10.1.0.1", &[("app", "vm-app")], |_| {});
    let (mut index, _) = index_from_configs([&vm_service("vms"), &we], ServiceEntryOptions::default());
    let moved = mk_workload_entry("vms", "vm", "10.1.0.1", &[("app", "elsewhere")], |_| {});
    index.apply(Event::Update, &moved);
    assert!(index.endpoints("app.vms.example", "vms", 80, None).is_empty());
    assert!(index.proxy_instances(&["10.1.0.1".into()], None).is_empty());
    index.apply(Event::Update, &we);
    assert_eq!(index.endpoints("app.vms.example", "vms", 80, None).len(), 1);
    index.apply(Event::Delete, &we);
    assert!(index.endpoints("app.vms.example", "vms", 80, None).is_empty());
    assert!(index.get_service("app.vms.example", "vms").is_some(), "the service stays without endpoints");
    assert!(index.warnings().is_empty());
}

#[test]
fn workloads_added_before_their_service_entry_are_picked_up() {
    let index =
        index(&[mk_workload_entry("vms", "vm", "10.1.0.1", &[("app", "vm-app")], |_| {}), vm_service("vms")]);
    assert_eq!(index.endpoints("app.vms.example", "vms", 80, None).len(), 1);
}

#[test]
fn recomputed_endpoints_follow_every_input_of_the_reuse_cache() {
    // Endpoints are reused per (ServiceEntry, WorkloadEntry) while neither changes; each input
    // change must show up.
    let we = |port: u32, address: &str| {
        mk_workload_entry("vms", "vm", address, &[("app", "vm-app")], |we| {
            we.ports = BTreeMap::from([("http".to_string(), port)]);
        })
    };
    let other = mk_workload_entry("vms", "vm-b", "10.1.0.2", &[("app", "vm-app")], |_| {});
    let (mut index, _) = index_from_configs(
        [&vm_service("vms"), &we(8080, "10.1.0.1"), &other],
        ServiceEntryOptions::default(),
    );
    let before = index.endpoints("app.vms.example", "vms", 80, None);
    assert_eq!(
        names_and_ports(&index, "app.vms.example", "vms", 80),
        [("vm".into(), 8080), ("vm-b".into(), 80)]
    );

    // The WorkloadEntry's port map changes: its endpoint follows, the other one is reused as is.
    index.apply(Event::Update, &we(8081, "10.1.0.1"));
    let after = index.endpoints("app.vms.example", "vms", 80, None);
    assert_eq!(
        names_and_ports(&index, "app.vms.example", "vms", 80),
        [("vm".into(), 8081), ("vm-b".into(), 80)]
    );
    assert!(std::sync::Arc::ptr_eq(&before[1], &after[1]), "unchanged workload's endpoint reused");

    // The ServiceEntry's targetPort changes: every endpoint without a port-map entry follows.
    let mut se = vm_service("vms");
    if let api::Spec::ServiceEntry(spec) = &mut se.spec {
        spec.ports[0].target_port = 7000;
    }
    index.apply(Event::Update, &se);
    assert_eq!(
        names_and_ports(&index, "app.vms.example", "vms", 80),
        [("vm".into(), 8081), ("vm-b".into(), 7000)]
    );

    // The ServiceEntry becomes DNS-resolved and selects a DNS-named workload it skipped before.
    index.apply(Event::Update, &we(8081, "vm.example.internal"));
    assert_eq!(names_and_ports(&index, "app.vms.example", "vms", 80), [("vm-b".into(), 7000)]);
    if let api::Spec::ServiceEntry(spec) = &mut se.spec {
        spec.resolution = SeResolution::Dns as i32;
    }
    index.apply(Event::Update, &se);
    assert_eq!(
        names_and_ports(&index, "app.vms.example", "vms", 80),
        [("vm".into(), 8081), ("vm-b".into(), 7000)]
    );

    // Deleted and re-created under the same name with another address.
    index.apply(Event::Delete, &we(8081, "vm.example.internal"));
    index.apply(Event::Add, &we(8081, "10.9.0.1"));
    let addresses: Vec<String> = index
        .endpoints("app.vms.example", "vms", 80, None)
        .iter()
        .map(|e| e.first_address().to_string())
        .collect();
    assert_eq!(addresses, ["10.9.0.1", "10.1.0.2"]);
    assert_eq!(index.proxy_instances(&["10.9.0.1".into()], None).len(), 2, "both ports");
}
