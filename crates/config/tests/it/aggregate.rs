//! The aggregate store: precedence, shadowing without spurious events, writes to the one writable
//! source, sync; and the configz dump.

use crate::common;

use std::{sync::Arc, time::Duration};

use api::{Kind, Spec};
use common::{Recorder, contents, eventually, mk_gateway, vs_yaml};
use meshpilot_config::{
    Aggregate, Change, FileSource, FileSourceOptions, MemoryStore, QueueOptions, ReadOnlySource, configz,
};
use model::{ConfigKey, ConfigStore, ConfigStoreController, Event, StoreError, shutdown_channel};

fn selector(store: &dyn ConfigStore, name: &str) -> Option<String> {
    store.get(Kind::Gateway, "ns", name).map(|c| match &c.spec {
        Spec::Gateway(g) => g.selector["app"].clone(),
        _ => unreachable!(),
    })
}

fn sink(name: &str) -> MemoryStore {
    MemoryStore::read_only(name, &[Kind::Gateway], QueueOptions::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_source_wins_and_shadowed_changes_raise_nothing() {
    let high = sink("high");
    let low = sink("low");
    low.apply([Change::Upsert(Arc::new(mk_gateway("ns", "shared", "low")))]);
    low.apply([Change::Upsert(Arc::new(mk_gateway("ns", "only-low", "low")))]);
    let agg = Aggregate::new(vec![Arc::new(high.clone()), Arc::new(low.clone())], QueueOptions::default());
    let rec = Recorder::new();
    agg.register_event_handler(Kind::Gateway, rec.handler());
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(agg.run(shutdown));
    assert!(eventually(Duration::from_secs(5), || agg.has_synced()).await);
    let k = |n: &str| ConfigKey { kind: Kind::Gateway, namespace: "ns".into(), name: n.into() };
    let mut events = rec.take_events();
    events.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(events, [(Event::Add, k("only-low")), (Event::Add, k("shared"))]);

    let settle = || async {
        assert!(
            eventually(Duration::from_secs(5), || agg.queue().is_empty() && rec.mirrors(&contents(&agg)))
                .await,
            "handler view differs from the aggregate"
        );
    };
    // A higher-precedence copy appears: an Update to it.
    high.apply([Change::Upsert(Arc::new(mk_gateway("ns", "shared", "high")))]);
    settle().await;
    assert_eq!(selector(&agg, "shared").as_deref(), Some("high"));
    assert_eq!(rec.take_events(), [(Event::Update, k("shared"))]);
    // Changing or deleting the shadowed copy: nothing.
    low.apply([Change::Upsert(Arc::new(mk_gateway("ns", "shared", "low2")))]);
    low.apply([Change::Remove(k("shared"))]);
    low.apply([Change::Upsert(Arc::new(mk_gateway("ns", "shared", "low3")))]);
    // A later change in the same source (its events reach the aggregate in order) arrives with
    // nothing before it; then it goes away again.
    low.apply([Change::Upsert(Arc::new(mk_gateway("ns", "marker", "low")))]);
    let marker_seen = || rec.events.lock().unwrap().iter().any(|(_, key)| key.name == "marker");
    assert!(eventually(Duration::from_secs(5), marker_seen).await, "the marker did not arrive");
    assert_eq!(rec.take_events(), [(Event::Add, k("marker"))]);
    low.apply([Change::Remove(k("marker"))]);
    assert!(eventually(Duration::from_secs(5), marker_seen).await, "the marker's removal did not arrive");
    settle().await;
    assert_eq!(rec.take_events(), [(Event::Delete, k("marker"))]);
    // The winner goes away: the next source's copy takes over as an Update, not Delete + Add.
    high.apply([Change::Remove(k("shared"))]);
    settle().await;
    assert_eq!(selector(&agg, "shared").as_deref(), Some("low3"));
    assert_eq!(rec.take_events(), [(Event::Update, k("shared"))]);
    // Gone everywhere: Delete.
    low.apply([Change::Remove(k("shared"))]);
    settle().await;
    assert_eq!(rec.take_events(), [(Event::Delete, k("shared"))]);
    assert_eq!(agg.list(Kind::Gateway, None).len(), 1);
    assert!(rec.violations().is_empty(), "{:?}", rec.violations());
    trigger.trigger();
    run.await.unwrap();
}

#[test]
fn reads_merge_sources_by_precedence() {
    let high = sink("high");
    let low = sink("low");
    high.apply([Change::Upsert(Arc::new(mk_gateway("ns", "b", "high")))]);
    low.apply([
        Change::Upsert(Arc::new(mk_gateway("ns", "a", "low"))),
        Change::Upsert(Arc::new(mk_gateway("ns", "b", "low"))),
        Change::Upsert(Arc::new(mk_gateway("other", "c", "low"))),
    ]);
    let agg = Aggregate::new(vec![Arc::new(high), Arc::new(low)], QueueOptions::default());
    let listed: Vec<(String, String)> = agg
        .list(Kind::Gateway, None)
        .iter()
        .map(|c| {
            (
                c.meta.name.clone(),
                match &c.spec {
                    Spec::Gateway(g) => g.selector["app"].clone(),
                    _ => unreachable!(),
                },
            )
        })
        .collect();
    assert_eq!(listed, [("a".into(), "low".into()), ("b".into(), "high".into()), ("c".into(), "low".into())]);
    assert_eq!(agg.list(Kind::Gateway, Some("other")).len(), 1);
    assert_eq!(selector(&agg, "b").as_deref(), Some("high"));
    assert_eq!(agg.schemas(), [Kind::Gateway]);
}

#[test]
fn writes_go_to_the_writable_source_or_fail_as_read_only() {
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("vs.yaml"), vs_yaml("ns", "v", "v.example.com")).unwrap();
    let file = ReadOnlySource::new(FileSource::new(files.path(), FileSourceOptions::default()).unwrap());
    let mem = MemoryStore::new("memory", &[Kind::Gateway, Kind::VirtualService], QueueOptions::default());

    let read_only = Aggregate::new(vec![Arc::new(file.clone())], QueueOptions::default());
    assert!(!read_only.writable());
    let err = read_only.create(mk_gateway("ns", "g", "x")).unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }));
    assert!(err.to_string().starts_with("read-only source: aggregate[file:"), "{err}");

    let agg = Aggregate::new(vec![Arc::new(file), Arc::new(mem.clone())], QueueOptions::default());
    assert!(agg.writable());
    agg.create(mk_gateway("ns", "g", "x")).unwrap();
    assert!(mem.get(Kind::Gateway, "ns", "g").is_some());
    assert!(agg.get(Kind::VirtualService, "ns", "v").is_some(), "file objects are readable");
    agg.delete(Kind::Gateway, "ns", "g", None).unwrap();
    assert!(agg.get(Kind::Gateway, "ns", "g").is_none());
}

