//! Field presence: the rules of Istio's CRDs that tell a field written empty from a field left out.
//!
//! Istio's types are proto3: `imagePullSecret: ""` decodes to the same value as no `imagePullSecret`
//! at all, and `portLevelMtls: {}` to the same value as no `portLevelMtls`. Istio's Go validation (the
//! webhook, `istioctl validate`) therefore cannot see the difference, but the Kubernetes API server
//! checks the CRD's OpenAPI schema and CEL rules on the object as written, before the webhook, and those
//! rules do see it:
//!
//! - `minLength: 1` on an optional string rejects `""` and accepts the field left out
//!   (`spec.imagePullSecret: Invalid value: "": spec.imagePullSecret in body should be at least 1 chars
//!   long`);
//! - CEL `has(self.field)` is true for a field written with an empty value (`portLevelMtls: {}`,
//!   `targetRefs: []`, `credentialName: ""`), so "only one of …" and "… requires selector" rules fire on
//!   it.
//!
//! [`Presence`] is what the reader saw: every field written with an empty value (empty string, mapping
//! or list), found on the document tree by [`Presence::from_spec`] before typed decoding loses it.
//! [`check`] applies the CRD rules above that need it (rules from `crd-all.gen.yaml` of Istio's
//! `manifests/charts/base/files`, the messages are the API server's). Objects that never were text
//! (MCP resources, protobuf) carry no presence: [`Presence::default`] adds no finding, as in istiod.

use std::collections::BTreeMap;

use api::{
    Spec,
    de::lower_camel,
    extensions::wasm_plugin::{EnvValueSource, VmConfig},
    networking::{gateway::ServerTlsSettings, service_entry::Resolution},
    yaml::{Node, Value},
};

use crate::Report;

/// What kind of empty value a field was written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Empty {
    /// `""`.
    String,
    /// `{}`.
    Map,
    /// `[]`.
    List,
}

/// The fields of one object's `spec` that were written with an empty value.
///
/// Keys are field paths from the document root as validation findings write them
/// (`spec.jwtRules[0].jwksUri`), with field names in lowerCamelCase (a snake_case name, which the reader
/// also accepts, is stored camel-cased so that rules need only one spelling); values as [`Empty`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Presence {
    empties: BTreeMap<String, (String, Empty)>,
}

impl Presence {
    /// Collects the empty values under `spec` (the node of the object's `spec` field).
    pub fn from_spec(spec: &Node) -> Presence {
        let mut presence = Presence::default();
        presence.collect("spec", "spec", spec);
        presence
    }

    fn collect(&mut self, written: &str, normalized: &str, node: &Node) {
        let empty = match &node.value {
            Value::String(s) if s.is_empty() => Some(Empty::String),
            Value::Map(entries) if entries.is_empty() => Some(Empty::Map),
            Value::Seq(items) if items.is_empty() => Some(Empty::List),
            _ => None,
        };
        if let Some(empty) = empty {
            self.empties.insert(normalized.to_owned(), (written.to_owned(), empty));
            return;
        }
        match &node.value {
            Value::Map(entries) => {
                for (key, child) in entries {
                    let written = format!("{written}.{}", key.name);
                    let normalized = format!("{normalized}.{}", lower_camel(&key.name));
                    self.collect(&written, &normalized, child);
                }
            }
            Value::Seq(items) => {
                for (i, child) in items.iter().enumerate() {
                    self.collect(&format!("{written}[{i}]"), &format!("{normalized}[{i}]"), child);
                }
            }
            _ => {}
        }
    }

    /// How the field at `path` (lowerCamelCase names, e.g. `spec.portLevelMtls`) was written empty, if
    /// it was.
    pub fn empty_at(&self, path: &str) -> Option<Empty> {
        self.empties.get(path).map(|(_, empty)| *empty)
    }

    /// `true` when the field at `path` was written, empty: with a non-empty value, `has(field)` is
    /// already visible on the typed value.
    fn written_empty(&self, path: &str) -> bool {
        self.empty_at(path).is_some()
    }

    /// The empty strings: (path as written, normalized path).
    fn empty_strings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.empties
            .iter()
            .filter(|(_, (_, empty))| *empty == Empty::String)
            .map(|(normalized, (written, _))| (written.as_str(), normalized.as_str()))
    }
}

