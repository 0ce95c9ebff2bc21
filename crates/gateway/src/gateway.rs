//! GatewayClass and Gateway: the Istio Gateway of each listener, the parents routes attach to, and
//! their statuses (Istio's `GatewayCollection`, `buildListener`, `reportGatewayStatus`).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use api::{
    Kind, Spec,
    gateway_api::{
        GROUP, GatewaySpec, ISTIO_CONTROLLER, Listener,
        gateway::{GatewaySpecAddress, RouteGroupKind},
        status::{GatewayClassStatus, GatewayStatus, ListenerStatus},
    },
    networking::{
        Gateway,
        gateway::{Port, Server, ServerTlsSettings, server_tls_settings::TlSmode},
    },
};
use model::{
    Config,
    push::{GATEWAY_SERVICE_ANNOTATION, ObjectStatus},
};

use crate::{
    Ctx, GATEWAY_SEMANTICS_ANNOTATION, KUBERNETES_GATEWAY_NAME, Output, PARENTS_ANNOTATION,
    SERVICE_ACCOUNT_ANNOTATION, istio_config, parent_meta,
    status::{ConfigError, Wanted, conditions},
    unsigned,
};

/// A listener routes can attach to (Istio's `parentInfo`), keyed by its Gateway.
#[derive(Clone, Debug)]
pub(crate) struct ParentInfo {
    /// `namespace/name` of the generated Istio Gateway (or `mesh`).
    pub(crate) internal_name: String,
    /// Route kinds allowed.
    pub(crate) allowed_kinds: Vec<RouteGroupKind>,
    /// The server's hosts, `namespace/hostname`.
    pub(crate) hostnames: Vec<String>,
    /// The listener's hostname (`""` when none).
    pub(crate) original_hostname: String,
    /// The listener name.
    pub(crate) section_name: String,
    /// The listener port.
    pub(crate) port: i32,
    /// The listener protocol.
    pub(crate) protocol: String,
}

/// A Gateway being converted: its status waits for the routes' attachment counts.
pub(crate) struct GatewayState {
    pub(crate) config: Arc<Config>,
    pub(crate) status: GatewayStatus,
    /// Routes attached per listener name.
    pub(crate) attached: BTreeMap<String, BTreeSet<String>>,
}

/// Gateways by (namespace, name), with their listeners as parents.
#[derive(Default)]
pub(crate) struct Gateways {
    pub(crate) parents: BTreeMap<(String, String), Vec<ParentInfo>>,
    pub(crate) states: Vec<GatewayState>,
}

const ISTIO_CLASS: &str = "istio";

/// The controller of a GatewayClass: the object's, or Istio's for the built-in `istio` class when no
/// object defines it (Istio creates that class itself).
fn class_controller(ctx: &Ctx<'_>, name: &str) -> Option<String> {
    match ctx.input.store.get(Kind::GatewayClass, "", name) {
        Some(c) => match &c.spec {
            Spec::GatewayClass(s) => Some(s.controller_name.clone()),
            _ => None,
        },
        None if name == ISTIO_CLASS => Some(ISTIO_CONTROLLER.to_string()),
        None => None,
    }
}

/// Route kinds a listener supports (Istio's `GenerateGatewaySupportedKinds`); `false` when
/// `allowedRoutes.kinds` names a kind that is not supported.
pub(crate) fn supported_kinds(l: &Listener) -> (Vec<RouteGroupKind>, bool) {
    let kind = |k: &str| RouteGroupKind { group: Some(GROUP.to_string()), kind: k.to_string() };
    let supported = match l.protocol.as_str() {
        "HTTP" | "HTTPS" => vec![kind("HTTPRoute"), kind("GRPCRoute")],
        "TCP" => vec![kind("TCPRoute")],
        "TLS" => {
            let mut v = vec![kind("TLSRoute")];
            if l.tls.as_ref().and_then(|t| t.mode.as_deref()) == Some("Terminate") {
                v.push(kind("TCPRoute"));
            }
            v
        }
        _ => vec![],
    };
    match l.allowed_routes.as_ref().filter(|a| !a.kinds.is_empty()) {
        Some(a) => {
            let allowed: Vec<RouteGroupKind> = supported
                .into_iter()
                .filter(|s| {
                    a.kinds.iter().any(|k| k.kind == s.kind && k.group.as_deref().unwrap_or(GROUP) == GROUP)
                })
                .collect();
            let valid = allowed.len() == a.kinds.len();
            (allowed, valid)
        }
        None => (supported, true),
    }
}

