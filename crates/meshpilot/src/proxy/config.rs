//! `meshpilot proxy-config clusters|listeners|routes|endpoints|secret PROXY`: istioctl's tables
//! (`istioctl/pkg/writer/envoy/configdump`, `…/envoy/clusters`) over meshpilot's
//! `/debug/config_summary?proxyID=`, i.e. the config the control plane generates for that proxy now,
//! not Envoy's own config dump (istioctl reads Envoy's admin port; meshpilot does not reach it).

use std::process::ExitCode;

use serde_json::{Value, json};

use super::{Output, VerbError, fetch_status, finish, machine_readable, select, table};
use crate::debug_client::{self, AddrArgs};

const HCM: &str = "envoy.filters.network.http_connection_manager";
const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";
const BLACK_HOLE: &str = "BlackHoleCluster";
const PASSTHROUGH: &str = "PassthroughCluster";

/// `proxy-config --help`: what is shown and how it differs from istioctl.
pub const LONG_ABOUT: &str = "Show the config a running meshpilot control plane (--addr) generates for one connected proxy, \
in istioctl proxy-config's table layouts. istioctl reads the Envoy's own config dump through its admin port; \
meshpilot reads /debug/config_summary?proxyID= from the control plane: what it would send that proxy now (see \
`meshpilot proxy-status PROXY` for whether the latest version was ACKed). -o json|yaml prints meshpilot's \
summaries of the resources (names and key fields), not full Envoy protos.\n\n\
Exit status: 0; 1 when the control plane cannot be read, PROXY matches no connected proxy (close matches \
are listed) or several, or there is nothing of the kind to show (secret); 2 on usage errors.";

/// The note every `proxy-config` subcommand's help ends with.
const VIEW_NOTE: &str = "This is the control plane's view: what meshpilot generates for the proxy now (from \
/debug/config_summary). istioctl reads the Envoy's own config through its admin port; meshpilot does not.";

/// `meshpilot proxy-config` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum ConfigCommand {
    /// Clusters: SERVICE FQDN, PORT, SUBSET, DIRECTION, TYPE, DESTINATION RULE.
    #[command(visible_alias = "cluster", visible_alias = "c", after_help = VIEW_NOTE)]
    Clusters(ClusterArgs),
    /// Listeners: ADDRESSES, PORT, MATCH, DESTINATION (one row per filter chain).
    #[command(visible_alias = "listener", visible_alias = "l", after_help = VIEW_NOTE)]
    Listeners(ListenerArgs),
    /// Route configurations: NAME, VHOST NAME, DOMAINS, MATCH, VIRTUAL SERVICE (one row per route).
    #[command(visible_alias = "route", visible_alias = "r", after_help = VIEW_NOTE)]
    Routes(RouteArgs),
    /// Endpoints: ENDPOINT, STATUS, OUTLIER CHECK, CLUSTER.
    #[command(visible_alias = "endpoint", visible_alias = "ep", after_help = VIEW_NOTE)]
    Endpoints(EndpointArgs),
    /// Secrets: meshpilot's config dump has none; says what the proxy watches over SDS instead.
    #[command(visible_alias = "secrets", visible_alias = "s", after_help = VIEW_NOTE)]
    Secret(Common),
}

/// What every `proxy-config` subcommand takes.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// The proxy: `<pod>.<namespace>` as in `meshpilot proxy-status` (a `pod/` prefix is accepted),
    /// or a part of its connection id that names one proxy.
    #[arg(value_name = "PROXY")]
    proxy: String,

    /// The namespace of a PROXY given without one.
    #[arg(short = 'n', long)]
    namespace: Option<String>,

    /// Output format: the table (short), or meshpilot's resource summaries as json or yaml.
    #[arg(short = 'o', long, value_enum, default_value = "short")]
    output: Output,

    #[command(flatten)]
    addr: AddrArgs,
}

/// `proxy-config clusters` filters (istioctl's: substrings of the cluster name).
#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    #[command(flatten)]
    common: Common,
    /// Only clusters whose name contains this FQDN.
    #[arg(long)]
    fqdn: Option<String>,
    /// Only clusters of this port (`|PORT|` in the name).
    #[arg(long)]
    port: Option<u32>,
    /// Only clusters whose name contains this subset.
    #[arg(long)]
    subset: Option<String>,
    /// Only clusters whose name contains this direction (inbound, outbound).
    #[arg(long)]
    direction: Option<String>,
}

