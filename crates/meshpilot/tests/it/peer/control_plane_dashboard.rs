//! Istio's control-plane Grafana dashboard works against meshpilot unchanged: every PromQL target of
//! the pinned Istio module's `manifests/addons/dashboards/pilot-dashboard.gen.json` (read at test
//! time) is reduced to its metric selectors (name + label matchers, minus the labels the scrape
//! config adds), and each selector finds a series on the `/metrics` of a `meshpilot discovery` that
//! saw the events the panels show: config from files and the real kube-apiserver (a VirtualService
//! added and changed), Kubernetes registry events, the validating webhook called by the API server
//! (a denied and an admitted VirtualService), the injection webhook (an injected pod, an undecodable
//! review), an ADS client that NACKs
//! ([`CdsClient`]). Series meshpilot cannot have are documented in
//! docs/TELEMETRY.md ("Control-plane dashboard") and listed here: `go_*` (each checked through its
//! stand-in, when there is one), `container_*` (the kubelet's), `envoy_*` (Envoy's). The per-panel
//! table is printed.

use std::{collections::BTreeMap, fs::File, process::Stdio, time::Duration};

use base64::Engine;
use kube_source::testenv::TestEnv;
use meshpilot_testing::wait::wait_for_blocking;
use serde_json::Value;

use crate::{
    cds_client::CdsClient,
    webhook_support::{self, Webhook, review_with_bundle, vwc},
};

/// Labels that Prometheus' scrape config adds (target labels), not the process: ignored in matchers.
const SCRAPE_LABELS: &[&str] = &["app", "job", "pod", "instance", "cluster", "namespace", "container"];

/// Series that do not come from the control plane process (docs/TELEMETRY.md).
const NOT_OURS: &[(&str, &str)] = &[
    ("container_", "the kubelet's cAdvisor (container CPU and memory)"),
    ("envoy_", "Envoy's own stats (scraped from the proxies)"),
];

/// istiod's Go runtime series and what stands in for each on meshpilot (`None`: nothing can).
const GO_STAND_INS: &[(&str, Option<&str>)] = &[
    ("go_memstats_stack_inuse_bytes", Some("process_resident_memory_bytes")),
    ("go_memstats_heap_inuse_bytes", Some("process_resident_memory_bytes")),
    ("go_memstats_heap_alloc_bytes", Some("process_resident_memory_bytes")),
    ("go_memstats_alloc_bytes_total", None),
    ("go_memstats_mallocs_total", None),
    ("go_goroutines", Some("process_threads")),
];

/// How a label matcher compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MatchOp {
    /// `=`
    Equal,
    /// `!=`
    NotEqual,
    /// `=~` (a regular expression matching the whole value)
    Regex,
    /// `!~`
    NotRegex,
}

/// One label matcher of a selector (`label OP "value"`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Matcher {
    label: String,
    op: MatchOp,
    value: String,
}

/// One metric selector of a PromQL expression: the metric name and its label matchers.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Selector {
    name: String,
    matchers: Vec<Matcher>,
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if !self.matchers.is_empty() {
            let ops = |op| match op {
                MatchOp::Equal => "=",
                MatchOp::NotEqual => "!=",
                MatchOp::Regex => "=~",
                MatchOp::NotRegex => "!~",
            };
            let list: Vec<String> =
                self.matchers.iter().map(|m| format!("{}{}{:?}", m.label, ops(m.op), m.value)).collect();
            write!(f, "{{{}}}", list.join(","))?;
        }
        Ok(())
    }
}

/// PromQL words that are never metric names: aggregation operators (which may be followed by
/// `by (…)` before their parenthesis), binary set operators and modifiers.
const KEYWORDS: &[&str] = &[
    "sum",
    "avg",
    "min",
    "max",
    "count",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "group",
    "limitk",
    "limit_ratio",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Modifiers followed by a parenthesised list of label names.
const GROUPING: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];

