//! Config converters: code that turns other kinds of config into Istio config while a
//! [`PushContext`](super::PushContext) is built (Istio runs its Gateway API and Ingress conversion the
//! same way: the output depends on services, so it is computed with the snapshot).
//!
//! A [`ConfigConverter`] reads the config store and the snapshot's services and returns Istio objects
//! (Gateways, VirtualServices, DestinationRules, …) plus the status it computed for its inputs.
//! [`PushContext::with_converters`](super::PushContext::with_converters) runs every converter, then
//! indexes the generated objects exactly as if they came from the store, so the generators cannot
//! tell them apart. The snapshot keeps what was generated ([`PushContext::generated`](super::PushContext::generated))
//! for `/debug/configz` and status writers.

use std::{collections::BTreeMap, fmt, sync::Arc};

use api::Kind;

use super::MeshSettings;
use crate::{
    config::{Config, ConfigKey},
    service::Service,
    store::{ConfigStore, StoreError},
};

/// The output of one converter run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Converted {
    /// Generated Istio objects (kinds of [`Kind::ISTIO`]), in the order the converter wants them
    /// indexed (Istio: by creation time).
    pub configs: Vec<Config>,
    /// The status of each input object, as the converter computed it (JSON of the kind's status).
    pub statuses: Vec<ObjectStatus>,
}

/// The status a converter computed for one of its input objects.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectStatus {
    /// The input object.
    pub key: ConfigKey,
    /// Its `metadata.generation` when converted.
    pub generation: i64,
    /// The `status` value (conditions, …).
    pub status: serde_json::Value,
}

/// Something that turns config of other kinds into Istio config when a snapshot is built.
pub trait ConfigConverter: Send + Sync + fmt::Debug {
    /// A short name for logs (`gateway-api`).
    fn name(&self) -> &str;

    /// The kinds it reads from the store: a change to one of them needs a full push.
    fn input_kinds(&self) -> &[Kind];

    /// Converts: `store` holds the config, `services` the snapshot's services, `mesh` its settings.
    /// Must not panic on bad input: a bad object is reported in its status and skipped.
    fn convert(&self, store: &dyn ConfigStore, services: &[Arc<Service>], mesh: &MeshSettings) -> Converted;
}

/// A read-only view of a store plus generated objects: what the snapshot's indexes are built from.
pub(crate) struct Overlay<'a> {
    pub(crate) base: &'a dyn ConfigStore,
    pub(crate) generated: BTreeMap<Kind, Vec<Arc<Config>>>,
}

impl Overlay<'_> {
    fn read_only(&self) -> StoreError {
        StoreError::ReadOnly { source_name: format!("{} (with generated config)", self.base.name()) }
    }
}

impl ConfigStore for Overlay<'_> {
    fn name(&self) -> &str {
        self.base.name()
    }

    fn schemas(&self) -> &[Kind] {
        self.base.schemas()
    }

    fn writable(&self) -> bool {
        false
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Config>> {
        self.base.get(kind, namespace, name).or_else(|| {
            self.generated
                .get(&kind)?
                .iter()
                .find(|c| c.meta.namespace == namespace && c.meta.name == name)
                .cloned()
        })
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<Arc<Config>> {
        let mut out = self.base.list(kind, namespace);
        if let Some(extra) = self.generated.get(&kind) {
            out.extend(extra.iter().filter(|c| namespace.is_none_or(|ns| c.meta.namespace == ns)).cloned());
        }
        out
    }

    fn create(&self, _: Config) -> Result<String, StoreError> {
        Err(self.read_only())
    }

    fn update(&self, _: Config) -> Result<String, StoreError> {
        Err(self.read_only())
    }

    fn update_status(&self, _: Config) -> Result<String, StoreError> {
        Err(self.read_only())
    }

    fn delete(&self, _: Kind, _: &str, _: &str, _: Option<&str>) -> Result<(), StoreError> {
        Err(self.read_only())
    }
}
