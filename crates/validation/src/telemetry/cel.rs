//! A syntax check of CEL expressions that follows cel-go's parser (`cel.NewEnv().Parse`): its ANTLR
//! grammar (lexer and parser), the checks of its parse-tree visitor (reserved identifiers, literal
//! ranges, string escapes, the standard macros' argument rules, the optional syntax being disabled)
//! and its default limits (100,000 code points, recursion depth 250).
//!
//! Errors read like cel-go's: `ERROR: <input>:1:5: Syntax error: mismatched input ')' …`, with
//! cel-go's wording for the visitor's errors and a simpler description of syntax errors.

/// Largest expression, in code points.
const CODE_POINT_LIMIT: usize = 100_000;
/// cel-go's default maximum recursion depth (per grammar rule, and for the visitor).
const MAX_RECURSION_DEPTH: usize = 250;

/// Parses `text` as a CEL expression; `Err` carries the first error.
pub(crate) fn parse(text: &str) -> Result<(), String> {
    let size = text.chars().count();
    if size > CODE_POINT_LIMIT {
        return Err(format!(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {CODE_POINT_LIMIT}"
        ));
    }
    let tokens = lex(text)?;
    let mut parser = Parser { tokens: &tokens, pos: 0, depth: [0; RULE_COUNT] };
    let expr = parser.start()?;
    if visit_depth(&expr) > MAX_RECURSION_DEPTH {
        return Err(error_at(Pos { line: 1, col: 0 }, "max recursion depth exceeded"));
    }
    check_expr(&expr)
}

/// A source position: 1-based line, 0-based column (in code points), as ANTLR counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pos {
    line: usize,
    col: usize,
}

fn error_at(pos: Pos, message: &str) -> String {
    format!("ERROR: <input>:{}:{}: {message}", pos.line, pos.col + 1)
}

fn syntax_error(pos: Pos, message: &str) -> String {
    error_at(pos, &format!("Syntax error: {message}"))
}

// ----- Lexer -----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Eq,
    Ne,
    In,
    Lt,
    Le,
    Ge,
    Gt,
    And,
    Or,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    LParen,
    RParen,
    Dot,
    Comma,
    Minus,
    Not,
    Question,
    Colon,
    Plus,
    Star,
    Slash,
    Percent,
    True,
    False,
    Null,
    Float,
    Int,
    Uint,
    Str,
    Bytes,
    Ident,
    EscIdent,
    Eof,
}

#[derive(Clone, Debug)]
struct Token {
    kind: Kind,
    text: String,
    pos: Pos,
}

