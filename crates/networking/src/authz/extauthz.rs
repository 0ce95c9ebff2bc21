//! MeshConfig ext_authz providers → Envoy `ext_authz` filter configs (Istio's
//! `pilot/pkg/security/authz/builder/extauthz.go`).

use std::sync::Arc;

use envoy_types::pb::envoy::{
    config::core::v3::{ApiVersion, GrpcService, HeaderValue, HttpUri, grpc_service, http_uri},
    extensions::filters::{
        http::ext_authz::v3::{
            AuthorizationRequest, AuthorizationResponse, BufferSettings, ExtAuthz as HttpExtAuthz,
            HttpService, ext_authz,
        },
        network::ext_authz::v3::ExtAuthz as TcpExtAuthz,
    },
    r#type::{
        matcher::v3::MetadataMatcher,
        v3::{HttpStatus, StatusCode},
    },
};
use envoy_types::pb::google::protobuf::Duration;
use model::{
    push::extension_provider::{
        ExtAuthzGrpc, ExtAuthzHttp, ExtensionProvider, ProviderKind, RequestBodyInCheck,
    },
    service::Service,
};

use super::matcher as m;
use crate::naming::outbound_cluster_name;

/// Prefix of CUSTOM policy names in the RBAC shadow rules, matched by ext_authz's
/// `filter_enabled_metadata`.
pub const EXT_AUTHZ_MATCH_PREFIX: &str = "istio-ext-authz";
/// Suffix of the deny rules of a CUSTOM policy whose provider is invalid.
pub const BAD_CUSTOM_ACTION_SUFFIX: &str = "-deny-due-to-bad-CUSTOM-action";
/// Stat prefix of the CUSTOM shadow rules (`istio_ext_authz_`).
pub const EXT_AUTHZ_SHADOW_STAT_PREFIX: &str = "istio_ext_authz_";
/// Dynamic metadata key the RBAC filter writes the matched shadow policy to.
pub const SHADOW_EFFECTIVE_POLICY_ID: &str = "shadow_effective_policy_id";

/// A provider resolved for use: the HTTP filter config, and the network one (gRPC providers only).
#[derive(Clone, Debug)]
pub struct BuiltExtAuthz {
    /// `envoy.filters.http.ext_authz` config.
    pub http: HttpExtAuthz,
    /// `envoy.filters.network.ext_authz` config; `None` for HTTP providers (not usable on TCP).
    pub tcp: Option<TcpExtAuthz>,
}

/// Istio's `processExtensionProvider` + `getExtAuthz` for one provider name.
///
/// # Errors
/// Why the provider cannot be used: unknown name, invalid or duplicate name, bad port, service not
/// found (or ambiguous), bad `statusOnError` or `pathPrefix`, a lone `*` in a header list.
pub fn resolve(
    providers: &[ExtensionProvider],
    services: &[Arc<Service>],
    name: &str,
) -> Result<BuiltExtAuthz, String> {
    // Istio resolves every ext_authz provider into a map by name; a later duplicate replaces the
    // earlier one and carries a "duplicate" error.
    let mut found: Option<(usize, &ExtensionProvider)> = None;
    let mut seen = std::collections::BTreeSet::new();
    let mut duplicate = false;
    let mut available = Vec::new();
    for (i, p) in providers.iter().enumerate() {
        if !matches!(p.kind, ProviderKind::EnvoyExtAuthzHttp(_) | ProviderKind::EnvoyExtAuthzGrpc(_)) {
            continue;
        }
        let dup = !p.name.is_empty() && !seen.insert(p.name.as_str());
        if !available.contains(&p.name) {
            available.push(p.name.clone());
        }
        if p.name == name {
            found = Some((i, p));
            duplicate = dup;
        }
    }
    let Some((index, provider)) = found else {
        return Err(format!("available providers are {available:?} but found {name:?}"));
    };
    let mut errs = Vec::new();
    if provider.name.is_empty() {
        errs.push(format!("extension provider name must not be empty, found empty at index: {index}"));
    } else if duplicate {
        errs.push(format!("extension provider name must be unique, found duplicate: {}", provider.name));
    }
    if !provider.name.is_empty()
        && let Err(e) = validate_provider_name(&provider.name)
    {
        errs.push(format!("invalid provider name {:?}: {e}", provider.name));
    }
    let built = match &provider.kind {
        ProviderKind::EnvoyExtAuthzHttp(c) => build_http(services, c),
        ProviderKind::EnvoyExtAuthzGrpc(c) => build_grpc(services, c),
        _ => unreachable_kind(),
    };
    let built = match built {
        Ok(b) => Some(b),
        Err(e) => {
            errs.push(format!("failed to parse extension provider {:?}: {}", provider.name, e.join("; ")));
            None
        }
    };
    match (built, errs.is_empty()) {
        (Some(b), true) => Ok(b),
        _ => Err(format!("found errors in provider {name}: {}", errs.join("; "))),
    }
}

