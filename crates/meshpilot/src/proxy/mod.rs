//! `meshpilot proxy-status` and `meshpilot proxy-config`: istioctl's daily debugging verbs, reading a
//! running control plane's debug endpoints (`/debug/proxystatusz`, `/debug/config_dump?proxyID=`)
//! through [`crate::debug_client`]. Unlike istioctl, nothing is read from Envoy's admin port: both
//! show the control plane's view of each proxy (what it sent, what was ACKed or NACKed, and what it
//! would send now).

pub mod config;
pub mod status;
pub mod table;

use std::process::ExitCode;

use serde_json::Value;

use crate::debug_client::{self, DebugError};

/// `-o` of both verbs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Aligned columns (istioctl's default).
    #[value(alias = "table")]
    Short,
    /// Indented JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Why a verb failed; printed as `Error: …` with exit status 1.
#[derive(Debug, thiserror::Error)]
pub enum VerbError {
    /// The control plane could not be read.
    #[error(transparent)]
    Debug(#[from] DebugError),
    /// No connected proxy is named by the argument.
    #[error("no connected proxy matches {wanted:?}{}", hint(.close))]
    UnknownProxy {
        /// The argument.
        wanted: String,
        /// Proxy ids that look alike (at most 5).
        close: Vec<String>,
    },
    /// The argument names several proxies where one is needed.
    #[error("{wanted:?} matches several proxies: {}; name one", .matches.join(", "))]
    Ambiguous {
        /// The argument.
        wanted: String,
        /// The proxy ids matched.
        matches: Vec<String>,
    },
    /// The answer lacks what the verb needs (an older control plane, or nothing to show).
    #[error("{0}")]
    Missing(String),
}

fn hint(close: &[String]) -> String {
    if close.is_empty() {
        " (see `meshpilot proxy-status` for the connected proxies)".to_owned()
    } else {
        format!("; close matches: {}", close.join(", "))
    }
}

/// Prints `result`'s text on stdout, or its error on stderr; exit status 0 or 1.
pub fn finish(result: Result<String, VerbError>) -> ExitCode {
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("Error: {err}");
            ExitCode::from(1)
        }
    }
}

/// `value` as indented JSON or YAML text (ending in a newline).
pub fn machine_readable(value: &Value, output: Output) -> Result<String, VerbError> {
    match output {
        Output::Yaml => {
            serde_saphyr::to_string(value).map_err(|e| VerbError::Missing(format!("cannot write YAML: {e}")))
        }
        _ => Ok(format!("{}\n", serde_json::to_string_pretty(value).unwrap_or_default())),
    }
}

/// The `/debug/proxystatusz` answer of `addr`.
pub fn fetch_status(addr: &str) -> Result<Value, VerbError> {
    let v = debug_client::get_json(addr, "/debug/proxystatusz")?;
    if v.get("proxies").is_some_and(Value::is_array) {
        Ok(v)
    } else {
        Err(VerbError::Missing(format!(
            "{} has no proxies list (is it a meshpilot control plane?)",
            debug_client::url(addr, "/debug/proxystatusz")
        )))
    }
}

/// The proxies of a `/debug/proxystatusz` answer that `wanted` names: istioctl's
/// `[<type>/]<name>[.<namespace>]` (a `pod/` prefix is dropped; `namespace` is appended to a name
/// without a dot). Exact proxy id or connection id matches win; else every proxy whose connection
/// id contains it (istioctl's substring match). None is [`VerbError::UnknownProxy`] with close
/// matches.
pub fn select<'a>(
    status: &'a Value,
    wanted: &str,
    namespace: Option<&str>,
) -> Result<Vec<&'a Value>, VerbError> {
    let proxies: Vec<&Value> = status["proxies"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    let mut name = wanted.strip_prefix("pod/").unwrap_or(wanted).to_owned();
    if let Some(ns) = namespace.filter(|_| !name.contains('.')) {
        name = format!("{name}.{ns}");
    }
    let id = |p: &Value| p["proxy"].as_str().unwrap_or_default().to_owned();
    let conn = |p: &Value| p["connectionId"].as_str().unwrap_or_default().to_owned();
    let exact: Vec<&Value> = proxies.iter().copied().filter(|p| id(p) == name || conn(p) == name).collect();
    if !exact.is_empty() {
        return Ok(exact);
    }
    let partial: Vec<&Value> =
        proxies.iter().copied().filter(|p| !name.is_empty() && conn(p).contains(&name)).collect();
    if !partial.is_empty() {
        return Ok(partial);
    }
    let ids: Vec<String> = proxies.iter().map(|p| id(p)).collect();
    Err(VerbError::UnknownProxy { wanted: wanted.to_owned(), close: close_matches(&name, &ids) })
}

/// Up to 5 of `candidates` that look like `wanted`: same pod name before the first dot, or within an
/// edit distance of a third of its length (at least 2), closest first.
pub fn close_matches(wanted: &str, candidates: &[String]) -> Vec<String> {
    let head = |s: &str| s.split('.').next().unwrap_or_default().to_owned();
    let limit = (wanted.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &String)> = candidates
        .iter()
        .filter_map(|c| {
            let d = edit_distance(wanted, c).min(edit_distance(&head(wanted), &head(c)));
            (d <= limit || (!head(wanted).is_empty() && c.starts_with(&head(wanted)))).then_some((d, c))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(5).map(|(_, c)| c.clone()).collect()
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status() -> Value {
        json!({"proxies": [
            {"proxy": "reviews-v1.default", "connectionId": "reviews-v1.default-1"},
            {"proxy": "reviews-v2.default", "connectionId": "reviews-v2.default-2"},
            {"proxy": "istio-ingressgateway-1.istio-system", "connectionId": "istio-ingressgateway-1.istio-system-3"},
        ]})
    }

    fn ids(v: Vec<&Value>) -> Vec<&str> {
        v.into_iter().map(|p| p["proxy"].as_str().unwrap()).collect()
    }

    #[test]
    fn selects_exact_then_substring() {
        let s = status();
        assert_eq!(ids(select(&s, "reviews-v1.default", None).unwrap()), ["reviews-v1.default"]);
        assert_eq!(ids(select(&s, "pod/reviews-v2", Some("default")).unwrap()), ["reviews-v2.default"]);
        assert_eq!(ids(select(&s, "reviews", None).unwrap()), ["reviews-v1.default", "reviews-v2.default"]);
        assert_eq!(ids(select(&s, "reviews-v1.default-1", None).unwrap()), ["reviews-v1.default"]);
    }

    #[test]
    fn unknown_proxy_lists_close_matches() {
        let err = select(&status(), "reviews-v3.default", None).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("no connected proxy matches \"reviews-v3.default\"; close matches: "),
            "{text}"
        );
        assert!(text.contains("reviews-v1.default") && text.contains("reviews-v2.default"), "{text}");
        assert!(!text.contains("ingressgateway"), "{text}");
        let err = select(&status(), "zzzz", None).unwrap_err();
        assert!(err.to_string().contains("see `meshpilot proxy-status`"), "{err}");
    }

    #[test]
    fn machine_readable_json_and_yaml() {
        let v = json!({"proxies": [{"proxy": "a.ns", "types": {}}]});
        let text = machine_readable(&v, Output::Json).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
        let yaml = machine_readable(&v, Output::Yaml).unwrap();
        assert!(yaml.contains("proxies:") && yaml.contains("proxy: a.ns"), "{yaml}");
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