/// The tokens of `text` (ANTLR's longest-match rules of CEL.g4), ending with `Eof`.
fn lex(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let mut line_start = 0;
    while i < chars.len() {
        let pos = Pos { line, col: i - line_start };
        let c = chars[i];
        let at = |k: usize| chars.get(i + k).copied();
        // Whitespace and comments.
        if matches!(c, ' ' | '\t' | '\r' | '\n' | '\u{c}') {
            if c == '\n' {
                line += 1;
                line_start = i + 1;
            }
            i += 1;
            continue;
        }
        if c == '/' && at(1) == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let (kind, len) = if let Some(len) = string_literal(&chars, i) {
            let prefix_is_bytes = matches!(c, 'b' | 'B');
            (if prefix_is_bytes { Kind::Bytes } else { Kind::Str }, len)
        } else if c.is_ascii_alphabetic() || c == '_' {
            let len = chars[i..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == '_').count();
            let word: String = chars[i..i + len].iter().collect();
            let kind = match word.as_str() {
                "true" => Kind::True,
                "false" => Kind::False,
                "null" => Kind::Null,
                "in" => Kind::In,
                _ => Kind::Ident,
            };
            (kind, len)
        } else if c.is_ascii_digit() || (c == '.' && at(1).is_some_and(|d| d.is_ascii_digit())) {
            number(&chars, i)
        } else if c == '`' {
            let len = chars[i + 1..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | ' '))
                .count();
            if len == 0 || chars.get(i + 1 + len) != Some(&'`') {
                return Err(syntax_error(
                    pos,
                    &format!("token recognition error at: '{}'", snippet(&chars, i, len + 1)),
                ));
            }
            (Kind::EscIdent, len + 2)
        } else if c == '"' || c == '\'' {
            return Err(syntax_error(
                pos,
                &format!("token recognition error at: '{}'", snippet(&chars, i, chars.len() - i)),
            ));
        } else {
            let two = (c, at(1).unwrap_or('\0'));
            match two {
                ('=', '=') => (Kind::Eq, 2),
                ('!', '=') => (Kind::Ne, 2),
                ('<', '=') => (Kind::Le, 2),
                ('>', '=') => (Kind::Ge, 2),
                ('&', '&') => (Kind::And, 2),
                ('|', '|') => (Kind::Or, 2),
                _ => {
                    let kind = match c {
                        '<' => Kind::Lt,
                        '>' => Kind::Gt,
                        '[' => Kind::LBracket,
                        ']' => Kind::RBracket,
                        '{' => Kind::LBrace,
                        '}' => Kind::RBrace,
                        '(' => Kind::LParen,
                        ')' => Kind::RParen,
                        '.' => Kind::Dot,
                        ',' => Kind::Comma,
                        '-' => Kind::Minus,
                        '!' => Kind::Not,
                        '?' => Kind::Question,
                        ':' => Kind::Colon,
                        '+' => Kind::Plus,
                        '*' => Kind::Star,
                        '/' => Kind::Slash,
                        '%' => Kind::Percent,
                        _ => {
                            return Err(syntax_error(pos, &format!("token recognition error at: '{c}'")));
                        }
                    };
                    (kind, 1)
                }
            }
        };
        let token_text: String = chars[i..i + len].iter().collect();
        for (k, ch) in token_text.chars().enumerate() {
            if ch == '\n' {
                line += 1;
                line_start = i + k + 1;
            }
        }
        tokens.push(Token { kind, text: token_text, pos });
        i += len;
    }
    tokens.push(Token { kind: Kind::Eof, text: "<EOF>".to_owned(), pos: Pos { line, col: i - line_start } });
    Ok(tokens)
}

fn snippet(chars: &[char], start: usize, len: usize) -> String {
    chars[start..(start + len).min(chars.len())].iter().take(20).collect()
}

/// Length of a NUM_FLOAT, NUM_INT or NUM_UINT token at `i`.
fn number(chars: &[char], i: usize) -> (Kind, usize) {
    let digits =
        |from: usize| chars.get(from..).map_or(0, |s| s.iter().take_while(|c| c.is_ascii_digit()).count());
    let exponent = |from: usize| -> usize {
        if !matches!(chars.get(from), Some('e' | 'E')) {
            return 0;
        }
        let sign = usize::from(matches!(chars.get(from + 1), Some('+' | '-')));
        let n = digits(from + 1 + sign);
        if n == 0 { 0 } else { 1 + sign + n }
    };
    if chars[i] == '.' {
        let n = 1 + digits(i + 1);
        return (Kind::Float, n + exponent(i + n));
    }
    if chars[i] == '0' && chars.get(i + 1) == Some(&'x') {
        let hex = chars.get(i + 2..).map_or(0, |s| s.iter().take_while(|c| c.is_ascii_hexdigit()).count());
        if hex > 0 {
            let len = 2 + hex;
            return if matches!(chars.get(i + len), Some('u' | 'U')) {
                (Kind::Uint, len + 1)
            } else {
                (Kind::Int, len)
            };
        }
    }
    let n = digits(i);
    if chars.get(i + n) == Some(&'.') && digits(i + n + 1) > 0 {
        let len = n + 1 + digits(i + n + 1);
        return (Kind::Float, len + exponent(i + len));
    }
    let e = exponent(i + n);
    if e > 0 {
        return (Kind::Float, n + e);
    }
    if matches!(chars.get(i + n), Some('u' | 'U')) {
        return (Kind::Uint, n + 1);
    }
    (Kind::Int, n)
}

