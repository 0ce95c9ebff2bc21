//! WorkloadGroups as templates: the entry auto-registration makes, and warnings about groups whose
//! entries nothing would select.

use crate::support;

use api::Spec;
use meshpilot_registry::{
    ServiceEntryOptions, index_from_configs,
    workload_group::{AutoRegistration, group_entry_labels, workload_entry_from_group},
};
use model::Event;
use support::*;

#[test]
fn a_registering_proxy_gets_an_entry_from_the_template() {
    let mut group = mk_workload_group("vms", "reviews", &[("app", "reviews"), ("version", "v1")], |t| {
        t.ports.insert("http".into(), 9080);
        t.service_account = "reviews".into();
        t.network = "template-net".into();
        t.labels.insert("version".into(), "template".into());
    });
    if let Spec::WorkloadGroup(wg) = &mut group.spec {
        wg.metadata.as_mut().unwrap().annotations.insert("owner".into(), "team-a".into());
    }
    assert_eq!(group_entry_labels(&group), labels(&[("app", "reviews"), ("version", "v1")]), "metadata wins");

    let proxy = AutoRegistration {
        address: "10.4.0.7".into(),
        namespace: "vms".into(),
        network: "vm-net".into(),
        locality: "us-east/us-east-1a".into(),
        labels: labels(&[("instance", "i-123"), ("istio-locality", "us-east.us-east-1a")]),
    };
    let entry = workload_entry_from_group(&group, &proxy).unwrap();
    assert_eq!((entry.meta.namespace.as_str(), entry.meta.name.as_str()), ("vms", "reviews-10.4.0.7-vm-net"));
    assert_eq!(entry.meta.annotations["istio.io/autoRegistrationGroup"], "reviews");
    assert_eq!(entry.meta.annotations["owner"], "team-a");
    let Spec::WorkloadEntry(we) = &entry.spec else { panic!("not a WorkloadEntry") };
    assert_eq!(we.address, "10.4.0.7");
    assert_eq!(we.ports["http"], 9080);
    assert_eq!((we.network.as_str(), we.locality.as_str()), ("vm-net", "us-east/us-east-1a"));
    assert_eq!(we.labels, labels(&[("app", "reviews"), ("instance", "i-123"), ("version", "v1")]));

    // The entry is an endpoint of the service selecting the group's labels, named after the group.
    let se = mk_selecting_entry("vms", "reviews", "reviews.vms.example", &[("app", "reviews")]);
    let index = index_from_configs([&se, &group, &entry], ServiceEntryOptions::default()).0;
    let eps = index.endpoints("reviews.vms.example", "vms", 80, None);
    assert_eq!(eps.len(), 1);
    assert_eq!(
        (eps[0].workload_name.as_str(), eps[0].endpoint_port),
        ("reviews", 9080),
        "the template maps http"
    );
    assert!(index.warnings().is_empty(), "{:?}", index.warnings());
}

#[test]
fn a_group_whose_entries_nothing_selects_is_warned_about_and_raises_no_event() {
    let group = mk_workload_group("vms", "orphans", &[("app", "orphan")], |_| {});
    let (mut index, events) = index_from_configs([&group], ServiceEntryOptions::default());
    assert!(events.is_empty());
    assert_eq!(index.workload_groups().len(), 1);
    let warnings = index.warnings();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].object.to_string(), "WorkloadGroup/vms/orphans");
    assert!(warnings[0].message.contains("{app=orphan}"), "{warnings:?}");

    // A ServiceEntry selecting them clears it; deleting the group forgets it.
    index.apply(Event::Add, &mk_selecting_entry("vms", "se", "orphan.vms.example", &[("app", "orphan")]));
    assert!(index.warnings().iter().all(|w| w.object.kind != api::Kind::WorkloadGroup));
    assert!(index.apply(Event::Delete, &group).is_empty());
    assert!(index.workload_groups().is_empty());
}