/// The optional string fields of each kind that the CRD gives `minLength: 1` (fields inside lists are
/// written `[]`, a mapping's keys `*`). Strings inside lists of strings (`audiences[]`) are not here:
/// an empty list item is visible on the typed value and checked by the kind's validator.
fn min_length_fields(spec: &Spec) -> &'static [&'static str] {
    const TARGET_REFS: [&str; 4] =
        ["spec.targetRef.kind", "spec.targetRef.name", "spec.targetRefs[].kind", "spec.targetRefs[].name"];
    match spec {
        Spec::WasmPlugin(_) => &[
            "spec.imagePullSecret",
            "spec.pluginName",
            "spec.url",
            "spec.vmConfig.env[].name",
            TARGET_REFS[0],
            TARGET_REFS[1],
            TARGET_REFS[2],
            TARGET_REFS[3],
        ],
        Spec::TrafficExtension(_) => &[
            "spec.lua.inlineCode",
            "spec.wasm.imagePullSecret",
            "spec.wasm.pluginName",
            "spec.wasm.url",
            "spec.wasm.vmConfig.env[].name",
            TARGET_REFS[2],
            TARGET_REFS[3],
        ],
        Spec::EnvoyFilter(_) => &[TARGET_REFS[2], TARGET_REFS[3]],
        Spec::AuthorizationPolicy(_) => &TARGET_REFS,
        Spec::RequestAuthentication(_) => &[
            "spec.jwtRules[].issuer",
            "spec.jwtRules[].jwksUri",
            "spec.jwtRules[].fromHeaders[].name",
            "spec.jwtRules[].outputClaimToHeaders[].claim",
            "spec.jwtRules[].outputClaimToHeaders[].header",
            TARGET_REFS[0],
            TARGET_REFS[1],
            TARGET_REFS[2],
            TARGET_REFS[3],
        ],
        Spec::Telemetry(_) => &[
            "spec.accessLogging[].providers[].name",
            "spec.metrics[].providers[].name",
            "spec.metrics[].overrides[].match.customMetric",
            "spec.tracing[].providers[].name",
            "spec.tracing[].customTags.*.environment.name",
            "spec.tracing[].customTags.*.formatter.value",
            "spec.tracing[].customTags.*.header.name",
            "spec.tracing[].customTags.*.literal.value",
            TARGET_REFS[0],
            TARGET_REFS[1],
            TARGET_REFS[2],
            TARGET_REFS[3],
        ],
        _ => &[],
    }
}

/// Does a concrete path (`spec.jwtRules[0].jwksUri`) match a pattern (`spec.jwtRules[].jwksUri`, `*`
/// standing for one mapping key)?
fn matches_pattern(path: &str, pattern: &str) -> bool {
    let mut concrete = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                concrete.push('[');
            }
            ']' => {
                in_index = false;
                concrete.push(']');
            }
            _ if in_index => {}
            _ => concrete.push(c),
        }
    }
    let mut segments = concrete.split('.');
    let mut wanted = pattern.split('.');
    loop {
        match (segments.next(), wanted.next()) {
            (None, None) => return true,
            (Some(_), Some("*")) => {}
            (Some(s), Some(w)) if s == w => {}
            _ => return false,
        }
    }
}

