//! Metric names of the JWKS resolver (Istio's, from `jwks_resolver.go`).

/// Counter `pilot_jwks_resolver_network_fetch_success_total`: HTTP fetches (key sets and OpenID
/// discovery documents) that succeeded.
pub const FETCH_SUCCESS: &str = "pilot_jwks_resolver_network_fetch_success_total";
/// Counter `pilot_jwks_resolver_network_fetch_fail_total`: HTTP fetches that failed (connection,
/// timeout, non-2xx status, body not a key set).
pub const FETCH_FAIL: &str = "pilot_jwks_resolver_network_fetch_fail_total";

/// Registers descriptions with the installed recorder.
pub fn describe() {
    metrics::describe_counter!(
        FETCH_SUCCESS,
        "Total number of successfully network fetch by pilot jwks resolver"
    );
    metrics::describe_counter!(FETCH_FAIL, "Total number of failed network fetch by pilot jwks resolver");
}
