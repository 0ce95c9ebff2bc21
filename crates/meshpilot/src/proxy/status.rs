//! `meshpilot proxy-status [PROXY]`: istioctl's sync-status table (`istioctl/pkg/writer/pilot/status.go`)
//! from `/debug/proxystatusz`.
//!
//! - Default: `NAME CLUSTER ISTIOD VERSION SUBSCRIBED TYPES`, one row per connection sorted by proxy
//!   id; SUBSCRIBED TYPES is `<n> (CDS,LDS,EDS,RDS,…)` (core types in that order, others by type URL)
//!   or `0`.
//! - `--verbose` (istioctl's `-v 1`): `NAME CLUSTER <one column per type> ISTIOD VERSION`, the types
//!   (CDS, EDS, LDS, RDS, ECDS and any other watched) ordered by type URL, each cell
//!   `SYNCED (5m)`, `STALE (3s)`, `ERROR (1m)`, `NOT SENT` or `IGNORED` (type not watched), the
//!   time being since the latest response of the type was sent (Kubernetes' short duration form).
//! - With PROXY: the connection and one row per type with versions sent and ACKed, resource and
//!   NACK counts and the watch, then the last NACK error of each type in ERROR. istioctl instead
//!   diffs istiod's config against the Envoy's own config dump; meshpilot does not reach Envoy's
//!   admin port.

use serde_json::{Value, json};

use super::{Output, VerbError, fetch_status, finish, machine_readable, select, table};
use crate::debug_client::AddrArgs;
use std::process::ExitCode;
use xds::type_url as xds_types;

/// The type URLs istioctl always shows in the verbose table.
const KNOWN_TYPES: [&str; 5] = [
    xds_types::CLUSTER,
    xds_types::LISTENER,
    xds_types::ENDPOINT,
    xds_types::ROUTE,
    xds_types::EXTENSION_CONFIG,
];

/// The order of SUBSCRIBED TYPES: CDS, LDS, EDS, RDS, then the others by type URL.
const CORE_ORDER: [&str; 4] =
    [xds_types::CLUSTER, xds_types::LISTENER, xds_types::ENDPOINT, xds_types::ROUTE];

/// Arguments of `meshpilot proxy-status`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Show each connected proxy's xDS sync status (like `istioctl proxy-status`)",
    long_about = "Show the xDS sync status of the proxies connected to a running meshpilot control plane \
(read from its /debug/proxystatusz at --addr), in istioctl proxy-status's layout: NAME (<pod>.<namespace>), \
CLUSTER, ISTIOD (the control plane's $POD_NAME, else meshpilot-<hostname>), VERSION (the proxy's ISTIO_VERSION) \
and SUBSCRIBED TYPES.\n\n\
--verbose adds one column per xDS type: SYNCED (the latest response was ACKed), STALE (sent, not ACKed yet), \
ERROR (NACKed; the proxy keeps its previous config), NOT SENT (watched, nothing sent yet) or IGNORED (not \
watched), with the time since the latest response was sent, e.g. `SYNCED (5m)`.\n\n\
With PROXY (<pod>.<namespace>, or a part of its connection id): that proxy's types with the versions sent and \
ACKed and the last NACK error. istioctl compares istiod's config with the Envoy's own config dump there; \
meshpilot reads only the control plane, so this is its view of what the proxy took.\n\n\
Exit status: 0; 1 when the control plane cannot be read or PROXY matches no connected proxy (close matches are \
listed); 2 on usage errors."
)]
pub struct Args {
    /// The proxy: `<pod>.<namespace>` as in the NAME column (a `pod/` prefix is accepted), or a part
    /// of its connection id.
    #[arg(value_name = "PROXY")]
    proxy: Option<String>,

    /// Only proxies of this namespace; with PROXY, the namespace of a PROXY without a dot.
    #[arg(short = 'n', long)]
    namespace: Option<String>,

    /// Add a column per xDS type (istioctl's `--verbosity 1`).
    #[arg(short = 'v', long)]
    verbose: bool,

    /// Output format: the table (short), or the /debug/proxystatusz entries as json or yaml.
    #[arg(short = 'o', long, value_enum, default_value = "short")]
    output: Output,

    #[command(flatten)]
    addr: AddrArgs,
}

/// Runs the command; returns the process exit status.
pub fn run(args: &Args) -> ExitCode {
    finish(output(args))
}

