//! YAML and JSON documents as a tree of [`Node`]s that remember where they came from.
//!
//! Every Istio input (files, stdin, later Kubernetes objects) is read into this tree first. The tree
//! keeps the line and column of every value, so that later errors (unknown field, wrong type, failed
//! validation) can name the exact place. It is built from `saphyr-parser` events, which lets us
//! reject what `sigs.k8s.io/yaml` (the reader behind `istioctl validate`) rejects:
//!
//! - duplicate keys in one mapping are an error (Kubernetes' strict decoding reports them too);
//! - scalars are resolved with the YAML 1.2 core schema (`null`/`~`, `true`/`false`, integers,
//!   floats); quoted scalars are always strings;
//! - anchors and aliases are expanded; tags are ignored except `!!str`, which forces a string.
//!
//! JSON is a subset of YAML 1.2, so `.json` files go through the same reader.
//!
//! Hostile input is bounded per document ([`Limits`]), so a small file cannot take the reader down:
//! an alias bomb ("billion laughs") stops at Go yaml.v3's alias ratio guard before its copies are
//! made, nesting stops at [`MAX_DEPTH`] (the tree and every reader of it recurse), a document stops at
//! [`MAX_DOCUMENT_CHARS`], and duplicate keys are found through a hash index on large mappings, so a
//! mapping of n keys costs O(n) instead of O(n²). A document over a limit is an error of that document
//! alone (naming the limit); the reader goes on with the next one.
//!
//! This module is the only place that knows the YAML library, so it can be swapped.

use std::{
    collections::{HashMap, hash_map::Entry},
    fmt,
};

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// A position in a source text: 1-based line, 1-based column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mark {
    /// Line number, starting at 1.
    pub line: u32,
    /// Column number, starting at 1.
    pub col: u32,
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

impl Mark {
    fn from_span(span: &Span) -> Self {
        Mark { line: span.start.line() as u32, col: span.start.col() as u32 + 1 }
    }
}

/// One value of a YAML/JSON document with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Where the value starts.
    pub mark: Mark,
    /// The value.
    pub value: Value,
}

/// The value of a [`Node`]: the JSON data model plus integers kept exact.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null`, `~` or an empty value.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer that fits in `i64`.
    Int(i64),
    /// An integer above `i64::MAX` that fits in `u64`.
    UInt(u64),
    /// A floating point number (including `.inf`, `.nan`).
    Float(f64),
    /// A string (a quoted scalar, or a plain scalar that is not null/bool/number).
    String(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order. Keys are strings (non-string scalar keys are kept as their text).
    Map(Vec<(Key, Node)>),
}

/// A mapping key with its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    /// Where the key starts.
    pub mark: Mark,
    /// The key text.
    pub name: String,
}

impl Value {
    /// A short English name of the value's type, used in error messages ("a string", "a mapping").
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) | Value::UInt(_) => "an integer",
            Value::Float(_) => "a number",
            Value::String(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

impl Node {
    /// Looks up `key` if this node is a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string value, if this node is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Finds the node at a field path such as `spec.http[0].route[1].weight` (the shape used by
    /// [`crate::de`] errors and validation findings). When the path does not exist all the way, returns
    /// the deepest node that does, so a finding about a missing field points at its parent.
    pub fn find_path(&self, path: &str) -> &Node {
        let mut node = self;
        for segment in path.split('.').filter(|s| !s.is_empty()) {
            let (name, indexes) = match segment.find('[') {
                Some(i) => (&segment[..i], &segment[i..]),
                None => (segment, ""),
            };
            if !name.is_empty() {
                match node.get(name) {
                    Some(child) => node = child,
                    None => return node,
                }
            }
            for index in indexes.split(['[', ']']).filter(|s| !s.is_empty()) {
                let child = match (&node.value, index.parse::<usize>()) {
                    (Value::Seq(items), Ok(i)) => items.get(i),
                    (Value::Map(_), _) => node.get(index),
                    _ => None,
                };
                match child {
                    Some(child) => node = child,
                    None => return node,
                }
            }
        }
        node
    }

    /// Converts the tree to a `serde_json::Value` (positions are dropped; non-finite floats become null).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::UInt(u) => J::from(*u),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::String(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => {
                J::Object(entries.iter().map(|(k, v)| (k.name.clone(), v.to_json())).collect())
            }
        }
    }

    /// Builds a tree from a `serde_json::Value`; every node gets `mark`.
    pub fn from_json(value: &serde_json::Value, mark: Mark) -> Node {
        use serde_json::Value as J;
        let value = match value {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::UInt(u)
                } else {
                    Value::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            J::String(s) => Value::String(s.clone()),
            J::Array(items) => Value::Seq(items.iter().map(|v| Node::from_json(v, mark)).collect()),
            J::Object(map) => Value::Map(
                map.iter().map(|(k, v)| (Key { mark, name: k.clone() }, Node::from_json(v, mark))).collect(),
            ),
        };
        Node { mark, value }
    }
}

