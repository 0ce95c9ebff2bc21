//! A workload's effective proxy config: mesh `defaultConfig`, the `ProxyConfig` resources
//! (`networking.istio.io/v1beta1`) and the pod's `proxy.istio.io/config` annotation merged as istiod
//! merges them (`pilot/pkg/model/proxy_config.go`: `GetProxyConfigs`, `EffectiveProxyConfig`), for the
//! injection webhook (istiod's `Environment.GetProxyConfigOrDefault`, `pkg/kube/inject/webhook.go`).
//!
//! Order, lowest first; each level's fields replace the one below's ([`crate::mesh::merge_proxy_config`]:
//! whole top-level fields, `proxyMetadata` entries added):
//!
//! 1. Istio's `DefaultProxyConfig()`, then mesh `defaultConfig`;
//! 2. the oldest `ProxyConfig` without a selector in the mesh's root namespace (`rootNamespace`);
//! 3. the oldest `ProxyConfig` without a selector in the pod's namespace (skipped when that is the root
//!    namespace: level 2 already is it);
//! 4. the pod's `proxy.istio.io/config` annotation (ignored when it does not parse);
//! 5. the oldest `ProxyConfig` of the pod's namespace whose `selector.matchLabels` (non-empty) are all
//!    among the pod's labels.
//!
//! "Oldest": by `creationTimestamp`, then name, then namespace (Istio's `configCompareByCreationTime`);
//! only one resource counts per level, the others of that level are not merged in. A resource with
//! `selector: {}` (no labels) is neither namespace-wide nor selecting (Istio checks `selector == nil`
//! for the one and non-empty `matchLabels` for the other). A resource sets `concurrency` (an
//! `Int32Value`: `0` is a value, "all cores"), `proxyMetadata` from its `environmentVariables`, and
//! `image` (`imageType` picks the injected image's suffix, `-distroless` / `-debug`, through
//! `ProxyImage`). Every level passes through istiod's proto round trip
//! ([`crate::mesh::proto_written`]): a zero value (`interceptionMode: REDIRECT`, `statusPort: 0`) set in
//! the annotation does not override a lower level here.

use std::collections::BTreeMap;

use api::networking::proxy_config::ProxyConfig;
use serde_json::{Map, Value as Json, json};

use crate::inject::PROXY_CONFIG_ANNOTATION;
use crate::mesh::{default_proxy_config, merge_proxy_config, parse_proxy_config, proto_written};

/// One `ProxyConfig` resource as the control plane's config store holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyConfigResource {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.creationTimestamp` (RFC 3339, compared as text); `None` sorts first, as Go's zero time.
    pub creation_timestamp: Option<String>,
    /// The spec.
    pub spec: ProxyConfig,
}

/// The `ProxyConfig` resources of one push context by namespace, oldest first (istiod's
/// `ProxyConfigs`), with the mesh's root namespace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProxyConfigs {
    root_namespace: String,
    by_namespace: BTreeMap<String, Vec<ProxyConfig>>,
}