/// The metric selectors of a PromQL expression, in order: every name not followed by `(` (a function)
/// and not a keyword, with its `{…}` matchers when it has them. Strings, range and subquery brackets,
/// numbers, Grafana variables (`$__rate_interval`) and grouping label lists are skipped.
///
/// # Errors
/// An unterminated string, bracket or matcher list, a malformed matcher, or a selector without a
/// metric name (`{__name__=…}`, which the dashboard does not use).
fn selectors(expr: &str) -> Result<Vec<Selector>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let word_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let skip_space = |mut i: usize| {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '"' | '\'' | '`') {
            i = string(&chars, i)?.1;
        } else if c == '[' {
            i = closing(&chars, i, ']')?;
        } else if c == '{' {
            return Err(format!("a selector without a metric name at {i} in {expr:?}"));
        } else if c.is_ascii_digit() || c == '$' {
            // A number (`0.99`, `1e3`) or a Grafana variable.
            i += 1;
            while i < chars.len() && (word_char(chars[i]) || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && word_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = skip_space(i);
            if GROUPING.contains(&word.as_str()) {
                if chars.get(next) == Some(&'(') {
                    i = closing(&chars, next, ')')?;
                }
            } else if KEYWORDS.contains(&word.as_str()) || chars.get(next) == Some(&'(') {
                // An operator, or a function call.
            } else if chars.get(next) == Some(&'{') {
                let (matchers, end) = matchers(&chars, next + 1)?;
                out.push(Selector { name: word, matchers });
                i = end;
            } else {
                out.push(Selector { name: word, matchers: Vec::new() });
            }
        } else {
            i += 1;
        }
    }
    Ok(out)
}

/// The index after the `close` that ends the bracket opened at `open` (strings inside skipped).
fn closing(chars: &[char], open: usize, close: char) -> Result<usize, String> {
    let mut i = open + 1;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => i = string(chars, i)?.1,
            c if c == close => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err(format!("no '{close}' closes the bracket at {open}"))
}

/// The string literal starting at `start` (its quote): its value and the index after it.
fn string(chars: &[char], start: usize) -> Result<(String, usize), String> {
    let quote = chars[start];
    let mut value = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => {
                let escaped = *chars.get(i + 1).ok_or("a string ends in a backslash")?;
                value.push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    other => other,
                });
                i += 2;
            }
            c if c == quote => return Ok((value, i + 1)),
            c => {
                value.push(c);
                i += 1;
            }
        }
    }
    Err(format!("unterminated string at {start}"))
}

/// The matchers of a `{…}` list whose content starts at `start`, and the index after its `}`.
fn matchers(chars: &[char], start: usize) -> Result<(Vec<Matcher>, usize), String> {
    let mut out = Vec::new();
    let mut i = start;
    loop {
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        match chars.get(i) {
            None => return Err(format!("unterminated matcher list at {start}")),
            Some('}') => return Ok((out, i + 1)),
            Some(_) => {}
        }
        let label_start = i;
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
            i += 1;
        }
        let label: String = chars[label_start..i].iter().collect();
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let (op, width) = match (chars.get(i), chars.get(i + 1)) {
            (Some('='), Some('~')) => (MatchOp::Regex, 2),
            (Some('!'), Some('~')) => (MatchOp::NotRegex, 2),
            (Some('!'), Some('=')) => (MatchOp::NotEqual, 2),
            (Some('='), _) => (MatchOp::Equal, 1),
            _ => return Err(format!("no matcher operator after {label:?} at {i}")),
        };
        i += width;
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if label.is_empty() || !matches!(chars.get(i), Some('"' | '\'' | '`')) {
            return Err(format!("malformed matcher at {label_start}"));
        }
        let (value, end) = string(chars, i)?;
        out.push(Matcher { label, op, value });
        i = end;
    }
}

/// One series of a Prometheus text exposition: name, labels, value.
#[derive(Clone, Debug)]
struct Series {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The series of a text exposition (comments skipped; a line that does not parse is an error).
fn parse_exposition(text: &str) -> Result<Vec<Series>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let chars: Vec<char> = line.chars().collect();
        let name_end =
            chars.iter().position(|c| *c == '{' || *c == ' ').ok_or(format!("no value: {line}"))?;
        let name: String = chars[..name_end].iter().collect();
        let mut labels = BTreeMap::new();
        let mut rest = name_end;
        if chars[name_end] == '{' {
            let (list, end) = matchers(&chars, name_end + 1).map_err(|e| format!("{e}: {line}"))?;
            labels = list.into_iter().map(|m| (m.label, m.value)).collect();
            rest = end;
        }
        let value_text: String = chars[rest..].iter().collect();
        let value_text = value_text.split_whitespace().next().ok_or(format!("no value: {line}"))?;
        let value = match value_text {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse::<f64>().map_err(|e| format!("value {v:?}: {e}: {line}"))?,
        };
        out.push(Series { name, labels, value });
    }
    Ok(out)
}

