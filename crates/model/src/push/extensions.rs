//! WasmPlugin and TrafficExtension: which filters a proxy gets, where, and in which order (Istio's
//! `pilot/pkg/model/extensions.go`, `PushContext.TrafficExtensionsByListenerInfo` in
//! `push_context.go`, and the WasmPlugin translation of `pilot/pkg/config/kube/extensions`).
//!
//! As in istiod, a WasmPlugin is read as a TrafficExtension with a Wasm filter named
//! `NAME~istio-translated-wasmplugin` (`~` is no Kubernetes name character, so it never collides with
//! a real TrafficExtension); both are indexed per namespace, oldest first (then by that name). A
//! proxy gets those of its own namespace, then of the root namespace, whose `selector` /
//! `targetRef(s)` select it (the AuthorizationPolicy rules, [`super::policy::PolicyMatcher`]), per
//! listener those whose `match` takes the listener's direction and port; within a phase the higher
//! `priority` goes first (unset: lowest), ties keep that order.
//!
//! An object istiod discards (Wasm without `url`, an unparseable URL, Lua without code or over
//! 64 KiB, neither filter) is left out with a [`Finding`] naming the field; the others are unaffected.

use std::{collections::HashMap, sync::Arc};

use api::{
    Kind, Spec,
    extensions::{
        TrafficExtension, WasmPlugin,
        traffic_extension::{self, TrafficSelector, WasmConfig, traffic_extension::ExecutionPhase},
        wasm_plugin::PluginType,
    },
    type_v1beta1::WorkloadMode,
};

use crate::{Config, ConfigKey, Finding, Severity};

/// Prefix of the ECDS resource name of an extension (Istio's `TrafficExtensionResourceNamePrefix`).
pub const RESOURCE_NAME_PREFIX: &str = "extensions.istio.io/trafficextension/";
/// Suffix of the name a WasmPlugin takes as a TrafficExtension (Istio's `syntheticMarker`).
pub const WASM_PLUGIN_SUFFIX: &str = "~istio-translated-wasmplugin";
/// Largest Lua script istiod accepts (64 KiB).
pub const MAX_LUA_BYTES: usize = 65536;

/// Where in the HTTP filter chain an extension goes, in chain order (Istio's `ExecutionPhase`; a
/// WasmPlugin's `PluginPhase` has the same numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Before the authentication filter (`jwt_authn`), after CUSTOM authorization (`ext_authz`).
    Authn,
    /// After authentication, before the RBAC filters.
    Authz,
    /// After authorization.
    Stats,
    /// Unset: after the STATS phase, before Istio's own trailing filters.
    Unspecified,
}

impl Phase {
    /// The phase of the API number (`ExecutionPhase` / `PluginPhase`); unknown numbers are
    /// `Unspecified`.
    pub fn from_api(value: i32) -> Phase {
        match ExecutionPhase::try_from(value) {
            Ok(ExecutionPhase::Authn) => Phase::Authn,
            Ok(ExecutionPhase::Authz) => Phase::Authz,
            Ok(ExecutionPhase::Stats) => Phase::Stats,
            _ => Phase::Unspecified,
        }
    }
}

/// The filter chain an extension can go into (Istio's `FilterChainType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainType {
    /// HTTP filters of a connection manager.
    Http,
    /// Network filters.
    Network,
}

/// Which listeners a filter chain belongs to (Istio's `ListenerClass`), for `match.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerClass {
    /// A sidecar's inbound chains (mode `SERVER`).
    SidecarInbound,
    /// A sidecar's outbound listeners (mode `CLIENT`).
    SidecarOutbound,
    /// A gateway's listeners (mode `CLIENT`).
    Gateway,
}

/// What an extension runs.
#[derive(Clone, Debug, PartialEq)]
pub enum ExtensionCode {
    /// A Wasm module, delivered over ECDS.
    Wasm(WasmConfig),
    /// A Lua script, inlined in the listener.
    Lua(String),
}

