//! [`FileSecrets`]: serves the SDS secrets `file-cert:CERT~KEY` and `file-root:CA` that the generators
//! reference for certificate files of DestinationRules and Gateways (names: [`model::file_secret`]; references: `networking::sds`).
//!
//! In Istio, istio-agent answers these names from the proxy's own file system. meshpilot's proxies
//! talk to the control plane directly over ADS, so the control plane reads the files and sends their
//! bytes inline. That makes the names a way to read files on the control plane's host, so only files
//! under a directory given with `--file-secret-root` are read (none by default): otherwise any proxy
//! could ask for `file-cert:/etc/shadow~/etc/shadow`. A path is checked twice: lexically (after
//! resolving `.` and `..`) before the file system is touched, and again after resolving symlinks, so a
//! symlink under a root cannot lead out of it.
//!
//! A name that cannot be served (malformed, outside the roots, missing, unreadable, not PEM) is not
//! answered: Envoy keeps the cluster or listener warming until the secret comes or its initial fetch
//! timeout (15 s) passes, as it does when istio-agent cannot read a file. The reason is logged once per
//! name and listed by [`FileSecrets::status`] (`/debug/configstatusz`). A key that does not belong to
//! its certificate (a rotation caught half written) counts as not servable, as in istio-agent. A secret that was served keeps
//! its last good content when its files later become unusable (a half-written rotation must not take
//! TLS down).
//!
//! ```text
//!  SDS request ─► resources(names) ─► cache ─(miss)─► resolve under roots ─► read ─► PEM check ─► Secret
//!  notify (parent directories of served files) ─► debounce ─► refresh ─► changed names
//!        periodic re-check (lost events, files that appear later) ─┘       │
//!                   an SDS-only push event for `names` to the subscribed connections only
//! ```

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Component, Path, PathBuf},
    sync::{Arc, Mutex},
    time::SystemTime,
};

use envoy_types::pb::envoy::{
    config::core::v3::{DataSource, data_source},
    extensions::transport_sockets::tls::v3::{CertificateValidationContext, Secret, TlsCertificate, secret},
};
use model::{file_secret::FileSecret, push::node::Proxy};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};
use xds::{ConnectionRegistry, Resource, type_url};

use crate::{
    FileSecretOptions,
    key_match::key_matches_certificate,
    pem::{check_certificates, check_private_key},
};

/// Largest certificate or key file read (1 MiB); larger files are refused as not certificates.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// One `--file-secret-root`, as given (made absolute) and with symlinks resolved.
#[derive(Debug, Clone)]
struct Root {
    given: PathBuf,
    canonical: PathBuf,
}

#[derive(Debug, Clone)]
struct Served {
    resource: Resource,
    files: Vec<PathBuf>,
}

#[derive(Debug, Default)]
struct Entry {
    /// The last good secret.
    served: Option<Served>,
    /// Why the name cannot be served now, and since when.
    error: Option<(String, SystemTime)>,
    /// Directories whose changes may change the secret.
    dirs: Vec<PathBuf>,
}

#[derive(Default)]
struct State {
    entries: BTreeMap<String, Entry>,
    watcher: Option<notify::RecommendedWatcher>,
    watched: BTreeSet<PathBuf>,
}

/// The outcome of reading one name from disk.
struct Loaded {
    result: Result<Served, String>,
    dirs: Vec<PathBuf>,
}

/// Serves `file-cert:` / `file-root:` secrets from files under the configured roots; see the module
/// documentation.
pub struct FileSecrets {
    roots: Vec<Root>,
    base: PathBuf,
    options: FileSecretOptions,
    state: Mutex<State>,
}

impl std::fmt::Debug for FileSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSecrets").field("roots", &self.roots).finish_non_exhaustive()
    }
}

