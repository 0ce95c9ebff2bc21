//! `meshpilot configz`: load config directories through the file config source and print what the
//! control plane would hold, in the shape of Istio's `/debug/configz`; with `--watch`, keep watching
//! and print every add/update/delete event as it happens.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use config::parse::ParseOptions;
use config::{Aggregate, FileSource, FileSourceOptions, QueueOptions, ReadOnlySource, configz};
use model::{ConfigStore, ConfigStoreController, Event, EventHandler, shutdown_channel};

/// Arguments of `meshpilot configz`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Load --config-dir directories and print the config in force (Istio's /debug/configz shape)",
    long_about = "Load one or more config directories through meshpilot's file config source (the same \
reader `meshpilot discovery --config-dir` uses) and print the objects in force as a JSON list in the shape \
of Istio's /debug/configz: kind, apiVersion, metadata (name, namespace, resourceVersion, …), spec.\n\n\
Files that fail to parse or validate are reported on stderr with file:line, field path and reason; their \
objects are not loaded (on a later change, their last good objects stay in force). An object defined in \
two files is taken from the first path in sort order, with a warning naming both. Directories are joined \
in the order given: the first one wins for an object defined in several.\n\n\
With --watch, the directories are then watched (a scan once no file is being written, at most 100 ms after the first event; Kubernetes ConfigMap `..data` swaps \
included) and each event is printed as one JSON line {event, kind, namespace, name, resourceVersion} until \
interrupted.\n\n\
Exit status: 0 when every file was read cleanly, 1 when any file was bad or a directory unreadable, 2 on \
usage errors."
)]
pub struct Args {
    /// A directory of Istio config (YAML/JSON, read recursively); repeatable.
    #[arg(long = "config-dir", value_name = "DIR", required = true)]
    config_dirs: Vec<PathBuf>,

    /// Keep watching and print one JSON line per event.
    #[arg(long)]
    watch: bool,

    /// Namespace given to objects that name none.
    #[arg(long, default_value = "default")]
    default_namespace: String,

    /// DNS domain suffix of the mesh.
    #[arg(long, default_value = "cluster.local")]
    domain: String,
}

/// Runs the command; returns the process exit status.
pub fn run(args: &Args) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("Error: cannot start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(run_async(args))
}

async fn run_async(args: &Args) -> ExitCode {
    let options = FileSourceOptions {
        parse: ParseOptions {
            default_namespace: args.default_namespace.clone(),
            domain_suffix: args.domain.clone(),
            ..ParseOptions::default()
        },
        ..FileSourceOptions::default()
    };
    let mut clean = true;
    let mut sources: Vec<Arc<dyn ConfigStoreController>> = Vec::new();
    for dir in &args.config_dirs {
        match FileSource::new(dir.clone(), options.clone()) {
            Ok(source) => {
                let status = source.status();
                if !status.bad_files.is_empty() || !status.duplicates.is_empty() {
                    clean &= status.bad_files.is_empty();
                    eprintln!(
                        "{}: {}",
                        dir.display(),
                        serde_json::to_string_pretty(&status.to_json()).unwrap_or_default()
                    );
                }
                sources.push(Arc::new(ReadOnlySource::new(source)));
            }
            Err(err) => {
                eprintln!("Error: cannot read config directory \"{}\": {err}", dir.display());
                return ExitCode::from(1);
            }
        }
    }
    let aggregate = Arc::new(Aggregate::new(sources, QueueOptions::default()));
    println!("{}", serde_json::to_string_pretty(&configz(aggregate.as_ref())).unwrap_or_default());
    if !args.watch {
        return if clean { ExitCode::SUCCESS } else { ExitCode::from(1) };
    }

    // Handlers first see an Add for every object already loaded; skip those, print what changes next.
    let loaded: std::collections::HashSet<(String, String, String)> = aggregate
        .schemas()
        .iter()
        .flat_map(|kind| aggregate.list(*kind, None))
        .map(|c| (c.kind().to_string(), c.meta.namespace.clone(), c.meta.name.clone()))
        .collect();
    let initial = Arc::new(std::sync::Mutex::new(loaded));
    for kind in aggregate.schemas().to_vec() {
        let initial = initial.clone();
        let handler: EventHandler = Arc::new(move |_old, new, event| {
            let key = (new.kind().to_string(), new.meta.namespace.clone(), new.meta.name.clone());
            if event == Event::Add && initial.lock().map(|mut set| set.remove(&key)).unwrap_or(false) {
                return Ok(());
            }
            let line = serde_json::json!({
                "event": event.as_str(),
                "kind": key.0,
                "namespace": key.1,
                "name": key.2,
                "resourceVersion": new.meta.resource_version,
            });
            println!("{line}");
            Ok(())
        });
        aggregate.register_event_handler(kind, handler);
    }
    let (trigger, shutdown) = shutdown_channel();
    let task = tokio::spawn(aggregate.run(shutdown));
    let _ = tokio::signal::ctrl_c().await;
    trigger.trigger();
    let _ = task.await;
    ExitCode::SUCCESS
}