fn unreachable_kind() -> Result<BuiltExtAuthz, Vec<String>> {
    Err(vec!["not an ext_authz provider".into()])
}

/// Istio's `validateProviderName`: 1–63 lowercase letters, digits and inner hyphens.
fn validate_provider_name(name: &str) -> Result<(), String> {
    if name.len() > 63 {
        return Err(format!("provider name too long (max 63 characters): {}", name.len()));
    }
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
            continue;
        }
        if c.is_ascii_uppercase() {
            return Err(format!(
                "uppercase letters not allowed (use lowercase): character {c:?} at position {i}"
            ));
        }
        return Err(format!(
            "invalid character {c:?} at position {i} (only lowercase letters, digits, and hyphens allowed)"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("provider name cannot start or end with hyphen".into());
    }
    Ok(())
}

/// Istio's `LookupCluster`: `ns/host` or a host in exactly one namespace → (hostname, outbound
/// cluster name for `port`).
pub fn lookup_cluster(
    services: &[Arc<Service>],
    service: &str,
    port: u32,
) -> Result<(String, String), String> {
    if service.is_empty() {
        return Err("service must not be empty".into());
    }
    let parts: Vec<&str> = service.split('/').collect();
    if parts.len() == 2 {
        let (ns, host) = (parts[0], parts[1]);
        if let Some(s) = services.iter().find(|s| s.hostname == host && s.namespace == ns) {
            return Ok((s.hostname.clone(), outbound_cluster_name(port, "", &s.hostname)));
        }
    } else {
        let mut namespaces: Vec<&str> =
            services.iter().filter(|s| s.hostname == service).map(|s| s.namespace.as_str()).collect();
        namespaces.sort_unstable();
        namespaces.dedup();
        match namespaces.len() {
            1 => return Ok((service.to_string(), outbound_cluster_name(port, "", service))),
            0 => {}
            _ => {
                return Err(format!(
                    "found {service} in multiple namespaces {namespaces:?}, specify the namespace explicitly in the \
                     format of <Namespace>/<Hostname>"
                ));
            }
        }
    }
    Err(format!("could not find service {service} in Istio service registry"))
}

fn parse_port(port: u32) -> Result<u32, String> {
    if (1..=65535).contains(&port) {
        Ok(port)
    } else {
        Err(format!("port must be in the range [1, 65535], found: {port}"))
    }
}

/// Istio's `parseStatusOnError`: empty → none; else a code of Envoy's `StatusCode` enum.
fn parse_status_on_error(status: &str) -> Result<Option<HttpStatus>, String> {
    if status.is_empty() {
        return Ok(None);
    }
    let code: i32 = status.parse().map_err(|e| format!("invalid statusOnError {status:?}: {e}"))?;
    match StatusCode::try_from(code) {
        Ok(_) => Ok(Some(HttpStatus { code })),
        Err(_) => Err(format!("unsupported statusOnError {status}")),
    }
}

fn timeout_or_default(t: Option<api::wkt::Duration>) -> Duration {
    match t {
        Some(d) => Duration { seconds: d.seconds, nanos: d.nanos },
        None => Duration { seconds: 600, nanos: 0 },
    }
}

fn with_body(b: &Option<RequestBodyInCheck>) -> Option<BufferSettings> {
    b.as_ref().map(|b| BufferSettings {
        max_request_bytes: b.max_request_bytes,
        allow_partial_message: b.allow_partial_message,
        pack_as_bytes: b.pack_as_bytes,
    })
}

/// `filter_enabled_metadata` for one provider: the RBAC filter's shadow effective policy id starts
/// with `istio-ext-authz-<provider>` (Istio's `generateFilterMatcherForProvider`).
pub fn filter_matcher(filter: &str, provider: &str) -> MetadataMatcher {
    m::metadata_value(
        filter,
        &format!("{EXT_AUTHZ_SHADOW_STAT_PREFIX}{SHADOW_EFFECTIVE_POLICY_ID}"),
        m::string_value(m::prefix(&format!("{EXT_AUTHZ_MATCH_PREFIX}-{provider}"), false)),
    )
}

