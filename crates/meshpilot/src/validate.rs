//! `meshpilot validate`: offline validation of Istio config files, the counterpart of
//! `istioctl validate` (`istioctl/pkg/validate/validate.go`).

use std::{
    io::{self, Write},
    path::{Path, PathBuf},
    process::ExitCode,
};

use config::parse::{self, Finding, ParseOptions, ParsedDocument, UnknownFields};

/// Arguments of `meshpilot validate`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Validate Istio config files (like `istioctl validate`)",
    long_about = "Validate Istio config files offline, like `istioctl validate`.\n\n\
Each file may hold several YAML documents (separated by `---`) or JSON objects; a directory is read \
recursively for .yaml, .yml and .json files; `-` reads standard input. Every document is parsed into its \
Istio kind (networking, security, telemetry and extensions kinds at any served version), unknown fields \
(also fields Istio removed, such as websocketUpgrade) and duplicate keys are errors, and the kind's \
validation rules run (Istio's rules). Kubernetes Services get Istio's port-name checks and Deployments are \
accepted; `kind: List` is expanded; other kinds are skipped with a note, removed Istio APIs \
(config.istio.io, authentication.istio.io, rbac.istio.io) with one naming the replacement (istioctl does \
not check kinds it has no schema for).\n\n\
Output (text): one `validation succeed: \"Kind/namespace/name\"` line per valid object and a \
`\"FILE\" is valid` line per clean file on stdout; warnings under `\"FILE\" has warnings:`; errors on \
stderr, each with the object, the reason, the file:line and the field path.\n\
Output (json): one record per document: file, index, line, apiVersion, kind, namespace, name, valid, \
errors[{path,message,line}], warnings[…], skipped.\n\n\
Exit status: 0 when every document is valid (warnings allowed), 1 when any is invalid or a file cannot \
be read, 2 on usage errors.",
    after_help = "Examples:\n  meshpilot validate -f samples/bookinfo/networking/bookinfo-gateway.yaml\n  \
meshpilot validate -f samples/bookinfo/networking            # a whole directory\n  \
kubectl get vs -A -o yaml | meshpilot validate -f -         # standard input\n  \
meshpilot validate -f config/ --output json"
)]
pub struct Args {
    /// A file or directory to validate; repeatable; `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    filenames: Vec<PathBuf>,

    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    output: Output,

    /// Namespace given to objects that name none.
    #[arg(long, default_value = "default")]
    default_namespace: String,

    /// Istio's own namespace: Kubernetes Services and Deployments there are not checked (as istioctl).
    #[arg(short = 'i', long = "istio-namespace", default_value = "istio-system")]
    istio_namespace: String,
}

/// Output formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    /// Human-readable, istioctl-style.
    Text,
    /// One JSON record per document.
    Json,
}

/// Results for one named input (a file given on the command line, or one found in a directory).
pub(crate) struct FileResult {
    pub(crate) name: String,
    pub(crate) documents: Vec<ParsedDocument>,
    /// The file could not be read at all.
    pub(crate) read_error: Option<String>,
}