/// One document of a multi-document stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// 0-based index of the document in its stream (empty documents count).
    pub index: usize,
    /// Where the document's content starts.
    pub mark: Mark,
    /// The root node; `None` for an empty document (only comments or nothing between `---`).
    pub root: Option<Node>,
}

/// A YAML syntax error: the document it broke, where, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {}: {message}", mark.line)]
pub struct SyntaxError {
    /// 0-based index of the document in which the error occurred.
    pub index: usize,
    /// Where the parser stopped.
    pub mark: Mark,
    /// What is wrong.
    pub message: String,
}

/// Deepest nesting of collections in one document: 128 levels, serde_json's recursion limit, which
/// already bounds every object meshpilot reads as JSON (Kubernetes watches, admission reviews). Go's
/// readers allow 10,000, but the tree, its conversions and the typed decoders recurse on the thread's
/// stack; no Istio object comes near this depth (an EnvoyFilter patch nests a few dozen levels).
pub const MAX_DEPTH: usize = 128;

/// Largest document, in characters: 3 MiB, the largest request body the Kubernetes API server accepts
/// (`MaxRequestBodyBytes`, 3 × 1024 × 1024), so no object that a cluster can hold is refused.
pub const MAX_DOCUMENT_CHARS: usize = 3 * 1024 * 1024;

/// Most documents in one file (or standard input): 100,000. Each costs memory however small it is
/// (64 MiB of `---` lines are 16 million empty documents, about 1 GB once read); no real file comes
/// near it (Istio's largest has a few dozen). The documents after it are not read; the file is an
/// error.
pub const MAX_DOCUMENTS: usize = 100_000;

/// Largest config file (or standard input) a reader takes: 64 MiB, room for twenty documents of the
/// largest size the Kubernetes API server accepts ([`MAX_DOCUMENT_CHARS`]); Istio's largest file (all
/// its CRDs in one) is under 1 MiB. A larger file is refused before it is read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Reads at most `limit` bytes from `reader`.
///
/// # Errors
/// The read fails, or there are more than `limit` bytes (`InvalidData`, naming the limit).
pub fn read_bounded(reader: impl std::io::Read, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

fn too_large(limit: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "larger than {} MiB (meshpilot's limit for one config file); not read",
            limit / (1024 * 1024)
        ),
    )
}

/// Checks a config file's size, in bytes, against [`MAX_FILE_BYTES`] before it is read.
///
/// # Errors
/// `InvalidData` naming the size and the limit.
pub fn check_file_size(len: u64) -> std::io::Result<()> {
    if len <= MAX_FILE_BYTES {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{len} bytes, {}", too_large(MAX_FILE_BYTES)),
    ))
}

/// Reads a config file as text, `-` meaning standard input, within [`MAX_FILE_BYTES`].
///
/// # Errors
/// The file cannot be read, is larger than [`MAX_FILE_BYTES`] or is not UTF-8.
pub fn read_config_text(path: &std::path::Path) -> std::io::Result<String> {
    let bytes = if path == std::path::Path::new("-") {
        read_bounded(std::io::stdin().lock(), MAX_FILE_BYTES)?
    } else {
        let file = std::fs::File::open(path)?;
        check_file_size(file.metadata()?.len())?;
        read_bounded(file, MAX_FILE_BYTES)?
    };
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The bounds one document is read within ([`parse_documents_with`]); [`Limits::default`] is
/// [`MAX_DEPTH`] and [`MAX_DOCUMENT_CHARS`] with Go yaml.v3's alias guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of sequences and mappings.
    pub max_depth: usize,
    /// Largest document, in characters from its start to its last event.
    pub max_document_chars: usize,
    /// Most documents in one stream (empty ones count).
    pub max_documents: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_depth: MAX_DEPTH, max_document_chars: MAX_DOCUMENT_CHARS, max_documents: MAX_DOCUMENTS }
    }
}

