//! The file source: initial load, watching (writes, renames, deletions, ConfigMap `..data` swaps),
//! bad files keeping their last good objects, duplicates, read-only writes, the shared corpus.

use crate::common;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use api::Kind;
use common::{
    Barrier, ConfigMapMount, Recorder, contents, contents_without_barrier, dr_yaml, eventually,
    expected_objects, is_barrier, testdata, vs_yaml, write_atomic,
};
use meshpilot_config::parse::{ParseOptions, config_files, parse_text};
use meshpilot_config::{FileSource, FileSourceOptions, ReadOnlySource};
use model::{Config, ConfigKey, ConfigStore, ConfigStoreController, Event, StoreError, shutdown_channel};

fn key(kind: Kind, ns: &str, name: &str) -> ConfigKey {
    ConfigKey { kind, namespace: ns.into(), name: name.into() }
}

fn names(store: &dyn ConfigStore) -> Vec<String> {
    contents(store).keys().map(|k| format!("{}/{}/{}", k.kind, k.namespace, k.name)).collect()
}

fn fast() -> FileSourceOptions {
    FileSourceOptions {
        debounce: Duration::from_millis(20),
        rescan_interval: None,
        ..FileSourceOptions::default()
    }
}

#[test]
fn initial_load_reads_the_tree_and_ignores_other_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("a.yaml"), vs_yaml("ns", "a", "a.example.com")).unwrap();
    std::fs::create_dir_all(d.join("sub/deeper")).unwrap();
    std::fs::write(d.join("sub/deeper/b.yml"), dr_yaml("ns", "b", "b.example.com")).unwrap();
    std::fs::write(d.join("sub/c.json"), r#"{"apiVersion":"networking.istio.io/v1","kind":"DestinationRule","metadata":{"name":"c"},"spec":{"host":"c"}}"#).unwrap();
    std::fs::write(d.join("notes.txt"), vs_yaml("ns", "ignored", "x")).unwrap();
    std::fs::write(d.join(".hidden.yaml"), vs_yaml("ns", "hidden", "x")).unwrap();
    // Kubernetes kinds are skipped, not errors.
    std::fs::write(d.join("svc.yaml"), "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: s}\n")
        .unwrap();
    let source = FileSource::new(d, FileSourceOptions::default()).unwrap();
    assert_eq!(
        names(source.store()),
        ["VirtualService/ns/a", "DestinationRule/default/c", "DestinationRule/ns/b"]
    );
    assert!(source.status().bad_files.is_empty());
    assert_eq!(source.status().files, 4, "a, b, c and svc; not notes.txt or .hidden.yaml");
}

