//! The injection webhook's `ProxyConfig` resources: those of the DiscoveryServer's current push
//! context (istiod's webhook reads `push.ProxyConfigs` through `Environment.GetProxyConfigOrDefault`,
//! `pilot/pkg/model/context.go`), so config directories, the cluster and MCP sources all count, as
//! istiod's config store, and a change applies to the next pod injected once it is pushed.

use std::sync::{Arc, Mutex};

use api::spec::Spec;
use discovery::DiscoveryServer;
use inject::injector::ProxyConfigSource;
use inject::proxy_config::{ProxyConfigResource, ProxyConfigs};

/// A [`ProxyConfigSource`] over `server`'s published push contexts; the resources are re-indexed
/// only when a push context with another config generation or root namespace (mesh config) is read.
pub fn source(server: Arc<DiscoveryServer>) -> ProxyConfigSource {
    type Cached = (u64, String, Arc<ProxyConfigs>);
    let cache: Mutex<Option<Cached>> = Mutex::new(None);
    Arc::new(move || {
        let ctx = server.push_context()?;
        let root = &ctx.mesh().root_namespace;
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((generation, cached_root, configs)) = cache.as_ref()
            && *generation == ctx.config_generation()
            && cached_root == root
        {
            return Some(configs.clone());
        }
        let resources = ctx.proxy_configs().iter().filter_map(|c| match &c.spec {
            Spec::ProxyConfig(spec) => Some(ProxyConfigResource {
                namespace: c.meta.namespace.clone(),
                name: c.meta.name.clone(),
                creation_timestamp: c.meta.creation_timestamp.clone(),
                spec: (**spec).clone(),
            }),
            _ => None,
        });
        let configs = Arc::new(ProxyConfigs::new(root.clone(), resources));
        *cache = Some((ctx.config_generation(), root.clone(), configs.clone()));
        Some(configs)
    })
}
