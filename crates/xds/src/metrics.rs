//! The engine's Prometheus metrics, with Istio's names (`pilot/pkg/xds/monitoring.go`,
//! `pkg/xds/monitoring.go`), recorded through the `metrics` facade.
//!
//! Counters carry no `_total` suffix (RUST-STACK.md pitfall 14): render them with
//! `metrics-exporter-prometheus`, which keeps names as given. Histogram buckets are the exporter's
//! business; [`HISTOGRAM_BUCKETS`] lists Istio's for each histogram so the binary can configure them
//! (`PrometheusBuilder::set_buckets_for_metric`). Call [`describe`] once at startup for HELP texts.

use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

use crate::type_url::metric_type;

/// Gauge `pilot_xds{version}`: connected xDS clients by proxy Istio version (`ISTIO_VERSION`).
pub const XDS_CLIENTS: &str = "pilot_xds";
/// Counter `pilot_xds_pushes{type}`: responses sent, by type (`cds`, `eds`, `lds`, `rds`, …); send
/// failures count as `<type>_senderr`.
pub const PUSHES: &str = "pilot_xds_pushes";
/// Counter `pilot_total_xds_rejects{type}`: NACKs received, by type.
pub const REJECTS: &str = "pilot_total_xds_rejects";
/// Counter `pilot_xds_expired_nonce{type}`: requests carrying a stale nonce, by type.
pub const EXPIRED_NONCE: &str = "pilot_xds_expired_nonce";
/// Histogram `pilot_xds_config_size_bytes{type}`: encoded size of the resources of each response;
/// like Istio, the label is the full type URL.
pub const CONFIG_SIZE: &str = "pilot_xds_config_size_bytes";
/// Histogram `pilot_proxy_convergence_time`: seconds from a push being enqueued for a connection to
/// the proxy ACKing every response of that push.
pub const CONVERGENCE: &str = "pilot_proxy_convergence_time";
/// Histogram `pilot_xds_push_time{type}`: seconds to generate and send one response.
pub const PUSH_TIME: &str = "pilot_xds_push_time";
/// Histogram `pilot_xds_send_time`: seconds to hand one response to the stream.
pub const SEND_TIME: &str = "pilot_xds_send_time";
/// Counter `pilot_total_xds_internal_errors`: generation failures and responses refused by the
/// engine's own checks.
pub const INTERNAL_ERRORS: &str = "pilot_total_xds_internal_errors";

/// Counter `meshpilot_xds_auth_failures{reason}`: streams refused on an authenticating port, by
/// `reason` (`authentication`: unknown caller; `identity`: node namespace not the caller's). istiod
/// only logs these.
pub const AUTH_FAILURES: &str = "meshpilot_xds_auth_failures";

/// Counter `meshpilot_xds_rate_limited`: new streams refused by `PILOT_MAX_REQUESTS_PER_SECOND`
/// ([`crate::admission`]). istiod only logs these (`ADS: … exceeded rate limit`).
pub const RATE_LIMITED: &str = "meshpilot_xds_rate_limited";
/// Counter `meshpilot_xds_connections_refused{reason}`: ADS connections closed at accept because the
/// port holds its most connections in all (`total`) or from the peer's address (`peer`)
/// ([`crate::http2::ConnectionLimits`]). istiod has no such bound.
pub const CONNECTIONS_REFUSED: &str = "meshpilot_xds_connections_refused";
/// Counter `pilot_xds_write_timeout`: streams closed because a response could not be handed to a
/// client that stopped reading within `PILOT_XDS_SEND_TIMEOUT` (Istio's name: "Pilot XDS response
/// write timeouts").
pub const WRITE_TIMEOUT: &str = "pilot_xds_write_timeout";

/// Counter `meshpilot_xds_handshake_timeouts`: connections to an ADS port closed because they sent
/// no HTTP/2 preface and first request within `MESHPILOT_XDS_HANDSHAKE_TIMEOUT`
/// ([`crate::handshake`]), or streams without a first request within it.
pub const HANDSHAKE_TIMEOUTS: &str = "meshpilot_xds_handshake_timeouts";
/// Counter `meshpilot_xds_limit_refusals{limit}`: streams closed with `RESOURCE_EXHAUSTED` for a
/// request over a [`crate::server::StreamLimits`] limit (`names`, `types`).
pub const LIMIT_REFUSALS: &str = "meshpilot_xds_limit_refusals";

/// Counter `meshpilot_xds_pushes_held`: pushes that waited for the client to answer its last
/// responses first (flow control, `PILOT_ENABLE_FLOW_CONTROL`); counted once per wait, however many
/// pushes merged into it.
pub const PUSHES_HELD: &str = "meshpilot_xds_pushes_held";

/// Distinct type labels of types other than Envoy's own, beyond which metrics say `other`: a client
/// may name any type URL, and each new label value is a new time series kept for the process's life.
const MAX_OTHER_TYPE_LABELS: usize = 64;

/// Istio's buckets for each histogram (seconds, or bytes for the config size).
pub const HISTOGRAM_BUCKETS: &[(&str, &[f64])] = &[
    (CONVERGENCE, &[0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0]),
    (PUSH_TIME, &[0.01, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0]),
    (SEND_TIME, &[0.01, 0.1, 1.0, 3.0, 5.0, 10.0, 20.0, 30.0]),
    (CONFIG_SIZE, &[1.0, 10_000.0, 1_000_000.0, 4_000_000.0, 10_000_000.0, 40_000_000.0]),
];