#[test]
fn a_missing_directory_is_an_error() {
    let err = FileSource::new("/nonexistent/meshpilot-config", FileSourceOptions::default()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn writes_are_refused_as_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let source = ReadOnlySource::new(FileSource::new(dir.path(), FileSourceOptions::default()).unwrap());
    assert!(!source.writable());
    let err = source.create(common::mk_gateway("ns", "g", "x")).unwrap_err();
    assert!(
        matches!(&err, StoreError::ReadOnly { source_name } if source_name.starts_with("file:")),
        "{err}"
    );
    assert!(err.to_string().starts_with("read-only source: file:"), "{err}");
    assert!(matches!(source.delete(Kind::Gateway, "ns", "g", None), Err(StoreError::ReadOnly { .. })));
}

#[test]
fn a_bad_file_keeps_all_its_last_good_objects_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = format!("{}---\n{}", vs_yaml("ns", "a", "a.example.com"), dr_yaml("ns", "b", "b.example.com"));
    std::fs::write(d.join("app.yaml"), &good).unwrap();
    std::fs::write(d.join("other.yaml"), vs_yaml("ns", "other", "o.example.com")).unwrap();
    let source = FileSource::new(d, FileSourceOptions::default()).unwrap();
    assert_eq!(
        names(source.store()),
        ["VirtualService/ns/a", "VirtualService/ns/other", "DestinationRule/ns/b"]
    );

    // Change `a`, drop `b`, and break the second document: nothing of the new content applies.
    let bad = format!(
        "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: c, namespace: ns}}\nspec:\n  host: c\n  trafficPolicy: 7\n",
        vs_yaml("ns", "a", "changed.example.com")
    );
    std::fs::write(d.join("app.yaml"), &bad).unwrap();
    std::fs::write(d.join("other.yaml"), vs_yaml("ns", "other2", "o.example.com")).unwrap();
    source.rescan().unwrap();
    assert_eq!(
        names(source.store()),
        ["VirtualService/ns/a", "VirtualService/ns/other2", "DestinationRule/ns/b"]
    );
    let a = source.store().get(Kind::VirtualService, "ns", "a").unwrap();
    let api::Spec::VirtualService(vs) = &a.spec else { unreachable!() };
    assert_eq!(vs.hosts, ["a.example.com"], "the last good version stays");

    let status = source.status();
    assert_eq!(status.bad_files.len(), 1);
    let bad_file = &status.bad_files[0];
    assert_eq!(bad_file.file, d.join("app.yaml"));
    assert_eq!(bad_file.kept_objects, 2);
    let e = &bad_file.errors[0];
    assert_eq!((e.document, e.line, e.path.as_str()), (1, 18, "spec.trafficPolicy"), "{e:?}");
    assert_eq!(e.object, "DestinationRule/ns/c");
    let json = status.to_json();
    assert_eq!(json["badFiles"][0]["errors"][0]["line"], 18);
    assert!(json["badFiles"][0]["since"].as_str().unwrap().ends_with('Z'));
    let since = bad_file.since;

    // Still bad, other errors: `since` stays. A syntax error or non-UTF-8 bytes are bad too.
    std::fs::write(d.join("app.yaml"), "key: [unclosed\n").unwrap();
    source.rescan().unwrap();
    assert_eq!(source.status().bad_files[0].since, since);
    assert!(source.status().bad_files[0].errors[0].message.starts_with("YAML syntax error"));
    std::fs::write(d.join("app.yaml"), b"\xff\xfe bad bytes").unwrap();
    source.rescan().unwrap();
    assert!(source.status().bad_files[0].errors[0].message.starts_with("not UTF-8"));
    assert_eq!(
        names(source.store()),
        ["VirtualService/ns/a", "VirtualService/ns/other2", "DestinationRule/ns/b"]
    );

    // Fixed: the new content applies and the report goes away.
    std::fs::write(d.join("app.yaml"), vs_yaml("ns", "a", "fixed.example.com")).unwrap();
    source.rescan().unwrap();
    assert_eq!(names(source.store()), ["VirtualService/ns/a", "VirtualService/ns/other2"]);
    assert!(source.status().bad_files.is_empty());

    // A file that was never good contributes nothing; deleting a bad file deletes its last good objects.
    std::fs::write(
        d.join("new.yaml"),
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec: {servers: 3}\n",
    )
    .unwrap();
    std::fs::write(d.join("app.yaml"), "- not an object\n").unwrap();
    source.rescan().unwrap();
    assert_eq!(source.status().bad_files.len(), 2);
    assert_eq!(source.status().bad_files[1].kept_objects, 0);
    std::fs::remove_file(d.join("app.yaml")).unwrap();
    source.rescan().unwrap();
    assert_eq!(names(source.store()), ["VirtualService/ns/other2"]);
    assert_eq!(source.status().bad_files.len(), 1);
}

#[test]
fn findings_on_kubernetes_services_do_not_make_a_file_bad() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: s}}\nspec:\n  ports:\n  - port: 80\n    name: 3\n---\n{}",
        vs_yaml("ns", "a", "a.example.com")
    );
    let docs = parse_text("x.yaml", &text, &ParseOptions::default());
    std::fs::write(dir.path().join("x.yaml"), text).unwrap();
    let source = FileSource::new(dir.path(), FileSourceOptions::default()).unwrap();
    assert_eq!(names(source.store()), ["VirtualService/ns/a"], "{docs:#?}");
    assert!(source.status().bad_files.is_empty());
}

