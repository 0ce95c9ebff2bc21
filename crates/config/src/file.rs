//! The file source: a directory of Kubernetes-style YAML/JSON config, watched for changes (Istio's
//! `--configDir`, `pilot/pkg/config/kube/file` over `pkg/kube/krt/files`).
//!
//! ```text
//!  DIR/**.{yaml,yml,json} ──► scan: read every file; parse only files whose bytes changed
//!        ▲                        │ per file: good objects, or errors (the last good objects stay)
//!        │                        ▼
//!  notify (Access filtered) ─► debounce ─► index: per key every definition, in path order
//!  periodic full re-scan ──────────────┘      │ changed keys: winner (first) vs the store
//!                                             ▼
//!                                  MemoryStore (read-only) ──► queue ──► handlers
//! ```
//!
//! **Scans.** Every scan lists the directory with [`config::parse::config_files`] (recursive; hidden
//! names skipped; symlinks followed, so a Kubernetes ConfigMap mount — `file.yaml → ..data/file.yaml`,
//! `..data → ..2026_11_21…` — is read through its visible names), reads every file and re-parses only
//! those whose bytes changed (content is compared byte for byte, not by modification time, which can
//! miss two writes within one timestamp tick). Each file's good objects go into a per-key index of
//! every definition in precedence order; only keys whose definitions changed get their winner
//! re-evaluated against the store, so exactly the add/update/delete events that turn the old object
//! set into the new one are emitted, at a cost proportional to what changed (plus reading the files:
//! about 5 ms for 500 files holding 10,000 objects). Scans are serialized. A scan runs at start ([`FileSource::new`]), when the source's `run` starts watching, after
//! file-system events (notify 8 on the directory, recursive; `Access` events other than a close after
//! writing are ignored, since an open or read changes nothing), and every `rescan_interval` as a safety
//! net against lost events. A scan starts **as soon as no file is being written**: a file is "being
//! written" from its creation or data change until its close-after-write (inotify `IN_CLOSE_WRITE`),
//! removal or rename, so an atomic rename or a plain write-and-close is read at once, with no fixed
//! delay, and a half-written file is not read; a write still open `debounce` after the first event is
//! read as it is. Istio instead always waits a fixed 100 ms for single files (250 ms for folders)
//! after the last event, which puts a floor under every edit's propagation. An atomic `..data` symlink swap shows up only as events on `..data` and the timestamped
//! directories; since any event triggers a full scan, it works like any other change.
//!
//! **Special and changing files.** A FIFO, socket or device with a config file's name is bad ("not a
//! regular file") and never opened (a FIFO would block the scan until a writer came). A file whose
//! size or modification time changes while it is read is being rewritten in place: its last read
//! content stays in force and the writer's next event reads it again.
//!
//! **Bad files.** A file is *bad* when it cannot be read, is not UTF-8, or any of its documents has an
//! error (YAML syntax, unknown field, failed validation, removed or unserved kind). A bad file keeps
//! **all** of its last good objects in force (none if it never was good): a half-applied file is worse
//! than an old one. It is reported once per new content: a `tracing` warning per error with
//! `file:line`, the field path and the reason; the counter `meshpilot_config_file_errors`; the gauge
//! `meshpilot_config_bad_files`; and an entry in [`FileSource::status`] (file, errors, since when) for
//! the debug endpoint. Other files are unaffected. Findings on Kubernetes `Service` and `Deployment`
//! documents (istioctl's lint checks) do not make a file bad: this source does not serve those kinds,
//! and Istio's file source skips them too.
//!
//! **Duplicates.** The same object (kind, namespace, name) in two files: the file first in path order
//! wins (within one file, the first document), deterministically; a warning names both files once
//! when the situation appears, and [`FileSource::status`] lists it. Deleting the winning file makes the
//! next one win (an Update, not a Delete and an Add).
//!
//! **Deletions.** A file that disappears takes its objects with it. A directory that cannot be listed
//! (removed, permissions) changes nothing: the scan fails with a warning and the objects stay. A watch
//! that cannot be set (a directory vanishing while notify walks the tree) is retried, and a watched
//! directory that is removed or replaced is watched again once it exists (see `DirWatch`).
//!
//! **As a config source.** A [`FileSource`] is the [`Feed`] of a
//! [`ReadOnlySource`](crate::ReadOnlySource) (`ReadOnlySource::new(source)`), which is the
//! [`model::ConfigStoreController`] (as Istio's `--configDir` controller): reads from the
//! store, writes refused with [`model::StoreError::ReadOnly`], `run` = the queue and the watch,
//! `source_of` = `file:///ABS/PATH` of the winning file, synced once everything queued before `run`
//! has been delivered once. The inherent methods ([`FileSource::status`], [`FileSource::origin`],
//! [`FileSource::rescan`]) stay on the [`FileSource`]; it is a cheap handle, so keep a clone.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    io,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use crate::parse::{ParseOptions, ParsedDocument, config_files, parse_text};
use api::Kind;
use model::{Config, ConfigKey, ConfigStore, Shutdown, store::RunFuture};
use serde_json::json;
use tokio::sync::mpsc;

use crate::{
    memory::{Change, MemoryStore},
    queue::QueueOptions,
    source::Feed,
    time::rfc3339,
};

