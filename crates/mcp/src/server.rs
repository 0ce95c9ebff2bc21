//! The `api` generator: meshpilot as an MCP-over-xDS config server (Istio's `apigen`,
//! `pilot/pkg/networking/apigen`).
//!
//! A client asks for type URLs `group/version/Kind` (istiod's `configSources` client sends one SotW
//! request per Pilot kind plus `core/v1alpha1/MeshConfig`, with node metadata `GENERATOR: api`).
//! Each answer is every object of that kind in the aggregate config store, one
//! `discovery.Resource` named `namespace/name` per object, its `Any` an `istio.mcp.v1alpha1.Resource`
//! ([`model::mcp::to_resource`]); an unknown kind gets an empty set, as from istiod.
//!
//! ```text
//!  config event of kind K ─► DiscoveryServer push (every api connection) ─► NetworkingSource
//!      ─► ApiGenerator::generate(K's type URL): list store ─► Resources + per-type version
//!         (sent only when the type's version differs from the one last sent on the stream)
//! ```
//!
//! Versions: an object's `metadata.version` is a content hash of spec, labels and annotations
//! ([`model::mcp::resource_version`]; istiod's client replaces an object only when it changes); a
//! response's `version_info` is a hash of the type's names and object versions, so a push that
//! leaves a type as it was sends nothing for it.
//!
//! Authorization (Istio's `ENABLE_XDS_API_GENERATOR_AUTH`, default true): only a caller the secure
//! port authenticated with an identity in the mesh root namespace is served; istiod answers
//! `Unauthenticated` without an identity and `PermissionDenied` for another namespace, and so does
//! meshpilot (for a `GENERATOR: api` node when the stream opens, for another node when it asks for
//! a config type).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use api::mesh_config::MeshConfig;
use api::{Kind, mcp::kind_from_type_url};
use envoy_types::pb::google::protobuf::Any;
use model::push::node::Proxy;
use model::{
    ConfigStoreController,
    push::{MeshSettings, OutboundTrafficPolicy, PushRequest},
};
use prost::Message;
use xds::{Generated, Resource, SourceError, Trigger, type_url};

/// The MCP-over-xDS generator over a config store.
pub struct ApiGenerator {
    store: Arc<dyn ConfigStoreController>,
    auth: bool,
}

impl std::fmt::Debug for ApiGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiGenerator").field("auth", &self.auth).finish_non_exhaustive()
    }
}

/// Per-connection state of the config types: the version last generated per type URL.
#[derive(Debug, Default)]
pub struct ApiState {
    sent: HashMap<String, String>,
}

impl ApiGenerator {
    /// A generator listing `store`; `auth` is `ENABLE_XDS_API_GENERATOR_AUTH`.
    pub fn new(store: Arc<dyn ConfigStoreController>, auth: bool) -> ApiGenerator {
        ApiGenerator { store, auth }
    }

    /// Whether callers must be authenticated in the root namespace.
    pub fn requires_auth(&self) -> bool {
        self.auth
    }

    /// Istio's `APIGenerator.authorize`: with auth on, the caller must have a verified identity
    /// (secure port) in `root_namespace` (mesh config `rootNamespace`).
    ///
    /// # Errors
    /// [`SourceError::Unauthenticated`] without a verified identity; [`SourceError::Refused`]
    /// (`PermissionDenied`) naming the identities and the root namespace otherwise.
    pub fn authorize(&self, proxy: &Proxy, root_namespace: &str) -> Result<(), SourceError> {
        if !self.auth {
            return Ok(());
        }
        if proxy.verified_identities.is_empty() {
            return Err(SourceError::Unauthenticated(format!(
                "the api generator requires an authenticated control-plane identity: connect to the secure \
                 port with a certificate or token of the root namespace {root_namespace:?} \
                 (ENABLE_XDS_API_GENERATOR_AUTH=false allows unauthenticated callers)"
            )));
        }
        if proxy.verified_identities.iter().any(|i| i.namespace == root_namespace) {
            return Ok(());
        }
        let ids: Vec<&str> = proxy.verified_identities.iter().map(|i| i.identity.as_str()).collect();
        Err(SourceError::Refused(format!(
            "the api generator is restricted to the control-plane (root) namespace {root_namespace:?}; \
             caller identities {ids:?}"
        )))
    }

