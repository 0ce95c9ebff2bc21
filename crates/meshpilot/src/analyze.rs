//! `meshpilot analyze`: Istio's config analyzers over files and/or a cluster, the counterpart of
//! `istioctl analyze` (`istioctl/pkg/analyze/analyze.go`). The analysis itself is the
//! `meshpilot-analysis` crate; this module gathers the inputs, prints and picks the exit status.

mod cluster;

use std::{
    io::{self, IsTerminal, Write},
    path::{Path, PathBuf},
    process::ExitCode,
};

use analysis::{
    Filter, Level, Message, Suppression,
    analyzers::{self, Analyzer},
    msg::MessageType,
    resource::{LoadOptions, Resources},
};

/// Exit status when analysis found issues at or above `--failure-threshold` (istioctl's
/// `ExitAnalyzerFoundIssues`).
pub const EXIT_ANALYZER_FOUND_ISSUES: u8 = 79;

/// Where the message codes are explained.
const CONFIG_ANALYSIS_URL: &str = "https://istio.io/latest/docs/reference/config/analysis";

/// Recognized file extensions, in istioctl's order and spelling.
const FILE_EXTENSIONS: &str = "[.json .yaml .yml]";

/// Arguments of `meshpilot analyze`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Analyze Istio configuration and print validation messages (like `istioctl analyze`)",
    long_about = "Analyze Istio configuration and print validation messages, like `istioctl analyze`.\n\n\
Files and directories (recursively; .json, .yaml, .yml; `-` is standard input) are read as the objects to \
analyze; with --use-kube (or --kubeconfig) the cluster's Istio and Kubernetes objects are read too, files \
taking precedence. Istio's analyzers run over them and each finding prints as\n  \
Error [IST0101] (VirtualService default/reviews vs.yaml:11) Referenced host not found: \"reviews\"\n\
For the message codes see https://istio.io/latest/docs/reference/config/analysis.\n\n\
Unlike istioctl, the cluster is read only when asked (--use-kube or --kubeconfig): meshpilot also runs \
outside Kubernetes. Without a cluster, Pods, Services, Namespaces, Nodes and Secrets in files are ignored \
and the analyzers needing them are skipped (as istioctl does); -v lists them.\n\n\
Exit status: 79 when a message is at or above --failure-threshold (log output only), 1 when a file \
could not be parsed (unless --ignore-unknown) or on other errors, 2 on usage errors, else 0.",
    after_help = "Examples:\n  meshpilot analyze a.yaml b.yaml my-app-config/\n  \
meshpilot analyze --kubeconfig ~/.kube/config -A\n  \
meshpilot analyze -S \"IST0103=Pod *\" -S \"IST0107=Deployment default/foobar\" config/\n  \
meshpilot analyze -L\n  \
meshpilot analyze --analyzer gateway.ConflictingGatewayAnalyzer config/"
)]
pub struct Args {
    /// Files or directories to analyze; `-` reads standard input.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,

    /// Read the live cluster too (default: only when --kubeconfig is given).
    #[arg(short = 'k', long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    use_kube: Option<bool>,

    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster account); implies --use-kube.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,

    /// Namespace to analyze, and the namespace of objects in files that name none (default: `default`).
    #[arg(short = 'n', long)]
    namespace: Option<String>,

    /// Analyze all namespaces.
    #[arg(short = 'A', long)]
    all_namespaces: bool,

    /// Istio's namespace.
    #[arg(short = 'i', long = "istioNamespace", default_value = "istio-system")]
    istio_namespace: String,

    /// The severity level of analysis at which to set a non-zero exit code: Info, Warning or Error.
    #[arg(long, default_value = "Error", value_parser = parse_level)]
    failure_threshold: Level,

    /// The severity level of analysis at which to display messages: Info, Warning or Error.
    #[arg(long, default_value = "Info", value_parser = parse_level)]
    output_threshold: Level,

    /// Output format: log, json or yaml.
    #[arg(short = 'o', long, default_value = "log", value_parser = ["log", "json", "yaml"], ignore_case = true)]
    output: String,

    /// Suppress a message code on a resource: `<code>=<Kind> [<namespace>/]<name>`, `*` matching any
    /// run of characters (e.g. `IST0102=Namespace frod`, `IST0107=Deployment *`). Repeatable.
    #[arg(short = 'S', long, value_name = "CODE=RESOURCE")]
    suppress: Vec<String>,

    /// Run only these analyzers (see -L). Repeatable; names matching no analyzer run them all, as istioctl.
    #[arg(long = "analyzer", value_name = "NAME")]
    analyzers: Vec<String>,

    /// List the analyzers available to run.
    #[arg(short = 'L', long)]
    list_analyzers: bool,

    /// Do not fail on unparsable input documents.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_name = "BOOL")]
    ignore_unknown: bool,

    /// Mesh config file (MeshConfig YAML) overriding the default (or the cluster's `istio` ConfigMap).
    #[arg(long = "meshConfigFile", value_name = "PATH")]
    mesh_config_file: Option<PathBuf>,

    /// Print the analyzers run and skipped.
    #[arg(short = 'v', long)]
    verbose: bool,
}

