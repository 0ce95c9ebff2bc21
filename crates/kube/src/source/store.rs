//! [`KubeSource`] as a [`ConfigStore`]: reads from the store the watches fill, writes as
//! synchronous REST calls on a dedicated thread (see the module documentation of [`super`]).

use std::sync::{Arc, Mutex, mpsc};

use api::Kind;
use futures::future::BoxFuture;
use kube::Client;
use model::{Config, ConfigKey, ConfigStore, StoreError};

use super::KubeSource;
use crate::client::{self, KubeError, resource_version, to_object};

impl KubeSource {
    fn writer(&self) -> Result<&Writer, StoreError> {
        self.inner.writer.get_or_init(|| Writer::start(self.inner.config.clone())).as_ref().map_err(
            |message| StoreError::Backend { source_name: self.inner.name.clone(), message: message.clone() },
        )
    }

    fn backend(&self, err: &KubeError) -> StoreError {
        StoreError::Backend { source_name: self.inner.name.clone(), message: err.to_string() }
    }

    fn check_kind(&self, kind: Kind) -> Result<(), StoreError> {
        if self.inner.options.kinds.contains(&kind) {
            Ok(())
        } else {
            Err(StoreError::UnknownKind { kind, source_name: self.inner.name.clone() })
        }
    }

    /// The current resource version of `key` in the cluster (for conflict reports), or a typed error.
    fn current_version(&self, writer: &Writer, key: &ConfigKey) -> Result<String, StoreError> {
        let (kind, ns, name) = (key.kind, key.namespace.clone(), key.name.clone());
        let current = writer.call(move |c| Box::pin(async move { client::get(&c, kind, &ns, &name).await }));
        match current {
            Ok(Some(object)) => Ok(resource_version(&object)),
            Ok(None) => Err(StoreError::NotFound(key.clone())),
            Err(err) => Err(self.backend(&err)),
        }
    }

    fn write_error(&self, writer: &Writer, key: &ConfigKey, given: &str, err: &KubeError) -> StoreError {
        if err.is_already_exists() {
            StoreError::AlreadyExists(key.clone())
        } else if err.is_conflict() {
            let current = self.current_version(writer, key).unwrap_or_default();
            StoreError::Conflict { key: key.clone(), given: given.to_string(), current }
        } else if err.is_not_found() {
            StoreError::NotFound(key.clone())
        } else {
            self.backend(err)
        }
    }
}

type Job = Box<dyn FnOnce(&tokio::runtime::Runtime, &Client) + Send>;

/// A thread with its own runtime and client that performs the store's synchronous writes.
pub(super) struct Writer {
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl Writer {
    fn start(config: kube::Config) -> Result<Writer, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the writer runtime: {e}"))?;
        let client =
            runtime.block_on(async { client::connection(config) }).map_err(|e| e.to_string())?.client;
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("meshpilot-kube-writer".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job(&runtime, &client);
                }
            })
            .map_err(|e| format!("cannot start the writer thread: {e}"))?;
        Ok(Writer { jobs: Mutex::new(tx) })
    }

    /// Runs `f` on the writer thread and waits for its result.
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(Client) -> BoxFuture<'static, Result<T, KubeError>> + Send + 'static,
    ) -> Result<T, KubeError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |runtime, client| {
            let _ = tx.send(runtime.block_on(f(client.clone())));
        });
        let sent = self.jobs.lock().unwrap_or_else(|p| p.into_inner()).send(job);
        if sent.is_err() {
            return Err(KubeError::Transport("the writer thread stopped".into()));
        }
        rx.recv().unwrap_or_else(|_| Err(KubeError::Transport("the writer thread stopped".into())))
    }
}

impl ConfigStore for KubeSource {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn schemas(&self) -> &[Kind] {
        &self.inner.options.kinds
    }

    fn writable(&self) -> bool {
        true
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Config>> {
        self.inner.store.get(kind, namespace, name)
    }

    /// `k8s://` (the cluster of the kubeconfig), the address mesh config `configSources` uses.
    fn source_of(&self, kind: Kind, namespace: &str, name: &str) -> Option<String> {
        self.inner.store.get(kind, namespace, name).map(|_| "k8s://".to_string())
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<Arc<Config>> {
        self.inner.store.list(kind, namespace)
    }

    fn create(&self, config: Config) -> Result<String, StoreError> {
        let kind = config.kind();
        self.check_kind(kind)?;
        let writer = self.writer()?;
        let key = config.key();
        let mut object = to_object(&config);
        if let Some(meta) = object["metadata"].as_object_mut() {
            meta.remove("resourceVersion");
        }
        let ns = key.namespace.clone();
        let created =
            writer.call(move |c| Box::pin(async move { client::create(&c, kind, &ns, object).await }));
        created.map(|o| resource_version(&o)).map_err(|e| self.write_error(writer, &key, "", &e))
    }

    fn update(&self, config: Config) -> Result<String, StoreError> {
        let kind = config.kind();
        self.check_kind(kind)?;
        let writer = self.writer()?;
        let key = config.key();
        let given = config.meta.resource_version.clone();
        let mut object = to_object(&config);
        // The API server requires a resource version on update; an empty one means "whatever is current".
        let version = if given.is_empty() { self.current_version(writer, &key)? } else { given.clone() };
        object["metadata"]["resourceVersion"] = version.clone().into();
        let ns = key.namespace.clone();
        let updated =
            writer.call(move |c| Box::pin(async move { client::replace(&c, kind, &ns, object).await }));
        updated.map(|o| resource_version(&o)).map_err(|e| self.write_error(writer, &key, &version, &e))
    }

    fn update_status(&self, config: Config) -> Result<String, StoreError> {
        let kind = config.kind();
        self.check_kind(kind)?;
        let writer = self.writer()?;
        let key = config.key();
        let (ns, name) = (key.namespace.clone(), key.name.clone());
        let current = writer
            .call(move |c| Box::pin(async move { client::get(&c, kind, &ns, &name).await }))
            .map_err(|e| self.backend(&e))?
            .ok_or_else(|| StoreError::NotFound(key.clone()))?;
        let current_version = resource_version(&current);
        let given = config.meta.resource_version.clone();
        if !given.is_empty() && given != current_version {
            return Err(StoreError::Conflict { key, given, current: current_version });
        }
        let mut object = current;
        object["status"] = config.status.unwrap_or(serde_json::Value::Null);
        let ns = key.namespace.clone();
        let updated = writer
            .call(move |c| Box::pin(async move { client::replace_status(&c, kind, &ns, object).await }));
        updated
            .map(|o| resource_version(&o))
            .map_err(|e| self.write_error(writer, &key, &current_version, &e))
    }

    fn delete(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), StoreError> {
        self.check_kind(kind)?;
        let writer = self.writer()?;
        let key = ConfigKey { kind, namespace: namespace.to_string(), name: name.to_string() };
        let given = resource_version.unwrap_or_default().to_string();
        let rv = resource_version.filter(|v| !v.is_empty()).map(str::to_string);
        let (ns, n) = (key.namespace.clone(), key.name.clone());
        let deleted = writer
            .call(move |c| Box::pin(async move { client::delete(&c, kind, &ns, &n, rv.as_deref()).await }));
        deleted.map_err(|e| self.write_error(writer, &key, &given, &e))
    }
}
