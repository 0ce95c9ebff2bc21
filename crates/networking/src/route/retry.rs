//! Retry policies, as Istio's `route/retry.ConvertPolicy` builds them.

use api::networking::virtual_service::HttpRetry;
use envoy_types::{
    pb::{
        envoy::{
            config::route::v3::{RetryPolicy, retry_policy},
            extensions::retry::{
                host::previous_hosts::v3::PreviousHostsPredicate,
                priority::previous_priorities::v3::PreviousPrioritiesConfig,
            },
        },
        google::protobuf::UInt32Value,
    },
    util::pack_any,
};
use validation::common::is_known_http_status;

use super::{DEFAULT_RETRY_ATTEMPTS, DEFAULT_RETRY_ON, actions::envoy_duration};

/// Istio's `previous_hosts` retry host predicate (retries avoid hosts already tried).
fn previous_hosts_predicate() -> retry_policy::RetryHostPredicate {
    retry_policy::RetryHostPredicate {
        name: "envoy.retry_host_predicates.previous_hosts".to_owned(),
        config_type: Some(retry_policy::retry_host_predicate::ConfigType::TypedConfig(pack_any(
            PreviousHostsPredicate::default(),
        ))),
    }
}

/// Istio's default retry policy, used when an HTTP route sets no `retries`: 2 retries on
/// [`DEFAULT_RETRY_ON`], 5 host selection attempts, and (without consistent hashing) retries avoid
/// hosts already tried. Since Istio 1.24 (`EXCLUDE_503_FROM_DEFAULT_RETRIES`, a flag later removed) it
/// lists no retriable status codes, so `retriable-status-codes` only applies to codes a request names in
/// `x-envoy-retriable-status-codes`.
pub fn default_retry_policy(consistent_hash: bool) -> RetryPolicy {
    RetryPolicy {
        num_retries: Some(UInt32Value { value: DEFAULT_RETRY_ATTEMPTS }),
        retry_on: DEFAULT_RETRY_ON.to_owned(),
        host_selection_retry_max_attempts: 5,
        retry_host_predicate: if consistent_hash { Vec::new() } else { vec![previous_hosts_predicate()] },
        ..Default::default()
    }
}

/// Istio's `retry.ConvertPolicy`: `None` for the default policy ([`default_retry_policy`]); no policy
/// when `attempts` is 0 or less; otherwise the default policy with the route's settings over it.
/// `consistent_hash` (the destination uses consistent-hash load balancing) drops the "avoid previous
/// hosts" predicate of the default.
pub fn retry_policy(retries: Option<&HttpRetry>, consistent_hash: bool) -> Option<RetryPolicy> {
    let Some(r) = retries else {
        return Some(default_retry_policy(consistent_hash));
    };
    if r.attempts <= 0 {
        return None;
    }
    let mut out = default_retry_policy(consistent_hash);
    out.num_retries = Some(UInt32Value { value: r.attempts as u32 });
    if !r.retry_on.is_empty() {
        let (retry_on, codes) = parse_retry_on(&r.retry_on);
        out.retry_on = retry_on;
        out.retriable_status_codes = codes;
        if !out.retriable_status_codes.is_empty() && !out.retry_on.contains("retriable-status-codes") {
            out.retry_on.push_str(",retriable-status-codes");
        }
    }
    if let Some(t) = &r.per_try_timeout {
        out.per_try_timeout = Some(envoy_duration(t));
    }
    if let Some(ignore_previous) = r.retry_ignore_previous_hosts {
        out.retry_host_predicate =
            if ignore_previous { vec![previous_hosts_predicate()] } else { Vec::new() };
    }
    if r.retry_remote_localities == Some(true) {
        out.retry_priority = Some(retry_policy::RetryPriority {
            name: "envoy.retry_priorities.previous_priorities".to_owned(),
            config_type: Some(retry_policy::retry_priority::ConfigType::TypedConfig(pack_any(
                PreviousPrioritiesConfig { update_frequency: 2 },
            ))),
        });
    }
    if let Some(b) = &r.backoff {
        out.retry_back_off =
            Some(retry_policy::RetryBackOff { base_interval: Some(envoy_duration(b)), ..Default::default() });
    }
    Some(out)
}

/// Istio's `parseRetryOn`: comma-separated parts, trimmed; parts that are known HTTP status codes
/// become retriable status codes, the rest are joined back as Envoy `retry_on` conditions.
fn parse_retry_on(retry_on: &str) -> (String, Vec<u32>) {
    let mut codes = Vec::new();
    let mut conditions = Vec::new();
    for part in retry_on.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<i64>() {
            Ok(code) if is_known_http_status(code) => codes.push(code as u32),
            _ => conditions.push(part),
        }
    }
    (conditions.join(","), codes)
}