fn parse_level(s: &str) -> Result<Level, String> {
    s.parse()
}

/// One input: the name printed (as given on the command line) and its path.
struct Input {
    name: String,
    path: PathBuf,
}

/// Runs the command; returns the process exit status.
pub fn run(args: &Args) -> ExitCode {
    let stdout = io::stdout();
    let stderr = io::stderr();
    match run_with(args, &mut stdout.lock(), &mut stderr.lock()) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(io::stderr(), "Error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run_with(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Result<ExitCode, String> {
    let io_err = |e: io::Error| format!("writing output: {e}");
    if args.list_analyzers {
        let mut all = analyzers::all();
        all.sort_by(|a, b| a.name().cmp(b.name()));
        for a in &all {
            writeln!(out, "* {}:", a.name()).map_err(io_err)?;
            if !a.description().is_empty() {
                writeln!(out, "    {}", a.description()).map_err(io_err)?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let inputs = gather_files(&args.files, err)?;
    let use_kube = args.use_kube.unwrap_or(args.kubeconfig.is_some());

    let mut suppressions = Vec::new();
    for s in &args.suppress {
        let parts: Vec<&str> = s.split('=').collect();
        if parts.len() != 2 {
            return Err(format!("{s} is not a valid suppression value. See meshpilot analyze --help"));
        }
        if MessageType::by_code(parts[0]).is_none() {
            writeln!(
                err,
                "Warning: Supplied message code '{}' is an unknown message code and will not have any effect.",
                parts[0]
            )
            .map_err(io_err)?;
        }
        suppressions.push(Suppression { code: parts[0].to_string(), resource: parts[1].to_string() });
    }

    let mut cluster = None;
    let mut namespace = args.namespace.clone().unwrap_or_default();
    if use_kube {
        let objects = cluster::list(args.kubeconfig.as_deref(), &args.istio_namespace)?;
        if namespace.is_empty() {
            namespace = objects.default_namespace.clone().unwrap_or_default();
        }
        cluster = Some(objects);
    }
    let selected = if args.all_namespaces {
        String::new()
    } else if namespace.is_empty() {
        "default".to_string()
    } else {
        namespace
    };
    let target =
        if args.all_namespaces { "all namespaces".to_string() } else { format!("namespace: {selected}") };

    let mut resources =
        Resources::new(LoadOptions { default_namespace: selected.clone(), runtime_kinds_from_files: false });
    resources.istio_namespace = args.istio_namespace.clone();
    if let Some(cluster) = &cluster {
        resources.set_cluster_source();
        if let Some(mesh) = &cluster.mesh_config
            && let Err(e) = resources.set_mesh_config_yaml(mesh)
        {
            writeln!(err, "Warning: the cluster's mesh config is unreadable ({e}); using the defaults")
                .map_err(io_err)?;
        }
    }
    if let Some(path) = &args.mesh_config_file {
        let loaded = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| resources.set_mesh_config_yaml(&text));
        if let Err(e) = loaded {
            return Err(format!("mesh config file {}: {e}", path.display()));
        }
    }
    if !use_kube {
        resources.add_default_resources();
    }
    let mut read_errors = Vec::new();
    for input in &inputs {
        if let Err(e) = resources.add_file(&input.path) {
            read_errors.push(format!("{}: {e}", input.name));
        }
    }
    if let Some(cluster) = &cluster {
        for object in &cluster.objects {
            resources.add_cluster_object(object);
        }
    }
    let mut parse_errors = 0;
    if !read_errors.is_empty() || !resources.load_errors.is_empty() {
        parse_errors = 1;
        let mut all: Vec<String> = read_errors;
        all.extend(resources.load_errors.iter().map(ToString::to_string));
        let plural = if all.len() == 1 { "error" } else { "errors" };
        write!(
            err,
            "Error(s) adding files: {} {plural} occurred:\n\t* {}\n\n",
            all.len(),
            all.join("\n\t* ")
        )
        .map_err(io_err)?;
    }

    let selected_analyzers: Vec<Box<dyn Analyzer>> = {
        let named: Vec<Box<dyn Analyzer>> = analyzers::all()
            .into_iter()
            .filter(|a| args.analyzers.iter().any(|n| n == a.name() || n == a.type_name()))
            .collect();
        if named.is_empty() { analyzers::all() } else { named }
    };
    let filter = Filter { namespace: (!args.all_namespaces).then(|| selected.clone()), suppressions };
    let result = analysis::analyze(&resources, &selected_analyzers, &filter);
    if args.verbose {
        writeln!(err, "Analyzed resources in {target}").map_err(io_err)?;
        for (title, list) in
            [("Skipped analyzers:", &result.skipped), ("Executed analyzers:", &result.executed)]
        {
            if !list.is_empty() {
                writeln!(err, "{title}").map_err(io_err)?;
                for a in list {
                    writeln!(err, "\t {a}").map_err(io_err)?;
                }
            }
        }
        writeln!(err).map_err(io_err)?;
    }

    let shown: Vec<&Message> =
        result.messages.iter().filter(|m| m.level() >= args.output_threshold).collect();
    let format = args.output.to_lowercase();
    match format.as_str() {
        "json" => {
            let docs: Vec<serde_json::Value> =
                shown.iter().map(|m| m.to_json(Some("istioctl-analyze"))).collect();
            let mut buf = Vec::new();
            let mut ser = serde_json::Serializer::with_formatter(
                &mut buf,
                serde_json::ser::PrettyFormatter::with_indent(b"\t"),
            );
            serde::Serialize::serialize(&docs, &mut ser).map_err(|e| e.to_string())?;
            writeln!(out, "{}", String::from_utf8_lossy(&buf)).map_err(io_err)?;
        }
        "yaml" => {
            let docs: Vec<serde_json::Value> =
                shown.iter().map(|m| m.to_json(Some("istioctl-analyze"))).collect();
            let text = if docs.is_empty() {
                "[]\n".to_string()
            } else {
                serde_saphyr::to_string(&docs).map_err(|e| e.to_string())?
            };
            writeln!(out, "{text}").map_err(io_err)?;
        }
        _ => {
            let lines: Vec<String> = shown.iter().map(|m| m.to_string()).collect();
            writeln!(out, "{}", lines.join("\n")).map_err(io_err)?;
        }
    }

    if shown.is_empty() {
        if parse_errors == 0 {
            let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
            match names.len() {
                0 => writeln!(err, "\u{2714} No validation issues found when analyzing {target}."),
                1 => writeln!(err, "\u{2714} No validation issues found when analyzing {}.", names[0]),
                _ => writeln!(
                    err,
                    "\u{2714} No validation issues found when analyzing:\n  - {}",
                    names.join("\n  - ")
                ),
            }
            .map_err(io_err)?;
        } else {
            writeln!(err, "No validation issues found when analyzing {target} (but {parse_errors} file could not be parsed).")
                .map_err(io_err)?;
        }
    }

    if format == "log" {
        if result.messages.iter().any(|m| m.level() >= args.failure_threshold) {
            writeln!(
                err,
                "Error: Analyzers found issues when analyzing {target}.\nSee {CONFIG_ANALYSIS_URL} for more information about causes and resolutions."
            )
            .map_err(io_err)?;
            return Ok(ExitCode::from(EXIT_ANALYZER_FOUND_ISSUES));
        }
        if parse_errors > 0 && !args.ignore_unknown {
            writeln!(err, "Error: Some files couldn't be parsed.").map_err(io_err)?;
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// istioctl's `gatherFiles`: `-` is stdin; a directory is walked recursively (sorted); files without a
/// recognized extension are skipped with a note on stderr.
fn gather_files(args: &[PathBuf], err: &mut dyn Write) -> Result<Vec<Input>, String> {
    let mut inputs = Vec::new();
    let valid = |p: &Path| matches!(p.extension().and_then(|e| e.to_str()), Some("json" | "yaml" | "yml"));
    for arg in args {
        let name = arg.display().to_string();
        if name == "-" {
            if io::stdin().is_terminal() {
                println!("Reading from stdin:");
            }
            inputs.push(Input { name, path: arg.clone() });
            continue;
        }
        let meta = std::fs::metadata(arg).map_err(|e| format!("stat {name}: {e}"))?;
        if meta.is_dir() {
            let mut files = Vec::new();
            walk(arg, &mut files).map_err(|e| format!("lstat {name}: {e}"))?;
            for f in files {
                if valid(&f) {
                    inputs.push(Input { name: f.display().to_string(), path: f });
                } else {
                    let _ = writeln!(
                        err,
                        "Skipping file {}, recognized file extensions are: {FILE_EXTENSIONS}",
                        f.display()
                    );
                }
            }
        } else if valid(arg) {
            inputs.push(Input { name, path: arg.clone() });
        } else {
            let _ = writeln!(err, "Skipping file {name}, recognized file extensions are: {FILE_EXTENSIONS}");
        }
    }
    Ok(inputs)
}

/// Every file under `dir`, in lexical order (Go's `filepath.Walk`).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        if std::fs::metadata(&path)?.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}
