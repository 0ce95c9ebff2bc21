//! `meshpilot apply`, `create`, `get`, `delete`: Istio config in a Kubernetes cluster, the
//! `istioctl create -f` / `kubectl apply -f` flow with meshpilot's validation in front.
//!
//! Files are validated exactly as `meshpilot validate` does before anything is sent: one invalid
//! document (with file, line, field path and reason) and nothing is applied. Objects go to the API
//! server as Istio custom resources at their kind's current version; `apply` is a server-side apply
//! with field manager `meshpilot`. Server errors (RBAC, resource-version conflicts, missing CRDs) are
//! explained in plain words.

use std::{
    io::{self, Write},
    path::PathBuf,
    process::ExitCode,
};

use api::{
    Kind,
    schema::{self, Lookup},
};
use config::parse::{ParseOptions, ParsedDocument};
use kube_source::{Connection, KubeError, client, kind_from_word};

use crate::validate;

/// Cluster connection flags shared by the commands.
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterFlags {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,

    /// Namespace (default: the kubeconfig context's namespace, else `default`).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
}

/// Arguments of `meshpilot apply` and `meshpilot create`.
#[derive(clap::Args, Debug)]
pub struct WriteArgs {
    /// A file or directory of Istio config (YAML/JSON, directories recursively); repeatable; `-` is stdin.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    filenames: Vec<PathBuf>,

    #[command(flatten)]
    cluster: ClusterFlags,

    /// `apply` only: take over fields another field manager owns instead of failing with a conflict.
    #[arg(long)]
    force_conflicts: bool,
}

/// Arguments of `meshpilot get`.
#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// Kind: name, plural or short name (`VirtualService`, `virtualservices`, `vs`, `dr`, `gw`, `se`, …).
    kind: String,

    /// Object name (default: all objects of the kind in the namespace).
    name: Option<String>,

    #[command(flatten)]
    cluster: ClusterFlags,

    /// List across all namespaces.
    #[arg(short = 'A', long)]
    all_namespaces: bool,

    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = GetOutput::Table)]
    output: GetOutput,
}

/// Output formats of `get`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum GetOutput {
    /// NAME and AGE columns (NAMESPACE too with -A).
    Table,
    /// The objects as YAML (a `List` when not asking for one name).
    Yaml,
    /// The objects as JSON (a `List` when not asking for one name).
    Json,
    /// `resource/name` per object.
    Name,
}

/// Arguments of `meshpilot delete`.
#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    /// Kind, then one or more names (or use -f).
    #[arg(value_name = "KIND NAME")]
    words: Vec<String>,

    /// Delete the objects defined in these files (kind, namespace and name are read from them).
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    filenames: Vec<PathBuf>,

    #[command(flatten)]
    cluster: ClusterFlags,

    /// Succeed when an object does not exist.
    #[arg(long)]
    ignore_not_found: bool,
}

