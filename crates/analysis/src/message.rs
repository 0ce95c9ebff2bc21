//! One analysis finding ([`Message`]) and the object it is about ([`Origin`]), printed as istioctl
//! prints them (`pkg/config/analysis/diag/message.go`, `legacy/source/kube/origin.go`).

use std::{cmp::Ordering, fmt, path::PathBuf};

use crate::msg::{Arg, Level, MessageType};

/// Where a message points: the object (kind, namespace, name) and, for objects read from files, the
/// file and line (Istio's `resource.Origin` + `Reference`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// The object's kind (`VirtualService`, `Service`, `MutatingWebhookConfiguration`).
    pub kind: String,
    /// The object's namespace; `None` for cluster-scoped objects and objects read without one.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The file the object was read from (as given on the command line); `None` for cluster objects.
    pub file: Option<PathBuf>,
    /// 1-based line in `file` (the object's start, or the offending field's line in a [`Message`]).
    pub line: Option<u32>,
}

impl Origin {
    /// `Kind ns/name`, or `Kind name` without a namespace (istioctl's `FriendlyName`, the form
    /// `--suppress` matches).
    pub fn friendly_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// The namespace used to filter messages by `--namespace`: a Namespace object's own name, else
    /// the object's namespace (Istio's `Origin.Namespace`).
    pub fn filter_namespace(&self) -> Option<&str> {
        if self.kind == "Namespace" { Some(&self.name) } else { self.namespace.as_deref() }
    }

    /// `file:line` (just `file` for `.json` files, whose positions istioctl does not print, or when the
    /// line is unknown); `None` without a file (Istio's `Position.String`).
    pub fn reference(&self) -> Option<String> {
        let file = self.file.as_ref()?;
        let name = file.display().to_string();
        let json = file.extension().is_some_and(|e| e == "json");
        match self.line {
            Some(line) if line > 0 && !json && !name.is_empty() => Some(format!("{name}:{line}")),
            _ => Some(name),
        }
    }

    /// Istio's sort key (`Kind/name/namespace`).
    fn comparator(&self) -> String {
        format!("{}/{}/{}", self.kind, self.name, self.namespace.as_deref().unwrap_or(""))
    }
}

impl fmt::Display for Origin {
    /// `Kind ns/name file:line`, what istioctl prints inside the parentheses of a message line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.friendly_name())?;
        if let Some(reference) = self.reference() {
            write!(f, " {reference}")?;
        }
        Ok(())
    }
}

/// One analysis message (Istio's `diag.Message`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The message type: code, level, template.
    pub kind: &'static MessageType,
    /// The object it is about, with the line of the offending field when known.
    pub origin: Origin,
    /// The rendered text (the template with its arguments).
    pub text: String,
    /// The offending field's path (`spec.gateways[0]`), when the analyzer names one.
    pub path: Option<String>,
}

impl Message {
    /// A message of type `kind` about `origin` with the template's arguments.
    pub fn new(kind: &'static MessageType, origin: Origin, args: &[Arg]) -> Message {
        Message { kind, origin, text: kind.text(args), path: None }
    }

    /// The message's level.
    pub fn level(&self) -> Level {
        self.kind.level
    }

    /// The message's code (`IST0101`).
    pub fn code(&self) -> &'static str {
        self.kind.code
    }

    /// The documentation page of the code, with `?ref=DOC_REF` when given
    /// (`https://istio.io/latest/docs/reference/config/analysis/ist0101/?ref=istioctl-analyze`). istioctl
    /// links the docs of its own minor version; meshpilot links `latest`.
    pub fn documentation_url(&self, doc_ref: Option<&str>) -> String {
        let query = doc_ref.map_or(String::new(), |r| format!("?ref={r}"));
        format!(
            "https://istio.io/latest/docs/reference/config/analysis/{}/{query}",
            self.code().to_lowercase()
        )
    }

    /// The JSON/YAML form istioctl prints with `-o json|yaml`, keys in its (alphabetical) order: `code`,
    /// `documentationUrl`, `level`, `message`, `origin`, `reference` (when read from a file).
    pub fn to_json(&self, doc_ref: Option<&str>) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert("code".into(), self.code().into());
        map.insert("documentationUrl".into(), self.documentation_url(doc_ref).into());
        map.insert("level".into(), self.level().as_str().into());
        map.insert("message".into(), self.text.clone().into());
        map.insert("origin".into(), self.origin.friendly_name().into());
        if let Some(reference) = self.origin.reference() {
            map.insert("reference".into(), reference.into());
        }
        map.into()
    }

    /// Istio's message order: by level (errors first), code, then object (`Kind/name/namespace`), then text.
    pub fn istio_cmp(&self, other: &Message) -> Ordering {
        other
            .level()
            .cmp(&self.level())
            .then_with(|| self.code().cmp(other.code()))
            .then_with(|| self.origin.comparator().cmp(&other.origin.comparator()))
            .then_with(|| self.to_string().cmp(&other.to_string()))
    }
}

impl fmt::Display for Message {
    /// `Error [IST0101] (VirtualService ns/name file:line) Referenced gateway not found: "x"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}] ({}) {}", self.level(), self.code(), self.origin, self.text)
    }
}

/// Sorts in Istio's order and drops messages whose printed line equals the previous one (Istio's
/// `SortedDedupedCopy`).
pub fn sort_dedup(messages: &mut Vec<Message>) {
    messages.sort_by(Message::istio_cmp);
    messages.dedup_by(|b, a| a.to_string() == b.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg;

    fn origin(ns: Option<&str>, file: Option<&str>, line: Option<u32>) -> Origin {
        Origin {
            kind: "VirtualService".into(),
            namespace: ns.map(String::from),
            name: "reviews".into(),
            file: file.map(PathBuf::from),
            line,
        }
    }

    #[test]
    fn lines_print_as_istioctl() {
        let m = Message::new(
            &msg::REFERENCED_RESOURCE_NOT_FOUND,
            origin(Some("default"), Some("a/vs.yaml"), Some(11)),
            &["host".into(), "reviews".into()],
        );
        assert_eq!(
            m.to_string(),
            "Error [IST0101] (VirtualService default/reviews a/vs.yaml:11) Referenced host not found: \"reviews\""
        );
        let m = Message::new(
            &msg::REFERENCED_RESOURCE_NOT_FOUND,
            origin(None, None, None),
            &["host".into(), "x".into()],
        );
        assert_eq!(
            m.to_string(),
            "Error [IST0101] (VirtualService reviews) Referenced host not found: \"x\""
        );
        let json = origin(Some("ns"), Some("g.json"), Some(4));
        assert_eq!(json.reference().as_deref(), Some("g.json"));
    }

    #[test]
    fn sorting_puts_errors_first_and_drops_duplicates() {
        let warn = Message::new(&msg::UNKNOWN_ANNOTATION, origin(Some("a"), None, None), &["x".into()]);
        let err = Message::new(
            &msg::REFERENCED_RESOURCE_NOT_FOUND,
            origin(Some("a"), None, None),
            &["host".into(), "x".into()],
        );
        let mut all = vec![warn.clone(), err.clone(), warn.clone()];
        sort_dedup(&mut all);
        assert_eq!(all, vec![err, warn]);
    }
}