/// Registers HELP texts and units (Istio's wording) with the installed recorder, and
/// `pilot_total_xds_internal_errors` at 0.
pub fn describe() {
    describe_gauge!(XDS_CLIENTS, "Number of endpoints connected to this pilot using XDS.");
    describe_counter!(PUSHES, "Pilot build and send errors for lds, rds, cds and eds.");
    describe_counter!(REJECTS, "Total number of XDS responses from pilot rejected by proxy.");
    describe_counter!(EXPIRED_NONCE, "Total number of XDS requests with an expired nonce.");
    describe_histogram!(CONFIG_SIZE, Unit::Bytes, "Distribution of configuration sizes pushed to clients");
    describe_histogram!(
        CONVERGENCE,
        Unit::Seconds,
        "Delay in seconds between config change and a proxy receiving all required configuration."
    );
    describe_histogram!(
        PUSH_TIME,
        Unit::Seconds,
        "Total time in seconds Pilot takes to push lds, rds, cds and eds."
    );
    describe_histogram!(
        SEND_TIME,
        Unit::Seconds,
        "Total time in seconds Pilot takes to send generated configuration."
    );
    describe_counter!(INTERNAL_ERRORS, "Total number of internal XDS errors in pilot.");
    // Unlabelled: 0 from the start, so that the dashboard's "Internal Errors" reads 0, not "no data".
    counter!(INTERNAL_ERRORS).absolute(0);
    describe_counter!(
        AUTH_FAILURES,
        "xDS streams refused because the caller is not authenticated or not the node's identity."
    );
    describe_counter!(
        RATE_LIMITED,
        "New xDS streams refused by the request rate limit (PILOT_MAX_REQUESTS_PER_SECOND)."
    );
    describe_counter!(WRITE_TIMEOUT, "Pilot XDS response write timeouts.");
    describe_counter!(
        CONNECTIONS_REFUSED,
        "ADS connections closed at accept: the port's connection limit, in all or per peer address."
    );
    describe_counter!(
        HANDSHAKE_TIMEOUTS,
        "ADS connections or streams closed for sending no HTTP/2 preface or first request in time."
    );
    describe_counter!(LIMIT_REFUSALS, "xDS streams closed for a request over a per-stream limit.");
    describe_counter!(PUSHES_HELD, "xDS pushes that waited for the proxy to answer its last responses.");
}

/// The label value for `type_url` ([`metric_type`]), with at most [`MAX_OTHER_TYPE_LABELS`] distinct
/// values for types other than Envoy's own; the rest are `other`.
fn type_label(type_url: &str) -> String {
    use std::{
        collections::BTreeSet,
        sync::{Mutex, PoisonError},
    };
    static OTHERS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let label = metric_type(type_url);
    if label != type_url {
        return label.to_owned();
    }
    let mut others = OTHERS.lock().unwrap_or_else(PoisonError::into_inner);
    if others.contains(type_url) {
        return type_url.to_owned();
    }
    if others.len() < MAX_OTHER_TYPE_LABELS {
        others.insert(type_url.to_owned());
        return type_url.to_owned();
    }
    "other".to_owned()
}

pub(crate) fn record_handshake_timeout() {
    counter!(HANDSHAKE_TIMEOUTS).increment(1);
}

pub(crate) fn record_limit_refusal(limit: &'static str) {
    counter!(LIMIT_REFUSALS, "limit" => limit).increment(1);
}

pub(crate) fn record_push_held() {
    counter!(PUSHES_HELD).increment(1);
}

pub(crate) fn record_rate_limited() {
    counter!(RATE_LIMITED).increment(1);
}

pub(crate) fn record_connection_refused(reason: &'static str) {
    counter!(CONNECTIONS_REFUSED, "reason" => reason).increment(1);
}

pub(crate) fn record_write_timeout() {
    counter!(WRITE_TIMEOUT).increment(1);
}

/// Counts a refused caller (`reason`: `authentication` or `identity`), as for ADS streams.
pub fn record_auth_failure(reason: &'static str) {
    counter!(AUTH_FAILURES, "reason" => reason).increment(1);
}

pub(crate) fn set_clients(version: &str, count: usize) {
    #[allow(clippy::cast_precision_loss)]
    gauge!(XDS_CLIENTS, "version" => version.to_owned()).set(count as f64);
}

pub(crate) fn record_push(type_url: &str, elapsed: Duration, bytes: usize) {
    let label = type_label(type_url);
    counter!(PUSHES, "type" => label.clone()).increment(1);
    histogram!(PUSH_TIME, "type" => label.clone()).record(elapsed.as_secs_f64());
    // Istio labels the size by the full type URL; unknown ones share the bounded label.
    let full =
        if label == type_url || metric_type(type_url) != type_url { type_url.to_owned() } else { label };
    #[allow(clippy::cast_precision_loss)]
    histogram!(CONFIG_SIZE, "type" => full).record(bytes as f64);
}

pub(crate) fn record_send_time(elapsed: Duration) {
    histogram!(SEND_TIME).record(elapsed.as_secs_f64());
}

pub(crate) fn record_send_error(type_url: &str) {
    counter!(PUSHES, "type" => format!("{}_senderr", type_label(type_url))).increment(1);
}

pub(crate) fn record_reject(type_url: &str) {
    counter!(REJECTS, "type" => type_label(type_url)).increment(1);
}

pub(crate) fn record_expired_nonce(type_url: &str) {
    counter!(EXPIRED_NONCE, "type" => type_label(type_url)).increment(1);
}

pub(crate) fn record_convergence(elapsed: Duration) {
    histogram!(CONVERGENCE).record(elapsed.as_secs_f64());
}

/// Counts one `pilot_total_xds_internal_errors` (a resource or generation the engine, or the REST-JSON
/// path, could not send).
pub fn record_internal_error() {
    counter!(INTERNAL_ERRORS).increment(1);
}