/// Go yaml.v3's alias guard (`allowedAliasRatio` in its `decode.go`): the share of a document's nodes
/// that may come from alias expansion, 99 % up to 400,000 nodes, falling linearly to 10 % at 4,000,000
/// and above. Checked once a document has more than 1,000 nodes of which more than 100 are copies.
pub fn allowed_alias_ratio(nodes: u64) -> f64 {
    const LOW: u64 = 400_000;
    const HIGH: u64 = 4_000_000;
    if nodes <= LOW {
        0.99
    } else if nodes >= HIGH {
        0.10
    } else {
        0.99 - 0.89 * ((nodes - LOW) as f64 / (HIGH - LOW) as f64)
    }
}

/// `true` if a document of `nodes` nodes, `aliased` of them copies made by aliases, is over Go
/// yaml.v3's alias guard ([`allowed_alias_ratio`]).
pub fn excessive_aliasing(nodes: u64, aliased: u64) -> bool {
    aliased > 100 && nodes > 1000 && aliased as f64 / nodes as f64 > allowed_alias_ratio(nodes)
}

/// Reads every document and reports per-document errors as well (duplicate keys, a document over
/// [`Limits::default`]).
///
/// Returns one entry per document: the document, or the error that made it unreadable. After a hard
/// syntax error no further entries follow.
pub fn parse_documents(text: &str) -> Vec<Result<Document, SyntaxError>> {
    parse_documents_with(text, Limits::default())
}

/// [`parse_documents`] within `limits`. Memory stays proportional to the text: a document over a
/// limit is dropped as soon as the limit is crossed, and its remaining events are only scanned.
pub fn parse_documents_with(text: &str, limits: Limits) -> Vec<Result<Document, SyntaxError>> {
    let mut out = Vec::new();
    let line_starts = std::cell::OnceCell::new();
    let mut builder = Builder::new(text, &line_starts, limits);
    let mut parser = Parser::new_from_str(text);
    let mut index = 0usize;
    let mut doc_mark = Mark::default();
    let mut doc_start = 0usize;
    let mut doc_error: Option<SyntaxError> = None;
    while let Some(next) = parser.next_event() {
        let (event, span) = match next {
            Ok(ev) => ev,
            Err(e) => {
                let m = e.marker();
                // A document already over a limit reports that (the parser's own error, e.g. its
                // flow-nesting "recursion limit exceeded" at 255 levels, follows from it).
                let message = match e.info() {
                    // saphyr's scanner counts flow levels in a u8.
                    "recursion limit exceeded" => {
                        "nesting deeper than 255 levels of [ ] or { } (the YAML parser's limit)".to_string()
                    }
                    info => info.to_string(),
                };
                out.push(Err(doc_error.take().unwrap_or_else(|| SyntaxError {
                    index,
                    mark: Mark { line: m.line() as u32, col: m.col() as u32 + 1 },
                    message,
                })));
                break;
            }
        };
        let mark = Mark::from_span(&span);
        match event {
            Event::StreamStart | Event::Nothing => {}
            Event::StreamEnd => break,
            Event::DocumentStart(_) if index >= limits.max_documents => {
                out.push(Err(SyntaxError {
                    index,
                    mark,
                    message: format!(
                        "more than {} documents in one file (meshpilot's limit); the rest is not read",
                        limits.max_documents
                    ),
                }));
                break;
            }
            Event::DocumentStart(_) => {
                builder = Builder::new(text, &line_starts, limits);
                doc_mark = mark;
                doc_start = span.start.index();
                doc_error = None;
            }
            Event::DocumentEnd => {
                // An empty document is a null scalar in YAML; report it as no content.
                let root = builder.root.take().filter(|n| n.value != Value::Null);
                out.push(match doc_error.take() {
                    Some(err) => Err(err),
                    None => Ok(Document { index, mark: doc_mark, root }),
                });
                index += 1;
            }
            // After its first error a document is only scanned: nothing more is built.
            _ if doc_error.is_some() => {}
            other => {
                let result = if span.start.index().saturating_sub(doc_start) > limits.max_document_chars {
                    Err(format!(
                        "the document is larger than {} characters (meshpilot's limit, the Kubernetes API \
                         server's largest request body)",
                        limits.max_document_chars
                    ))
                } else {
                    builder.event(other, mark)
                };
                if let Err(message) = result {
                    // Free the partial tree now, not at the document's end.
                    builder = Builder::new(text, &line_starts, limits);
                    doc_error = Some(SyntaxError { index, mark, message });
                }
            }
        }
    }
    out
}