/// Settings of a [`FileSource`].
#[derive(Clone, Debug)]
pub struct FileSourceOptions {
    /// How documents are read (default namespace, domain suffix).
    pub parse: ParseOptions,
    /// Longest wait between the first file-system event of a burst and the scan while a file is still
    /// being written (default 100 ms); with no write open, the scan starts at once.
    pub debounce: Duration,
    /// Full re-scan period, a safety net for lost events (default 60 s; `None` disables it).
    pub rescan_interval: Option<Duration>,
    /// Retry settings of the event queue.
    pub queue: QueueOptions,
    /// Kinds served (default: every Istio kind meshpilot knows). Objects of other kinds are ignored.
    pub kinds: Vec<Kind>,
}

impl Default for FileSourceOptions {
    fn default() -> Self {
        FileSourceOptions {
            parse: ParseOptions::default(),
            debounce: Duration::from_millis(100),
            rescan_interval: Some(Duration::from_secs(60)),
            queue: QueueOptions::default(),
            kinds: Kind::ALL.to_vec(),
        }
    }
}

/// One error of a bad file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileError {
    /// 0-based document index in the file.
    pub document: usize,
    /// `Kind/namespace/name` as written (parts empty when unknown).
    pub object: String,
    /// 1-based line (0 when the file could not be read at all).
    pub line: u32,
    /// Field path (`spec.http[0].timeout`); empty for the document or file itself.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// A file whose current content is not in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadFile {
    /// The file.
    pub file: PathBuf,
    /// Its errors (for the current content).
    pub errors: Vec<FileError>,
    /// When the file became bad (it stays the same while the file stays bad, even if its errors change).
    pub since: SystemTime,
    /// How many of its last good objects stay in force.
    pub kept_objects: usize,
}

/// An object defined in more than one place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Duplicate {
    /// The object.
    pub key: ConfigKey,
    /// The files defining it, the winner first (a file appears twice if it defines the object twice).
    pub files: Vec<PathBuf>,
}

/// Where an object in force comes from ([`FileSource::origin`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectOrigin {
    /// The file defining it (the winner when several do).
    pub file: PathBuf,
    /// 1-based line where its document starts; 0 when unknown (the file is bad).
    pub line: u32,
    /// Validation warnings of its document (`field.path: message`).
    pub warnings: Vec<String>,
    /// Set when the file's current content is rejected: the object in force is the file's last good
    /// version, and these are the errors of the new content.
    pub rejected: Option<BadFile>,
}

/// What a [`FileSource`] currently reports, for `/debug` endpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSourceStatus {
    /// Config files seen by the last scan.
    pub files: usize,
    /// Objects in force.
    pub objects: usize,
    /// Files whose current content is rejected.
    pub bad_files: Vec<BadFile>,
    /// Objects defined more than once.
    pub duplicates: Vec<Duplicate>,
}

impl FileSourceStatus {
    /// The status as JSON: `{files, objects, badFiles: [{file, since, keptObjects, errors: [{document,
    /// object, line, path, message}]}], duplicates: [{kind, namespace, name, files}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let bad: Vec<_> = self
            .bad_files
            .iter()
            .map(|b| {
                let errors: Vec<_> = b
                    .errors
                    .iter()
                    .map(|e| {
                        json!({"document": e.document, "object": e.object, "line": e.line,
                               "path": e.path, "message": e.message})
                    })
                    .collect();
                json!({"file": b.file.display().to_string(), "since": rfc3339(b.since),
                       "keptObjects": b.kept_objects, "errors": errors})
            })
            .collect();
        let dups: Vec<_> = self
            .duplicates
            .iter()
            .map(|d| {
                let files: Vec<_> = d.files.iter().map(|f| f.display().to_string()).collect();
                json!({"kind": d.key.kind.as_str(), "namespace": d.key.namespace, "name": d.key.name,
                       "files": files})
            })
            .collect();
        json!({"files": self.files, "objects": self.objects, "badFiles": bad, "duplicates": dups})
    }
}

/// What one scan did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanSummary {
    /// Config files found.
    pub files: usize,
    /// Files (re-)parsed because their content changed.
    pub parsed: usize,
    /// Files that disappeared.
    pub removed: usize,
    /// Objects added, changed or removed in the store.
    pub changed_objects: usize,
}

/// Scan counters (diagnostics; tests use them to wait for a scan that saw a change).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanCounts {
    /// Scans begun.
    pub started: u64,
    /// Scans finished (successfully or not).
    pub completed: u64,
}

/// A watched directory of config files (see the module documentation), the [`Feed`] of a read-only
/// [`ReadOnlySource`](crate::ReadOnlySource). Cheap to clone (a handle).
#[derive(Clone)]
pub struct FileSource {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FileSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSource").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

struct Inner {
    dir: PathBuf,
    options: FileSourceOptions,
    store: MemoryStore,
    scan: Mutex<ScanState>,
    status: RwLock<Arc<FileSourceStatus>>,
    scans_started: AtomicU64,
    scans_completed: AtomicU64,
}

#[derive(Default)]
struct ScanState {
    files: BTreeMap<PathBuf, FileEntry>,
    /// Every definition of every key among the files' good objects.
    index: Index,
    /// Keys defined more than once, with their files (winner first), as last reported.
    duplicates: BTreeMap<ConfigKey, Vec<PathBuf>>,
}

/// Per key, the files' definitions in precedence order: by path, then document order.
#[derive(Default)]
struct Index {
    definitions: HashMap<ConfigKey, Vec<(PathBuf, Arc<Config>)>>,
}

impl Index {
    fn remove_file(&mut self, path: &Path, good: &[Arc<Config>], affected: &mut BTreeSet<ConfigKey>) {
        for config in good {
            let key = config.key();
            if let Some(defs) = self.definitions.get_mut(&key) {
                defs.retain(|(p, _)| p != path);
                if defs.is_empty() {
                    self.definitions.remove(&key);
                }
            }
            affected.insert(key);
        }
    }