fn build_http(services: &[Arc<Service>], c: &ExtAuthzHttp) -> Result<BuiltExtAuthz, Vec<String>> {
    let mut errs = Vec::new();
    let port = parse_port(c.port).map_err(|e| errs.push(e)).unwrap_or(0);
    let cluster = lookup_cluster(services, &c.service, port).map_err(|e| errs.push(e)).ok();
    let status = parse_status_on_error(&c.status_on_error).map_err(|e| errs.push(e)).ok().flatten();
    if !c.path_prefix.is_empty() && !c.path_prefix.starts_with('/') {
        errs.push(format!("pathPrefix must begin with `/`, found: {:?}", c.path_prefix));
    }
    for (field, values) in [
        ("IncludeRequestHeadersInCheck", &c.include_request_headers_in_check),
        ("IncludeHeadersInCheck", &c.include_headers_in_check),
        ("HeadersToDownstreamOnDeny", &c.headers_to_downstream_on_deny),
        ("HeadersToDownstreamOnAllow", &c.headers_to_downstream_on_allow),
        ("HeadersToUpstreamOnAllow", &c.headers_to_upstream_on_allow),
    ] {
        if values.iter().any(|v| v == "*") {
            errs.push(format!(
                "a single wildcard (\"*\") is not supported, change it to either prefix or suffix match: {field}"
            ));
        }
    }
    let Some((hostname, cluster)) = cluster.filter(|_| errs.is_empty()) else {
        return Err(errs);
    };
    let mut service = HttpService {
        path_prefix: c.path_prefix.clone(),
        server_uri: Some(HttpUri {
            uri: format!("http://{hostname}"),
            timeout: Some(timeout_or_default(c.timeout)),
            http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(cluster)),
        }),
        ..Default::default()
    };
    let allowed_headers = m::header_list(&c.include_request_headers_in_check)
        .or_else(|| m::header_list(&c.include_headers_in_check));
    let headers_to_add: Vec<HeaderValue> = c
        .include_additional_headers_in_check
        .iter()
        .map(|(k, v)| HeaderValue { key: k.clone(), value: v.clone(), ..Default::default() })
        .collect();
    if !headers_to_add.is_empty() {
        service.authorization_request = Some(AuthorizationRequest { headers_to_add, ..Default::default() });
    }
    if !c.headers_to_upstream_on_allow.is_empty()
        || !c.headers_to_downstream_on_deny.is_empty()
        || !c.headers_to_downstream_on_allow.is_empty()
    {
        service.authorization_response = Some(AuthorizationResponse {
            allowed_upstream_headers: m::header_list(&c.headers_to_upstream_on_allow),
            allowed_client_headers: m::header_list(&c.headers_to_downstream_on_deny),
            allowed_client_headers_on_success: m::header_list(&c.headers_to_downstream_on_allow),
            ..Default::default()
        });
    }
    let http = HttpExtAuthz {
        status_on_error: status,
        failure_mode_allow: c.fail_open,
        transport_api_version: ApiVersion::V3 as i32,
        services: Some(ext_authz::Services::HttpService(service)),
        with_request_body: with_body(&c.include_request_body_in_check),
        allowed_headers,
        ..Default::default()
    };
    Ok(BuiltExtAuthz { http, tcp: None })
}

fn build_grpc(services: &[Arc<Service>], c: &ExtAuthzGrpc) -> Result<BuiltExtAuthz, Vec<String>> {
    let mut errs = Vec::new();
    let port = parse_port(c.port).map_err(|e| errs.push(e)).unwrap_or(0);
    let cluster = lookup_cluster(services, &c.service, port).map_err(|e| errs.push(e)).ok();
    let status = parse_status_on_error(&c.status_on_error).map_err(|e| errs.push(e)).ok().flatten();
    let Some((hostname, cluster)) = cluster.filter(|_| errs.is_empty()) else {
        return Err(errs);
    };
    let grpc = GrpcService {
        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(grpc_service::EnvoyGrpc {
            cluster_name: cluster,
            authority: hostname,
            ..Default::default()
        })),
        timeout: Some(timeout_or_default(c.timeout)),
        ..Default::default()
    };
    let http = HttpExtAuthz {
        status_on_error: status,
        failure_mode_allow: c.fail_open,
        services: Some(ext_authz::Services::GrpcService(grpc.clone())),
        transport_api_version: ApiVersion::V3 as i32,
        with_request_body: with_body(&c.include_request_body_in_check),
        ..Default::default()
    };
    let tcp = TcpExtAuthz {
        stat_prefix: "tcp.".into(),
        failure_mode_allow: c.fail_open,
        transport_api_version: ApiVersion::V3 as i32,
        grpc_service: Some(grpc),
        ..Default::default()
    };
    Ok(BuiltExtAuthz { http, tcp: Some(tcp) })
}