    /// The resources of the config type `type_url` for `trigger`, or `None` when a push leaves the
    /// type as last sent on this stream.
    ///
    /// `mesh` is the mesh config in force: `core/v1alpha1/MeshConfig` gets it as one unnamed
    /// resource, a raw `istio.mesh.v1alpha1.MeshConfig` `Any` ([`mesh_config_resource`]), as from
    /// istiod; a push (e.g. a mesh config change) resends it only when it changed.
    pub fn generate(
        &self,
        state: &mut ApiState,
        type_url: &str,
        trigger: Trigger<'_, PushRequest>,
        mesh: &MeshSettings,
    ) -> Option<Generated> {
        let kind = kind_from_type_url(type_url);
        let mesh_config = type_url == type_url::MCP_MESH_CONFIG;
        if let Trigger::Push(push) = trigger
            && !mesh_config
            && !kind.is_some_and(|k| push_concerns(push, k))
        {
            return None;
        }
        let resources = match kind {
            Some(kind) => self.resources(kind),
            None if mesh_config => vec![mesh_config_resource(mesh)],
            // A kind meshpilot does not serve: an empty set, as istiod answers (its store has none).
            None => Vec::new(),
        };
        let version = type_version(type_url, &resources);
        let unchanged = state.sent.get(type_url) == Some(&version);
        if unchanged && matches!(trigger, Trigger::Push(_)) {
            return None;
        }
        state.sent.insert(type_url.to_string(), version.clone());
        Some(Generated::full(version, resources))
    }

    /// Every object of `kind`, ordered by namespace and name, as MCP resources.
    fn resources(&self, kind: Kind) -> Vec<Resource> {
        let mut configs = self.store.list(kind, None);
        configs.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
        configs
            .iter()
            .map(|c| {
                let resource = model::mcp::to_resource(c);
                let version = resource.metadata.as_ref().map(|m| m.version.clone()).unwrap_or_default();
                let body =
                    Any { type_url: type_url::MCP_RESOURCE.to_string(), value: resource.encode_to_vec() };
                Resource { name: format!("{}/{}", c.meta.namespace, c.meta.name), version, body }
            })
            .collect()
    }
}

/// Whether `push` may change the objects of `kind`: forced pushes and changes of the kind itself;
/// ServiceEntry, WorkloadEntry and WorkloadGroup changes reach the server through the service
/// registry as service (`ServiceEntry` keys) and endpoint changes, so those concern all three.
pub fn push_concerns(push: &PushRequest, kind: Kind) -> bool {
    if push.forced || push.configs_updated.iter().any(|k| k.kind == kind) {
        return true;
    }
    let registry: BTreeSet<Kind> = model::service::REGISTRY_KINDS.into_iter().collect();
    registry.contains(&kind)
        && (!push.endpoints_updated.is_empty()
            || push.configs_updated.iter().any(|k| registry.contains(&k.kind)))
}