    /// `good` in document order; a key defined twice in the file keeps both, first one first.
    fn add_file(&mut self, path: &Path, good: &[Arc<Config>], affected: &mut BTreeSet<ConfigKey>) {
        for config in good {
            let key = config.key();
            let defs = self.definitions.entry(key.clone()).or_default();
            // After every definition from a path that sorts before or equals this one.
            let at = defs.partition_point(|(p, _)| p.as_path() <= path);
            defs.insert(at, (path.to_path_buf(), config.clone()));
            affected.insert(key);
        }
    }
}

struct FileEntry {
    /// The bytes last read (`None` when the last read failed).
    content: Option<Vec<u8>>,
    /// The last good objects, in document order.
    good: Vec<Arc<Config>>,
    /// Per object of `good` (same order): the line its document starts on and its validation
    /// warnings (`field.path: message`), kept from the parse for [`FileSource::origin`].
    origins: Vec<(u32, Vec<String>)>,
    /// Set while the current content is rejected.
    bad: Option<BadFile>,
}

enum Read {
    Same,
    /// The file changed while it was read (size or modification time): a writer is at work.
    Unsettled,
    Changed(Vec<u8>),
    /// Not read: the message for the file's status.
    Failed(String),
    Gone,
}

impl FileSource {
    /// Reads `dir` (the initial scan) and returns the source; run its
    /// [`ReadOnlySource`](crate::ReadOnlySource) to watch it.
    ///
    /// # Errors
    /// `dir` is not a directory or cannot be listed. Bad files are not errors (see the module doc).
    pub fn new(dir: impl Into<PathBuf>, options: FileSourceOptions) -> io::Result<FileSource> {
        let dir = dir.into();
        if !std::fs::metadata(&dir)?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        let name = format!("file:{}", dir.display());
        let store = MemoryStore::read_only(name, &options.kinds, options.queue.clone());
        let source = FileSource {
            inner: Arc::new(Inner {
                dir,
                options,
                store,
                scan: Mutex::default(),
                status: RwLock::default(),
                scans_started: AtomicU64::new(0),
                scans_completed: AtomicU64::new(0),
            }),
        };
        let summary = source.rescan()?;
        tracing::info!(
            source = %source.name(),
            files = summary.files,
            objects = summary.changed_objects,
            "loaded config files",
        );
        Ok(source)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// `file:DIR`: the store's name, in logs.
    fn name(&self) -> &str {
        self.inner.store.name()
    }

    /// The store the source fills (its queue, snapshot).
    pub fn store(&self) -> &MemoryStore {
        &self.inner.store
    }

    /// Bad files and duplicates as of the last scan.
    pub fn status(&self) -> Arc<FileSourceStatus> {
        self.inner.status.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Where the object `key` in force comes from: the file that wins for it and, when that file's
    /// current content is the one in force, the line its document starts on and the validation
    /// warnings of that document (findings that do not reject it). When the file is bad (its new
    /// content rejected, the last good objects kept), `line` is 0 and `rejected` holds the file's
    /// errors. `None` when no file of this source defines the object. A lookup in what the last scan
    /// parsed (no I/O, no parsing); meant for debug endpoints.
    pub fn origin(&self, key: &ConfigKey) -> Option<ObjectOrigin> {
        let state = self.inner.scan.lock().unwrap_or_else(|p| p.into_inner());
        let (file, _) = state.index.definitions.get(key)?.first()?;
        Some(Self::origin_in(file, state.files.get(file)?, key))
    }

    /// [`FileSource::origin`] of every object this source defines (for lists).
    pub fn origins(&self) -> HashMap<ConfigKey, ObjectOrigin> {
        let state = self.inner.scan.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = HashMap::with_capacity(state.index.definitions.len());
        for (key, definitions) in &state.index.definitions {
            if let Some((file, _)) = definitions.first()
                && let Some(entry) = state.files.get(file)
            {
                out.insert(key.clone(), Self::origin_in(file, entry, key));
            }
        }
        out
    }

    fn origin_in(file: &Path, entry: &FileEntry, key: &ConfigKey) -> ObjectOrigin {
        let mut origin = ObjectOrigin {
            file: file.to_path_buf(),
            line: 0,
            warnings: Vec::new(),
            rejected: entry.bad.clone(),
        };
        if origin.rejected.is_none()
            && let Some(i) = entry.good.iter().position(|c| c.key() == *key)
            && let Some((line, warnings)) = entry.origins.get(i)
        {
            origin.line = *line;
            origin.warnings = warnings.clone();
        }
        origin
    }

    /// How many scans have begun and finished.
    pub fn scans(&self) -> ScanCounts {
        ScanCounts {
            started: self.inner.scans_started.load(Ordering::SeqCst),
            completed: self.inner.scans_completed.load(Ordering::SeqCst),
        }
    }

    /// Scans the directory now and applies what changed. Blocking (file I/O and parsing); from async
    /// code, call it in `spawn_blocking`.
    ///
    /// # Errors
    /// The directory cannot be listed; nothing changes then.
    pub fn rescan(&self) -> io::Result<ScanSummary> {
        let mut state = self.inner.scan.lock().unwrap_or_else(|p| p.into_inner());
        self.inner.scans_started.fetch_add(1, Ordering::SeqCst);
        let result = self.scan_locked(&mut state);
        self.inner.scans_completed.fetch_add(1, Ordering::SeqCst);
        if let Err(err) = &result {
            tracing::warn!(source = %self.name(), error = %err, "cannot list the config directory; keeping the current config");
        }
        result
    }

    fn scan_locked(&self, state: &mut ScanState) -> io::Result<ScanSummary> {
        let paths = config_files(&self.inner.dir)?;
        let reads: Vec<Read> = paths
            .iter()
            .map(|path| {
                let previous = state.files.get(path).and_then(|e| e.content.as_deref());
                match read_regular(path) {
                    Ok(bytes) if previous == Some(&bytes[..]) => Read::Same,
                    Ok(bytes) => Read::Changed(bytes),
                    Err(err) if err.kind() == io::ErrorKind::NotFound => Read::Gone,
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => Read::Unsettled,
                    Err(err) => Read::Failed(format!("cannot read the file: {err}")),
                }
            })
            .collect();
        let to_parse: Vec<(&Path, &[u8])> = paths
            .iter()
            .zip(&reads)
            .filter_map(|(p, r)| match r {
                Read::Changed(bytes) => Some((p.as_path(), bytes.as_slice())),
                _ => None,
            })
            .collect();
        let mut parsed = parse_all(&to_parse, &self.inner.options.parse).into_iter();

        let mut summary =
            ScanSummary { files: paths.len(), parsed: to_parse.len(), ..ScanSummary::default() };
        // Keys whose set of definitions changed; only they need a new winner.
        let mut affected: BTreeSet<ConfigKey> = BTreeSet::new();
        let mut files = BTreeMap::new();
        let now = SystemTime::now();
        for (path, read) in paths.into_iter().zip(reads) {
            let previous = state.files.remove(&path);
            let entry = match read {
                Read::Gone => {
                    if let Some(previous) = previous {
                        state.index.remove_file(&path, &previous.good, &mut affected);
                    }
                    continue;
                }
                Read::Unsettled => match previous {
                    // Being written: keep what was read last; the write's own event scans again.
                    Some(entry) => {
                        tracing::debug!(source = %self.name(), file = %path.display(), "config file changed while being read; read again on its next event");
                        entry
                    }
                    None => continue,
                },
                Read::Same => match previous {
                    Some(entry) => entry,
                    None => continue, // cannot happen: `Same` needs a previous entry
                },
                Read::Failed(message) => {
                    let same_failure = previous.as_ref().is_some_and(|p| {
                        p.content.is_none()
                            && p.bad
                                .as_ref()
                                .and_then(|b| b.errors.first())
                                .is_some_and(|e| e.message == message)
                    });
                    match previous {
                        Some(entry) if same_failure => entry,
                        previous => {
                            let error = FileError {
                                document: 0,
                                object: String::new(),
                                line: 0,
                                path: String::new(),
                                message,
                            };
                            self.rejected(&path, previous, None, vec![error], now)
                        }
                    }
                }
                Read::Changed(bytes) => match parsed.next().unwrap_or_else(|| Ok(Vec::new())) {
                    Ok(docs) => {
                        let (good, origins): (Vec<Arc<Config>>, Vec<_>) = docs
                            .into_iter()
                            .filter(|d| self.inner.options.kinds.contains(&d.config.kind()))
                            .map(|d| (d.config, (d.line, d.warnings)))
                            .unzip();
                        let old_good = match previous {
                            Some(p) => {
                                if p.bad.is_some() {
                                    tracing::info!(source = %self.name(), file = %path.display(), "config file is valid again");
                                }
                                p.good
                            }
                            None => Vec::new(),
                        };
                        state.index.remove_file(&path, &old_good, &mut affected);
                        state.index.add_file(&path, &good, &mut affected);
                        FileEntry { content: Some(bytes), good, origins, bad: None }
                    }
                    Err(errors) => self.rejected(&path, previous, Some(bytes), errors, now),
                },
            };
            files.insert(path, entry);
        }
        // What is left was not listed any more: deleted (or renamed away) files.
        for (path, entry) in std::mem::take(&mut state.files) {
            tracing::info!(source = %self.name(), file = %path.display(), "config file removed; its objects are deleted");
            state.index.remove_file(&path, &entry.good, &mut affected);
            summary.removed += 1;
        }
        state.files = files;
        summary.changed_objects = self.reconcile(state, &affected);
        self.publish_status(state);
        Ok(summary)
    }

    /// The entry of a file whose new content is rejected: its last good objects stay.
    fn rejected(
        &self,
        path: &Path,
        previous: Option<FileEntry>,
        content: Option<Vec<u8>>,
        errors: Vec<FileError>,
        now: SystemTime,
    ) -> FileEntry {
        let (good, origins, since) = match previous {
            Some(p) => (p.good, p.origins, p.bad.map_or(now, |b| b.since)),
            None => (Vec::new(), Vec::new(), now),
        };
        for e in &errors {
            tracing::warn!(
                source = %self.name(),
                "{}:{}: {}{}{}{}; keeping the file's last good objects ({})",
                path.display(),
                e.line,
                if e.object.trim_matches('/').is_empty() { String::new() } else { format!("{}: ", e.object) },
                e.path,
                if e.path.is_empty() { "" } else { ": " },
                e.message,
                good.len(),
            );
        }
        metrics::counter!("meshpilot_config_file_errors").increment(1);
        let bad = BadFile { file: path.to_path_buf(), errors, since, kept_objects: good.len() };
        FileEntry { content, good, origins, bad: Some(bad) }
    }

    /// Gives each affected key its winner (first definition in path order) in the store, and keeps the
    /// duplicate report; returns how many objects changed.
    fn reconcile(&self, state: &mut ScanState, affected: &BTreeSet<ConfigKey>) -> usize {
        let mut changes = Vec::with_capacity(affected.len());
        for key in affected {
            let definitions = state.index.definitions.get(key).map(Vec::as_slice).unwrap_or_default();
            let current = self.inner.store.get(key.kind, &key.namespace, &key.name);
            match (definitions.first(), current) {
                (Some((_, winner)), Some(current)) if Arc::ptr_eq(winner, &current) => {}
                (Some((_, winner)), _) => changes.push(Change::Upsert(winner.clone())),
                (None, Some(_)) => changes.push(Change::Remove(key.clone())),
                (None, None) => {}
            }
            if definitions.len() > 1 {
                let files: Vec<PathBuf> = definitions.iter().map(|(p, _)| p.clone()).collect();
                if state.duplicates.get(key) != Some(&files) {
                    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
                    tracing::warn!(
                        source = %self.name(),
                        object = %key,
                        files = ?names,
                        "{key} is defined more than once ({}); using the one in {} (first path, first document)",
                        names.join(", "),
                        names[0],
                    );
                }
                state.duplicates.insert(key.clone(), files);
            } else {
                state.duplicates.remove(key);
            }
        }
        self.inner.store.apply(changes)
    }

    fn publish_status(&self, state: &ScanState) {
        let bad_files: Vec<BadFile> = state.files.values().filter_map(|e| e.bad.clone()).collect();
        metrics::gauge!("meshpilot_config_bad_files").set(bad_files.len() as f64);
        let status = FileSourceStatus {
            files: state.files.len(),
            objects: state.index.definitions.len(),
            bad_files,
            duplicates: state
                .duplicates
                .iter()
                .map(|(key, files)| Duplicate { key: key.clone(), files: files.clone() })
                .collect(),
        };
        *self.inner.status.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(status);
    }

    /// Scans in a blocking thread.
    async fn rescan_async(&self) {
        let source = self.clone();
        if let Err(err) = tokio::task::spawn_blocking(move || source.rescan()).await {
            tracing::error!(source = %self.name(), error = %err, "config scan panicked");
        }
    }

    async fn watch(self, mut shutdown: Shutdown) {
        let (tx, mut rx) = mpsc::channel::<()>(1);
        let writes = Arc::new(Writes::default());
        let mut watch = DirWatch::new(&self.inner.dir, self.name(), tx, writes.clone());
        // Catch up with changes made between the initial scan and the watch.
        self.rescan_async().await;

        // A slow scan must not be followed by a burst of catch-up scans (Periodic delays instead).
        let mut ticker = crate::time::Periodic::new(self.inner.options.rescan_interval);
        let debounce = self.inner.options.debounce;
        loop {
            tokio::select! {
                () = shutdown.wait() => break,
                Some(()) = rx.recv() => {
                    // Scan as soon as no file is being written (its close-after-write, rename or
                    // removal seen); a write still open after `debounce` is scanned anyway.
                    let deadline = tokio::time::sleep(debounce);
                    tokio::pin!(deadline);
                    while !writes.settled() {
                        tokio::select! {
                            () = shutdown.wait() => return,
                            () = &mut deadline => {
                                writes.forget();
                                break;
                            }
                            Some(()) = rx.recv() => {}
                        }
                    }
                    // Everything that arrived so far is covered by this scan.
                    while rx.try_recv().is_ok() {}
                    self.rescan_async().await;
                    watch.check();
                    if writes.take_new_dir() {
                        tokio::select! {
                            () = shutdown.wait() => break,
                            () = tokio::time::sleep(NEW_DIR_SETTLE) => self.rescan_async().await,
                        }
                    }
                }
                () = ticker.tick() => {
                    self.rescan_async().await;
                    watch.check();
                }
                () = watch.retry_due() => {
                    if watch.retry() {
                        self.rescan_async().await;
                    }
                }
            }
        }
        tracing::debug!(source = %self.name(), "file watch stopped");
    }
}

/// The files being written, as the watch's events tell: a file enters on a data change or creation
/// and leaves on its close-after-write (inotify `IN_CLOSE_WRITE`), removal, or rename away. A scan
/// waits while any is open, so a file is not read half-written, and starts at once when none is: an
/// atomic rename or a plain write-and-close is scanned without a fixed delay (issue 22: the debounce
/// is only the longest wait for a write that stays open).
///
/// It also notes whether a directory appeared (created, or renamed into the tree): see
/// [`NEW_DIR_SETTLE`].
#[derive(Debug, Default)]
struct Writes(Mutex<HashSet<PathBuf>>, AtomicBool);

/// How long after a scan prompted by a new directory the scan loop scans once more. notify (8, inotify)
/// delivers the event announcing a directory before it adds the watch on it (a batch's events first,
/// then the batch's new watches: `notify/src/inotify.rs`), so a file created in the directory in
/// between has no event of its own, and a scan that ran in that window did not see it either: without
/// a second scan it would wait for the periodic rescan (60 s). A few milliseconds is enough for notify
/// to add the watch; after it, every file gets its own event.
const NEW_DIR_SETTLE: Duration = Duration::from_millis(50);

/// What one watch event means for a scan (see [`classify`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventMeaning {
    /// Nothing changed (an open, a read, a close after reading): no scan.
    Ignore,
    /// The paths are being written: a scan waits for their completion.
    Writing,
    /// The paths' writes are complete (close after write, removal, rename, metadata): scan when no
    /// other write is open.
    Complete,
    /// The watch may have lost events: scan.
    Error,
}

impl Writes {
    fn settled(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    /// Forgets every open write: after the longest wait, a file still open (or whose close was
    /// never reported) is scanned as it is, and must not hold back later scans.
    fn forget(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Whether a directory appeared since the last call (and forgets it).
    fn take_new_dir(&self) -> bool {
        self.1.swap(false, Ordering::Relaxed)
    }

    /// Records `event`; returns whether it wakes the scan loop.
    fn record(&self, event: &notify::Result<notify::Event>) -> bool {
        let meaning = classify(event);
        if let Ok(event) = event
            && announces_dir(event)
        {
            self.1.store(true, Ordering::Relaxed);
        }
        if let Ok(event) = event {
            let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
            match meaning {
                EventMeaning::Writing => open.extend(event.paths.iter().cloned()),
                EventMeaning::Complete => event.paths.iter().for_each(|p| {
                    open.remove(p);
                }),
                EventMeaning::Ignore | EventMeaning::Error => {}
            }
        }
        meaning != EventMeaning::Ignore
    }
}

/// Whether `event` announces a directory in the tree: created, or renamed into it (a rename's
/// path is checked on disk; a file's rename, the common atomic write, is not a directory).
fn announces_dir(event: &notify::Event) -> bool {
    use notify::event::{CreateKind, EventKind, ModifyKind, RenameMode};
    match event.kind {
        EventKind::Create(CreateKind::Folder) => true,
        EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both | RenameMode::Any)) => {
            event.paths.last().is_some_and(|p| p.is_dir())
        }
        _ => false,
    }
}

/// What a watch event means for a scan: every change and every watch error (events may have been
/// lost) wakes it, but not an `Access` other than a close after writing (open, read, close after
/// reading): the scan's own reads would otherwise wake the next scan. A data change or a file's
/// creation is a write in progress until its close-after-write.
fn classify(event: &notify::Result<notify::Event>) -> EventMeaning {
    use notify::event::{AccessKind, AccessMode, CreateKind, EventKind, ModifyKind, RenameMode};
    let Ok(event) = event else { return EventMeaning::Error };
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => EventMeaning::Complete,
        EventKind::Access(_) => EventMeaning::Ignore,
        EventKind::Create(CreateKind::File) | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) => {
            EventMeaning::Writing
        }
        EventKind::Modify(ModifyKind::Name(RenameMode::From | RenameMode::To | RenameMode::Both))
        | EventKind::Create(_)
        | EventKind::Modify(_)
        | EventKind::Remove(_)
        | EventKind::Any
        | EventKind::Other => EventMeaning::Complete,
    }
}

