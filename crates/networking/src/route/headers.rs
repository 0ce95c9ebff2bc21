//! Header operations: Istio's `TranslateHeadersOperations` and the headers routes may not change.

use api::networking::virtual_service::Headers;
use envoy_types::pb::envoy::config::{
    core::v3::{HeaderValue, HeaderValueOption, header_value_option::HeaderAppendAction},
    route::v3::Route,
};
use model::{ConfigKey, Finding, Severity};
use validation::common::{is_authority_header, is_internal_header};

use super::{Prov, finding};

/// Istio's `TranslateHeadersOperations`, with the Istio path of every entry.
#[derive(Default)]
pub(super) struct HeaderOps {
    pub(super) request_add: Vec<(HeaderValueOption, String)>,
    pub(super) request_remove: Vec<(String, String)>,
    pub(super) response_add: Vec<(HeaderValueOption, String)>,
    pub(super) response_remove: Vec<(String, String)>,
    /// The authority set (or added) on the request, with its path: a host rewrite.
    pub(super) authority: Option<(String, String)>,
}

impl HeaderOps {
    /// Appends the operations to a route's header lists; returns the authority rewrite.
    pub(super) fn apply_to_route(self, route: &mut Route, prov: &mut Prov) -> Option<(String, String)> {
        extend(&mut route.request_headers_to_add, self.request_add, "request_headers_to_add", prov);
        extend(&mut route.request_headers_to_remove, self.request_remove, "request_headers_to_remove", prov);
        extend(&mut route.response_headers_to_add, self.response_add, "response_headers_to_add", prov);
        extend(
            &mut route.response_headers_to_remove,
            self.response_remove,
            "response_headers_to_remove",
            prov,
        );
        self.authority
    }
}

/// Appends `items` to `list`, recording `field[index]` → Istio path for each.
pub(super) fn extend<T>(list: &mut Vec<T>, items: Vec<(T, String)>, field: &str, prov: &mut Prov) {
    for (item, path) in items {
        prov.add(|| (format!("{field}[{}]", list.len()), path));
        list.push(item);
    }
}

pub(super) fn header_operations(
    headers: &Headers,
    at: &str,
    key: &ConfigKey,
    resource: &str,
    findings: &mut Vec<Finding>,
) -> HeaderOps {
    let mut ops = HeaderOps::default();
    let mut not_modifiable = |path: String, name: &str| {
        findings.push(finding(
            Severity::Unsupported,
            key,
            path,
            resource,
            format!(
                "Envoy does not let routes change `:`-prefixed headers or Host; `{name}` is not translated"
            ),
        ));
    };
    if let Some(req) = &headers.request {
        let mut set_authority = None;
        let mut add_authority = None;
        for (field, map, action, authority) in [
            ("set", &req.set, HeaderAppendAction::OverwriteIfExistsOrAdd, &mut set_authority),
            ("add", &req.add, HeaderAppendAction::AppendIfExistsOrAdd, &mut add_authority),
        ] {
            for (name, value) in map {
                let path = format!("{at}.request.{field}.{name}");
                if is_authority_header(name) {
                    *authority = Some((value.clone(), path));
                } else if is_internal_header(name) {
                    not_modifiable(path, name);
                } else {
                    ops.request_add.push((header_value_option(name, value, action), path));
                }
            }
        }
        ops.authority = set_authority.or(add_authority);
        for (n, name) in req.remove.iter().enumerate() {
            let path = format!("{at}.request.remove[{n}]");
            if is_internal_header(name) {
                not_modifiable(path, name);
            } else {
                ops.request_remove.push((name.clone(), path));
            }
        }
    }
    if let Some(resp) = &headers.response {
        for (field, map, action) in [
            ("set", &resp.set, HeaderAppendAction::OverwriteIfExistsOrAdd),
            ("add", &resp.add, HeaderAppendAction::AppendIfExistsOrAdd),
        ] {
            for (name, value) in map {
                let path = format!("{at}.response.{field}.{name}");
                if is_internal_header(name) {
                    not_modifiable(path, name);
                } else {
                    ops.response_add.push((header_value_option(name, value, action), path));
                }
            }
        }
        for (n, name) in resp.remove.iter().enumerate() {
            let path = format!("{at}.response.remove[{n}]");
            if is_internal_header(name) {
                not_modifiable(path, name);
            } else {
                ops.response_remove.push((name.clone(), path));
            }
        }
    }
    ops
}

fn header_value_option(name: &str, value: &str, action: HeaderAppendAction) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue { key: name.to_owned(), value: value.to_owned(), ..Default::default() }),
        append_action: action as i32,
        ..Default::default()
    }
}
