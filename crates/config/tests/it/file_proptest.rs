//! Property tests: random sequences of file writes (in place and atomic), renames, deletions,
//! directory removals and ConfigMap `..data` swaps, with bad files in the mix. After each step the
//! store must equal what a fresh parse of the directory gives under the source's rules (bad files
//! keep their last good objects, first path wins), and the handler's events must form a consistent
//! chain whose result equals the store.
//!
//! Three modes:
//! - *scan*: the test calls `rescan()` after each step (no watcher); every intermediate state is seen.
//! - *watch*: the watcher runs; after each step a barrier file proves a scan saw the step. In-place
//!   writes (not atomic: a scan may see a truncated file) only ever write good content here, since a
//!   truncated file seen mid-write could otherwise become a "last good" state the model cannot know.
//! - *burst*: the watcher runs and steps follow each other with no wait (good content only, so the
//!   final state is determined); one barrier at the end.
//!
//! A fourth property feeds arbitrary bytes into files: the source never panics.

use crate::common;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use api::Kind;
use common::{
    Barrier, ConfigMapMount, Recorder, contents, contents_without_barrier, dr_yaml, expected_objects,
    vs_yaml, write_atomic,
};
use meshpilot_config::{FileSource, FileSourceOptions, ReadOnlySource};
use model::{Config, ConfigKey, ConfigStoreController, shutdown_channel};
use proptest::prelude::*;

const FILES: [&str; 6] = ["a.yaml", "b.yml", "sub/c.yaml", "sub/deep/d.yaml", "e.json", "sub/f.yaml"];
const CM_KEYS: [&str; 2] = ["m1.yaml", "m2.yaml"];

#[derive(Clone, Debug)]
struct Obj {
    dr: bool,
    namespace: u8,
    name: u8,
    host: u8,
}

#[derive(Clone, Debug)]
enum Content {
    Good(Vec<Obj>),
    /// Good documents followed by a broken one (invalid field, YAML syntax, not UTF-8).
    Bad(Vec<Obj>, u8),
}

#[derive(Clone, Debug)]
enum Op {
    Write(usize, Content),
    WriteAtomic(usize, Content),
    Delete(usize),
    Rename(usize, usize),
    RemoveSubdir,
    SwapConfigMap(Content, Content),
}

fn obj() -> impl Strategy<Value = Obj> {
    (any::<bool>(), 0u8..2, 0u8..4, 0u8..3).prop_map(|(dr, namespace, name, host)| Obj {
        dr,
        namespace,
        name,
        host,
    })
}

fn good() -> impl Strategy<Value = Content> {
    prop::collection::vec(obj(), 0..4).prop_map(Content::Good)
}

fn content() -> impl Strategy<Value = Content> {
    prop_oneof![
        3 => good(),
        1 => (prop::collection::vec(obj(), 0..3), 0u8..3).prop_map(|(o, b)| Content::Bad(o, b)),
    ]
}

fn op(content: BoxedStrategy<Content>, in_place: BoxedStrategy<Content>) -> impl Strategy<Value = Op> {
    let file = 0..FILES.len();
    prop_oneof![
        3 => (file.clone(), in_place).prop_map(|(f, c)| Op::Write(f, c)),
        3 => (file.clone(), content.clone()).prop_map(|(f, c)| Op::WriteAtomic(f, c)),
        2 => file.clone().prop_map(Op::Delete),
        1 => (file.clone(), file).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => Just(Op::RemoveSubdir),
        2 => (content.clone(), content).prop_map(|(a, b)| Op::SwapConfigMap(a, b)),
    ]
}