#[test]
fn duplicates_first_path_wins_and_the_next_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("b.yaml"), vs_yaml("ns", "x", "from-b")).unwrap();
    std::fs::write(d.join("a.yaml"), vs_yaml("ns", "x", "from-a")).unwrap();
    std::fs::write(
        d.join("c.yaml"),
        format!("{}---\n{}", vs_yaml("ns", "y", "first"), vs_yaml("ns", "y", "second")),
    )
    .unwrap();
    let source = FileSource::new(d, FileSourceOptions::default()).unwrap();
    let host = |name: &str| match &source.store().get(Kind::VirtualService, "ns", name).unwrap().spec {
        api::Spec::VirtualService(vs) => vs.hosts[0].clone(),
        _ => unreachable!(),
    };
    assert_eq!((host("x"), host("y")), ("from-a".to_string(), "first".to_string()));
    let status = source.status();
    assert_eq!(status.duplicates.len(), 2);
    assert_eq!(status.duplicates[0].files, [d.join("a.yaml"), d.join("b.yaml")]);
    assert_eq!(status.duplicates[1].files, [d.join("c.yaml"), d.join("c.yaml")]);
    std::fs::remove_file(d.join("a.yaml")).unwrap();
    source.rescan().unwrap();
    assert_eq!(host("x"), "from-b");
    assert_eq!(source.status().duplicates.len(), 1);
}

/// With the watcher running and the default debounce: writes, atomic replaces, renames, deletions and
/// a whole directory removal each end in exactly the events that turn the old set into the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_turns_file_changes_into_events() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    std::fs::write(d.join("a.yaml"), vs_yaml("ns", "a", "a1")).unwrap();
    let source = FileSource::new(&d, FileSourceOptions::default()).unwrap();
    let store = ReadOnlySource::new(source.clone());
    let rec = Recorder::new();
    store.register_event_handler(Kind::VirtualService, rec.handler());
    store.register_event_handler(Kind::DestinationRule, rec.handler());
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(store.run(shutdown));
    assert!(eventually(Duration::from_secs(5), || store.has_synced()).await);

    // A barrier (a later change that must arrive) instead of a pause: once its event reached the
    // handler, every event of earlier scans has too (one FIFO queue per source).
    let mut barrier = Barrier::new(&d);
    let mut through_barrier = async || -> Vec<(Event, ConfigKey)> {
        let name = barrier.pass(&source).await;
        let seen = eventually(Duration::from_secs(10), || {
            rec.events.lock().unwrap().iter().any(|(_, k)| k.name == name)
        })
        .await;
        assert!(seen, "the barrier's event did not reach the handler");
        let mut events = rec.take_events();
        events.retain(|(_, k)| !is_barrier(&k.name));
        events
    };
    let mut settle = async |expect: Vec<(Event, ConfigKey)>| {
        let ok =
            eventually(Duration::from_secs(5), || rec.events.lock().unwrap().len() >= expect.len()).await;
        assert!(ok, "timed out; events so far {:?}", rec.events.lock().unwrap());
        assert_eq!(through_barrier().await, expect);
        assert!(rec.mirrors(&contents(&store)));
        assert!(rec.violations().is_empty(), "{:?}", rec.violations());
    };
    let vs = |n: &str| key(Kind::VirtualService, "ns", n);
    let dr = |n: &str| key(Kind::DestinationRule, "ns", n);
    settle(vec![(Event::Add, vs("a"))]).await;

    std::fs::write(d.join("a.yaml"), vs_yaml("ns", "a", "a2")).unwrap();
    settle(vec![(Event::Update, vs("a"))]).await;

    write_atomic(
        &d.join("sub/b.yaml"),
        format!("{}---\n{}", dr_yaml("ns", "b", "b"), vs_yaml("ns", "c", "c")).as_bytes(),
    );
    settle(vec![(Event::Add, vs("c")), (Event::Add, dr("b"))]).await;

    // Renaming a file keeps its objects: no event at all (same content, new path).
    std::fs::rename(d.join("sub/b.yaml"), d.join("sub/renamed.yaml")).unwrap();
    settle(vec![]).await;
    assert_eq!(contents_without_barrier(&store).len(), 3);

    // Touching a file without changing it: nothing.
    std::fs::write(d.join("a.yaml"), vs_yaml("ns", "a", "a2")).unwrap();
    settle(vec![]).await;

    std::fs::remove_file(d.join("a.yaml")).unwrap();
    settle(vec![(Event::Delete, vs("a"))]).await;

    std::fs::remove_dir_all(d.join("sub")).unwrap();
    settle(vec![(Event::Delete, vs("c")), (Event::Delete, dr("b"))]).await;
    assert!(contents_without_barrier(&store).is_empty());

    trigger.trigger();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("clean shutdown").unwrap();
}

