//! Shared helpers of the Kubernetes tests: a running source, an event log, waiting.

#![allow(dead_code)]

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use api::Kind;
use meshpilot_kube::{KubeSource, KubeSourceOptions, testenv::TestEnv};
use model::{Config, ConfigStoreController, Event, ShutdownTrigger, shutdown_channel};

/// Events received by a handler: (event, namespace/name, resource version).
pub type Log = Arc<Mutex<Vec<(Event, String, String)>>>;

/// A started source with a recording handler per kind.
pub struct Running {
    pub source: KubeSource,
    pub log: Log,
    _trigger: ShutdownTrigger,
}

/// Creates a namespace (ignoring "already exists").
pub fn namespace(env: &TestEnv, name: &str) {
    let _ = env.kubectl(&["create", "namespace", name]);
}

/// Starts a source over `env` restricted to `namespaces` (empty: all), with fast retries, and records
/// every event of `kinds`.
pub async fn start(env: &TestEnv, namespaces: &[&str], kinds: &[Kind]) -> Running {
    let config = env.client_config().await.expect("kubeconfig");
    let options = KubeSourceOptions {
        namespaces: namespaces.iter().map(|s| (*s).to_string()).collect(),
        backoff: (Duration::from_millis(100), Duration::from_secs(1)),
        ..KubeSourceOptions::default()
    };
    let source = KubeSource::new(config, options);
    let log: Log = Arc::default();
    for kind in kinds {
        let log = log.clone();
        source.register_event_handler(
            *kind,
            Arc::new(move |_old: Option<&Config>, new: &Config, event| {
                log.lock().unwrap().push((
                    event,
                    format!("{}/{}", new.meta.namespace, new.meta.name),
                    new.meta.resource_version.clone(),
                ));
                Ok(())
            }),
        );
    }
    let (trigger, shutdown) = shutdown_channel();
    tokio::spawn(source.run(shutdown));
    Running { source, log, _trigger: trigger }
}

/// Polls `check` every 50 ms until it holds; panics with `what` after 60 s (a generous limit for a
/// loaded 2-core CI machine, not a timing assertion).
pub async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..1200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for: {what}");
}

impl Running {
    /// The events so far.
    pub fn events(&self) -> Vec<(Event, String, String)> {
        self.log.lock().unwrap().clone()
    }

    /// Waits until the source has synced.
    pub async fn synced(&self) {
        wait_for("has_synced", || self.source.has_synced()).await;
    }

    /// `true` once an event `event` for `ns/name` arrived.
    pub fn saw(&self, event: Event, object: &str) -> bool {
        self.events().iter().any(|(e, o, _)| *e == event && o == object)
    }
}

/// A VirtualService routing `host` to `dest`.
pub fn virtual_service(namespace: &str, name: &str, host: &str, dest: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         spec:\n  hosts: [\"{host}\"]\n  http:\n  - route:\n    - destination: {{host: {dest}}}\n"
    )
}

/// A DestinationRule for `host`.
pub fn destination_rule(namespace: &str, name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
         spec:\n  host: {host}\n"
    )
}
