//! VirtualService delegation: a root VirtualService's `http[].delegate` replaced by the delegate's
//! HTTP routes, merged with the root route (Istio's `MergeHTTPRoutes`, `pilot/pkg/model/virtualservice.go`
//! and `virtualservice_controller.go`).
//!
//! - Each delegate route keeps its own settings; unset ones (rewrite, direct response, timeout,
//!   retries, fault, mirrors, CORS, headers) come from the root route; names join as `root-delegate`.
//! - Matches: with matches on both sides, every delegate match must fit inside (not conflict with) some
//!   root match and is merged with each root match it fits; a delegate route with a match that fits no
//!   root match is dropped (reported). Conflict rules are Istio's `hasConflict`.
//! - Destination hosts and match gateways of the delegate are qualified in the delegate's namespace
//!   (Istio resolves short names per VirtualService before merging).
//! - The delegate must be exported to the root's namespace; one level only (a delegate's own
//!   `delegate` routes are dropped), as Istio.

use std::collections::HashMap;

use super::virtual_service::resolve_gateway_name;
use crate::{Config, ConfigKey, Finding, Severity, host};
use api::{
    Spec,
    networking::{
        VirtualService,
        virtual_service::{HttpMatchRequest, HttpRoute, StringMatch},
    },
};

fn conflict_string(root: Option<&StringMatch>, leaf: Option<&StringMatch>) -> bool {
    let (Some(root), Some(leaf)) = (root, leaf) else { return false };
    let set = |s: &Option<String>| s.as_deref().is_some_and(|v| !v.is_empty());
    if set(&root.regex) && (set(&leaf.regex) || set(&leaf.prefix) || set(&leaf.exact)) {
        return true;
    }
    if set(&leaf.regex) && (set(&root.regex) || set(&root.prefix) || set(&root.exact)) {
        return true;
    }
    if let Some(exact) = root.exact.as_deref().filter(|e| !e.is_empty()) {
        return set(&leaf.prefix) || leaf.exact.as_deref() != Some(exact);
    }
    if let Some(prefix) = root.prefix.as_deref().filter(|p| !p.is_empty()) {
        if let Some(lp) = leaf.prefix.as_deref().filter(|p| !p.is_empty()) {
            return !lp.starts_with(prefix);
        }
        if let Some(le) = leaf.exact.as_deref().filter(|e| !e.is_empty()) {
            return !le.starts_with(prefix);
        }
    }
    true
}

/// Istio's `hasConflict`: the delegate match asks for something outside the root match.
fn has_conflict(root: &HttpMatchRequest, leaf: &HttpMatchRequest) -> bool {
    let pairs = [
        (&root.uri, &leaf.uri),
        (&root.scheme, &leaf.scheme),
        (&root.method, &leaf.method),
        (&root.authority, &leaf.authority),
    ];
    if pairs.iter().any(|(r, l)| conflict_string(r.as_ref(), l.as_ref())) {
        return true;
    }
    if leaf.headers.iter().any(|(k, v)| conflict_string(root.headers.get(k), Some(v)))
        || leaf.without_headers.iter().any(|(k, v)| conflict_string(root.without_headers.get(k), Some(v)))
        || leaf.query_params.iter().any(|(k, v)| conflict_string(root.query_params.get(k), Some(v)))
    {
        return true;
    }
    if root.ignore_uri_case != leaf.ignore_uri_case {
        return true;
    }
    if root.port > 0 && leaf.port > 0 && root.port != leaf.port {
        return true;
    }
    if !root.source_namespace.is_empty() && leaf.source_namespace != root.source_namespace {
        return true;
    }
    if leaf.source_labels.iter().any(|(k, v)| root.source_labels.get(k).is_some_and(|r| r != v)) {
        return true;
    }
    if !root.gateways.is_empty() && !leaf.gateways.is_empty() {
        return root.gateways.len() < leaf.gateways.len()
            || leaf.gateways.iter().any(|g| !root.gateways.contains(g));
    }
    false
}

fn join_names(root: &str, leaf: &str) -> String {
    match (root.is_empty(), leaf.is_empty()) {
        (_, true) => root.to_string(),
        (true, false) => leaf.to_string(),
        (false, false) => format!("{root}-{leaf}"),
    }
}