impl ProxyConfigs {
    /// Indexes `resources` (any order) for a mesh whose `rootNamespace` is `root_namespace`
    /// (istiod's `GetProxyConfigs`).
    pub fn new(
        root_namespace: impl Into<String>,
        resources: impl IntoIterator<Item = ProxyConfigResource>,
    ) -> Self {
        let mut resources: Vec<ProxyConfigResource> = resources.into_iter().collect();
        resources.sort_by(|a, b| {
            a.creation_timestamp
                .cmp(&b.creation_timestamp)
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.namespace.cmp(&b.namespace))
        });
        let mut by_namespace: BTreeMap<String, Vec<ProxyConfig>> = BTreeMap::new();
        for r in resources {
            by_namespace.entry(r.namespace).or_default().push(r.spec);
        }
        ProxyConfigs { root_namespace: root_namespace.into(), by_namespace }
    }

    /// The number of resources indexed.
    pub fn len(&self) -> usize {
        self.by_namespace.values().map(Vec::len).sum()
    }

    /// Whether no resource is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The oldest resource of `namespace` without a selector (istiod's `mergedNamespaceConfig`).
    fn namespace_wide(&self, namespace: &str) -> Option<&ProxyConfig> {
        self.by_namespace.get(namespace)?.iter().find(|pc| pc.selector.is_none())
    }

    /// The oldest resource of `namespace` whose non-empty `matchLabels` are all in `labels`
    /// (istiod's `mergedWorkloadConfig`).
    fn selecting(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Option<&ProxyConfig> {
        self.by_namespace.get(namespace)?.iter().find(|pc| {
            pc.selector.as_ref().is_some_and(|s| {
                !s.match_labels.is_empty() && s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
        })
    }

    /// The effective proxy config (proto-JSON, Istio's field names) of a pod in `namespace` with
    /// `labels` and `annotations` (the pod's, as JSON: only `proxy.istio.io/config` is read), under a
    /// mesh whose `defaultConfig` is `mesh_default_config` (proto-JSON). See the module's order.
    pub fn effective(
        &self,
        mesh_default_config: &Json,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        annotations: &Json,
    ) -> Json {
        let object = |v: &Json| v.as_object().cloned().unwrap_or_default();
        let mut levels: Vec<Map<String, Json>> =
            vec![object(&default_proxy_config()), object(mesh_default_config)];
        if !self.root_namespace.is_empty() {
            levels.extend(self.namespace_wide(&self.root_namespace).map(resource_fields));
        }
        if namespace != self.root_namespace {
            levels.extend(self.namespace_wide(namespace).map(resource_fields));
        }
        // istiod ignores an annotation that does not parse here (the webhook refuses it earlier).
        if let Some(text) = annotations[PROXY_CONFIG_ANNOTATION].as_str()
            && let Ok(fields) = parse_proxy_config(text)
        {
            levels.push(fields);
        }
        levels.extend(self.selecting(namespace, labels).map(resource_fields));
        let mut effective = Map::new();
        for level in &levels {
            merge_proxy_config(&mut effective, &proto_written(level));
        }
        Json::Object(effective)
    }
}

/// The proxy config fields a `ProxyConfig` resource sets (istiod's `toMeshConfigProxyConfig`):
/// `concurrency`, `proxyMetadata` (its `environmentVariables`), `image`.
fn resource_fields(pc: &ProxyConfig) -> Map<String, Json> {
    let mut out = Map::new();
    if let Some(concurrency) = pc.concurrency {
        out.insert("concurrency".into(), json!(concurrency));
    }
    if !pc.environment_variables.is_empty() {
        out.insert("proxyMetadata".into(), json!(pc.environment_variables));
    }
    if let Some(image) = &pc.image {
        let image =
            if image.image_type.is_empty() { json!({}) } else { json!({"imageType": image.image_type}) };
        out.insert("image".into(), image);
    }
    out
}

#[cfg(test)]
mod tests {
    //! Expected values follow istiod's rules in `pilot/pkg/model/proxy_config.go` and
    //! `pkg/config/mesh/mesh.go` at the pinned version; each case was also run through istiod's own
    //! `model.EffectiveProxyConfig` (a Go program against the pinned module, not kept in the repo), which
    //! gave the same effective config.

    use api::networking::proxy_config::ProxyImage;
    use api::type_v1beta1::WorkloadSelector;

    use super::*;

    const ROOT: &str = "istio-system";

    fn pc(
        concurrency: Option<i32>,
        env: &[(&str, &str)],
        image: Option<&str>,
        selector: Option<&[(&str, &str)]>,
    ) -> ProxyConfig {
        ProxyConfig {
            selector: selector.map(|l| WorkloadSelector {
                match_labels: l.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            }),
            concurrency,
            environment_variables: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            image: image.map(|t| ProxyImage { image_type: t.to_string() }),
        }
    }

    fn res(namespace: &str, name: &str, created: &str, spec: ProxyConfig) -> ProxyConfigResource {
        ProxyConfigResource {
            namespace: namespace.into(),
            name: name.into(),
            creation_timestamp: Some(format!("2026-01-01T00:00:{created}Z")),
            spec,
        }
    }

    fn labels(l: &[(&str, &str)]) -> BTreeMap<String, String> {
        l.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn annotation(text: &str) -> Json {
        json!({ PROXY_CONFIG_ANNOTATION: text })
    }

    fn mesh_default(yaml: &str) -> Json {
        crate::mesh::apply_mesh_config(yaml).unwrap()["defaultConfig"].clone()
    }

    fn effective(
        resources: Vec<ProxyConfigResource>,
        mesh: &str,
        namespace: &str,
        l: &[(&str, &str)],
        annotations: Json,
    ) -> Json {
        ProxyConfigs::new(ROOT, resources).effective(&mesh_default(mesh), namespace, &labels(l), &annotations)
    }

    #[test]
    fn each_level_overrides_the_one_below() {
        let mesh = "defaultConfig:\n  concurrency: 2\n";
        let conc = |resources, ns: &str, l: &[(&str, &str)], a: Json| {
            effective(resources, mesh, ns, l, a)["concurrency"].clone()
        };
        assert_eq!(conc(vec![], "app", &[], json!({})), 2, "mesh defaultConfig");
        let root = || res(ROOT, "root", "10", pc(Some(3), &[], None, None));
        assert_eq!(conc(vec![root()], "app", &[], json!({})), 3, "root namespace over mesh");
        let ns = || res("app", "ns", "10", pc(Some(4), &[], None, None));
        assert_eq!(conc(vec![root(), ns()], "app", &[], json!({})), 4, "namespace over root namespace");
        assert_eq!(
            conc(vec![root(), ns()], "app", &[], annotation("concurrency: 5\n")),
            5,
            "annotation over namespace"
        );
        let sel = || res("app", "sel", "10", pc(Some(6), &[], None, Some(&[("app", "web")])));
        assert_eq!(
            conc(
                vec![root(), ns(), sel()],
                "app",
                &[("app", "web"), ("v", "1")],
                annotation("concurrency: 5\n")
            ),
            6,
            "selector over annotation"
        );
        assert_eq!(
            conc(vec![root(), ns(), sel()], "app", &[("app", "db")], annotation("concurrency: 5\n")),
            5,
            "a selector that does not match is not applied"
        );
        assert_eq!(conc(vec![root(), ns(), sel()], "app", &[("app", "db")], json!({})), 4);
    }

    #[test]
    fn root_namespace_resources() {
        // A pod in the root namespace: the root's namespace-wide resource, and its selecting one.
        let resources = vec![
            res(ROOT, "root", "10", pc(Some(3), &[], None, None)),
            res(ROOT, "sel", "10", pc(Some(7), &[], None, Some(&[("app", "x")]))),
        ];
        assert_eq!(effective(resources.clone(), "", ROOT, &[("app", "x")], json!({}))["concurrency"], 7);
        assert_eq!(effective(resources.clone(), "", ROOT, &[], json!({}))["concurrency"], 3);
        // A selecting resource of the root namespace does not reach other namespaces (its namespace-wide
        // one does).
        assert_eq!(effective(resources, "", "app", &[("app", "x")], json!({}))["concurrency"], 3);
        // The root namespace is the mesh's rootNamespace.
        let resources = vec![
            res(ROOT, "a", "05", pc(Some(1), &[], None, None)),
            res("mesh-root", "b", "05", pc(Some(2), &[], None, None)),
        ];
        let custom = ProxyConfigs::new("mesh-root", resources);
        assert_eq!(
            custom.effective(&mesh_default(""), "app", &BTreeMap::new(), &json!({}))["concurrency"],
            2
        );
    }

    #[test]
    fn selector_and_namespace_scopes() {
        // Resources of another namespace never apply.
        let resources = vec![
            res("other", "sel", "05", pc(Some(8), &[], None, Some(&[("app", "web")]))),
            res("other", "ns", "05", pc(Some(9), &[], None, None)),
        ];
        assert!(effective(resources, "", "app", &[("app", "web")], json!({}))["concurrency"].is_null());
        // `selector: {}` is neither namespace-wide nor selecting.
        let empty = vec![res("app", "empty", "05", pc(Some(8), &[], None, Some(&[])))];
        assert!(effective(empty, "", "app", &[("app", "web")], json!({}))["concurrency"].is_null());
    }

    #[test]
    fn the_oldest_resource_of_a_level_wins_whole() {
        let resources = vec![
            res("app", "a-new", "09", pc(Some(9), &[("X", "y")], None, None)),
            res("app", "b-old", "05", pc(Some(1), &[], None, None)),
        ];
        let e = effective(resources, "", "app", &[], json!({}));
        assert_eq!(e["concurrency"], 1);
        assert!(e["proxyMetadata"].is_null(), "the newer resource is not merged in: {e}");
        // Same creation time: by name.
        let resources = vec![
            res("app", "b", "05", pc(Some(1), &[], None, None)),
            res("app", "a", "05", pc(Some(9), &[], None, None)),
        ];
        assert_eq!(effective(resources, "", "app", &[], json!({}))["concurrency"], 9);
    }

    #[test]
    fn environment_variables_merge_into_proxy_metadata() {
        let resources = vec![
            res(ROOT, "root", "10", pc(None, &[("B", "r"), ("C", "r")], None, None)),
            res("app", "ns", "10", pc(None, &[("C", "n"), ("D", "n")], None, None)),
            res("app", "sel", "10", pc(None, &[("E", "s"), ("F", "s")], None, Some(&[("app", "web")]))),
        ];
        let e = effective(
            resources,
            "defaultConfig:\n  proxyMetadata: {A: m, B: m}\n",
            "app",
            &[("app", "web")],
            annotation("proxyMetadata: {D: a, E: a}\n"),
        );
        assert_eq!(e["proxyMetadata"], json!({"A": "m", "B": "r", "C": "n", "D": "a", "E": "s", "F": "s"}));
        // An empty environmentVariables changes nothing.
        let empty = vec![res("app", "ns", "05", pc(None, &[], None, None))];
        let e = effective(empty, "defaultConfig:\n  proxyMetadata: {A: m}\n", "app", &[], json!({}));
        assert_eq!(e["proxyMetadata"], json!({"A": "m"}));
    }

    #[test]
    fn concurrency_zero_is_a_value() {
        let resources = vec![res("app", "ns", "05", pc(Some(0), &[], None, None))];
        assert_eq!(
            effective(resources, "defaultConfig:\n  concurrency: 2\n", "app", &[], json!({}))["concurrency"],
            0
        );
    }

    #[test]
    fn image_type() {
        let resources = vec![
            res("app", "ns", "10", pc(None, &[], Some("distroless"), None)),
            res("app", "sel", "10", pc(None, &[], Some("debug"), Some(&[("app", "web")]))),
        ];
        assert_eq!(
            effective(resources.clone(), "", "app", &[("app", "web")], json!({}))["image"],
            json!({"imageType": "debug"})
        );
        assert_eq!(
            effective(resources, "", "app", &[("app", "db")], json!({}))["image"],
            json!({"imageType": "distroless"})
        );
    }

    #[test]
    fn fields_replace_whole_and_zero_values_do_not_override() {
        // A message set by a higher level replaces the lower one's (no field-by-field merge).
        let e = effective(
            vec![],
            "defaultConfig:\n  tracing:\n    sampling: 10\n    zipkin: {address: a:9411}\n",
            "app",
            &[],
            annotation("tracing:\n  zipkin: {address: b:9411}\n"),
        );
        assert_eq!(e["tracing"], json!({"zipkin": {"address": "b:9411"}}));
        // Lists replace too.
        let e = effective(
            vec![],
            "defaultConfig:\n  extraStatTags: [a, b]\n",
            "app",
            &[],
            annotation("extraStatTags: [c]\n"),
        );
        assert_eq!(e["extraStatTags"], json!(["c"]));
        // An enum's zero and scalar zeros are dropped by istiod's proto round trip; wrappers keep false.
        let e = effective(
            vec![],
            "defaultConfig:\n  interceptionMode: TPROXY\n",
            "app",
            &[],
            annotation("interceptionMode: REDIRECT\n"),
        );
        assert_eq!(e["interceptionMode"], "TPROXY");
        let e = effective(
            vec![],
            "defaultConfig:\n  statusPort: 15021\n",
            "app",
            &[],
            annotation("statusPort: 0\ndiscoveryAddress: ''\n"),
        );
        assert_eq!(
            (e["statusPort"].clone(), e["discoveryAddress"].clone()),
            (json!(15021), json!("istiod.istio-system.svc:15012"))
        );
        let e = effective(
            vec![],
            "defaultConfig:\n  holdApplicationUntilProxyStarts: true\n",
            "app",
            &[],
            annotation("holdApplicationUntilProxyStarts: false\n"),
        );
        assert_eq!(e["holdApplicationUntilProxyStarts"], false);
        // proxyHeaders keeps the lower level's headers the higher one leaves unset.
        let e = effective(
            vec![],
            "defaultConfig:\n  proxyHeaders:\n    server: {disabled: true}\n    requestId: {disabled: true}\n",
            "app",
            &[],
            annotation("proxyHeaders:\n  attemptCount: {disabled: true}\n"),
        );
        assert_eq!(
            e["proxyHeaders"],
            json!({"attemptCount": {"disabled": true}, "requestId": {"disabled": true}, "server": {"disabled": true}})
        );
        // Unknown annotation fields are ignored; an annotation that does not parse is.
        let e = effective(vec![], "", "app", &[], annotation("concurrency: 3\nnotAField: 1\n"));
        assert_eq!((e["concurrency"].clone(), e["notAField"].clone()), (json!(3), Json::Null));
        let e = effective(vec![], "defaultConfig:\n  concurrency: 2\n", "app", &[], annotation("[1, 2]"));
        assert_eq!(e["concurrency"], 2);
    }

    #[test]
    fn with_nothing_set_it_is_istios_default() {
        assert_eq!(effective(vec![], "", "app", &[], json!({})), default_proxy_config());
    }
}
