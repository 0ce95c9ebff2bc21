//! What generation could not do: dropped objects and untranslated fields, for logs, `/debug` and
//! `meshpilot validate` warnings.

use std::{borrow::Cow, fmt};

use crate::ConfigKey;

/// `text` cut to at most `max` bytes (at a character boundary), with `…` and the full length when
/// cut: how a client's or a file's value is quoted in messages and logs, whatever its size.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes)", &text[..end], text.len()))
}

/// How serious a [`Finding`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Part of an object was left out of the output because Envoy would reject it (e.g. a regex RE2
    /// does not accept); the rest of the output is unaffected.
    Dropped,
    /// A field meshpilot does not translate yet; it has no effect (never silently ignored: reported).
    Unsupported,
    /// Translated as Istio translates it, but probably not what the author meant: e.g. a route to a host
    /// no service defines, which Istio (and meshpilot) keep and Envoy answers with 503.
    Warning,
}

/// One thing generation could not honour.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Finding {
    /// How serious it is.
    pub severity: Severity,
    /// The Istio object it comes from, when there is one.
    pub config: Option<ConfigKey>,
    /// Field path in that object (`spec.http[0].match[1].uri.regex`), or empty.
    pub path: String,
    /// The Envoy resource affected (`outbound|80||reviews.default.svc.cluster.local`, route config `80`).
    pub resource: String,
    /// What happened and why.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.severity {
            Severity::Dropped => "dropped",
            Severity::Unsupported => "not translated",
            Severity::Warning => "warning",
        };
        match &self.config {
            Some(key) => write!(f, "{what}: {key} {}: {} (in {})", self.path, self.message, self.resource),
            None => write!(f, "{what}: {}: {}", self.resource, self.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_cuts_at_a_character_boundary() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("ééé", 3), "é… (6 bytes)");
        assert_eq!(clip(&"x".repeat(30_000), 4), "xxxx… (30000 bytes)");
    }
}