fn output(args: &Args) -> Result<String, VerbError> {
    let status = fetch_status(&args.addr.addr)?;
    let now = jiff::Timestamp::now();
    let proxies: Vec<&Value> = match &args.proxy {
        Some(wanted) => select(&status, wanted, args.namespace.as_deref())?,
        None => status["proxies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| args.namespace.as_deref().is_none_or(|ns| p["namespace"] == ns))
            .collect(),
    };
    let control_plane = status["controlPlane"]["id"].as_str().unwrap_or_default();
    if args.output != Output::Short {
        return machine_readable(
            &json!({"controlPlane": status["controlPlane"], "proxies": proxies}),
            args.output,
        );
    }
    Ok(match &args.proxy {
        Some(_) => {
            proxies.iter().map(|p| render_single(control_plane, p, now)).collect::<Vec<_>>().join("\n")
        }
        None if args.verbose => render_verbose(control_plane, &proxies, now),
        None => render_summary(control_plane, &proxies),
    })
}

/// Istio's short type name (`GetShortType`): CDS, LDS, RDS, EDS, SDS, ECDS; other URLs as they are.
pub fn short_type(type_url: &str) -> &str {
    match type_url {
        xds_types::CLUSTER => "CDS",
        xds_types::LISTENER => "LDS",
        xds_types::ROUTE => "RDS",
        xds_types::ENDPOINT => "EDS",
        xds_types::SECRET => "SDS",
        xds_types::EXTENSION_CONFIG => "ECDS",
        other => other,
    }
}

/// Kubernetes' `duration.HumanDuration` (what istioctl prints in `SYNCED (…)`): `42s` below two
/// minutes, `5m7s` below ten, `42m` below three hours, `5h3m` below eight, then hours, days and
/// years with shrinking precision; `<invalid>` more than a second in the future, `0s` just before.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let d = (hours / 24) % 365;
        return if d == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{d}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

/// One verbose cell: `IGNORED` when the type is not watched (`t` is `None`), `NOT SENT`, else the
/// status (`SYNCED`, `STALE`, `ERROR`) with the time since `sentTime`.
pub fn cell(t: Option<&Value>, now: jiff::Timestamp) -> String {
    let Some(t) = t else { return "IGNORED".to_owned() };
    let status = t["configStatus"].as_str().unwrap_or("UNKNOWN");
    if status == "NOT_SENT" {
        return "NOT SENT".to_owned();
    }
    match t["sentTime"].as_str().and_then(|s| s.parse::<jiff::Timestamp>().ok()) {
        Some(sent) => format!("{status} ({})", human_duration(now.as_second() - sent.as_second())),
        None => status.to_owned(),
    }
}

fn types_of(p: &Value) -> Vec<&str> {
    p["types"].as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default()
}

fn name_cells(p: &Value) -> (&str, &str, &str) {
    (
        p["proxy"].as_str().unwrap_or_default(),
        p["clusterId"].as_str().unwrap_or_default(),
        p["istioVersion"].as_str().unwrap_or_default(),
    )
}

/// The default table: `NAME CLUSTER ISTIOD VERSION SUBSCRIBED TYPES`.
pub fn render_summary(control_plane: &str, proxies: &[&Value]) -> String {
    let mut all: Vec<&str> = proxies.iter().flat_map(|p| types_of(p)).collect();
    all.sort_by_key(|t| (CORE_ORDER.iter().position(|c| c == t).unwrap_or(CORE_ORDER.len()), *t));
    all.dedup();
    let mut rows = vec![table::row(&["NAME", "CLUSTER", "ISTIOD", "VERSION", "SUBSCRIBED TYPES"])];
    for p in proxies {
        let subscribed: Vec<&str> =
            all.iter().filter(|t| p["types"].get(**t).is_some()).map(|t| short_type(t)).collect();
        let types = if subscribed.is_empty() {
            "0".to_owned()
        } else {
            format!("{} ({})", subscribed.len(), subscribed.join(","))
        };
        let (name, cluster, version) = name_cells(p);
        rows.push(table::row(&[name, cluster, control_plane, version, &types]));
    }
    table::render(&rows)
}

/// The `--verbose` table: `NAME CLUSTER <types by URL> ISTIOD VERSION`.
pub fn render_verbose(control_plane: &str, proxies: &[&Value], now: jiff::Timestamp) -> String {
    let mut all: Vec<&str> = proxies.iter().flat_map(|p| types_of(p)).chain(KNOWN_TYPES).collect();
    all.sort_unstable();
    all.dedup();
    let mut header = vec!["NAME".to_owned(), "CLUSTER".to_owned()];
    header.extend(all.iter().map(|t| short_type(t).to_owned()));
    header.extend(["ISTIOD".to_owned(), "VERSION".to_owned()]);
    let mut rows = vec![header];
    for p in proxies {
        let (name, cluster, version) = name_cells(p);
        let mut row = table::row(&[name, cluster]);
        row.extend(all.iter().map(|t| cell(p["types"].get(*t), now)));
        row.extend(table::row(&[control_plane, version]));
        rows.push(row);
    }
    table::render(&rows)
}

/// The single-proxy view: the connection, then one row per type (known types not watched as
/// `IGNORED`), then each NACK error.
pub fn render_single(control_plane: &str, p: &Value, now: jiff::Timestamp) -> String {
    let (name, cluster, version) = name_cells(p);
    let s = |k: &str| p[k].as_str().unwrap_or("-").to_owned();
    let mut out = table::render(&[
        table::row(&["NAME:", name]),
        table::row(&["CLUSTER:", cluster]),
        table::row(&["ISTIOD:", control_plane]),
        table::row(&["VERSION:", version]),
        if p["polling"] == true {
            vec![
                "POLLING:".to_owned(),
                format!(
                    "{} (REST, from {}, first poll {}, last poll {}; cannot ACK or NACK: \
                     inferred from the version of its next poll)",
                    s("connectionId"),
                    s("address"),
                    s("connectedAt"),
                    s("lastPoll")
                ),
            ]
        } else {
            vec![
                "CONNECTION:".to_owned(),
                format!(
                    "{} ({}, from {}, since {})",
                    s("connectionId"),
                    s("protocol"),
                    s("address"),
                    s("connectedAt")
                ),
            ]
        },
    ]);
    out.push('\n');
    let mut all: Vec<&str> = types_of(p).into_iter().chain(KNOWN_TYPES).collect();
    all.sort_unstable();
    all.dedup();
    let mut rows =
        vec![table::row(&["TYPE", "STATUS", "VERSION SENT", "VERSION ACKED", "RESOURCES", "NACKS", "WATCH"])];
    let mut errors = Vec::new();
    for t in &all {
        let info = p["types"].get(*t);
        let text =
            |k: &str| info.and_then(|i| i[k].as_str()).filter(|v| !v.is_empty()).unwrap_or("-").to_owned();
        let number = |k: &str| info.and_then(|i| i[k].as_u64()).map_or("-".to_owned(), |n| n.to_string());
        let watch = match info.map(|i| &i["watch"]) {
            None => "-".to_owned(),
            Some(w) => {
                let names = w["names"].as_array().map_or(0, Vec::len);
                match (w["wildcard"].as_bool() == Some(true), names) {
                    (true, 0) => "*".to_owned(),
                    (true, n) => format!("* + {n} names"),
                    (false, 1) => "1 name".to_owned(),
                    (false, n) => format!("{n} names"),
                }
            }
        };
        if let Some(e) = info.and_then(|i| i["lastError"].as_str()).filter(|e| !e.is_empty()) {
            errors.push(format!("{} NACK: {e}\n", short_type(t)));
        }
        let resources = if info.and_then(|i| i["responses"].as_u64()).unwrap_or(0) == 0 {
            "-".to_owned()
        } else {
            number("resources")
        };
        rows.push(vec![
            short_type(t).to_owned(),
            cell(info, now),
            text("versionSent"),
            text("versionAcked"),
            resources,
            number("rejects"),
            watch,
        ]);
    }
    out.push_str(&table::render(&rows));
    if !errors.is_empty() {
        out.push('\n');
        out.extend(errors);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-11-25T03:00:00Z".parse().unwrap()
    }

    fn t(status: &str, sent: Option<&str>) -> Value {
        json!({"configStatus": status, "sentTime": sent, "watch": {"wildcard": true, "names": []}})
    }

    #[test]
    fn cells_use_istioctls_words() {
        assert_eq!(cell(None, now()), "IGNORED");
        assert_eq!(cell(Some(&t("NOT_SENT", None)), now()), "NOT SENT");
        assert_eq!(cell(Some(&t("SYNCED", Some("2026-11-25T02:55:00Z"))), now()), "SYNCED (5m)");
        assert_eq!(cell(Some(&t("STALE", Some("2026-11-25T02:59:57.5Z"))), now()), "STALE (3s)");
        assert_eq!(cell(Some(&t("ERROR", Some("2026-11-25T02:58:00Z"))), now()), "ERROR (2m)");
        assert_eq!(cell(Some(&t("SYNCED", None)), now()), "SYNCED");
    }

    #[test]
    fn human_duration_matches_kubernetes() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (307, "5m7s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600 + 60, "3h1m"),
            (5 * 3600, "5h"),
            (47 * 3600, "47h"),
            (50 * 3600, "2d2h"),
            (10 * 86_400, "10d"),
            (3 * 365 * 86_400 + 86_400, "3y1d"),
            (9 * 365 * 86_400, "9y"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human_duration(seconds), text, "{seconds} s");
        }
    }

    fn proxy(id: &str, types: &[(&str, Value)]) -> Value {
        let types: serde_json::Map<String, Value> =
            types.iter().map(|(u, v)| ((*u).to_owned(), v.clone())).collect();
        json!({"proxy": id, "clusterId": "Kubernetes", "istioVersion": "1.28.0", "connectionId": format!("{id}-1"),
               "protocol": "sotw", "address": "127.0.0.1:1", "connectedAt": "2026-11-25T02:00:00Z", "types": types})
    }

    #[test]
    fn summary_lists_subscribed_types_in_istioctls_order() {
        let synced = t("SYNCED", Some("2026-11-25T02:59:00Z"));
        let a = proxy(
            "a.ns",
            &[
                (xds_types::ROUTE, synced.clone()),
                (xds_types::CLUSTER, synced.clone()),
                (xds_types::SECRET, synced.clone()),
                (xds_types::LISTENER, synced.clone()),
            ],
        );
        let b = proxy("gateway-1.istio-system", &[]);
        assert_eq!(
            render_summary("meshpilot-h", &[&a, &b]),
            "NAME                       CLUSTER        ISTIOD          VERSION     SUBSCRIBED TYPES\n\
             a.ns                       Kubernetes     meshpilot-h     1.28.0      4 (CDS,LDS,RDS,SDS)\n\
             gateway-1.istio-system     Kubernetes     meshpilot-h     1.28.0      0\n"
        );
    }

    #[test]
    fn verbose_has_a_column_per_type_by_url() {
        let a = proxy(
            "a.ns",
            &[
                (xds_types::CLUSTER, t("SYNCED", Some("2026-11-25T02:59:00Z"))),
                (xds_types::ROUTE, t("ERROR", Some("2026-11-25T02:59:30Z"))),
                (xds_types::ENDPOINT, t("NOT_SENT", None)),
                (xds_types::LISTENER, t("STALE", Some("2026-11-25T02:59:59Z"))),
            ],
        );
        assert_eq!(
            render_verbose("cp", &[&a], now()),
            "NAME     CLUSTER        CDS              ECDS        EDS          LDS            RDS             ISTIOD     VERSION\n\
             a.ns     Kubernetes     SYNCED (60s)     IGNORED     NOT SENT     STALE (1s)     ERROR (30s)     cp         1.28.0\n"
        );
    }

    #[test]
    fn single_proxy_shows_versions_and_the_nack() {
        let mut rds = t("ERROR", Some("2026-11-25T02:59:30Z"));
        rds["versionSent"] = json!("v3");
        rds["versionAcked"] = json!("v2");
        rds["lastError"] = json!("route: invalid regex");
        rds["rejects"] = json!(1);
        rds["responses"] = json!(3);
        rds["resources"] = json!(2);
        rds["watch"] = json!({"wildcard": false, "names": ["80", "9080"]});
        let out = render_single("cp", &proxy("a.ns", &[(xds_types::ROUTE, rds)]), now());
        let row = out.lines().find(|l| l.starts_with("RDS")).unwrap();
        let cells: Vec<&str> = row.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(cells, ["RDS", "ERROR (30s)", "v3", "v2", "2", "1", "2 names"], "{out}");
        assert!(out.lines().any(|l| l.starts_with("CDS") && l.contains("IGNORED")), "{out}");
        assert!(out.ends_with("RDS NACK: route: invalid regex\n"), "{out}");
        assert!(out.starts_with("NAME:           a.ns\n"), "{out}");
    }

    #[test]
    fn a_polling_proxy_says_it_cannot_ack() {
        let mut p = proxy("a.ns", &[(xds_types::CLUSTER, t("SYNCED", Some("2026-11-25T02:59:00Z")))]);
        p["polling"] = json!(true);
        p["protocol"] = json!("rest");
        p["connectionId"] = json!("sidecar~1~a.ns~ns-rest");
        p["lastPoll"] = json!("2026-11-25T02:59:59Z");
        let out = render_single("cp", &p, now());
        let line = out.lines().find(|l| l.starts_with("POLLING:")).unwrap_or_else(|| panic!("{out}"));
        assert!(
            line.contains("last poll 2026-11-25T02:59:59Z") && line.contains("cannot ACK or NACK"),
            "{out}"
        );
    }
}