/// One WasmPlugin or TrafficExtension as the generators use it (Istio's `TrafficExtensionWrapper`).
#[derive(Clone, Debug)]
pub struct ExtensionFilter {
    /// The object it comes from (a WasmPlugin or a TrafficExtension).
    pub config: Arc<Config>,
    /// Istio's name of it: the object's name, plus [`WASM_PLUGIN_SUFFIX`] for a WasmPlugin.
    pub name: String,
    /// The object's namespace.
    pub namespace: String,
    /// Its ECDS resource name and HTTP filter name: [`RESOURCE_NAME_PREFIX`]`NAMESPACE.NAME`.
    pub resource_name: String,
    /// Its phase.
    pub phase: Phase,
    /// Its priority (higher first; `None` sorts last).
    pub priority: Option<i32>,
    /// Its traffic selectors (empty: all traffic).
    pub matches: Vec<TrafficSelector>,
    /// The filter.
    pub code: ExtensionCode,
}

impl ExtensionFilter {
    /// The chain type it goes into: Lua and HTTP (or unset) Wasm are HTTP filters, `NETWORK` Wasm a
    /// network filter (Istio's `MatchType`).
    pub fn chain_type(&self) -> ChainType {
        match &self.code {
            ExtensionCode::Wasm(w) if w.r#type == PluginType::Network as i32 => ChainType::Network,
            _ => ChainType::Http,
        }
    }

    /// Whether its `match` takes a listener of `class` on `port` (Istio's
    /// `matchTrafficExtensionSelectors`): no selector takes everything; otherwise any selector whose
    /// mode (unset or `CLIENT_AND_SERVER`: both) fits the class and whose ports (none: all) hold `port`.
    pub fn matches_listener(&self, class: ListenerClass, port: u32) -> bool {
        self.matches.is_empty()
            || self.matches.iter().any(|m| mode_matches(m.mode, class) && ports_match(m, port))
    }

    /// The placement-relevant part: what the listeners hold of it. Equal placements mean a change
    /// concerns ECDS only.
    fn placement(&self) -> Placement {
        Placement {
            name: self.resource_name.clone(),
            phase: self.phase,
            priority: self.priority,
            matches: self.matches.clone(),
            chain: self.chain_type(),
            lua: match &self.code {
                ExtensionCode::Lua(code) => Some(code.clone()),
                ExtensionCode::Wasm(_) => None,
            },
            targeting: targeting_of(&self.config.spec),
        }
    }
}

fn mode_matches(mode: i32, class: ListenerClass) -> bool {
    let want = match class {
        ListenerClass::SidecarInbound => WorkloadMode::Server,
        ListenerClass::SidecarOutbound | ListenerClass::Gateway => WorkloadMode::Client,
    };
    match WorkloadMode::try_from(mode) {
        Ok(WorkloadMode::Undefined | WorkloadMode::ClientAndServer) | Err(_) => true,
        Ok(m) => m == want,
    }
}

fn ports_match(selector: &TrafficSelector, port: u32) -> bool {
    selector.ports.is_empty() || selector.ports.iter().any(|p| p.number != 0 && p.number == port)
}

#[derive(Debug, PartialEq)]
struct Placement {
    name: String,
    phase: Phase,
    priority: Option<i32>,
    matches: Vec<TrafficSelector>,
    chain: ChainType,
    lua: Option<String>,
    targeting: String,
}

/// The selector and target references as text, for comparing placements.
fn targeting_of(spec: &Spec) -> String {
    match spec {
        Spec::WasmPlugin(p) => format!("{:?} {:?} {:?}", p.selector, p.target_ref, p.target_refs),
        Spec::TrafficExtension(t) => format!("{:?} {:?}", t.selector, t.target_refs),
        _ => String::new(),
    }
}