/// `proxy-config listeners` filters.
#[derive(clap::Args, Debug)]
pub struct ListenerArgs {
    #[command(flatten)]
    common: Common,
    /// Only listeners on this address.
    #[arg(long)]
    address: Option<String>,
    /// Only listeners on this port.
    #[arg(long)]
    port: Option<u32>,
    /// Only listeners of this type (HTTP, TCP, HTTP+TCP).
    #[arg(long = "type")]
    kind: Option<String>,
}

/// `proxy-config routes` filters.
#[derive(clap::Args, Debug)]
pub struct RouteArgs {
    #[command(flatten)]
    common: Common,
    /// Only the route configuration of this name.
    #[arg(long)]
    name: Option<String>,
}

/// `proxy-config endpoints` filters (istioctl's: exact, case-insensitive).
#[derive(clap::Args, Debug)]
pub struct EndpointArgs {
    #[command(flatten)]
    common: Common,
    /// Only endpoints of this cluster.
    #[arg(long)]
    cluster: Option<String>,
    /// Only endpoints of this address.
    #[arg(long)]
    address: Option<String>,
    /// Only endpoints of this port.
    #[arg(long)]
    port: Option<u32>,
    /// Only endpoints of this status (HEALTHY, UNHEALTHY, DRAINING, …).
    #[arg(long)]
    status: Option<String>,
}

/// Runs the subcommand; returns the process exit status.
pub fn run(command: &ConfigCommand) -> ExitCode {
    finish(output(command))
}

fn output(command: &ConfigCommand) -> Result<String, VerbError> {
    let common = match command {
        ConfigCommand::Clusters(a) => &a.common,
        ConfigCommand::Listeners(a) => &a.common,
        ConfigCommand::Routes(a) => &a.common,
        ConfigCommand::Endpoints(a) => &a.common,
        ConfigCommand::Secret(c) => c,
    };
    let status = fetch_status(&common.addr.addr)?;
    let proxies = select(&status, &common.proxy, common.namespace.as_deref())?;
    let mut ids: Vec<&str> = proxies.iter().filter_map(|p| p["proxy"].as_str()).collect();
    ids.dedup();
    if ids.len() > 1 {
        return Err(VerbError::Ambiguous {
            wanted: common.proxy.clone(),
            matches: ids.into_iter().map(str::to_owned).collect(),
        });
    }
    // The newest connection of the proxy (connection ids end in a growing counter).
    let proxy =
        proxies.iter().max_by_key(|p| counter(p["connectionId"].as_str().unwrap_or_default())).copied();
    let Some(proxy) = proxy else { return Err(VerbError::Missing("no proxy selected".into())) };
    if let ConfigCommand::Secret(_) = command {
        return Err(VerbError::Missing(secret_message(proxy)));
    }
    let connection = proxy["connectionId"].as_str().unwrap_or_default();
    let dump = debug_client::get_json(
        &common.addr.addr,
        &format!("/debug/config_summary?proxyID={}", crate::debug_client::encode_query(connection)),
    )?;
    let (items, text) = match command {
        ConfigCommand::Clusters(a) => {
            let items = clusters(&dump, a);
            let text = render_clusters(&items);
            (items, text)
        }
        ConfigCommand::Listeners(a) => {
            let items = listeners(&dump, a);
            let text = render_listeners(&items);
            (items, text)
        }
        ConfigCommand::Routes(a) => {
            let items: Vec<Value> = list(&dump, "routes")
                .into_iter()
                .filter(|r| a.name.as_ref().is_none_or(|n| r["name"] == n.as_str()))
                .collect();
            let text = render_routes(&items);
            (items, text)
        }
        ConfigCommand::Endpoints(a) => {
            let rows = endpoints(&dump, a);
            let items: Vec<Value> =
                rows.iter().map(|e| json!({"endpoint": e.0, "status": e.1, "cluster": e.2})).collect();
            (items, render_endpoints(&rows))
        }
        ConfigCommand::Secret(_) => unreachable!("answered above"),
    };
    if common.output == Output::Short {
        Ok(text)
    } else {
        machine_readable(&Value::Array(items), common.output)
    }
}

