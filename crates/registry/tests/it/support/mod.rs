//! Builders and a store-driven harness shared by the registry tests (and the benchmark).

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use api::{
    Kind, Spec,
    networking::{
        ServiceEntry, WorkloadEntry, WorkloadGroup,
        service_entry::{Location, Resolution, ServicePort},
        sidecar::WorkloadSelector,
        workload_group::ObjectMeta,
    },
};
use config::{MemoryStore, QueueOptions};
use meshpilot_registry::{ServiceEntryOptions, ServiceEntryRegistry, serviceentry::KINDS};
use model::{
    Config, ConfigMeta, ConfigStore, ConfigStoreController, EndpointPush, RegistryEvent, ServiceController,
    ShutdownTrigger, shutdown_channel,
};

/// The shared Istio corpus.
pub fn corpus_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/istio-testdata"))
}

/// `[("app", "x")]` → a label map.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A ServiceEntry port.
pub fn port(number: u32, name: &str, protocol: &str) -> ServicePort {
    ServicePort { number, name: name.into(), protocol: protocol.into(), target_port: 0 }
}

/// An inline ServiceEntry endpoint at `address`.
pub fn endpoint(address: &str) -> WorkloadEntry {
    WorkloadEntry { address: address.into(), ..Default::default() }
}

fn meta(kind: Kind, namespace: &str, name: &str) -> ConfigMeta {
    ConfigMeta {
        gvk: kind.schema().gvk(),
        name: name.into(),
        namespace: namespace.into(),
        domain_suffix: "cluster.local".into(),
        ..ConfigMeta::default()
    }
}

/// A ServiceEntry `namespace/name` with `hosts`, one HTTP port 80, `STATIC`, `MESH_INTERNAL`;
/// `edit` changes the rest.
pub fn mk_service_entry(
    namespace: &str,
    name: &str,
    hosts: &[&str],
    edit: impl FnOnce(&mut ServiceEntry),
) -> Config {
    let mut se = ServiceEntry {
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        ports: vec![port(80, "http", "HTTP")],
        location: Location::MeshInternal as i32,
        resolution: Resolution::Static as i32,
        ..Default::default()
    };
    edit(&mut se);
    Config {
        meta: meta(Kind::ServiceEntry, namespace, name),
        spec: Spec::ServiceEntry(Box::new(se)),
        status: None,
    }
}

/// A ServiceEntry selecting workloads with `selector`.
pub fn mk_selecting_entry(namespace: &str, name: &str, host: &str, selector: &[(&str, &str)]) -> Config {
    mk_service_entry(namespace, name, &[host], |se| {
        se.workload_selector = Some(WorkloadSelector { labels: labels(selector) });
    })
}

/// A WorkloadEntry `namespace/name` at `address` with spec `labels`; `edit` changes the rest.
pub fn mk_workload_entry(
    namespace: &str,
    name: &str,
    address: &str,
    spec_labels: &[(&str, &str)],
    edit: impl FnOnce(&mut WorkloadEntry),
) -> Config {
    let mut we = WorkloadEntry { address: address.into(), labels: labels(spec_labels), ..Default::default() };
    edit(&mut we);
    Config {
        meta: meta(Kind::WorkloadEntry, namespace, name),
        spec: Spec::WorkloadEntry(Box::new(we)),
        status: None,
    }
}

/// A WorkloadGroup `namespace/name` whose generated entries carry `metadata_labels`; `edit` changes
/// the template.
pub fn mk_workload_group(
    namespace: &str,
    name: &str,
    metadata_labels: &[(&str, &str)],
    edit: impl FnOnce(&mut WorkloadEntry),
) -> Config {
    let mut template = WorkloadEntry::default();
    edit(&mut template);
    let wg = WorkloadGroup {
        metadata: Some(ObjectMeta { labels: labels(metadata_labels), annotations: BTreeMap::new() }),
        template: Some(template),
        probe: None,
    };
    Config {
        meta: meta(Kind::WorkloadGroup, namespace, name),
        spec: Spec::WorkloadGroup(Box::new(wg)),
        status: None,
    }
}

/// `config` with its creation time set (RFC 3339).
pub fn created_at(mut config: Config, time: &str) -> Config {
    config.meta.creation_timestamp = Some(time.into());
    config
}

/// A notification in short text: `service add <host>/<ns>`, `endpoints incremental <host>/<ns> <n>`.
pub fn describe(event: &RegistryEvent) -> String {
    match event {
        RegistryEvent::Service(s) => format!("service {} {}/{}", s.event, s.hostname, s.namespace),
        RegistryEvent::Endpoints(e) => {
            let push = match e.push {
                EndpointPush::Incremental => "incremental",
                EndpointPush::Full => "full",
            };
            format!("endpoints {push} {}/{} {}", e.hostname, e.namespace, e.endpoints.len())
        }
    }
}

/// A memory store, a ServiceEntry registry fed by it, and a recorder of the registry's notifications,
/// with the store's event queue running.
pub struct Harness {
    /// The store (write configs here).
    pub store: MemoryStore,
    /// The registry under test.
    pub registry: ServiceEntryRegistry,
    events: Arc<Mutex<Vec<RegistryEvent>>>,
    _trigger: ShutdownTrigger,
}

impl Harness {
    /// Starts a harness whose store already holds `initial` (delivered as Adds once running).
    pub async fn start(initial: Vec<Config>) -> Harness {
        Harness::start_with(initial, ServiceEntryOptions::default()).await
    }

    /// As [`Harness::start`], with registry options.
    pub async fn start_with(initial: Vec<Config>, options: ServiceEntryOptions) -> Harness {
        let store = MemoryStore::new("memory", &KINDS, QueueOptions::default());
        for config in initial {
            store.create(config).expect("initial config is new");
        }
        let registry = ServiceEntryRegistry::new(Arc::new(store.clone()), options);
        let events: Arc<Mutex<Vec<RegistryEvent>>> = Arc::default();
        let sink = events.clone();
        registry
            .append_event_handler(Arc::new(move |e: &RegistryEvent| sink.lock().unwrap().push(e.clone())));
        let (trigger, shutdown) = shutdown_channel();
        tokio::spawn(store.run(shutdown));
        let harness = Harness { store, registry, events, _trigger: trigger };
        harness.settle().await;
        assert!(harness.registry.has_synced());
        harness
    }

    /// Waits until every change made to the store so far has reached the registry.
    pub async fn settle(&self) {
        let mark = self.store.queue().mark();
        for _ in 0..10_000 {
            if self.store.queue().passed(mark) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("store events not delivered in time");
    }

    /// The notifications since the last call, described ([`describe`]).
    pub fn take(&self) -> Vec<String> {
        self.take_events().iter().map(describe).collect()
    }

    /// The notifications since the last call.
    pub fn take_events(&self) -> Vec<RegistryEvent> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }

    /// Creates or replaces `config` in the store and waits for the registry.
    pub async fn put(&self, config: Config) {
        let exists = self.store.get(config.kind(), &config.meta.namespace, &config.meta.name).is_some();
        if exists {
            self.store.update(config).expect("update");
        } else {
            self.store.create(config).expect("create");
        }
        self.settle().await;
    }

    /// Deletes `kind` `namespace/name` from the store and waits for the registry.
    pub async fn delete(&self, kind: Kind, namespace: &str, name: &str) {
        self.store.delete(kind, namespace, name, None).expect("delete");
        self.settle().await;
    }
}
