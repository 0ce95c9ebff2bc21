//! Shared test helpers: object builders, an event recorder that checks every handler call against
//! what the handler saw before, and a model of what a file directory should yield.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use api::{Kind, Spec, networking};
use meshpilot_config::FileSource;
use meshpilot_config::parse::{ParseOptions, config_files, parse_text};
use model::{Config, ConfigKey, ConfigMeta, ConfigStore, Event, EventHandler, store::needs_push};

/// The shared Istio corpus.
pub fn testdata() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/istio-testdata"))
}

/// A Gateway config (selector `app: <selector>`).
pub fn mk_gateway(namespace: &str, name: &str, selector: &str) -> Config {
    let mut spec = networking::Gateway::default();
    spec.selector.insert("app".into(), selector.into());
    Config {
        meta: ConfigMeta { name: name.into(), namespace: namespace.into(), ..ConfigMeta::default() },
        spec: Spec::Gateway(Box::new(spec)),
        status: None,
    }
}

/// A YAML VirtualService routing `host`.
pub fn vs_yaml(namespace: &str, name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         spec:\n  hosts: [{host}]\n  http:\n  - route:\n    - destination:\n        host: {host}\n"
    )
}

/// A YAML DestinationRule for `host`.
pub fn dr_yaml(namespace: &str, name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         spec:\n  host: {host}\n"
    )
}

/// Polls `check` every 5 ms until it holds or `timeout` passes; returns whether it held.
pub async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Records events and keeps the handler's view of the world, checking each call against it:
/// an Add for an object the handler already has, an Update or Delete whose old state differs from
/// what the handler last received, are violations (a lost or duplicated event).
#[derive(Default)]
pub struct Recorder {
    pub mirror: Mutex<BTreeMap<ConfigKey, Config>>,
    pub events: Mutex<Vec<(Event, ConfigKey)>>,
    pub violations: Mutex<Vec<String>>,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::default()
    }

    pub fn handler(self: &Arc<Self>) -> EventHandler {
        let me = self.clone();
        Arc::new(move |old: Option<&Arc<Config>>, new: &Arc<Config>, event| {
            me.record(old.map(|c| &**c), new, event);
            Ok(())
        })
    }

    fn record(&self, old: Option<&Config>, new: &Config, event: Event) {
        let key = new.key();
        let mut mirror = self.mirror.lock().unwrap();
        let mut violations = self.violations.lock().unwrap();
        match event {
            Event::Add => {
                if old.is_some() {
                    violations.push(format!("Add {key} with an old object"));
                }
                if mirror.insert(key.clone(), new.clone()).is_some() {
                    violations.push(format!("Add {key}, which the handler already had"));
                }
            }
            Event::Update => match (old, mirror.get(&key)) {
                (Some(old), Some(seen)) => {
                    if needs_push(old, seen) {
                        violations.push(format!("Update {key}: old differs from the last state received"));
                    }
                    if !needs_push(old, new) {
                        violations.push(format!("Update {key} that changes nothing"));
                    }
                    mirror.insert(key.clone(), new.clone());
                }
                _ => violations.push(format!("Update {key} without an old object or before its Add")),
            },
            Event::Delete => match mirror.remove(&key) {
                Some(seen) if !needs_push(&seen, new) => {}
                Some(_) => {
                    violations.push(format!("Delete {key}: object differs from the last state received"))
                }
                None => violations.push(format!("Delete {key}, which the handler never had")),
            },
        }
        self.events.lock().unwrap().push((event, key));
    }

    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    /// `true` when the handler's view equals `expected` (by spec, labels and annotations).
    pub fn mirrors(&self, expected: &BTreeMap<ConfigKey, Config>) -> bool {
        let mirror = self.mirror.lock().unwrap();
        mirror.len() == expected.len()
            && mirror.iter().all(|(k, c)| expected.get(k).is_some_and(|e| !needs_push(c, e)))
    }

    pub fn take_events(&self) -> Vec<(Event, ConfigKey)> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}

/// Every object of every kind of `store`.
pub fn contents(store: &dyn ConfigStore) -> BTreeMap<ConfigKey, Config> {
    let mut out = BTreeMap::new();
    for kind in store.schemas() {
        for c in store.list(*kind, None) {
            out.insert(c.key(), Config::clone(&c));
        }
    }
    out
}

/// `contents` without the test's barrier objects.
pub fn contents_without_barrier(store: &dyn ConfigStore) -> BTreeMap<ConfigKey, Config> {
    let mut out = contents(store);
    out.retain(|k, _| !is_barrier(&k.name));
    out
}