/// Shortest (doubled before the first retry) and longest wait between attempts to (re-)establish the directory watch.
const WATCH_RETRY: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(5));

/// The recursive watch on the config directory, kept established.
///
/// notify walks the tree and fails as a whole when a directory vanishes between being listed and
/// being watched (a ConfigMap `..data` swap or an `rm -r` racing the start: notify 8 reports `PathNotFound`
/// and the directories walked so far stay unwatched by us), and a watch set on a
/// directory that is later removed or replaced sees nothing of its successor. Both are repaired
/// here: a failed watch is retried (after 0.1 s, doubling up to 5 s), and after every scan the directory's
/// identity (device, inode) is compared with the one watched; a removed or replaced directory is
/// watched again once it exists. Each re-established watch is followed by a scan.
struct DirWatch {
    dir: PathBuf,
    source: String,
    tx: mpsc::Sender<()>,
    /// The files being written, shared with the scan loop.
    writes: Arc<Writes>,
    /// The watcher and the identity of the directory it was set on; `None` while not established.
    active: Option<(notify::RecommendedWatcher, Option<(u64, u64)>)>,
    /// Wait before the next attempt while not established.
    backoff: Duration,
    /// Whether the last attempt failed (the next success is logged).
    failing: bool,
}

impl DirWatch {
    fn new(dir: &Path, source: &str, tx: mpsc::Sender<()>, writes: Arc<Writes>) -> DirWatch {
        let mut watch = DirWatch {
            dir: dir.to_path_buf(),
            source: source.to_string(),
            tx,
            writes,
            active: None,
            backoff: WATCH_RETRY.0,
            failing: false,
        };
        watch.retry();
        watch
    }