/// Whether replacing `old` by `new` (a WasmPlugin or TrafficExtension) changes listeners, not only
/// the ECDS resource: `false` when both are applied with the same name, phase, priority, match,
/// selector, target references, chain type and (Lua) code. A WasmPlugin whose module, `pluginConfig`,
/// `failStrategy`, VM settings or pull policy changed is thus an ECDS-only change (istiod pushes
/// listeners too, unchanged).
pub fn placement_changed(old: &Arc<Config>, new: &Arc<Config>) -> bool {
    let (a, _) = ExtensionFilter::from_config(old);
    let (b, _) = ExtensionFilter::from_config(new);
    match (a, b) {
        (Some(a), Some(b)) => a.placement() != b.placement(),
        (None, None) => false,
        _ => true,
    }
}

impl ExtensionFilter {
    /// Reads a WasmPlugin (as istiod's translation into a TrafficExtension) or a TrafficExtension;
    /// `None` (with the findings saying why) when istiod would discard it or it is another kind.
    /// Findings also report what meshpilot does not send (image pull secrets) and `NETWORK` filters,
    /// which are not placed yet.
    pub fn from_config(config: &Arc<Config>) -> (Option<ExtensionFilter>, Vec<Finding>) {
        let (extension, name, prefix) = match &config.spec {
            Spec::WasmPlugin(p) => {
                (from_wasm_plugin(p), format!("{}{WASM_PLUGIN_SUFFIX}", config.meta.name), "spec")
            }
            Spec::TrafficExtension(t) => ((**t).clone(), config.meta.name.clone(), "spec.wasm"),
            _ => return (None, Vec::new()),
        };
        let mut findings = Vec::new();
        let mut finding = |severity, path: String, message: String| {
            findings.push(Finding {
                severity,
                config: Some(config.key()),
                path,
                resource: String::new(),
                message,
            })
        };
        let code = match (&extension.wasm, &extension.lua) {
            (Some(wasm), _) => {
                if let Err(reason) = check_url(&wasm.url) {
                    finding(
                        Severity::Dropped,
                        format!("{prefix}.url"),
                        format!("{reason}; the extension is not applied"),
                    );
                    return (None, findings);
                }
                if !wasm.image_pull_secret.is_empty() {
                    finding(
                        Severity::Unsupported,
                        format!("{prefix}.imagePullSecret"),
                        "image pull secrets are not sent over ECDS by meshpilot; the module is pulled without credentials"
                            .into(),
                    );
                }
                if wasm.r#type == PluginType::Network as i32 {
                    finding(
                        Severity::Unsupported,
                        format!("{prefix}.type"),
                        "NETWORK (layer 4) extensions are not placed in network filter chains yet; the extension is not applied"
                            .into(),
                    );
                }
                ExtensionCode::Wasm(wasm.clone())
            }
            (None, Some(lua)) => {
                let reason = if lua.inline_code.is_empty() {
                    Some("lua.inlineCode cannot be empty".to_string())
                } else if lua.inline_code.len() > MAX_LUA_BYTES {
                    Some(format!("lua.inlineCode is {} bytes, over the 64 KiB limit", lua.inline_code.len()))
                } else {
                    None
                };
                if let Some(reason) = reason {
                    finding(
                        Severity::Dropped,
                        "spec.lua.inlineCode".into(),
                        format!("{reason}; the extension is not applied"),
                    );
                    return (None, findings);
                }
                ExtensionCode::Lua(lua.inline_code.clone())
            }
            (None, None) => {
                finding(
                    Severity::Dropped,
                    "spec".into(),
                    "neither wasm nor lua is set; the extension is not applied".into(),
                );
                return (None, findings);
            }
        };
        let namespace = config.meta.namespace.clone();
        let filter = ExtensionFilter {
            config: config.clone(),
            resource_name: format!("{RESOURCE_NAME_PREFIX}{namespace}.{name}"),
            name,
            namespace,
            phase: Phase::from_api(extension.phase),
            priority: extension.priority,
            matches: extension.r#match,
            code,
        };
        (Some(filter), findings)
    }
}