/// A completed write is read at once, without waiting out the debounce (issue 22): with a debounce of
/// an hour, an atomic rename, a plain write-and-close and a removal each still reach the handler. A
/// file held open for writing is read only once closed (its objects arrive with the close).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completed_writes_are_read_without_waiting_for_the_debounce() {
    use std::io::{Seek, Write};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let options = FileSourceOptions { debounce: Duration::from_secs(3600), rescan_interval: None, ..fast() };
    let source = FileSource::new(&d, options).unwrap();
    let store = ReadOnlySource::new(source.clone());
    let rec = Recorder::new();
    store.register_event_handler(Kind::VirtualService, rec.handler());
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(store.run(shutdown));
    assert!(eventually(Duration::from_secs(5), || store.has_synced()).await);
    let vs = |n: &str| key(Kind::VirtualService, "ns", n);
    let next = async |expect: (Event, ConfigKey)| {
        let seen = eventually(Duration::from_secs(20), || !rec.events.lock().unwrap().is_empty()).await;
        assert!(seen, "no event for {expect:?} within 20 s: the scan waited for the debounce");
        assert_eq!(rec.take_events(), vec![expect]);
    };

    write_atomic(&d.join("a.yaml"), vs_yaml("ns", "a", "a1").as_bytes());
    next((Event::Add, vs("a"))).await;
    std::fs::write(d.join("b.yaml"), vs_yaml("ns", "b", "b1")).unwrap();
    next((Event::Add, vs("b"))).await;
    std::fs::remove_file(d.join("a.yaml")).unwrap();
    next((Event::Delete, vs("a"))).await;

    // Held open across two writes of different content (the second overwrites the first in place):
    // read only after the close, so one Add of the final content, never an Add of the first and an
    // Update (the barrier file written next orders the events: one FIFO queue per source).
    let first = vs_yaml("ns", "c", "c0");
    let last = vs_yaml("ns", "c", "c1");
    assert_eq!(first.len(), last.len());
    let mut file = std::fs::File::create(d.join("c.yaml")).unwrap();
    file.write_all(first.as_bytes()).unwrap();
    file.sync_all().unwrap();
    file.seek(std::io::SeekFrom::Start(0)).unwrap();
    file.write_all(last.as_bytes()).unwrap();
    drop(file);
    write_atomic(&d.join("d.yaml"), vs_yaml("ns", "d", "d1").as_bytes());
    let both = eventually(Duration::from_secs(20), || rec.events.lock().unwrap().len() >= 2).await;
    assert!(both, "events so far {:?}", rec.events.lock().unwrap());
    assert_eq!(rec.take_events(), vec![(Event::Add, vs("c")), (Event::Add, vs("d"))]);
    let c = store.get(Kind::VirtualService, "ns", "c").unwrap();
    assert!(format!("{:?}", c.spec).contains("c1"), "{:?}", c.spec);

    trigger.trigger();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("clean shutdown").unwrap();
}

/// A Kubernetes ConfigMap mount: files are symlinks through `..data`, which is swapped atomically.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_data_symlink_swaps_are_seen() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let a1 = vs_yaml("ns", "a", "a1");
    let b1 = dr_yaml("ns", "b", "b1");
    let mut mount = ConfigMapMount::new(&d, &[("a.yaml", a1.as_bytes()), ("b.yaml", b1.as_bytes())]);
    let source = FileSource::new(&d, FileSourceOptions::default()).unwrap();
    let store = ReadOnlySource::new(source.clone());
    assert_eq!(names(&store), ["VirtualService/ns/a", "DestinationRule/ns/b"]);
    // Read once through the visible names, not again through `..data` or the timestamped directory.
    assert_eq!(source.status().files, 2);
    let rec = Recorder::new();
    store.register_event_handler(Kind::VirtualService, rec.handler());
    store.register_event_handler(Kind::DestinationRule, rec.handler());
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(store.run(shutdown));
    assert!(eventually(Duration::from_secs(5), || rec.events.lock().unwrap().len() == 2).await);
    rec.take_events();

    let a2 = vs_yaml("ns", "a", "a2");
    mount.swap(&[("a.yaml", a2.as_bytes()), ("b.yaml", b"")]);
    assert!(eventually(Duration::from_secs(5), || rec.events.lock().unwrap().len() >= 2).await);
    // No stray events: a later change (the barrier) arrives with nothing else before it.
    let name = Barrier::new(&d).pass(&source).await;
    assert!(
        eventually(Duration::from_secs(10), || {
            rec.events.lock().unwrap().iter().any(|(_, k)| k.name == name)
        })
        .await
    );
    let mut events = rec.take_events();
    assert_eq!(events.pop().map(|(e, k)| (e, k.name)), Some((Event::Add, name)));
    // The two objects' events may come from one scan or from two (a scan that began before the swap
    // reads one file through the old `..data` and one through the new): their order is not the point.
    events.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    assert_eq!(
        events,
        [
            (Event::Update, key(Kind::VirtualService, "ns", "a")),
            (Event::Delete, key(Kind::DestinationRule, "ns", "b"))
        ]
    );
    // A bad swap keeps the last good objects.
    mount.swap(&[("a.yaml", b"kind: [broken\n"), ("b.yaml", b1.as_bytes())]);
    assert!(eventually(Duration::from_secs(5), || !source.status().bad_files.is_empty()).await);
    assert!(eventually(Duration::from_secs(5), || rec.events.lock().unwrap().len() == 1).await);
    let names: Vec<String> = contents_without_barrier(&store)
        .keys()
        .map(|k| format!("{}/{}/{}", k.kind, k.namespace, k.name))
        .collect();
    assert_eq!(names, ["VirtualService/ns/a", "DestinationRule/ns/b"]);
    assert!(rec.violations().is_empty(), "{:?}", rec.violations());
    trigger.trigger();
    run.await.unwrap();
}

