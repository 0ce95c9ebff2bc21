//! Reading Kubernetes-style YAML/JSON documents into typed, validated [`Config`]s.
//!
//! The steps follow `istioctl validate` (`istioctl/pkg/validate/validate.go`) and Istio's file config
//! source: split the stream into documents; read `apiVersion` and `kind`; for an Istio kind, decode
//! `metadata` and `spec` (unknown fields are errors unless [`UnknownFields`] says otherwise) and run
//! the kind's validation; a kind Istio removed is skipped with a note naming its replacement; for a
//! Kubernetes `Service` or `Deployment`, run istioctl's checks; expand `kind: List`; skip any other
//! kind with a note. Each document yields one [`ParsedDocument`] (a `List` yields one per item), and
//! a bad document never stops the others: after a YAML syntax error, the documents before it are
//! still returned.
//!
//! Every finding names the file, the document index, the line, the field path and the reason.

use std::{
    fmt, io,
    path::{Path, PathBuf},
};

use api::{
    GroupVersionKind, Spec,
    de::from_node,
    meta::ObjectMeta,
    schema::{self, Lookup},
    yaml::{self, Node, Value},
};

use model::{Config, ConfigMeta};

/// Reader settings.
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// Namespace given to objects that name none (Istio: `default`).
    pub default_namespace: String,
    /// Namespace whose Kubernetes Services/Deployments istioctl does not check (`istio-system`).
    pub istio_namespace: String,
    /// DNS domain suffix recorded on every config (`cluster.local`).
    pub domain_suffix: String,
    /// What an unknown field of an Istio object is (default [`UnknownFields::Reject`]).
    pub unknown_fields: UnknownFields,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            default_namespace: "default".into(),
            istio_namespace: "istio-system".into(),
            domain_suffix: "cluster.local".into(),
            unknown_fields: UnknownFields::default(),
        }
    }
}

/// What a field of an Istio object that its kind does not have (`metadata`, `spec`, or a top-level
/// key other than `apiVersion`, `kind`, `metadata`, `spec`, `status`) is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnknownFields {
    /// An error, except a field Istio removed from its API that old config still carries
    /// (`websocketUpgrade`): a warning saying it is ignored. Config sources and the webhook.
    #[default]
    Reject,
    /// An error, removed fields too, and an object with one is not validated further: `istioctl
    /// validate`, which decodes strictly (`cannot parse proto message: unknown field
    /// "websocketUpgrade" in istio.networking.v1alpha3.HTTPRoute`) and validates what decodes.
    RejectAll,
    /// Ignored: `istioctl analyze` reads files with Kubernetes' non-strict decoder (Istio's file store,
    /// `pilot/pkg/config/file/store.go`), so an unknown field neither fails nor shows.
    Ignore,
}

/// One finding about a document: where and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Field path from the document root (`spec.http[0].timeout`); empty for the document itself.
    pub path: String,
    /// Line (1-based) in the file where the offending value (or its nearest existing parent) starts.
    pub line: u32,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// What reading one document (or one item of a `List`) gave.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedDocument {
    /// The file it came from (`-` for standard input).
    pub file: String,
    /// 0-based index of the document in its file.
    pub index: usize,
    /// Line where the object starts.
    pub line: u32,
    /// `apiVersion` as written (empty if missing).
    pub api_version: String,
    /// `kind` as written (empty if missing).
    pub kind: String,
    /// `metadata.namespace` as written (empty if missing).
    pub namespace: String,
    /// `metadata.name` as written (empty if missing).
    pub name: String,
    /// The typed config, for an Istio object with no error.
    pub config: Option<Config>,
    /// Findings that make the document invalid.
    pub errors: Vec<Finding>,
    /// Findings that do not.
    pub warnings: Vec<Finding>,
    /// Why the document was not checked (a kind meshpilot does not read), if so.
    pub skipped: Option<String>,
}

impl ParsedDocument {
    fn new(file: &str, index: usize, line: u32) -> Self {
        ParsedDocument {
            file: file.to_string(),
            index,
            line,
            api_version: String::new(),
            kind: String::new(),
            namespace: String::new(),
            name: String::new(),
            config: None,
            errors: Vec::new(),
            warnings: Vec::new(),
            skipped: None,
        }
    }