    /// Tries to establish the watch; true when it now is (the caller then scans).
    fn retry(&mut self) -> bool {
        match self.establish() {
            Ok(watcher) => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!(source = %self.source, "watching the config directory again");
                }
                self.active = Some((watcher, dir_identity(&self.dir)));
                self.backoff = WATCH_RETRY.0;
                true
            }
            Err(err) => {
                self.failing = true;
                self.backoff = (self.backoff * 2).min(WATCH_RETRY.1);
                tracing::warn!(source = %self.source, error = %err, retry_in_ms = self.backoff.as_millis() as u64,
                    "cannot watch the config directory; retrying (periodic re-scans continue)");
                false
            }
        }
    }

    fn establish(&self) -> notify::Result<notify::RecommendedWatcher> {
        let (name, tx, writes) = (self.source.clone(), self.tx.clone(), self.writes.clone());
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Err(err) = &event {
                tracing::warn!(source = %name, error = %err, "file watch error; re-scanning");
            }
            if writes.record(&event) {
                // Capacity 1: a pending wake-up already covers this event.
                let _ = tx.try_send(());
            }
        })?;
        notify::Watcher::watch(&mut watcher, &self.dir, notify::RecursiveMode::Recursive)?;
        Ok(watcher)
    }

    /// Drops the watch when the directory it was set on is gone or replaced (see the type).
    fn check(&mut self) {
        if let Some((_, identity)) = &self.active
            && *identity != dir_identity(&self.dir)
        {
            tracing::warn!(source = %self.source, dir = %self.dir.display(),
                "the config directory was removed or replaced; watching it again once it exists");
            self.active = None;
            self.backoff = WATCH_RETRY.0;
        }
    }

    /// Completes when the next attempt is due; never while the watch is established.
    async fn retry_due(&self) {
        if self.active.is_some() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(self.backoff).await;
    }
}

