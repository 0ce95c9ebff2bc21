//! Events in (a real memory store), notifications out: service events vs incremental and full
//! endpoint updates, no-op updates, deletes.

use crate::support;

use api::{Kind, networking::service_entry::Resolution as SeResolution};
use model::{EndpointPush, RegistryEvent, ServiceDiscovery, service::service_config_key};
use support::*;

fn vm_entry() -> model::Config {
    mk_selecting_entry("vms", "vm-app", "app.vms.example", &[("app", "vm-app")])
}

fn vm(name: &str, address: &str, account: &str) -> model::Config {
    mk_workload_entry("vms", name, address, &[("app", "vm-app")], |we| we.service_account = account.into())
}

#[tokio::test]
async fn the_initial_state_is_delivered_when_the_store_runs() {
    let h = Harness::start(vec![vm_entry(), vm("vm-1", "10.0.0.1", "app")]).await;
    assert_eq!(h.take(), ["service add app.vms.example/vms", "endpoints full app.vms.example/vms 1"]);
    assert_eq!(h.registry.services().len(), 1);
}

#[tokio::test]
async fn a_service_entry_add_is_a_service_event_then_a_full_endpoint_update() {
    let h = Harness::start(vec![]).await;
    let se = mk_service_entry("shop", "pay", &["pay.example.com"], |se| {
        se.endpoints = vec![endpoint("10.0.0.1"), endpoint("10.0.0.2")];
    });
    h.put(se).await;
    let events = h.take_events();
    assert_eq!(
        events.iter().map(describe).collect::<Vec<_>>(),
        ["service add pay.example.com/shop", "endpoints full pay.example.com/shop 2"]
    );
    let RegistryEvent::Service(service) = &events[0] else { unreachable!() };
    // What the server puts in ConfigsUpdated.
    assert_eq!(service.config_key(), service_config_key("pay.example.com", "shop"));
    assert_eq!(service.config_key().to_string(), "ServiceEntry/shop/pay.example.com");
    assert_eq!(service.shard.to_string(), "External/Kubernetes");
}

#[tokio::test]
async fn a_workload_entry_change_of_endpoints_only_is_incremental() {
    let h = Harness::start(vec![vm_entry(), vm("vm-1", "10.0.0.1", "app")]).await;
    h.take();
    // New address and weight, same identity.
    h.put(mk_workload_entry("vms", "vm-1", "10.0.0.7", &[("app", "vm-app")], |we| {
        we.service_account = "app".into();
        we.weight = 4;
    }))
    .await;
    assert_eq!(h.take(), ["endpoints incremental app.vms.example/vms 1"]);
    // A second workload with the same identity: incremental too.
    h.put(vm("vm-2", "10.0.0.8", "app")).await;
    assert_eq!(h.take(), ["endpoints incremental app.vms.example/vms 2"]);
    assert_eq!(h.registry.proxy_instances(&["10.0.0.7".into()], None).len(), 1);
    assert!(h.registry.proxy_instances(&["10.0.0.1".into()], None).is_empty());
}

#[tokio::test]
async fn a_change_of_service_accounts_is_a_full_push() {
    let h = Harness::start(vec![vm_entry(), vm("vm-1", "10.0.0.1", "app")]).await;
    h.take();
    h.put(vm("vm-1", "10.0.0.1", "other-identity")).await;
    assert_eq!(h.take(), ["endpoints full app.vms.example/vms 1"]);
    // A new workload bringing a new account: full.
    h.put(vm("vm-2", "10.0.0.2", "third-identity")).await;
    assert_eq!(h.take(), ["endpoints full app.vms.example/vms 2"]);
    // Removing it takes the account away: full again.
    h.delete(Kind::WorkloadEntry, "vms", "vm-2").await;
    assert_eq!(h.take(), ["endpoints full app.vms.example/vms 1"]);
}

#[tokio::test]
async fn updates_that_change_nothing_raise_nothing() {
    let h = Harness::start(vec![vm_entry(), vm("vm-1", "10.0.0.1", "app")]).await;
    h.take();
    // An annotation the registry does not read: the store passes the update on, the registry
    // computes the same endpoints and stays quiet.
    let mut annotated = vm("vm-1", "10.0.0.1", "app");
    annotated.meta.annotations.insert("owner".into(), "team-a".into());
    h.put(annotated).await;
    assert!(h.take().is_empty());
    // The same ServiceEntry spec written again (new resource version) raises nothing either.
    h.put(vm_entry()).await;
    assert!(h.take().is_empty());
    // A WorkloadEntry nobody selects: nothing.
    h.put(mk_workload_entry("vms", "stray", "10.0.0.9", &[("app", "nobody")], |_| {})).await;
    assert!(h.take().is_empty());
    // A WorkloadGroup is a template: nothing.
    h.put(mk_workload_group("vms", "group", &[("app", "vm-app")], |_| {})).await;
    assert!(h.take().is_empty());
}

#[tokio::test]
async fn editing_inline_endpoints_is_endpoint_only() {
    let se = |addresses: &[&str]| {
        mk_service_entry("shop", "pay", &["pay.example.com"], |se| {
            se.endpoints = addresses.iter().map(|a| endpoint(a)).collect();
        })
    };
    let h = Harness::start(vec![se(&["10.0.0.1"])]).await;
    h.take();
    h.put(se(&["10.0.0.1", "10.0.0.2"])).await;
    assert_eq!(h.take(), ["endpoints incremental pay.example.com/shop 2"]);
}