/// The mesh config served as `core/v1alpha1/MeshConfig`: the mesh config as read
/// ([`MeshSettings::source`]) with the effective values of the fields meshpilot interprets filled
/// in (root namespace, trust domain and aliases, auto mTLS, outbound traffic policy, connect
/// timeout), encoded as Istio's `MeshConfig` (the fields of [`api::mesh_config::MeshConfig`]; others
/// are not sent). istiod sends its whole effective mesh config, defaults included.
pub fn mesh_config_resource(mesh: &MeshSettings) -> Resource {
    let mode = match mesh.outbound_traffic_policy {
        OutboundTrafficPolicy::AllowAny => "ALLOW_ANY",
        OutboundTrafficPolicy::RegistryOnly => "REGISTRY_ONLY",
    };
    let mut effective = serde_json::json!({
        "rootNamespace": mesh.root_namespace,
        "trustDomain": mesh.trust_domain,
        "enableAutoMtls": mesh.enable_auto_mtls,
        "outboundTrafficPolicy": { "mode": mode },
        "connectTimeout": format!("{}s", mesh.connect_timeout.as_secs_f64()),
    });
    if !mesh.trust_domain_aliases.is_empty() {
        effective["trustDomainAliases"] = mesh.trust_domain_aliases.clone().into();
    }
    let mut merged = match &mesh.source {
        serde_json::Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    if let serde_json::Value::Object(fields) = &effective {
        merged.extend(fields.clone());
    }
    // The source passed parse_mesh_config; should the subset still refuse a field's shape, the
    // effective values alone are served rather than nothing.
    let message = MeshConfig::from_json(&serde_json::Value::Object(merged)).unwrap_or_else(|e| {
        tracing::warn!("MCP MeshConfig: {e}; serving only the fields meshpilot interprets");
        MeshConfig::from_json(&effective).unwrap_or_default()
    });
    Resource::new("", &message)
}

/// The response version of a config type: 16 hex digits of FNV-1a over the type URL and each
/// resource's name and version (the same set gives the same version, in any process).
fn type_version(type_url: &str, resources: &[Resource]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut write = |bytes: &[u8]| {
        for b in bytes.iter().chain(&[0xff]) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    write(type_url.as_bytes());
    for r in resources {
        write(r.name.as_bytes());
        write(r.version.as_bytes());
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use config::MemoryStore;
    use model::{
        Config, ConfigKey, ConfigMeta, ConfigStore,
        push::{TriggerReason, node::VerifiedIdentity},
    };

    use super::*;

    fn vs(name: &str, host: &str) -> Config {
        Config {
            meta: ConfigMeta {
                gvk: Kind::VirtualService.schema().gvk(),
                name: name.into(),
                namespace: "default".into(),
                labels: BTreeMap::new(),
                annotations: BTreeMap::new(),
                resource_version: String::new(),
                generation: 0,
                creation_timestamp: None,
                domain_suffix: "cluster.local".into(),
            },
            spec: api::Spec::VirtualService(Box::new(api::networking::VirtualService {
                hosts: vec![host.into()],
                ..Default::default()
            })),
            status: None,
        }
    }

    fn proxy(identities: &[(&str, &str)]) -> Proxy {
        let mut p = Proxy::parse(
            "sidecar~10.0.0.1~istiod.istio-system~istio-system.svc.cluster.local",
            Default::default(),
        )
        .unwrap();
        p.verified_identities = identities
            .iter()
            .map(|(i, n)| VerifiedIdentity { identity: (*i).into(), namespace: (*n).into() })
            .collect();
        p
    }

    fn key(kind: Kind) -> ConfigKey {
        ConfigKey { kind, namespace: "default".into(), name: "x".into() }
    }

    #[test]
    fn authorization_follows_istio() {
        let store: Arc<dyn ConfigStoreController> =
            Arc::new(MemoryStore::new("test", Kind::ALL, config::QueueOptions::default()));
        let on = ApiGenerator::new(store.clone(), true);
        let e = on.authorize(&proxy(&[]), "istio-system").unwrap_err();
        assert!(matches!(e, SourceError::Unauthenticated(_)), "{e}");
        let e =
            on.authorize(&proxy(&[("spiffe://cluster.local/ns/default/sa/x", "default")]), "istio-system");
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains("\"istio-system\"") && msg.contains("ns/default/sa/x"), "{msg}");
        on.authorize(
            &proxy(&[("spiffe://cluster.local/ns/istio-system/sa/istiod", "istio-system")]),
            "istio-system",
        )
        .unwrap();
        // The root namespace comes from mesh config.
        assert!(
            on.authorize(&proxy(&[("spiffe://td/ns/istio-system/sa/i", "istio-system")]), "mesh-root")
                .is_err()
        );
        ApiGenerator::new(store, false).authorize(&proxy(&[]), "istio-system").unwrap();
    }

    #[test]
    fn pushes_only_changed_types() {
        let store = Arc::new(MemoryStore::new("test", Kind::ALL, config::QueueOptions::default()));
        store.create(vs("a", "a.example.com")).unwrap();
        let generator = ApiGenerator::new(store.clone(), false);
        let mut state = ApiState::default();
        let vs_url = api::mcp::type_url(Kind::VirtualService);
        let first =
            generator.generate(&mut state, &vs_url, Trigger::Request, &MeshSettings::default()).unwrap();
        assert_eq!(first.resources.len(), 1);
        assert_eq!(first.resources[0].name, "default/a");
        assert_eq!(first.resources[0].body.type_url, type_url::MCP_RESOURCE);

        // A push of another kind, or of this kind with nothing changed: nothing to send.
        let dr_push = PushRequest::config([key(Kind::DestinationRule)], TriggerReason::Config);
        assert_eq!(
            generator.generate(&mut state, &vs_url, Trigger::Push(&dr_push), &MeshSettings::default()),
            None
        );
        let vs_push = PushRequest::config([key(Kind::VirtualService)], TriggerReason::Config);
        assert_eq!(
            generator.generate(&mut state, &vs_url, Trigger::Push(&vs_push), &MeshSettings::default()),
            None
        );

        store.create(vs("b", "b.example.com")).unwrap();
        let second = generator
            .generate(&mut state, &vs_url, Trigger::Push(&vs_push), &MeshSettings::default())
            .unwrap();
        assert_eq!(second.resources.len(), 2);
        assert_ne!(second.version, first.version);
        assert_eq!(second.resources[0].version, first.resources[0].version, "unchanged object, same version");

        // A request always answers, even unchanged (the client waits for it).
        assert_eq!(
            generator
                .generate(&mut state, &vs_url, Trigger::Request, &MeshSettings::default())
                .unwrap()
                .version,
            second.version
        );
        // An unknown kind: an empty set.
        let unknown = generator.generate(
            &mut state,
            "example.com/v1/Unknown",
            Trigger::Request,
            &MeshSettings::default(),
        );
        assert_eq!(unknown.unwrap().resources, vec![]);
    }

    #[test]
    fn mesh_config_is_one_raw_mesh_config_resent_only_when_it_changes() {
        let generator = ApiGenerator::new(
            Arc::new(MemoryStore::new("test", Kind::ALL, config::QueueOptions::default())),
            false,
        );
        let mut state = ApiState::default();
        let (local, _) = config::mesh::parse_mesh_config(
            "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\ningressClass: custom\n",
            "cluster.local",
        )
        .unwrap();
        let url = type_url::MCP_MESH_CONFIG;
        let first = generator.generate(&mut state, url, Trigger::Request, &local).unwrap();
        assert_eq!(first.resources.len(), 1);
        let resource = &first.resources[0];
        assert_eq!((resource.name.as_str(), resource.body.type_url.as_str()), ("", type_url::MESH_CONFIG));
        let json = MeshConfig::decode_any_value(&resource.body.value).unwrap().to_json();
        assert_eq!(json["outboundTrafficPolicy"]["mode"], "REGISTRY_ONLY", "{json}");
        assert_eq!(json["rootNamespace"], "istio-system", "defaults are filled in: {json}");
        assert_eq!(json["trustDomain"], "cluster.local", "{json}");

        // A mesh change (a forced push) resends it; the same mesh again does not.
        let global = PushRequest::forced(TriggerReason::Global);
        assert_eq!(generator.generate(&mut state, url, Trigger::Push(&global), &local), None);
        let allow_any = MeshSettings { outbound_traffic_policy: OutboundTrafficPolicy::AllowAny, ..local };
        let second = generator.generate(&mut state, url, Trigger::Push(&global), &allow_any).unwrap();
        let json = MeshConfig::decode_any_value(&second.resources[0].body.value).unwrap().to_json();
        assert_eq!(json["outboundTrafficPolicy"]["mode"], "ALLOW_ANY", "{json}");
    }

    #[test]
    fn registry_kinds_follow_service_and_endpoint_pushes() {
        let endpoints = PushRequest::endpoints("a.example.com", "default");
        assert!(push_concerns(&endpoints, Kind::WorkloadEntry));
        assert!(!push_concerns(&endpoints, Kind::VirtualService));
        let se = PushRequest::config([key(Kind::ServiceEntry)], TriggerReason::Service);
        assert!(push_concerns(&se, Kind::WorkloadGroup));
        assert!(push_concerns(&PushRequest::forced(TriggerReason::Debug), Kind::Sidecar));
    }
}