/// Hosts of a listener's server: `namespace/hostname` per allowed namespace (Istio's `buildHostnameMatch`).
fn hostname_match(ctx: &Ctx<'_>, namespace: &str, l: &Listener) -> Vec<String> {
    let hostname = l.hostname.clone().unwrap_or_else(|| "*".to_string());
    let namespaces = l.allowed_routes.as_ref().and_then(|a| a.namespaces.as_ref());
    let selected: Vec<String> = match namespaces.and_then(|n| n.from.as_deref()) {
        None | Some("Same") => vec![namespace.to_string()],
        Some("All") => vec!["*".to_string()],
        Some(_) => match namespaces.and_then(|n| n.selector.as_ref()) {
            None => vec!["*".to_string()],
            Some(selector) => ctx
                .namespaces()
                .into_iter()
                .filter(|ns| selector.matches(&ctx.namespace_labels(ns)))
                .collect(),
        },
    };
    let hosts: Vec<String> =
        selected.iter().filter(|ns| !ns.is_empty()).map(|ns| format!("{ns}/{hostname}")).collect();
    if hosts.is_empty() { vec![format!("~/{hostname}")] } else { hosts }
}

fn is_managed(spec: &GatewaySpec) -> bool {
    match spec.addresses.as_slice() {
        [] => true,
        [one] => one.r#type.as_deref().is_none_or(|t| t == "IPAddress"),
        _ => false,
    }
}

/// The gateway Services (Istio's `extractGatewayServices`).
fn gateway_services(ctx: &Ctx<'_>, gw: &Config, spec: &GatewaySpec) -> (Vec<String>, Option<ConfigError>) {
    let ns = &gw.meta.namespace;
    if is_managed(spec) {
        let name = gw
            .meta
            .annotations
            .get("gateway.istio.io/name-override")
            .cloned()
            .unwrap_or_else(|| format!("{}-{}", gw.meta.name, spec.gateway_class_name));
        return (vec![ctx.service_hostname(&name, ns)], None);
    }
    let mut services = Vec::new();
    let mut skipped = Vec::new();
    for a in &spec.addresses {
        if a.r#type.as_deref().is_some_and(|t| t != "Hostname") {
            skipped.push(a.value.clone());
            continue;
        }
        services.push(if a.value.contains('.') {
            a.value.clone()
        } else {
            ctx.service_hostname(&a.value, ns)
        });
    }
    if !skipped.is_empty() {
        let message = format!("only Hostname is supported, ignoring [{}]", skipped.join(" "));
        return (services, Some(ConfigError::new("UnsupportedAddress", message)));
    }
    (services, None)
}