/// Test helpers shared with the builder tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A Kubernetes service `host` in `ns`, without ports.
    pub(crate) fn service(host: &str, ns: &str) -> Arc<Service> {
        Arc::new(Service {
            hostname: host.into(),
            namespace: ns.into(),
            name: host.into(),
            object_name: host.into(),
            registry: model::service::ProviderId::Kubernetes,
            ports: vec![],
            addresses: vec![],
            resolution: model::service::Resolution::ClientSideLb,
            mesh_external: false,
            export_to: Default::default(),
            labels: Default::default(),
            label_selector: None,
            service_accounts: vec![],
            creation_time: None,
            passthrough_target_ports: Default::default(),
            external_name: None,
            aliases: Vec::new(),
            auto_allocated: Vec::new(),
            traffic_distribution: Default::default(),
            cluster_external_addresses: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{tests_support::service as svc, *};

    #[test]
    fn lookup_cluster_by_namespace_or_unique_host() {
        let services = [svc("a.foo.svc.cluster.local", "foo"), svc("b.x", "n1"), svc("b.x", "n2")];
        assert_eq!(
            lookup_cluster(&services, "foo/a.foo.svc.cluster.local", 9000).unwrap(),
            ("a.foo.svc.cluster.local".into(), "outbound|9000||a.foo.svc.cluster.local".into())
        );
        assert_eq!(
            lookup_cluster(&services, "a.foo.svc.cluster.local", 1).unwrap().1,
            "outbound|1||a.foo.svc.cluster.local"
        );
        assert!(lookup_cluster(&services, "b.x", 1).unwrap_err().contains("multiple namespaces"));
        assert_eq!(lookup_cluster(&services, "n2/b.x", 1).unwrap().0, "b.x");
        assert!(
            lookup_cluster(&services, "bar/a.foo.svc.cluster.local", 1)
                .unwrap_err()
                .contains("could not find")
        );
        assert!(lookup_cluster(&services, "", 1).is_err());
    }

    #[test]
    fn provider_errors() {
        let services = [svc("authz.foo.svc.cluster.local", "foo")];
        let http = |port, status: &str, prefix: &str| ExtensionProvider {
            name: "p".into(),
            kind: ProviderKind::EnvoyExtAuthzHttp(ExtAuthzHttp {
                service: "authz.foo.svc.cluster.local".into(),
                port,
                status_on_error: status.into(),
                path_prefix: prefix.into(),
                ..Default::default()
            }),
        };
        assert!(resolve(&[http(9000, "403", "/check")], &services, "p").is_ok());
        assert!(
            resolve(&[http(0, "", "")], &services, "p").unwrap_err().contains("port must be in the range")
        );
        assert!(
            resolve(&[http(9000, "999", "")], &services, "p")
                .unwrap_err()
                .contains("unsupported statusOnError")
        );
        assert!(resolve(&[http(9000, "", "check")], &services, "p").unwrap_err().contains("pathPrefix"));
        assert!(resolve(&[http(9000, "", "")], &services, "q").unwrap_err().contains("available providers"));
        assert!(
            resolve(&[http(9000, "", ""), http(9000, "", "")], &services, "p")
                .unwrap_err()
                .contains("duplicate")
        );
        let mut upper = http(9000, "", "");
        upper.name = "P".into();
        assert!(resolve(&[upper], &services, "P").unwrap_err().contains("uppercase"));
        let zipkin = ExtensionProvider { name: "z".into(), kind: ProviderKind::Other("zipkin".into()) };
        assert!(resolve(&[zipkin], &services, "z").unwrap_err().contains("available providers"));
    }
}