/// Builds one document's tree from parser events.
struct Builder<'t> {
    /// The source text (to look at the character a collection starts with).
    text: &'t str,
    /// Byte offset of the start of each line of `text` (line 1 at index 0): `char_at` in O(line
    /// length) instead of a scan from the start of the text, which made parsing quadratic.
    /// Built on first use, once per text (shared by its documents' builders).
    line_starts: &'t std::cell::OnceCell<Vec<usize>>,
    /// Open collections: the node being built and, for mappings, the key waiting for its value.
    stack: Vec<Open>,
    root: Option<Node>,
    /// Anchored nodes by anchor id, with the number of nodes in each (what an alias adds).
    anchors: HashMap<usize, (Node, u64)>,
    limits: Limits,
    /// Nodes in the document so far, copies made by aliases included.
    nodes: u64,
    /// Of `nodes`, those made by aliases.
    aliased: u64,
}

/// Mappings with at least this many keys look duplicates up in a hash index instead of scanning.
const KEY_INDEX_FROM: usize = 16;

struct Open {
    node: Node,
    anchor: usize,
    /// `Builder::nodes` when the collection started (its size is the difference at its end).
    nodes_at_start: u64,
    /// Key name → line of its first occurrence, once the mapping has [`KEY_INDEX_FROM`] keys.
    key_index: Option<HashMap<String, u32>>,
    pending_key: Option<Key>,
    /// A single-pair mapping written without braces inside a flow sequence (`[a: b]`).
    implicit_flow_pair: bool,
    /// The pending key was a plain (unquoted) scalar.
    plain_key: bool,
}

impl<'t> Builder<'t> {
    fn new(text: &'t str, line_starts: &'t std::cell::OnceCell<Vec<usize>>, limits: Limits) -> Self {
        Builder {
            text,
            line_starts,
            stack: Vec::new(),
            root: None,
            anchors: HashMap::new(),
            limits,
            nodes: 0,
            aliased: 0,
        }
    }

    /// Opens a collection, within the depth limit.
    fn open(&mut self, node: Node, anchor: usize, implicit_flow_pair: bool) -> Result<(), String> {
        if self.stack.len() >= self.limits.max_depth {
            return Err(format!(
                "nesting deeper than {} levels (meshpilot's limit, serde_json's recursion limit)",
                self.limits.max_depth
            ));
        }
        self.nodes += 1;
        self.stack.push(Open {
            node,
            anchor,
            nodes_at_start: self.nodes - 1,
            key_index: None,
            pending_key: None,
            implicit_flow_pair,
            plain_key: false,
        });
        Ok(())
    }