/// (device, inode) of `dir`; `None` when it cannot be read.
fn dir_identity(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()))
}

/// Reads `path` if it is a regular file (after symlinks). A FIFO, socket or device named `*.yaml` is an
/// error instead of a read: reading a FIFO blocks until a writer comes (the scan, and every later
/// change, would hang) and a device such as `/dev/zero` never ends. A file whose size or modification
/// time changed during the read is being rewritten in place: `Interrupted` (the caller keeps what it
/// read last, and the writer's event starts another scan). A file over [`api::yaml::MAX_FILE_BYTES`]
/// is an error, and is not read.
fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a regular file ({}): not read", file_type_name(&meta.file_type())),
        ));
    }
    api::yaml::check_file_size(meta.len())?;
    // Size and time are taken from the open file, not the path: a ConfigMap mount swaps the path's
    // target (`..data`) between two looks at the path, which made a complete new file look rewritten.
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    let bytes = api::yaml::read_bounded(&file, api::yaml::MAX_FILE_BYTES)?;
    let after = file.metadata()?;
    let settled = after.len() == meta.len()
        && bytes.len() as u64 == meta.len()
        && after.modified().ok() == meta.modified().ok();
    if !settled {
        return Err(io::Error::new(io::ErrorKind::Interrupted, "the file changed while it was read"));
    }
    Ok(bytes)
}

