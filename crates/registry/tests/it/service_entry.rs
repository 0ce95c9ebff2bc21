//! ServiceEntry → services and endpoints, tested on the pure index by values.

use crate::support;

use std::sync::Arc;

use api::networking::service_entry::{Location, Resolution as SeResolution};
use meshpilot_registry::{ServiceEntryIndex, ServiceEntryOptions, index_from_configs};
use model::{
    Config, Event, Protocol,
    service::{
        Endpoint, ExportTo, ProviderId, Resolution, TLS_MODE_DISABLED, TLS_MODE_ISTIO, UNSPECIFIED_IP,
    },
};
use support::*;

fn index(configs: &[Config]) -> ServiceEntryIndex {
    index_from_configs(configs, ServiceEntryOptions::default()).0
}

fn addresses_and_ports(endpoints: &[Arc<Endpoint>]) -> Vec<(String, u32)> {
    endpoints.iter().map(|e| (e.first_address().to_string(), e.endpoint_port)).collect()
}

fn warnings_about(index: &ServiceEntryIndex, name: &str) -> Vec<String> {
    index.warnings().into_iter().filter(|w| w.object.name == name).map(|w| w.message).collect()
}

#[test]
fn static_endpoints_serve_every_port_with_their_port_mapping() {
    let se = mk_service_entry("shop", "payments", &["payments.example.com"], |se| {
        se.ports = vec![port(80, "http", "HTTP"), {
            let mut p = port(9000, "grpc", "GRPC");
            p.target_port = 9100;
            p
        }];
        se.endpoints = vec![
            {
                let mut e = endpoint("10.0.0.1");
                e.ports = labels_u32(&[("http", 8080)]);
                e.labels = labels(&[("version", "v1")]);
                e.locality = "eu-west/eu-west-1a".into();
                e.weight = 3;
                e.network = "net-a".into();
                e.service_account = "payments".into();
                e
            },
            endpoint("10.0.0.2"),
        ];
    });
    let index = index(&[se]);

    let services = index.services();
    assert_eq!(services.len(), 1);
    let svc = &services[0];
    assert_eq!((svc.hostname.as_str(), svc.namespace.as_str()), ("payments.example.com", "shop"));
    assert_eq!((svc.name.as_str(), svc.object_name.as_str()), ("payments.example.com", "payments"));
    assert_eq!(svc.registry, ProviderId::External);
    assert_eq!(svc.resolution, Resolution::ClientSideLb);
    assert!(!svc.mesh_external);
    assert_eq!(svc.default_address(), UNSPECIFIED_IP);

    // Port 80: the first endpoint maps `http` to 8080, the second uses the port number.
    let http = index.endpoints("payments.example.com", "shop", 80, None);
    assert_eq!(addresses_and_ports(&http), [("10.0.0.1".into(), 8080), ("10.0.0.2".into(), 80)]);
    // Port 9000: both use the targetPort (no `grpc` entry in their port maps).
    let grpc = index.endpoints("payments.example.com", "shop", 9000, None);
    assert_eq!(addresses_and_ports(&grpc), [("10.0.0.1".into(), 9100), ("10.0.0.2".into(), 9100)]);
    assert!(index.endpoints("payments.example.com", "shop", 81, None).is_empty());

    let first = &http[0];
    assert_eq!(first.service_port_name, "http");
    assert_eq!(first.legacy_cluster_port_key, 80);
    assert_eq!(first.lb_weight, 3);
    assert_eq!(first.network, "net-a");
    assert_eq!(first.locality.label, "eu-west/eu-west-1a");
    assert_eq!(first.locality.cluster_id, "Kubernetes");
    assert_eq!(first.service_account, "spiffe://cluster.local/ns/shop/sa/payments");
    assert_eq!(first.tls_mode, TLS_MODE_ISTIO, "a service account means the workload has a proxy");
    assert_eq!(first.workload_name, "payments-0");
    assert_eq!(first.namespace, "shop");
    assert_eq!(
        *first.labels,
        labels(&[
            ("version", "v1"),
            ("topology.kubernetes.io/region", "eu-west"),
            ("topology.kubernetes.io/zone", "eu-west-1a"),
            ("topology.istio.io/cluster", "Kubernetes"),
            ("topology.istio.io/network", "net-a"),
        ])
    );
    assert_eq!(http[1].tls_mode, TLS_MODE_DISABLED);
    assert_eq!(http[1].workload_name, "payments-1");

    // Subsets select by endpoint labels.
    let v1 = index.endpoints("payments.example.com", "shop", 80, Some(&labels(&[("version", "v1")])));
    assert_eq!(v1.len(), 1);
    assert!(index.warnings().is_empty(), "{:?}", index.warnings());
}