/// `virtualservice.networking.istio.io`, kubectl's resource name for messages.
fn resource(kind: Kind) -> String {
    format!("{}.{}", kind.as_str().to_ascii_lowercase(), kind.schema().group)
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

fn fail(message: &str) -> ExitCode {
    eprintln!("Error: {message}");
    ExitCode::from(1)
}

async fn connect(flags: &ClusterFlags) -> Result<(Connection, String), KubeError> {
    let connection = kube_source::connect(flags.kubeconfig.as_deref()).await?;
    let namespace = flags.namespace.clone().unwrap_or_else(|| connection.default_namespace.clone());
    Ok((connection, namespace))
}

/// One object to write: its kind, namespace and the JSON to send.
struct Planned {
    kind: Kind,
    namespace: String,
    name: String,
    object: serde_json::Value,
}

/// Validates every file; returns the objects to send, or prints the findings and returns `None`.
fn plan(args: &WriteArgs, namespace: &str, explicit_namespace: bool) -> Option<Vec<Planned>> {
    let options = ParseOptions { default_namespace: namespace.to_string(), ..ParseOptions::default() };
    let results = validate::collect(&args.filenames, &options);
    let mut stderr = io::stderr().lock();
    let errors = validate::write_errors(&results, &mut stderr).unwrap_or(1);
    if errors > 0 {
        let _ = writeln!(stderr, "Error: the input is invalid; nothing was applied");
        return None;
    }
    let mut planned = Vec::new();
    let mut mismatched = false;
    for doc in results.iter().flat_map(|r| &r.documents) {
        let Some(config) = &doc.config else {
            let note = doc.skipped.clone().unwrap_or_else(|| "not Istio config".into());
            let _ = writeln!(stderr, "skipped: \"{}\" ({}): {note}; not applied", doc.object_ref(), doc.file);
            continue;
        };
        if explicit_namespace && !doc.namespace.is_empty() && doc.namespace != namespace {
            let _ = writeln!(
                stderr,
                "Error: {}: {} has namespace \"{}\", which does not match --namespace \"{namespace}\"; pass \
                 --namespace={} or remove the flag",
                doc.file,
                doc.object_ref(),
                doc.namespace,
                doc.namespace
            );
            mismatched = true;
            continue;
        }
        let mut object = client::to_object(config);
        // Always the kind's current version: that is the endpoint the object is sent to.
        object["apiVersion"] = config.kind().schema().api_version().into();
        planned.push(Planned {
            kind: config.kind(),
            namespace: config.meta.namespace.clone(),
            name: config.meta.name.clone(),
            object,
        });
    }
    if mismatched {
        let _ = writeln!(stderr, "Error: nothing was applied");
        return None;
    }
    Some(planned)
}

/// Runs `apply` (`create` when `create` is set).
pub fn run_write(args: &WriteArgs, create: bool) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(&e),
    };
    rt.block_on(async {
        let (connection, namespace) = match connect(&args.cluster).await {
            Ok(c) => c,
            Err(e) => return fail(&e.to_string()),
        };
        let Some(planned) = plan(args, &namespace, args.cluster.namespace.is_some()) else {
            return ExitCode::from(1);
        };
        let client = &connection.client;
        let mut failed = 0;
        for p in planned {
            let outcome = if create {
                client::create(client, p.kind, &p.namespace, p.object).await.map(|_| "created")
            } else {
                write_apply(client, &p, args.force_conflicts).await
            };
            match outcome {
                Ok(verb) => println!("{}/{} {verb}", resource(p.kind), p.name),
                Err(e) => {
                    eprintln!("Error: {e}");
                    failed += 1;
                }
            }
        }
        if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
    })
}

/// Server-side apply; says whether the object was created, configured or left unchanged.
async fn write_apply(
    client: &kube_source::Client,
    p: &Planned,
    force: bool,
) -> Result<&'static str, KubeError> {
    let before = client::get(client, p.kind, &p.namespace, &p.name).await?;
    let after = client::apply(client, p.kind, &p.namespace, p.object.clone(), force).await?;
    Ok(match before {
        None => "created",
        Some(b) if b["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"] => "unchanged",
        Some(_) => "configured",
    })
}

fn kind_arg(word: &str) -> Result<Kind, String> {
    kind_from_word(word).ok_or_else(|| {
        let names = |kinds: &[Kind]| kinds.iter().map(Kind::as_str).collect::<Vec<_>>().join(", ");
        format!(
            "the server doesn't have a resource type \"{word}\" that meshpilot manages: use an Istio kind ({}), \
             a short name (vs, dr, gw, se, we, wg, ap, ra, pa), or a Gateway API kind ({}; write \
             gateways.gateway.networking.k8s.io for its Gateway)",
            names(Kind::ISTIO),
            names(Kind::GATEWAY_API)
        )
    })
}

/// What `get -o yaml|json` prints for an object: as stored, without server-side apply bookkeeping.
/// `metadata` starts with name and namespace, as kubectl prints it.
fn for_output(mut object: serde_json::Value) -> serde_json::Value {
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.remove("managedFields");
        let mut ordered = serde_json::Map::new();
        for key in ["name", "namespace"] {
            if let Some(v) = meta.remove(key) {
                ordered.insert(key.into(), v);
            }
        }
        ordered.append(meta);
        *meta = ordered;
    }
    object
}