/// Length of a STRING (or BYTES) token at `i`, if one starts there.
fn string_literal(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(chars.get(j), Some('b' | 'B')) {
        j += 1;
    }
    let raw = matches!(chars.get(j), Some('r' | 'R'));
    if raw {
        j += 1;
    }
    let quote = *chars.get(j).filter(|c| **c == '"' || **c == '\'')?;
    let triple = chars.get(j + 1) == Some(&quote) && chars.get(j + 2) == Some(&quote);
    let end =
        if triple { triple_body(chars, j + 3, quote, raw)? } else { single_body(chars, j + 1, quote, raw)? };
    Some(end - i)
}

/// End (exclusive) of a one-line string body starting at `k`.
fn single_body(chars: &[char], mut k: usize, quote: char, raw: bool) -> Option<usize> {
    loop {
        let c = *chars.get(k)?;
        if c == quote {
            return Some(k + 1);
        }
        if c == '\n' || c == '\r' {
            return None;
        }
        if c == '\\' && !raw {
            k += escape_len(chars, k)?;
        } else {
            k += 1;
        }
    }
}

/// End (exclusive) of a triple-quoted body starting at `k` (up to the first closing triple).
fn triple_body(chars: &[char], mut k: usize, quote: char, raw: bool) -> Option<usize> {
    loop {
        let c = *chars.get(k)?;
        if c == quote && chars.get(k + 1) == Some(&quote) && chars.get(k + 2) == Some(&quote) {
            return Some(k + 3);
        }
        if c == '\\' && !raw {
            k += escape_len(chars, k)?;
        } else {
            k += 1;
        }
    }
}

/// Length of the escape sequence (ESC_SEQ) at `k`, which holds a backslash.
fn escape_len(chars: &[char], k: usize) -> Option<usize> {
    let hex =
        |from: usize, n: usize| (from..from + n).all(|x| chars.get(x).is_some_and(char::is_ascii_hexdigit));
    match *chars.get(k + 1)? {
        'a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' | '"' | '\'' | '\\' | '?' | '`' => Some(2),
        '0'..='3' => {
            let octal = |x: usize| chars.get(x).is_some_and(|c| ('0'..='7').contains(c));
            (octal(k + 2) && octal(k + 3)).then_some(4)
        }
        'x' | 'X' => hex(k + 2, 2).then_some(4),
        'u' => hex(k + 2, 4).then_some(6),
        'U' => hex(k + 2, 8).then_some(10),
        _ => None,
    }
}

/// cel-go's `unescape`: the errors it reports for a STRING (or, with `bytes`, BYTES) token.
fn check_unescape(token: &str, bytes: bool) -> Result<(), &'static str> {
    let mut text = token;
    if bytes {
        text = &text[1..];
    }
    if text.starts_with(['r', 'R']) {
        return Ok(());
    }
    let body: Vec<char> = if text.len() >= 6 && (text.starts_with("'''") || text.starts_with("\"\"\"")) {
        text[3..text.len() - 3].chars().collect()
    } else {
        text[1..text.len() - 1].chars().collect()
    };
    let mut k = 0;
    while k < body.len() {
        if body[k] != '\\' {
            k += 1;
            continue;
        }
        let c = body.get(k + 1).copied().ok_or("unable to unescape string, found '\\' as last character")?;
        let value_of = |from: usize, n: usize| -> Option<u32> {
            let digits: String = body.get(from..from + n)?.iter().collect();
            u32::from_str_radix(&digits, 16).ok()
        };
        match c {
            'x' | 'X' => k += 4,
            'u' | 'U' => {
                if bytes {
                    return Err("unable to unescape string");
                }
                let n = if c == 'u' { 4 } else { 8 };
                let v = value_of(k + 2, n).ok_or("unable to unescape string")?;
                if char::from_u32(v).is_none() {
                    return Err("invalid unicode code point");
                }
                k += 2 + n;
            }
            '0'..='3' => k += 4,
            _ => k += 2,
        }
    }
    Ok(())
}