/// The server TLS settings of a listener (Istio's `buildTLS`, certificates from Secrets).
fn build_tls(ctx: &Ctx<'_>, gw: &Config, l: &Listener) -> (Option<ServerTlsSettings>, Option<ConfigError>) {
    let Some(tls) = &l.tls else { return (None, None) };
    let namespace = &gw.meta.namespace;
    let mut out = ServerTlsSettings::default();
    match tls.mode_or_default() {
        "Passthrough" => out.mode = TlSmode::Passthrough as i32,
        _ => {
            out.mode = TlSmode::Simple as i32;
            match tls.options.get("gateway.istio.io/tls-terminate-mode").map(String::as_str) {
                Some("MUTUAL") => out.mode = TlSmode::Mutual as i32,
                Some("OPTIONAL_MUTUAL") => out.mode = TlSmode::OptionalMutual as i32,
                Some("ISTIO_SIMPLE") => {
                    out.credential_name = "builtin://".to_string();
                    return (Some(out), None);
                }
                Some("ISTIO_MUTUAL") => {
                    out.mode = TlSmode::IstioMutual as i32;
                    return (Some(out), None);
                }
                _ => {}
            }
            if tls.certificate_refs.len() > 2 {
                let e = ConfigError::new(
                    "InvalidCertificateRef",
                    "TLS mode can only support up to 2 server certificates",
                );
                return (Some(out), Some(e));
            }
            let mut names = Vec::new();
            let mut error: Option<ConfigError> = None;
            let mut join = |e: ConfigError| {
                error = Some(match error.take() {
                    None => e,
                    Some(prev) => ConfigError {
                        reason: prev.reason,
                        message: format!("{}; {}", prev.message, e.message),
                    },
                });
            };
            for r in &tls.certificate_refs {
                let cred_ns = r.namespace.clone().unwrap_or_else(|| namespace.clone());
                if &cred_ns != namespace
                    && !ctx.grant_allows(Kind::KubernetesGateway, namespace, "", "Secret", &r.name, &cred_ns)
                {
                    join(ConfigError::new(
                        "RefNotPermitted",
                        format!(
                            "certificateRef {}/{cred_ns} not accessible to a Gateway in namespace {namespace:?} (missing a ReferenceGrant?)",
                            r.name
                        ),
                    ));
                    continue;
                }
                let ref_string = secret_ref_string(r);
                if !r.group.as_deref().unwrap_or("").is_empty() || r.kind_or_default() != "Secret" {
                    join(ConfigError::new(
                        "InvalidCertificateRef",
                        format!("invalid certificate reference {ref_string}, only secret is allowed"),
                    ));
                    continue;
                }
                if let Some(known) = &ctx.input.kube.secrets
                    && !known.contains(&(cred_ns.clone(), r.name.clone()))
                {
                    join(ConfigError::new(
                        "InvalidCertificateRef",
                        format!(
                            "invalid certificate reference {ref_string}, secret {cred_ns}/{} not found",
                            r.name
                        ),
                    ));
                    continue;
                }
                names.push(format!("kubernetes-gateway://{cred_ns}/{}", r.name));
            }
            match names.len() {
                0 => return (Some(out), error),
                1 => out.credential_name = names.remove(0),
                _ => out.credential_names = names,
            }
            let spec_tls = match &gw.spec {
                Spec::KubernetesGateway(g) => g.tls.as_ref(),
                _ => None,
            };
            if let Some(v) = frontend_validation(spec_tls, l.port)
                && !v.ca_certificate_refs.is_empty()
                && let Err(e) = client_validation(ctx, namespace, v, &tls.options, &mut out)
            {
                return (Some(out), Some(e));
            }
        }
    }
    if let Some(opts) = tls.options.get(TLS_CIPHER_SUITES_OPTION) {
        out.cipher_suites = cipher_suites(opts);
    }
    (Some(out), None)
}

/// The frontend (client certificate) validation of a listener port (Istio's `resolveGatewayTLS`):
/// `spec.tls.frontend.perPort` for the port, else `spec.tls.frontend.default`.
fn frontend_validation(
    tls: Option<&api::gateway_api::gateway::GatewayTLSConfig>,
    port: i32,
) -> Option<&api::gateway_api::gateway::FrontendTLSValidation> {
    let frontend = tls?.frontend.as_ref()?;
    let config = match frontend.per_port.iter().find(|p| p.port == port) {
        Some(p) => p.tls.as_ref(),
        None => frontend.default.as_ref(),
    };
    config?.validation.as_ref()
}

