//! CORS policies (Istio's `TranslateCORSPolicy`) as the CORS filter's per-route config.

use api::networking::virtual_service::{CorsPolicy as IstioCors, cors_policy::UnmatchedPreflights};
use envoy_types::pb::{
    envoy::{
        config::core::v3::RuntimeFractionalPercent,
        extensions::filters::http::cors::v3::CorsPolicy,
        r#type::matcher::v3::{StringMatcher, string_matcher},
    },
    google::protobuf::BoolValue,
};
use model::{ConfigKey, Finding, Severity};

use super::{
    CORS_FILTER, Prov, actions::hundredths, finding, matches::envoy_string_match, string_match_path,
};

/// Istio's `TranslateCORSPolicy`.
pub(super) fn cors_config(
    c: &IstioCors,
    at: &str,
    prov: &mut Prov,
    key: &ConfigKey,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> CorsPolicy {
    let base = format!("typed_per_filter_config[{CORS_FILTER}]");
    let mut out = CorsPolicy {
        forward_not_matching_preflights: Some(BoolValue {
            value: c.unmatched_preflights != UnmatchedPreflights::Ignore as i32,
        }),
        ..Default::default()
    };
    if !c.allow_origins.is_empty() {
        for (k, sm) in c.allow_origins.iter().enumerate() {
            let path = format!("{at}.allowOrigins[{k}]");
            match envoy_string_match(sm) {
                Some(m) => {
                    prov.add(|| {
                        (
                            format!(
                                "{base}.allow_origin_string_match[{}]",
                                out.allow_origin_string_match.len()
                            ),
                            string_match_path(&path, sm),
                        )
                    });
                    out.allow_origin_string_match.push(m);
                }
                None => findings.push(finding(
                    Severity::Unsupported,
                    key,
                    path,
                    resource,
                    "an origin without `exact`, `prefix` or `regex` matches nothing; not translated",
                )),
            }
        }
    } else {
        for (k, origin) in c.allow_origin.iter().enumerate() {
            prov.add(|| (format!("{base}.allow_origin_string_match[{k}]"), format!("{at}.allowOrigin[{k}]")));
            out.allow_origin_string_match.push(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact(origin.clone())),
                ..Default::default()
            });
        }
    }
    out.filter_enabled =
        Some(RuntimeFractionalPercent { default_value: Some(hundredths(100)), ..Default::default() });
    out.allow_credentials = c.allow_credentials.map(|value| BoolValue { value });
    out.allow_headers = c.allow_headers.join(",");
    out.allow_methods = c.allow_methods.join(",");
    out.expose_headers = c.expose_headers.join(",");
    if let Some(max_age) = &c.max_age {
        out.max_age = max_age.seconds.to_string();
    }
    for (field, istio) in [
        ("allow_headers", "allowHeaders"),
        ("allow_methods", "allowMethods"),
        ("expose_headers", "exposeHeaders"),
        ("max_age", "maxAge"),
    ] {
        prov.add(|| (format!("{base}.{field}"), format!("{at}.{istio}")));
    }
    prov.add(|| (base, at.to_owned()));
    out
}
