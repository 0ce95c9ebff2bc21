//! The web status page, `GET /` on `--http-addr`: "is my config applied?" at a glance.
//!
//! Server-rendered HTML (no JavaScript build; a small inline script). `GET /` is the whole page;
//! `GET /?fragment=sections` is only its `<section>` elements, which the script fetches every second
//! and swaps in place by id (no reload; a failed fetch marks the page stale and keeps the last
//! content). Sections, each with stable ids and data attributes for tests and scripts:
//!
//! | section | content | hooks |
//! |---|---|---|
//! | `#summary` | ready or not, push context version, counts | `data-ready` |
//! | `#proxies` | one row per connection (and per proxy polling over REST: its last poll, `data-polling="true"`): type, address, connected time, per-type sync state, NACK errors | `tr[data-proxy][data-connection][data-state]`, `td.xds[data-type][data-state]`, `.nack[data-type]` |
//! | `#pushes` | the last pushes ([`discovery::push_log`]) | `tr[data-push-version]`, `data-full` |
//! | `#objects` | every config object in the store, with its source and the findings naming it | `tr[data-object="Kind/ns/name"]`, `td.applied` |
//! | `#config-status` | bad files, duplicates, registry warnings, findings (`/debug/configstatusz`) | `li[data-file]`, `li.finding` |
//!
//! Per-type sync states follow istioctl's `proxy-status` (`istioctl/pkg/writer/pilot/status.go`):
//! `NOT SENT` (nothing sent for the type), `SYNCED` (latest nonce sent is ACKed), `STALE (Never
//! Acknowledged)` and `STALE` (a later response is unacknowledged). meshpilot adds `NACKED`: the
//! proxy rejected the latest response and Envoy's error text is shown (istioctl shows those as
//! `STALE`). A row's `data-state` is the worst of its types: `NACKED` > `STALE` > `NOT SENT` >
//! `SYNCED`, where `NOT SENT` only counts when nothing at all was sent.
//!
//! Every text from objects, proxies and errors is HTML-escaped ([`escape`]).

use std::{
    fmt::Write as _,
    time::{Duration, SystemTime},
};

use axum::{
    extract::{Query, State},
    http::header,
    response::{IntoResponse, Response},
};
use discovery::{
    objects::{ProxyObjectStatus, SyncCounts, SyncStatus},
    push_log::PushRecord,
};
use model::{ConfigStore, push::node::Proxy};
use serde::Deserialize;
use xds::{
    ConnectionSnapshot, TypeStatus,
    type_url::{CLUSTER, ENDPOINT, EXTENSION_CONFIG, LISTENER, ROUTE, short_name},
};

use crate::DebugState;

/// The xDS types with a column, in istioctl's order (`CDS LDS EDS RDS ECDS`).
const COLUMNS: [&str; 5] = [CLUSTER, LISTENER, ENDPOINT, ROUTE, EXTENSION_CONFIG];

/// How often the page refreshes its sections, in milliseconds.
const REFRESH_MS: u32 = 1000;

#[derive(Deserialize)]
pub(crate) struct PageQuery {
    fragment: Option<String>,
}

/// `GET /`: the page, or with `?fragment=sections` its sections only.
pub(crate) async fn status_page(State(s): State<DebugState>, Query(q): Query<PageQuery>) -> Response {
    let sections = render_sections(&s);
    let body = if q.fragment.is_some() { sections } else { page(&sections) };
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], body)
        .into_response()
}

/// HTML-escapes `s` for text and attribute values (`&`, `<`, `>`, `"`, `'`).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// istioctl's sync state of one type from its nonces (`xdsStatus` in `status.go`).
pub fn xds_status(sent: &str, acked: &str) -> &'static str {
    if sent.is_empty() {
        "NOT SENT"
    } else if sent == acked {
        "SYNCED"
    } else if acked.is_empty() {
        "STALE (Never Acknowledged)"
    } else {
        "STALE"
    }
}