fn file_type_name(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a file"
    }
}

/// Parses files' contents, in parallel when there are several.
fn parse_all(
    files: &[(&Path, &[u8])],
    options: &ParseOptions,
) -> Vec<Result<Vec<ParsedObject>, Vec<FileError>>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len());
    if threads <= 1 {
        return files.iter().map(|(p, b)| parse_file(p, b, options)).collect();
    }
    let chunk = files.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                let handle = scope
                    .spawn(move || part.iter().map(|(p, b)| parse_file(p, b, options)).collect::<Vec<_>>());
                (part.len(), handle)
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(len, h)| {
                h.join().unwrap_or_else(|_| {
                    // The parser does not panic on any input (robustness tests); if it ever did, the
                    // chunk's files count as bad rather than taking the source down.
                    let error = FileError {
                        document: 0,
                        object: String::new(),
                        line: 0,
                        path: String::new(),
                        message: "internal error: the parser panicked".into(),
                    };
                    vec![Err(vec![error]); len]
                })
            })
            .collect()
    })
}

/// `true` if the document's errors make its file bad (see the module doc).
fn rejects_file(doc: &ParsedDocument) -> bool {
    if doc.errors.is_empty() {
        return false;
    }
    let linted_kube_kind = matches!(doc.kind.as_str(), "Service" | "Deployment")
        && matches!(api::schema::lookup(&doc.api_version, &doc.kind), api::schema::Lookup::Other);
    !linted_kube_kind
}

/// One file's objects, or its errors.
pub fn parse_content(
    path: &Path,
    bytes: &[u8],
    options: &ParseOptions,
) -> Result<Vec<Arc<Config>>, Vec<FileError>> {
    parse_file(path, bytes, options).map(|docs| docs.into_iter().map(|d| d.config).collect())
}

/// One object of a good file, with where its document starts and its validation warnings.
#[derive(Clone)]
struct ParsedObject {
    config: Arc<Config>,
    line: u32,
    warnings: Vec<String>,
}

/// [`parse_content`], keeping each object's line and warnings.
fn parse_file(
    path: &Path,
    bytes: &[u8],
    options: &ParseOptions,
) -> Result<Vec<ParsedObject>, Vec<FileError>> {
    let text = std::str::from_utf8(bytes).map_err(|err| {
        vec![FileError {
            document: 0,
            object: String::new(),
            line: 0,
            path: String::new(),
            message: format!("not UTF-8 text: {err}"),
        }]
    })?;
    let file = path.display().to_string();
    let mut configs = Vec::new();
    let mut errors = Vec::new();
    for doc in parse_text(&file, text, options) {
        for w in &doc.warnings {
            tracing::warn!("{file}:{}: {}: {w}", w.line, doc.object_ref());
        }
        if rejects_file(&doc) {
            errors.extend(doc.errors.iter().map(|f| FileError {
                document: doc.index,
                object: doc.object_ref(),
                line: f.line,
                path: f.path.clone(),
                message: f.message.clone(),
            }));
        }
        if let Some(config) = doc.config {
            let warnings = doc.warnings.iter().map(|w| format!("{}: {}", w.path, w.message)).collect();
            configs.push(ParsedObject { config: Arc::new(config), line: doc.line, warnings });
        }
    }
    if errors.is_empty() { Ok(configs) } else { Err(errors) }
}