// ----- Parser -----

/// The expression tree, reduced to what the visitor checks look at.
#[derive(Debug)]
enum Expr {
    /// An identifier (possibly with a leading dot).
    Ident(String),
    /// `operand.field`.
    Select(Box<Expr>),
    /// A function call: global (`f(…)`) or member (`x.f(…)`).
    Call { target: Option<Box<Expr>>, function: String, args: Vec<Expr> },
    /// `x[i]`.
    Index(Box<Expr>, Box<Expr>),
    /// A relation or arithmetic operator.
    Binary(Box<Expr>, Box<Expr>),
    /// `c ? a : b`.
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A chain of `&&` or `||`.
    Logic(Vec<Expr>),
    /// `!x`, `-x`.
    Unary(Box<Expr>),
    /// A list, map or message literal.
    Aggregate(Vec<Expr>),
    /// A literal, already checked.
    Literal,
    /// Nested parentheses (transparent to the visitor).
    Nested(Box<Expr>),
}

/// The grammar rules whose nesting cel-go's parse listener counts.
#[derive(Clone, Copy)]
enum Rule {
    Start,
    Expr,
    ConditionalOr,
    ConditionalAnd,
    Relation,
    Calc,
    Unary,
    Member,
    Primary,
    ExprList,
    ListInit,
    FieldInitializerList,
    OptField,
    MapInitializerList,
    EscapeIdent,
    OptExpr,
    Literal,
}
const RULE_COUNT: usize = 17;

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    depth: [usize; RULE_COUNT],
}

type Parsed = Result<Expr, String>;