fn render(path: &str, content: &Content) -> Vec<u8> {
    let json = path.ends_with(".json");
    let doc = |o: &Obj| {
        let (ns, name, host) =
            (format!("ns{}", o.namespace), format!("o{}", o.name), format!("h{}.example.com", o.host));
        if json {
            let kind = if o.dr { "DestinationRule" } else { "VirtualService" };
            let spec = if o.dr {
                format!(r#"{{"host":"{host}"}}"#)
            } else {
                format!(
                    r#"{{"hosts":["{host}"],"http":[{{"route":[{{"destination":{{"host":"{host}"}}}}]}}]}}"#
                )
            };
            format!(
                r#"{{"apiVersion":"networking.istio.io/v1","kind":"{kind}","metadata":{{"name":"{name}","namespace":"{ns}"}},"spec":{spec}}}"#
            )
        } else if o.dr {
            dr_yaml(&ns, &name, &host)
        } else {
            vs_yaml(&ns, &name, &host)
        }
    };
    let (objs, broken) = match content {
        Content::Good(o) => (o, None),
        Content::Bad(o, b) => (o, Some(*b)),
    };
    // JSON files hold one document: a JSON array is not an object, so use a List.
    let mut text = if json {
        let items: Vec<String> = objs.iter().map(doc).collect();
        let extra = match broken {
            Some(0) => {
                r#",{"apiVersion":"networking.istio.io/v1","kind":"DestinationRule","metadata":{"name":"bad"},"spec":{"host":7}}"#
            }
            Some(_) => ",{{{",
            None => "",
        };
        format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[{}{}]}}"#,
            items.join(","),
            if items.is_empty() { extra.trim_start_matches(',') } else { extra }
        )
    } else {
        let mut docs: Vec<String> = objs.iter().map(doc).collect();
        match broken {
            Some(0) => docs.push("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: bad}\nspec: {host: 7}\n".into()),
            Some(_) => docs.push("key: [unclosed\n".into()),
            None => {}
        }
        docs.join("---\n")
    };
    let mut bytes = std::mem::take(&mut text).into_bytes();
    if broken == Some(2) {
        bytes.extend_from_slice(b"\n# \xff\xfe\n");
    }
    bytes
}

struct Fixture {
    dir: tempfile::TempDir,
    mount: ConfigMapMount,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let empty: &[u8] = b"";
        let mount = ConfigMapMount::new(&dir.path().join("cm"), &[(CM_KEYS[0], empty), (CM_KEYS[1], empty)]);
        Fixture { dir, mount }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn apply(&mut self, op: &Op) {
        let path = |i: usize| -> PathBuf { self.dir.path().join(FILES[i]) };
        match op {
            Op::Write(i, c) => {
                std::fs::create_dir_all(path(*i).parent().unwrap()).unwrap();
                std::fs::write(path(*i), render(FILES[*i], c)).unwrap();
            }
            Op::WriteAtomic(i, c) => write_atomic(&path(*i), &render(FILES[*i], c)),
            Op::Delete(i) => {
                let _ = std::fs::remove_file(path(*i));
            }
            Op::Rename(a, b) => {
                if path(*a).exists() {
                    std::fs::create_dir_all(path(*b).parent().unwrap()).unwrap();
                    std::fs::rename(path(*a), path(*b)).unwrap();
                }
            }
            Op::RemoveSubdir => {
                let _ = std::fs::remove_dir_all(self.dir.path().join("sub"));
            }
            Op::SwapConfigMap(a, b) => {
                let (a, b) = (render(CM_KEYS[0], a), render(CM_KEYS[1], b));
                self.mount.swap(&[(CM_KEYS[0], &a), (CM_KEYS[1], &b)]);
            }
        }
    }
}