/// The watch cannot be set when `run` starts (the directory is gone, as when notify's walk races a
/// removal): it is retried, and once the directory exists again its files are read and later
/// changes are seen (no periodic re-scan here, so only a watch can see them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_cannot_be_set_is_retried() {
    let parent = tempfile::tempdir().unwrap();
    let d = parent.path().join("config");
    std::fs::create_dir(&d).unwrap();
    let source = FileSource::new(&d, fast()).unwrap();
    let store = ReadOnlySource::new(source.clone());
    std::fs::remove_dir(&d).unwrap();
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(store.run(shutdown));
    // The initial scan, then the one `run` makes after its first attempt to watch.
    assert!(eventually(Duration::from_secs(5), || source.scans().completed >= 2).await);

    write_atomic(&d.join("a.yaml"), vs_yaml("ns", "a", "a1").as_bytes());
    assert!(
        eventually(Duration::from_secs(10), || store.get(Kind::VirtualService, "ns", "a").is_some()).await
    );
    Barrier::new(&d).pass(&source).await;
    trigger.trigger();
    run.await.unwrap();
}

/// The watched directory is replaced (moved away, a new one created in its place): the new one is
/// watched, so a change inside it after the swap is seen without any periodic re-scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_directory_is_watched_again() {
    let parent = tempfile::tempdir().unwrap();
    let d = parent.path().join("config");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("a.yaml"), vs_yaml("ns", "a", "a1")).unwrap();
    let source = FileSource::new(&d, fast()).unwrap();
    let store = ReadOnlySource::new(source.clone());
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(store.run(shutdown));
    let mut barrier = Barrier::new(&d);
    barrier.pass(&source).await;

    let staged = parent.path().join("staged");
    std::fs::create_dir(&staged).unwrap();
    std::fs::write(staged.join("b.yaml"), dr_yaml("ns", "b", "b1")).unwrap();
    std::fs::rename(&d, parent.path().join("old")).unwrap();
    std::fs::rename(&staged, &d).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || store.get(Kind::DestinationRule, "ns", "b").is_some()).await
    );
    // Only a watch on the new directory can see this.
    barrier.pass(&source).await;
    assert_eq!(names(&store), ["DestinationRule/default/zz-barrier-2", "DestinationRule/ns/b"]);
    trigger.trigger();
    run.await.unwrap();
}

/// The periodic re-scan picks up changes even without file events (here: no watcher events are
/// possible because the change happens before `run`, and the watch start scan is the only other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_rescans_run() {
    let dir = tempfile::tempdir().unwrap();
    let options = FileSourceOptions { rescan_interval: Some(Duration::from_millis(50)), ..fast() };
    let source = FileSource::new(dir.path(), options).unwrap();
    let store = ReadOnlySource::new(source.clone());
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(store.run(shutdown));
    assert!(eventually(Duration::from_secs(5), || source.scans().completed >= 5).await);
    trigger.trigger();
    run.await.unwrap();
}