/// Applies the CRD rules that need presence to one object (see the module doc). Findings already made
/// by the kind's validator at the same path are not repeated.
pub fn check(spec: &Spec, presence: &Presence, report: &mut Report) {
    if presence.empties.is_empty() {
        return;
    }
    let add = |report: &mut Report, path: String, message: String| {
        if !report.errors.iter().any(|e| e.path == path) {
            report.error(path, message);
        }
    };
    let fields = min_length_fields(spec);
    for (written, normalized) in presence.empty_strings() {
        if fields.iter().any(|p| matches_pattern(normalized, p)) {
            add(
                report,
                written.to_owned(),
                format!("Invalid value: \"\": {written} in body should be at least 1 chars long"),
            );
        }
    }
    let one_of_selector = |report: &mut Report, has_selector: bool, has_target_ref: bool, message: &str| {
        let set = usize::from(has_selector)
            + usize::from(has_target_ref)
            + usize::from(presence.written_empty("spec.targetRefs"));
        if presence.written_empty("spec.targetRefs") && set > 1 {
            add(report, "spec".to_owned(), message.to_owned());
        }
    };
    const TARGET_REFS_OR_SELECTOR: &str = "only one of targetRefs or selector can be set";
    match spec {
        Spec::PeerAuthentication(s) => {
            let selector_labels = s.selector.as_ref().is_some_and(|sel| !sel.match_labels.is_empty());
            if presence.written_empty("spec.portLevelMtls") && !selector_labels {
                add(report, "spec".to_owned(), "portLevelMtls requires selector".to_owned());
            }
        }
        Spec::AuthorizationPolicy(s) => {
            one_of_selector(report, s.selector.is_some(), s.target_ref.is_some(), TARGET_REFS_OR_SELECTOR)
        }
        Spec::RequestAuthentication(s) => {
            one_of_selector(report, s.selector.is_some(), s.target_ref.is_some(), TARGET_REFS_OR_SELECTOR)
        }
        Spec::Telemetry(s) => {
            one_of_selector(report, s.selector.is_some(), s.target_ref.is_some(), TARGET_REFS_OR_SELECTOR)
        }
        Spec::WasmPlugin(s) => {
            one_of_selector(report, s.selector.is_some(), s.target_ref.is_some(), TARGET_REFS_OR_SELECTOR);
            env_values(&s.vm_config, "spec.vmConfig", presence, report);
        }
        Spec::TrafficExtension(s) => {
            one_of_selector(report, s.selector.is_some(), false, TARGET_REFS_OR_SELECTOR);
            if let Some(wasm) = &s.wasm {
                env_values(&wasm.vm_config, "spec.wasm.vmConfig", presence, report);
            }
        }
        Spec::EnvoyFilter(s) => one_of_selector(
            report,
            s.workload_selector.is_some(),
            false,
            "only one of targetRefs or workloadSelector can be set",
        ),
        Spec::ServiceEntry(s) if presence.written_empty("spec.endpoints") => {
            if s.workload_selector.is_some() {
                add(
                    report,
                    "spec".to_owned(),
                    "only one of WorkloadSelector or Endpoints can be set".to_owned(),
                );
            }
            if s.resolution == Resolution::None as i32 {
                add(report, "spec".to_owned(), "NONE mode cannot set endpoints".to_owned());
            }
        }
        Spec::Gateway(s) => {
            for (i, server) in s.servers.iter().enumerate() {
                if let Some(tls) = &server.tls {
                    server_tls(tls, &format!("spec.servers[{i}].tls"), presence, report);
                }
            }
        }
        Spec::Sidecar(s) => {
            for (i, ingress) in s.ingress.iter().enumerate() {
                if let Some(tls) = &ingress.tls {
                    server_tls(tls, &format!("spec.ingress[{i}].tls"), presence, report);
                }
            }
        }
        _ => {}
    }
    if let Spec::Telemetry(s) = spec {
        for (i, metrics) in s.metrics.iter().enumerate() {
            for (j, overrides) in metrics.overrides.iter().enumerate() {
                for (name, tag) in &overrides.tag_overrides {
                    let path = format!("spec.metrics[{i}].overrides[{j}].tagOverrides.{name}");
                    let remove = tag.operation
                        == api::telemetry::metrics_overrides::tag_override::Operation::Remove as i32;
                    if remove && presence.written_empty(&format!("{path}.value")) {
                        add(report, path, "value must not be set when operation is REMOVE".to_owned());
                    }
                }
            }
        }
    }
}

/// WasmPlugin / TrafficExtension `vmConfig.env[]`: `value: ""` with `valueFrom: HOST` (CEL
/// `(has(self.valueFrom) ? self.valueFrom : "") != "HOST" || !has(self.value)`).
fn env_values(vm: &Option<VmConfig>, path: &str, presence: &Presence, report: &mut Report) {
    let Some(vm) = vm else { return };
    for (i, env) in vm.env.iter().enumerate() {
        let value_path = format!("{path}.env[{i}].value");
        let host = env.value_from == EnvValueSource::Host as i32;
        if host && presence.written_empty(&value_path) && !report.errors.iter().any(|e| e.path == value_path)
        {
            report.error(value_path, "value may only be set when valueFrom is INLINE");
        }
    }
}