    /// `true` when the document has no error.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// `Kind/namespace/name` as written (namespace empty when not given), the form istioctl prints.
    pub fn object_ref(&self) -> String {
        format!("{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// Reads every document of `text`, which came from `file` (used in findings only).
pub fn parse_text(file: &str, text: &str, options: &ParseOptions) -> Vec<ParsedDocument> {
    let mut out = Vec::new();
    for doc in yaml::parse_documents(text) {
        match doc {
            Err(err) => {
                let mut parsed = ParsedDocument::new(file, err.index, err.mark.line);
                parsed.errors.push(Finding {
                    path: String::new(),
                    line: err.mark.line,
                    message: format!("YAML syntax error: {} (column {})", err.message, err.mark.col),
                });
                out.push(parsed);
            }
            Ok(yaml::Document { root: None, .. }) => {}
            Ok(yaml::Document { index, root: Some(root), .. }) => {
                parse_object(file, index, &root, options, &mut out);
            }
        }
    }
    clip_findings(&mut out);
    out
}

/// The most of a finding's message kept, bytes: messages quote the offending value, and a value may be
/// megabytes long (a 3 MiB host name); what is reported (CLI, logs, `/debug/configstatusz`) quotes a
/// bounded part of it.
pub const MAX_FINDING_BYTES: usize = 4096;

/// `text` replaced by its [`model::finding::clip`] to `max` bytes.
fn clip(text: &mut String, max: usize) {
    if let std::borrow::Cow::Owned(clipped) = model::finding::clip(text, max) {
        *text = clipped;
    }
}

/// Bounds what the documents report: messages to [`MAX_FINDING_BYTES`]; the name and namespace of a
/// document with errors (longer than Kubernetes allows, they are errors themselves) to 253 bytes.
fn clip_findings(docs: &mut [ParsedDocument]) {
    for doc in docs {
        for finding in doc.errors.iter_mut().chain(doc.warnings.iter_mut()) {
            clip(&mut finding.message, MAX_FINDING_BYTES);
        }
        if !doc.errors.is_empty() {
            clip(&mut doc.name, 253);
            clip(&mut doc.namespace, 253);
        }
    }
}

/// Reads a file. `path` of `-` reads standard input.
///
/// # Errors
/// The file cannot be read, is larger than [`yaml::MAX_FILE_BYTES`], or is not UTF-8.
pub fn parse_file(path: &Path, options: &ParseOptions) -> io::Result<Vec<ParsedDocument>> {
    let text = yaml::read_config_text(path)?;
    Ok(parse_text(&path.display().to_string(), &text, options))
}

/// `true` for the file names config readers take: `.yaml`, `.yml`, `.json` (as istioctl).
pub fn is_config_file(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// Every config file under `dir`, recursively, in a stable (sorted) order. Hidden entries
/// (names starting with `.`) are skipped, except that symlinks are followed, so a Kubernetes
/// ConfigMap mount (`..data` → timestamped directory) is read once through its visible names.
///
/// # Errors
/// `dir` cannot be listed.
pub fn config_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            // `metadata` follows symlinks.
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if is_config_file(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn finding(root: &Node, path: &str, message: impl Into<String>) -> Finding {
    Finding { path: path.to_string(), line: root.find_path(path).mark.line, message: message.into() }
}

/// A string field of the document root, with a finding if it is present but not a string.
fn string_field(root: &Node, key: &str, errors: &mut Vec<Finding>) -> String {
    match root.get(key) {
        None => String::new(),
        Some(Node { value: Value::String(s), .. }) => s.clone(),
        Some(node) => {
            errors.push(Finding {
                path: key.to_string(),
                line: node.mark.line,
                message: format!("invalid type: {}, expected a string", node.value.type_name()),
            });
            String::new()
        }
    }
}

/// Reads one object given as JSON (an object from the Kubernetes API, say) with the same checks as a
/// file document: strict decoding, the kind's validation, `List` expansion. `source` names the object's
/// origin in findings (`kubernetes`); lines are 0 since JSON values carry no positions.
pub fn parse_json(source: &str, value: &serde_json::Value, options: &ParseOptions) -> Vec<ParsedDocument> {
    parse_node(source, 0, &Node::from_json(value, api::yaml::Mark::default()), options)
}

/// Reads one already-parsed document root (document `index` of `file`); a `List` yields one entry per item.
pub fn parse_node(file: &str, index: usize, root: &Node, options: &ParseOptions) -> Vec<ParsedDocument> {
    let mut out = Vec::new();
    parse_object(file, index, root, options, &mut out);
    clip_findings(&mut out);
    out
}

fn parse_object(
    file: &str,
    index: usize,
    root: &Node,
    options: &ParseOptions,
    out: &mut Vec<ParsedDocument>,
) {
    let mut doc = ParsedDocument::new(file, index, root.mark.line);
    if !matches!(root.value, Value::Map(_)) {
        doc.errors.push(finding(
            root,
            "",
            format!(
                "expected a Kubernetes object (a mapping with apiVersion, kind, metadata, spec), found {}",
                root.value.type_name()
            ),
        ));
        out.push(doc);
        return;
    }
    doc.api_version = string_field(root, "apiVersion", &mut doc.errors);
    doc.kind = string_field(root, "kind", &mut doc.errors);
    if let Some(meta) = root.get("metadata") {
        doc.name = meta.get("name").and_then(Node::as_str).unwrap_or_default().to_string();
        doc.namespace = meta.get("namespace").and_then(Node::as_str).unwrap_or_default().to_string();
    }

    // `kind: List` (what `kubectl get -o yaml` prints): each item is an object of its own.
    if doc.kind == "List" || (doc.kind.ends_with("List") && root.get("items").is_some()) {
        match root.get("items").map(|n| &n.value) {
            Some(Value::Seq(items)) => {
                for item in items {
                    parse_object(file, index, item, options, out);
                }
            }
            None | Some(Value::Null) => {}
            Some(other) => {
                doc.errors.push(finding(
                    root,
                    "items",
                    format!("invalid type: {}, expected a list", other.type_name()),
                ));
                out.push(doc);
            }
        }
        return;
    }

    if doc.kind.is_empty() {
        // Like istioctl: a document with no kind (a Helm values file, say) is not an object to check.
        if doc.errors.is_empty() {
            doc.skipped = Some("no kind: not a Kubernetes object, not checked".to_string());
        }
        out.push(doc);
        return;
    }

    match schema::lookup(&doc.api_version, &doc.kind) {
        Lookup::Istio(schema) => parse_istio(&mut doc, root, schema, options),
        Lookup::UnservedVersion(schema) => {
            let mut served = vec![schema.version];
            served.extend(schema.version_aliases);
            let message = format!(
                "{} is not a served version of {} (served: {})",
                doc.api_version,
                doc.kind,
                served.iter().map(|v| format!("{}/{v}", schema.group)).collect::<Vec<_>>().join(", ")
            );
            doc.errors.push(finding(root, "apiVersion", message));
        }
        Lookup::Removed(replacement) => {
            // istioctl (validate and analyze) and Istio's file store skip kinds they have no schema
            // for; the note names the replacement.
            doc.skipped = Some(format!(
                "{} {} is no longer supported: Istio removed this API; use {replacement} instead; not checked",
                doc.api_version, doc.kind
            ));
        }
        Lookup::Other => parse_other(&mut doc, root, options),
    }
    out.push(doc);
}

/// Top-level keys of an Istio object (istioctl's `checkFields`).
const TOP_LEVEL_FIELDS: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];

fn parse_istio(doc: &mut ParsedDocument, root: &Node, schema: &'static api::Schema, options: &ParseOptions) {
    if let Value::Map(entries) = &root.value
        && options.unknown_fields != UnknownFields::Ignore
    {
        for (key, _) in entries {
            if !TOP_LEVEL_FIELDS.contains(&key.name.as_str()) {
                doc.errors.push(Finding {
                    path: key.name.clone(),
                    line: key.mark.line,
                    message: format!("unknown field \"{}\"", key.name),
                });
            }
        }
    }
    let meta = match root.get("metadata") {
        None => ObjectMeta::default(),
        Some(node) => match from_node::<ObjectMeta>(node, "metadata") {
            Ok((meta, unknown)) => {
                unknown_findings(&unknown, options.unknown_fields, &mut doc.errors, &mut doc.warnings);
                meta
            }
            Err(err) => {
                doc.errors.push(Finding { path: err.path, line: err.mark.line, message: err.message });
                return;
            }
        },
    };
    let spec = match Spec::from_node(schema.kind, root.get("spec")) {
        Ok((spec, unknown)) => {
            unknown_findings(&unknown, options.unknown_fields, &mut doc.errors, &mut doc.warnings);
            spec
        }
        Err(err) => {
            doc.errors.push(Finding {
                path: err.path,
                line: err.mark.line,
                message: format!("cannot parse proto message: {}", err.message),
            });
            return;
        }
    };
    if options.unknown_fields == UnknownFields::RejectAll && !doc.errors.is_empty() {
        // istioctl validate: an object that does not decode strictly is not validated (no findings
        // of the kind's rules, warnings included).
        return;
    }
    let mut meta = meta;
    if schema.cluster_scoped {
        // GatewayClass: cluster-scoped objects have no namespace, whatever the document says.
        meta.namespace.clear();
    } else if meta.namespace.is_empty() {
        // As istioctl: an empty default namespace means `default`.
        meta.namespace = match options.default_namespace.as_str() {
            "" => "default".to_string(),
            ns => ns.to_string(),
        };
    }
    let presence = root.get("spec").map(validation::Presence::from_spec).unwrap_or_default();
    let report = validation::validate_with_presence(&meta, &spec, &presence);
    for issue in report.errors {
        doc.errors.push(finding(root, &issue.path, issue.message));
    }
    for issue in report.warnings {
        doc.warnings.push(finding(root, &issue.path, issue.message));
    }
    if !doc.errors.is_empty() {
        return;
    }
    let status = root.get("status").filter(|n| n.value != Value::Null).map(Node::to_json);
    doc.config = Some(Config {
        meta: ConfigMeta {
            gvk: GroupVersionKind::from_api_version(&doc.api_version, &doc.kind),
            name: meta.name,
            namespace: meta.namespace,
            labels: meta.labels,
            annotations: meta.annotations,
            resource_version: meta.resource_version,
            generation: meta.generation,
            creation_timestamp: meta.creation_timestamp,
            domain_suffix: options.domain_suffix.clone(),
        },
        spec,
        status,
    });
}

/// The findings of unknown fields under `mode` (see [`UnknownFields`]).
fn unknown_findings(
    unknown: &[api::de::UnknownField],
    mode: UnknownFields,
    errors: &mut Vec<Finding>,
    warnings: &mut Vec<Finding>,
) {
    if mode == UnknownFields::Ignore {
        return;
    }
    for u in unknown {
        let name = u.path.rsplit(['.', '[']).next().unwrap_or(&u.path).trim_end_matches(']');
        let finding = |message: String| Finding { path: u.path.clone(), line: u.mark.line, message };
        if let Some(note) = removed_field(&u.path, name).filter(|_| mode == UnknownFields::Reject) {
            warnings.push(finding(format!(
                "field \"{name}\" was removed from the Istio API and is ignored: {note}"
            )));
        } else {
            errors.push(finding(format!("unknown field \"{name}\"")));
        }
    }
}

/// Fields that Istio removed and that still appear in real config (Istio's own test data included).
fn removed_field(path: &str, name: &str) -> Option<&'static str> {
    match name {
        "websocketUpgrade" if path.starts_with("spec.http[") => {
            Some("WebSocket upgrades are always allowed (removed in Istio 1.0)")
        }
        _ => None,
    }
}

/// Kubernetes and other non-Istio kinds: istioctl checks Services and Deployments, skips the rest.
fn parse_other(doc: &mut ParsedDocument, root: &Node, options: &ParseOptions) {
    let group = GroupVersionKind::from_api_version(&doc.api_version, &doc.kind).group;
    let checked = match doc.kind.as_str() {
        "Service" if group.is_empty() => true,
        "Deployment" if group.is_empty() || group == "apps" => true,
        _ => false,
    };
    if !checked {
        doc.skipped = Some(if group.ends_with(".istio.io") {
            format!("{} {} is not an Istio config kind meshpilot reads", doc.api_version, doc.kind)
        } else if group.starts_with("gateway.networking") {
            format!("Gateway API kind {} is not supported by meshpilot; not read", doc.kind)
        } else {
            format!("{} {} is not Istio config; not checked", doc.api_version, doc.kind)
        });
        return;
    }
    let report = validation::kube::validate_kube_object(&root.to_json(), &options.istio_namespace);
    for issue in report.errors {
        doc.errors.push(finding(root, &issue.path, issue.message));
    }
    for issue in report.warnings {
        doc.warnings.push(finding(root, &issue.path, issue.message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<ParsedDocument> {
        parse_text("t.yaml", text, &ParseOptions::default())
    }

    #[test]
    fn findings_quote_a_bounded_part_of_huge_values() {
        let host = "x".repeat(3_000_000);
        let name = "n".repeat(10_000);
        let docs = parse(&format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: b}}\nspec:\n  host: {host}\n"
        ));
        assert_eq!(docs.len(), 1);
        let doc = &docs[0];
        assert!(!doc.errors.is_empty());
        assert!(
            doc.errors.iter().any(|f| f.path == "spec.host"),
            "{:?}",
            doc.errors.iter().map(|f| &f.path).collect::<Vec<_>>()
        );
        for f in &doc.errors {
            assert!(f.message.len() <= MAX_FINDING_BYTES + 32, "{} bytes at {}", f.message.len(), f.path);
        }
        assert!(
            doc.errors.iter().any(|f| f.message.ends_with("(3000000 bytes)") || f.message.contains("bytes)"))
        );
        assert!(doc.name.len() < 300 && doc.name.ends_with("(10000 bytes)"), "{}", doc.name.len());
    }

    #[test]
    fn removed_kinds_name_their_replacement() {
        let docs =
            parse("apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: r}\nspec: {}\n");
        assert_eq!(docs.len(), 1);
        assert!(docs[0].is_valid(), "istioctl skips kinds it has no schema for: {:?}", docs[0].errors);
        let note = docs[0].skipped.as_deref().expect("skipped with a note");
        assert!(note.contains("use networking.istio.io VirtualService"), "{note}");
    }

    #[test]
    fn unserved_versions_list_the_served_ones() {
        let docs = parse("apiVersion: networking.istio.io/v9\nkind: Gateway\nmetadata: {name: g}\n");
        assert!(
            docs[0].errors[0]
                .message
                .contains("served: networking.istio.io/v1, networking.istio.io/v1alpha3")
        );
    }

    #[test]
    fn unknown_top_level_and_metadata_fields_are_errors_with_lines() {
        let docs = parse(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata:\n  name: g\n  nmespace: x\nspec: {}\nunexpected_junk: 1\n",
        );
        let msgs: Vec<_> =
            docs[0].errors.iter().map(|e| (e.path.as_str(), e.line, e.message.as_str())).collect();
        assert!(msgs.contains(&("unexpected_junk", 7, "unknown field \"unexpected_junk\"")), "{msgs:?}");
        assert!(msgs.contains(&("metadata.nmespace", 5, "unknown field \"nmespace\"")), "{msgs:?}");
        assert!(docs[0].config.is_none());
    }

    #[test]
    fn a_bad_document_does_not_hide_the_others() {
        let docs = parse(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: a}\nspec: {servers: 3}\n---\n\
             apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: b}\nspec:\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n---\nkey: [unclosed\n",
        );
        assert_eq!(docs.len(), 3, "{docs:#?}");
        assert_eq!(docs[0].errors[0].path, "spec.servers");
        assert_eq!(docs[0].errors[0].line, 4);
        assert_eq!(docs[1].index, 1);
        assert!(docs[1].config.is_some());
        assert!(docs[2].errors[0].message.starts_with("YAML syntax error"), "{:?}", docs[2].errors);
    }

    #[test]
    fn lists_are_expanded_and_other_kinds_skipped() {
        let docs = parse(
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: networking.istio.io/v1\n  kind: Gateway\n  metadata: {name: a}\n  spec: {servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"]}]}\n\
             - apiVersion: argoproj.io/v1alpha1\n  kind: Application\n  metadata: {name: b}\n",
        );
        assert_eq!(docs.len(), 2);
        assert!(docs[0].config.is_some());
        assert_eq!(docs[0].config.as_ref().unwrap().meta.namespace, "default");
        assert!(docs[1].skipped.is_some());
    }

    #[test]
    fn removed_fields_are_warnings_not_errors() {
        let docs = parse(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v}\nspec:\n  hosts: [a]\n  http:\n  - websocketUpgrade: true\n    route:\n    - destination: {host: a}\n",
        );
        assert!(docs[0].is_valid(), "{:?}", docs[0].errors);
        let w = &docs[0].warnings[0];
        assert_eq!((w.path.as_str(), w.line), ("spec.http[0].websocketUpgrade", 7));
        assert!(w.message.contains("removed from the Istio API"));
    }

    #[test]
    fn unknown_fields_follow_the_mode() {
        let text = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: v, bogus: 1}\nextra: 2\nspec:\n  hosts: [a]\n  http:\n  - websocketUpgrade: true\n    route:\n    - destination: {host: a}\n";
        let with = |unknown_fields| {
            parse_text("t.yaml", text, &ParseOptions { unknown_fields, ..ParseOptions::default() }).remove(0)
        };
        // istioctl validate: every unknown field is an error, removed ones too.
        let strict = with(UnknownFields::RejectAll);
        let paths: Vec<&str> = strict.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            ["extra", "metadata.bogus", "spec.http[0].websocketUpgrade"],
            "{:?}",
            strict.errors
        );
        assert_eq!(strict.errors[2].message, "unknown field \"websocketUpgrade\"");
        // ... and the object is not validated further (istioctl: `cannot parse proto message`).
        assert!(strict.warnings.is_empty() && strict.config.is_none());
        // istioctl analyze: ignored, and the object is read.
        let lenient = with(UnknownFields::Ignore);
        assert!(lenient.errors.is_empty() && lenient.warnings.is_empty(), "{:?}", lenient.errors);
        assert_eq!(lenient.config.expect("decoded").meta.name, "v");
    }