fn labels_u32(pairs: &[(&str, u32)]) -> std::collections::BTreeMap<String, u32> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn every_distinct_host_is_a_service_in_the_entry_namespace() {
    let se = mk_service_entry("ns1", "multi", &["a.example.com", "b.example.com", "a.example.com"], |se| {
        se.endpoints = vec![endpoint("1.1.1.1")];
        se.export_to = vec![".".into()];
        se.subject_alt_names = vec!["spiffe://cluster.local/ns/ns1/sa/multi".into()];
    });
    let index = index(&[created_at(se, "2024-05-01T10:00:00Z")]);
    let services = index.services();
    let hosts: Vec<(&str, &str)> =
        services.iter().map(|s| (s.hostname.as_str(), s.namespace.as_str())).collect();
    assert_eq!(hosts, [("a.example.com", "ns1"), ("b.example.com", "ns1")]);
    for s in &services {
        assert_eq!(s.export_to, [ExportTo::Private].into());
        assert_eq!(s.service_accounts, ["spiffe://cluster.local/ns/ns1/sa/multi"]);
        assert_eq!(s.creation_time.as_deref(), Some("2024-05-01T10:00:00Z"));
        // Each host has the entry's endpoints.
        assert_eq!(index.endpoints(&s.hostname, "ns1", 80, None).len(), 1);
    }
    assert_eq!(
        warnings_about(&index, "multi"),
        ["host \"a.example.com\" is listed twice; one service is made"]
    );
}

#[test]
fn short_hosts_are_used_as_written_and_warned_about() {
    let index = index(&[mk_service_entry("shop", "short", &["reviews"], |se| {
        se.endpoints = vec![endpoint("1.1.1.1")]
    })]);
    assert!(index.get_service("reviews", "shop").is_some());
    assert!(index.get_service("reviews.shop.svc.cluster.local", "shop").is_none());
    let warnings = warnings_about(&index, "short");
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("short name") && warnings[0].contains("\"reviews.shop.svc.cluster.local\""),
        "{warnings:?}"
    );
}

#[test]
fn addresses_keep_ips_and_ranges_and_skip_garbage() {
    let se = mk_service_entry("ns", "vips", &["db.example.com"], |se| {
        se.addresses =
            vec!["10.1.0.1".into(), "10.2.0.0/16".into(), "10.3.0.1/32".into(), "not-an-ip".into()];
        se.resolution = SeResolution::None as i32;
    });
    let index = index(&[se]);
    let svc = index.get_service("db.example.com", "ns").unwrap();
    assert_eq!(svc.addresses, ["10.1.0.1", "10.2.0.0/16", "10.3.0.1"]);
    assert_eq!(svc.default_address(), "10.1.0.1");
    assert_eq!(
        warnings_about(&index, "vips"),
        ["address \"not-an-ip\" is neither an IP nor a CIDR range; skipped"]
    );
}

#[test]
fn port_protocol_is_the_declared_protocol_as_istio_reads_it() {
    let se = mk_service_entry("ns", "protocols", &["p.example.com"], |se| {
        se.resolution = SeResolution::None as i32;
        se.ports = vec![
            port(80, "http-web", "http"),
            port(81, "grpc", "GRPC"),
            port(82, "http-not-used", ""),
            port(83, "mongo", "MONGO"),
            port(84, "tls", "TLS"),
            port(85, "h2", "HTTP2"),
        ];
    });
    let svc = index(&[se]).get_service("p.example.com", "ns").unwrap();
    let protocols: Vec<Protocol> = svc.ports.iter().map(|p| p.protocol).collect();
    // Case-insensitive; an empty protocol is sniffed even when the name says `http-…` (Istio's
    // convertPort parses only `protocol`).
    assert_eq!(
        protocols,
        [
            Protocol::Http,
            Protocol::Grpc,
            Protocol::Unsupported,
            Protocol::Mongo,
            Protocol::Tls,
            Protocol::Http2
        ]
    );
}

#[test]
fn bad_ports_are_skipped_with_warnings() {
    let se = mk_service_entry("ns", "ports", &["p.example.com"], |se| {
        se.resolution = SeResolution::None as i32;
        se.ports = vec![
            port(80, "http", "HTTP"),
            port(0, "zero", "TCP"),
            port(80, "again", "TCP"),
            port(81, "http", "TCP"),
        ];
    });
    let index = index(&[se]);
    assert_eq!(index.get_service("p.example.com", "ns").unwrap().ports.len(), 1);
    assert_eq!(warnings_about(&index, "ports").len(), 3);
}

