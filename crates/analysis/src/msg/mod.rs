//! Istio's analysis message types (`pkg/config/analysis/msg`, `pkg/config/analysis/diag`): levels,
//! the message catalogue ([`table`]) and the rendering of a message's text from its Go `fmt` template.

use std::{fmt, str::FromStr};

mod table;

pub use table::*;

/// Severity of a message (Istio's `diag.Level`). Ordered from the least to the most severe, so
/// `level >= threshold` means "at or above the threshold".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Informational.
    Info,
    /// Something is probably wrong.
    Warning,
    /// Something is wrong.
    Error,
}

impl Level {
    /// Every level, as istioctl lists them (`Info`, `Warning`, `Error`).
    pub const ALL: [Level; 3] = [Level::Info, Level::Warning, Level::Error];

    /// `Info`, `Warning` or `Error` (istioctl's spelling in output lines and JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Info => "Info",
            Level::Warning => "Warning",
            Level::Error => "Error",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Level {
    type Err = String;

    /// Case-insensitive `info`, `warning` or `error` (istioctl's `--failure-threshold` values).
    ///
    /// # Errors
    /// Any other name, with the accepted names.
    fn from_str(s: &str) -> Result<Level, String> {
        Level::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("invalid level {s:?}; valid options: [Info Warning Error]"))
    }
}

/// One kind of message: code (`IST0101`), name, level and text template (Istio's `diag.MessageType`).
#[derive(Debug, PartialEq, Eq)]
pub struct MessageType {
    /// `IST` and four digits.
    pub code: &'static str,
    /// Istio's name (`ReferencedResourceNotFound`).
    pub name: &'static str,
    /// Severity.
    pub level: Level,
    /// Go `fmt` template (`%s`, `%q`, `%v`, `%d`), rendered by [`render`].
    pub template: &'static str,
    /// What the message means (from Istio's catalogue).
    pub description: &'static str,
}

impl MessageType {
    /// The type with this code (`IST0101`), if any.
    pub fn by_code(code: &str) -> Option<&'static MessageType> {
        ALL.iter().copied().find(|t| t.code == code)
    }

    /// Renders the message text from `args` (see [`render`]).
    pub fn text(&self, args: &[Arg]) -> String {
        render(self.template, args)
    }
}

/// One argument of a message template: the Go values Istio's analyzers pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// A string (also an error's text).
    Str(String),
    /// An integer.
    Int(i64),
    /// A list of strings (`[]string`).
    Strs(Vec<String>),
    /// A list of integers (`[]int`, `[]int32`).
    Ints(Vec<i64>),
}

impl From<&str> for Arg {
    fn from(s: &str) -> Arg {
        Arg::Str(s.to_string())
    }
}
impl From<String> for Arg {
    fn from(s: String) -> Arg {
        Arg::Str(s)
    }
}
impl From<&String> for Arg {
    fn from(s: &String) -> Arg {
        Arg::Str(s.clone())
    }
}
impl From<i64> for Arg {
    fn from(i: i64) -> Arg {
        Arg::Int(i)
    }
}
impl From<u32> for Arg {
    fn from(i: u32) -> Arg {
        Arg::Int(i64::from(i))
    }
}
impl From<i32> for Arg {
    fn from(i: i32) -> Arg {
        Arg::Int(i64::from(i))
    }
}
impl From<Vec<String>> for Arg {
    fn from(v: Vec<String>) -> Arg {
        Arg::Strs(v)
    }
}
impl From<Vec<i64>> for Arg {
    fn from(v: Vec<i64>) -> Arg {
        Arg::Ints(v)
    }
}

/// Go's `%q` of a string (`strconv.Quote`): validation's, shared by every Go-formatted message.
pub use validation::common::go_quote;

fn render_arg(verb: char, arg: &Arg) -> String {
    let join = |items: Vec<String>| format!("[{}]", items.join(" "));
    match (verb, arg) {
        ('q', Arg::Str(s)) => go_quote(s),
        ('q', Arg::Strs(v)) => join(v.iter().map(|s| go_quote(s)).collect()),
        ('q', Arg::Int(i)) => format!("'{}'", char::from_u32(*i as u32).unwrap_or('\u{fffd}')),
        (_, Arg::Str(s)) => s.clone(),
        (_, Arg::Int(i)) => i.to_string(),
        (_, Arg::Strs(v)) => join(v.clone()),
        (_, Arg::Ints(v)) => join(v.iter().map(i64::to_string).collect()),
    }
}

/// Renders a Go `fmt` template with `%s`, `%v`, `%d`, `%q` and `%%`, as Go's `fmt.Sprintf` prints the
/// argument types analyzers pass (lists as `[a b]`). A missing argument prints `%!v(MISSING)` and extra
/// arguments are appended as `%!(EXTRA …)`, as Go does, so a wrong call shows in the output instead of
/// panicking.
pub fn render(template: &str, args: &[Arg]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut next = 0;
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some(verb) => {
                match args.get(next) {
                    Some(arg) => out.push_str(&render_arg(verb, arg)),
                    None => out.push_str(&format!("%!{verb}(MISSING)")),
                }
                next += 1;
            }
            None => out.push_str("%!(NOVERB)"),
        }
    }
    if next < args.len() {
        let extra: Vec<String> = args[next..].iter().map(|a| render_arg('v', a)).collect();
        out.push_str(&format!("%!(EXTRA {})", extra.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_render_like_go_fmt() {
        assert_eq!(
            REFERENCED_RESOURCE_NOT_FOUND.text(&["gateway".into(), "x\"y".into()]),
            "Referenced gateway not found: \"x\\\"y\""
        );
        assert_eq!(
            CONFLICTING_SIDECAR_WORKLOAD_SELECTORS.text(&[
                vec!["a".to_string(), "b".to_string()].into(),
                "ns".into(),
                "p".into()
            ]),
            "The Sidecars [a b] in namespace \"ns\" select the same workload pod \"p\", which can lead to \
             undefined behavior."
        );
        assert_eq!(render("%d of %v", &[Arg::Int(3)]), "3 of %!v(MISSING)");
        assert_eq!(render("100%%", &[Arg::Int(1)]), "100%%!(EXTRA 1)");
    }

    #[test]
    fn the_catalogue_is_ordered_and_unique() {
        for pair in ALL.windows(2) {
            assert!(pair[0].code < pair[1].code, "{} before {}", pair[0].code, pair[1].code);
        }
        assert_eq!(MessageType::by_code("IST0106").map(|t| t.name), Some("SchemaValidationError"));
        assert_eq!("warning".parse::<Level>(), Ok(Level::Warning));
        assert!("fatal".parse::<Level>().is_err());
    }
}