    fn event(&mut self, event: Event<'_>, mark: Mark) -> Result<(), String> {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let forced_string = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let plain = style == ScalarStyle::Plain && !forced_string;
                if let Some(open) = self.stack.last_mut()
                    && matches!(open.node.value, Value::Map(_))
                    && open.pending_key.is_none()
                {
                    open.plain_key = plain;
                }
                let value = if plain { resolve_plain(&text) } else { Value::String(text.into_owned()) };
                self.nodes += 1;
                self.finish(Node { mark, value }, anchor, 1)
            }
            Event::Alias(id) => {
                let Some((node, size)) = self.anchors.get(&id) else {
                    return Err("alias refers to an unknown anchor".to_string());
                };
                let size = *size;
                // Checked before the copy is made: a bomb never gets to allocate its expansion.
                if excessive_aliasing(self.nodes + size, self.aliased + size) {
                    return Err(format!(
                        "document contains excessive aliasing: an alias would make it {} nodes, {} of them \
                         copies (Go yaml.v3's alias guard)",
                        self.nodes + size,
                        self.aliased + size
                    ));
                }
                let node = Node { mark, value: node.value.clone() };
                self.nodes += size;
                self.aliased += size;
                self.finish(node, 0, size)
            }
            Event::SequenceStart(anchor, _) => {
                self.open(Node { mark, value: Value::Seq(Vec::new()) }, anchor, false)
            }
            Event::MappingStart(anchor, _) => {
                let in_flow_seq = self.stack.last().is_some_and(|o| {
                    matches!(o.node.value, Value::Seq(_)) && self.char_at(o.node.mark) == Some('[')
                });
                let implicit_flow_pair = in_flow_seq && self.char_at(mark) != Some('{');
                self.open(Node { mark, value: Value::Map(Vec::new()) }, anchor, implicit_flow_pair)
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let mut open = self.stack.pop().ok_or("unbalanced collection end")?;
                if open.implicit_flow_pair && open.plain_key {
                    open.node = go_yaml_flow_scalar(open.node);
                }
                let size = self.nodes - open.nodes_at_start;
                self.finish(open.node, open.anchor, size)
            }
            _ => Ok(()),
        }
    }

    /// The character at a mark (marks count characters, not bytes).
    fn char_at(&self, mark: Mark) -> Option<char> {
        // Most texts have no flow sequence: no line index.
        let line_starts = self.line_starts.get_or_init(|| {
            std::iter::once(0).chain(self.text.match_indices('\n').map(|(i, _)| i + 1)).collect()
        });
        let line = mark.line.checked_sub(1)? as usize;
        let start = *line_starts.get(line)?;
        let end = line_starts.get(line + 1).copied().unwrap_or(self.text.len());
        self.text.get(start..end)?.chars().nth(mark.col.checked_sub(1)? as usize)
    }

    /// Places a complete node of `size` nodes into its parent (or as the root).
    fn finish(&mut self, node: Node, anchor: usize, size: u64) -> Result<(), String> {
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        let Some(parent) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        match &mut parent.node.value {
            Value::Seq(items) => items.push(node),
            Value::Map(entries) => match parent.pending_key.take() {
                None => {
                    let name = match node.value {
                        Value::String(s) => s,
                        Value::Null => String::new(),
                        Value::Bool(b) => b.to_string(),
                        Value::Int(i) => i.to_string(),
                        Value::UInt(u) => u.to_string(),
                        Value::Float(f) => f.to_string(),
                        Value::Seq(_) | Value::Map(_) => {
                            return Err("a mapping key must be a scalar, not a collection".to_string());
                        }
                    };
                    let duplicate =
                        |first: u32| format!("key \"{name}\" already set in map (first set at line {first})");
                    if parent.key_index.is_none() && entries.len() + 1 >= KEY_INDEX_FROM {
                        let index = entries.iter().map(|(k, _)| (k.name.clone(), k.mark.line)).collect();
                        parent.key_index = Some(index);
                    }
                    match &mut parent.key_index {
                        Some(index) => match index.entry(name.clone()) {
                            Entry::Occupied(first) => return Err(duplicate(*first.get())),
                            Entry::Vacant(slot) => {
                                slot.insert(node.mark.line);
                            }
                        },
                        None => {
                            if let Some((prev, _)) = entries.iter().find(|(k, _)| k.name == name) {
                                return Err(duplicate(prev.mark.line));
                            }
                        }
                    }
                    parent.pending_key = Some(Key { mark: node.mark, name });
                }
                Some(key) => entries.push((key, node)),
            },
            _ => unreachable!("only collections are pushed on the stack"),
        }
        Ok(())
    }
}

