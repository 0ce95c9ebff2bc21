//! `meshpilot status KIND/NAMESPACE/NAME`: is this config object applied? Reads
//! `/debug/objectz` of a running control plane and prints where the object comes from, its
//! validation result, the connected proxies it concerns and, per proxy, ACKED / PENDING / NACKED with
//! Envoy's error and the Istio field it most likely comes from. istioctl splits this between
//! `istioctl x describe` (per pod) and the distribution status written into the object's `status`
//! (`istioctl x wait`); meshpilot answers per object from the xDS connections' ACK state.

use std::process::ExitCode;

use serde_json::Value;

use crate::debug_client::{AddrArgs, DebugError, get_json};

/// Arguments of `meshpilot status`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Show whether a config object is applied: the proxies it concerns and whether they ACKed it",
    long_about = "Show whether a config object is applied, from a running control plane's /debug/objectz: \
its source (file:line for --config-dir files, the resourceVersion for cluster objects), its validation \
result, the connected proxies it concerns (by Sidecar scope, Gateway selection, policy selectors) and per \
proxy ACKED (Envoy accepted the responses carrying its current version), PENDING (not yet sent or \
answered) or NACKED (Envoy rejected them: its error text, and the Istio field it most likely comes \
from).\n\nOBJECT is KIND/NAMESPACE/NAME or KIND/NAME (namespace from -n): KIND is an Istio kind in any \
case, its plural, or a short name (vs, dr, gw, se, we, wg, ap, ra, pa).\n\nExit status: 0 when shown, 1 \
for an unknown object or an unreachable control plane, 2 on usage errors."
)]
pub struct Args {
    /// The object: KIND/NAMESPACE/NAME or KIND/NAME.
    #[arg(value_name = "KIND/NAMESPACE/NAME")]
    object: String,

    /// Namespace when OBJECT is KIND/NAME.
    #[arg(short = 'n', long, default_value = "default")]
    namespace: String,

    /// Output format: `short` (text) or `json` (the /debug/objectz body).
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Short)]
    output: Output,

    #[command(flatten)]
    addr: AddrArgs,
}

/// Output formats of `status`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Short,
    Json,
}

/// Runs the command; returns the process exit status.
pub fn run(args: &Args) -> ExitCode {
    match run_inner(args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("Error: {message}");
            ExitCode::from(1)
        }
    }
}

fn run_inner(args: &Args) -> Result<String, String> {
    let (kind, namespace, name) = parse_object(&args.object, &args.namespace)?;
    let path = format!(
        "/debug/objectz?kind={}&namespace={}&name={}",
        crate::debug_client::encode_query(kind.as_str()),
        crate::debug_client::encode_query(&namespace),
        crate::debug_client::encode_query(&name)
    );
    let status = get_json(&args.addr.addr, &path).map_err(|e| match e {
        DebugError::Status { status: 404, body, .. } => {
            // The server lists the errors of files that define the object but were rejected.
            let reasons: Vec<&str> = body.lines().filter_map(|l| l.strip_prefix("rejected: ")).collect();
            let mut message = format!("{kind} {namespace}/{name} not found in the config in force");
            if !reasons.is_empty() {
                message.push_str(": its file was rejected:");
                for r in reasons {
                    message.push_str("\n  ");
                    message.push_str(r);
                }
            }
            message
        }
        other => other.to_string(),
    })?;
    Ok(match args.output {
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&status).unwrap_or_default()),
        Output::Short => render(&status),
    })
}