fn options() -> FileSourceOptions {
    FileSourceOptions {
        debounce: Duration::from_millis(15),
        rescan_interval: None,
        ..FileSourceOptions::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Waits until the queue is drained and the handler's view equals the store.
async fn handler_caught_up(source: &FileSource, rec: &Recorder) {
    let ok = common::eventually(Duration::from_secs(10), || {
        source.store().queue().is_empty() && rec.mirrors(&contents(source.store()))
    })
    .await;
    assert!(ok, "handler view never matched the store");
    assert!(rec.violations().is_empty(), "{:#?}", rec.violations());
}

fn register(source: &dyn ConfigStoreController) -> std::sync::Arc<Recorder> {
    let rec = Recorder::new();
    for kind in [Kind::VirtualService, Kind::DestinationRule] {
        source.register_event_handler(kind, rec.handler());
    }
    rec
}

fn check_step(
    source: &FileSource,
    root: &Path,
    last_good: &mut BTreeMap<PathBuf, Vec<Config>>,
    step: usize,
    op: &Op,
) {
    let expected: BTreeMap<ConfigKey, Config> = expected_objects(root, last_good);
    let got = contents_without_barrier(source.store());
    assert_eq!(got, expected, "after step {step} ({op:?})");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn scan_mode(ops in prop::collection::vec(op(content().boxed(), content().boxed()), 1..14)) {
        let rt = runtime();
        rt.block_on(async {
            let mut fx = Fixture::new();
            let source = FileSource::new(fx.root(), options()).unwrap();
            let rec = register(source.store());
            let (trigger, shutdown) = shutdown_channel();
            let queue = source.store().queue().clone();
            let worker = tokio::spawn(async move { queue.run(shutdown).await });
            let mut last_good = BTreeMap::new();
            check_step(&source, fx.root(), &mut last_good, 0, &Op::RemoveSubdir);
            for (i, op) in ops.iter().enumerate() {
                fx.apply(op);
                source.rescan().unwrap();
                check_step(&source, fx.root(), &mut last_good, i + 1, op);
            }
            handler_caught_up(&source, &rec).await;
            trigger.trigger();
            worker.await.unwrap();
        });
    }
}

proptest! {
    // A failing case is kept next to this file (`file_proptest.proptest-regressions`) and replayed first: the
    // default persistence looks for lib.rs and, in an integration test, keeps nothing.
    #![proptest_config(ProptestConfig {
        cases: 12,
        max_shrink_iters: 50,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn watch_mode(ops in prop::collection::vec(op(content().boxed(), good().boxed()), 1..10)) {
        let rt = runtime();
        rt.block_on(async {
            let mut fx = Fixture::new();
            let source = FileSource::new(fx.root(), options()).unwrap();
            let store = ReadOnlySource::new(source.clone());
            let rec = register(&store);
            let (trigger, shutdown) = shutdown_channel();
            let run = tokio::spawn(store.run(shutdown));
            let mut barrier = Barrier::new(fx.root());
            let mut last_good = BTreeMap::new();
            for (i, op) in ops.iter().enumerate() {
                fx.apply(op);
                barrier.pass(&source).await;
                check_step(&source, fx.root(), &mut last_good, i + 1, op);
            }
            handler_caught_up(&source, &rec).await;
            trigger.trigger();
            run.await.unwrap();
        });
    }

    #[test]
    fn burst_mode(ops in prop::collection::vec(op(good().boxed(), good().boxed()), 1..20)) {
        let rt = runtime();
        rt.block_on(async {
            let mut fx = Fixture::new();
            let source = FileSource::new(fx.root(), options()).unwrap();
            let store = ReadOnlySource::new(source.clone());
            let rec = register(&store);
            let (trigger, shutdown) = shutdown_channel();
            let run = tokio::spawn(store.run(shutdown));
            for op in &ops {
                fx.apply(op);
            }
            Barrier::new(fx.root()).pass(&source).await;
            check_step(&source, fx.root(), &mut BTreeMap::new(), ops.len(), &Op::RemoveSubdir);
            handler_caught_up(&source, &rec).await;
            trigger.trigger();
            run.await.unwrap();
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// No input panics the source: arbitrary bytes (and near-YAML text) in files, scanned twice with
    /// changes in between; whatever is valid is in force, everything else is reported.
    #[test]
    fn arbitrary_file_contents_never_panic(
        first in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..4),
        second in prop::collection::vec(
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..300),
                "[a-z:{}\\[\\]\n -]{0,200}".prop_map(String::into_bytes),
            ],
            1..4,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (i, bytes) in first.iter().enumerate() {
            std::fs::write(dir.path().join(format!("f{i}.yaml")), bytes).unwrap();
        }
        let source = FileSource::new(dir.path(), options()).unwrap();
        for (i, bytes) in second.iter().enumerate() {
            std::fs::write(dir.path().join(format!("f{i}.yaml")), bytes).unwrap();
        }
        source.rescan().unwrap();
        let status = source.status();
        prop_assert!(status.bad_files.iter().all(|b| !b.errors.is_empty()));
        prop_assert!(status.files <= 3);
    }
}