/// Whether `series` matches `selector` (scrape-config labels ignored; a missing label reads as "").
fn matches(selector: &Selector, series: &Series) -> bool {
    series.name == selector.name
        && selector.matchers.iter().filter(|m| !SCRAPE_LABELS.contains(&m.label.as_str())).all(|m| {
            let value = series.labels.get(&m.label).map_or("", String::as_str);
            let regex = || regex::Regex::new(&format!("^(?:{})$", m.value)).expect("a valid regex");
            match m.op {
                MatchOp::Equal => value == m.value,
                MatchOp::NotEqual => value != m.value,
                MatchOp::Regex => regex().is_match(value),
                MatchOp::NotRegex => !regex().is_match(value),
            }
        })
}

/// One selector's verdict: a row of the table; `ok` when it is satisfied.
fn verdict(selector: &Selector, series: &[Series]) -> (bool, String) {
    let count = |s: &Selector| series.iter().filter(|x| matches(s, x)).count();
    if let Some((_, reason)) = NOT_OURS.iter().find(|(prefix, _)| selector.name.starts_with(prefix)) {
        return (true, format!("not ours: {reason}"));
    }
    if selector.name.starts_with("go_") {
        return match GO_STAND_INS.iter().find(|(go, _)| *go == selector.name) {
            Some((_, Some(stand_in))) => {
                let n = count(&Selector { name: (*stand_in).to_string(), matchers: Vec::new() });
                (n > 0, format!("Go runtime; stand-in {stand_in}: {n} series"))
            }
            Some((_, None)) => (true, "Go runtime; no stand-in (docs/TELEMETRY.md)".to_string()),
            None => (false, "Go runtime series not in the documented table".to_string()),
        };
    }
    let n = count(selector);
    (n > 0, format!("{n} series"))
}