/// `[1.2.3.4, 2001:db8::]`: YAML 1.2 reads the second item as the one-pair mapping
/// `{"2001:db8:": null}` (a `:` before `]` or `,` is a mapping indicator in flow context), while Go's
/// yaml (what Istio and kubectl use) reads the string `2001:db8::`. We follow Go: a brace-less one-pair
/// mapping in a flow sequence, whose key is a plain scalar and whose value is empty, is that key
/// followed by `:`.
fn go_yaml_flow_scalar(node: Node) -> Node {
    match &node.value {
        Value::Map(entries) if entries.len() == 1 && entries[0].1.value == Value::Null => {
            let key = &entries[0].0;
            Node { mark: node.mark, value: Value::String(format!("{}:", key.name)) }
        }
        _ => node,
    }
}

/// Resolves a plain scalar with the YAML 1.2 core schema.
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Value::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    let bytes = text.as_bytes();
    let first = bytes[0];
    if !(first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.') {
        return Value::String(text.to_string());
    }
    let (neg, digits) = match first {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let radix_parse = |s: &str, radix: u32| -> Option<Value> {
        if s.is_empty() {
            return None;
        }
        let u = u64::from_str_radix(s, radix).ok()?;
        Some(int_value(neg, u))
    };
    if let Some(hex) = digits.strip_prefix("0x") {
        if let Some(v) = radix_parse(hex, 16) {
            return v;
        }
    } else if let Some(oct) = digits.strip_prefix("0o") {
        if let Some(v) = radix_parse(oct, 8) {
            return v;
        }
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Some(v) = radix_parse(digits, 10) {
            return v;
        }
        // Too large for u64: keep as a float, like JSON parsers do.
        if let Ok(f) = text.parse::<f64>() {
            return Value::Float(f);
        }
    }
    if is_core_float(digits)
        && let Ok(f) = text.parse::<f64>()
    {
        return Value::Float(f);
    }
    Value::String(text.to_string())
}

fn int_value(neg: bool, u: u64) -> Value {
    if !neg {
        return i64::try_from(u).map_or(Value::UInt(u), Value::Int);
    }
    if u <= i64::MAX as u64 + 1 {
        Value::Int((u as i128).wrapping_neg() as i64)
    } else {
        Value::Float(-(u as f64))
    }
}