/// `KIND/NAMESPACE/NAME` or `KIND/NAME` (namespace `default_namespace`), KIND as `get` takes it.
fn parse_object(object: &str, default_namespace: &str) -> Result<(api::Kind, String, String), String> {
    let parts: Vec<&str> = object.split('/').collect();
    let (word, namespace, name) = match parts.as_slice() {
        [k, ns, n] if !k.is_empty() && !ns.is_empty() && !n.is_empty() => (*k, (*ns).to_owned(), *n),
        [k, n] if !k.is_empty() && !n.is_empty() => (*k, default_namespace.to_owned(), *n),
        _ => return Err(format!("{object:?} is not KIND/NAMESPACE/NAME or KIND/NAME")),
    };
    let kind = kube_source::kind_from_word(word).ok_or_else(|| {
        format!(
            "unknown kind {word:?}: use an Istio kind or a short name (vs, dr, gw, se, we, wg, ap, ra, pa)"
        )
    })?;
    Ok((kind, namespace, name.to_owned()))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// The text form: a header block, then one block per proxy.
fn render(s: &Value) -> String {
    let mut out = String::new();
    out.push_str(&format!("{} {}/{}\n", text(&s["kind"]), text(&s["namespace"]), text(&s["name"])));
    let rv = text(&s["resourceVersion"]);
    out.push_str(&format!("  Source:          {}\n", text(&s["source"]["location"])));
    if !rv.is_empty() {
        out.push_str(&format!("  ResourceVersion: {rv}\n"));
    }
    out.push_str(&format!("  Validation:      {}\n", text(&s["validation"]["state"])));
    for m in s["validation"]["messages"].as_array().into_iter().flatten() {
        out.push_str(&format!("    - {}\n", text(m)));
    }
    out.push_str(&format!(
        "  Pushed in:       {}\n",
        s["pushVersion"].as_str().unwrap_or("(not pushed yet)")
    ));
    for f in s["findings"].as_array().into_iter().flatten() {
        let path = text(&f["path"]);
        let at = if path.is_empty() { String::new() } else { format!("{path}: ") };
        out.push_str(&format!(
            "  Generation:      {} {at}{} (in {})\n",
            text(&f["severity"]),
            text(&f["message"]),
            text(&f["resource"])
        ));
        let proxies: Vec<&str> = f["proxies"].as_array().into_iter().flatten().map(text).collect();
        if !proxies.is_empty() {
            out.push_str(&format!("                   for {}\n", proxies.join(", ")));
        }
    }
    let c = &s["counts"];
    let proxies = s["proxies"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!(
        "  Proxies:         {} concerned: {} ACKED, {} PENDING, {} NACKED\n",
        proxies.len(),
        c["acked"],
        c["pending"],
        c["nacked"]
    ));
    if proxies.is_empty() {
        out.push_str("  (no connected proxy is concerned by this object)\n");
        return out;
    }
    out.push('\n');
    let width = proxies.iter().map(|p| text(&p["proxy"]).len()).max().unwrap_or(5).max(5);
    out.push_str(&format!("{:<width$}  {:<7}  TYPES\n", "PROXY", "STATUS"));
    for p in &proxies {
        let types: Vec<String> = p["types"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| format!("{}:{}", text(&t["type"]), text(&t["status"])))
            .collect();
        out.push_str(&format!(
            "{:<width$}  {:<7}  {}\n",
            text(&p["proxy"]),
            text(&p["status"]),
            types.join(" ")
        ));
        if p["polling"] == true {
            out.push_str(&format!(
                "{:width$}  polling (REST): cannot ACK or NACK; ACKED = its next poll carried the version\n",
                ""
            ));
        }
        if let Some(e) = p["error"].as_str() {
            out.push_str(&format!("{:width$}  Envoy error: {e}\n", ""));
        }
        if let Some(f) = p["field"].as_str() {
            out.push_str(&format!("{:width$}  Istio field: {f}\n", ""));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_take_short_names_any_case_and_a_default_namespace() {
        let (k, ns, n) = parse_object("VS/bookinfo/reviews", "default").unwrap();
        assert_eq!((k, ns.as_str(), n.as_str()), (api::Kind::VirtualService, "bookinfo", "reviews"));
        let (k, ns, _) = parse_object("destinationrule/r", "prod").unwrap();
        assert_eq!((k, ns.as_str()), (api::Kind::DestinationRule, "prod"));
        assert!(parse_object("vs", "default").is_err());
        assert!(parse_object("pod/a/b", "default").unwrap_err().contains("unknown kind"));
    }

    #[test]
    fn render_names_the_nacking_proxy_and_its_error() {
        let s = serde_json::json!({
            "kind": "VirtualService", "namespace": "ns", "name": "vs", "resourceVersion": "3",
            "source": {"kind": "file", "location": "/c/vs.yaml:1"},
            "validation": {"state": "valid", "messages": []},
            "pushVersion": "t/4",
            "counts": {"acked": 0, "pending": 0, "nacked": 1},
            "proxies": [{"proxy": "sidecar~1~a.ns~ns.svc.cluster.local", "connection": "c-1", "status": "NACKED",
                "types": [{"type": "RDS", "status": "NACKED"}], "error": "bad regex", "field": "spec.http[0]"}]
        });
        let out = render(&s);
        assert!(out.contains("/c/vs.yaml:1"), "{out}");
        assert!(out.contains("sidecar~1~a.ns~ns.svc.cluster.local  NACKED   RDS:NACKED"), "{out}");
        assert!(out.contains("Envoy error: bad regex") && out.contains("Istio field: spec.http[0]"), "{out}");
    }

    #[test]
    fn render_shows_dropped_parts_and_polling_proxies() {
        let s = serde_json::json!({
            "kind": "VirtualService", "namespace": "ns", "name": "vs",
            "source": {"kind": "file", "location": "/c/vs.yaml:1"},
            "validation": {"state": "valid", "messages": []},
            "counts": {"acked": 1, "pending": 0, "nacked": 0},
            "findings": [{"severity": "dropped", "path": "spec.http[0].route", "resource": "route 80",
                "message": "weights sum to 6442450941, which exceeds 4294967295", "proxies": ["client.ns"]}],
            "proxies": [{"proxy": "client.ns", "connection": "client.ns-rest", "status": "ACKED",
                "types": [{"type": "RDS", "status": "ACKED"}], "polling": true}]
        });
        let out = render(&s);
        let line = out.lines().find(|l| l.contains("Generation:")).unwrap_or_else(|| panic!("{out}"));
        assert!(
            line.contains("dropped spec.http[0].route: weights sum") && line.ends_with("(in route 80)"),
            "{out}"
        );
        assert!(out.contains("for client.ns\n"), "{out}");
        assert!(out.contains("polling (REST): cannot ACK or NACK"), "{out}");
        assert!(out.contains("(not pushed yet)"), "{out}");
    }
}
