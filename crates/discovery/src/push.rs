//! Which xDS types a push regenerates (Istio's per-type `cdsNeedsPush`, `edsNeedsPush`, `ldsNeedsPush`,
//! `rdsNeedsPush`, `ecdsNeedsPush` in `pilot/pkg/xds`; ISTIO-REFERENCE §1.2). Which proxies a push concerns is the
//! model's rule (`model::push::proxy_needs_push`, `scope_needs_push`).

use api::Kind;
use model::push::{ProxyKind, PushRequest, kind_affects_proxy};
use xds::type_url;

/// Whether `request` changes resources of `type_url` for a proxy of `proxy_kind` (Istio's per-type
/// skip tables, ISTIO-REFERENCE §1.2). Endpoint-only requests affect EDS only.
pub fn type_needs_push(request: &PushRequest, type_url: &str, proxy_kind: ProxyKind) -> bool {
    if request.forced {
        return true;
    }
    if request.is_endpoints_only() {
        return type_url == type_url::ENDPOINT && !request.endpoints_updated.is_empty();
    }
    if type_url == type_url::EXTENSION_CONFIG {
        // Istio's `ecdsNeedsPush`: only EnvoyFilter and extension changes (and pull secrets, which
        // meshpilot does not send) change ECDS resources.
        return request.kinds().into_iter().any(|k| {
            matches!(k, Kind::EnvoyFilter | Kind::WasmPlugin | Kind::TrafficExtension)
                && kind_affects_proxy(k, proxy_kind)
        });
    }
    // A WasmPlugin or TrafficExtension whose placement is unchanged concerns ECDS only
    // (`PushRequest::ecds_only`; istiod pushes LDS too, with unchanged listeners).
    let kinds: Vec<Kind> =
        request.placed_kinds().into_iter().filter(|k| kind_affects_proxy(*k, proxy_kind)).collect();
    let skips: &[Kind] = match type_url {
        type_url::CLUSTER => &[
            Kind::WorkloadEntry,
            Kind::WorkloadGroup,
            Kind::AuthorizationPolicy,
            Kind::RequestAuthentication,
            Kind::Telemetry,
            Kind::WasmPlugin,
            Kind::TrafficExtension,
            Kind::ProxyConfig,
        ],
        type_url::ENDPOINT => &[
            Kind::Gateway,
            Kind::VirtualService,
            Kind::WorkloadGroup,
            Kind::AuthorizationPolicy,
            Kind::RequestAuthentication,
            Kind::Telemetry,
            Kind::WasmPlugin,
            Kind::TrafficExtension,
            Kind::ProxyConfig,
            Kind::Sidecar,
        ],
        type_url::LISTENER => &[Kind::WorkloadEntry, Kind::WorkloadGroup, Kind::ProxyConfig],
        type_url::ROUTE => &[
            Kind::WorkloadEntry,
            Kind::WorkloadGroup,
            Kind::AuthorizationPolicy,
            Kind::RequestAuthentication,
            Kind::PeerAuthentication,
            Kind::WasmPlugin,
            Kind::TrafficExtension,
            Kind::Telemetry,
            Kind::ProxyConfig,
        ],
        // Istio's `skippedNdsConfigs` (`pilot/pkg/xds/nds.go`).
        type_url::NAME_TABLE => &[
            Kind::Gateway,
            Kind::VirtualService,
            Kind::DestinationRule,
            Kind::Telemetry,
            Kind::EnvoyFilter,
            Kind::WorkloadEntry,
            Kind::WorkloadGroup,
            Kind::AuthorizationPolicy,
            Kind::RequestAuthentication,
            Kind::PeerAuthentication,
            Kind::WasmPlugin,
            Kind::TrafficExtension,
            Kind::ProxyConfig,
        ],
        _ => &[],
    };
    let config_matters = kinds.iter().any(|k| !skips.contains(k));
    config_matters || (type_url == type_url::ENDPOINT && !request.endpoints_updated.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{ConfigKey, push::TriggerReason};

    fn key(kind: Kind) -> ConfigKey {
        ConfigKey { kind, namespace: "ns".into(), name: "n".into() }
    }

    #[test]
    fn endpoint_only_is_eds_only() {
        let r = PushRequest::endpoints("a", "ns");
        for t in [type_url::CLUSTER, type_url::LISTENER, type_url::ROUTE] {
            assert!(!type_needs_push(&r, t, ProxyKind::Sidecar), "{t}");
        }
        assert!(type_needs_push(&r, type_url::ENDPOINT, ProxyKind::Sidecar));
    }

    #[test]
    fn per_type_tables() {
        let vs = PushRequest::config([key(Kind::VirtualService)], TriggerReason::Config);
        assert!(type_needs_push(&vs, type_url::ROUTE, ProxyKind::Sidecar));
        assert!(!type_needs_push(&vs, type_url::ENDPOINT, ProxyKind::Sidecar));
        let gw = PushRequest::config([key(Kind::Gateway)], TriggerReason::Config);
        assert!(type_needs_push(&gw, type_url::LISTENER, ProxyKind::Router));
        let we = PushRequest::config([key(Kind::WorkloadEntry)], TriggerReason::Config);
        assert!(!type_needs_push(&we, type_url::CLUSTER, ProxyKind::Sidecar));
        let se = PushRequest::config([key(Kind::ServiceEntry)], TriggerReason::Config);
        assert!(type_needs_push(&se, type_url::NAME_TABLE, ProxyKind::Sidecar));
        assert!(!type_needs_push(&vs, type_url::NAME_TABLE, ProxyKind::Sidecar));
        assert!(!type_needs_push(
            &PushRequest::endpoints("a", "ns"),
            type_url::NAME_TABLE,
            ProxyKind::Sidecar
        ));
        assert!(type_needs_push(
            &PushRequest::forced(TriggerReason::Debug),
            type_url::SECRET,
            ProxyKind::Sidecar
        ));
    }

    #[test]
    fn extension_changes_push_ecds_and_listeners_only_when_placed_differently() {
        let content = PushRequest::extension_content(key(Kind::WasmPlugin));
        assert!(type_needs_push(&content, type_url::EXTENSION_CONFIG, ProxyKind::Sidecar));
        for t in
            [type_url::CLUSTER, type_url::ENDPOINT, type_url::LISTENER, type_url::ROUTE, type_url::NAME_TABLE]
        {
            assert!(!type_needs_push(&content, t, ProxyKind::Sidecar), "{t}");
        }
        let placed = PushRequest::config([key(Kind::TrafficExtension)], TriggerReason::Config);
        assert!(type_needs_push(&placed, type_url::LISTENER, ProxyKind::Router));
        assert!(type_needs_push(&placed, type_url::EXTENSION_CONFIG, ProxyKind::Router));
        for t in [type_url::CLUSTER, type_url::ENDPOINT, type_url::ROUTE, type_url::NAME_TABLE] {
            assert!(!type_needs_push(&placed, t, ProxyKind::Sidecar), "{t}");
        }
        // A merged request where another change of the same object moved it pushes listeners.
        let mut merged = PushRequest::extension_content(key(Kind::WasmPlugin));
        merged.merge_from(PushRequest::config([key(Kind::WasmPlugin)], TriggerReason::Config));
        assert!(type_needs_push(&merged, type_url::LISTENER, ProxyKind::Sidecar));
        let mut merged = PushRequest::config([key(Kind::WasmPlugin)], TriggerReason::Config);
        merged.merge_from(PushRequest::extension_content(key(Kind::WasmPlugin)));
        assert!(type_needs_push(&merged, type_url::LISTENER, ProxyKind::Sidecar));
        // Other config changes leave ECDS alone.
        let vs = PushRequest::config([key(Kind::VirtualService)], TriggerReason::Config);
        assert!(!type_needs_push(&vs, type_url::EXTENSION_CONFIG, ProxyKind::Sidecar));
    }
}