fn counter(connection_id: &str) -> u64 {
    connection_id.rsplit('-').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

fn list(dump: &Value, key: &str) -> Vec<Value> {
    dump[key].as_array().cloned().unwrap_or_default()
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// istioctl's `renderConfig`: `/apis/networking.istio.io/<v>/namespaces/<ns>/<kind>/<name>` as
/// `<name>.<ns>`; another API group `<unknown>`; nothing (or a malformed path) empty.
pub fn render_config(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    if path.starts_with("/apis/networking.istio.io/") {
        let pieces: Vec<&str> = path.split('/').collect();
        return if pieces.len() == 8 { format!("{}.{}", pieces[7], pieces[5]) } else { String::new() };
    }
    "<unknown>".to_owned()
}

/// An Istio cluster name `direction|port|subset|fqdn` as (direction, port, subset, fqdn); other
/// names as ("", 0, "", name).
pub fn parse_cluster_name(name: &str) -> (&str, u32, &str, &str) {
    let parts: Vec<&str> = name.split('|').collect();
    if parts.len() > 3 {
        (parts[0], parts[1].parse().unwrap_or(0), parts[2], parts[3])
    } else {
        ("", 0, "", name)
    }
}

fn clusters(dump: &Value, a: &ClusterArgs) -> Vec<Value> {
    let mut items: Vec<Value> = list(dump, "clusters")
        .into_iter()
        .filter(|c| {
            let name = str_of(c, "name");
            a.fqdn.as_ref().is_none_or(|f| name.contains(f.as_str()))
                && a.direction.as_ref().is_none_or(|d| name.contains(d.as_str()))
                && a.subset.as_ref().is_none_or(|s| name.contains(s.as_str()))
                && a.port.is_none_or(|p| name.contains(&format!("|{p}|")))
        })
        .collect();
    items.sort_by(|x, y| {
        let (xd, xp, xs, xf) = parse_cluster_name(str_of(x, "name"));
        let (yd, yp, ys, yf) = parse_cluster_name(str_of(y, "name"));
        (xf, xs, xp, xd).cmp(&(yf, ys, yp, yd))
    });
    items
}

/// The clusters table: `SERVICE FQDN PORT SUBSET DIRECTION TYPE DESTINATION RULE`.
pub fn render_clusters(clusters: &[Value]) -> String {
    let mut rows =
        vec![table::row(&["SERVICE FQDN", "PORT", "SUBSET", "DIRECTION", "TYPE", "DESTINATION RULE"])];
    for c in clusters {
        let name = str_of(c, "name");
        let kind = str_of(c, "type");
        let dr = render_config(str_of(c, "config"));
        let (direction, port, subset, fqdn) = parse_cluster_name(name);
        if name.split('|').count() > 3 {
            let subset = if subset.is_empty() { "-" } else { subset };
            rows.push(vec![fqdn.into(), port.to_string(), subset.into(), direction.into(), kind.into(), dr]);
        } else {
            rows.push(vec![name.into(), "-".into(), "-".into(), "-".into(), kind.into(), dr]);
        }
    }
    table::render(&rows)
}

/// A listener's host and port from its `address` (`host:port`; a pipe has port 0).
fn host_port(address: &str) -> (String, u32) {
    if address.starts_with("unix://") {
        return (address.trim_start_matches("unix://").to_owned(), 0);
    }
    match address.rsplit_once(':') {
        Some((h, p)) if p.parse::<u32>().is_ok() => (h.to_owned(), p.parse().unwrap_or(0)),
        _ => (address.to_owned(), 0),
    }
}

fn chains(l: &Value) -> Vec<&Value> {
    let mut out: Vec<&Value> = l["filter_chains"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    if let Some(d) = l.get("default_filter_chain").filter(|d| !d.is_null()) {
        out.push(d);
    }
    out
}

fn tcp_cluster(f: &Value) -> Option<String> {
    let target = &f["target"];
    if let Some(c) = target["cluster"].as_str() {
        return Some(c.to_owned());
    }
    target["weighted_clusters"]
        .as_array()
        .map(|w| w.iter().map(|c| str_of(c, "name")).collect::<Vec<_>>().join(","))
}

/// istioctl's listener type: HTTP, TCP, HTTP+TCP or UNKNOWN (TCP proxies to the black hole not counted).
pub fn listener_type(l: &Value) -> &'static str {
    let (mut http, mut tcp) = (0, 0);
    for f in chains(l).into_iter().flat_map(|c| c["filters"].as_array().into_iter().flatten()) {
        match str_of(f, "name") {
            HCM => http += 1,
            TCP_PROXY if !tcp_cluster(f).unwrap_or_default().contains(BLACK_HOLE) => tcp += 1,
            _ => {}
        }
    }
    match (http > 0, tcp > 0) {
        (true, false) => "HTTP",
        (true, true) => "HTTP+TCP",
        (false, true) => "TCP",
        (false, false) => "UNKNOWN",
    }
}

fn listeners(dump: &Value, a: &ListenerArgs) -> Vec<Value> {
    let mut items: Vec<Value> = list(dump, "listeners")
        .into_iter()
        .filter(|l| {
            let (host, port) = host_port(str_of(l, "address"));
            let extra = l["additional_addresses"].as_array().cloned().unwrap_or_default();
            a.address.as_ref().is_none_or(|want| {
                host == *want || extra.iter().any(|e| host_port(e.as_str().unwrap_or_default()).0 == *want)
            }) && a.port.is_none_or(|p| p == port)
                && a.kind.as_ref().is_none_or(|k| k.eq_ignore_ascii_case(listener_type(l)))
        })
        .collect();
    items.sort_by(|x, y| {
        let (xh, xp) = host_port(str_of(x, "address"));
        let (yh, yp) = host_port(str_of(y, "address"));
        (xp, xh, listener_type(x)).cmp(&(yp, yh, listener_type(y)))
    });
    items
}

/// istioctl's `getMatches`: `SNI: …; Trans: …; App: …; Addr: …` or `ALL`.
pub fn chain_match(c: &Value) -> String {
    let strings = |k: &str| -> Vec<String> {
        c[k].as_array()
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let mut parts = Vec::new();
    let sni = strings("server_names");
    if !sni.is_empty() {
        parts.push(format!("SNI: {}", sni.join(",")));
    }
    let transport = str_of(c, "transport_protocol");
    if !transport.is_empty() {
        parts.push(format!("Trans: {transport}"));
    }
    let app = strings("application_protocols");
    if !app.is_empty() {
        let named = |list: &[&str]| app.iter().map(String::as_str).eq(list.iter().copied());
        let label = if named(&["http/1.0", "http/1.1", "h2c", "istio-http/1.0", "istio-http/1.1", "istio-h2"])
        {
            "App: HTTP TLS".to_owned()
        } else if named(&["istio", "istio-http/1.0", "istio-http/1.1", "istio-h2"]) {
            "App: Istio HTTP Plain".to_owned()
        } else if named(&["istio-peer-exchange", "istio"]) {
            "App: TCP TLS".to_owned()
        } else if named(&["http/1.0", "http/1.1", "h2c"]) {
            "App: HTTP".to_owned()
        } else {
            format!("App: {}", app.join(","))
        };
        parts.push(label);
    }
    let port = c["destination_port"].as_u64().map(|p| format!(":{p}")).unwrap_or_default();
    let prefixes = strings("prefix_ranges");
    if !prefixes.is_empty() {
        parts.push(format!("Addr: {}{port}", prefixes.join(",")));
    } else if !port.is_empty() {
        parts.push(format!("Addr: *{port}"));
    }
    if parts.is_empty() { "ALL".to_owned() } else { parts.join("; ") }
}

/// istioctl's `describeMatch` of a route match: `prefix*`, `PathPrefix:p`, the path, `regex r`.
pub fn route_match(m: &Value) -> String {
    if let Some(p) = m["prefix"].as_str() {
        format!("{p}*")
    } else if let Some(p) = m["path_separated_prefix"].as_str() {
        format!("PathPrefix:{p}")
    } else if let Some(p) = m["path"].as_str() {
        p.to_owned()
    } else if let Some(r) = m["regex"].as_str() {
        format!("regex {r}")
    } else {
        String::new()
    }
}

fn route_cluster(r: &Value) -> Option<&str> {
    r["action"]["cluster"].as_str()
}

/// istioctl's `getFilterType`: `Route: <rds name>`, an inline route's description, `Cluster: <name>`
/// (the cluster name alone when it contains `Cluster`), `HTTP`, or `Non-HTTP/Non-TCP`.
pub fn chain_destination(c: &Value) -> String {
    for f in c["filters"].as_array().into_iter().flatten() {
        match str_of(f, "name") {
            HCM => {
                if let Some(rds) = f["routes"]["rds"].as_str().filter(|r| !r.is_empty()) {
                    return format!("Route: {rds}");
                }
                if let Some(inline) = f["routes"].get("inline") {
                    return inline_route(inline);
                }
                return "HTTP".to_owned();
            }
            TCP_PROXY => {
                let cluster = tcp_cluster(f).unwrap_or_default();
                if cluster.contains(BLACK_HOLE) {
                    continue;
                }
                return if cluster.contains("Cluster") { cluster } else { format!("Cluster: {cluster}") };
            }
            _ => {}
        }
    }
    "Non-HTTP/Non-TCP".to_owned()
}

/// istioctl's `describeRouteConfig`: a match-all route to one cluster as that cluster, else
/// `Inline Route: <domains> <matches>; …`.
fn inline_route(rc: &Value) -> String {
    let vhosts: Vec<&Value> = rc["virtual_hosts"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
    if let [vh] = vhosts.as_slice()
        && vh["domains"] == json!(["*"])
        && let Some([r]) = vh["routes"].as_array().map(Vec::as_slice)
        && r["match"]["prefix"] == "/"
        && let Some(cluster) = route_cluster(r)
    {
        return if cluster.contains("Cluster") { cluster.to_owned() } else { format!("Cluster: {cluster}") };
    }
    let described: Vec<String> = vhosts
        .iter()
        .map(|vh| {
            let domains: Vec<&str> =
                vh["domains"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let matches: Vec<String> =
                vh["routes"].as_array().into_iter().flatten().map(|r| route_match(&r["match"])).collect();
            if domains == ["*"] {
                matches.join(", ")
            } else {
                format!("{} {}", domains.join("/"), matches.join(", "))
            }
        })
        .collect();
    format!("Inline Route: {}", described.join("; "))
}

/// The listeners table: `ADDRESSES PORT MATCH DESTINATION`, one row per filter chain (the default
/// chain included), chains of a listener by destination, descending (as istioctl).
pub fn render_listeners(listeners: &[Value]) -> String {
    let mut rows = vec![table::row(&["ADDRESSES", "PORT", "MATCH", "DESTINATION"])];
    for l in listeners {
        let (host, port) = host_port(str_of(l, "address"));
        let mut addresses = vec![host];
        addresses.extend(
            l["additional_addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| host_port(a.as_str().unwrap_or_default()).0),
        );
        let mut matches: Vec<(String, String)> =
            chains(l).into_iter().map(|c| (chain_match(c), chain_destination(c))).collect();
        matches.sort_by(|a, b| b.1.cmp(&a.1));
        for (m, d) in matches {
            rows.push(vec![addresses.join(","), port.to_string(), m, d]);
        }
    }
    table::render(&rows)
}

/// istioctl's `describeRouteDomains`: one domain as is; else the domains without a port, their
/// `.svc.cluster.local`/`.svc` expansions dropped, at most two then `+ N more...`.
pub fn route_domains(domains: &[&str]) -> String {
    match domains {
        [] => return String::new(),
        [one] => return (*one).to_owned(),
        _ => {}
    }
    let without_port: Vec<&str> = domains
        .iter()
        .copied()
        .filter(|d| !d.contains(':') || (d.matches(':').count() > 2 && d.ends_with(']')))
        .collect();
    let kept: Vec<&str> = without_port
        .iter()
        .copied()
        .filter(|h| {
            let full = h.strip_suffix(".svc.cluster.local").filter(|s| without_port.contains(s));
            let partial = h.strip_suffix(".svc").filter(|s| without_port.contains(s));
            full.is_none() && partial.is_none()
        })
        .collect();
    if kept.len() > 2 {
        format!("{} + {} more...", kept[..2].join(", "), kept.len() - 2)
    } else {
        kept.join(", ")
    }
}

/// The routes table: `NAME VHOST NAME DOMAINS MATCH VIRTUAL SERVICE`, one row per route (routes to
/// PassthroughCluster left out, a virtual host without routes as `/*` `404`).
pub fn render_routes(routes: &[Value]) -> String {
    let mut rows = vec![table::row(&["NAME", "VHOST NAME", "DOMAINS", "MATCH", "VIRTUAL SERVICE"])];
    for rc in routes {
        let name = str_of(rc, "name");
        for vh in rc["virtual_hosts"].as_array().into_iter().flatten() {
            let domains: Vec<&str> =
                vh["domains"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let domains = route_domains(&domains);
            let vh_routes = vh["routes"].as_array().cloned().unwrap_or_default();
            for r in vh_routes.iter().filter(|r| route_cluster(r) != Some(PASSTHROUGH)) {
                rows.push(vec![
                    name.into(),
                    str_of(vh, "name").into(),
                    domains.clone(),
                    route_match(&r["match"]),
                    render_config(str_of(r, "config")),
                ]);
            }
            if vh_routes.is_empty() {
                rows.push(vec![
                    name.into(),
                    str_of(vh, "name").into(),
                    domains.clone(),
                    "/*".into(),
                    "404".into(),
                ]);
            }
        }
    }
    table::render(&rows)
}

/// (endpoint, status, cluster) rows: EDS assignments and clusters' inline endpoints, filtered, sorted
/// by address, port and cluster (as istioctl).
fn endpoints(dump: &Value, a: &EndpointArgs) -> Vec<(String, String, String)> {
    let mut rows = Vec::new();
    let mut add = |cluster: &str, localities: &Value| {
        for ep in localities
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|l| l["endpoints"].as_array().into_iter().flatten())
        {
            let address = str_of(ep, "address").to_owned();
            // Envoy load-balances to an endpoint of UNKNOWN health as to a healthy one, and its
            // admin API shows it HEALTHY.
            let status = match str_of(ep, "health") {
                "" | "UNKNOWN" => "HEALTHY".to_owned(),
                s => s.to_owned(),
            };
            rows.push((address, status, cluster.to_owned()));
        }
    };
    for la in list(dump, "endpoints") {
        add(str_of(&la, "cluster_name"), &la["localities"]);
    }
    for c in list(dump, "clusters") {
        if c.get("endpoints").is_some() {
            add(str_of(&c, "name"), &c["endpoints"]);
        }
    }
    rows.retain(|(address, status, cluster)| {
        let (host, port) = host_port(address);
        a.cluster.as_ref().is_none_or(|c| c.eq_ignore_ascii_case(cluster))
            && a.address.as_ref().is_none_or(|x| x.eq_ignore_ascii_case(&host))
            && a.port.is_none_or(|p| p == port)
            && a.status.as_ref().is_none_or(|s| s.eq_ignore_ascii_case(status))
    });
    rows.sort_by(|x, y| {
        let (xh, xp) = host_port(&x.0);
        let (yh, yp) = host_port(&y.0);
        (xh, xp, &x.2).cmp(&(yh, yp, &y.2))
    });
    rows
}

/// The endpoints table: `ENDPOINT STATUS OUTLIER CHECK CLUSTER`. OUTLIER CHECK is `-`: outlier
/// ejection happens inside Envoy and the control plane does not see it (istioctl: OK or FAILED).
pub fn render_endpoints(rows: &[(String, String, String)]) -> String {
    let mut out = vec![table::row(&["ENDPOINT", "STATUS", "OUTLIER CHECK", "CLUSTER"])];
    out.extend(rows.iter().map(|(e, s, c)| vec![e.clone(), s.clone(), "-".into(), c.clone()]));
    table::render(&out)
}

fn secret_message(proxy: &Value) -> String {
    let id = str_of(proxy, "proxy");
    let sds = &proxy["types"][xds::type_url::SECRET];
    let names: Vec<&str> =
        sds["watch"]["names"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let watched = if sds.is_null() {
        format!(
            "{id} does not watch SDS secrets on its meshpilot connection (sidecars get theirs from their agent)"
        )
    } else {
        format!(
            "{id} watches {} SDS secret(s) on its meshpilot connection: {} (status {}; file secrets' state is under /debug/configstatusz fileSecrets)",
            names.len(),
            if names.is_empty() { "-".to_owned() } else { names.join(", ") },
            str_of(sds, "configStatus"),
        )
    };
    format!(
        "meshpilot's config dump has no secrets: certificate contents and validity are known only to the \
proxy (istioctl reads them from Envoy's admin port); {watched}"
    )
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