#[test]
fn dns_without_endpoints_makes_each_host_its_own_endpoint() {
    let se = mk_service_entry("egress", "apis", &["api.one.com", "api.two.com"], |se| {
        se.resolution = SeResolution::Dns as i32;
        se.location = Location::MeshExternal as i32;
        se.ports = vec![port(443, "https", "TLS"), {
            let mut p = port(80, "http", "HTTP");
            p.target_port = 8080;
            p
        }];
    });
    let index = index(&[se]);
    for host in ["api.one.com", "api.two.com"] {
        let svc = index.get_service(host, "egress").unwrap();
        assert_eq!(svc.resolution, Resolution::Dns);
        assert!(svc.mesh_external);
        let tls = index.endpoints(host, "egress", 443, None);
        assert_eq!(addresses_and_ports(&tls), [(host.to_string(), 443)]);
        assert_eq!(
            addresses_and_ports(&index.endpoints(host, "egress", 80, None)),
            [(host.to_string(), 8080)]
        );
        assert_eq!(tls[0].tls_mode, TLS_MODE_DISABLED);
        assert!(tls[0].labels.is_empty(), "host endpoints carry no labels, as in Istio");
        assert_eq!(tls[0].workload_name, "apis");
    }
}

#[test]
fn dns_endpoints_keep_their_hostnames() {
    let se = mk_service_entry("egress", "dns", &["foo.bar.com"], |se| {
        se.resolution = SeResolution::Dns as i32;
        se.endpoints = vec![endpoint("us.foo.bar.com"), endpoint("uk.foo.bar.com")];
    });
    let index = index(&[se]);
    let eps = index.endpoints("foo.bar.com", "egress", 80, None);
    assert_eq!(addresses_and_ports(&eps), [("us.foo.bar.com".into(), 80), ("uk.foo.bar.com".into(), 80)]);
}

#[test]
fn dns_round_robin_keeps_one_endpoint_per_port() {
    let se = mk_service_entry("egress", "rr", &["rr.example.com"], |se| {
        se.resolution = SeResolution::DnsRoundRobin as i32;
        se.endpoints = vec![endpoint("a.rr.example.com"), endpoint("b.rr.example.com")];
    });
    let index = index(&[se]);
    let eps = index.endpoints("rr.example.com", "egress", 80, None);
    assert_eq!(addresses_and_ports(&eps), [("a.rr.example.com".into(), 80)]);
}

#[test]
fn none_resolution_is_passthrough_without_endpoints() {
    let se = mk_service_entry("egress", "wild", &["*.bar.com"], |se| {
        se.resolution = SeResolution::None as i32;
        se.ports = vec![{
            let mut p = port(80, "http", "HTTP");
            p.target_port = 8080;
            p
        }];
    });
    let index = index(&[se]);
    let svc = index.get_service("*.bar.com", "egress").unwrap();
    assert_eq!(svc.resolution, Resolution::Passthrough);
    assert_eq!(svc.passthrough_target_ports, [(80, 8080)].into());
    assert!(index.endpoints("*.bar.com", "egress", 80, None).is_empty());
    assert!(index.warnings().is_empty());
}

#[test]
fn static_without_endpoint_addresses_is_kept_with_a_warning() {
    let index = index(&[mk_service_entry("ns", "empty", &["empty.example.com"], |_| {})]);
    assert!(index.get_service("empty.example.com", "ns").is_some(), "never silently dropped");
    assert!(index.endpoints("empty.example.com", "ns", 80, None).is_empty());
    let warnings = warnings_about(&index, "empty");
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("resolution STATIC with no endpoints and no workloadSelector"),
        "{warnings:?}"
    );
}

#[test]
fn static_endpoint_with_a_hostname_is_skipped_with_a_warning() {
    let se = mk_service_entry("ns", "mixed", &["mixed.example.com"], |se| {
        se.endpoints = vec![endpoint("10.0.0.1"), endpoint("db.internal"), endpoint("unix:///var/run/sock")];
    });
    let index = index(&[se]);
    let eps = index.endpoints("mixed.example.com", "ns", 80, None);
    // The Unix socket is kept, as a path with port 0.
    assert_eq!(addresses_and_ports(&eps), [("10.0.0.1".into(), 80), ("/var/run/sock".into(), 0)]);
    let warnings = warnings_about(&index, "mixed");
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("\"db.internal\""), "{warnings:?}");
}