/// Several writer tasks change their own files and a shared one concurrently while the watcher runs:
/// the final store equals a fresh parse, and the handler saw a consistent event chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_lose_no_event() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let source = FileSource::new(&d, fast()).unwrap();
    let store = ReadOnlySource::new(source.clone());
    let rec = Recorder::new();
    store.register_event_handler(Kind::VirtualService, rec.handler());
    let (trigger, shutdown) = shutdown_channel();
    let run = tokio::spawn(store.run(shutdown));
    let mut writers = Vec::new();
    for w in 0..4u32 {
        let d = d.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..40u32 {
                let file = d.join(format!("w{w}/f{}.yaml", i % 3));
                let text = (0..(i % 4))
                    .map(|j| vs_yaml("ns", &format!("o{}", (i + j) % 5), &format!("w{w}-{i}")))
                    .collect::<Vec<_>>()
                    .join("---\n");
                if i % 7 == 6 {
                    let _ = std::fs::remove_file(&file);
                } else {
                    write_atomic(&file, text.as_bytes());
                }
                if i % 5 == 0 {
                    tokio::time::sleep(Duration::from_millis(7)).await;
                }
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let mut barrier = Barrier::new(&d);
    barrier.pass(&source).await;
    let expected = expected_objects(&d, &mut BTreeMap::new());
    assert_eq!(contents_without_barrier(&store), expected);
    let ok = eventually(Duration::from_secs(5), || {
        source.store().queue().is_empty()
            && rec.mirrors(
                &contents(&store).into_iter().filter(|(k, _)| k.kind == Kind::VirtualService).collect(),
            )
    })
    .await;
    assert!(ok);
    assert!(rec.violations().is_empty(), "{:?}", rec.violations());
    trigger.trigger();
    run.await.unwrap();
}

/// The whole shared corpus (`tests/testdata/config`, `samples/**`) through the file source gives
/// exactly the objects the parser gives (first definition wins for names defined twice).
#[test]
fn the_shared_corpus_loads_as_the_parser_reads_it() {
    for rel in ["tests/testdata/config", "samples"] {
        let dir = testdata().join(rel);
        let source = FileSource::new(&dir, FileSourceOptions::default()).unwrap();
        let mut expected: BTreeMap<ConfigKey, Config> = BTreeMap::new();
        let mut bad: Vec<PathBuf> = Vec::new();
        let mut parsed = 0;
        for file in config_files(&dir).unwrap() {
            let text = std::fs::read_to_string(&file).unwrap();
            let docs = parse_text(&file.display().to_string(), &text, &ParseOptions::default());
            if docs
                .iter()
                .any(|d| !d.errors.is_empty() && !matches!(d.kind.as_str(), "Service" | "Deployment"))
            {
                bad.push(file);
                continue;
            }
            for config in docs.into_iter().filter_map(|d| d.config) {
                parsed += 1;
                expected.entry(config.key()).or_insert(config);
            }
        }
        let got = contents(source.store());
        println!("{rel}: {parsed} objects parsed, {} distinct, {} bad files", expected.len(), bad.len());
        assert!(expected.len() > 20, "{rel}: corpus too small? {}", expected.len());
        assert_eq!(got.len(), expected.len(), "{rel}");
        for (k, c) in &expected {
            assert_eq!(got.get(k), Some(c), "{rel}: {k}");
        }
        let status = source.status();
        let reported: Vec<&Path> = status.bad_files.iter().map(|b| b.file.as_path()).collect();
        assert_eq!(reported, bad.iter().map(PathBuf::as_path).collect::<Vec<_>>());
        // Loaded objects are shared, not copied, on reads.
        let first = source.store().list(Kind::VirtualService, None);
        let again = source.store().list(Kind::VirtualService, None);
        assert!(first.iter().zip(&again).all(|(a, b)| Arc::ptr_eq(a, b)));
    }
}

/// Arbitrary bytes in config files never panic the source; whatever parses is in force.
#[test]
fn garbage_files_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let samples: [&[u8]; 8] = [
        b"\x00\x01\x02",
        b"---\n---\n...\n",
        b"{{{{",
        b"apiVersion: 3\nkind: [a]\n",
        b"*alias\n",
        b"a: &a [*a]\n",
        b"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: \"\"}\nspec: null\n",
        b"[]",
    ];
    for (i, s) in samples.iter().enumerate() {
        std::fs::write(d.join(format!("g{i}.yaml")), s).unwrap();
    }
    let source = FileSource::new(d, FileSourceOptions::default()).unwrap();
    let status = source.status();
    assert!(status.bad_files.len() >= 4, "{:#?}", status.bad_files);
}