impl Parser<'_> {
    fn peek(&self) -> &Token {
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn kind_at(&self, offset: usize) -> Kind {
        self.tokens.get(self.pos + offset).map_or(Kind::Eof, |t| t.kind)
    }

    fn kind(&self) -> Kind {
        self.kind_at(0)
    }

    fn bump(&mut self) -> Token {
        let token = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        token
    }

    fn expect(&mut self, kind: Kind, what: &str) -> Result<Token, String> {
        if self.kind() == kind { Ok(self.bump()) } else { Err(self.unexpected(&format!("expecting {what}"))) }
    }

    fn unexpected(&self, expecting: &str) -> String {
        let token = self.peek();
        let message = if token.kind == Kind::Eof {
            format!("mismatched input '<EOF>' {expecting}")
        } else {
            format!("mismatched input '{}' {expecting}", token.text)
        };
        syntax_error(token.pos, &message)
    }

    /// Enters a rule (cel-go's parse listener counts the nesting per rule).
    fn enter(&mut self, rule: Rule) -> Result<(), String> {
        let depth = &mut self.depth[rule as usize];
        *depth += 1;
        if *depth > MAX_RECURSION_DEPTH {
            return Err(error_at(
                self.peek().pos,
                &format!("expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"),
            ));
        }
        Ok(())
    }

    fn exit(&mut self, rule: Rule, times: usize) {
        let depth = &mut self.depth[rule as usize];
        *depth = depth.saturating_sub(times);
    }

    fn start(&mut self) -> Parsed {
        self.enter(Rule::Start)?;
        let expr = self.expr()?;
        if self.kind() != Kind::Eof {
            return Err(self.unexpected("expecting <EOF>"));
        }
        self.exit(Rule::Start, 1);
        Ok(expr)
    }

    fn expr(&mut self) -> Parsed {
        self.enter(Rule::Expr)?;
        let condition = self.conditional_or()?;
        let result = if self.kind() == Kind::Question {
            self.bump();
            let if_true = self.conditional_or()?;
            self.expect(Kind::Colon, "':'")?;
            let if_false = self.expr()?;
            Expr::Ternary(Box::new(condition), Box::new(if_true), Box::new(if_false))
        } else {
            condition
        };
        self.exit(Rule::Expr, 1);
        Ok(result)
    }

    fn conditional_or(&mut self) -> Parsed {
        self.enter(Rule::ConditionalOr)?;
        let mut terms = vec![self.conditional_and()?];
        while self.kind() == Kind::Or {
            self.bump();
            terms.push(self.conditional_and()?);
        }
        self.exit(Rule::ConditionalOr, 1);
        Ok(if terms.len() == 1 { terms.remove(0) } else { Expr::Logic(terms) })
    }

    fn conditional_and(&mut self) -> Parsed {
        self.enter(Rule::ConditionalAnd)?;
        let mut terms = vec![self.relation(0)?];
        while self.kind() == Kind::And {
            self.bump();
            terms.push(self.relation(0)?);
        }
        self.exit(Rule::ConditionalAnd, 1);
        Ok(if terms.len() == 1 { terms.remove(0) } else { Expr::Logic(terms) })
    }

    /// `relation`, a left-recursive rule with one precedence level (ANTLR's precedence climbing).
    fn relation(&mut self, precedence: usize) -> Parsed {
        self.enter(Rule::Relation)?;
        let mut contexts = 1;
        let mut lhs = self.calc(0)?;
        while precedence <= 1
            && matches!(
                self.kind(),
                Kind::Lt | Kind::Le | Kind::Ge | Kind::Gt | Kind::Eq | Kind::Ne | Kind::In
            )
        {
            self.enter(Rule::Relation)?;
            contexts += 1;
            self.bump();
            let rhs = self.relation(2)?;
            lhs = Expr::Binary(Box::new(lhs), Box::new(rhs));
        }
        self.exit(Rule::Relation, contexts);
        Ok(lhs)
    }

    /// `calc`, a left-recursive rule with two precedence levels (`* / %` over `+ -`).
    fn calc(&mut self, precedence: usize) -> Parsed {
        self.enter(Rule::Calc)?;
        let mut contexts = 1;
        let mut lhs = self.unary()?;
        loop {
            let next = match self.kind() {
                Kind::Star | Kind::Slash | Kind::Percent if precedence <= 2 => 3,
                Kind::Plus | Kind::Minus if precedence <= 1 => 2,
                _ => break,
            };
            self.enter(Rule::Calc)?;
            contexts += 1;
            self.bump();
            let rhs = self.calc(next)?;
            lhs = Expr::Binary(Box::new(lhs), Box::new(rhs));
        }
        self.exit(Rule::Calc, contexts);
        Ok(lhs)
    }

    fn unary(&mut self) -> Parsed {
        self.enter(Rule::Unary)?;
        let result = match self.kind() {
            Kind::Not => {
                while self.kind() == Kind::Not {
                    self.bump();
                }
                Expr::Unary(Box::new(self.member()?))
            }
            // One `-` before a number is the number's sign (the first alternative wins).
            Kind::Minus if !matches!(self.kind_at(1), Kind::Int | Kind::Float) => {
                while self.kind() == Kind::Minus {
                    self.bump();
                }
                Expr::Unary(Box::new(self.member()?))
            }
            _ => self.member()?,
        };
        self.exit(Rule::Unary, 1);
        Ok(result)
    }

    /// `member`, a left-recursive rule: a primary followed by selections, calls and indexes.
    fn member(&mut self) -> Parsed {
        self.enter(Rule::Member)?;
        let mut contexts = 1;
        let mut operand = self.primary()?;
        loop {
            match self.kind() {
                Kind::Dot => {
                    self.enter(Rule::Member)?;
                    contexts += 1;
                    let dot = self.bump();
                    if self.kind() == Kind::Question {
                        return Err(syntax_error(dot.pos, "unsupported syntax '.?'"));
                    }
                    if self.kind() == Kind::Ident && self.kind_at(1) == Kind::LParen {
                        let function = self.bump().text;
                        self.bump();
                        let args = self.call_args()?;
                        operand = Expr::Call { target: Some(Box::new(operand)), function, args };
                    } else {
                        self.escape_ident()?;
                        operand = Expr::Select(Box::new(operand));
                    }
                }
                Kind::LBracket => {
                    self.enter(Rule::Member)?;
                    contexts += 1;
                    let open = self.bump();
                    if self.kind() == Kind::Question {
                        return Err(syntax_error(open.pos, "unsupported syntax '[?'"));
                    }
                    let index = self.expr()?;
                    self.expect(Kind::RBracket, "']'")?;
                    operand = Expr::Index(Box::new(operand), Box::new(index));
                }
                _ => break,
            }
        }
        self.exit(Rule::Member, contexts);
        Ok(operand)
    }

    /// `escapeIdent`: an identifier or a back-quoted one.
    fn escape_ident(&mut self) -> Result<(), String> {
        self.enter(Rule::EscapeIdent)?;
        match self.kind() {
            Kind::Ident | Kind::EscIdent => {
                self.bump();
            }
            _ => return Err(self.unexpected("expecting IDENTIFIER")),
        }
        self.exit(Rule::EscapeIdent, 1);
        Ok(())
    }

    /// The arguments of a call, after `(`, through `)`.
    fn call_args(&mut self) -> Result<Vec<Expr>, String> {
        let mut args = Vec::new();
        if self.kind() != Kind::RParen {
            self.enter(Rule::ExprList)?;
            args.push(self.expr()?);
            while self.kind() == Kind::Comma {
                self.bump();
                args.push(self.expr()?);
            }
            self.exit(Rule::ExprList, 1);
        }
        self.expect(Kind::RParen, "')'")?;
        Ok(args)
    }

    fn primary(&mut self) -> Parsed {
        self.enter(Rule::Primary)?;
        let result = match self.kind() {
            Kind::Dot | Kind::Ident => self.identifier_primary()?,
            Kind::LParen => {
                self.bump();
                let inner = self.expr()?;
                self.expect(Kind::RParen, "')'")?;
                Expr::Nested(Box::new(inner))
            }
            Kind::LBracket => {
                self.bump();
                let mut elements = Vec::new();
                if !matches!(self.kind(), Kind::Comma | Kind::RBracket) {
                    self.enter(Rule::ListInit)?;
                    elements.push(self.opt_expr()?);
                    while self.kind() == Kind::Comma && self.kind_at(1) != Kind::RBracket {
                        self.bump();
                        elements.push(self.opt_expr()?);
                    }
                    self.exit(Rule::ListInit, 1);
                }
                if self.kind() == Kind::Comma {
                    self.bump();
                }
                self.expect(Kind::RBracket, "']'")?;
                Expr::Aggregate(elements)
            }
            Kind::LBrace => {
                self.bump();
                let mut entries = Vec::new();
                if !matches!(self.kind(), Kind::Comma | Kind::RBrace) {
                    self.enter(Rule::MapInitializerList)?;
                    loop {
                        entries.push(self.opt_expr()?);
                        self.expect(Kind::Colon, "':'")?;
                        entries.push(self.expr()?);
                        if self.kind() == Kind::Comma && self.kind_at(1) != Kind::RBrace {
                            self.bump();
                        } else {
                            break;
                        }
                    }
                    self.exit(Rule::MapInitializerList, 1);
                }
                if self.kind() == Kind::Comma {
                    self.bump();
                }
                self.expect(Kind::RBrace, "'}'")?;
                Expr::Aggregate(entries)
            }
            _ => self.literal()?,
        };
        self.exit(Rule::Primary, 1);
        Ok(result)
    }

    /// The primaries that start with an identifier (or a leading dot): an identifier, a global
    /// call, or a message literal `a.b.C{field: value}`.
    fn identifier_primary(&mut self) -> Parsed {
        let leading_dot = self.kind() == Kind::Dot;
        // A message literal: `.`? IDENT (`.` IDENT)* `{`.
        let mut k = usize::from(leading_dot);
        let mut is_message = false;
        if self.kind_at(k) == Kind::Ident {
            k += 1;
            while self.kind_at(k) == Kind::Dot && self.kind_at(k + 1) == Kind::Ident {
                k += 2;
            }
            is_message = self.kind_at(k) == Kind::LBrace;
        }
        if is_message {
            for _ in 0..k {
                self.bump();
            }
            self.bump(); // `{`
            let mut values = Vec::new();
            if !matches!(self.kind(), Kind::Comma | Kind::RBrace) {
                self.enter(Rule::FieldInitializerList)?;
                loop {
                    self.enter(Rule::OptField)?;
                    if self.kind() == Kind::Question {
                        return Err(syntax_error(self.peek().pos, "unsupported syntax '?'"));
                    }
                    self.escape_ident()?;
                    self.exit(Rule::OptField, 1);
                    self.expect(Kind::Colon, "':'")?;
                    values.push(self.expr()?);
                    if self.kind() == Kind::Comma && self.kind_at(1) != Kind::RBrace {
                        self.bump();
                    } else {
                        break;
                    }
                }
                self.exit(Rule::FieldInitializerList, 1);
            }
            if self.kind() == Kind::Comma {
                self.bump();
            }
            self.expect(Kind::RBrace, "'}'")?;
            return Ok(Expr::Aggregate(values));
        }
        if leading_dot {
            self.bump();
        }
        let name_token = self.expect(Kind::Ident, "IDENTIFIER")?;
        if RESERVED.contains(&name_token.text.as_str()) {
            return Err(error_at(name_token.pos, &format!("reserved identifier: {}", name_token.text)));
        }
        let name = if leading_dot { format!(".{}", name_token.text) } else { name_token.text };
        if self.kind() == Kind::LParen {
            self.bump();
            let args = self.call_args()?;
            return Ok(Expr::Call { target: None, function: name, args });
        }
        Ok(Expr::Ident(name))
    }

    /// `optExpr`: an expression, with `?` (optional syntax) rejected.
    fn opt_expr(&mut self) -> Parsed {
        self.enter(Rule::OptExpr)?;
        if self.kind() == Kind::Question {
            return Err(syntax_error(self.peek().pos, "unsupported syntax '?'"));
        }
        let expr = self.expr()?;
        self.exit(Rule::OptExpr, 1);
        Ok(expr)
    }

    fn literal(&mut self) -> Parsed {
        self.enter(Rule::Literal)?;
        let negative = self.kind() == Kind::Minus;
        if negative && matches!(self.kind_at(1), Kind::Int | Kind::Float) {
            self.bump();
        }
        let token = self.peek().clone();
        let checked = match token.kind {
            Kind::Int => check_int(&token.text, negative),
            Kind::Uint if !negative => check_uint(&token.text),
            Kind::Float => check_double(&token.text),
            Kind::Str if !negative => check_unescape(&token.text, false),
            Kind::Bytes if !negative => check_unescape(&token.text, true),
            Kind::True | Kind::False | Kind::Null if !negative => Ok(()),
            _ => return Err(self.unexpected("expecting an expression")),
        };
        checked.map_err(|message| error_at(token.pos, message))?;
        self.bump();
        self.exit(Rule::Literal, 1);
        Ok(Expr::Literal)
    }
}

