//! Fault injection (Istio's `TranslateFault`): delays and aborts as the fault filter's per-route config.

use api::networking::virtual_service::HttpFaultInjection;
use envoy_types::pb::envoy::extensions::filters::{
    common::fault::v3::{FaultDelay, fault_delay::FaultDelaySecifier},
    http::fault::v3::{FaultAbort, HttpFault, fault_abort},
};
use model::{ConfigKey, Finding, Severity};
use validation::common::grpc_status_code;

use super::{
    actions::{envoy_duration, hundredths, millionths},
    finding,
};

/// Istio's `TranslateFault`; `None` when neither a delay nor an abort can be translated.
pub(super) fn fault_config(
    f: &HttpFaultInjection,
    at: &str,
    key: &ConfigKey,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> Option<HttpFault> {
    let mut out = HttpFault::default();
    if let Some(d) = &f.delay {
        let percentage = match &d.percentage {
            Some(p) => millionths(p.value),
            None => hundredths(d.percent as u32),
        };
        if let Some(fixed) = &d.fixed_delay {
            out.delay = Some(FaultDelay {
                percentage: Some(percentage),
                fault_delay_secifier: Some(FaultDelaySecifier::FixedDelay(envoy_duration(fixed))),
            });
        } else {
            let (path, what) = if d.exponential_delay.is_some() {
                (
                    format!("{at}.delay.exponentialDelay"),
                    "exponential delays are not implemented (nor by Istio)",
                )
            } else {
                (format!("{at}.delay"), "a delay without `fixedDelay` has no delay")
            };
            findings.push(finding(
                Severity::Unsupported,
                key,
                path,
                resource,
                format!("{what}; the delay is not translated"),
            ));
        }
    }
    if let Some(a) = &f.abort {
        let percentage = a.percentage.as_ref().map(|p| millionths(p.value));
        let error = if let Some(status) = a.http_status {
            Ok(fault_abort::ErrorType::HttpStatus(status as u32))
        } else if let Some(name) = &a.grpc_status {
            grpc_status_code(name)
                .map(fault_abort::ErrorType::GrpcStatus)
                .ok_or_else(|| (format!("{at}.abort.grpcStatus"), format!("unknown gRPC status {name:?}")))
        } else if a.http2_error.is_some() {
            Err((
                format!("{at}.abort.http2Error"),
                "HTTP/2 error aborts are not implemented (nor by Istio)".to_owned(),
            ))
        } else {
            Err((
                format!("{at}.abort"),
                "an abort without `httpStatus` or `grpcStatus` has no error".to_owned(),
            ))
        };
        match error {
            Ok(error_type) => {
                out.abort =
                    Some(FaultAbort { percentage, error_type: Some(error_type), ..Default::default() })
            }
            Err((path, what)) => findings.push(finding(
                Severity::Unsupported,
                key,
                path,
                resource,
                format!("{what}; the abort is not translated"),
            )),
        }
    }
    if out.delay.is_none() && out.abort.is_none() {
        return None;
    }
    Some(out)
}