/// One name's state, for `/debug/configstatusz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSecretStatus {
    /// The SDS resource name.
    pub name: String,
    /// Whether a secret is served for it (possibly the last good one while `error` is set).
    pub served: bool,
    /// The files it was read from (symlinks resolved).
    pub files: Vec<PathBuf>,
    /// Why it cannot be served (or refreshed) now.
    pub error: Option<String>,
    /// Since when `error` holds.
    pub error_since: Option<SystemTime>,
}

impl FileSecrets {
    /// Secrets readable under `options.roots`. Relative certificate paths in names are resolved
    /// against the current directory (as istio-agent does).
    ///
    /// # Errors
    /// A root that does not exist or is not a directory, naming it.
    pub fn new(options: FileSecretOptions) -> Result<Arc<FileSecrets>, String> {
        let base = std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
        let mut roots = Vec::new();
        for dir in &options.roots {
            let given = lexical(&base.join(dir));
            let canonical = std::fs::canonicalize(&given)
                .map_err(|e| format!("--file-secret-root {}: {e}", dir.display()))?;
            if !canonical.is_dir() {
                return Err(format!("--file-secret-root {}: not a directory", dir.display()));
            }
            roots.push(Root { given, canonical });
        }
        Ok(Arc::new(FileSecrets { roots, base, options, state: Mutex::new(State::default()) }))
    }

    /// Secrets that read no file: every name is refused (no `--file-secret-root`).
    pub fn disabled() -> Arc<FileSecrets> {
        Arc::new(FileSecrets {
            roots: Vec::new(),
            base: PathBuf::from("/"),
            options: FileSecretOptions::default(),
            state: Mutex::new(State::default()),
        })
    }

    /// The roots, symlinks resolved.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.roots.iter().map(|r| r.canonical.clone()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The secrets for `names` that can be served, in name order; names seen for the first time are
    /// read now (and then kept up to date by [`FileSecrets::run`]). Names that cannot be served are
    /// left out.
    pub fn resources(&self, names: &BTreeSet<String>) -> Vec<Resource> {
        let missing: Vec<&String> = {
            let state = self.lock();
            names.iter().filter(|n| !state.entries.contains_key(*n)).collect()
        };
        let loaded: Vec<(&String, Loaded)> = missing.into_iter().map(|n| (n, self.load(n))).collect();
        let mut state = self.lock();
        for (name, loaded) in loaded {
            if state.entries.contains_key(name) {
                continue;
            }
            let mut entry = Entry::default();
            record(name, &mut entry, loaded);
            let dirs = entry.dirs.clone();
            state.entries.insert(name.clone(), entry);
            watch_dirs(&mut state, &dirs);
        }
        names
            .iter()
            .filter_map(|n| state.entries.get(n).and_then(|e| e.served.as_ref()).map(|s| s.resource.clone()))
            .collect()
    }

    /// Re-reads every known name; returns the names whose served secret changed (new content, or
    /// served for the first time).
    pub fn refresh(&self) -> BTreeSet<String> {
        let names: Vec<String> = self.lock().entries.keys().cloned().collect();
        let loaded: Vec<(String, Loaded)> = names.into_iter().map(|n| (n.clone(), self.load(&n))).collect();
        let mut state = self.lock();
        let mut changed = BTreeSet::new();
        for (name, loaded) in loaded {
            let Some(entry) = state.entries.get_mut(&name) else { continue };
            let before = entry.served.as_ref().map(|s| s.resource.version.clone());
            record(&name, entry, loaded);
            if entry.served.as_ref().map(|s| &s.resource.version) != before.as_ref() {
                changed.insert(name);
            }
        }
        let dirs: Vec<PathBuf> = state.entries.values().flat_map(|e| e.dirs.clone()).collect();
        watch_dirs(&mut state, &dirs);
        changed
    }

