//! YAML read through meshpilot's bounded reader (`api::yaml`: alias-bomb, depth and size limits,
//! duplicate keys refused), as JSON.

use serde_json::Value as Json;

/// A YAML document that could not be read: which one, where, why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("document {document} at {line}:{column}: {message}")]
pub struct YamlError {
    /// 1-based position of the document in its stream.
    pub document: usize,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// What is wrong.
    pub message: String,
}

/// Every non-empty document of `text`, as JSON.
///
/// # Errors
/// The first document that is not YAML or is over a limit.
pub fn documents(text: &str) -> Result<Vec<Json>, YamlError> {
    let mut out = Vec::new();
    for doc in api::yaml::parse_documents(text) {
        let doc = doc.map_err(|e| YamlError {
            document: e.index + 1,
            line: e.mark.line,
            column: e.mark.col,
            message: e.message,
        })?;
        if let Some(root) = doc.root {
            out.push(root.to_json());
        }
    }
    Ok(out)
}

/// The one document of `text` as a JSON object (`{}` when empty).
///
/// # Errors
/// Not YAML, several documents, or not a mapping.
pub fn object(text: &str) -> Result<Json, YamlError> {
    let mut docs = documents(text)?;
    let err = |message: String| YamlError { document: 1, line: 1, column: 1, message };
    match docs.len() {
        0 => Ok(Json::Object(Default::default())),
        1 => match docs.remove(0) {
            value @ Json::Object(_) => Ok(value),
            Json::Null => Ok(Json::Object(Default::default())),
            other => Err(err(format!("expected a mapping, got {}", kind(&other)))),
        },
        n => Err(err(format!("expected one document, got {n}"))),
    }
}

fn kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a sequence",
        Json::Object(_) => "a mapping",
    }
}
