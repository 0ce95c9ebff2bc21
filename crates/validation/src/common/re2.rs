//! Regular expressions as Go's RE2 (`regexp.Compile`) reads them, Istio's regex length limit.

use super::go::go_quote;

/// Longest regex Istio accepts; Envoy limits the compiled RE2 program size, which Istio approximates
/// by the length of the text.
pub const MAX_REGEX_LENGTH: usize = 1024;

/// Checks a regex used in Envoy config, following Istio's `validateStringRegexp`: at most 1024 bytes
/// (`"uri": regex is too large, max length allowed is 1024`) and valid RE2 syntax as Go reads it
/// (`"uri": error parsing regexp: missing closing ]: `[`; Istio uses RE2 style regex-based match
/// (https://github.com/google/re2/wiki/Syntax)`). `location` names the field, as in Istio's messages.
pub fn validate_string_regexp(re: &str, location: &str) -> Result<(), String> {
    if re.len() > MAX_REGEX_LENGTH {
        return Err(format!(
            "{}: regex is too large, max length allowed is {MAX_REGEX_LENGTH}",
            go_quote(location)
        ));
    }
    validate_regex(re).map_err(|e| {
        format!(
            "{}: {e}; Istio uses RE2 style regex-based match (https://github.com/google/re2/wiki/Syntax)",
            go_quote(location)
        )
    })
}

/// Checks RE2 regex syntax the way Istio does, i.e. with Go's `regexp.Compile`; the error is Go's,
/// e.g. ``error parsing regexp: invalid repeat count: `{1001}` ``.
///
/// Go's RE2 dialect, as opposed to the `regex` crate's: `\Q…\E` quotes literally; a `{` that does not
/// start a well-formed repetition is a literal (`a{,3}`, `a{x}`); repetition counts go up to 1000, also
/// when nested (`(a{100}){100}` is rejected); stacked repetitions are errors (`a**`, `a{2}{3}`);
/// escaped punctuation is literal (`\<`, `\_`); `\C`, `\Z`, `\e`, `\u`, back-references, look-around and
/// the `x`/`u`/`R` flags are rejected; `\pN` names are Go's Unicode categories and scripts; capture
/// names are ASCII letters, digits and `_` (duplicates allowed); `[` inside a class is literal unless it
/// starts `[:name:]`.
///
/// The pattern is checked by a scanner that follows Go's parser token by token (so the first error is
/// the one Go reports), and then rewritten into an equivalent canonical pattern that `regex_syntax`
/// parses as a second check. Go's limits on tree height (1000) and program size are not modelled; they
/// cannot be reached by patterns of Istio's maximum length ([`MAX_REGEX_LENGTH`]).
pub fn validate_regex(re: &str) -> Result<(), String> {
    let canonical =
        go_re::scan(re).map_err(|(code, expr)| format!("error parsing regexp: {code}: `{expr}`"))?;
    let mut parser = regex_syntax::ast::parse::ParserBuilder::new().nest_limit(4096).build();
    match parser.parse(&canonical) {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.kind(), regex_syntax::ast::ErrorKind::NestLimitExceeded(_)) => {
            Err(format!("error parsing regexp: expression nests too deeply: `{re}`"))
        }
        Err(e) => Err(format!("error parsing regexp: {}: `{re}`", e.kind())),
    }
}

/// A Go-RE2 syntax scanner: reports Go's first error, or returns the pattern rewritten for
/// `regex_syntax` (literals as `\x{…}`, Unicode classes as `\pL`, capture names dropped, flag groups
/// normalized and moved to just before the next atom).
mod go_re {
    /// Error kinds, in Go's words.
    pub(super) const INVALID_CHAR_RANGE: &str = "invalid character class range";
    pub(super) const INVALID_ESCAPE: &str = "invalid escape sequence";
    pub(super) const INVALID_NAMED_CAPTURE: &str = "invalid named capture";
    pub(super) const INVALID_PERL_OP: &str = "invalid or unsupported Perl syntax";
    pub(super) const INVALID_REPEAT_OP: &str = "invalid nested repetition operator";
    pub(super) const INVALID_REPEAT_SIZE: &str = "invalid repeat count";
    pub(super) const MISSING_BRACKET: &str = "missing closing ]";
    pub(super) const MISSING_PAREN: &str = "missing closing )";
    pub(super) const MISSING_REPEAT_ARGUMENT: &str = "missing argument to repetition operator";
    pub(super) const TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
    pub(super) const UNEXPECTED_PAREN: &str = "unexpected )";