#[test]
fn configz_lists_objects_as_istio_does() {
    let files = tempfile::tempdir().unwrap();
    let vs = "apiVersion: networking.istio.io/v1beta1\nkind: VirtualService\nmetadata:\n  name: reviews\n  namespace: bookinfo\n  labels: {app: reviews}\n  resourceVersion: \"42\"\nspec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination: {host: reviews, subset: v1}\n";
    std::fs::write(files.path().join("vs.yaml"), vs).unwrap();
    let file = ReadOnlySource::new(FileSource::new(files.path(), FileSourceOptions::default()).unwrap());
    let mem = MemoryStore::new("memory", &[Kind::Gateway], QueueOptions::default());
    mem.create(mk_gateway("", "gw", "ingress")).unwrap();
    let agg = Aggregate::new(vec![Arc::new(file), Arc::new(mem)], QueueOptions::default());
    let dump = configz(&agg);
    let objects = dump.as_array().unwrap();
    assert_eq!(objects.len(), 2);
    let mut vs = objects.iter().find(|o| o["kind"] == "VirtualService").unwrap().clone();
    let file = std::path::absolute(files.path().join("vs.yaml")).unwrap();
    assert_eq!(vs["source"], format!("file://{}", file.display()), "meshpilot's source field");
    let keys: Vec<&str> = vs.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["kind", "apiVersion", "metadata", "spec", "source"],
        "Istio's field order, then source"
    );
    vs.as_object_mut().unwrap().remove("source");
    assert_eq!(
        vs,
        serde_json::json!({
            "kind": "VirtualService",
            "apiVersion": "networking.istio.io/v1beta1",
            "metadata": {"name": "reviews", "namespace": "bookinfo", "resourceVersion": "42",
                         "creationTimestamp": null, "labels": {"app": "reviews"}},
            "spec": {"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews", "subset": "v1"}}]}]}
        })
    );
    let gw = objects.iter().find(|o| o["kind"] == "Gateway").unwrap();
    assert_eq!(gw["apiVersion"], "networking.istio.io/v1");
    assert_eq!(gw["metadata"]["namespace"], "default");
    assert_eq!(gw["metadata"]["resourceVersion"], "1");
    assert!(gw["metadata"]["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    assert!(gw.get("source").is_none(), "a memory store names no source");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn has_synced_waits_for_every_source_and_the_aggregate_queue() {
    let files = tempfile::tempdir().unwrap();
    for i in 0..50 {
        std::fs::write(files.path().join(format!("v{i}.yaml")), vs_yaml("ns", &format!("v{i}"), "h"))
            .unwrap();
    }
    let file = ReadOnlySource::new(FileSource::new(files.path(), FileSourceOptions::default()).unwrap());
    let mem = MemoryStore::new("memory", &[Kind::VirtualService], QueueOptions::default());
    let agg = Aggregate::new(vec![Arc::new(file), Arc::new(mem)], QueueOptions::default());
    let rec = Recorder::new();
    agg.register_event_handler(Kind::VirtualService, rec.handler());
    assert!(!agg.has_synced());
    // Every source not synced is named, with its own reason or a plain one.
    let reason = agg.not_synced_reason().unwrap_or_default();
    assert!(reason.contains("config source memory has not synced"), "{reason}");
    assert!(reason.contains(&format!("config source file:{}", files.path().display())), "{reason}");
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(agg.run(shutdown));
    assert!(eventually(Duration::from_secs(5), || agg.has_synced()).await);
    assert_eq!(agg.not_synced_reason(), None);
    // Synced means the handler has seen the initial state.
    assert_eq!(rec.mirror.lock().unwrap().len(), 50);
    trigger.trigger();
    run.await.unwrap();
}