/// YAML 1.2 core float: `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`.
fn is_core_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let s2 = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - s2;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let s3 = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == s3 {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Node {
        let docs = parse_documents(text);
        assert_eq!(docs.len(), 1, "{docs:?}");
        docs.into_iter().next().unwrap().unwrap().root.unwrap()
    }

    #[test]
    fn scalars_follow_the_core_schema() {
        let n = one(
            "a: 1\nb: '1'\nc: 1.5\nd: true\ne: ~\nf: yes\ng: -7\nh: 0x1F\ni: 1e3\nj: 18446744073709551615\n",
        );
        assert_eq!(n.get("a").unwrap().value, Value::Int(1));
        assert_eq!(n.get("b").unwrap().value, Value::String("1".into()));
        assert_eq!(n.get("c").unwrap().value, Value::Float(1.5));
        assert_eq!(n.get("d").unwrap().value, Value::Bool(true));
        assert_eq!(n.get("e").unwrap().value, Value::Null);
        assert_eq!(n.get("f").unwrap().value, Value::String("yes".into()));
        assert_eq!(n.get("g").unwrap().value, Value::Int(-7));
        assert_eq!(n.get("h").unwrap().value, Value::Int(31));
        assert_eq!(n.get("i").unwrap().value, Value::Float(1000.0));
        assert_eq!(n.get("j").unwrap().value, Value::UInt(u64::MAX));
    }

    #[test]
    fn marks_are_one_based() {
        let n = one("a:\n  b: x\n");
        let b = n.get("a").unwrap().get("b").unwrap();
        assert_eq!(b.mark, Mark { line: 2, col: 6 });
    }

    #[test]
    fn duplicate_keys_fail_only_their_document() {
        let docs = parse_documents("a: 1\na: 2\n---\nb: 1\n");
        assert_eq!(docs.len(), 2);
        let err = docs[0].as_ref().unwrap_err();
        assert!(err.message.contains("key \"a\" already set"), "{err:?}");
        assert_eq!(err.mark.line, 2);
        assert!(docs[1].is_ok());
    }

    #[test]
    fn syntax_error_keeps_earlier_documents() {
        let docs = parse_documents("a: 1\n---\nb: [1, 2\n");
        assert!(docs[0].is_ok());
        assert!(docs.last().unwrap().is_err());
    }

    #[test]
    fn json_is_read_too() {
        let n = one("{\n  \"a\": [1, \"x\", null],\n  \"b\": {\"c\": false}\n}\n");
        assert_eq!(n.to_json(), serde_json::json!({"a": [1, "x", null], "b": {"c": false}}));
    }

    #[test]
    fn find_path_walks_fields_and_indexes() {
        let n = one("spec:\n  http:\n  - route:\n    - weight: 1\n    - weight: 2\n");
        assert_eq!(n.find_path("spec.http[0].route[1].weight").mark.line, 5);
        // A missing field resolves to its deepest existing ancestor.
        assert_eq!(n.find_path("spec.http[0].route[1].destination.host").mark.line, 5);
        assert_eq!(n.find_path("spec.tcp[3]").mark.line, 2);
    }

    #[test]
    fn ipv6_in_flow_sequences_reads_as_go_yaml_does() {
        let n = one("a: [1.2.3.4, 001:db8::, \"x\"]\nb: [{k: v}, c: d]\nc: [2001:db8::1]\n");
        let a: Vec<_> = match &n.get("a").unwrap().value {
            Value::Seq(items) => items.iter().map(|i| i.value.clone()).collect(),
            v => panic!("{v:?}"),
        };
        assert_eq!(a[1], Value::String("001:db8::".into()));
        // Explicit mappings and pairs with values stay mappings.
        assert_eq!(n.get("b").unwrap().to_json(), serde_json::json!([{"k": "v"}, {"c": "d"}]));
        assert_eq!(n.get("c").unwrap().to_json(), serde_json::json!(["2001:db8::1"]));
    }

    #[test]
    fn anchors_expand() {
        let n = one("a: &x {k: v}\nb: *x\n");
        assert_eq!(n.get("b").unwrap().get("k").unwrap().as_str(), Some("v"));
    }

    /// The classic "billion laughs": nine levels of ten aliases each, 10⁹ strings if expanded.
    const ALIAS_BOMB: &str = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n\
        b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n\
        d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n\
        f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n\
        h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";

    #[test]
    fn an_alias_bomb_fails_its_document_only() {
        let text = format!("{ALIAS_BOMB}---\nok: 1\n");
        let docs = parse_documents(&text);
        assert_eq!(docs.len(), 2, "{docs:?}");
        let err = docs[0].as_ref().unwrap_err();
        assert!(err.message.contains("excessive aliasing"), "{err:?}");
        assert_eq!(docs[1].as_ref().unwrap().root.as_ref().unwrap().get("ok").unwrap().value, Value::Int(1));
    }

    #[test]
    fn moderate_aliasing_is_kept() {
        // 200 copies of a 3-node mapping: over 100 aliases, but the document stays under 1,000 nodes.
        let mut text = String::from("base: &b {k: v}\nlist:\n");
        for _ in 0..200 {
            text.push_str("- *b\n");
        }
        let n = one(&text);
        match &n.get("list").unwrap().value {
            Value::Seq(items) => assert_eq!(items.len(), 200),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn alias_ratio_follows_go_yaml() {
        assert_eq!(allowed_alias_ratio(1_000), 0.99);
        assert_eq!(allowed_alias_ratio(400_000), 0.99);
        assert!((allowed_alias_ratio(2_200_000) - 0.545).abs() < 1e-9);
        assert_eq!(allowed_alias_ratio(4_000_000), 0.10);
        assert_eq!(allowed_alias_ratio(u64::MAX), 0.10);
        assert!(!excessive_aliasing(1_000, 999), "1,000 nodes is under the guard's floor");
        assert!(!excessive_aliasing(10_000, 100), "100 copies is under the guard's floor");
        assert!(excessive_aliasing(10_000, 9_950));
        assert!(!excessive_aliasing(10_000, 9_850));
    }

    #[test]
    fn deep_nesting_fails_its_document_only() {
        // 20,000 levels in 40 kB: block sequences on one line, then flow sequences (the parser
        // itself stops flow nesting at 255 levels, ending the stream).
        let depth = 20_000;
        let block = format!("{}x\n", "- ".repeat(depth));
        let docs = parse_documents(&format!("{block}---\nok: 1\n"));
        let err = docs[0].as_ref().unwrap_err();
        assert!(err.message.contains("nesting deeper than 128 levels"), "{err:?}");
        assert!(matches!(docs.get(1), Some(Ok(Document { root: Some(_), .. }))), "{docs:?}");
        let flow = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let err = parse_documents(&flow).remove(0).unwrap_err();
        assert!(err.message.contains("nesting deeper than 255 levels"), "{err:?}");
        // Between the two limits, ours.
        let flow = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let err = parse_documents(&flow).remove(0).unwrap_err();
        assert!(err.message.contains("nesting deeper than 128 levels"), "{err:?}");
    }

    #[test]
    fn nesting_up_to_the_limit_is_read() {
        let text = format!("{}x{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        let mut node = &one(&text);
        let mut depth = 0;
        while let Value::Seq(items) = &node.value {
            depth += 1;
            node = &items[0];
        }
        assert_eq!((depth, node.as_str()), (MAX_DEPTH, Some("x")));
    }

    #[test]
    fn duplicates_in_large_mappings_are_found() {
        let mut text: String = (0..80_000).map(|i| format!("key{i}: {i}\n")).collect();
        assert_eq!(one(&text).to_json().as_object().unwrap().len(), 80_000);
        text.push_str("key40000: again\n");
        let err = parse_documents(&text).remove(0).unwrap_err();
        assert!(
            err.message.contains("key \"key40000\" already set in map (first set at line 40001)"),
            "{err:?}"
        );
        assert_eq!(err.mark.line, 80_001);
    }

    #[test]
    fn a_document_over_the_size_limit_fails_alone() {
        let limits = Limits { max_document_chars: 100, ..Limits::default() };
        let big: String = (0..50).map(|i| format!("k{i}: v\n")).collect();
        let docs = parse_documents_with(&format!("small: 1\n---\n{big}---\nlast: 1\n"), limits);
        assert_eq!(docs.len(), 3, "{docs:?}");
        assert!(docs[0].is_ok() && docs[2].is_ok(), "{docs:?}");
        let err = docs[1].as_ref().unwrap_err();
        assert!(err.message.contains("larger than 100 characters"), "{err:?}");
    }

    #[test]
    fn documents_past_the_limit_are_not_read() {
        let limits = Limits { max_documents: 3, ..Limits::default() };
        let docs = parse_documents_with("a: 1\n---\n---\nb: 2\n---\nc: 3\n", limits);
        assert_eq!(docs.len(), 4, "{docs:?}");
        assert!(docs[..3].iter().all(Result::is_ok), "{docs:?}");
        let err = docs[3].as_ref().unwrap_err();
        assert_eq!(err.index, 3);
        assert!(err.message.contains("more than 3 documents"), "{err:?}");
        // The default reads 100,000 and stops at the next.
        let many = "---\n".repeat(MAX_DOCUMENTS + 5);
        let docs = parse_documents(&many);
        assert_eq!(docs.len(), MAX_DOCUMENTS + 1);
        assert!(docs.last().unwrap().is_err());
    }

    #[test]
    fn reads_are_bounded() {
        assert_eq!(read_bounded(&b"12345"[..], 5).unwrap(), b"12345");
        let err = read_bounded(&b"123456"[..], 5).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(check_file_size(MAX_FILE_BYTES).is_ok());
        let err = check_file_size(MAX_FILE_BYTES + 1).unwrap_err().to_string();
        assert!(err.starts_with("67108865 bytes, larger than 64 MiB"), "{err}");
    }

    #[test]
    fn empty_documents_are_kept_as_none() {
        let docs = parse_documents("---\n# only a comment\n---\na: 1\n");
        assert!(docs.iter().any(|d| matches!(d, Ok(Document { root: None, .. }))));
    }
}