/// Runs `get`.
pub fn run_get(args: &GetArgs) -> ExitCode {
    let kind = match kind_arg(&args.kind) {
        Ok(k) => k,
        Err(e) => return fail(&e),
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(&e),
    };
    rt.block_on(async {
        let (connection, namespace) = match connect(&args.cluster).await {
            Ok(c) => c,
            Err(e) => return fail(&e.to_string()),
        };
        let client = &connection.client;
        let objects = match &args.name {
            Some(name) => match client::get(client, kind, &namespace, name).await {
                Ok(Some(o)) => vec![o],
                Ok(None) => {
                    return fail(&format!(
                        "{} \"{name}\" not found in namespace \"{namespace}\"",
                        resource(kind)
                    ));
                }
                Err(e) => return fail(&e.to_string()),
            },
            None => {
                let ns = (!args.all_namespaces).then_some(namespace.as_str());
                match client::list(client, kind, ns).await {
                    Ok(list) => list,
                    Err(e) => return fail(&e.to_string()),
                }
            }
        };
        let objects: Vec<serde_json::Value> = objects.into_iter().map(for_output).collect();
        let out = &mut io::stdout().lock();
        let written = match args.output {
            GetOutput::Table => write_table(out, &objects, args.all_namespaces, &namespace),
            GetOutput::Name => objects.iter().try_for_each(|o| {
                writeln!(out, "{}/{}", resource(kind), o["metadata"]["name"].as_str().unwrap_or_default())
            }),
            GetOutput::Json | GetOutput::Yaml => {
                let doc = if args.name.is_some() {
                    objects.into_iter().next().unwrap_or_default()
                } else {
                    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects,
                                       "metadata": {"resourceVersion": ""}})
                };
                if args.output == GetOutput::Json {
                    serde_json::to_writer_pretty(&mut *out, &doc)
                        .map_err(io::Error::other)
                        .and_then(|()| writeln!(out))
                } else {
                    match serde_saphyr::to_string(&doc) {
                        Ok(text) => out.write_all(text.as_bytes()),
                        Err(e) => Err(io::Error::other(e.to_string())),
                    }
                }
            }
        };
        match written {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => fail(&format!("writing output: {e}")),
        }
    })
}

fn write_table(
    out: &mut dyn Write,
    objects: &[serde_json::Value],
    all_namespaces: bool,
    namespace: &str,
) -> io::Result<()> {
    if objects.is_empty() {
        if all_namespaces {
            eprintln!("No resources found");
        } else {
            eprintln!("No resources found in {namespace} namespace.");
        }
        return Ok(());
    }
    let rows: Vec<(String, String, String)> = objects
        .iter()
        .map(|o| {
            let meta = &o["metadata"];
            let created = meta["creationTimestamp"].as_str().unwrap_or_default();
            (
                meta["namespace"].as_str().unwrap_or_default().to_string(),
                meta["name"].as_str().unwrap_or_default().to_string(),
                age(created),
            )
        })
        .collect();
    let ns_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max("NAMESPACE".len());
    let name_width = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max("NAME".len());
    if all_namespaces {
        writeln!(out, "{:ns_width$}   {:name_width$}   AGE", "NAMESPACE", "NAME")?;
    } else {
        writeln!(out, "{:name_width$}   AGE", "NAME")?;
    }
    for (ns, name, age) in rows {
        if all_namespaces {
            writeln!(out, "{ns:ns_width$}   {name:name_width$}   {age}")?;
        } else {
            writeln!(out, "{name:name_width$}   {age}")?;
        }
    }
    Ok(())
}