/// Whether `name` is one of the barrier objects ([`Barrier`]).
pub fn is_barrier(name: &str) -> bool {
    name.starts_with(BARRIER)
}

/// The objects a fresh parse of `dir` gives, per the file source's rules, given each file's last
/// good objects so far (updated here: a file whose content is good now replaces its entry; files
/// that are gone lose theirs). Objects are taken in path order, first document first.
pub fn expected_objects(
    dir: &Path,
    last_good: &mut BTreeMap<PathBuf, Vec<Config>>,
) -> BTreeMap<ConfigKey, Config> {
    let files = config_files(dir).unwrap();
    last_good.retain(|p, _| files.contains(p));
    for file in &files {
        let Ok(bytes) = std::fs::read(file) else { continue };
        let Ok(text) = String::from_utf8(bytes) else { continue };
        let docs = parse_text(&file.display().to_string(), &text, &ParseOptions::default());
        if docs.iter().all(|d| d.errors.is_empty()) {
            last_good.insert(file.clone(), docs.into_iter().filter_map(|d| d.config).collect());
        }
    }
    let mut out = BTreeMap::new();
    for file in &files {
        for config in last_good.get(file).into_iter().flatten() {
            out.entry(config.key()).or_insert_with(|| config.clone());
        }
    }
    out.retain(|k, _| !is_barrier(&k.name));
    out
}

/// Prefix of the barrier objects' names (see [`Barrier`]).
pub const BARRIER: &str = "zz-barrier";

/// Proves that the file source has scanned after some point: writes (atomically) a new file
/// `zz-barrier-<n>.yaml` holding a new DestinationRule `zz-barrier-<n>`, and waits until the store
/// shows it. A scan lists every path before it reads any file, so only a scan that listed the tree
/// after the write can have read the new file: it saw every change made before. (Rewriting one file in
/// place proved less: a scan that listed the tree before a step's writes could still read the new
/// barrier content and pass the barrier without the step.)
pub struct Barrier {
    dir: PathBuf,
    n: u64,
}

impl Barrier {
    pub fn new(dir: &Path) -> Barrier {
        Barrier { dir: dir.to_path_buf(), n: 0 }
    }

    /// Passes the next barrier; returns its object's name.
    pub async fn pass(&mut self, source: &FileSource) -> String {
        self.n += 1;
        let n = self.n;
        let name = format!("{BARRIER}-{n}");
        let text = dr_yaml("default", &name, &format!("barrier-{n}.example.com"));
        write_atomic(&self.dir.join(format!("{name}.yaml")), text.as_bytes());
        let seen = eventually(Duration::from_secs(10), || {
            source.store().get(Kind::DestinationRule, "default", &name).is_some()
        })
        .await;
        assert!(seen, "the file source did not pick up barrier {n} within 10 s");
        name
    }
}

/// Writes `bytes` to `path` by writing a hidden temporary file beside it and renaming it over.
pub fn write_atomic(path: &Path, bytes: &[u8]) {
    let parent = path.parent().unwrap();
    std::fs::create_dir_all(parent).unwrap();
    let tmp = parent.join(format!(".tmp-{}", path.file_name().unwrap().to_string_lossy()));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A Kubernetes ConfigMap-style mount: `dir/<key>` → `..data/<key>`, `..data` → `..<version>`.
pub struct ConfigMapMount {
    pub dir: PathBuf,
    version: u64,
}

impl ConfigMapMount {
    /// Creates the mount with `files` (name → content) and the visible symlinks.
    pub fn new(dir: &Path, files: &[(&str, &[u8])]) -> ConfigMapMount {
        std::fs::create_dir_all(dir).unwrap();
        let mut mount = ConfigMapMount { dir: dir.to_path_buf(), version: 0 };
        mount.swap(files);
        for (name, _) in files {
            std::os::unix::fs::symlink(Path::new("..data").join(name), dir.join(name)).unwrap();
        }
        mount
    }

    /// Replaces the content atomically as the kubelet does: new timestamped directory, a new
    /// `..data_tmp` symlink renamed over `..data`, old directory removed.
    pub fn swap(&mut self, files: &[(&str, &[u8])]) {
        self.version += 1;
        let new_dir = format!("..2026_11_21_00_00_{:02}.{}", self.version % 60, self.version);
        std::fs::create_dir(self.dir.join(&new_dir)).unwrap();
        for (name, content) in files {
            std::fs::write(self.dir.join(&new_dir).join(name), content).unwrap();
        }
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        std::os::unix::fs::symlink(&new_dir, self.dir.join("..data_tmp")).unwrap();
        std::fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).unwrap();
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
    }
}