/// Identifiers cel-go reserves (besides the keywords the lexer knows).
const RESERVED: [&str; 17] = [
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

fn check_int(text: &str, negative: bool) -> Result<(), &'static str> {
    let (digits, radix) = match text.strip_prefix("0x") {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    let signed = if negative { format!("-{digits}") } else { digits.to_owned() };
    i64::from_str_radix(&signed, radix).map(|_| ()).map_err(|_| "invalid int literal")
}

fn check_uint(text: &str) -> Result<(), &'static str> {
    let text = &text[..text.len() - 1];
    let (digits, radix) = match text.strip_prefix("0x") {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    u64::from_str_radix(digits, radix).map(|_| ()).map_err(|_| "invalid uint literal")
}

fn check_double(text: &str) -> Result<(), &'static str> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(()),
        _ => Err("invalid double literal"),
    }
}

/// The deepest nesting of the nodes cel-go's visitor counts (conditionals, relations,
/// arithmetic, selections, member calls, indexes).
fn visit_depth(expr: &Expr) -> usize {
    let max_of = |exprs: &mut dyn Iterator<Item = &Expr>| exprs.map(visit_depth).max().unwrap_or(0);
    match expr {
        Expr::Ident(_) | Expr::Literal => 0,
        Expr::Select(operand) => 1 + visit_depth(operand),
        Expr::Call { target, args, .. } => {
            let inner = max_of(&mut target.iter().map(|t| &**t).chain(args.iter()));
            inner + usize::from(target.is_some())
        }
        Expr::Index(a, b) | Expr::Binary(a, b) => 1 + visit_depth(a).max(visit_depth(b)),
        Expr::Ternary(a, b, c) => 1 + visit_depth(a).max(visit_depth(b)).max(visit_depth(c)),
        Expr::Logic(terms) | Expr::Aggregate(terms) => max_of(&mut terms.iter()),
        Expr::Unary(inner) | Expr::Nested(inner) => visit_depth(inner),
    }
}