/// Istio's `translateWasmPlugin`: the TrafficExtension a WasmPlugin stands for (`targetRef` used only
/// when `targetRefs` is empty; phases share their numbers).
fn from_wasm_plugin(p: &WasmPlugin) -> TrafficExtension {
    let target_refs =
        if p.target_refs.is_empty() { p.target_ref.iter().cloned().collect() } else { p.target_refs.clone() };
    TrafficExtension {
        selector: p.selector.clone(),
        target_refs,
        phase: p.phase,
        priority: p.priority,
        r#match: p.r#match.iter().map(|m| TrafficSelector { mode: m.mode, ports: m.ports.clone() }).collect(),
        wasm: Some(traffic_extension::WasmConfig {
            url: p.url.clone(),
            sha256: p.sha256.clone(),
            image_pull_policy: p.image_pull_policy,
            image_pull_secret: p.image_pull_secret.clone(),
            verification_key: p.verification_key.clone(),
            plugin_config: p.plugin_config.clone(),
            plugin_name: p.plugin_name.clone(),
            fail_strategy: p.fail_strategy,
            vm_config: p.vm_config.clone(),
            r#type: p.r#type,
        }),
        lua: None,
    }
}

/// The scheme of a module URL (lower case; `oci` when none is given, as istiod), or why the URL cannot
/// be used: empty, control characters or spaces (Go's `url.Parse` refuses them), a scheme other than
/// `oci`, `http`, `https`, `file`, or no host for `http(s)`/`oci`.
pub fn check_url(url: &str) -> Result<String, String> {
    if url.is_empty() {
        return Err("wasm.url is required".into());
    }
    if url.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!("URL {url:?} has a control character or a space"));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        // No scheme: an OCI reference (`registry/image:tag`), as in istiod.
        return Ok("oci".into());
    };
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "file" => {
            if rest.is_empty() {
                return Err(format!("URL {url:?} names no file"));
            }
        }
        "http" | "https" | "oci" => {
            if rest.split(['/', '?', '#']).next().unwrap_or("").is_empty() {
                return Err(format!("URL {url:?} has no host"));
            }
        }
        other => return Err(format!("URL scheme {other:?} is not one of oci, http, https, file")),
    }
    Ok(scheme)
}

/// The extensions of every namespace, in Istio's order (creation time, then Istio's name), with the
/// findings of those left out or partly applied.
pub(crate) fn index(configs: impl IntoIterator<Item = Arc<Config>>) -> (ExtensionIndex, Vec<Finding>) {
    let mut filters: Vec<(Option<String>, ExtensionFilter)> = Vec::new();
    let mut findings = Vec::new();
    for config in configs {
        let (filter, f) = ExtensionFilter::from_config(&config);
        findings.extend(f);
        if let Some(filter) = filter {
            filters.push((config.meta.creation_timestamp.clone(), filter));
        }
    }
    filters.sort_by(|(ta, a), (tb, b)| {
        ta.cmp(tb).then_with(|| a.name.cmp(&b.name)).then_with(|| a.namespace.cmp(&b.namespace))
    });
    let mut by_namespace: HashMap<String, Vec<Arc<ExtensionFilter>>> = HashMap::new();
    for (_, f) in filters {
        by_namespace.entry(f.namespace.clone()).or_default().push(Arc::new(f));
    }
    (ExtensionIndex { by_namespace }, findings)
}

/// Extensions by namespace, each list in Istio's order.
#[derive(Debug, Default)]
pub(crate) struct ExtensionIndex {
    by_namespace: HashMap<String, Vec<Arc<ExtensionFilter>>>,
}

