//! The CEL parser against cel-go's accepted and rejected inputs and its limits.

use crate::telemetry::cel;

#[test]
fn cel_filters_from_istio_tests() {
    // TestValidateTelemetryFilter.
    assert!(cel::parse("response.code >= 400").is_ok());
    assert!(cel::parse("connection.mtls && request.url_path.contains('v1beta3')").is_ok());
    assert!(cel::parse("response.code").is_ok());
    assert!(cel::parse(")++++").is_err());
}

#[test]
fn cel_syntax() {
    let valid = [
        "true",
        "a ? b : c ? d : e",
        "a || b && c || !d",
        "!!a",
        "-a",
        "--a",
        "-1",
        "--1",
        "!-1",
        "-9223372036854775808",
        "0x7fffffffffffffff",
        "-0x8000000000000000",
        "18446744073709551615u",
        "0xffffffffffffffffU",
        "1.5e10 + .5 + 1e-3 + 2.0E+2",
        "1e-400",
        "a.b.c[0]['k'].d(1, 2)",
        ".a.b",
        ".f(x)",
        "a.b.C{f: 1, g: [1, 2]}",
        ".a.B{}",
        "A{f: 1,}",
        "A{,}",
        "[]",
        "[,]",
        "[1, 2,]",
        "{}",
        "{,}",
        "{'a': 1, 2: b,}",
        "x in [1, 2] && y != null",
        "a <= b == c > d",
        "1 + 2 * 3 - 4 / 5 % 6",
        "\"str\" + 'str' + \"\"\"multi\nline\"\"\" + '''x''' + r\"raw\\q\" + R'raw' + r\"\"\"r\"\"\"",
        "b\"bytes\" + B'\\x00\\377' + br'x' + bR\"\"\"y\"\"\"",
        "'\\a\\b\\f\\n\\r\\t\\v\\\\\\?\\`\\'\\\"\\x41\\X41\\u0041\\U0001F600\\101'",
        "a.`b-c/d.e f`",
        "A{`x-y`: 1}",
        "has(a.b)",
        "has((a.b))",
        "l.all(x, x > 0) && l.exists(x, x == 1) && l.exists_one(x, x == 2)",
        "l.map(x, x * 2) + l.map(x, x > 1, x) + l.filter(x, x > 1)",
        "l.all(x)",
        "all(x, y)",
        "l.existsOne(1, 2)",
        "a // comment\n && b",
        "f()",
        "a.if",
        "in_x + truex + nullable",
        "request.headers['x-foo'] == 'bar' && response.code >= 400",
        "\u{c}a\t",
        "-1u",
        "1.e5",
    ];
    for text in valid {
        assert_eq!(cel::parse(text), Ok(()), "{text:?} should parse");
    }
    let invalid = [
        "",
        " ",
        "a b",
        "a +",
        "(a",
        "a)",
        "a.",
        "a..b",
        "a.1",
        "a.true",
        "a.in",
        "a[]",
        "f(a,)",
        "!-a",
        "-!a",
        "a = b",
        "a & b",
        "a | b",
        "a # b",
        "a ? b",
        "a ? b : ",
        "if",
        "for(x)",
        "while + 1",
        "`a`",
        "[a, , b]",
        "{a}",
        "{a: }",
        "A{f}",
        "A{1: 2}",
        "a.?b",
        "a[?b]",
        "[?a]",
        "{?a: b}",
        "A{?f: 1}",
        "'unterminated",
        "\"a\nb\"",
        "'\\q'",
        "'\\400'",
        "'\\x4'",
        "'\\ud800'",
        "'\\U00110000'",
        "b'\\u0041'",
        "\"\"\"unterminated",
        "9223372036854775808",
        "-9223372036854775809",
        "0x8000000000000000",
        "18446744073709551616u",
        "1e400",
        "0X1",
        "rb'x'",
        "has(a)",
        "has(a[0])",
        "l.all(1, true)",
        "l.exists(x.y, true)",
        "l.map(f(x), x)",
        "l.filter(__result__, true)",
        "é",
    ];
    for text in invalid {
        assert!(cel::parse(text).is_err(), "{text:?} should be rejected");
    }
}

#[test]
fn cel_deepest_inputs_fit_a_small_stack() {
    let deepest = [
        format!("{}a{}", "(".repeat(249), ")".repeat(249)),
        format!("{}{}", "[".repeat(249), "]".repeat(249)),
        format!("{}1{}", "{1: ".repeat(249), "}".repeat(249)),
        format!("{}a{}", "f(".repeat(249), ")".repeat(249)),
        format!("{}x{}", "a ? b : ".repeat(249), ".b".repeat(248)),
    ];
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || deepest.iter().map(|text| cel::parse(text).is_ok()).collect::<Vec<_>>())
        .unwrap();
    assert_eq!(handle.join().unwrap(), [true, true, true, true, false]);
}

#[test]
fn cel_limits() {
    let nested = |n: usize| format!("{}a{}", "(".repeat(n), ")".repeat(n));
    assert!(cel::parse(&nested(200)).is_ok());
    assert!(cel::parse(&nested(249)).is_ok());
    assert!(cel::parse(&nested(250)).unwrap_err().contains("expression recursion limit exceeded: 250"));
    assert!(cel::parse(&nested(5000)).is_err());
    let chain = |n: usize| format!("a{}", ".b".repeat(n));
    assert!(cel::parse(&chain(249)).is_ok());
    assert!(cel::parse(&chain(250)).is_err());
    let sum = |n: usize| format!("1{}", " + 1".repeat(n));
    assert!(cel::parse(&sum(248)).is_ok());
    assert!(cel::parse(&sum(249)).is_err());
    let or = format!("a{}", " || a".repeat(2000));
    assert!(cel::parse(&or).is_ok());
    let lists = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(cel::parse(&lists(240)).is_ok());
    assert!(cel::parse(&lists(260)).is_err());
    let big = "a".repeat(100_001);
    assert!(cel::parse(&big).unwrap_err().contains("code point size exceeds limit"));
    // The visitor's limit counts selections and operators together.
    let mixed = format!("{}x{}", "a ? b : ".repeat(200), ".b".repeat(100));
    assert!(
        cel::parse(&mixed).unwrap_err().contains("max recursion depth exceeded"),
        "{:?}",
        cel::parse(&mixed)
    );
}