/// kubectl's short age (`45s`, `12m`, `3h`, `5d`) from an RFC 3339 UTC timestamp; `<unknown>` when
/// it cannot be read.
fn age(created: &str) -> String {
    let Some(then) = parse_rfc3339_utc(created) else {
        return "<unknown>".into();
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let secs = now.saturating_sub(then);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Seconds since the epoch of an RFC 3339 timestamp such as `YYYY-MM-DDTHH:MM:SSZ` (parsed by
/// `jiff`); `None` when it is not one or lies before 1970.
fn parse_rfc3339_utc(text: &str) -> Option<u64> {
    u64::try_from(text.parse::<jiff::Timestamp>().ok()?.as_second()).ok()
}

/// One object named for deletion.
struct Target {
    kind: Kind,
    namespace: String,
    name: String,
}

fn delete_targets(args: &DeleteArgs, namespace: &str) -> Result<Vec<Target>, String> {
    if !args.filenames.is_empty() {
        if !args.words.is_empty() {
            return Err("give either KIND NAME… or -f PATH, not both".into());
        }
        let options = ParseOptions { default_namespace: namespace.to_string(), ..ParseOptions::default() };
        let results = validate::collect(&args.filenames, &options);
        let mut problems = Vec::new();
        let mut targets = Vec::new();
        for r in &results {
            if let Some(e) = &r.read_error {
                problems.push(e.clone());
            }
            for doc in &r.documents {
                match delete_target(doc, namespace) {
                    Ok(Some(t)) => targets.push(t),
                    Ok(None) => {}
                    Err(e) => problems.push(e),
                }
            }
        }
        if !problems.is_empty() {
            return Err(format!("{}\nnothing was deleted", problems.join("\n")));
        }
        return Ok(targets);
    }
    let Some((kind, names)) = args.words.split_first() else {
        return Err("give KIND NAME… or -f PATH".into());
    };
    if names.is_empty() {
        return Err(format!("give the name of the {kind} to delete (or -f PATH)"));
    }
    let kind = kind_arg(kind)?;
    Ok(names.iter().map(|n| Target { kind, namespace: namespace.to_string(), name: n.clone() }).collect())
}

/// The object a document names; `None` for documents that are not Istio objects (skipped).
fn delete_target(doc: &ParsedDocument, namespace: &str) -> Result<Option<Target>, String> {
    if doc.kind.is_empty() && doc.errors.is_empty() {
        return Ok(None);
    }
    let at = format!("{} (document {})", doc.file, doc.index);
    if doc.kind.is_empty() {
        let reasons: Vec<String> = doc.errors.iter().map(ToString::to_string).collect();
        return Err(format!("{at}: {}", reasons.join("; ")));
    }
    let schema = match schema::lookup(&doc.api_version, &doc.kind) {
        Lookup::Istio(s) | Lookup::UnservedVersion(s) => s,
        Lookup::Removed(_) | Lookup::Other => return Ok(None),
    };
    if doc.name.is_empty() {
        return Err(format!("{at}: {} has no metadata.name", doc.kind));
    }
    let namespace = if doc.namespace.is_empty() { namespace.to_string() } else { doc.namespace.clone() };
    Ok(Some(Target { kind: schema.kind, namespace, name: doc.name.clone() }))
}

/// Runs `delete`.
pub fn run_delete(args: &DeleteArgs) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(&e),
    };
    rt.block_on(async {
        let (connection, namespace) = match connect(&args.cluster).await {
            Ok(c) => c,
            Err(e) => return fail(&e.to_string()),
        };
        let targets = match delete_targets(args, &namespace) {
            Ok(t) => t,
            Err(e) => return fail(&e),
        };
        let mut failed = 0;
        for t in targets {
            match client::delete(&connection.client, t.kind, &t.namespace, &t.name, None).await {
                Ok(()) => println!("{} \"{}\" deleted", resource(t.kind), t.name),
                Err(e) if e.is_not_found() && args.ignore_not_found => {}
                Err(e) if e.is_not_found() => {
                    eprintln!(
                        "Error: {} \"{}\" not found in namespace \"{}\"",
                        resource(t.kind),
                        t.name,
                        t.namespace
                    );
                    failed += 1;
                }
                Err(e) => {
                    eprintln!("Error: {e}");
                    failed += 1;
                }
            }
        }
        if failed > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_ages() {
        assert_eq!(parse_rfc3339_utc("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_utc("2000-03-01T00:00:01Z"), Some(951_868_801));
        assert_eq!(parse_rfc3339_utc("yesterday"), None);
        assert_eq!(age("not a time"), "<unknown>");
    }
}