/// Istio's `mergeHTTPMatchRequest`: the delegate's conditions, the root's where the delegate has none.
fn merge_match(root: &HttpMatchRequest, leaf: &HttpMatchRequest) -> HttpMatchRequest {
    let mut out = leaf.clone();
    out.name = join_names(&root.name, &leaf.name);
    for (o, r) in [
        (&mut out.uri, &root.uri),
        (&mut out.scheme, &root.scheme),
        (&mut out.method, &root.method),
        (&mut out.authority, &root.authority),
    ] {
        if o.is_none() {
            o.clone_from(r);
        }
    }
    let merge = |r: &std::collections::BTreeMap<String, StringMatch>,
                 l: &mut std::collections::BTreeMap<String, StringMatch>| {
        for (k, v) in r {
            l.entry(k.clone()).or_insert_with(|| v.clone());
        }
    };
    merge(&root.headers, &mut out.headers);
    merge(&root.without_headers, &mut out.without_headers);
    merge(&root.query_params, &mut out.query_params);
    if out.port == 0 {
        out.port = root.port;
    }
    for (k, v) in &root.source_labels {
        out.source_labels.entry(k.clone()).or_insert_with(|| v.clone());
    }
    if out.source_namespace.is_empty() {
        out.source_namespace.clone_from(&root.source_namespace);
    }
    if out.gateways.is_empty() {
        out.gateways.clone_from(&root.gateways);
    }
    if out.stat_prefix.is_empty() {
        out.stat_prefix.clone_from(&root.stat_prefix);
    }
    out
}

/// Istio's `mergeHTTPMatchRequests`; `None` on conflict.
fn merge_matches(root: &[HttpMatchRequest], leaf: &[HttpMatchRequest]) -> Option<Vec<HttpMatchRequest>> {
    if root.is_empty() {
        return Some(leaf.to_vec());
    }
    if leaf.is_empty() {
        return Some(root.to_vec());
    }
    let mut out = Vec::new();
    for l in leaf {
        let before = out.len();
        out.extend(root.iter().filter(|r| !has_conflict(r, l)).map(|r| merge_match(r, l)));
        if out.len() == before {
            return None;
        }
    }
    Some(out)
}

/// Istio's `mergeHTTPRoute`; `None` when the matches conflict.
fn merge_route(root: &HttpRoute, mut leaf: HttpRoute) -> Option<HttpRoute> {
    leaf.r#match = merge_matches(&root.r#match, &leaf.r#match)?;
    leaf.name = join_names(&root.name, &leaf.name);
    if leaf.rewrite.is_none() {
        leaf.rewrite.clone_from(&root.rewrite);
    }
    if leaf.direct_response.is_none() {
        leaf.direct_response.clone_from(&root.direct_response);
    }
    if leaf.timeout.is_none() {
        leaf.timeout = root.timeout;
    }
    if leaf.retries.is_none() {
        leaf.retries.clone_from(&root.retries);
    }
    if leaf.fault.is_none() {
        leaf.fault.clone_from(&root.fault);
    }
    if leaf.mirror.is_none() {
        leaf.mirror.clone_from(&root.mirror);
    }
    if leaf.mirror_percent.is_none() {
        leaf.mirror_percent = root.mirror_percent;
    }
    if leaf.mirror_percentage.is_none() {
        leaf.mirror_percentage.clone_from(&root.mirror_percentage);
    }
    if leaf.cors_policy.is_none() {
        leaf.cors_policy.clone_from(&root.cors_policy);
    }
    if leaf.mirrors.is_empty() {
        leaf.mirrors.clone_from(&root.mirrors);
    }
    if leaf.headers.is_none() {
        leaf.headers.clone_from(&root.headers);
    }
    Some(leaf)
}

/// Qualifies the delegate route's hosts and gateways in its own namespace.
fn qualify(route: &mut HttpRoute, namespace: &str, suffix: &str) {
    let q = |h: &mut String| *h = host::resolve_short_name(&h.to_ascii_lowercase(), namespace, suffix);
    for d in route.route.iter_mut().filter_map(|r| r.destination.as_mut()) {
        q(&mut d.host);
    }
    if let Some(m) = route.mirror.as_mut() {
        q(&mut m.host);
    }
    for m in route.mirrors.iter_mut().filter_map(|m| m.destination.as_mut()) {
        q(&mut m.host);
    }
    for m in &mut route.r#match {
        for g in &mut m.gateways {
            if g != super::MESH_GATEWAY {
                *g = resolve_gateway_name(g, namespace);
            }
        }
    }
}

/// What the merge needs to look up delegates.
pub(crate) struct Delegates<'a> {
    /// VirtualServices by (namespace, name).
    pub by_key: HashMap<(&'a str, &'a str), &'a Config>,
    /// `true` if the delegate (namespace, exportTo) is visible from the root's namespace.
    pub visible: &'a dyn Fn(&Config, &str) -> bool,
    /// Domain suffix for short names.
    pub suffix: &'a str,
}