impl Feed for FileSource {
    fn store(&self) -> &MemoryStore {
        &self.inner.store
    }

    /// `file:///PATH` of the file defining the object (absolute).
    fn source_of(&self, key: &ConfigKey) -> Option<String> {
        let origin = self.origin(key)?;
        let file = std::path::absolute(&origin.file).unwrap_or(origin.file);
        Some(format!("file://{}", file.display()))
    }

    /// Watches the directory until `shutdown` (a scan at start, on changes, and periodically).
    fn run(&self, shutdown: Shutdown) -> RunFuture {
        Box::pin(self.clone().watch(shutdown))
    }

    /// Always: [`FileSource::new`] has read the directory.
    fn loaded(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use notify::event::{
        AccessKind, AccessMode, CreateKind, DataChange, EventKind, MetadataKind, ModifyKind, RemoveKind,
        RenameMode,
    };

    use super::{EventMeaning, Writes, classify};

    fn event(kind: EventKind) -> notify::Result<notify::Event> {
        event_on(kind, "/config/a.yaml")
    }

    fn event_on(kind: EventKind, path: &str) -> notify::Result<notify::Event> {
        Ok(notify::Event::new(kind).add_path(path.into()))
    }

    #[test]
    fn events_are_writes_completions_or_nothing() {
        let cases = [
            (EventKind::Create(CreateKind::File), EventMeaning::Writing),
            (EventKind::Modify(ModifyKind::Data(DataChange::Content)), EventMeaning::Writing),
            (EventKind::Modify(ModifyKind::Any), EventMeaning::Writing),
            (EventKind::Access(AccessKind::Close(AccessMode::Write)), EventMeaning::Complete),
            (EventKind::Modify(ModifyKind::Name(RenameMode::Both)), EventMeaning::Complete),
            (EventKind::Modify(ModifyKind::Name(RenameMode::To)), EventMeaning::Complete),
            (EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)), EventMeaning::Complete),
            (EventKind::Create(CreateKind::Folder), EventMeaning::Complete),
            (EventKind::Remove(RemoveKind::Folder), EventMeaning::Complete),
            (EventKind::Any, EventMeaning::Complete),
            (EventKind::Other, EventMeaning::Complete),
            (EventKind::Access(AccessKind::Read), EventMeaning::Ignore),
            (EventKind::Access(AccessKind::Open(AccessMode::Any)), EventMeaning::Ignore),
            (EventKind::Access(AccessKind::Close(AccessMode::Read)), EventMeaning::Ignore),
        ];
        for (kind, meaning) in cases {
            assert_eq!(classify(&event(kind)), meaning, "{kind:?}");
        }
        assert_eq!(classify(&Err(notify::Error::generic("inotify queue overflow"))), EventMeaning::Error);
    }

    #[test]
    fn a_new_directory_is_noted_once_and_a_renamed_file_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let file = dir.path().join("a.yaml");
        std::fs::write(&file, "x").unwrap();
        let writes = Writes::default();
        assert!(!writes.take_new_dir());
        writes.record(&event_on(EventKind::Modify(ModifyKind::Name(RenameMode::To)), file.to_str().unwrap()));
        assert!(!writes.take_new_dir(), "a file renamed into place is not a directory");
        writes.record(&event_on(EventKind::Create(CreateKind::Folder), sub.to_str().unwrap()));
        assert!(writes.take_new_dir());
        assert!(!writes.take_new_dir(), "taken once");
        writes.record(&event_on(EventKind::Modify(ModifyKind::Name(RenameMode::To)), sub.to_str().unwrap()));
        assert!(writes.take_new_dir(), "a directory renamed into the tree");
    }

    #[test]
    fn a_file_is_written_until_closed_removed_or_renamed_away() {
        let writes = Writes::default();
        assert!(writes.settled());
        // An atomic write: the temporary file is created, written, closed, renamed into place.
        assert!(writes.record(&event_on(EventKind::Create(CreateKind::File), "/c/.a.tmp")));
        assert!(writes.record(&event_on(EventKind::Modify(ModifyKind::Data(DataChange::Any)), "/c/.a.tmp")));
        assert!(!writes.settled());
        assert!(
            writes.record(&event_on(EventKind::Access(AccessKind::Close(AccessMode::Write)), "/c/.a.tmp"))
        );
        assert!(writes.settled());
        assert!(writes.record(&event_on(EventKind::Modify(ModifyKind::Name(RenameMode::Both)), "/c/a.yaml")));
        assert!(writes.settled());

        // Two files open: settled only when both are done (one closed, one removed).
        writes.record(&event_on(EventKind::Modify(ModifyKind::Any), "/c/b.yaml"));
        writes.record(&event_on(EventKind::Create(CreateKind::File), "/c/d.yaml"));
        writes.record(&event_on(EventKind::Access(AccessKind::Close(AccessMode::Write)), "/c/b.yaml"));
        assert!(!writes.settled());
        // Reads change nothing and do not wake the scan loop.
        assert!(
            !writes.record(&event_on(EventKind::Access(AccessKind::Close(AccessMode::Read)), "/c/d.yaml"))
        );
        assert!(!writes.settled());
        writes.record(&event_on(EventKind::Remove(RemoveKind::File), "/c/d.yaml"));
        assert!(writes.settled());

        // A write whose close never comes is forgotten after the longest wait.
        writes.record(&event_on(EventKind::Modify(ModifyKind::Any), "/c/e.yaml"));
        writes.forget();
        assert!(writes.settled());
    }
}