    /// Forgets names no connection watches any more (`keep` is the union of the connections' SDS
    /// subscriptions) and stops watching directories only they needed.
    pub fn retain(&self, keep: &BTreeSet<String>) {
        let mut state = self.lock();
        state.entries.retain(|name, _| keep.contains(name));
        let needed: BTreeSet<PathBuf> = state.entries.values().flat_map(|e| e.dirs.iter().cloned()).collect();
        let stale: Vec<PathBuf> = state.watched.difference(&needed).cloned().collect();
        for dir in stale {
            state.watched.remove(&dir);
            if let Some(w) = state.watcher.as_mut() {
                let _ = notify::Watcher::unwatch(w, &dir);
            }
        }
    }

    /// Every known name with its state, in name order.
    pub fn status(&self) -> Vec<FileSecretStatus> {
        self.lock()
            .entries
            .iter()
            .map(|(name, e)| FileSecretStatus {
                name: name.clone(),
                served: e.served.is_some(),
                files: e.served.as_ref().map(|s| s.files.clone()).unwrap_or_default(),
                error: e.error.as_ref().map(|(r, _)| r.clone()),
                error_since: e.error.as_ref().map(|(_, t)| *t),
            })
            .collect()
    }

    /// `{roots, secrets: [{name, served, files, error, errorSince}]}` for `/debug/configstatusz`.
    pub fn status_json(&self) -> Value {
        let secrets: Vec<Value> = self
            .status()
            .into_iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "served": s.served,
                    "files": s.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
                    "error": s.error,
                    "errorSince": s.error_since.map(|t| xds::debug::rfc3339_nano(Some(t))),
                })
            })
            .collect();
        json!({
            "roots": self.roots().iter().map(|r| r.display().to_string()).collect::<Vec<_>>(),
            "secrets": secrets,
        })
    }

    /// Keeps served secrets up to date until `shutdown`: watches the directories of the files read
    /// (notify), re-reads after `options.debounce`, and every `options.recheck_interval` re-reads
    /// all names (lost events, files that appear later) and forgets names no connection of
    /// `connections` watches (read only: their SDS subscriptions). The names of changed secrets are
    /// reported to `changed` (the binary sends them to the discovery server as `Input::Secrets`, which
    /// pushes them over SDS to the connections subscribed to them).
    pub async fn run<P>(
        self: Arc<Self>,
        connections: ConnectionRegistry<Proxy, P>,
        mut shutdown: model::Shutdown,
        changed: impl Fn(BTreeSet<String>) + Send + Sync + 'static,
    ) {
        let (tx, mut rx) = mpsc::channel::<()>(1);
        match notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) if matches!(event.kind, notify::EventKind::Access(_)) => {}
            Ok(_) => {
                let _ = tx.try_send(());
            }
            Err(err) => {
                warn!(error = %err, "certificate file watch error; re-reading");
                let _ = tx.try_send(());
            }
        }) {
            Ok(w) => {
                let mut state = self.lock();
                state.watcher = Some(w);
                let dirs: Vec<PathBuf> = std::mem::take(&mut state.watched).into_iter().collect();
                watch_dirs(&mut state, &dirs);
            }
            Err(err) => {
                warn!(error = %err, "cannot create a file watcher for certificate files; relying on periodic re-checks")
            }
        }
        // Catch up with changes made before the watch.
        self.refresh_and_report(&changed).await;
        let mut ticker = config::Periodic::new(self.options.recheck_interval);
        loop {
            tokio::select! {
                () = shutdown.wait() => break,
                Some(()) = rx.recv() => {
                    tokio::select! {
                        () = shutdown.wait() => break,
                        () = tokio::time::sleep(self.options.debounce) => {}
                    }
                    while rx.try_recv().is_ok() {}
                    self.refresh_and_report(&changed).await;
                }
                () = ticker.tick() => {
                    self.retain(&subscribed(&connections));
                    self.refresh_and_report(&changed).await;
                }
            }
        }
        self.lock().watcher = None;
        debug!("certificate file watch stopped");
    }

    async fn refresh_and_report(self: &Arc<Self>, report: &impl Fn(BTreeSet<String>)) {
        let this = self.clone();
        let changed = match tokio::task::spawn_blocking(move || this.refresh()).await {
            Ok(changed) => changed,
            Err(err) => {
                warn!(error = %err, "re-reading certificate files panicked");
                return;
            }
        };
        if !changed.is_empty() {
            info!(secrets = changed.len(), "certificate files changed");
            report(changed);
        }
    }

    /// Reads one name from disk.
    fn load(&self, name: &str) -> Loaded {
        let secret = match FileSecret::parse(name) {
            Ok(s) => s,
            Err(e) => return Loaded { result: Err(e.to_string()), dirs: Vec::new() },
        };
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        let mut contents = Vec::new();
        let roles: &[Role] = match secret {
            FileSecret::KeyPair { .. } => &[Role::Certificates, Role::PrivateKey],
            FileSecret::Root { .. } => &[Role::Certificates],
        };
        for (path, role) in secret.paths().into_iter().zip(roles) {
            match self.read(path, *role, &mut dirs) {
                Ok((file, bytes)) => {
                    files.push(file);
                    contents.push(bytes);
                }
                Err(reason) => return Loaded { result: Err(reason), dirs },
            }
        }
        if let FileSecret::KeyPair { cert, key } = &secret
            && let (Ok(certs), Ok(k)) = (check_certificates(&contents[0]), check_private_key(&contents[1]))
            && key_matches_certificate(&certs[0], &k) == Some(false)
        {
            // Typically a rotation caught between writing the certificate and the key.
            let reason = format!("{key}: the private key does not belong to the first certificate of {cert}");
            return Loaded { result: Err(reason), dirs };
        }
        let resource = Resource::new(name, &to_secret(&secret, contents));
        Loaded { result: Ok(Served { resource, files }), dirs }
    }

    /// Resolves, reads and checks one file; adds the directories to watch for it to `dirs`.
    fn read(&self, path: &str, role: Role, dirs: &mut Vec<PathBuf>) -> Result<(PathBuf, Vec<u8>), String> {
        let file = self.resolve(path, dirs)?;
        let meta = std::fs::metadata(&file).map_err(|e| format!("{path}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("{path}: not a regular file"));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(format!(
                "{path}: {} bytes, larger than a certificate file can be (1 MiB)",
                meta.len()
            ));
        }
        let bytes = std::fs::read(&file).map_err(|e| format!("{path}: {e}"))?;
        match role {
            Role::Certificates => check_certificates(&bytes).map(|_| ()),
            Role::PrivateKey => check_private_key(&bytes).map(|_| ()),
        }
        .map_err(|e| format!("{path}: {e}"))?;
        Ok((file, bytes))
    }

    /// The file `path` names, symlinks resolved, if it lies under a root (checked before and after
    /// resolving symlinks).
    fn resolve(&self, path: &str, dirs: &mut Vec<PathBuf>) -> Result<PathBuf, String> {
        if self.roots.is_empty() {
            return Err(format!(
                "{path}: no --file-secret-root is configured, so meshpilot reads no certificate files"
            ));
        }
        let absolute = lexical(&self.base.join(path));
        if !self.roots.iter().any(|r| absolute.starts_with(&r.given) || absolute.starts_with(&r.canonical)) {
            return Err(format!("{path}: outside every --file-secret-root ({})", self.roots_list()));
        }
        if let Some(parent) = absolute.parent() {
            dirs.push(parent.to_path_buf());
        }
        let canonical = std::fs::canonicalize(&absolute).map_err(|e| format!("{path}: {e}"))?;
        if !self.roots.iter().any(|r| canonical.starts_with(&r.canonical)) {
            return Err(format!(
                "{path}: resolves to {} through a symlink, outside every --file-secret-root ({})",
                canonical.display(),
                self.roots_list()
            ));
        }
        if let Some(parent) = canonical.parent()
            && !dirs.iter().any(|d| d == parent)
        {
            dirs.push(parent.to_path_buf());
        }
        Ok(canonical)
    }

    fn roots_list(&self) -> String {
        self.roots.iter().map(|r| r.canonical.display().to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// Applies a load to an entry, logging when the name's state changes (once per name and reason).
fn record(name: &str, entry: &mut Entry, loaded: Loaded) {
    entry.dirs = loaded.dirs;
    match loaded.result {
        Ok(served) => {
            if entry.error.take().is_some() || entry.served.is_none() {
                info!(secret = name, files = ?served.files, "serving certificate files over SDS");
            } else if entry.served.as_ref().is_some_and(|s| s.resource.version != served.resource.version) {
                info!(secret = name, "certificate files changed; pushing the new secret");
            }
            entry.served = Some(served);
        }
        Err(reason) => {
            if entry.error.as_ref().is_none_or(|(r, _)| *r != reason) {
                let kept = if entry.served.is_some() { "; the last good secret stays in force" } else { "" };
                warn!(secret = name, "cannot serve SDS secret: {reason}{kept}");
                entry.error = Some((reason, SystemTime::now()));
            }
        }
    }
}

/// Starts watching `dirs` (non-recursively) where not yet watched. Directories that cannot be
/// watched (e.g. missing) are left to the periodic re-check.
fn watch_dirs(state: &mut State, dirs: &[PathBuf]) {
    for dir in dirs {
        if state.watched.contains(dir) {
            continue;
        }
        match state.watcher.as_mut() {
            Some(w) => {
                if notify::Watcher::watch(w, dir, notify::RecursiveMode::NonRecursive).is_ok() {
                    state.watched.insert(dir.clone());
                }
            }
            // Not running yet: remembered, watched when `run` starts.
            None => {
                state.watched.insert(dir.clone());
            }
        }
    }
}

/// The union of the connections' SDS subscriptions.
fn subscribed<P>(connections: &ConnectionRegistry<Proxy, P>) -> BTreeSet<String> {
    connections
        .snapshot()
        .into_iter()
        .filter_map(|c| c.types.get(type_url::SECRET).map(|t| t.watch.names.clone()))
        .flatten()
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Role {
    Certificates,
    PrivateKey,
}

/// `path` with `.` and `..` resolved without touching the file system (`..` above the root stays at
/// the root).
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The Envoy `Secret` named `name` with the files' contents inline (`inline_bytes`), in the order
/// of [`FileSecret::paths`] of `file`: a `TlsCertificate` (chain, key) or a `CertificateValidationContext`
/// (`trusted_ca`), as istio-agent sends them.
///
/// # Panics
/// Never; missing contents give empty data sources.
pub fn to_secret(file: &FileSecret, contents: Vec<Vec<u8>>) -> Secret {
    let mut contents = contents.into_iter();
    let mut next = || inline(contents.next().unwrap_or_default());
    let r#type = match file {
        FileSecret::KeyPair { .. } => secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(next()),
            private_key: Some(next()),
            ..Default::default()
        }),
        FileSecret::Root { .. } => secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(next()),
            ..Default::default()
        }),
    };
    Secret { name: file.resource_name(), r#type: Some(r#type) }
}