    type Error = (&'static str, String);

    fn err<T>(code: &'static str, expr: &str) -> Result<T, Error> {
        Err((code, expr.to_owned()))
    }

    /// Unicode class names Go 1.26 accepts in `\p{…}` (general categories and their long names,
    /// scripts, and `Any`, `Assigned`, `ASCII`), compared after [`canonical_name`].
    #[rustfmt::skip]
    const UNICODE_NAMES: &[&str] = &[
        "ASCII", "Adlam", "Ahom", "Any", "Arabic", "Armenian", "Assigned", "Avestan", "Balinese", "Bamum",
        "Batak", "Bengali", "Bhaiksuki", "Bopomofo", "Brahmi", "Braille", "Buginese", "Buhid", "C", "Carian",
        "Cased_Letter", "Cc", "Cf", "Chakma", "Cham", "Cherokee", "Chorasmian", "Close_Punctuation", "Cn",
        "Co", "Combining_Mark", "Common", "Connector_Punctuation", "Control", "Coptic", "Cs", "Cuneiform",
        "Currency_Symbol", "Cypriot", "Cyrillic", "Dash_Punctuation", "Decimal_Number", "Deseret",
        "Devanagari", "Dogra", "Duployan", "Elbasan", "Elymaic", "Enclosing_Mark", "Ethiopic",
        "Final_Punctuation", "Format", "Georgian", "Glagolitic", "Gothic", "Grantha", "Greek", "Gujarati",
        "Gurmukhi", "Han", "Hangul", "Hanunoo", "Hatran", "Hebrew", "Hiragana", "Inherited",
        "Initial_Punctuation", "Javanese", "Kaithi", "Kannada", "Katakana", "Kawi", "Kharoshthi", "Khmer",
        "Khojki", "Khudawadi", "L", "LC", "Lao", "Latin", "Lepcha", "Letter", "Letter_Number", "Limbu",
        "Line_Separator", "Lisu", "Ll", "Lm", "Lo", "Lowercase_Letter", "Lt", "Lu", "Lycian", "Lydian", "M",
        "Mahajani", "Makasar", "Malayalam", "Mandaic", "Manichaean", "Marchen", "Mark", "Math_Symbol", "Mc",
        "Me", "Medefaidrin", "Miao", "Mn", "Modi", "Modifier_Letter", "Modifier_Symbol", "Mongolian", "Mro",
        "Multani", "Myanmar", "N", "Nabataean", "Nandinagari", "Nd", "Newa", "Nko", "Nl", "No",
        "Nonspacing_Mark", "Number", "Nushu", "Ogham", "Open_Punctuation", "Oriya", "Osage", "Osmanya",
        "Other", "Other_Letter", "Other_Number", "Other_Punctuation", "Other_Symbol", "P", "Palmyrene",
        "Paragraph_Separator", "Pc", "Pd", "Pe", "Pf", "Phoenician", "Pi", "Po", "Private_Use", "Ps",
        "Punctuation", "Rejang", "Runic", "S", "Samaritan", "Saurashtra", "Sc", "Separator", "Sharada",
        "Shavian", "Siddham", "Sinhala", "Sk", "Sm", "So", "Sogdian", "Soyombo", "Space_Separator",
        "Spacing_Mark", "Sundanese", "Surrogate", "Symbol", "Syriac", "Tagalog", "Tagbanwa", "Takri", "Tamil",
        "Tangsa", "Tangut", "Telugu", "Thaana", "Thai", "Tibetan", "Tifinagh", "Tirhuta", "Titlecase_Letter",
        "Toto", "Ugaritic", "Unassigned", "Uppercase_Letter", "Vai", "Vithkuqi", "Wancho", "Yezidi", "Yi",
        "Z", "Zl", "Zp", "Zs", "cntrl", "digit", "punct",
    ];

    /// POSIX class names Go accepts in `[[:name:]]` (also negated, `[[:^name:]]`).
    const POSIX_NAMES: &[&str] = &[
        "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space",
        "upper", "word", "xdigit",
    ];

    /// Go's lookup key for a Unicode class name: `_`, `-` and spaces dropped, the first letter
    /// upper-cased and the other ASCII letters lower-cased.
    fn canonical_name(name: &str) -> String {
        let mut out = String::with_capacity(name.len());
        let mut first = true;
        for c in name.chars() {
            match c {
                '_' | '-' | ' ' => {}
                c if first => {
                    out.push(c.to_ascii_uppercase());
                    first = false;
                }
                c => out.push(c.to_ascii_lowercase()),
            }
        }
        out
    }

    fn known_unicode_class(name: &str) -> bool {
        let want = canonical_name(name);
        UNICODE_NAMES.iter().any(|n| canonical_name(n) == want)
    }

    /// What is on top of Go's parse stack at the current group level.
    #[derive(Clone, Copy)]
    enum Top {
        /// Nothing (start of the pattern).
        Empty,
        /// `(` or `|`: a repetition here has no argument.
        Marker,
        /// An expression; `product` is the largest product of nested counted repetitions in it.
        Atom { product: u64 },
    }

    struct Level {
        top: Top,
        /// Largest repetition product among the finished expressions of this level.
        max_product: u64,
    }

    impl Level {
        fn fold(&mut self) {
            if let Top::Atom { product } = self.top {
                self.max_product = self.max_product.max(product);
            }
        }
    }

    struct Scanner<'a> {
        whole: &'a str,
        out: String,
        pending_flags: String,
        stack: Vec<Level>,
        level: Level,
    }