/// The state of one type as the page shows it: `(data-state, text)`; `NACKED` when the proxy's
/// last response for the type was a NACK (kept until the next ACK), else [`xds_status`] (whose
/// `STALE (Never Acknowledged)` has `data-state="STALE"`).
fn type_state(t: Option<&TypeStatus>) -> (&'static str, &'static str) {
    match t {
        None => ("NOT SENT", "NOT SENT"),
        Some(t) if t.last_error.is_some() => ("NACKED", "NACKED"),
        Some(t) => {
            let text = xds_status(&t.nonce_sent, &t.nonce_acked);
            (if text.starts_with("STALE") { "STALE" } else { text }, text)
        }
    }
}

/// A connection's overall state: the worst of its types.
fn proxy_state(c: &ConnectionSnapshot<Proxy>) -> &'static str {
    let states: Vec<&str> = c.types.values().map(|t| type_state(Some(t)).0).collect();
    if states.contains(&"NACKED") {
        "NACKED"
    } else if states.contains(&"STALE") {
        "STALE"
    } else if states.iter().all(|s| *s == "NOT SENT") {
        "NOT SENT"
    } else {
        "SYNCED"
    }
}

fn page(sections: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>meshpilot status</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
h1 {{ font-size: 1.4em; }} h2 {{ font-size: 1.15em; margin-top: 1.5em; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }}
th {{ background: #f2f2f2; }}
h3 {{ font-size: 1em; }}
td[data-state="SYNCED"] {{ color: #176117; }}
td[data-state="STALE"] {{ color: #8a5a00; }}
td[data-state="NACKED"] {{ color: #a40000; font-weight: bold; }}
td[data-state="NOT SENT"] {{ color: #777; }}
tr[data-state="NACKED"] {{ background: #fdecec; }}
tr[data-state="STALE"] {{ background: #fdf6e3; }}
.nack, .error {{ color: #a40000; white-space: pre-wrap; font-family: monospace; }}
.muted {{ color: #777; }}
#live[data-live="stale"] {{ color: #a40000; }}
</style></head>
<body>
<h1>meshpilot status <small id="live" class="muted" data-live="loading">live</small></h1>
<p class="muted">Refreshes every {REFRESH_MS} ms without reloading. JSON: <a href="/debug/syncz">syncz</a>,
<a href="/debug/adsz">adsz</a>, <a href="/debug/configz">configz</a>, <a href="/debug/configstatusz">configstatusz</a>.</p>
<main id="sections">
{sections}
</main>
<script>
(function () {{
  var live = document.getElementById('live');
  var refreshes = 0;
  function swap(html) {{
    var tpl = document.createElement('template');
    tpl.innerHTML = html;
    tpl.content.querySelectorAll('section[id]').forEach(function (fresh) {{
      var old = document.getElementById(fresh.id);
      if (old) {{ old.replaceWith(fresh); }} else {{ document.getElementById('sections').appendChild(fresh); }}
    }});
  }}
  function refresh() {{
    fetch('/?fragment=sections', {{ cache: 'no-store' }})
      .then(function (r) {{ if (!r.ok) {{ throw new Error('HTTP ' + r.status); }} return r.text(); }})
      .then(function (html) {{
        swap(html);
        refreshes += 1;
        live.dataset.live = 'live';
        live.dataset.refreshes = String(refreshes);
        live.textContent = 'live, updated ' + new Date().toLocaleTimeString();
      }})
      .catch(function (e) {{
        live.dataset.live = 'stale';
        live.textContent = 'stale: control plane unreachable (' + e.message + ')';
      }})
      .finally(function () {{ setTimeout(refresh, {REFRESH_MS}); }});
  }}
  setTimeout(refresh, {REFRESH_MS});
}})();
</script>
</body></html>
"#
    )
}

/// Every section, from the server's current state.
fn render_sections(s: &DebugState) -> String {
    let mut conns = crate::proxies(&s.server);
    conns.sort_by(|a, b| (&a.proxy.id, &a.id).cmp(&(&b.proxy.id, &b.id)));
    let pushes = s.server.push_log().recent();
    let mut out = String::new();
    out.push_str(&summary_section(s, conns.len()));
    out.push_str(&proxies_section(&conns, SystemTime::now()));
    out.push_str(&pushes_section(&pushes, s.server.push_log().total()));
    out.push_str(&objects_section(&object_rows(s)));
    out.push_str(&config_status_section(s));
    out
}

fn summary_section(s: &DebugState, proxies: usize) -> String {
    let ready = s.server.is_ready();
    let version = s.server.push_context().map(|p| p.version().to_owned()).unwrap_or_default();
    format!(
        "<section id=\"summary\" data-ready=\"{ready}\"><p>{}; push context version <code>{}</code>; \
         connected proxies: {proxies}; pushes: {}.</p></section>\n",
        if ready { "Ready" } else { "Not ready (config and services not synced yet)" },
        escape(if version.is_empty() { "none" } else { &version }),
        s.server.push_count(),
    )
}

/// `12s`, `3m4s`, `2h5m`, `1d3h`: a coarse age.
fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
    }
}

fn proxies_section(conns: &[ConnectionSnapshot<Proxy>], now: SystemTime) -> String {
    let mut out = String::from("<section id=\"proxies\"><h2>Proxies</h2>\n");
    if conns.is_empty() {
        out.push_str("<p class=\"empty\">No proxy is connected.</p></section>\n");
        return out;
    }
    out.push_str(
        "<table><thead><tr><th>Proxy</th><th>Type</th><th>Connection</th><th>Address</th><th>Connected</th>",
    );
    for t in COLUMNS {
        let _ = write!(out, "<th>{}</th>", short_name(t));
    }
    out.push_str("<th>State</th><th>Last NACK</th></tr></thead><tbody>\n");
    for c in conns {
        let state = proxy_state(c);
        // A polling proxy (REST xDS) has no connection: its last poll instead, and no ACK/NACK of its
        // own (what its next poll's version says, xds::polling).
        let (when, label) = match c.last_poll {
            Some(t) => (t, "polling (REST, cannot ACK/NACK), last poll "),
            None => (c.connected_at, ""),
        };
        let connected = xds::debug::rfc3339_nano(Some(when));
        let _ = write!(
            out,
            "<tr data-proxy=\"{id}\" data-connection=\"{conn}\" data-state=\"{state}\"{polling}>\
             <td>{id}</td><td>{ty}</td>\
             <td>{conn}</td><td>{addr}</td><td title=\"{connected}\">{label}{connected} ({age} ago)</td>",
            id = escape(&c.proxy.id),
            conn = escape(&c.id),
            ty = escape(c.proxy.node_type.as_str()),
            addr = c.peer.map_or_else(|| "-".to_owned(), |p| escape(&p.to_string())),
            polling = if c.last_poll.is_some() { " data-polling=\"true\"" } else { "" },
            age = age(now.duration_since(when).unwrap_or_default()),
        );
        for t in COLUMNS {
            let (data, text) = type_state(c.types.get(t));
            let _ = write!(
                out,
                "<td class=\"xds\" data-type=\"{}\" data-state=\"{data}\">{text}</td>",
                short_name(t)
            );
        }
        let _ = write!(out, "<td class=\"state\" data-state=\"{state}\">{state}</td><td>");
        for (type_url, t) in &c.types {
            if let Some(error) = &t.last_error {
                let _ = write!(
                    out,
                    "<div class=\"nack\" data-type=\"{ty}\">{ty}: {}</div>",
                    escape(error),
                    ty = escape(short_name(type_url)),
                );
            }
        }
        out.push_str("</td></tr>\n");
    }
    out.push_str("</tbody></table></section>\n");
    out
}

fn pushes_section(pushes: &[PushRecord], total: u64) -> String {
    let mut out = format!(
        "<section id=\"pushes\" data-total=\"{total}\"><h2>Recent pushes</h2>\n\
         <p class=\"muted\">{total} pushes so far; the last {} shown, newest first. Duration: building the \
         push context and queuing it to the proxies concerned.</p>\n",
        pushes.len()
    );
    if pushes.is_empty() {
        out.push_str("<p class=\"empty\">No push yet.</p></section>\n");
        return out;
    }
    out.push_str(
        "<table><thead><tr><th>Time</th><th>Version</th><th>Kind</th><th>Reasons</th><th>Changed config</th>\
         <th>Proxies</th><th>Duration (ms)</th></tr></thead><tbody>\n",
    );
    for p in pushes {
        let reasons: Vec<String> = p.reasons.iter().map(|(r, n)| format!("{}×{n}", escape(r))).collect();
        let mut configs: Vec<String> = p.configs.iter().map(|c| escape(c)).collect();
        if p.configs_total > p.configs.len() {
            configs.push(format!("… {} more", p.configs_total - p.configs.len()));
        }
        let _ = writeln!(
            out,
            "<tr data-push-version=\"{v}\" data-full=\"{full}\"><td>{time}</td><td><code>{v}</code></td><td>{kind}</td>\
             <td class=\"reasons\">{reasons}</td><td>{configs}</td><td class=\"proxies\">{proxies}</td>\
             <td>{ms:.1}</td></tr>",
            v = escape(&p.version),
            full = p.full,
            time = xds::debug::rfc3339_nano(Some(p.time)),
            kind = if p.full { "full" } else { "incremental (endpoints)" },
            reasons = reasons.join(", "),
            configs = configs.join("<br>"),
            proxies = p.proxies,
            ms = p.duration_ms(),
        );
    }
    out.push_str("</tbody></table></section>\n");
    out
}

/// One config object of the objects table.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectRow {
    /// Istio kind (`VirtualService`).
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Where it was read from: the file source's name (`file:<dir>`), or `other` (e.g. a cluster).
    pub source: String,
    /// The findings about it (config applied only in part: push context and per-proxy generation
    /// findings naming this object), as their text.
    pub findings: Vec<String>,
    /// Whether the proxies the object concerns have ACKed (or NACKed) the config built from it;
    /// from `discovery::objects` (see [`applied_cell`]).
    pub applied: Option<AppliedCell>,
}

/// The "Applied" cell of an object row.
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedCell {
    /// Its `data-state` (`ACKED`, `PENDING`, `NACKED`, `NONE`).
    pub state: String,
    /// The text shown (e.g. `2/3 proxies ACKed; NACK by x: …`), escaped on output.
    pub text: String,
}

/// The objects table's rows: every object in the store, sorted by kind, namespace and name, with
/// its source, findings and per-object ACK/NACK status (`discovery::objects`, the same data as
/// `/debug/objectz`; an object the store holds but the status does not list gets no cell).
pub fn object_rows(s: &DebugState) -> Vec<ObjectRow> {
    let store = s.server.store();
    let mut findings: std::collections::HashMap<model::ConfigKey, Vec<String>> = Default::default();
    let push_findings = s.server.push_context().map(|p| p.findings().to_vec()).unwrap_or_default();
    let generation = s.server.generation_cache().generation_findings().into_iter().map(|(f, _)| f);
    for f in push_findings.into_iter().chain(generation) {
        if let Some(key) = f.config.clone() {
            findings.entry(key).or_default().push(f.to_string());
        }
    }
    let summaries = discovery::objects::object_statuses(&s.server, &s.files);
    let applied: std::collections::HashMap<(&str, &str, &str), &discovery::objects::ObjectStatusSummary> =
        summaries.iter().map(|o| ((o.kind.as_str(), o.namespace.as_str(), o.name.as_str()), o)).collect();
    let mut rows = Vec::new();
    for kind in store.schemas() {
        for config in store.list(*kind, None) {
            let meta = &config.meta;
            let source = s
                .files
                .iter()
                .find(|f| f.store().get(*kind, &meta.namespace, &meta.name).is_some())
                .map_or_else(|| "other".to_owned(), |f| f.store().name().to_owned());
            let key = config.key();
            let applied =
                applied.get(&(kind.as_str(), meta.namespace.as_str(), meta.name.as_str())).map(|summary| {
                    let nacked = if summary.counts.nacked > 0 {
                        discovery::objects::object_status(&s.server, &s.files, &key).map(|o| o.proxies)
                    } else {
                        None
                    };
                    applied_cell(summary.counts, nacked.as_deref().unwrap_or_default())
                });
            rows.push(ObjectRow {
                kind: kind.as_str().to_owned(),
                namespace: meta.namespace.clone(),
                name: meta.name.clone(),
                source,
                findings: findings.remove(&key).unwrap_or_default(),
                applied,
            });
        }
    }
    rows.sort_by(|a, b| (&a.kind, &a.namespace, &a.name).cmp(&(&b.kind, &b.namespace, &b.name)));
    rows
}

/// The "Applied" cell of an object concerning `counts` proxies (`discovery::objects`): `NACKED`
/// when any proxy rejected the push holding its version (each such proxy named with Envoy's error
/// and the Istio field traced, from `proxies`), else `PENDING` while any has not ACKed it, else
/// `ACKED`; `NONE` when no connected proxy is concerned.
pub fn applied_cell(counts: SyncCounts, proxies: &[ProxyObjectStatus]) -> AppliedCell {
    let total = counts.acked + counts.pending + counts.nacked;
    let state = if total == 0 {
        "NONE"
    } else if counts.nacked > 0 {
        "NACKED"
    } else if counts.pending > 0 {
        "PENDING"
    } else {
        "ACKED"
    };
    let mut text = if total == 0 {
        "no connected proxy concerned".to_owned()
    } else {
        format!("{}/{total} ACKED", counts.acked)
    };
    if counts.pending > 0 {
        let _ = write!(text, ", {} pending", counts.pending);
    }
    for p in proxies.iter().filter(|p| p.status == SyncStatus::Nacked) {
        // The proxy id (`<pod>.<namespace>`, the node id's third field), as the proxies table.
        let _ = write!(text, "; NACKED by {}", p.proxy.split('~').nth(2).unwrap_or(&p.proxy));
        if let Some(error) = &p.error {
            let _ = write!(text, ": {error}");
        }
        if let Some(field) = &p.field {
            let _ = write!(text, " (from {field})");
        }
    }
    AppliedCell { state: state.to_owned(), text }
}

/// The `#objects` section for `rows`.
pub fn objects_section(rows: &[ObjectRow]) -> String {
    let mut out = format!("<section id=\"objects\" data-count=\"{}\"><h2>Config objects</h2>\n", rows.len());
    if rows.is_empty() {
        out.push_str("<p class=\"empty\">No config object in the store.</p></section>\n");
        return out;
    }
    out.push_str(
        "<table><thead><tr><th>Kind</th><th>Namespace</th><th>Name</th><th>Source</th><th>Findings</th><th>Applied</th></tr>\
         </thead><tbody>\n",
    );
    for r in rows {
        let applied = match &r.applied {
            Some(a) => {
                format!("<td class=\"applied\" data-state=\"{}\">{}</td>", escape(&a.state), escape(&a.text))
            }
            None => "<td class=\"applied muted\">-</td>".to_owned(),
        };
        let findings = if r.findings.is_empty() {
            "<td class=\"findings muted\" data-count=\"0\">-</td>".to_owned()
        } else {
            let items: Vec<String> =
                r.findings.iter().map(|f| format!("<li class=\"finding\">{}</li>", escape(f))).collect();
            format!(
                "<td class=\"findings\" data-count=\"{}\"><ul>{}</ul></td>",
                r.findings.len(),
                items.concat()
            )
        };
        let _ = writeln!(
            out,
            "<tr data-object=\"{k}/{ns}/{n}\"><td>{k}</td><td>{ns}</td><td>{n}</td><td>{src}</td>{findings}{applied}</tr>",
            k = escape(&r.kind),
            ns = escape(&r.namespace),
            n = escape(&r.name),
            src = escape(&r.source),
        );
    }
    out.push_str("</tbody></table></section>\n");
    out
}

/// `#config-status`: what `/debug/configstatusz` reports, as lists.
fn config_status_section(s: &DebugState) -> String {
    let mut out = String::from("<section id=\"config-status\"><h2>Config status</h2>\n");
    let mut any = false;

    let mut bad = String::new();
    let mut dups = String::new();
    for f in &s.files {
        let status = f.status();
        for b in &status.bad_files {
            let path = b.file.display().to_string();
            let _ = write!(
                bad,
                "<li data-file=\"{p}\"><code>{p}</code> (since {since}, {kept} objects kept)<ul>",
                p = escape(&path),
                since = xds::debug::rfc3339_nano(Some(b.since)),
                kept = b.kept_objects,
            );
            for e in &b.errors {
                let _ = write!(
                    bad,
                    "<li class=\"error\">document {} {} line {}{}: {}</li>",
                    e.document,
                    escape(&e.object),
                    e.line,
                    if e.path.is_empty() { String::new() } else { format!(" {}", escape(&e.path)) },
                    escape(&e.message),
                );
            }
            bad.push_str("</ul></li>\n");
        }
        for d in &status.duplicates {
            let files: Vec<String> = d.files.iter().map(|f| escape(&f.display().to_string())).collect();
            let _ = writeln!(
                dups,
                "<li data-object=\"{}\">{} in {}</li>",
                escape(&d.key.to_string()),
                escape(&d.key.to_string()),
                files.join(", ")
            );
        }
    }
    any |= list(&mut out, "invalid-files", "Invalid files (not applied)", &bad);
    any |= list(&mut out, "duplicates", "Duplicate objects", &dups);

    let mut warnings = String::new();
    for w in s.server.services().warnings() {
        let _ = writeln!(
            warnings,
            "<li class=\"warning\">{}: {}</li>",
            escape(&format!("{}/{}/{}", w.object.kind.as_str(), w.object.namespace, w.object.name)),
            escape(&w.message)
        );
    }
    for w in s.startup_warnings.iter() {
        let _ = writeln!(warnings, "<li class=\"warning\">{}</li>", escape(w));
    }
    any |= list(&mut out, "warnings", "Warnings", &warnings);

    let mut findings = String::new();
    if let Some(push) = s.server.push_context() {
        for f in push.findings() {
            let _ = writeln!(findings, "<li class=\"finding\">{}</li>", escape(&f.to_string()));
        }
    }
    for (f, seen) in s.server.generation_cache().generation_findings() {
        let _ = writeln!(
            findings,
            "<li class=\"finding\">{} <span class=\"muted\">({} generations; proxies: {})</span></li>",
            escape(&f.to_string()),
            seen.count,
            escape(&seen.proxies.join(", "))
        );
    }
    any |= list(&mut out, "findings", "Findings (config applied in part)", &findings);

    let mut secrets = String::new();
    for sec in s.secrets.status() {
        if let Some(error) = &sec.error {
            let _ = writeln!(
                secrets,
                "<li class=\"error\" data-secret=\"{n}\">{n}: {}</li>",
                escape(error),
                n = escape(&sec.name)
            );
        }
    }
    any |= list(&mut out, "secrets", "File secrets refused", &secrets);

    if !any {
        out.push_str("<p class=\"empty\">No invalid file, warning or finding.</p>\n");
    }
    out.push_str("</section>\n");
    out
}

/// Appends `<div id=id><h3>title</h3><ul>items</ul></div>` when `items` is not empty.
fn list(out: &mut String, id: &str, title: &str, items: &str) -> bool {
    if items.is_empty() {
        return false;
    }
    let _ = write!(out, "<div id=\"{id}\"><h3>{title}</h3><ul>\n{items}</ul></div>\n");
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::push::node::NodeMetadata;
    use std::{collections::BTreeMap, sync::Arc, time::UNIX_EPOCH};
    use xds::{SyncState, source::Variant};

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<img src=x onerror="a('b')">&"#),
            "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;&amp;"
        );
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn xds_status_follows_istioctl() {
        assert_eq!(xds_status("", ""), "NOT SENT");
        assert_eq!(xds_status("n1", "n1"), "SYNCED");
        assert_eq!(xds_status("n1", ""), "STALE (Never Acknowledged)");
        assert_eq!(xds_status("n2", "n1"), "STALE");
    }

    fn conn(id: &str, types: BTreeMap<String, TypeStatus>) -> ConnectionSnapshot<Proxy> {
        let proxy =
            Proxy::parse(&format!("sidecar~10.0.0.1~{id}~ns.svc.cluster.local"), NodeMetadata::default())
                .unwrap();
        ConnectionSnapshot {
            id: format!("{id}-1"),
            proxy: Arc::new(proxy),
            peer: None,
            connected_at: UNIX_EPOCH,
            protocol: Variant::Sotw,
            types,
            last_poll: None,
        }
    }

    fn sent(nonce: &str, acked: &str, error: Option<&str>) -> TypeStatus {
        TypeStatus {
            state: if error.is_some() { SyncState::Rejected } else { SyncState::Acked },
            nonce_sent: nonce.into(),
            nonce_acked: acked.into(),
            last_error: error.map(str::to_owned),
            ..TypeStatus::default()
        }
    }

    #[test]
    fn proxy_rows_show_states_and_escaped_nack_errors() {
        let mut types = BTreeMap::new();
        types.insert(CLUSTER.to_owned(), sent("n1", "n1", None));
        types.insert(ROUTE.to_owned(), sent("n3", "n2", Some("bad <route> \"x\"")));
        types.insert(LISTENER.to_owned(), sent("n4", "", None));
        let nacked = conn("a<b>.ns", types);
        let mut types = BTreeMap::new();
        types.insert(CLUSTER.to_owned(), sent("n1", "n1", None));
        let synced = conn("c.ns", types);
        let fresh = conn("d.ns", BTreeMap::new());
        let mut polling = conn("p.ns", BTreeMap::new());
        polling.protocol = Variant::Rest;
        polling.last_poll = Some(UNIX_EPOCH + Duration::from_secs(70));
        let html = proxies_section(&[nacked, synced, fresh, polling], UNIX_EPOCH + Duration::from_secs(75));
        assert!(html.contains("data-state=\"NOT SENT\" data-polling=\"true\">"), "{html}");
        assert!(
            html.contains("polling (REST, cannot ACK/NACK), last poll 1970-01-01T00:01:10Z (5s ago)"),
            "{html}"
        );
        assert!(
            html.contains(
                "<tr data-proxy=\"a&lt;b&gt;.ns\" data-connection=\"a&lt;b&gt;.ns-1\" data-state=\"NACKED\">"
            ),
            "{html}"
        );
        assert!(
            html.contains("<td class=\"xds\" data-type=\"RDS\" data-state=\"NACKED\">NACKED</td>"),
            "{html}"
        );
        assert!(
            html.contains("data-type=\"LDS\" data-state=\"STALE\">STALE (Never Acknowledged)</td>"),
            "{html}"
        );
        assert!(html.contains("data-type=\"EDS\" data-state=\"NOT SENT\">NOT SENT</td>"), "{html}");
        assert!(
            html.contains("<div class=\"nack\" data-type=\"RDS\">RDS: bad &lt;route&gt; &quot;x&quot;</div>"),
            "{html}"
        );
        assert!(
            html.contains("<tr data-proxy=\"c.ns\" data-connection=\"c.ns-1\" data-state=\"SYNCED\">"),
            "{html}"
        );
        assert!(
            html.contains("<tr data-proxy=\"d.ns\" data-connection=\"d.ns-1\" data-state=\"NOT SENT\">"),
            "{html}"
        );
        assert!(html.contains("(1m15s ago)"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
        assert!(proxies_section(&[], UNIX_EPOCH).contains("No proxy is connected"));
    }

    #[test]
    fn push_rows_show_reasons_kind_and_overflowing_configs() {
        let record = PushRecord {
            version: "v<1>".into(),
            reasons: vec![("config".into(), 2), ("debug".into(), 1)],
            full: false,
            configs: vec!["VirtualService/ns/<x>".into()],
            configs_total: 3,
            proxies: 4,
            duration: Duration::from_micros(2500),
            time: UNIX_EPOCH,
        };
        let html = pushes_section(&[record], 7);
        assert!(html.contains("<tr data-push-version=\"v&lt;1&gt;\" data-full=\"false\">"), "{html}");
        assert!(html.contains("config×2, debug×1"), "{html}");
        assert!(html.contains("VirtualService/ns/&lt;x&gt;<br>… 2 more"), "{html}");
        assert!(html.contains("<td class=\"proxies\">4</td><td>2.5</td>"), "{html}");
        assert!(html.contains("data-total=\"7\""), "{html}");
        assert!(pushes_section(&[], 0).contains("No push yet"));
    }

    #[test]
    fn object_rows_plug_in_an_applied_column() {
        let rows = vec![
            ObjectRow {
                kind: "VirtualService".into(),
                namespace: "ns".into(),
                name: "r\"><script>".into(),
                source: "file:/c".into(),
                findings: vec!["a <b> finding".into()],
                applied: Some(AppliedCell { state: "NACKED".into(), text: "NACK by <p>".into() }),
            },
            ObjectRow {
                kind: "Gateway".into(),
                namespace: "ns".into(),
                name: "g".into(),
                source: "other".into(),
                findings: Vec::new(),
                applied: None,
            },
        ];
        let html = objects_section(&rows);
        assert!(html.contains("<tr data-object=\"VirtualService/ns/r&quot;&gt;&lt;script&gt;\">"), "{html}");
        assert!(
            html.contains("<td class=\"applied\" data-state=\"NACKED\">NACK by &lt;p&gt;</td>"),
            "{html}"
        );
        assert!(html.contains("<tr data-object=\"Gateway/ns/g\"><td>Gateway</td><td>ns</td><td>g</td><td>other</td><td class=\"findings muted\" data-count=\"0\">-</td><td class=\"applied muted\">-</td>"), "{html}");
        assert!(html.contains("<td class=\"findings\" data-count=\"1\"><ul><li class=\"finding\">a &lt;b&gt; finding</li></ul></td>"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
        assert!(objects_section(&[]).contains("No config object"));
    }

    #[test]
    fn applied_cells_name_the_worst_state_and_each_rejecting_proxy() {
        let counts = |acked, pending, nacked| SyncCounts { acked, pending, nacked };
        let none = applied_cell(counts(0, 0, 0), &[]);
        assert_eq!((none.state.as_str(), none.text.as_str()), ("NONE", "no connected proxy concerned"));
        let acked = applied_cell(counts(3, 0, 0), &[]);
        assert_eq!((acked.state.as_str(), acked.text.as_str()), ("ACKED", "3/3 ACKED"));
        let pending = applied_cell(counts(1, 2, 0), &[]);
        assert_eq!((pending.state.as_str(), pending.text.as_str()), ("PENDING", "1/3 ACKED, 2 pending"));
        let proxy = |id: &str, status, error: Option<&str>| ProxyObjectStatus {
            proxy: id.into(),
            connection: format!("{id}-1"),
            status,
            types: Vec::new(),
            error: error.map(Into::into),
            field: error.map(|_| "spec.http[0].headers.request.set.x-bad".into()),
            polling: false,
        };
        let proxies = [
            proxy("a.ns", SyncStatus::Acked, None),
            proxy(
                "sidecar~10.0.0.2~b.ns~ns.svc.cluster.local",
                SyncStatus::Nacked,
                Some("Not supported field in StreamInfo: FOO"),
            ),
            proxy("c.ns", SyncStatus::Pending, None),
        ];
        let nacked = applied_cell(counts(1, 1, 1), &proxies);
        assert_eq!(nacked.state, "NACKED");
        assert_eq!(
            nacked.text,
            "1/3 ACKED, 1 pending; NACKED by b.ns: Not supported field in StreamInfo: FOO \
             (from spec.http[0].headers.request.set.x-bad)"
        );
    }

    #[test]
    fn ages_are_coarse() {
        assert_eq!(age(Duration::from_secs(5)), "5s");
        assert_eq!(age(Duration::from_secs(3 * 3600 + 120)), "3h2m");
        assert_eq!(age(Duration::from_secs(2 * 86_400 + 3600)), "2d1h");
    }
}