fn inline(bytes: Vec<u8>) -> DataSource {
    DataSource { specifier: Some(data_source::Specifier::InlineBytes(bytes)), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn secrets_carry_the_bytes_inline() {
        let pair = FileSecret::key_pair("/c.pem", "/k.pem").unwrap();
        let s = to_secret(&pair, vec![b"CERT".to_vec(), b"KEY".to_vec()]);
        assert_eq!(s.name, "file-cert:/c.pem~/k.pem");
        let Some(secret::Type::TlsCertificate(t)) = s.r#type else { panic!("{s:?}") };
        assert_eq!(t.certificate_chain, Some(inline(b"CERT".to_vec())));
        assert_eq!(t.private_key, Some(inline(b"KEY".to_vec())));
        let s = to_secret(&FileSecret::root("/ca.pem").unwrap(), vec![b"CA".to_vec()]);
        let Some(secret::Type::ValidationContext(v)) = s.r#type else { panic!("{s:?}") };
        assert_eq!(v.trusted_ca, Some(inline(b"CA".to_vec())));
    }

    /// A syntactically valid PEM block (its DER is an empty SEQUENCE).
    fn pem(label: &str) -> String {
        format!("-----BEGIN {label}-----\nMAA=\n-----END {label}-----\n")
    }

    fn secrets(roots: &[&Path]) -> Arc<FileSecrets> {
        FileSecrets::new(FileSecretOptions {
            roots: roots.iter().map(|r| r.to_path_buf()).collect(),
            ..FileSecretOptions::default()
        })
        .unwrap()
    }

    fn names(list: &[impl AsRef<str>]) -> BTreeSet<String> {
        list.iter().map(|n| n.as_ref().to_string()).collect()
    }

    fn error_of(s: &FileSecrets, name: &str) -> String {
        s.status().into_iter().find(|st| st.name == name).and_then(|st| st.error).unwrap_or_default()
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_until_the_pair_matches() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, include_str!("../testdata/rsa-cert.pem")).unwrap();
        std::fs::write(&key, include_str!("../testdata/ec-key-sec1.pem")).unwrap();
        let s = secrets(&[dir.path()]);
        let name = format!("file-cert:{}~{}", cert.display(), key.display());
        let want = names(&[&name]);
        assert!(s.resources(&want).is_empty());
        let err = error_of(&s, &name);
        assert!(err.contains("does not belong to the first certificate"), "{err}");
        std::fs::write(&key, include_str!("../testdata/rsa-key.pem")).unwrap();
        assert_eq!(s.refresh(), want);
        assert!(error_of(&s, &name).is_empty());
    }

    #[test]
    fn lexical_resolves_dots() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(lexical(Path::new("/a/../../../etc/shadow")), PathBuf::from("/etc/shadow"));
    }

    #[test]
    fn serves_files_under_a_root_inline() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("certs");
        std::fs::create_dir(&root).unwrap();
        let cert = pem("CERTIFICATE");
        std::fs::write(root.join("cert.pem"), &cert).unwrap();
        std::fs::write(root.join("key.pem"), pem("PRIVATE KEY")).unwrap();
        let s = secrets(&[&root]);
        let pair = format!("file-cert:{0}/cert.pem~{0}/key.pem", root.display());
        let ca = format!("file-root:{}/./sub/../cert.pem", root.display());
        let got = s.resources(&names(&[pair.clone(), ca.clone()]));
        assert_eq!(got.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), [pair.as_str(), ca.as_str()]);
        let secret = Secret::decode(got[0].body.value.as_slice()).unwrap();
        assert_eq!(got[0].body.type_url, type_url::SECRET);
        let Some(secret::Type::TlsCertificate(t)) = secret.r#type else { panic!("{secret:?}") };
        assert_eq!(
            t.certificate_chain.unwrap().specifier,
            Some(envoy_types::pb::envoy::config::core::v3::data_source::Specifier::InlineBytes(
                cert.into_bytes()
            ))
        );
        assert!(s.status().iter().all(|st| st.served && st.error.is_none()));
    }

    #[test]
    fn refuses_names_outside_the_roots_traversal_and_symlink_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("certs");
        let outside = dir.path().join("private");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("ca.pem"), pem("CERTIFICATE")).unwrap();
        std::os::unix::fs::symlink(outside.join("ca.pem"), root.join("link.pem")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("linkdir")).unwrap();
        // A root given as a symlink to a directory works through either spelling.
        std::os::unix::fs::symlink(&outside, dir.path().join("alias")).unwrap();
        let s = secrets(&[&root]);
        let cases = [
            (format!("file-root:{}/ca.pem", outside.display()), "outside every --file-secret-root"),
            (format!("file-root:{}/../private/ca.pem", root.display()), "outside every --file-secret-root"),
            (format!("file-root:{}/link.pem", root.display()), "through a symlink, outside"),
            (format!("file-root:{}/linkdir/ca.pem", root.display()), "through a symlink, outside"),
            (format!("file-root:{}/missing.pem", root.display()), "No such file"),
            ("file-root:/etc/shadow".to_string(), "outside every --file-secret-root"),
            ("file-cert:/etc/passwd".to_string(), "found no '~'"),
            ("file-root:system".to_string(), "not served"),
            ("default".to_string(), "not a file secret name"),
        ];
        let all: BTreeSet<String> = cases.iter().map(|(n, _)| n.clone()).collect();
        assert!(s.resources(&all).is_empty());
        for (name, want) in &cases {
            let err = error_of(&s, name);
            assert!(err.contains(want), "{name}: {err}");
        }
        assert!(error_of(&s, &cases[0].0).contains(&root.canonicalize().unwrap().display().to_string()));

        let aliased = secrets(&[&dir.path().join("alias")]);
        let by_alias = format!("file-root:{}/alias/ca.pem", dir.path().display());
        let by_target = format!("file-root:{}/ca.pem", outside.display());
        assert_eq!(aliased.resources(&names(&[by_alias, by_target])).len(), 2);

        let none = FileSecrets::disabled();
        let n = format!("file-root:{}/ca.pem", outside.display());
        assert!(none.resources(&names(&[&n])).is_empty());
        assert!(error_of(&none, &n).contains("no --file-secret-root"));
    }

    #[test]
    fn bad_or_huge_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cert.pem"), pem("CERTIFICATE")).unwrap();
        std::fs::write(dir.path().join("key.pem"), pem("CERTIFICATE")).unwrap();
        std::fs::write(dir.path().join("big.pem"), vec![b'a'; (MAX_FILE_BYTES + 1) as usize]).unwrap();
        let s = secrets(&[dir.path()]);
        let d = dir.path().display();
        let pair = format!("file-cert:{d}/cert.pem~{d}/key.pem");
        let big = format!("file-root:{d}/big.pem");
        let a_dir = format!("file-root:{d}");
        assert!(s.resources(&names(&[pair.clone(), big.clone(), a_dir.clone()])).is_empty());
        assert!(error_of(&s, &pair).contains("key.pem: no PEM private key"), "{}", error_of(&s, &pair));
        assert!(error_of(&s, &big).contains("larger than"), "{}", error_of(&s, &big));
        assert!(error_of(&s, &a_dir).contains("not a regular file"), "{}", error_of(&s, &a_dir));
    }

    #[test]
    fn refresh_reports_changes_and_keeps_the_last_good_secret() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        let s = secrets(&[dir.path()]);
        let name = format!("file-root:{}", ca.display());
        let want = names(&[&name]);
        assert!(s.resources(&want).is_empty(), "missing at first");
        std::fs::write(&ca, pem("CERTIFICATE")).unwrap();
        assert_eq!(s.refresh(), want, "appeared");
        let v1 = s.resources(&want)[0].version.clone();
        assert!(s.refresh().is_empty(), "unchanged");
        std::fs::write(&ca, pem("CERTIFICATE").repeat(2)).unwrap();
        assert_eq!(s.refresh(), want, "rotated");
        let v2 = s.resources(&want)[0].version.clone();
        assert_ne!(v1, v2);
        std::fs::write(&ca, "garbage").unwrap();
        assert!(s.refresh().is_empty(), "a bad rewrite changes nothing");
        assert_eq!(s.resources(&want)[0].version, v2, "the last good secret stays");
        assert!(error_of(&s, &name).contains("no PEM CERTIFICATE"));
        s.retain(&BTreeSet::new());
        assert!(s.status().is_empty());
    }
}