/// Every `(panel title, expression)` of a Grafana dashboard (rows' nested panels included).
fn targets(dashboard: &Value) -> Vec<(String, String)> {
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or_default();
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push((title.to_string(), expr.to_string()));
                }
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// The pinned Istio module's control-plane dashboard.
fn dashboard() -> Value {
    let path = crate::istio_peer::module_dir().join("manifests/addons/dashboards/pilot-dashboard.gen.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the control-plane dashboard {} cannot be read ({e}): fetch the pinned Istio module with \
             `scripts/istio-peer.sh build`",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap()
}

/// Events beyond the dashboard's own selectors: each counted where it happens, with a least value.
const EVENTS: &[(&str, f64)] = &[
    (r#"pilot_k8s_cfg_events{type="VirtualService",event="add"}"#, 2.0),
    (r#"pilot_k8s_cfg_events{type="VirtualService",event="update"}"#, 1.0),
    (r#"pilot_k8s_reg_events{type="Namespaces",event="add"}"#, 1.0),
    (r#"pilot_k8s_reg_events{type="Pods",event="add"}"#, 1.0),
    (r#"galley_validation_passed{group="networking.istio.io",version="v1",resource="virtualservices"}"#, 1.0),
    (r#"galley_validation_failed{resource="virtualservices",reason="invalid_resource"}"#, 1.0),
    ("sidecar_injection_requests_total", 2.0),
    ("sidecar_injection_success_total", 2.0),
    ("sidecar_injection_failure_total", 1.0),
    (r#"pilot_total_xds_rejects{type="cds"}"#, 1.0),
    (r#"pilot_xds{version="1.28.0"}"#, 1.0),
    ("process_cpu_seconds_total", 0.0),
    ("process_open_fds", 1.0),
    ("process_start_time_seconds", 1.0),
    ("process_virtual_memory_bytes", 1.0),
];

fn virtual_service(name: &str, weight: i64) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: dashboard}}\n\
         spec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination: {{host: reviews, subset: v1}}\n      weight: {weight}\n\
         \x20   - destination: {{host: reviews, subset: v2}}\n      weight: {}\n",
        100 - weight
    )
}

/// The series on `port`'s `/metrics` (`None` while it does not answer).
fn scrape(port: u16) -> Option<Vec<Series>> {
    let r = webhook_support::local_get(port, "/metrics")?;
    (r.status == 200).then(|| parse_exposition(&r.body).unwrap_or_else(|e| panic!("/metrics: {e}")))
}

#[test]
fn every_dashboard_query_finds_series_on_metrics() {
    let dashboard = dashboard();
    let targets = targets(&dashboard);
    assert!(targets.len() >= 20, "the dashboard's targets: {targets:?}");
    let env = TestEnv::shared_by(file!());
    let _ = env.kubectl(&["create", "namespace", "istio-system"]);
    let _ = env.kubectl(&["create", "namespace", "dashboard"]);
    env.kubectl(&["label", "namespace", "dashboard", "istio-injection=enabled", "--overwrite"]).unwrap();

    let dir = tempfile::tempdir().unwrap();
    webhook_support::write_chart_injection_files(dir.path());
    let config_dir = dir.path().join("config");
    std::fs::create_dir(&config_dir).unwrap();
    std::fs::write(config_dir.join("vs.yaml"), virtual_service("from-files", 10)).unwrap();
    let log_path = dir.path().join("meshpilot.log");
    let server = Webhook::start_in(
        dir.path(),
        env,
        &["--configDir", &config_dir.display().to_string()],
        &[("POD_NAMESPACE", "istio-system")],
        Stdio::from(File::create(&log_path).unwrap()),
    );
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let inject_url = server.url.replace("/validate", "/inject");
    // Deletes the injector's and the validators' configurations at the end, also on failure.
    let _cleanup = webhook_support::install_injector_webhook(env, &inject_url);

    // Validation through the API server: one denied, one admitted (a config event from Kubernetes).
    let config = wait_for_blocking("the validator with failurePolicy Fail", Duration::from_secs(90), || {
        vwc(env, "istiod-default-validator").filter(|c| c["webhooks"][0]["failurePolicy"] == "Fail")
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", log()));
    let bundle = base64::engine::general_purpose::STANDARD
        .decode(config["webhooks"][0]["clientConfig"]["caBundle"].as_str().unwrap())
        .unwrap();
    let err = env.kubectl_apply(&virtual_service("negative", -5)).unwrap_err().to_string();
    assert!(err.contains("denied the request"), "{err}");
    env.kubectl_apply(&virtual_service("from-cluster", 30)).unwrap();

    // Injection: a pod injected through the API server, an undecodable review sent straight.
    env.kubectl_apply(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: dashboard}\n\
         spec:\n  serviceAccountName: default\n  containers:\n  - {name: web, image: nginx}\n",
    )
    .unwrap();
    let text = review_with_bundle(&inject_url, &String::from_utf8(bundle).unwrap());
    assert!(text.contains("could not decode body") && text.ends_with("\n200"), "{text}");

    // A config file changed: an update event.
    meshpilot_testing::write_atomic(&config_dir, "vs.yaml", &virtual_service("from-files", 20));

    // An xDS client that NACKs its clusters, connected while the metrics are read.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let grpc = ([127, 0, 0, 1], server.grpc).into();
    let (client, first) = runtime.block_on(CdsClient::connect(grpc, "nacker", "dashboard", &log));
    client.nack(&first, "cluster 'x': bad lb config");

    let mut rows = Vec::new();
    let waited =
        wait_for_blocking("every dashboard selector and event on /metrics", Duration::from_secs(90), || {
            let series = scrape(server.monitoring)?;
            rows.clear();
            let mut all = true;
            for (panel, expr) in &targets {
                for selector in selectors(expr).unwrap_or_else(|e| panic!("{panel}: {expr}: {e}")) {
                    let (ok, why) = verdict(&selector, &series);
                    all &= ok;
                    rows.push(format!("{} | {panel} | {selector} | {why}", if ok { "ok  " } else { "MISS" }));
                }
            }
            for (event, least) in EVENTS {
                let selector = selectors(event).unwrap().remove(0);
                let total: f64 = series.iter().filter(|s| matches(&selector, s)).map(|s| s.value).sum();
                let present = series.iter().any(|s| matches(&selector, s));
                let ok = present && total >= *least;
                all &= ok;
                rows.push(format!(
                    "{} | (event) | {selector} | {total} (at least {least})",
                    if ok { "ok  " } else { "MISS" }
                ));
            }
            all.then_some(())
        });
    println!("control-plane dashboard against meshpilot ({} targets):\n{}", targets.len(), rows.join("\n"));
    drop(client);
    waited.unwrap_or_else(|e| panic!("{e}:\n{}\n--- meshpilot log ---\n{}", rows.join("\n"), log()));
    // istio_build: the version running, as 1.
    let series = scrape(server.monitoring).unwrap();
    let build = selectors(r#"istio_build{component="pilot"}"#).unwrap().remove(0);
    let build: Vec<&Series> = series.iter().filter(|s| matches(&build, s)).collect();
    assert_eq!(build.len(), 1, "{build:?}");
    assert_eq!(build[0].labels["tag"], env!("CARGO_PKG_VERSION"));
    assert_eq!(build[0].value, 1.0);
}

#[test]
fn selectors_are_extracted_from_the_dashboards_promql() {
    let sel = |s: &str| selectors(s).unwrap().into_iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        sel(r#"sum by (tag) (istio_build{component="pilot"})"#),
        [r#"istio_build{component="pilot"}"#]
    );
    assert_eq!(
        sel(r#"sum by (pod) (container_memory_working_set_bytes{container="discovery",pod=~"istiod-.*"})"#),
        [r#"container_memory_working_set_bytes{container="discovery",pod=~"istiod-.*"}"#]
    );
    assert_eq!(sel("sum by (type) (irate(pilot_xds_pushes[$__rate_interval]))"), ["pilot_xds_pushes"]);
    assert_eq!(
        sel("sum(rate(pilot_xds_push_time_bucket{}[$__rate_interval])) by (le)"),
        ["pilot_xds_push_time_bucket"]
    );
    assert_eq!(sel("sum (pilot_xds)"), ["pilot_xds"]);
    assert_eq!(sel("pilot_total_xds_internal_errors"), ["pilot_total_xds_internal_errors"]);
    assert_eq!(
        sel(r#"a{x!="1", y !~ 'b.*'} / on (pod) group_left(z) b offset 5m > bool 0.5 and c[5m:1m]"#),
        [r#"a{x!="1",y!~"b.*"}"#, "b", "c"]
    );
    assert_eq!(sel(r#"max(foo{l="a\"}b"})"#), [r#"foo{l="a\"}b"}"#]);
    assert!(selectors(r#"{__name__="x"}"#).unwrap_err().contains("without a metric name"));
    assert!(selectors(r#"x{l="open"#).is_err());
    assert!(selectors(r#"x{l}"#).unwrap_err().contains("operator"));

    // Matching: scrape labels ignored, a missing label reads as "", regexes match whole values.
    let series = parse_exposition(
        "# TYPE m counter\nm{type=\"cds\",event=\"add\"} 3\nm 1e3\nh_bucket{le=\"+Inf\"} +Inf\n",
    )
    .unwrap();
    assert_eq!(series.len(), 3);
    assert_eq!(series[1].value, 1000.0);
    let first = |s: &str| selectors(s).unwrap().remove(0);
    assert!(matches(&first(r#"m{app="istiod",type="cds"}"#), &series[0]));
    assert!(!matches(&first(r#"m{type="eds"}"#), &series[0]));
    assert!(matches(&first(r#"m{type=~"c.s"}"#), &series[0]));
    assert!(!matches(&first(r#"m{type=~"c"}"#), &series[0]));
    assert!(matches(&first(r#"m{type=""}"#), &series[1]));
    assert!(matches(&first(r#"m{event!~"upd.*"}"#), &series[0]));
    assert!(parse_exposition("m{x=\"1\"}\n").is_err());
}
