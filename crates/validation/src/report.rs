//! The outcome of validating one object.

use std::fmt;

/// One finding: the field it is about and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Issue {
    /// Field path from the document root, e.g. `spec.http[0].route[0].weight`; `spec` for the whole spec.
    pub path: String,
    /// What is wrong, e.g. `weight -15 < 0`.
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Errors (the object is rejected) and warnings (accepted, but probably not what was meant).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Findings that make the object invalid.
    pub errors: Vec<Issue>,
    /// Findings that do not make the object invalid (deprecated fields, likely mistakes).
    pub warnings: Vec<Issue>,
}

impl Report {
    /// Records an error at `path`.
    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(Issue { path: path.into(), message: message.into() });
    }

    /// Records a warning at `path`.
    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(Issue { path: path.into(), message: message.into() });
    }

    /// Records an error at `path` if `result` is an error (the shape the [`crate::common`] checks return).
    pub fn check(&mut self, path: impl Into<String>, result: Result<(), String>) {
        if let Err(message) = result {
            self.error(path, message);
        }
    }

    /// `true` when there is no error (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// Appends another report's findings.
    pub fn merge(&mut self, other: Report) {
        self.errors.extend(other.errors);
        self.warnings.extend(other.warnings);
    }

    /// Runs `check` on a report of its own and keeps only its errors: Istio's `appendErrors`
    /// (`agent.AppendErrors`) keeps a `Validation`'s error and drops its warning, so checks Istio
    /// combines that way (a subset's traffic policy, port-level settings) warn nothing.
    pub fn errors_of(&mut self, check: impl FnOnce(&mut Report)) {
        let mut inner = Report::default();
        check(&mut inner);
        self.errors.extend(inner.errors);
    }
}