#[tokio::test]
async fn a_changed_definition_is_a_service_event() {
    let h = Harness::start(vec![vm_entry(), vm("vm-1", "10.0.0.1", "app")]).await;
    h.take();
    // A new port: the service changed, and its endpoints (one per port) too.
    let mut se = vm_entry();
    if let api::Spec::ServiceEntry(spec) = &mut se.spec {
        spec.ports.push(port(9090, "grpc", "GRPC"));
    }
    h.put(se.clone()).await;
    assert_eq!(
        h.take(),
        ["service update app.vms.example/vms", "endpoints incremental app.vms.example/vms 2"]
    );
    // A targetPort change alone is a service change too (Istio's TargetPorts rule), besides moving
    // the endpoints.
    if let api::Spec::ServiceEntry(spec) = &mut se.spec {
        spec.ports[1].target_port = 9999;
    }
    h.put(se).await;
    assert_eq!(
        h.take(),
        ["service update app.vms.example/vms", "endpoints incremental app.vms.example/vms 2"]
    );
}

#[tokio::test]
async fn a_relabelled_workload_moves_between_services() {
    let other = mk_selecting_entry("vms", "other", "other.vms.example", &[("app", "other")]);
    let h = Harness::start(vec![vm_entry(), other, vm("vm-1", "10.0.0.1", "app")]).await;
    h.take();
    h.put(mk_workload_entry("vms", "vm-1", "10.0.0.1", &[("app", "other")], |we| {
        we.service_account = "app".into()
    }))
    .await;
    assert_eq!(
        h.take(),
        ["endpoints incremental app.vms.example/vms 0", "endpoints full other.vms.example/vms 1"]
    );
}

#[tokio::test]
async fn dns_services_push_endpoint_changes_in_full() {
    let se = |addresses: &[&str]| {
        mk_service_entry("egress", "dns", &["dns.example.com"], |se| {
            se.resolution = SeResolution::Dns as i32;
            se.endpoints = addresses.iter().map(|a| endpoint(a)).collect();
        })
    };
    let h = Harness::start(vec![se(&["a.example.com"])]).await;
    h.take();
    h.put(se(&["b.example.com"])).await;
    let events = h.take_events();
    assert_eq!(events.iter().map(describe).collect::<Vec<_>>(), ["endpoints full dns.example.com/egress 1"]);
    let RegistryEvent::Endpoints(update) = &events[0] else { unreachable!() };
    assert_eq!(update.push, EndpointPush::Full, "DNS endpoints live in the cluster (CDS)");
}

#[tokio::test]
async fn deletes_remove_endpoints_then_services() {
    let h = Harness::start(vec![vm_entry(), vm("vm-1", "10.0.0.1", "app")]).await;
    h.take();
    h.delete(Kind::WorkloadEntry, "vms", "vm-1").await;
    assert_eq!(h.take(), ["endpoints incremental app.vms.example/vms 0"]);
    // Coming back with the same identity after dropping to zero: incremental (accounts were kept).
    h.put(vm("vm-1", "10.0.0.1", "app")).await;
    assert_eq!(h.take(), ["endpoints incremental app.vms.example/vms 1"]);
    h.delete(Kind::ServiceEntry, "vms", "vm-app").await;
    assert_eq!(h.take(), ["service delete app.vms.example/vms"]);
    assert!(h.registry.services().is_empty());
    assert!(h.registry.endpoints("app.vms.example", "vms", 80, None).is_empty());
    // The workload is now selected by nothing, and says so.
    let warnings = model::ServiceController::warnings(&h.registry);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].object.to_string(), "WorkloadEntry/vms/vm-1");
}

#[tokio::test]
async fn hosts_renamed_in_place_delete_the_old_service_and_add_the_new() {
    let h = Harness::start(vec![mk_service_entry("ns", "se", &["old.example.com"], |se| {
        se.endpoints = vec![endpoint("1.1.1.1")]
    })])
    .await;
    h.take();
    h.put(mk_service_entry("ns", "se", &["new.example.com"], |se| se.endpoints = vec![endpoint("1.1.1.1")]))
        .await;
    assert_eq!(
        h.take(),
        [
            "service add new.example.com/ns",
            "endpoints full new.example.com/ns 1",
            "service delete old.example.com/ns"
        ]
    );
}

#[tokio::test]
async fn a_panicking_handler_does_not_stop_the_registry_or_other_handlers() {
    let h = Harness::start(vec![vm_entry()]).await;
    h.take();
    model::ServiceController::append_event_handler(
        &h.registry,
        std::sync::Arc::new(|_: &RegistryEvent| panic!("consumer bug")),
    );
    let seen = std::sync::Arc::new(std::sync::Mutex::new(0));
    let counter = seen.clone();
    model::ServiceController::append_event_handler(
        &h.registry,
        std::sync::Arc::new(move |_: &RegistryEvent| *counter.lock().unwrap() += 1),
    );
    h.put(vm("vm-1", "10.0.0.1", "app")).await;
    assert_eq!(h.take(), ["endpoints full app.vms.example/vms 1"]);
    assert_eq!(*seen.lock().unwrap(), 1);
    h.put(vm("vm-2", "10.0.0.2", "app")).await;
    assert_eq!(h.take(), ["endpoints incremental app.vms.example/vms 2"]);
    assert_eq!(h.registry.endpoints("app.vms.example", "vms", 80, None).len(), 2);
}