    /// Writes one literal code point in a form `regex_syntax` reads everywhere.
    fn push_literal(out: &mut String, value: u32) {
        let value = if (0xD800..=0xDFFF).contains(&value) { 0xFFFD } else { value };
        match char::from_u32(value) {
            Some(c) if c.is_ascii_alphanumeric() => out.push(c),
            _ => out.push_str(&format!("\\x{{{value:X}}}")),
        }
    }

    impl Scanner<'_> {
        /// Starts a new expression at this level, writing `text` for it.
        fn atom(&mut self, text: &str) {
            self.out.push_str(&std::mem::take(&mut self.pending_flags));
            self.out.push_str(text);
            self.level.fold();
            self.level.top = Top::Atom { product: 1 };
        }

        fn literal(&mut self, value: u32) {
            let mut text = String::new();
            push_literal(&mut text, value);
            self.atom(&text);
        }
    }

    /// The first character of `s` and its length; U+FFFD and 0 at the end (as Go's `nextRune` does).
    fn next_char(s: &str) -> (char, usize) {
        s.chars().next().map_or(('\u{FFFD}', 0), |c| (c, c.len_utf8()))
    }

    /// Go's `parseEscape`: an escape denoting one character, at the start of `s` (which begins with
    /// `\`). Returns the code point and the length consumed.
    fn parse_escape(s: &str) -> Result<(u32, usize), Error> {
        let rest = &s[1..];
        if rest.is_empty() {
            return err(TRAILING_BACKSLASH, "");
        }
        let (c, len) = next_char(rest);
        let mut pos = 1 + len;
        let invalid = |end: usize| err(INVALID_ESCAPE, &s[..end.min(s.len())]);
        let is_octal = |b: Option<&u8>| b.is_some_and(|b| (b'0'..=b'7').contains(b));
        match c {
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((c as u32, pos)),
            '1'..='7' if !is_octal(s.as_bytes().get(pos)) => invalid(pos),
            '0'..='7' => {
                let mut value = c as u32 - '0' as u32;
                for _ in 1..3 {
                    match s.as_bytes().get(pos) {
                        Some(&b) if (b'0'..=b'7').contains(&b) => {
                            value = value * 8 + u32::from(b - b'0');
                            pos += 1;
                        }
                        _ => break,
                    }
                }
                Ok((value, pos))
            }
            'x' => {
                if pos >= s.len() {
                    return invalid(pos);
                }
                let (c, len) = next_char(&s[pos..]);
                pos += len;
                if c == '{' {
                    let mut value = 0u32;
                    let mut digits = 0;
                    loop {
                        if pos >= s.len() {
                            return invalid(pos);
                        }
                        let (c, len) = next_char(&s[pos..]);
                        pos += len;
                        if c == '}' {
                            break;
                        }
                        let Some(v) = c.to_digit(16) else {
                            return invalid(pos);
                        };
                        value = value * 16 + v;
                        if value > 0x10FFFF {
                            return invalid(pos);
                        }
                        digits += 1;
                    }
                    if digits == 0 {
                        return invalid(pos);
                    }
                    return Ok((value, pos));
                }
                let high = c.to_digit(16);
                let (c2, len2) = next_char(&s[pos..]);
                pos += len2;
                match (high, if len2 == 0 { None } else { c2.to_digit(16) }) {
                    (Some(h), Some(l)) => Ok((h * 16 + l, pos)),
                    _ => invalid(pos),
                }
            }
            'a' => Ok((7, pos)),
            'f' => Ok((12, pos)),
            'n' => Ok((10, pos)),
            'r' => Ok((13, pos)),
            't' => Ok((9, pos)),
            'v' => Ok((11, pos)),
            _ => invalid(pos),
        }
    }

    /// Go's `parseUnicodeClass` at `\p` / `\P` (the start of `s`). Returns the canonical text and the
    /// length consumed.
    fn parse_unicode_class(s: &str) -> Result<(&'static str, usize), Error> {
        let mut negated = s.as_bytes()[1] == b'P';
        let (c, len) = next_char(&s[2..]);
        let (seq_len, name) = if c != '{' {
            (2 + len, &s[2..2 + len])
        } else {
            let Some(end) = s.find('}') else {
                return err(INVALID_CHAR_RANGE, s);
            };
            (end + 1, &s[3..end])
        };
        let name = match name.strip_prefix('^') {
            Some(rest) => {
                negated = !negated;
                rest
            }
            None => name,
        };
        if !known_unicode_class(name) {
            return err(INVALID_CHAR_RANGE, &s[..seq_len]);
        }
        Ok((if negated { "\\PL" } else { "\\pL" }, seq_len))
    }

    fn is_perl_class(s: &str) -> bool {
        matches!(s.as_bytes(), [b'\\', b'd' | b'D' | b's' | b'S' | b'w' | b'W', ..])
    }

    /// Go's `parseClassChar`: one character of a class, or an error when the class is unterminated.
    fn parse_class_char(t: &str, whole_class: &str) -> Result<(u32, usize), Error> {
        if t.is_empty() {
            return err(MISSING_BRACKET, whole_class);
        }
        if t.starts_with('\\') {
            return parse_escape(t);
        }
        let (c, len) = next_char(t);
        Ok((c as u32, len))
    }

    /// Go's `parseClass` at `[` (the start of `s`). Returns the canonical class and the length consumed.
    fn parse_class(s: &str) -> Result<(String, usize), Error> {
        let mut out = String::from("[");
        let mut pos = 1;
        if s[pos..].starts_with('^') {
            out.push('^');
            pos += 1;
        }
        let mut first = true;
        loop {
            let t = &s[pos..];
            if t.starts_with(']') && !first {
                break;
            }
            first = false;
            if t.len() > 2
                && t.starts_with("[:")
                && let Some(i) = t[2..].find(":]")
            {
                let name = &t[..i + 4];
                let inner = &name[2..name.len() - 2];
                if !POSIX_NAMES.contains(&inner.strip_prefix('^').unwrap_or(inner)) {
                    return err(INVALID_CHAR_RANGE, name);
                }
                out.push_str(name);
                pos += name.len();
                continue;
            }
            if t.len() >= 2 && (t.starts_with("\\p") || t.starts_with("\\P")) {
                let (text, len) = parse_unicode_class(t)?;
                out.push_str(text);
                pos += len;
                continue;
            }
            if is_perl_class(t) {
                out.push_str(&t[..2]);
                pos += 2;
                continue;
            }
            let (lo, len) = parse_class_char(t, s)?;
            let mut used = len;
            let mut hi = lo;
            let after = &t[used..];
            if after.len() >= 2 && after.starts_with('-') && !after[1..].starts_with(']') {
                let (h, len) = parse_class_char(&after[1..], s)?;
                hi = h;
                used += 1 + len;
                if hi < lo {
                    return err(INVALID_CHAR_RANGE, &t[..used]);
                }
            }
            if (0xD800..=0xDFFF).contains(&lo) || (0xD800..=0xDFFF).contains(&hi) {
                push_literal(&mut out, 0xFFFD);
            } else {
                push_literal(&mut out, lo);
                if hi != lo {
                    out.push('-');
                    push_literal(&mut out, hi);
                }
            }
            pos += used;
        }
        out.push(']');
        Ok((out, pos + 1))
    }

    /// Go's `parseInt` for repetition counts: `None` when there are no digits or a leading zero;
    /// `Some(-1)` for a number of more than 8 digits.
    fn parse_count(s: &str) -> Option<(i64, usize)> {
        let b = s.as_bytes();
        if b.first().is_none_or(|c| !c.is_ascii_digit()) {
            return None;
        }
        if b.len() >= 2 && b[0] == b'0' && b[1].is_ascii_digit() {
            return None;
        }
        let len = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut value: i64 = 0;
        for &c in &b[..len] {
            if value >= 100_000_000 {
                value = -1;
                break;
            }
            value = value * 10 + i64::from(c - b'0');
        }
        Some((value, len))
    }

    /// Go's `parseRepeat` at `{`: `(min, max, length)` with `max == -1` for `{n,}` and `min == -1` when
    /// a number is too big; `None` when the text is not a repetition (then `{` is a literal).
    fn parse_repeat(s: &str) -> Option<(i64, i64, usize)> {
        let mut pos = 1;
        let (min, len) = parse_count(&s[pos..])?;
        pos += len;
        let mut min = min;
        let max;
        match s.as_bytes().get(pos)? {
            b',' => {
                pos += 1;
                match s.as_bytes().get(pos)? {
                    b'}' => max = -1,
                    _ => {
                        let (m, len) = parse_count(&s[pos..])?;
                        pos += len;
                        if m < 0 {
                            min = -1;
                        }
                        max = m;
                    }
                }
            }
            _ => max = min,
        }
        if s.as_bytes().get(pos) != Some(&b'}') {
            return None;
        }
        Some((min, max, pos + 1))
    }

    /// Go's `parsePerlFlags` at `(?` (the start of `s`): a named capture, a non-capturing group, or a
    /// flag change. Returns the canonical text, whether it opens a group, and the length consumed.
    fn parse_perl_flags(s: &str) -> Result<(String, bool, usize), Error> {
        let b = s.as_bytes();
        let named_p = b.len() > 4 && b[2] == b'P' && b[3] == b'<';
        let named = b.len() > 3 && b[2] == b'<';
        if named_p || named {
            let start = if named_p { 4 } else { 3 };
            let Some(end) = s.find('>') else {
                return err(INVALID_NAMED_CAPTURE, s);
            };
            let name = s.get(start..end).unwrap_or("");
            if name.is_empty() || !name.bytes().all(|c| c == b'_' || c.is_ascii_alphanumeric()) {
                return err(INVALID_NAMED_CAPTURE, &s[..=end]);
            }
            return Ok(("(".to_owned(), true, end + 1));
        }
        let mut on: Vec<char> = Vec::new();
        let mut off: Vec<char> = Vec::new();
        let mut negated = false;
        let mut saw_flag = false;
        let mut pos = 2;
        while pos < s.len() {
            let (c, len) = next_char(&s[pos..]);
            pos += len;
            match c {
                'i' | 'm' | 's' | 'U' => {
                    if negated {
                        on.retain(|&f| f != c);
                        if !off.contains(&c) {
                            off.push(c);
                        }
                    } else if !on.contains(&c) {
                        on.push(c);
                    }
                    saw_flag = true;
                }
                '-' if !negated => {
                    negated = true;
                    saw_flag = false;
                }
                ':' | ')' if !negated || saw_flag => {
                    let on: String = on.iter().collect();
                    let off: String = off.iter().collect();
                    let flags = if off.is_empty() { on } else { format!("{on}-{off}") };
                    let group = c == ':';
                    let text = match (group, flags.is_empty()) {
                        (true, true) => "(?:".to_owned(),
                        (true, false) => format!("(?{flags}:"),
                        (false, true) => String::new(),
                        (false, false) => format!("(?{flags})"),
                    };
                    return Ok((text, group, pos));
                }
                _ => return err(INVALID_PERL_OP, &s[..pos]),
            }
        }
        err(INVALID_PERL_OP, &s[..pos])
    }

    /// Scans `re` as Go's `regexp/syntax` parser (Perl flags) does; see the module docs.
    pub(super) fn scan(re: &str) -> Result<String, Error> {
        let mut sc = Scanner {
            whole: re,
            out: String::with_capacity(re.len() * 2),
            pending_flags: String::new(),
            stack: Vec::new(),
            level: Level { top: Top::Empty, max_product: 1 },
        };
        let mut pos = 0;
        // Start of the previous token when it was a repetition operator.
        let mut last_repeat: Option<usize> = None;
        while pos < re.len() {
            let t = &re[pos..];
            let mut repeat_start = None;
            match t.as_bytes()[0] {
                b'(' if t.as_bytes().get(1) == Some(&b'?') => {
                    let (text, group, len) = parse_perl_flags(t)?;
                    if group {
                        sc.out.push_str(&std::mem::take(&mut sc.pending_flags));
                        sc.level.fold();
                        sc.out.push_str(&text);
                        let outer =
                            std::mem::replace(&mut sc.level, Level { top: Top::Marker, max_product: 1 });
                        sc.stack.push(outer);
                    } else {
                        sc.pending_flags.push_str(&text);
                    }
                    pos += len;
                }
                b'(' => {
                    sc.out.push_str(&std::mem::take(&mut sc.pending_flags));
                    sc.level.fold();
                    sc.out.push('(');
                    let outer = std::mem::replace(&mut sc.level, Level { top: Top::Marker, max_product: 1 });
                    sc.stack.push(outer);
                    pos += 1;
                }
                b'|' => {
                    sc.out.push_str(&std::mem::take(&mut sc.pending_flags));
                    sc.level.fold();
                    sc.level.top = Top::Marker;
                    sc.out.push('|');
                    pos += 1;
                }
                b')' => {
                    let Some(outer) = sc.stack.pop() else {
                        return err(UNEXPECTED_PAREN, sc.whole);
                    };
                    sc.pending_flags.clear();
                    sc.level.fold();
                    let product = sc.level.max_product;
                    sc.level = outer;
                    sc.out.push(')');
                    sc.level.fold();
                    sc.level.top = Top::Atom { product };
                    pos += 1;
                }
                b'^' | b'$' | b'.' => {
                    sc.atom(&t[..1]);
                    pos += 1;
                }
                b'[' => {
                    let (class, len) = parse_class(t)?;
                    sc.atom(&class);
                    pos += len;
                }
                op @ (b'*' | b'+' | b'?' | b'{') => {
                    let (min, max, mut len) = if op == b'{' {
                        match parse_repeat(t) {
                            Some(r) => r,
                            None => {
                                sc.literal(u32::from(b'{'));
                                pos += 1;
                                last_repeat = None;
                                continue;
                            }
                        }
                    } else {
                        (0, 0, 1)
                    };
                    let counted = op == b'{';
                    if counted && (!(0..=1000).contains(&min) || max > 1000 || (max >= 0 && min > max)) {
                        return err(INVALID_REPEAT_SIZE, &t[..len]);
                    }
                    let op_text = t[..len].to_owned();
                    if t.as_bytes().get(len) == Some(&b'?') {
                        len += 1;
                    }
                    if let Some(prev) = last_repeat {
                        return err(INVALID_REPEAT_OP, &re[prev..pos + len]);
                    }
                    let Top::Atom { product } = sc.level.top else {
                        return err(MISSING_REPEAT_ARGUMENT, &t[..len]);
                    };
                    let product = if !counted {
                        product
                    } else if max == 0 {
                        1
                    } else {
                        let factor = if max > 0 { max } else { min };
                        let product = product.saturating_mul(factor.max(1) as u64);
                        if (min >= 2 || max >= 2) && product > 1000 {
                            return err(INVALID_REPEAT_SIZE, &t[..len]);
                        }
                        product
                    };
                    sc.out.push_str(&op_text);
                    if len > op_text.len() {
                        sc.out.push('?');
                    }
                    sc.level.top = Top::Atom { product };
                    repeat_start = Some(pos);
                    pos += len;
                }
                b'\\' => {
                    let next = t.as_bytes().get(1).copied();
                    match next {
                        Some(b'A' | b'b' | b'B' | b'z') => {
                            sc.atom(&t[..2]);
                            pos += 2;
                        }
                        Some(b'C') => return err(INVALID_ESCAPE, &t[..2]),
                        Some(b'Q') => {
                            let body = &t[2..];
                            let (literal, consumed) = match body.find("\\E") {
                                Some(i) => (&body[..i], 2 + i + 2),
                                None => (body, t.len()),
                            };
                            for c in literal.chars() {
                                sc.literal(c as u32);
                            }
                            pos += consumed;
                        }
                        Some(b'p' | b'P') => {
                            let (text, len) = parse_unicode_class(t)?;
                            sc.atom(text);
                            pos += len;
                        }
                        _ if is_perl_class(t) => {
                            sc.atom(&t[..2]);
                            pos += 2;
                        }
                        _ => {
                            let (value, len) = parse_escape(t)?;
                            sc.literal(value);
                            pos += len;
                        }
                    }
                }
                _ => {
                    let (c, len) = next_char(t);
                    sc.literal(c as u32);
                    pos += len;
                }
            }
            last_repeat = repeat_start;
        }
        if !sc.stack.is_empty() {
            return err(MISSING_PAREN, sc.whole);
        }
        Ok(sc.out)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Expected results of Go's `regexp.Compile` (Go 1.26, what Istio runs), recorded from Go.
    #[test]
    fn regex_matches_go() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"a{,3}"#, None),
            (r#"a{,5000}"#, None),
            (r#"\Qa.b\E+"#, None),
            (r#"\Qabc"#, None),
            (r#"\C"#, Some(r#"error parsing regexp: invalid escape sequence: `\C`"#)),
            (r#"a**"#, Some(r#"error parsing regexp: invalid nested repetition operator: `**`"#)),
            (r#"a*?"#, None),
            (r#"a*??"#, Some(r#"error parsing regexp: invalid nested repetition operator: `*??`"#)),
            (r#"a{2}{3}"#, Some(r#"error parsing regexp: invalid nested repetition operator: `{2}{3}`"#)),
            (r#"a{2}*"#, Some(r#"error parsing regexp: invalid nested repetition operator: `{2}*`"#)),
            (r#"^*"#, None),
            (r#"$+"#, None),
            (r#"\b*"#, None),
            (r#"(?i)*"#, Some(r#"error parsing regexp: missing argument to repetition operator: `*`"#)),
            (r#"a(?i)*"#, None),
            (r#"a*(?i)*"#, None),
            (r#"a{10}(?i){200}"#, Some(r#"error parsing regexp: invalid repeat count: `{200}`"#)),
            (r#"(a{100}){100}"#, Some(r#"error parsing regexp: invalid repeat count: `{100}`"#)),
            (r#"(a{10}){100}"#, None),
            (r#"((a{10}){10}){10}"#, None),
            (r#"((a{10}){10}){11}"#, Some(r#"error parsing regexp: invalid repeat count: `{11}`"#)),
            (r#"(?:a{0}){1001}"#, Some(r#"error parsing regexp: invalid repeat count: `{1001}`"#)),
            (r#"a{1001}"#, Some(r#"error parsing regexp: invalid repeat count: `{1001}`"#)),
            (r#"a{1000}"#, None),
            (r#"a{01}"#, None),
            (r#"a{1,0}"#, Some(r#"error parsing regexp: invalid repeat count: `{1,0}`"#)),
            (r#"a{99999999999}"#, Some(r#"error parsing regexp: invalid repeat count: `{99999999999}`"#)),
            (r#"{5}"#, Some(r#"error parsing regexp: missing argument to repetition operator: `{5}`"#)),
            (r#"a{"#, None),
            (r#"a{x}"#, None),
            (r#"x{2}?"#, None),
            (r#"[]"#, Some(r#"error parsing regexp: missing closing ]: `[]`"#)),
            (r#"[]a]"#, None),
            (r#"[^]a]"#, None),
            (r#"[a-]"#, None),
            (r#"[z-a]"#, Some(r#"error parsing regexp: invalid character class range: `z-a`"#)),
            (r#"[a--b]"#, Some(r#"error parsing regexp: invalid character class range: `a--`"#)),
            (r#"[\d-z]"#, None),
            (r#"[a-\d]"#, Some(r#"error parsing regexp: invalid escape sequence: `\d`"#)),
            (r#"[[:alpha:]]"#, None),
            (r#"[[:foo:]]"#, Some(r#"error parsing regexp: invalid character class range: `[:foo:]`"#)),
            (r#"[[:a]b:]]"#, Some(r#"error parsing regexp: invalid character class range: `[:a]b:]`"#)),
            (r#"[\b]"#, Some(r#"error parsing regexp: invalid escape sequence: `\b`"#)),
            (r#"[\Q]"#, Some(r#"error parsing regexp: invalid escape sequence: `\Q`"#)),
            (r#"\pL"#, None),
            (r#"\p{Greek}"#, None),
            (r#"\p{greek}"#, None),
            (
                r#"\p{Old_Italic}"#,
                Some(r#"error parsing regexp: invalid character class range: `\p{Old_Italic}`"#),
            ),
            (
                r#"\p{OldItalic}"#,
                Some(r#"error parsing regexp: invalid character class range: `\p{OldItalic}`"#),
            ),
            (r#"\p{Letter}"#, None),
            (r#"\p{L&}"#, Some(r#"error parsing regexp: invalid character class range: `\p{L&}`"#)),
            (r#"\p{^Greek}"#, None),
            (r#"\p{Emoji}"#, Some(r#"error parsing regexp: invalid character class range: `\p{Emoji}`"#)),
            (r#"\p{Any}"#, None),
            (r#"\pX"#, Some(r#"error parsing regexp: invalid character class range: `\pX`"#)),
            (r#"\p"#, Some(r#"error parsing regexp: invalid character class range: `\p`"#)),
            (r#"\p{"#, Some(r#"error parsing regexp: invalid character class range: `\p{`"#)),
            (r#"\8"#, Some(r#"error parsing regexp: invalid escape sequence: `\8`"#)),
            (r#"\1"#, Some(r#"error parsing regexp: invalid escape sequence: `\1`"#)),
            (r#"\12"#, None),
            (r#"\0"#, None),
            (r#"\x{110000}"#, Some(r#"error parsing regexp: invalid escape sequence: `\x{110000`"#)),
            (r#"\x{D800}"#, None),
            (r#"\xg"#, Some(r#"error parsing regexp: invalid escape sequence: `\xg`"#)),
            (r#"\x{}"#, Some(r#"error parsing regexp: invalid escape sequence: `\x{}`"#)),
            (r#"\e"#, Some(r#"error parsing regexp: invalid escape sequence: `\e`"#)),
            (r#"\Z"#, Some(r#"error parsing regexp: invalid escape sequence: `\Z`"#)),
            (r#"\z"#, None),
            (r#"\_"#, None),
            (r#"\<"#, None),
            (r#"\Q"#, None),
            (r#"(?P<name>a)"#, None),
            (r#"(?<name>a)"#, None),
            (r#"(?P<1a>a)"#, None),
            (r#"(?P<a>a)(?P<a>b)"#, None),
            (r#"(?P<a.b>a)"#, Some(r#"error parsing regexp: invalid named capture: `(?P<a.b>`"#)),
            (r#"(?P=name)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?P`"#)),
            (r#"(?=a)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?=`"#)),
            (r#"(?<=a)"#, Some(r#"error parsing regexp: invalid named capture: `(?<=a)`"#)),
            (r#"(?i-)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?i-)`"#)),
            (r#"(?-)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?-)`"#)),
            (r#"(?)"#, None),
            (r#"(?ii)"#, None),
            (r#"(?i-i)"#, None),
            (r#"(?x)"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?x`"#)),
            (r#"(?U)a*"#, None),
            (r#"(?i:a)"#, None),
            (r#"(?"#, Some(r#"error parsing regexp: invalid or unsupported Perl syntax: `(?`"#)),
            (r#"(a"#, Some(r#"error parsing regexp: missing closing ): `(a`"#)),
            (r#"a)"#, Some(r#"error parsing regexp: unexpected ): `a)`"#)),
            (r#")"#, Some(r#"error parsing regexp: unexpected ): `)`"#)),
            (r#"a|*"#, Some(r#"error parsing regexp: missing argument to repetition operator: `*`"#)),
            (r#"(*)"#, Some(r#"error parsing regexp: missing argument to repetition operator: `*`"#)),
            (r#"()*"#, None),
            (r#"(?:)*"#, None),
            (r#"\"#, Some(r#"error parsing regexp: trailing backslash at end of expression: ``"#)),
            (r#"a\"#, Some(r#"error parsing regexp: trailing backslash at end of expression: ``"#)),
            (r#"[a"#, Some(r#"error parsing regexp: missing closing ]: `[a`"#)),
            (r#"["#, Some(r#"error parsing regexp: missing closing ]: `[`"#)),
            (r#"\Qab\E{2}"#, None),
            (r#"a\Q\E*"#, None),
            (r#"\pL{1000}"#, None),
            (r#"(?i)\p{Lu}"#, None),
            (r#"é\é"#, Some(r#"error parsing regexp: invalid escape sequence: `\é`"#)),
            (r#"[é-a]"#, Some(r#"error parsing regexp: invalid character class range: `é-a`"#)),
            (r#"\x{10FFFF}"#, None),
            (r#"\x41"#, None),
            (r#"\101"#, None),
            (r#"(?s)."#, None),
            (r#"(?m)^$"#, None),
            (
                r#"a{1000}{1}"#,
                Some(r#"error parsing regexp: invalid nested repetition operator: `{1000}{1}`"#),
            ),
            (r#"(a{2}){501}"#, Some(r#"error parsing regexp: invalid repeat count: `{501}`"#)),
            (r#"(a*){1000}"#, None),
            (r#"((a){1000})*"#, None),
            (r#"\d{1000}"#, None),
            (r#"[[:^alpha:]]"#, None),
            (r#"[[:word:]]"#, None),
            (r#"[a[b]"#, None),
            (r#"[a&&b]"#, None),
            (r#"[a~~b]"#, None),
            (r#"\pN+"#, None),
            (r#"(?i)k"#, None),
            (r#"}"#, None),
            (r#"]"#, None),
            (r#"a{2,}{3}"#, Some(r#"error parsing regexp: invalid nested repetition operator: `{2,}{3}`"#)),
            (r#"a+?"#, None),
            (r#"a??"#, None),
            (r#"a|b|"#, None),
        ];
        for (re, want) in cases {
            assert_eq!(validate_regex(re).err().as_deref(), *want, "{re:?}");
        }
    }

    #[test]
    fn regex_limits() {
        assert!(validate_regex(&format!("{}a{}", "(".repeat(400), ")".repeat(400))).is_ok());
        assert!(validate_regex(&format!("{}a{}", "(?:".repeat(300), ")*".repeat(300))).is_ok());
        assert!(validate_regex(&"a{2}".repeat(300)).is_ok());
        assert!(validate_regex("((a{10}){10}){10}").is_ok());
        assert_eq!(
            validate_regex("((a{10}){10}){11}").unwrap_err(),
            "error parsing regexp: invalid repeat count: `{11}`"
        );
        assert_eq!(validate_regex("(a{2}){0}(b{1000})").err(), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the Go-syntax scanner accepts, its canonical rewrite parses with `regex_syntax`
        /// (so the second check never rejects a pattern Go accepts).
        #[test]
        fn accepted_regexes_parse_with_regex_syntax(
            s in proptest::string::string_regex(r"([ab0-9().|*+?^$\[\]{},:<>=PpQEdxLz\\-]|\\Q|\\E|\(\?i\)|\(\?P<n>|\[:alpha:\]|\\p\{Greek\}|é){0,30}").unwrap()
        ) {
            if let Ok(canonical) = go_re::scan(&s) {
                let parsed = regex_syntax::ast::parse::ParserBuilder::new().nest_limit(4096).build().parse(&canonical);
                prop_assert!(parsed.is_ok(), "{s:?} -> {canonical:?}: {parsed:?}");
            }
        }
    }
}
