//! Metric names of the push pipeline (Istio's; the Prometheus exporter adds no `_total`). The
//! engine's own (`pilot_xds`, `pilot_xds_pushes`, `pilot_proxy_convergence_time`, …) are in
//! [`xds::metrics`]; the JWKS resolver's in [`jwks::metrics`].

/// Counter `pilot_inbound_updates{type}`: config/eds/svc/svcdelete events received.
pub const INBOUND_UPDATES: &str = "pilot_inbound_updates";
/// Counter `pilot_k8s_cfg_events{type,event}`: config events, by kind (`VirtualService`, …) and
/// `event` (`add`, `update`, `delete`), counted once per event the config store delivers to the
/// discovery server, whatever the source (files, Kubernetes, MCP): istiod counts only its Kubernetes
/// config client's (`pilot/pkg/config/kube/crdclient/metrics.go`). The store merges sources first, so
/// a change to a copy shadowed by a higher-precedence source is not counted.
pub const K8S_CFG_EVENTS: &str = "pilot_k8s_cfg_events";
/// Counter `pilot_push_triggers{type}`: merged pushes by reason.
pub const PUSH_TRIGGERS: &str = "pilot_push_triggers";
/// Histogram `pilot_debounce_time`: seconds from the first event of a batch to its push (includes the
/// PushContext build).
pub const DEBOUNCE_TIME: &str = "pilot_debounce_time";
/// Histogram `pilot_pushcontext_init_seconds`: seconds to build a PushContext.
pub const PUSHCONTEXT_INIT: &str = "pilot_pushcontext_init_seconds";

/// Counter `meshpilot_security_policy_findings{kind}`: findings about AuthorizationPolicies /
/// RequestAuthentications (`kind`) not translated as written (a rule replaced by a deny, a field or
/// rule dropped on TCP chains, a key set replaced by the fail-closed one), counted once per distinct
/// finding and config generation; the findings themselves
/// are in `/debug/configstatusz` (`generationFindings`). No Istio equivalent (istiod only logs).
pub const SECURITY_POLICY_FINDINGS: &str = "meshpilot_security_policy_findings";

/// Counter: EnvoyFilter patches that could not apply as written (`name` = `namespace/name`, `severity`:
/// `dropped` for a value that does not read as its Envoy type or a patched resource Envoy would reject,
/// sent without that EnvoyFilter's patches; `warning`, `unsupported`), counted once per distinct finding
/// and config generation; the findings are in `/debug/configstatusz`. istiod's nearest is
/// `pilot_envoy_filter_status` (off by default), which counts panics while patching, not bad patches.
pub const ENVOY_FILTER_FINDINGS: &str = "meshpilot_envoy_filter_findings";

/// Counter `meshpilot_rest_xds_polls{type,code}`: polls of the REST-JSON discovery endpoints
/// ([`crate::rest`]) by type (`cds`, `lds`, `rds`, `eds`, `sds`) and HTTP status (`200`, `304`, `400`, …).
/// No Istio equivalent (istiod serves no REST xDS).
pub const REST_POLLS: &str = "meshpilot_rest_xds_polls";

/// Histogram buckets for the metrics above (Istio's).
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[
    (DEBOUNCE_TIME, &[0.01, 0.1, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0]),
    (PUSHCONTEXT_INIT, &[0.01, 0.1, 0.5, 1.0, 3.0, 5.0]),
];

/// Registers descriptions with the installed recorder.
pub fn describe() {
    xds::metrics::describe();
    jwks::metrics::describe();
    metrics::describe_counter!(INBOUND_UPDATES, "Total number of updates received by pilot.");
    metrics::describe_counter!(K8S_CFG_EVENTS, "Events from k8s config.");
    metrics::describe_counter!(
        PUSH_TRIGGERS,
        "Total number of times a push was triggered, labeled by reason."
    );
    metrics::describe_histogram!(
        DEBOUNCE_TIME,
        "Delay in seconds between the first config event and the merged push."
    );
    metrics::describe_counter!(
        ENVOY_FILTER_FINDINGS,
        "EnvoyFilter patches not applied as written (unreadable values, patched resources Envoy would reject), per config generation."
    );
    metrics::describe_counter!(
        REST_POLLS,
        "Polls of the REST-JSON discovery endpoints, labeled by xDS type and HTTP status."
    );
    metrics::describe_histogram!(PUSHCONTEXT_INIT, "Total time in seconds Pilot takes to init pushContext.");
    metrics::describe_counter!(
        SECURITY_POLICY_FINDINGS,
        "Findings about security policies not translated as written (denied, dropped or fail-closed keys), per config generation."
    );
}