/// The checks of the standard macros (`has`, `all`, `exists`, `exists_one`, `map`, `filter`).
fn check_expr(expr: &Expr) -> Result<(), String> {
    let all = |exprs: &mut dyn Iterator<Item = &Expr>| -> Result<(), String> {
        for e in exprs {
            check_expr(e)?;
        }
        Ok(())
    };
    match expr {
        Expr::Ident(_) | Expr::Literal => Ok(()),
        Expr::Select(inner) | Expr::Unary(inner) | Expr::Nested(inner) => check_expr(inner),
        Expr::Index(a, b) | Expr::Binary(a, b) => {
            check_expr(a)?;
            check_expr(b)
        }
        Expr::Ternary(a, b, c) => all(&mut [&**a, &**b, &**c].into_iter()),
        Expr::Logic(terms) | Expr::Aggregate(terms) => all(&mut terms.iter()),
        Expr::Call { target, function, args } => {
            if let Some(target) = target {
                check_expr(target)?;
            }
            all(&mut args.iter())?;
            check_macro(target.is_some(), function, args)
        }
    }
}

/// Strips the parentheses the parse tree keeps but cel-go's AST does not.
fn unnest(expr: &Expr) -> &Expr {
    match expr {
        Expr::Nested(inner) => unnest(inner),
        other => other,
    }
}

fn check_macro(receiver: bool, function: &str, args: &[Expr]) -> Result<(), String> {
    let pos = Pos { line: 1, col: 0 };
    let iteration_variable = |message: &str| -> Result<(), String> {
        match args.first().map(unnest) {
            Some(Expr::Ident(name)) if name == "@result" || name == "__result__" => {
                Err(error_at(pos, "iteration variable overwrites accumulator variable"))
            }
            Some(Expr::Ident(_)) => Ok(()),
            _ => Err(error_at(pos, message)),
        }
    };
    match (receiver, function, args.len()) {
        (false, "has", 1) => match args.first().map(unnest) {
            Some(Expr::Select(_)) => Ok(()),
            _ => Err(error_at(pos, "invalid argument to has() macro")),
        },
        (true, "all" | "exists" | "exists_one", 2) => iteration_variable("argument must be a simple name"),
        (true, "map", 2 | 3) | (true, "filter", 2) => iteration_variable("argument is not an identifier"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