/// Runs the command; returns the process exit status.
pub fn run(args: &Args) -> ExitCode {
    let options = ParseOptions {
        default_namespace: args.default_namespace.clone(),
        istio_namespace: args.istio_namespace.clone(),
        // istioctl validate decodes strictly.
        unknown_fields: UnknownFields::RejectAll,
        ..ParseOptions::default()
    };
    let results = collect(&args.filenames, &options);
    let stdout = io::stdout();
    let stderr = io::stderr();
    let res = match args.output {
        Output::Text => write_text(&results, &mut stdout.lock(), &mut stderr.lock()),
        Output::Json => write_json(&results, &mut stdout.lock()),
    };
    if let Err(err) = res
        && err.kind() != io::ErrorKind::BrokenPipe
    {
        eprintln!("Error: writing output: {err}");
    }
    let invalid = results.iter().any(|r| r.read_error.is_some() || r.documents.iter().any(|d| !d.is_valid()));
    if invalid { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// Reads and checks every path (files, directories recursively, `-` for stdin).
pub(crate) fn collect(paths: &[PathBuf], options: &ParseOptions) -> Vec<FileResult> {
    let mut results = Vec::new();
    let read = |path: &Path, results: &mut Vec<FileResult>| {
        let name = path.display().to_string();
        match parse::parse_file(path, options) {
            Ok(documents) => results.push(FileResult { name, documents, read_error: None }),
            Err(err) => results.push(FileResult {
                read_error: Some(format!("cannot read file \"{name}\": {err}")),
                name,
                documents: Vec::new(),
            }),
        }
    };
    for path in paths {
        if path == Path::new("-") {
            read(path, &mut results);
            continue;
        }
        match std::fs::metadata(path) {
            Err(err) => results.push(FileResult {
                name: path.display().to_string(),
                documents: Vec::new(),
                read_error: Some(format!("cannot stat file \"{}\": {err}", path.display())),
            }),
            Ok(meta) if meta.is_dir() => match parse::config_files(path) {
                Ok(files) => files.iter().for_each(|f| read(f, &mut results)),
                Err(err) => results.push(FileResult {
                    name: path.display().to_string(),
                    documents: Vec::new(),
                    read_error: Some(format!("cannot read directory \"{}\": {err}", path.display())),
                }),
            },
            Ok(_) => read(path, &mut results),
        }
    }
    results
}

/// `* Kind/ns/name: reason` plus the location on the next line.
fn write_finding(out: &mut dyn Write, doc: &ParsedDocument, f: &Finding) -> io::Result<()> {
    let object = if doc.kind.is_empty() { String::new() } else { format!("{}: ", doc.object_ref()) };
    writeln!(out, "\t* {object}{}", f.message)?;
    let path = if f.path.is_empty() { String::new() } else { format!(" {}", f.path) };
    writeln!(out, "\t    at {}:{} (document {}){path}", doc.file, f.line, doc.index)
}

fn write_text(results: &[FileResult], stdout: &mut dyn Write, stderr: &mut dyn Write) -> io::Result<()> {
    for r in results {
        for doc in &r.documents {
            if doc.is_valid() {
                match &doc.skipped {
                    None => writeln!(stdout, "validation succeed: \"{}\"", doc.object_ref())?,
                    Some(note) => writeln!(stdout, "skipped: \"{}\": {note}", doc.object_ref())?,
                }
            }
        }
    }
    for r in results {
        let clean = r.read_error.is_none() && r.documents.iter().all(|d| d.is_valid());
        let with_warnings: Vec<&ParsedDocument> =
            r.documents.iter().filter(|d| !d.warnings.is_empty()).collect();
        if !with_warnings.is_empty() {
            writeln!(stdout, "\"{}\" has warnings: ", r.name)?;
            for doc in with_warnings {
                for w in &doc.warnings {
                    write_finding(stdout, doc, w)?;
                }
            }
            writeln!(stdout)?;
        } else if clean {
            writeln!(stdout, "\"{}\" is valid", r.name)?;
        }
    }
    write_errors(results, stderr)?;
    Ok(())
}

/// Writes `Error: N errors occurred:` and every error (object, reason, file:line, field path);
/// returns N (nothing is written when it is 0).
pub(crate) fn write_errors(results: &[FileResult], stderr: &mut dyn Write) -> io::Result<usize> {
    let errors: usize = results
        .iter()
        .map(|r| {
            usize::from(r.read_error.is_some()) + r.documents.iter().map(|d| d.errors.len()).sum::<usize>()
        })
        .sum();
    if errors > 0 {
        let plural = if errors == 1 { "error" } else { "errors" };
        writeln!(stderr, "Error: {errors} {plural} occurred:")?;
        for r in results {
            if let Some(err) = &r.read_error {
                writeln!(stderr, "\t* {err}")?;
            }
            for doc in &r.documents {
                for e in &doc.errors {
                    write_finding(stderr, doc, e)?;
                }
            }
        }
    }
    Ok(errors)
}

fn findings_json(findings: &[Finding]) -> serde_json::Value {
    findings
        .iter()
        .map(|f| serde_json::json!({"path": f.path, "message": f.message, "line": f.line}))
        .collect::<Vec<_>>()
        .into()
}

fn write_json(results: &[FileResult], stdout: &mut dyn Write) -> io::Result<()> {
    let mut records = Vec::new();
    for r in results {
        if let Some(err) = &r.read_error {
            records.push(serde_json::json!({
                "file": r.name, "index": 0, "line": 0, "apiVersion": "", "kind": "", "namespace": "", "name": "",
                "valid": false, "errors": [{"path": "", "message": err, "line": 0}], "warnings": [],
            }));
        }
        for d in &r.documents {
            let mut rec = serde_json::json!({
                "file": d.file, "index": d.index, "line": d.line, "apiVersion": d.api_version, "kind": d.kind,
                "namespace": d.namespace, "name": d.name, "valid": d.is_valid(),
                "errors": findings_json(&d.errors), "warnings": findings_json(&d.warnings),
            });
            if let Some(note) = &d.skipped {
                rec["skipped"] = note.clone().into();
            }
            records.push(rec);
        }
    }
    serde_json::to_writer_pretty(&mut *stdout, &records)?;
    writeln!(stdout)
}