    #[test]
    fn jwt_rule_presence_is_read_with_its_names() {
        let ra = |presence: &str| {
            parse(&format!(
                "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {{name: r}}\nspec:\n  jwtRules:\n  - issuer: x\n    presence: {presence}\n"
            ))
        };
        let docs = ra("REQUIRED");
        assert!(docs[0].is_valid(), "{:?}", docs[0].errors);
        let Some(Config { spec: Spec::RequestAuthentication(spec), .. }) = &docs[0].config else { panic!() };
        assert_eq!(spec.jwt_rules[0].presence, 1);
        let docs = ra("MANDATORY");
        let e = &docs[0].errors[0];
        assert_eq!(e.path, "spec.jwtRules[0].presence");
        assert!(e.message.contains("MANDATORY") && e.message.contains("REQUIRED"), "{e}");
    }

    #[test]
    fn json_objects_get_the_same_checks_as_files() {
        let good = serde_json::json!({
            "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "g", "namespace": "ns", "resourceVersion": "42", "uid": "u",
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]},
        });
        let docs = parse_json("kubernetes", &good, &ParseOptions::default());
        let config = docs[0].config.as_ref().expect("valid");
        assert_eq!((config.meta.namespace.as_str(), config.meta.resource_version.as_str()), ("ns", "42"));
        let bad = serde_json::json!({
            "apiVersion": "networking.istio.io/v1", "kind": "Gateway", "metadata": {"name": "b"},
            "spec": {"servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": []}]},
        });
        let docs = parse_json("kubernetes", &bad, &ParseOptions::default());
        assert!(docs[0].config.is_none());
        assert!(docs[0].errors.iter().any(|e| e.path.starts_with("spec.servers[0]")), "{:?}", docs[0].errors);
    }

    #[test]
    fn documents_that_are_not_mappings_are_errors() {
        let docs = parse("- a\n- b\n");
        assert!(docs[0].errors[0].message.contains("expected a Kubernetes object"));
        let docs = parse("metadata: {name: x}\n");
        assert!(docs[0].is_valid() && docs[0].skipped.as_deref().unwrap().contains("no kind"));
    }
}
