//! The memory store: CRUD with optimistic concurrency, read-only mode, events (no-op updates raise
//! none), and no event lost or duplicated under concurrent writers.

use crate::common;

use std::{sync::Arc, time::Duration};

use api::{Kind, Spec};
use common::{Recorder, contents, eventually, mk_gateway};
use meshpilot_config::{Change, MemoryStore, QueueOptions};
use model::{ConfigStore, ConfigStoreController, Event, StoreError, shutdown_channel};

fn store() -> MemoryStore {
    MemoryStore::new("memory", &[Kind::Gateway, Kind::VirtualService], QueueOptions::default())
}

#[test]
fn create_get_list_update_delete_with_resource_versions() {
    let s = store();
    let v1 = s.create(mk_gateway("ns1", "a", "x")).unwrap();
    s.create(mk_gateway("ns2", "b", "x")).unwrap();
    s.create(mk_gateway("ns1", "c", "x")).unwrap();
    assert_eq!(
        s.create(mk_gateway("ns1", "a", "y")),
        Err(StoreError::AlreadyExists(mk_gateway("ns1", "a", "").key()))
    );
    let a = s.get(Kind::Gateway, "ns1", "a").unwrap();
    assert_eq!(a.meta.resource_version, v1);
    assert!(a.meta.creation_timestamp.is_some());
    // Reads share the stored object.
    assert!(Arc::ptr_eq(&a, &s.get(Kind::Gateway, "ns1", "a").unwrap()));
    let names = |ns| s.list(Kind::Gateway, ns).iter().map(|c| c.meta.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(Some("ns1")), ["a", "c"]);
    assert_eq!(names(None), ["a", "c", "b"]);
    assert!(s.list(Kind::VirtualService, None).is_empty());

    // Update with the current version works and bumps it; with a stale one, it conflicts.
    let mut update = mk_gateway("ns1", "a", "y");
    update.meta.resource_version = v1.clone();
    let v2 = s.update(update.clone()).unwrap();
    assert_ne!(v1, v2);
    assert_eq!(s.get(Kind::Gateway, "ns1", "a").unwrap().meta.generation, 1);
    match s.update(update) {
        Err(StoreError::Conflict { given, current, .. }) => {
            assert_eq!((given, current), (v1.clone(), v2.clone()))
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // No version: unconditional.
    s.update(mk_gateway("ns1", "a", "z")).unwrap();
    assert!(matches!(s.update(mk_gateway("ns1", "nope", "z")), Err(StoreError::NotFound(_))));

    // Status update keeps the spec.
    let mut status = mk_gateway("ns1", "a", "ignored");
    status.status = Some(serde_json::json!({"conditions": []}));
    s.update_status(status).unwrap();
    let a = s.get(Kind::Gateway, "ns1", "a").unwrap();
    let Spec::Gateway(g) = &a.spec else { unreachable!() };
    assert_eq!(g.selector["app"], "z");
    assert!(a.status.is_some());

    assert!(matches!(s.delete(Kind::Gateway, "ns1", "a", Some("stale")), Err(StoreError::Conflict { .. })));
    s.delete(Kind::Gateway, "ns1", "a", Some(&a.meta.resource_version)).unwrap();
    assert!(s.get(Kind::Gateway, "ns1", "a").is_none());
    assert!(matches!(s.delete(Kind::Gateway, "ns1", "a", None), Err(StoreError::NotFound(_))));
    assert!(matches!(
        s.create(common::mk_gateway("ns", "x", "y")).and_then(|_| s.delete(Kind::Sidecar, "ns", "x", None)),
        Err(StoreError::UnknownKind { kind: Kind::Sidecar, .. })
    ));
}

#[test]
fn read_only_stores_refuse_writes_but_take_sink_changes() {
    let s = MemoryStore::read_only("mcp:istiod:15010", &[Kind::Gateway], QueueOptions::default());
    assert!(!s.writable());
    let err = s.create(mk_gateway("ns", "a", "x")).unwrap_err();
    assert_eq!(err, StoreError::ReadOnly { source_name: "mcp:istiod:15010".into() });
    assert!(err.to_string().contains("read-only source"));
    assert!(matches!(s.delete(Kind::Gateway, "ns", "a", None), Err(StoreError::ReadOnly { .. })));
    assert_eq!(s.apply([Change::Upsert(Arc::new(mk_gateway("ns", "a", "x")))]), 1);
    assert_eq!(s.replace_kind(Kind::Gateway, [Arc::new(mk_gateway("ns", "b", "x"))]), 2);
    assert_eq!(contents(&s).keys().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["b"]);
}

#[tokio::test]
async fn events_follow_changes_and_noop_updates_raise_none() {
    let s = store();
    s.create(mk_gateway("ns", "existing", "x")).unwrap();
    let rec = Recorder::new();
    s.register_event_handler(Kind::Gateway, rec.handler());
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(s.run(shutdown));

    s.create(mk_gateway("ns", "a", "x")).unwrap();
    assert!(eventually(Duration::from_secs(5), || rec.events.lock().unwrap().len() == 2).await);
    assert!(s.has_synced());
    // Status-only and version-only changes: no event.
    let mut status = mk_gateway("ns", "a", "x");
    status.status = Some(serde_json::json!({"observedGeneration": 1}));
    s.update_status(status).unwrap();
    s.update(mk_gateway("ns", "a", "x")).unwrap();
    s.update(mk_gateway("ns", "a", "y")).unwrap();
    s.delete(Kind::Gateway, "ns", "existing", None).unwrap();
    let settled =
        eventually(Duration::from_secs(5), || s.queue().is_empty() && rec.mirrors(&contents(&s))).await;
    assert!(settled);
    let events: Vec<(Event, String)> = rec.take_events().into_iter().map(|(e, k)| (e, k.name)).collect();
    assert_eq!(
        events,
        [
            (Event::Add, "existing".into()),
            (Event::Add, "a".into()),
            (Event::Update, "a".into()),
            (Event::Delete, "existing".into())
        ]
    );
    assert!(rec.violations().is_empty(), "{:?}", rec.violations());
    trigger.trigger();
    run.await.unwrap();
}

/// Several writer tasks create, update (with read-modify-write and conflict retries) and delete
/// overlapping objects while the worker delivers events: the handler's view ends equal to the store,
/// and no call contradicts what the handler saw before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_event_is_lost_or_duplicated_under_concurrent_writers() {
    let s = store();
    let rec = Recorder::new();
    s.register_event_handler(Kind::Gateway, rec.handler());
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(s.run(shutdown));

    let mut writers = Vec::new();
    for w in 0..6u32 {
        let s = s.clone();
        writers.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for i in 0..400u32 {
                let name = format!("obj{}", (i * 7 + w) % 13);
                match (i + w) % 4 {
                    0 => {
                        let _ = s.create(mk_gateway("ns", &name, &format!("w{w}i{i}")));
                    }
                    1 | 2 => {
                        // Read-modify-write with the read version: conflicts are expected and retried.
                        for _ in 0..10 {
                            let Some(current) = s.get(Kind::Gateway, "ns", &name) else { break };
                            let mut next = mk_gateway("ns", &name, &format!("w{w}i{i}"));
                            next.meta.resource_version = current.meta.resource_version.clone();
                            match s.update(next) {
                                Err(StoreError::Conflict { .. }) => conflicts += 1,
                                _ => break,
                            }
                        }
                    }
                    _ => {
                        let _ = s.delete(Kind::Gateway, "ns", &name, None);
                    }
                }
                if i % 50 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else {
                    tokio::task::yield_now().await;
                }
            }
            conflicts
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let settled =
        eventually(Duration::from_secs(10), || s.queue().is_empty() && rec.mirrors(&contents(&s))).await;
    assert!(settled, "handler view differs from the store");
    assert!(rec.violations().is_empty(), "{:#?}", rec.violations());
    let events = rec.events.lock().unwrap().len();
    // Coalescing merges many changes, but writers and the worker interleave enough for hundreds.
    assert!(events > 100, "only {events} events: the writers did not exercise the queue");
    trigger.trigger();
    run.await.unwrap();
}