/// Gateway `servers[].tls` and Sidecar `ingress[].tls`: at most one of `credentialName`,
/// `credentialNames` and `tlsCertificates` (three CEL rules of the CRD, `has()` on each). Istio's
/// validator already rejects two of them set with values; what is left is a field written empty.
fn server_tls(tls: &ServerTlsSettings, path: &str, presence: &Presence, report: &mut Report) {
    let has = |field: &str, set: bool| set || presence.written_empty(&format!("{path}.{field}"));
    let credential_name = has("credentialName", !tls.credential_name.is_empty());
    let credential_names = has("credentialNames", !tls.credential_names.is_empty());
    let tls_certificates = has("tlsCertificates", !tls.tls_certificates.is_empty());
    for (a, b, message) in [
        (tls_certificates, credential_names, "only one of credentialNames or tlsCertificates can be set"),
        (credential_name, credential_names, "only one of credentialName or credentialNames can be set"),
        (credential_name, tls_certificates, "only one of credentialName or tlsCertificates can be set"),
    ] {
        if a && b && !report.errors.iter().any(|e| e.path == path) {
            report.error(path, message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::{Kind, yaml::parse_documents};

    /// The errors of a spec written as YAML, validated with the presence the reader saw and without it
    /// (as from protobuf).
    fn errors(kind: Kind, yaml: &str) -> (Vec<String>, Vec<String>) {
        let root = parse_documents(yaml).remove(0).expect("parses").root.expect("content");
        let (spec, unknown) = Spec::from_node(kind, Some(&root)).expect("decodes");
        assert!(unknown.is_empty(), "{unknown:?}");
        let meta = crate::testutil::meta("x", "default");
        let show = |r: Report| r.errors.iter().map(ToString::to_string).collect::<Vec<_>>();
        let presence = Presence::from_spec(&root);
        (show(crate::validate_with_presence(&meta, &spec, &presence)), show(crate::validate(&meta, &spec)))
    }

    /// Asserts that `want` is among the errors with presence and not among those without.
    fn fires(kind: Kind, yaml: &str, want: &str) {
        let (with, without) = errors(kind, yaml);
        assert!(with.iter().any(|e| e == want), "{yaml}: expected {want:?} in {with:?}");
        assert!(
            !without.iter().any(|e| e == want),
            "{yaml}: without presence {want:?} must not fire: {without:?}"
        );
    }

    /// Asserts that no error with presence mentions `text`.
    fn quiet(kind: Kind, yaml: &str, text: &str) {
        let (with, _) = errors(kind, yaml);
        assert!(!with.iter().any(|e| e.contains(text)), "{yaml}: unexpected {text:?} in {with:?}");
    }

    #[test]
    fn empty_optional_strings_fail_min_length_and_absent_ones_do_not() {
        fires(
            Kind::WasmPlugin,
            "url: http://test\nimagePullSecret: \"\"",
            "spec.imagePullSecret: Invalid value: \"\": spec.imagePullSecret in body should be at least 1 chars long",
        );
        fires(
            Kind::WasmPlugin,
            "url: http://test\npluginName: ''",
            "spec.pluginName: Invalid value: \"\": spec.pluginName in body should be at least 1 chars long",
        );
        quiet(Kind::WasmPlugin, "url: http://test", "at least 1 chars");
        // snake_case names are read too; the finding keeps the name as written.
        fires(
            Kind::RequestAuthentication,
            "jwtRules: [{issuer: a, jwks_uri: \"\"}]",
            "spec.jwtRules[0].jwks_uri: Invalid value: \"\": spec.jwtRules[0].jwks_uri in body should be at least 1 chars long",
        );
        // Where the kind's validator already rejects the empty value, its finding is the only one.
        let (with, _) =
            errors(Kind::Telemetry, "tracing: [{customTags: {my-tag: {literal: {value: \"\"}}}}]");
        assert_eq!(
            with,
            ["spec.tracing[0].customTags.my-tag.literal.value: literal tag value may not be empty"]
        );
        // A field without minLength in the CRD may be empty.
        quiet(Kind::RequestAuthentication, "jwtRules: [{issuer: a, jwks: \"\"}]", "at least 1 chars");
    }

    #[test]
    fn an_empty_port_level_mtls_needs_a_selector() {
        fires(Kind::PeerAuthentication, "portLevelMtls: {}", "spec: portLevelMtls requires selector");
        fires(
            Kind::PeerAuthentication,
            "selector: {matchLabels: {}}\nportLevelMtls: {}",
            "spec: portLevelMtls requires selector",
        );
        quiet(
            Kind::PeerAuthentication,
            "selector: {matchLabels: {app: a}}\nportLevelMtls: {}",
            "portLevelMtls",
        );
        quiet(Kind::PeerAuthentication, "mtls: {mode: STRICT}", "portLevelMtls");
    }

    #[test]
    fn an_empty_target_refs_list_counts_as_set() {
        for kind in
            [Kind::AuthorizationPolicy, Kind::RequestAuthentication, Kind::Telemetry, Kind::WasmPlugin]
        {
            let url = if kind == Kind::WasmPlugin { "url: http://test\n" } else { "" };
            fires(
                kind,
                &format!("{url}selector: {{matchLabels: {{app: a}}}}\ntargetRefs: []"),
                "spec: only one of targetRefs or selector can be set",
            );
            quiet(kind, &format!("{url}targetRefs: []"), "only one of");
        }
        fires(
            Kind::EnvoyFilter,
            "workloadSelector: {labels: {app: a}}\ntargetRefs: []",
            "spec: only one of targetRefs or workloadSelector can be set",
        );
    }

    #[test]
    fn service_entry_endpoints_written_empty() {
        fires(
            Kind::ServiceEntry,
            "hosts: [a.example.com]\nendpoints: []",
            "spec: NONE mode cannot set endpoints",
        );
        quiet(
            Kind::ServiceEntry,
            "hosts: [a.example.com]\nresolution: STATIC\nendpoints: []\nports: [{number: 80, name: http}]",
            "endpoints",
        );
        fires(
            Kind::ServiceEntry,
            "hosts: [a.example.com]\nresolution: STATIC\nports: [{number: 80, name: http}]\nworkloadSelector: {labels: {app: a}}\nendpoints: []",
            "spec: only one of WorkloadSelector or Endpoints can be set",
        );
    }

    #[test]
    fn server_tls_certificate_sources_are_exclusive() {
        let gateway = |tls: &str| {
            format!(
                "servers: [{{port: {{number: 443, name: https, protocol: HTTPS}}, hosts: [a.com], tls: {tls}}}]"
            )
        };
        fires(
            Kind::Gateway,
            &gateway("{mode: SIMPLE, credentialName: \"\", credentialNames: [a]}"),
            "spec.servers[0].tls: only one of credentialName or credentialNames can be set",
        );
        // Both set with values: Istio's validator says so already, and its finding is the only one.
        let (with, _) = errors(
            Kind::Gateway,
            &gateway(
                "{mode: SIMPLE, credentialName: a, tlsCertificates: [{serverCertificate: c, privateKey: k}]}",
            ),
        );
        assert_eq!(with.len(), 1, "{with:?}");
        assert!(
            with[0].starts_with("spec.servers[0].tls: only one of credential_name, credential_names"),
            "{with:?}"
        );
        quiet(Kind::Gateway, &gateway("{mode: SIMPLE, credentialName: a}"), "only one of");
        fires(
            Kind::Sidecar,
            "ingress: [{port: {number: 443, name: https, protocol: HTTPS}, defaultEndpoint: 127.0.0.1:8080, tls: {mode: SIMPLE, credentialNames: [], tlsCertificates: [{serverCertificate: c, privateKey: k}]}}]",
            "spec.ingress[0].tls: only one of credentialNames or tlsCertificates can be set",
        );
    }

    #[test]
    fn empty_values_where_the_crd_forbids_any_value() {
        fires(
            Kind::Telemetry,
            "metrics: [{overrides: [{tagOverrides: {x: {operation: REMOVE, value: \"\"}}}]}]",
            "spec.metrics[0].overrides[0].tagOverrides.x: value must not be set when operation is REMOVE",
        );
        fires(
            Kind::WasmPlugin,
            "url: http://test\nvmConfig: {env: [{name: a, valueFrom: HOST, value: \"\"}]}",
            "spec.vmConfig.env[0].value: value may only be set when valueFrom is INLINE",
        );
    }

    #[test]
    fn paths_and_patterns() {
        assert_eq!(lower_camel("jwks_uri"), "jwksUri");
        assert_eq!(lower_camel("output_claim_to_headers"), "outputClaimToHeaders");
        assert_eq!(lower_camel("imagePullSecret"), "imagePullSecret");
        assert!(matches_pattern(
            "spec.jwtRules[12].fromHeaders[0].name",
            "spec.jwtRules[].fromHeaders[].name"
        ));
        assert!(matches_pattern(
            "spec.tracing[0].customTags.t.header.name",
            "spec.tracing[].customTags.*.header.name"
        ));
        assert!(!matches_pattern("spec.jwtRules[0].issuer", "spec.jwtRules[].jwksUri"));
        assert!(!matches_pattern("spec.url.x", "spec.url"));
        let root =
            parse_documents("a: ''\nb: {}\nc: []\nd: {e_f: ''}\ng: [x, '']").remove(0).unwrap().root.unwrap();
        let p = Presence::from_spec(&root);
        assert_eq!(p.empty_at("spec.a"), Some(Empty::String));
        assert_eq!(p.empty_at("spec.b"), Some(Empty::Map));
        assert_eq!(p.empty_at("spec.c"), Some(Empty::List));
        assert_eq!(p.empty_at("spec.d.eF"), Some(Empty::String));
        assert_eq!(p.empty_at("spec.g[1]"), Some(Empty::String));
        assert_eq!(p.empty_at("spec.g[0]"), None);
        assert_eq!(p.empty_at("spec.d"), None);
    }
}