/// Client certificate validation of a terminating listener from the Gateway's frontend TLS (Istio's
/// `buildTLS` with `buildCaCertificateReference`): one CA reference, a ConfigMap
/// (`configmap://NS/NAME-cacert`) or a Secret (`kubernetes-gateway://NS/NAME-cacert`), another
/// namespace only with a ReferenceGrant; mode `MUTUAL` (`OPTIONAL_MUTUAL` with
/// `insecureSkipVerify: true` for `AllowInsecureFallback`), the listener's
/// `gateway.istio.io/tls-terminate-mode` option overriding. ConfigMaps are checked for a CA key when
/// known; the bundle's PEM is not parsed (Istio also refuses a malformed bundle).
fn client_validation(
    ctx: &Ctx<'_>,
    namespace: &str,
    v: &api::gateway_api::gateway::FrontendTLSValidation,
    options: &BTreeMap<String, String>,
    out: &mut ServerTlsSettings,
) -> Result<(), ConfigError> {
    if v.ca_certificate_refs.len() > 1 {
        return Err(ConfigError::new("InvalidCACertificateRef", "only one caCertificateRef is supported"));
    }
    let r = &v.ca_certificate_refs[0];
    let ns = r.namespace.clone().unwrap_or_else(|| namespace.to_string());
    let ref_string =
        format!("{}/{}/{}.{}", r.group, r.kind, r.name, r.namespace.as_deref().unwrap_or_default());
    let invalid = |m: String| {
        ConfigError::new(
            "InvalidCACertificateRef",
            format!("invalid CA certificate reference {ref_string}, {m}"),
        )
    };
    let key = (ns.clone(), r.name.clone());
    let resource_type = match (r.group.as_str(), r.kind.as_str()) {
        ("", "ConfigMap") => {
            if let Some(maps) = &ctx.input.kube.config_maps {
                let keys =
                    maps.get(&key).ok_or_else(|| invalid(format!("configmap {ns}/{} not found", r.name)))?;
                if let Some(e) = crate::policies::ca_bundle_error(keys) {
                    return Err(invalid(e));
                }
            }
            "configmap"
        }
        ("", "Secret") => {
            if ctx.input.kube.secrets.as_ref().is_some_and(|s| !s.contains(&key)) {
                return Err(invalid(format!("secret {ns}/{} not found", r.name)));
            }
            "kubernetes-gateway"
        }
        _ => {
            return Err(ConfigError::new(
                "InvalidCACertificateKind",
                format!(
                    "invalid CA certificate reference {ref_string}, only secret and configmap are allowed"
                ),
            ));
        }
    };
    if ns != namespace && !ctx.grant_allows(Kind::KubernetesGateway, namespace, "", &r.kind, &r.name, &ns) {
        return Err(ConfigError::new(
            "RefNotPermitted",
            format!(
                "caCertificateRef {ns}/{} not accessible to a Gateway in namespace {namespace:?} (missing a ReferenceGrant?)",
                r.name
            ),
        ));
    }
    let insecure = v.mode.as_deref() == Some("AllowInsecureFallback");
    let (mut mode, mut skip) =
        if insecure { (TlSmode::OptionalMutual, true) } else { (TlSmode::Mutual, false) };
    match options.get("gateway.istio.io/tls-terminate-mode").map(String::as_str) {
        Some("MUTUAL") => (mode, skip) = (TlSmode::Mutual, false),
        Some("OPTIONAL_MUTUAL") => (mode, skip) = (TlSmode::OptionalMutual, false),
        _ => {}
    }
    out.mode = mode as i32;
    out.insecure_skip_verify = Some(skip);
    out.ca_cert_credential_name = format!("{resource_type}://{ns}/{}-cacert", r.name);
    Ok(())
}

/// The listener TLS option naming the server's cipher suites (comma-separated).
const TLS_CIPHER_SUITES_OPTION: &str = "gateway.istio.io/tls-cipher-suites";

/// The cipher suites of a `gateway.istio.io/tls-cipher-suites` option (Istio's `FilterCipherSuites`):
/// comma-separated, trimmed, unknown suites and repeats left out, in the given order.
pub(crate) fn cipher_suites(option: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if option.is_empty() {
        return out;
    }
    for suite in option.split(',').map(str::trim) {
        if validation::networking::gateway::is_valid_cipher_suite(suite) && !out.iter().any(|s| s == suite) {
            out.push(suite.to_string());
        }
    }
    out
}

fn listener_status(
    l: &Listener,
    generation: i64,
    mut wanted: BTreeMap<&'static str, Wanted>,
) -> ListenerStatus {
    let (supported, valid) = supported_kinds(l);
    if !valid {
        wanted.insert("ResolvedRefs", Wanted::with_status("InvalidRouteKinds", "Invalid route kinds", false));
    }
    ListenerStatus {
        name: l.name.clone(),
        supported_kinds: supported,
        attached_routes: 0,
        conditions: conditions(generation, &wanted),
    }
}

