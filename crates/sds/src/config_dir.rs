//! Kubernetes Secrets in `--config-dir`: documents `apiVersion: v1`, `kind: Secret` with `data`
//! (base64) and/or `stringData` (plain text, winning over `data` for the same key, as the API server
//! merges them) are served as `credentialName` secrets ([`crate::credentials`]), so HTTPS gateways work
//! without Kubernetes (istiod reads Secrets from the cluster only).
//!
//! The config source itself skips these documents (they are not Istio config); this module reads the
//! same files again for Secrets only. A Secret without `metadata.namespace` is in `default` (the file
//! source's default). A document that cannot be read (bad base64, a value that is not a string) is
//! left out with a warning naming file, line and key, and a file with such a document keeps its Secrets
//! from the last good read. A re-scan runs after file-system events (100 ms quiet time) and every
//! `rescan_interval`; changed Secrets are pushed like the cluster's.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::Engine;
use serde_json::Value;
use tracing::warn;

use crate::credentials::{CONFIG_DIR_SOURCE, CredentialSecrets, SecretData, SecretKey};

/// The Secrets of one file's text: `Ok` with every Secret document, or `Err` listing what is wrong
/// (`file:line: …`) when any Secret document is bad. Other documents are ignored.
///
/// # Errors
/// One message per bad Secret document.
pub fn parse_secrets(file: &str, text: &str) -> Result<BTreeMap<SecretKey, SecretData>, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut errors = Vec::new();
    for doc in api::yaml::parse_documents(text) {
        let Ok(doc) = doc else { continue };
        let Some(root) = doc.root else { continue };
        let line = doc.mark.line;
        let json = root.to_json();
        if json.get("kind").and_then(Value::as_str) != Some("Secret")
            || json.get("apiVersion").and_then(Value::as_str) != Some("v1")
        {
            continue;
        }
        let meta = json.get("metadata");
        let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            errors.push(format!("{file}:{line}: Secret without metadata.name"));
            continue;
        }
        let namespace = meta
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        let mut data = BTreeMap::new();
        let mut bad = false;
        let mut read = |field: &str, decode: bool| {
            let Some(map) = json.get(field).and_then(Value::as_object) else { return };
            for (k, v) in map {
                let Some(s) = v.as_str() else {
                    errors.push(format!(
                        "{file}:{line}: Secret {namespace}/{name}: {field}.{k} is not a string"
                    ));
                    bad = true;
                    continue;
                };
                let bytes = if decode {
                    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
                    match base64::engine::general_purpose::STANDARD.decode(compact) {
                        Ok(b) => b,
                        Err(e) => {
                            errors.push(format!(
                                "{file}:{line}: Secret {namespace}/{name}: {field}.{k} is not base64: {e}"
                            ));
                            bad = true;
                            continue;
                        }
                    }
                } else {
                    s.as_bytes().to_vec()
                };
                data.insert(k.clone(), bytes);
            }
        };
        read("data", true);
        read("stringData", false);
        if !bad {
            out.insert((namespace.to_string(), name.to_string()), SecretData { data });
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

/// Reads Secrets from config directories into a [`CredentialSecrets`] store; see the module
/// documentation.
pub struct ConfigDirSecrets {
    dirs: Vec<PathBuf>,
    store: Arc<CredentialSecrets>,
    /// Per file, its last good Secrets.
    files: Mutex<BTreeMap<PathBuf, BTreeMap<SecretKey, SecretData>>>,
    rescan_interval: Option<Duration>,
}

impl std::fmt::Debug for ConfigDirSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigDirSecrets").field("dirs", &self.dirs).finish_non_exhaustive()
    }
}

impl ConfigDirSecrets {
    /// Reads `dirs` now into `store` (source [`CONFIG_DIR_SOURCE`]); [`ConfigDirSecrets::run`] keeps
    /// it up to date, re-scanning at least every `rescan_interval`.
    pub fn new(
        dirs: Vec<PathBuf>,
        store: Arc<CredentialSecrets>,
        rescan_interval: Option<Duration>,
    ) -> Arc<ConfigDirSecrets> {
        let this =
            Arc::new(ConfigDirSecrets { dirs, store, files: Mutex::new(BTreeMap::new()), rescan_interval });
        this.rescan();
        this
    }