impl ExtensionIndex {
    pub(crate) fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }

    /// The extensions that apply to a proxy (`matcher`): its namespace's, then the root namespace's,
    /// sorted by priority (stable).
    pub(crate) fn select(&self, matcher: &super::policy::PolicyMatcher<'_>) -> Vec<Arc<ExtensionFilter>> {
        let mut namespaces = vec![matcher.namespace];
        if matcher.root_namespace != matcher.namespace {
            namespaces.push(matcher.root_namespace);
        }
        let mut out: Vec<Arc<ExtensionFilter>> = namespaces
            .into_iter()
            .flat_map(|ns| self.by_namespace.get(ns).into_iter().flatten())
            .filter(|f| matcher.should_attach(&f.config))
            .cloned()
            .collect();
        sort_by_priority(&mut out);
        out
    }

    /// Istio's `TrafficExtensionsByName`: the extension with ECDS resource name `resource_name` when it
    /// lives in `namespace` or `root_namespace` (no selection check, as istiod).
    pub(crate) fn by_resource_name(
        &self,
        resource_name: &str,
        namespace: &str,
        root_namespace: &str,
    ) -> Option<Arc<ExtensionFilter>> {
        let (ns, _) = resource_name.strip_prefix(RESOURCE_NAME_PREFIX)?.split_once('.')?;
        if ns != namespace && ns != root_namespace {
            return None;
        }
        self.by_namespace.get(ns)?.iter().find(|f| f.resource_name == resource_name).cloned()
    }
}

/// Istio's `sortByPriority`: higher priority first, unset as the lowest, stable.
pub fn sort_by_priority(filters: &mut [Arc<ExtensionFilter>]) {
    filters.sort_by_key(|f| std::cmp::Reverse(f.priority.unwrap_or(i32::MIN)));
}

/// Whether `kind` is a kind this module reads.
pub fn is_extension_kind(kind: Kind) -> bool {
    matches!(kind, Kind::WasmPlugin | Kind::TrafficExtension)
}

/// The config key of the object an ECDS resource name comes from, for findings: `None` for names
/// without [`RESOURCE_NAME_PREFIX`].
pub fn key_of_resource_name(resource_name: &str) -> Option<ConfigKey> {
    let (namespace, name) = resource_name.strip_prefix(RESOURCE_NAME_PREFIX)?.split_once('.')?;
    Some(match name.strip_suffix(WASM_PLUGIN_SUFFIX) {
        Some(plugin) => {
            ConfigKey { kind: Kind::WasmPlugin, namespace: namespace.into(), name: plugin.into() }
        }
        None => ConfigKey { kind: Kind::TrafficExtension, namespace: namespace.into(), name: name.into() },
    })
}

#[cfg(test)]
mod tests {
    use api::extensions::traffic_extension::LuaConfig;

    use super::*;
    use crate::config::ConfigMeta;

    fn config(name: &str, spec: Spec) -> Arc<Config> {
        Arc::new(Config {
            meta: ConfigMeta { name: name.into(), namespace: "ns".into(), ..ConfigMeta::default() },
            spec,
            status: None,
        })
    }

    fn plugin(name: &str, url: &str) -> Arc<Config> {
        config(name, Spec::WasmPlugin(Box::new(WasmPlugin { url: url.into(), ..Default::default() })))
    }

    #[test]
    fn urls_default_to_oci_and_unusable_ones_say_why() {
        assert_eq!(check_url("registry.example/filters/auth:1.0").unwrap(), "oci");
        assert_eq!(check_url("HTTPS://modules.example/a.wasm").unwrap(), "https");
        assert_eq!(check_url("file:///opt/a.wasm").unwrap(), "file");
        assert_eq!(check_url("").unwrap_err(), "wasm.url is required");
        assert!(check_url("ftp://x/a.wasm").unwrap_err().contains("\"ftp\" is not one of"));
        assert!(check_url("http:///a.wasm").unwrap_err().contains("no host"));
        assert!(check_url("http://x/a b.wasm").unwrap_err().contains("space"));
    }

    #[test]
    fn a_wasm_plugin_reads_as_istiods_translated_traffic_extension() {
        let (f, findings) = ExtensionFilter::from_config(&plugin("auth", "oci://r.example/auth:1"));
        let f = f.unwrap();
        assert!(findings.is_empty());
        assert_eq!(f.name, "auth~istio-translated-wasmplugin");
        assert_eq!(
            f.resource_name,
            "extensions.istio.io/trafficextension/ns.auth~istio-translated-wasmplugin"
        );
        assert_eq!(key_of_resource_name(&f.resource_name), Some(plugin("auth", "").key()));
        assert_eq!((f.phase, f.chain_type()), (Phase::Unspecified, ChainType::Http));
    }