/// Converts the GatewayClasses (status only) and the Gateways of Istio's classes.
pub(crate) fn convert_gateways(ctx: &Ctx<'_>, out: &mut Output) -> Gateways {
    for class in ctx.list(Kind::GatewayClass) {
        let Spec::GatewayClass(spec) = &class.spec else { continue };
        if spec.controller_name != ISTIO_CONTROLLER {
            continue;
        }
        let wanted = BTreeMap::from([("Accepted", Wanted::ok("Accepted", "Handled by Istio controller"))]);
        let status = GatewayClassStatus {
            conditions: conditions(class.meta.generation, &wanted),
            ..Default::default()
        };
        out.statuses.push(ObjectStatus {
            key: class.key(),
            generation: class.meta.generation,
            status: serde_json::to_value(status).unwrap_or_default(),
        });
    }
    let mut result = Gateways::default();
    for gw in ctx.list(Kind::KubernetesGateway) {
        let Spec::KubernetesGateway(spec) = &gw.spec else { continue };
        if class_controller(ctx, &spec.gateway_class_name).as_deref() != Some(ISTIO_CONTROLLER) {
            continue;
        }
        let generation = gw.meta.generation;
        let mut status = GatewayStatus::default();
        let (services, mut error) = gateway_services(ctx, &gw, spec);
        if !(services.is_empty() && error.is_some()) && error.is_none() {
            error = parameters_ref_error(ctx, &gw.meta.namespace, spec);
        }
        let service_account = if is_managed(spec) {
            gw.meta
                .annotations
                .get("gateway.istio.io/service-account")
                .cloned()
                .unwrap_or_else(|| format!("{}-{}", gw.meta.name, spec.gateway_class_name))
        } else {
            String::new()
        };
        let mut servers = Vec::new();
        let mut valid = 0;
        let mut parents = Vec::new();
        if !(services.is_empty() && error.is_some()) {
            for l in &spec.listeners {
                let mut wanted = BTreeMap::from([
                    ("Accepted", Wanted::ok("Accepted", "No errors found")),
                    ("Programmed", Wanted::ok("Programmed", "No errors found")),
                    ("Conflicted", Wanted::with_status("NoConflicts", "No errors found", false)),
                    ("ResolvedRefs", Wanted::ok("ResolvedRefs", "No errors found")),
                ]);
                let mut ok = true;
                let (tls, tls_error) = build_tls(ctx, &gw, l);
                if let Some(e) = tls_error {
                    wanted.get_mut("ResolvedRefs").expect("set above").error = Some(e);
                    wanted.get_mut("Programmed").expect("set above").error =
                        Some(ConfigError::new("Invalid", "Bad TLS configuration"));
                    ok = false;
                }
                let hosts = hostname_match(ctx, &gw.meta.namespace, l);
                let protocol = match l.protocol.as_str() {
                    p @ ("HTTP" | "HTTPS" | "TLS" | "TCP") => Some(p.to_string()),
                    p => {
                        let upper = p.to_ascii_uppercase();
                        let message = if matches!(upper.as_str(), "HTTP" | "HTTPS" | "TLS" | "TCP" | "HBONE")
                        {
                            format!(
                                "protocol {p:?} is unsupported. hint: {upper:?} (uppercase) may be supported"
                            )
                        } else if p == "HBONE" {
                            format!("protocol {p:?} is only supported for waypoint proxies")
                        } else {
                            format!("protocol {p:?} is unsupported")
                        };
                        wanted.get_mut("Accepted").expect("set above").error =
                            Some(ConfigError::new("UnsupportedProtocol", message));
                        ok = false;
                        None
                    }
                };
                status.listeners.push(listener_status(l, generation, wanted));
                if ok {
                    valid += 1;
                }
                let Some(protocol) = protocol else { continue };
                if tls.is_none() && matches!(l.protocol.as_str(), "HTTPS" | "TLS") {
                    continue;
                }
                let server = unsigned(l.port).map(|number| Server {
                    port: Some(Port { number, protocol, name: "default".to_string(), target_port: 0 }),
                    hosts: hosts.clone(),
                    tls,
                    ..Default::default()
                });
                servers.push(l.port);
                let name = format!("{}~{KUBERNETES_GATEWAY_NAME}~{}", gw.meta.name, l.name);
                let annotations = BTreeMap::from([
                    (PARENTS_ANNOTATION.to_string(), parent_meta(&gw, Some(&l.name))),
                    (GATEWAY_SEMANTICS_ANNOTATION.to_string(), "gateway".to_string()),
                    (GATEWAY_SERVICE_ANNOTATION.to_string(), services.join(",")),
                    (SERVICE_ACCOUNT_ANNOTATION.to_string(), service_account.clone()),
                ]);
                // A negative port cannot be an Istio port: the listener then has no Gateway.
                if let Ok(server) = server {
                    let spec = Gateway { servers: vec![server], ..Default::default() };
                    out.gateways.push(istio_config(
                        &gw.meta.namespace,
                        &name,
                        annotations,
                        gw.meta.creation_timestamp.clone(),
                        ctx.domain_suffix,
                        Spec::Gateway(Box::new(spec)),
                    ));
                }
                parents.push(ParentInfo {
                    internal_name: format!("{}/{name}", gw.meta.namespace),
                    allowed_kinds: supported_kinds(l).0,
                    hostnames: hosts,
                    original_hostname: l.hostname.clone().unwrap_or_default(),
                    section_name: l.name.clone(),
                    port: l.port,
                    protocol: l.protocol.clone(),
                });
            }
        }
        let backend_tls = backend_client_certificate_error(ctx, &gw.meta.namespace, spec);
        report_gateway(ctx, &gw, spec, &mut status, &services, &servers, error, backend_tls, valid);
        result.parents.insert((gw.meta.namespace.clone(), gw.meta.name.clone()), parents);
        result.states.push(GatewayState { config: gw.clone(), status, attached: BTreeMap::new() });
    }
    result
}