    /// Re-reads every file; returns the Secrets whose served content changed.
    pub fn rescan(&self) -> BTreeSet<SecretKey> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen = BTreeSet::new();
        for dir in &self.dirs {
            let list = match config::parse::config_files(dir) {
                Ok(l) => l,
                Err(e) => {
                    warn!(dir = %dir.display(), "cannot list the config directory for Secrets: {e}");
                    // Keep what this directory gave before.
                    seen.extend(files.keys().filter(|f| f.starts_with(dir)).cloned());
                    continue;
                }
            };
            for path in list {
                seen.insert(path.clone());
                let Ok(text) = std::fs::read_to_string(&path) else { continue };
                if !text.contains("Secret") {
                    files.remove(&path);
                    continue;
                }
                match parse_secrets(&path.display().to_string(), &text) {
                    Ok(secrets) => {
                        files.insert(path, secrets);
                    }
                    Err(errors) => {
                        for e in errors {
                            warn!("{e}; the file's last good Secrets stay in force");
                        }
                    }
                }
            }
        }
        files.retain(|f, _| seen.contains(f));
        let mut all = BTreeMap::new();
        for secrets in files.values() {
            for (k, v) in secrets {
                all.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        self.store.replace(CONFIG_DIR_SOURCE, all)
    }

    /// Watches the directories until `shutdown`; each re-scan that changes Secrets reports their keys
    /// to `changed` (the binary sends them to the discovery server as `Input::Secrets`, which pushes
    /// them over SDS to the connections using them).
    pub async fn run(
        self: Arc<Self>,
        shutdown: model::Shutdown,
        changed: impl Fn(BTreeSet<SecretKey>) + Send + Sync + 'static,
    ) {
        let rescan = |this: &Arc<Self>| {
            let keys = this.rescan();
            if !keys.is_empty() {
                changed(keys);
            }
        };
        rescan(&self);
        let options = config::watch::WatchOptions {
            recursive: true,
            settle: Duration::from_millis(100),
            recheck: self.rescan_interval,
            what: "config directory Secrets",
        };
        config::watch::watch_dirs(&self.dirs, &options, shutdown, || rescan(&self)).await;
    }

    /// The directories read.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_read_from_data_and_string_data() {
        let text = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec: {}\n---\n\
                    apiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: istio-system}\n\
                    type: kubernetes.io/tls\ndata:\n  tls.crt: Q0VSVA==\n  tls.key: S0VZ\n\
                    stringData:\n  tls.key: PLAIN\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: other}\n\
                    stringData: {cacert: CA}\n";
        let got = parse_secrets("f.yaml", text).unwrap();
        let cert = &got[&("istio-system".to_string(), "cert".to_string())];
        assert_eq!(cert.data["tls.crt"], b"CERT");
        assert_eq!(cert.data["tls.key"], b"PLAIN", "stringData wins, as the API server merges it");
        assert_eq!(got[&("default".to_string(), "other".to_string())].data["cacert"], b"CA");
    }

    #[test]
    fn bad_documents_are_reported_with_file_and_line() {
        let text = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {tls.crt: '!!notbase64'}\n";
        let errors = parse_secrets("dir/f.yaml", text).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with("dir/f.yaml:") && errors[0].contains("data.tls.crt is not base64"),
            "{}",
            errors[0]
        );
        let text = "apiVersion: v1\nkind: Secret\nmetadata: {namespace: a}\n";
        assert!(parse_secrets("f.yaml", text).unwrap_err()[0].contains("without metadata.name"));
    }

    #[test]
    fn rescans_report_changes_and_keep_bad_files_last_good() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.yaml");
        let write = |v: &str| {
            std::fs::write(&file, format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: n}}\nstringData: {{cacert: {v}}}\n"))
                .unwrap()
        };
        write("one");
        let store = CredentialSecrets::new();
        let reader = ConfigDirSecrets::new(vec![dir.path().to_path_buf()], store.clone(), None);
        assert_eq!(store.get("n", "s").unwrap().data["cacert"], b"one");
        write("two");
        assert_eq!(reader.rescan(), BTreeSet::from([("n".to_string(), "s".to_string())]));
        assert!(reader.rescan().is_empty());
        std::fs::write(
            &file,
            "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: n}\ndata: {cacert: '%%'}\n",
        )
        .unwrap();
        assert!(reader.rescan().is_empty(), "a bad file keeps its last good Secrets");
        assert_eq!(store.get("n", "s").unwrap().data["cacert"], b"two");
        std::fs::remove_file(&file).unwrap();
        assert_eq!(reader.rescan().len(), 1);
        assert!(store.get("n", "s").is_none());
    }
}