    #[test]
    fn bad_objects_are_dropped_with_their_field_path() {
        let (f, findings) = ExtensionFilter::from_config(&plugin("bad", "ftp://x/y"));
        assert!(f.is_none());
        assert_eq!((findings[0].severity, findings[0].path.as_str()), (Severity::Dropped, "spec.url"));
        let lua = |code: &str| {
            config(
                "l",
                Spec::TrafficExtension(Box::new(TrafficExtension {
                    lua: Some(LuaConfig { inline_code: code.into() }),
                    ..Default::default()
                })),
            )
        };
        let (f, findings) = ExtensionFilter::from_config(&lua(&"x".repeat(MAX_LUA_BYTES + 1)));
        assert!(f.is_none());
        assert_eq!(findings[0].path, "spec.lua.inlineCode");
        assert!(findings[0].message.contains("64 KiB"), "{}", findings[0].message);
        let (f, findings) =
            ExtensionFilter::from_config(&config("none", Spec::TrafficExtension(Box::default())));
        assert!(f.is_none());
        assert!(findings[0].message.contains("neither wasm nor lua"));
        // The index keeps the good ones.
        let (index, findings) =
            index([plugin("bad", "ftp://x/y"), plugin("good", "file:///good.wasm"), lua("")]);
        assert_eq!(findings.len(), 2);
        assert_eq!(index.by_namespace["ns"].len(), 1);
    }

    #[test]
    fn priority_sorts_high_first_and_unset_last_keeping_ties() {
        let with = |name: &str, priority: Option<i32>| {
            let mut p = WasmPlugin { url: "oci://r/x".into(), priority, ..Default::default() };
            p.phase = 0;
            Arc::new(ExtensionFilter::from_config(&config(name, Spec::WasmPlugin(Box::new(p)))).0.unwrap())
        };
        let mut list = vec![with("a", None), with("b", Some(-5)), with("c", Some(10)), with("d", Some(-5))];
        sort_by_priority(&mut list);
        let names: Vec<&str> = list.iter().map(|f| f.config.meta.name.as_str()).collect();
        assert_eq!(names, ["c", "b", "d", "a"]);
    }

    #[test]
    fn only_listener_relevant_changes_are_placement_changes() {
        let a = plugin("p", "oci://r/x:1");
        assert!(!placement_changed(&a, &plugin("p", "oci://r/x:2")));
        let mut moved = WasmPlugin { url: "oci://r/x:1".into(), ..Default::default() };
        moved.phase = api::extensions::wasm_plugin::PluginPhase::Authz as i32;
        assert!(placement_changed(&a, &config("p", Spec::WasmPlugin(Box::new(moved)))));
        // Becoming invalid removes the filter from listeners.
        assert!(placement_changed(&a, &plugin("p", "ftp://x")));
    }

    #[test]
    fn match_takes_mode_and_ports() {
        let mut f = ExtensionFilter::from_config(&plugin("p", "oci://r/x")).0.unwrap();
        assert!(f.matches_listener(ListenerClass::SidecarInbound, 1));
        f.matches = vec![TrafficSelector {
            mode: WorkloadMode::Server as i32,
            ports: vec![api::type_v1beta1::PortSelector { number: 8080 }],
        }];
        assert!(f.matches_listener(ListenerClass::SidecarInbound, 8080));
        assert!(!f.matches_listener(ListenerClass::SidecarInbound, 8081));
        assert!(!f.matches_listener(ListenerClass::SidecarOutbound, 8080));
        f.matches.push(TrafficSelector { mode: WorkloadMode::Client as i32, ports: Vec::new() });
        assert!(f.matches_listener(ListenerClass::Gateway, 443));
    }
}
