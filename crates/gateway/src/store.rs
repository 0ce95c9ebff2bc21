//! [`StaticStore`]: a fixed set of config objects as a read-only [`ConfigStore`] (tests, benchmarks,
//! one-shot conversions such as `meshpilot configz` of a directory).

use std::sync::Arc;

use api::Kind;
use model::{
    Config,
    store::{ConfigStore, StoreError},
};

/// A read-only store over a fixed list of objects.
#[derive(Debug, Default)]
pub struct StaticStore {
    configs: Vec<Arc<Config>>,
}

impl StaticStore {
    /// A store holding `configs`.
    pub fn new(configs: impl IntoIterator<Item = Config>) -> Self {
        let mut configs: Vec<Arc<Config>> = configs.into_iter().map(Arc::new).collect();
        configs.sort_by(|a, b| {
            (a.kind(), &a.meta.namespace, &a.meta.name).cmp(&(b.kind(), &b.meta.namespace, &b.meta.name))
        });
        StaticStore { configs }
    }

    fn read_only(&self) -> StoreError {
        StoreError::ReadOnly { source_name: "static".into() }
    }
}

impl ConfigStore for StaticStore {
    fn name(&self) -> &str {
        "static"
    }

    fn schemas(&self) -> &[Kind] {
        Kind::ALL
    }

    fn writable(&self) -> bool {
        false
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Config>> {
        self.configs
            .iter()
            .find(|c| c.kind() == kind && c.meta.namespace == namespace && c.meta.name == name)
            .cloned()
    }

    fn list(&self, kind: Kind, namespace: Option<&str>) -> Vec<Arc<Config>> {
        self.configs
            .iter()
            .filter(|c| c.kind() == kind && namespace.is_none_or(|ns| c.meta.namespace == ns))
            .cloned()
            .collect()
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