/// A secret reference as Istio prints it in messages (`secretObjectReferenceString`):
/// `GROUP/KIND/NAME.NAMESPACE`, each part as written (empty when left out).
fn secret_ref_string(r: &api::gateway_api::SecretObjectReference) -> String {
    format!(
        "{}/{}/{}.{}",
        r.group.as_deref().unwrap_or_default(),
        r.kind.as_deref().unwrap_or_default(),
        r.name,
        r.namespace.as_deref().unwrap_or_default()
    )
}

/// Why a Gateway's `spec.tls.backend.clientCertificateRef` is refused (Istio's
/// `validateBackendClientCertificateRef`), reported on the Gateway's `ResolvedRefs`: only a core
/// Secret (`InvalidClientCertificateRef`), which must exist where Secrets are known
/// ([`crate::KubeObjects::secrets`]), and in another namespace only with a ReferenceGrant
/// (`RefNotPermitted`). Istio also parses the key pair ("the certificate is malformed"); the converter
/// sees Secret names only, so a malformed Secret is accepted here.
pub(crate) fn backend_client_certificate_error(
    ctx: &Ctx<'_>,
    namespace: &str,
    spec: &GatewaySpec,
) -> Option<ConfigError> {
    let r = spec.tls.as_ref()?.backend.as_ref()?.client_certificate_ref.as_ref()?;
    let invalid = |m: String| {
        ConfigError::new(
            "InvalidClientCertificateRef",
            format!("invalid clientCertificateRef {}, {m}", secret_ref_string(r)),
        )
    };
    if !r.group.as_deref().unwrap_or("").is_empty() || r.kind_or_default() != "Secret" {
        return Some(invalid("only secret is allowed".into()));
    }
    let cred_ns = r.namespace.clone().unwrap_or_else(|| namespace.to_string());
    if ctx.input.kube.secrets.as_ref().is_some_and(|s| !s.contains(&(cred_ns.clone(), r.name.clone()))) {
        return Some(invalid(format!("secret {cred_ns}/{} not found", r.name)));
    }
    if cred_ns != namespace
        && !ctx.grant_allows(Kind::KubernetesGateway, namespace, "", "Secret", &r.name, &cred_ns)
    {
        return Some(ConfigError::new(
            "RefNotPermitted",
            format!(
                "clientCertificateRef {}/{cred_ns} not accessible to a Gateway in namespace {namespace:?} (missing a ReferenceGrant?)",
                r.name
            ),
        ));
    }
    None
}

/// Why a Gateway's `spec.infrastructure.parametersRef` is refused (Istio's `validateParametersRef`):
/// only a ConfigMap (core group) is supported, and it must exist in the Gateway's namespace (when
/// ConfigMaps are known, [`crate::KubeObjects::config_maps`]). Reported as `Accepted: False`, reason
/// `InvalidParameters`.
pub(crate) fn parameters_ref_error(
    ctx: &Ctx<'_>,
    namespace: &str,
    spec: &GatewaySpec,
) -> Option<ConfigError> {
    let params = spec.infrastructure.as_ref()?.parameters_ref.as_ref()?;
    if params.kind != "ConfigMap" || !params.group.is_empty() {
        return Some(ConfigError::new(
            "InvalidParameters",
            format!(
                "Unsupported parametersRef group/kind {}/{}, only ConfigMap is supported",
                params.group, params.kind
            ),
        ));
    }
    let known = ctx.input.kube.config_maps.as_ref()?;
    if known.contains_key(&(namespace.to_string(), params.name.clone())) {
        return None;
    }
    Some(ConfigError::new(
        "InvalidParameters",
        format!("parametersRef ConfigMap {namespace}/{} does not exist", params.name),
    ))
}

/// `a`, `a and b`, `a, b, and c` (Istio's `HumanReadableJoin`).
fn human_join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [a] => a.clone(),
        [a, b] => format!("{a} and {b}"),
        [rest @ .., last] => format!("{}, and {last}", rest.join(", ")),
    }
}