fn dropped(key: &ConfigKey, path: String, message: String) -> Finding {
    Finding { severity: Severity::Dropped, config: Some(key.clone()), path, resource: String::new(), message }
}

/// The root VirtualService with its delegate routes merged in, or `None` when it delegates nothing.
pub(crate) fn merge(
    root: &Config,
    vs: &VirtualService,
    delegates: &Delegates<'_>,
    findings: &mut Vec<Finding>,
) -> Option<VirtualService> {
    if vs.http.iter().all(|h| h.delegate.is_none()) {
        return None;
    }
    let key = root.key();
    let root_ns = root.meta.namespace.as_str();
    let mut out = vs.clone();
    out.http = Vec::new();
    for (i, http) in vs.http.iter().enumerate() {
        let Some(d) = &http.delegate else {
            out.http.push(http.clone());
            continue;
        };
        let path = format!("spec.http[{i}].delegate");
        let ns = if d.namespace.is_empty() { root_ns } else { d.namespace.as_str() };
        let Some(dc) = delegates.by_key.get(&(ns, d.name.as_str())) else {
            findings.push(dropped(
                &key,
                path,
                format!("delegate VirtualService {ns}/{} not found; route left out", d.name),
            ));
            continue;
        };
        let Spec::VirtualService(dvs) = &dc.spec else { continue };
        if !(delegates.visible)(dc, root_ns) {
            findings.push(dropped(
                &key,
                path,
                format!(
                    "delegate VirtualService {ns}/{} is not exported to {root_ns}; route left out",
                    d.name
                ),
            ));
            continue;
        }
        if !dvs.hosts.is_empty() {
            findings.push(dropped(
                &key,
                path,
                format!("delegate VirtualService {ns}/{} has hosts; only VirtualServices without hosts can be delegates", d.name),
            ));
            continue;
        }
        for (j, sub) in dvs.http.iter().enumerate() {
            if sub.delegate.is_some() {
                findings.push(dropped(
                    &dc.key(),
                    format!("spec.http[{j}].delegate"),
                    "a delegate cannot delegate again (one level only); route left out".to_string(),
                ));
                continue;
            }
            let mut sub = sub.clone();
            qualify(&mut sub, ns, delegates.suffix);
            match merge_route(http, sub) {
                Some(merged) => out.http.push(merged),
                None => findings.push(dropped(
                    &dc.key(),
                    format!("spec.http[{j}].match"),
                    format!("conflicts with every match of {key} spec.http[{i}]; route left out"),
                )),
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(p: &str) -> Option<StringMatch> {
        Some(StringMatch { prefix: Some(p.to_string()), ..Default::default() })
    }

    fn exact(p: &str) -> Option<StringMatch> {
        Some(StringMatch { exact: Some(p.to_string()), ..Default::default() })
    }

    #[test]
    fn uri_conflicts_as_istio() {
        assert!(!conflict_string(prefix("/a").as_ref(), prefix("/a/b").as_ref()));
        assert!(conflict_string(prefix("/a/b").as_ref(), prefix("/a").as_ref()));
        assert!(!conflict_string(prefix("/a").as_ref(), exact("/a/x").as_ref()));
        assert!(conflict_string(exact("/a").as_ref(), prefix("/a").as_ref()));
        assert!(!conflict_string(exact("/a").as_ref(), exact("/a").as_ref()));
        assert!(!conflict_string(None, exact("/a").as_ref()));
    }

    #[test]
    fn routes_merge_matches_and_settings() {
        let root = HttpRoute {
            name: "root".into(),
            r#match: vec![HttpMatchRequest { uri: prefix("/api"), port: 80, ..Default::default() }],
            timeout: Some(api::wkt::Duration::from_millis(2000)),
            ..Default::default()
        };
        let leaf = HttpRoute {
            name: "v1".into(),
            r#match: vec![HttpMatchRequest { uri: prefix("/api/v1"), ..Default::default() }],
            ..Default::default()
        };
        let merged = merge_route(&root, leaf).unwrap();
        assert_eq!(merged.name, "root-v1");
        assert_eq!(merged.r#match[0].uri, prefix("/api/v1"));
        assert_eq!(merged.r#match[0].port, 80);
        assert_eq!(merged.timeout.unwrap().seconds, 2);
        let outside = HttpRoute {
            r#match: vec![HttpMatchRequest { uri: prefix("/other"), ..Default::default() }],
            ..Default::default()
        };
        assert!(merge_route(&root, outside).is_none());
    }
}