#[test]
fn export_to_decides_which_namespace_declaration_a_proxy_sees() {
    let private_a = created_at(
        mk_service_entry("a", "h-a", &["h.example.com"], |se| {
            se.export_to = vec![".".into()];
            se.endpoints = vec![endpoint("1.0.0.1")];
        }),
        "2024-02-01T00:00:00Z",
    );
    let public_b = created_at(
        mk_service_entry("b", "h-b", &["h.example.com"], |se| se.endpoints = vec![endpoint("2.0.0.1")]),
        "2024-01-01T00:00:00Z",
    );
    let hidden_c = mk_service_entry("c", "h-c", &["h.example.com"], |se| se.export_to = vec!["~".into()]);
    let index = index(&[private_a, public_b, hidden_c]);

    assert_eq!(index.services().len(), 3, "one service per namespace");
    // Namespace a: its own private service beats the older public one.
    assert_eq!(index.visible_service("h.example.com", "a").unwrap().namespace, "a");
    // Namespace d: only b's is visible.
    assert_eq!(index.visible_service("h.example.com", "d").unwrap().namespace, "b");
    assert_eq!(
        index.visible_service("h.example.com", "c").unwrap().namespace,
        "b",
        "c's own is exported nowhere"
    );
    assert_eq!(index.endpoints("h.example.com", "a", 80, None)[0].first_address(), "1.0.0.1");

    let conflicts: Vec<_> =
        index.warnings().into_iter().filter(|w| w.hostname.as_deref() == Some("h.example.com")).collect();
    assert_eq!(conflicts.len(), 3, "one per declaring ServiceEntry: {conflicts:?}");
    assert!(conflicts[0].message.contains("declared in 3 namespaces"), "{conflicts:?}");
}

#[test]
fn same_host_twice_in_a_namespace_merges_ports_and_endpoints() {
    let old = created_at(
        mk_service_entry("ns", "old", &["shared.example.com"], |se| se.endpoints = vec![endpoint("1.0.0.1")]),
        "2024-01-01T00:00:00Z",
    );
    let young = created_at(
        mk_service_entry("ns", "young", &["shared.example.com"], |se| {
            se.ports = vec![port(80, "web", "HTTP"), port(8443, "https", "HTTPS")];
            se.endpoints = vec![endpoint("2.0.0.1")];
        }),
        "2025-01-01T00:00:00Z",
    );
    let index = index(&[young, old]);
    let svc = index.get_service("shared.example.com", "ns").unwrap();
    assert_eq!(svc.object_name, "old", "the oldest entry defines the service");
    let ports: Vec<(u32, &str)> = svc.ports.iter().map(|p| (p.port, p.name.as_str())).collect();
    assert_eq!(ports, [(80, "http"), (8443, "https")]);
    // Port 80 is served by both entries' endpoints (matched by number), 8443 by the young one's.
    let p80 = index.endpoints("shared.example.com", "ns", 80, None);
    assert_eq!(addresses_and_ports(&p80), [("1.0.0.1".into(), 80), ("2.0.0.1".into(), 80)]);
    assert_eq!(index.endpoints("shared.example.com", "ns", 8443, None).len(), 1);
    let warnings = warnings_about(&index, "young");
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("adds port(s) [8443]"), "{warnings:?}");

    // Incompatible definitions: the young entry's ports are ignored, its endpoints still merged.
    let mut index = index;
    let young_dns = created_at(
        mk_service_entry("ns", "young", &["shared.example.com"], |se| {
            se.resolution = SeResolution::Dns as i32;
            se.ports = vec![port(8443, "https", "HTTPS")];
            se.endpoints = vec![endpoint("2.0.0.1")];
        }),
        "2025-01-01T00:00:00Z",
    );
    index.apply(Event::Update, &young_dns);
    let svc = index.get_service("shared.example.com", "ns").unwrap();
    assert_eq!(svc.ports.len(), 1);
    assert!(warnings_about(&index, "young")[0].contains("ports are ignored"));

    // Deleting the old entry hands the host to the young one.
    index.apply(
        Event::Delete,
        &created_at(mk_service_entry("ns", "old", &["shared.example.com"], |_| {}), "2024-01-01T00:00:00Z"),
    );
    let svc = index.get_service("shared.example.com", "ns").unwrap();
    assert_eq!((svc.object_name.as_str(), svc.resolution), ("young", Resolution::Dns));
}

#[test]
fn deleting_the_entry_removes_its_services() {
    let se = mk_service_entry("ns", "gone", &["a.example.com", "b.example.com"], |se| {
        se.endpoints = vec![endpoint("1.1.1.1")]
    });
    let (mut index, _) = index_from_configs([&se], ServiceEntryOptions::default());
    let events = index.apply(Event::Delete, &se);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(index.services().is_empty());
    assert!(index.proxy_instances(&["1.1.1.1".into()], None).is_empty());
    assert!(index.endpoint_shards().is_empty());
    // Deleting again is a no-op.
    assert!(index.apply(Event::Delete, &se).is_empty());
}