/// The Gateway's conditions and addresses (Istio's `reportGatewayStatus` with
/// `ResolveGatewayInstances`: a service port is usable when the service declares it).
#[allow(clippy::too_many_arguments)]
fn report_gateway(
    ctx: &Ctx<'_>,
    gw: &Config,
    spec: &GatewaySpec,
    status: &mut GatewayStatus,
    services: &[String],
    ports: &[i32],
    error: Option<ConfigError>,
    backend_tls: Option<ConfigError>,
    valid: usize,
) {
    let namespace = &gw.meta.namespace;
    let ports: BTreeSet<i32> = ports.iter().copied().collect();
    let mut internal = BTreeSet::new();
    let mut internal_ip = BTreeSet::new();
    let mut external = BTreeSet::new();
    let mut warnings = Vec::new();
    let mut unusable = false;
    for g in services {
        let Some(svc) = ctx.service(g, namespace) else {
            let others: Vec<String> = ctx
                .services_named(g)
                .iter()
                .map(|s| format!("\"{}\"", s.namespace))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            if others.is_empty() {
                warnings.push(format!("hostname {g:?} not found"));
            } else {
                warnings.push(format!(
                    "hostname {g:?} not found in namespace {namespace:?}, but it was found in namespace(s) {}",
                    others.join(", ")
                ));
            }
            unusable = true;
            continue;
        };
        for port in &ports {
            if svc.ports.iter().any(|p| i64::from(p.port) == i64::from(*port)) {
                internal.insert(format!("{g}:{port}"));
                internal_ip.extend(svc.addresses.iter().cloned());
                if let Some(ext) =
                    ctx.input.kube.external_addresses.get(&(svc.namespace.clone(), svc.hostname.clone()))
                {
                    external.extend(ext.iter().cloned());
                }
            } else {
                warnings.push(format!("port {port} not found for hostname {g:?}"));
                unusable = true;
            }
        }
    }
    warnings.sort();
    let mut wanted = BTreeMap::from([
        ("Accepted", Wanted::ok("Accepted", "Resource accepted")),
        ("Programmed", Wanted::ok("Programmed", "Resource programmed")),
        ("ResolvedRefs", Wanted::ok("ResolvedRefs", "All references resolved")),
    ]);
    if let Some(e) = backend_tls {
        wanted.get_mut("ResolvedRefs").expect("set above").error = Some(e);
    }
    if let Some(e) = error {
        wanted.get_mut("Accepted").expect("set above").error = Some(e);
    } else if !spec.listeners.is_empty() && valid < spec.listeners.len() {
        let accepted = wanted.get_mut("Accepted").expect("set above");
        if valid == 0 {
            accepted.error =
                Some(ConfigError::new("ListenersNotValid", "None of the Gateway's listeners are valid"));
        } else {
            accepted.reason = "ListenersNotValid".into();
            accepted.message = "One or more of the Gateway's listeners are invalid".into();
        }
    }
    let internal: Vec<String> = internal.into_iter().collect();
    let programmed = wanted.get_mut("Programmed").expect("set above");
    if !internal.is_empty() {
        programmed.message = format!("Resource programmed, assigned to service(s) {}", human_join(&internal));
    }
    if services.is_empty() {
        programmed.error =
            Some(ConfigError::new("UnsupportedAddress", "Failed to assign to any requested addresses"));
    } else if !warnings.is_empty() {
        let message = if internal.is_empty() {
            format!("Failed to assign to any requested addresses: {}", warnings.join("; "))
        } else {
            format!(
                "Assigned to service(s) {}, but failed to assign to all requested addresses: {}",
                human_join(&internal),
                warnings.join("; ")
            )
        };
        let reason = if unusable { "AddressNotUsable" } else { "AddressNotAssigned" };
        programmed.error = Some(ConfigError::new(reason, message));
    }
    let mut addresses: Vec<String> = external.into_iter().collect();
    if addresses.is_empty() {
        addresses = internal_ip.into_iter().collect();
        for hostport in &internal {
            let host = hostport.rsplit_once(':').map_or(hostport.as_str(), |(h, _)| h).to_string();
            if !addresses.contains(&host) {
                addresses.push(host);
            }
        }
    }
    status.addresses = addresses
        .into_iter()
        .map(|a| GatewaySpecAddress {
            r#type: Some(
                if a.parse::<std::net::IpAddr>().is_ok() { "IPAddress" } else { "Hostname" }.to_string(),
            ),
            value: a,
        })
        .collect();
    status.conditions = conditions(gw.meta.generation, &wanted);
}

/// Fills in attached-route counts and emits the Gateways' statuses (after the routes).
pub(crate) fn finish_statuses(_ctx: &Ctx<'_>, gateways: Gateways, out: &mut Output) {
    let mut statuses = Vec::new();
    for mut state in gateways.states {
        for l in &mut state.status.listeners {
            l.attached_routes = state.attached.get(&l.name).map_or(0, |r| r.len() as i32);
        }
        statuses.push(ObjectStatus {
            key: state.config.key(),
            generation: state.config.meta.generation,
            status: serde_json::to_value(&state.status).unwrap_or_default(),
        });
    }
    // Gateways come right after the GatewayClasses, before the routes.
    let classes = out.statuses.iter().take_while(|s| s.key.kind == Kind::GatewayClass).count();
    let routes = out.statuses.split_off(classes);
    out.statuses.extend(statuses);
    out.statuses.extend(routes);
}

#[cfg(test)]
mod tests {
    use api::gateway_api::gateway::{
        FrontendTLSConfig, FrontendTLSValidation, GatewayTLSConfig, TLSConfig, TLSPortConfig,
    };

    use super::*;

    fn validation(mode: &str) -> Option<TLSConfig> {
        Some(TLSConfig {
            validation: Some(FrontendTLSValidation { mode: Some(mode.into()), ..Default::default() }),
        })
    }

    #[test]
    fn frontend_validation_per_port_overrides_the_default() {
        let tls = GatewayTLSConfig {
            frontend: Some(FrontendTLSConfig {
                default: validation("AllowValidOnly"),
                per_port: vec![TLSPortConfig { port: 8443, tls: validation("AllowInsecureFallback") }],
            }),
            ..Default::default()
        };
        let mode = |port| frontend_validation(Some(&tls), port).and_then(|v| v.mode.clone());
        assert_eq!(mode(443).as_deref(), Some("AllowValidOnly"));
        assert_eq!(mode(8443).as_deref(), Some("AllowInsecureFallback"));
        assert!(frontend_validation(None, 443).is_none());
    }

    /// Istio's `validateBackendClientCertificateRef`: kind, existence (where Secrets are known) and the
    /// ReferenceGrant for another namespace, with Istio's reasons and messages.
    #[test]
    fn backend_client_certificate_refs_are_checked_as_istio() {
        use api::gateway_api::{SecretObjectReference, gateway::GatewayBackendTLS};
        let store = crate::StaticStore::new(Vec::new());
        let kube = crate::KubeObjects {
            secrets: Some([("gw".to_string(), "cert".to_string()), ("other".into(), "cert".into())].into()),
            ..Default::default()
        };
        let input =
            crate::Input { store: &store, services: &[], kube: &kube, domain_suffix: "cluster.local" };
        let ctx = Ctx::new(&input);
        let check = |r: SecretObjectReference| {
            let spec = GatewaySpec {
                tls: Some(GatewayTLSConfig {
                    backend: Some(GatewayBackendTLS { client_certificate_ref: Some(r) }),
                    ..Default::default()
                }),
                ..Default::default()
            };
            backend_client_certificate_error(&ctx, "gw", &spec).map(|e| (e.reason, e.message))
        };
        let secret = |name: &str, ns: Option<&str>| SecretObjectReference {
            name: name.into(),
            namespace: ns.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(check(secret("cert", None)), None);
        assert_eq!(
            check(SecretObjectReference { kind: Some("ConfigMap".into()), ..secret("cm", None) }),
            Some((
                "InvalidClientCertificateRef".into(),
                "invalid clientCertificateRef /ConfigMap/cm., only secret is allowed".into()
            ))
        );
        assert_eq!(
            check(secret("gone", None)),
            Some((
                "InvalidClientCertificateRef".into(),
                "invalid clientCertificateRef //gone., secret gw/gone not found".into()
            ))
        );
        assert_eq!(
            check(secret("cert", Some("other"))),
            Some((
                "RefNotPermitted".into(),
                "clientCertificateRef cert/other not accessible to a Gateway in namespace \"gw\" (missing a ReferenceGrant?)"
                    .into()
            ))
        );
    }

    #[test]
    fn cipher_suite_options_keep_known_suites_once_in_order() {
        assert_eq!(
            cipher_suites("ECDHE-ECDSA-AES128-GCM-SHA256, ECDHE-RSA-AES128-GCM-SHA256"),
            ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"]
        );
        assert_eq!(cipher_suites("bad, ECDHE-RSA-AES128-GCM-SHA256"), ["ECDHE-RSA-AES128-GCM-SHA256"]);
        assert!(cipher_suites("bogus,bad").is_empty());
        assert_eq!(cipher_suites("AES128-SHA,AES128-SHA, -AES256-SHA"), ["AES128-SHA", "-AES256-SHA"]);
        assert!(cipher_suites("").is_empty());
    }
}
