//! `meshpilot discovery`: the control plane. Reads `--configDir` directories (watched) and/or the
//! Istio custom resources of the cluster in `--kubeconfig` (watched), builds the
//! ServiceEntry registry, and serves xDS (ADS, SotW and Delta) on `--grpcAddr`, readiness and debug
//! endpoints on `--httpAddr`, Prometheus metrics on `--monitoringAddr`, until SIGTERM/SIGINT.
//!
//! Flags are spelled as istiod's `pilot-discovery discovery` spells them (`--grpcAddr`,
//! `--meshConfig`, …; [`crate::discovery_flags`]); meshpilot's earlier kebab-case spellings
//! (`--grpc-addr`, `--mesh-config`, …) are aliases.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::Arc,
};

use config::mesh::{parse_config_sources, parse_discovery_selectors, parse_mesh_config};
use config::parse::ParseOptions;
use config::{Aggregate, FileSource, FileSourceOptions, QueueOptions, ReadOnlySource};
use discovery::{DiscoveryServer, Input, SecretsChanged, SecurityOptions, ServerOptions, secure::SecurePort};
use meshpilot_http::{DebugState, debug_router, monitoring_router};
use model::{ConfigStoreController, service::ServiceController, shutdown_channel};
use registry::{AggregateRegistry, ServiceEntryOptions, ServiceEntryRegistry};
use sds::{FileSecretOptions, FileSecrets};
use security::{Authenticator, CaOptions, IstioCa, authn::TokenReviewer};
use tracing::{error, info, warn};
use xds::AdsConfig;

use crate::discovery_flags::{KeepaliveArgs, LogArgs, NotUsedArgs};
use crate::env::{DiscoveryEnv, Environment};

/// Arguments of `meshpilot discovery`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Run the control plane: serve Istio config from --configDir to Envoy and gRPC clients over xDS",
    long_about = "Run the control plane (Istio's pilot-discovery). Config is read from --configDir \
directories (watched; a bad file keeps its last good objects and is listed under /debug/configstatusz) \
and/or from the Istio custom resources of the cluster in --kubeconfig (watched; an invalid object is skipped \
with a warning). ServiceEntries and WorkloadEntries are a service registry; with --kubeconfig, so are the \
cluster's Services and EndpointSlices (--registries Kubernetes, the default). With mesh config configSources \
(xds://HOST:PORT, fs:///PATH, k8s://; as istiod), config is read from those sources, in order, instead: \
xds:// reads an MCP-over-xDS server such as istiod or another meshpilot (docs/MCP.md).\n\n\
Certificate files named by DestinationRule and Gateway `tls` settings are sent to proxies as SDS secrets \
(`file-cert:CERT~KEY`, `file-root:CA`), read by meshpilot itself and re-sent when they change, but only \
from directories given with --file-secret-root (none by default: any proxy may ask for any file name).\n\n\
Ports: --grpcAddr ADS (SotW + Delta, plaintext, Istio's 15010); --secureGRPCAddr ADS and the CA \
over TLS (Istio's 15012; off unless given); --httpsAddr the validating webhook (Istio's 15017; off unless \
given); --httpAddr /ready and /debug/* \
(configz, syncz, adsz, registryz, endpointz, config_dump?proxyID=, configstatusz, proxystatusz); --monitoringAddr \
/metrics (Prometheus, Istio metric names).\n\n\
Flags are spelled as istiod's (--grpcAddr, --meshConfig, --log_output_level, …); the kebab-case spellings \
(--grpc-addr, --mesh-config, …) still work. istiod's flags that meshpilot does not act on are accepted, \
listed under their own heading below, and named in a warning at start when given; an unknown flag is \
an error naming it (istiod ignores unknown flags).\n\n\
Environment: PILOT_DEBOUNCE_AFTER (100ms), PILOT_DEBOUNCE_MAX (10s), PILOT_ENABLE_EDS_DEBOUNCE (true); \
for the secure port XDS_AUTH (true), PILOT_ENABLE_XDS_IDENTITY_CHECK (true), TOKEN_AUDIENCES (istio-ca), \
DEFAULT_WORKLOAD_CERT_TTL (24h), MAX_WORKLOAD_CERT_TTL (2160h), POD_NAMESPACE (istio-system), ROOT_CA_DIR; \
with --kubeconfig, PILOT_ENABLE_ANALYSIS (false: analysis messages in objects' status) and PILOT_ENABLE_STATUS \
(false: a Reconciled condition), written by the leader of a Lease (POD_NAME, POD_NAMESPACE; docs/CONFIG-FEEDBACK.md), and \
PILOT_ENABLE_GATEWAY_API_STATUS (true: the status of Gateway API objects, written by the leader of \
istio-gateway-status-leader-<revision>; docs/GATEWAY-API.md); \
RUST_LOG sets the log level, replacing --log_output_level (default info).\n\n\
Stops cleanly on SIGTERM or SIGINT."
)]
pub struct Args {
    /// A directory of Istio config (YAML/JSON, read recursively, watched); repeatable. The first wins
    /// for an object defined in several. Unlike istiod's --configDir (one directory, instead of the
    /// cluster's custom resources), combined with --kubeconfig. Give it, --kubeconfig, or mesh config
    /// configSources.
    #[arg(long = "configDir", visible_alias = "config-dir", value_name = "DIR")]
    config_dirs: Vec<PathBuf>,

    /// Watch the Istio custom resources of the cluster in this kubeconfig (combined with --configDir:
    /// an object in both is taken from the directory; writes go to the cluster). istiod's
    /// --kubeconfig; without it istiod uses its in-cluster config, meshpilot watches no cluster.
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,

    /// Service registries to read besides ServiceEntries (Istio's --registries, comma-separated):
    /// `Kubernetes` reads Services, EndpointSlices, Pods and Nodes of the --kubeconfig cluster.
    #[arg(long, value_delimiter = ',', default_value = "Kubernetes")]
    registries: Vec<String>,

    /// The cluster id (Istio's --clusterID): the registries' shard and the endpoints' cluster.
    #[arg(long = "clusterID", default_value = model::service::DEFAULT_CLUSTER_ID)]
    cluster_id: String,

    /// Control-plane revision (Istio's REVISION): cluster objects labelled istio.io/rev with another
    /// value are ignored.
    #[arg(long, env = "REVISION")]
    revision: Option<String>,

    /// Mesh config YAML (Istio's MeshConfig: rootNamespace, outboundTrafficPolicy,
    /// defaultServiceExportTo, connectTimeout, …). Unknown fields are warnings. istiod's --meshConfig,
    /// without its default (istiod reads ./etc/istio/config/mesh when not given; meshpilot, none).
    #[arg(long = "meshConfig", visible_alias = "mesh-config", value_name = "FILE")]
    mesh_config: Option<PathBuf>,

    /// DNS domain suffix of the mesh (istiod's --domain).
    #[arg(long, default_value = "cluster.local")]
    domain: String,

    /// Namespace given to objects that name none.
    #[arg(long, default_value = "default")]
    default_namespace: String,

    /// ADS gRPC address (istiod's --grpcAddr; `:PORT` listens on all interfaces).
    #[arg(long = "grpcAddr", visible_alias = "grpc-addr", default_value = ":15010")]
    grpc_addr: String,

    /// HTTP address for /ready and /debug/* (istiod's --httpAddr).
    #[arg(long = "httpAddr", visible_alias = "http-addr", default_value = ":8080")]
    http_addr: String,

    /// Monitoring address for /metrics (istiod's --monitoringAddr).
    #[arg(long = "monitoringAddr", visible_alias = "monitoring-addr", default_value = ":15014")]
    monitoring_addr: String,

    /// Secure xDS + CA address (Istio's --secureGRPCAddr, 15012): ADS and
    /// `IstioCertificateService/CreateCertificate` over TLS, callers authenticated by client
    /// certificate or Kubernetes service-account token. Off unless given (istiod: on by default).
    #[arg(long = "secureGRPCAddr", visible_alias = "secure-grpc-addr", value_name = "ADDR")]
    secure_grpc_addr: Option<String>,

    /// Where the self-signed root CA is kept (created at first start: ca-cert.pem, ca-key.pem,
    /// root-cert.pem, as Istio's istio-ca-secret). Without it, with --kubeconfig, the root is kept in
    /// the secret istio-ca-secret of POD_NAMESPACE (as istiod). Unused when --root-ca-dir holds a
    /// plugged-in CA.
    #[arg(long = "ca-dir", value_name = "DIR")]
    ca_dir: Option<PathBuf>,

    /// Istio's plugged-in CA directory (ROOT_CA_DIR; ca-cert.pem, ca-key.pem, cert-chain.pem,
    /// root-cert.pem — the `cacerts` secret): used when it holds ca-key.pem.
    #[arg(long = "root-ca-dir", env = "ROOT_CA_DIR", value_name = "DIR", default_value = "./etc/cacerts")]
    root_ca_dir: PathBuf,

    /// A directory whose certificate files may be served as SDS secrets (`file-cert:`, `file-root:`);
    /// repeatable. Files outside every such directory (after resolving `..` and symlinks) are never
    /// read; without this flag no file secret is served.
    #[arg(long = "file-secret-root", value_name = "DIR")]
    file_secret_roots: Vec<PathBuf>,

    #[command(flatten)]
    webhook: crate::webhook::WebhookArgs,

    #[command(flatten)]
    pub log: LogArgs,

    #[command(flatten)]
    keepalive: KeepaliveArgs,

    /// How long a graceful stop (SIGTERM/SIGINT) may take (Istio's --shutdownDuration, a Go duration):
    /// xDS streams are ended at once so proxies move to another replica, then listeners and tasks get
    /// this long to end before the process exits anyway (status 0).
    #[arg(long = "shutdownDuration", value_name = "DURATION", default_value = crate::shutdown::DEFAULT_SHUTDOWN_DURATION,
          value_parser = crate::shutdown::parse_shutdown_duration)]
    shutdown_duration: std::time::Duration,

    #[command(flatten)]
    not_used: NotUsedArgs,
}

impl Args {
    /// The istiod flags given that meshpilot accepts and does not act on, as `--NAME`
    /// ([`NotUsedArgs::given`]).
    pub fn flags_not_used(&self) -> Vec<String> {
        self.not_used.given().into_iter().map(|flag| format!("--{flag}")).collect()
    }
}

/// `:15010` → `0.0.0.0:15010`; `host:port` as given.
pub(crate) fn parse_addr(flag: &str, text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_string() };
    full.parse().map_err(|_| format!("invalid {flag} {text:?}: expected HOST:PORT or :PORT (e.g. :15010)"))
}

/// Runs the command; returns the process exit status.
pub fn run(args: &Args) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("Error: cannot start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(run_async(args));
    // A blocked thread (spawn_blocking, a kube writer) must not keep the process alive.
    runtime.shutdown_timeout(crate::shutdown::RUNTIME_SHUTDOWN);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            error!("{err}");
            eprintln!("Error: {err}");
            ExitCode::from(1)
        }
    }
}

async fn run_async(args: &Args) -> Result<(), String> {
    let not_used = args.flags_not_used();
    if !not_used.is_empty() {
        warn!(flags = %not_used.join(" "), "istiod flags accepted but not used by meshpilot");
    }
    let grpc_addr = parse_addr("--grpc-addr", &args.grpc_addr)?;
    let http_addr = parse_addr("--http-addr", &args.http_addr)?;
    let monitoring_addr = parse_addr("--monitoring-addr", &args.monitoring_addr)?;
    // The environment, read once (crate::env).
    let env = DiscoveryEnv::parse(&Environment::from_process())?;
    let debounce = env.debounce;

    let (mesh, mesh_warnings, selectors, config_sources, mesh_text) = match &args.mesh_config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --mesh-config {}: {e}", path.display()))?;
            let context = |e: String| format!("--mesh-config {}: {e}", path.display());
            let (mesh, warnings) = parse_mesh_config(&text, &args.domain).map_err(context)?;
            let selectors = parse_discovery_selectors(&text).map_err(context)?;
            (mesh, warnings, selectors, parse_config_sources(&text).map_err(context)?, text)
        }
        None => {
            let (mesh, warnings) = parse_mesh_config("", &args.domain)?;
            (mesh, warnings, model::selector::DiscoverySelectors::default(), Vec::new(), String::new())
        }
    };
    if config_sources.is_empty() && args.config_dirs.is_empty() && args.kubeconfig.is_none() {
        return Err(
            "no config to read: give --configDir, --kubeconfig, or configSources in --meshConfig".into()
        );
    }
    for w in &mesh_warnings {
        warn!("mesh config: {w}");
    }

    // Metrics first, so every later registration lands in the exporter.
    let mut builder = metrics_exporter_prometheus::PrometheusBuilder::new();
    for (name, buckets) in xds::metrics::HISTOGRAM_BUCKETS.iter().chain(discovery::metrics::HISTOGRAM_BUCKETS)
    {
        builder = builder
            .set_buckets_for_metric(metrics_exporter_prometheus::Matcher::Full((*name).to_string()), buckets)
            .map_err(|e| format!("metrics buckets: {e}"))?;
    }
    let handle =
        builder.install_recorder().map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    discovery::metrics::describe();

    let options = FileSourceOptions {
        parse: ParseOptions {
            default_namespace: args.default_namespace.clone(),
            domain_suffix: args.domain.clone(),
            ..ParseOptions::default()
        },
        ..FileSourceOptions::default()
    };
    let mut files = Vec::new();
    let mut sources: Vec<Arc<dyn ConfigStoreController>> = Vec::new();
    let mut invalid_objects = Vec::new();
    let mut cluster = None;
    // Every change reaches the DiscoveryServer through these (mesh config from an MCP server too).
    let inputs = discovery::Inputs::new();
    // Mesh config configSources replace --config-dir and the cluster's CRDs (istiod's rule).
    let config_dirs: &[PathBuf] = if config_sources.is_empty() { &args.config_dirs } else { &[] };
    if !config_sources.is_empty() {
        crate::config_sources::warn_ignored(&args.config_dirs, args.kubeconfig.is_some());
        let kube = match &args.kubeconfig {
            Some(path) if config_sources.contains(&config::mesh::ConfigSource::Kubernetes) => {
                Some(kube_config_source(path, args, &selectors).await?)
            }
            _ => None,
        };
        let built = crate::config_sources::build(
            &config_sources,
            &crate::config_sources::Context {
                file_options: &options,
                kubeconfig: args.kubeconfig.as_deref(),
                revision: args.revision.as_deref(),
                domain: &args.domain,
                local_mesh: &mesh_text,
                mcp_node: &env.mcp_node,
                kube,
                inputs: &inputs,
            },
        )?;
        if let Some(source) = &built.cluster {
            invalid_objects.push(crate::webhook::cluster_invalid_objects(source));
        }
        cluster = built.cluster;
        files = built.files;
        sources = built.sources;
    }
    for dir in config_dirs {
        let source = Arc::new(
            FileSource::new(dir.clone(), options.clone())
                .map_err(|e| format!("cannot read config directory \"{}\": {e}", dir.display()))?,
        );
        let status = source.status();
        for bad in &status.bad_files {
            warn!(file = %bad.file.display(), errors = bad.errors.len(), "bad config file: its objects are not loaded");
        }
        sources.push(Arc::new(ReadOnlySource::new(FileSource::clone(&source))));
        files.push(source);
    }
    if let Some(path) = args.kubeconfig.as_ref().filter(|_| config_sources.is_empty()) {
        let source = kube_config_source(path, args, &selectors).await?;
        invalid_objects.push(crate::webhook::cluster_invalid_objects(&source));
        cluster = Some(source.clone());
        sources.push(source);
    }
    if let Some(path) = args.kubeconfig.as_ref().filter(|_| args.registries.iter().any(|r| r == "Kubernetes"))
    {
        sources.push(crate::ingress_source::source(path, &mesh.source, &args.domain, &env).await?);
    }
    let store: Arc<dyn ConfigStoreController> = Arc::new(Aggregate::new(sources, QueueOptions::default()));
    let se = Arc::new(ServiceEntryRegistry::new(
        store.clone(),
        ServiceEntryOptions {
            domain_suffix: args.domain.clone(),
            cluster_id: args.cluster_id.clone(),
            ..ServiceEntryOptions::default()
        },
    ));
    let (trigger, shutdown) = shutdown_channel();
    let services = Arc::new(AggregateRegistry::new());
    if let Some(path) = args.kubeconfig.as_ref().filter(|_| args.registries.iter().any(|r| r == "Kubernetes"))
        && let Some(deployer) =
            crate::ingress_source::gateway_deployer(path, args.revision.as_deref(), &env).await?
    {
        tokio::spawn(deployer.run(shutdown.clone()));
    }
    if let Some(registry) = kube_registry(args, &selectors).await? {
        tokio::spawn(registry.run(shutdown.clone()));
        services.add_registry(Arc::new(registry));
    }
    services.add_registry(se);
    let services: Arc<dyn ServiceController> = services;

    let secrets = FileSecrets::new(FileSecretOptions {
        roots: args.file_secret_roots.clone(),
        ..FileSecretOptions::default()
    })?;
    let push_throttle = debounce.push_throttle;
    let trust_domain = mesh.trust_domain.clone();
    let security_env = &env.security;
    let jwks = env.jwks.clone();
    let options =
        ServerOptions { debounce, api_generator_auth: security_env.api_generator_auth, jwks, inputs };
    let server = DiscoveryServer::new(store, services, mesh, options);
    let ads_env = env.ads;
    // One admission limiter per ADS port (Istio: one per DiscoveryServer, shared by both): admission
    // comes before authentication, so unauthenticated streams on 15010 must not spend 15012's budget
    // (docs/SECURITY.md).
    let limiter = Arc::new(xds::RequestLimiter::new(ads_env.max_requests_per_second));
    let secure_limiter = Arc::new(xds::RequestLimiter::new(ads_env.max_requests_per_second));
    let ads_config =
        ads_env.apply(args.keepalive.apply(AdsConfig { push_throttle, ..AdsConfig::default() }), &limiter);
    let ads = server.ads_server(secrets.clone(), ads_config);

    let secure = match &args.secure_grpc_addr {
        Some(addr) => Some(secure_port(args, security_env, addr, &trust_domain).await?),
        None => None,
    };

    let grpc = listen(grpc_addr).map_err(|e| format!("cannot listen on --grpc-addr {grpc_addr}: {e}"))?;
    let http = listen(http_addr).map_err(|e| format!("cannot listen on --http-addr {http_addr}: {e}"))?;
    let monitoring = listen(monitoring_addr)
        .map_err(|e| format!("cannot listen on --monitoring-addr {monitoring_addr}: {e}"))?;
    info!(grpc = %grpc_addr, http = %http_addr, monitoring = %monitoring_addr, "meshpilot discovery listening");

    let state_files = files.clone();
    let state = DebugState {
        server: server.clone(),
        files,
        startup_warnings: Arc::new(mesh_warnings),
        secrets: secrets.clone(),
        invalid_objects,
        access: Arc::new(
            debug_access(args, security_env, &trust_domain, secure.as_ref().map(|(p, ..)| &p.authenticator))
                .await?,
        ),
        limits: Default::default(),
        control_plane_id: env.control_plane_id.as_str().into(),
    };
    let render: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(move || handle.render());
    let stop = |s: model::Shutdown| async move {
        let mut s = s;
        s.wait().await;
    };
    // istiod's ReadHeaderTimeout (30 s) on both: slowloris clients are closed (docs/RELIABILITY.md).
    let header_timeout = meshpilot_http::serve::HEADER_READ_TIMEOUT;
    // istiod serves the debug handlers on its monitoring port too (Kiali and tools look there),
    // behind the same guard.
    let monitoring_routes = monitoring_router(render).merge(debug_router(state.clone()));
    let http_task = tokio::spawn(meshpilot_http::serve::serve(
        http,
        debug_router(state),
        header_timeout,
        stop(shutdown.clone()),
    ));
    let mon_task = tokio::spawn(meshpilot_http::serve::serve(
        monitoring,
        monitoring_routes,
        header_timeout,
        stop(shutdown.clone()),
    ));
    let registry = ads.registry().clone();
    let grpc_task = tokio::spawn(ads.serve(grpc, stop(shutdown.clone())));
    // The webhook's serving certificate comes from the control plane's CA: the secure port's, else
    // (with a cluster) the same choice of root, so that replicas serve certificates from one root and
    // advertise one caBundle (docs/SECURITY.md, "Replicas").
    let webhook_ca = match (secure.as_ref(), &args.webhook.https_addr, &args.kubeconfig) {
        (Some((port, ..)), _, _) => Some(port.ca.clone()),
        (None, Some(_), Some(path)) => {
            let kube = kube_source::client::connect(Some(path)).await.map_err(|e| e.to_string())?;
            control_plane_ca(args, security_env, &trust_domain, Some(&kube)).await?
        }
        _ => None,
    };
    // istiod's namespace controller: one replica (the leader of its ConfigMap lock) writes
    // istio-ca-root-cert.
    let root_cert_leader = match &secure {
        Some((.., Some(_))) => Some(env.leader.clone()),
        _ => None,
    };
    let mut root_cert_task = None;
    let secure_task = secure.map(|(port, listener, ads_config, kube)| {
        if let (Some(kube), Some(leader)) = (kube, root_cert_leader) {
            root_cert_task = Some(tokio::spawn(kube_source::identity::publish_root_cert_while_leading(
                kube.client,
                port.ca.root_pem().to_string(),
                leader,
                shutdown.clone(),
            )));
        }
        let (server, secrets, shutdown) = (server.clone(), secrets.clone(), shutdown.clone());
        tokio::spawn(async move {
            let config = ads_env.apply(AdsConfig { push_throttle, ..ads_config }, &secure_limiter);
            if let Err(err) = server.serve_secure(secrets, config, port, listener, stop(shutdown)).await {
                error!("{err}");
            }
        })
    });
    // The injection config: istiod's files, else (with a cluster) its ConfigMap, watched.
    let mut injector_task = None;
    let injector = if !env.inject_enabled {
        None
    } else if let Some(files) = crate::webhook::load_injector(
        Path::new(crate::webhook::INJECTION_DIRECTORY),
        &mesh_text,
        args.revision.as_deref(),
        env.native_sidecars,
    )? {
        Some(Arc::new(files))
    } else if let (Some(kubeconfig), Some(_)) = (&args.kubeconfig, &args.webhook.https_addr) {
        crate::webhook::injector_from_cluster(
            kubeconfig,
            &env.pod_namespace,
            args.revision.as_deref(),
            &mesh_text,
            env.native_sidecars,
            shutdown.clone(),
        )
        .await?
        .map(|(injector, task)| {
            injector_task = Some(task);
            injector
        })
    } else {
        None
    };
    // The webhook merges the ProxyConfig resources of the current push context (istiod's webhook).
    if let Some(injector) = &injector {
        injector.set_proxy_configs(crate::proxy_configs::source(server.clone()));
    }
    let webhook_tasks = crate::webhook::start(
        &args.webhook,
        crate::webhook::Context {
            kubeconfig: args.kubeconfig.as_deref(),
            revision: args.revision.as_deref(),
            domain: &args.domain,
            trust_domain: &trust_domain,
            pod_namespace: &env.pod_namespace,
            ca: webhook_ca,
            injector,
            shutdown: shutdown.clone(),
        },
    )
    .await?;
    let server_task = tokio::spawn(server.clone().run(shutdown.clone()));
    tokio::spawn(crate::trim::run(ads_env.memory_trim_after_closes, shutdown.clone()));
    let cluster = cluster.map(|c| c as Arc<dyn model::ConfigStore>);
    // Gateway API with a cluster: the converter's inputs (namespaces, Secrets, Service addresses) and
    // the status writer (docs/GATEWAY-API.md).
    let mut gateway_tasks = Vec::new();
    if let Some(path) = &args.kubeconfig {
        gateway_tasks.push(
            crate::gateway_api::start_inputs(server.clone(), path, &args.domain, shutdown.clone()).await?,
        );
        if let Some(cluster) = &cluster {
            gateway_tasks.extend(
                crate::gateway_api::start_status(
                    server.clone(),
                    cluster.clone(),
                    path,
                    args.revision.as_deref(),
                    &env,
                    shutdown.clone(),
                )
                .await?,
            );
        }
    }
    let status_task = crate::config_status::start(
        server.clone(),
        state_files,
        cluster,
        args.kubeconfig.as_deref(),
        &env,
        shutdown.clone(),
    )
    .await?;
    let files_changed = {
        let inputs = server.inputs().clone();
        move |names| inputs.send(Input::Secrets(SecretsChanged::files(names)))
    };
    let secrets_task = tokio::spawn(secrets.run(registry.clone(), shutdown.clone(), files_changed));
    // Kubernetes Secrets in the config directories, served as credentialName secrets (docs/GATEWAY-API.md).
    let config_dir_secrets = sds::ConfigDirSecrets::new(
        config_dirs.to_vec(),
        server.credentials().clone(),
        Some(std::time::Duration::from_secs(60)),
    );
    if let Some(path) = args.kubeconfig.clone() {
        let (server, shutdown) = (server.clone(), shutdown.clone());
        tokio::spawn(async move {
            if let Err(e) = crate::credentials::run_kube_secrets(path, server, shutdown).await {
                tracing::warn!("credentialName secrets: cannot watch the cluster's Secrets: {e}");
            }
        });
    }
    let secrets_changed = {
        let inputs = server.inputs().clone();
        move |keys| inputs.send(Input::Secrets(SecretsChanged::kubernetes(keys)))
    };
    let credentials_task = tokio::spawn(config_dir_secrets.run(shutdown.clone(), secrets_changed));

    wait_for_signal().await;
    trigger.trigger();
    // Close xDS streams so proxies move to another replica and the gRPC server's graceful shutdown
    // does not wait for them (istiod waits up to --shutdownDuration, then closes them).
    let streams_closed = registry.disconnect_all();
    info!(streams_closed, bound = ?args.shutdown_duration, "shutting down: stopped accepting, closed xDS streams");
    use crate::shutdown::task;
    let mut tasks =
        vec![task(grpc_task), task(http_task), task(mon_task), task(server_task), task(secrets_task)];
    tasks.push(task(credentials_task));
    tasks.extend(secure_task.map(task));
    tasks.extend(root_cert_task.map(task));
    tasks.extend(webhook_tasks.into_iter().chain(injector_task).map(task));
    tasks.extend(status_task.map(task));
    tasks.extend(gateway_tasks.into_iter().map(task));
    crate::shutdown::wait_for_tasks(tasks, streams_closed, args.shutdown_duration).await;
    Ok(())
}

/// The secure port's listener and settings (CA loaded or created, authenticator with the cluster's
/// TokenReview when --kubeconfig is given), and the cluster client for publishing the root.
async fn secure_port(
    args: &Args,
    env: &SecurityOptions,
    addr: &str,
    trust_domain: &str,
) -> Result<(SecurePort, tokio::net::TcpListener, AdsConfig, Option<kube_source::client::Connection>), String>
{
    let addr = parse_addr("--secure-grpc-addr", addr)?;
    let kube = match &args.kubeconfig {
        Some(path) => Some(kube_source::client::connect(Some(path)).await.map_err(|e| e.to_string())?),
        None => None,
    };
    let ca = control_plane_ca(args, env, trust_domain, kube.as_ref()).await?.ok_or_else(|| {
        format!(
            "--secure-grpc-addr needs a place for the CA: --ca-dir DIR (where the self-signed root is kept), \
             --kubeconfig (kept in the secret istio-ca-secret, as istiod), or a plugged-in CA in \
             --root-ca-dir/ROOT_CA_DIR ({} has no {})",
            args.root_ca_dir.display(),
            security::ca::CA_KEY
        )
    })?;
    let reviewer = kube.as_ref().map(|c| {
        Arc::new(kube_source::identity::KubeTokenReviewer::new(c.client.clone())) as Arc<dyn TokenReviewer>
    });
    let authenticator = Arc::new(Authenticator::new(trust_domain, env.token_audiences.clone(), reviewer));
    let listener = listen(addr).map_err(|e| format!("cannot listen on --secure-grpc-addr {addr}: {e}"))?;
    let dns_names = discovery::secure::istiod_dns_names(&env.pod_namespace, args.revision.as_deref());
    let ads_config =
        args.keepalive.apply(AdsConfig { identity_check: env.identity_check, ..AdsConfig::default() });
    let port = SecurePort { ca, authenticator, dns_names, xds_auth: env.xds_auth };
    info!(secure = %addr, xds_auth = env.xds_auth, "secure xDS and CA port");
    Ok((port, listener, ads_config, kube))
}

/// The control plane's CA in Istio's order: plugged-in CA files (`--root-ca-dir`/`ROOT_CA_DIR` holding
/// `ca-key.pem`); else the self-signed root kept in `--ca-dir` when given; else, with a cluster, the
/// one kept in the secret `istio-ca-secret` of `POD_NAMESPACE` (created if absent, re-read on a create
/// conflict: one root for every replica, and for an istiod beside them). `Ok(None)` when there is no
/// place for a root. Used by the secure port and the validating webhook alike.
///
/// # Errors
/// A message naming the CA's files or secret when they cannot be read, created or used.
async fn control_plane_ca(
    args: &Args,
    env: &SecurityOptions,
    trust_domain: &str,
    kube: Option<&kube_source::client::Connection>,
) -> Result<Option<Arc<IstioCa>>, String> {
    let plugged = args.root_ca_dir.join(security::ca::CA_KEY).exists().then_some(args.root_ca_dir.as_path());
    let options = CaOptions {
        trust_domain: trust_domain.to_string(),
        default_cert_ttl: env.default_cert_ttl,
        max_cert_ttl: env.max_cert_ttl,
        ..CaOptions::default()
    };
    let ca = match (plugged, &args.ca_dir, kube) {
        (Some(_), _, _) | (None, Some(_), _) => {
            let dir = args.ca_dir.clone().unwrap_or_else(|| args.root_ca_dir.clone());
            IstioCa::load_or_create(plugged, &dir, options).map_err(|e| format!("CA: {e}"))?
        }
        (None, None, Some(kube)) => {
            kube_source::identity::self_signed_ca_from_secret(&kube.client, &env.pod_namespace, options)
                .await
                .map_err(|e| format!("CA: {e}"))?
        }
        (None, None, None) => return Ok(None),
    };
    info!(source = ?ca.source(), trust_domain = %trust_domain, "certificate authority ready");
    Ok(Some(Arc::new(ca)))
}

/// Who may call the debug endpoints (`meshpilot_http::access`): loopback, or callers authenticated as
/// on the secure port (its authenticator when it runs; else one reviewing tokens with the cluster of
/// `--kubeconfig`; else loopback only).
async fn debug_access(
    args: &Args,
    env: &SecurityOptions,
    trust_domain: &str,
    secure: Option<&Arc<Authenticator>>,
) -> Result<meshpilot_http::access::DebugAccess, String> {
    let authenticator = match (secure, &args.kubeconfig) {
        (Some(a), _) => Some(a.clone()),
        (None, Some(path)) => {
            let kube = kube_source::client::connect(Some(path)).await.map_err(|e| e.to_string())?;
            let reviewer: Arc<dyn TokenReviewer> =
                Arc::new(kube_source::identity::KubeTokenReviewer::new(kube.client.clone()));
            Some(Arc::new(Authenticator::new(trust_domain, env.token_audiences.clone(), Some(reviewer))))
        }
        (None, None) => None,
    };
    Ok(meshpilot_http::access::DebugAccess {
        authenticator,
        system_namespace: env.pod_namespace.clone(),
        namespace_scoped: env.debug_endpoint_auth,
    })
}

/// The Kubernetes CRD config source for `--kubeconfig`.
async fn kube_config_source(
    path: &std::path::Path,
    args: &Args,
    selectors: &model::selector::DiscoverySelectors,
) -> Result<Arc<kube_source::KubeSource>, String> {
    let config = kube_source::client_config(Some(path)).await.map_err(|e| e.to_string())?;
    let options = kube_source::KubeSourceOptions {
        parse: ParseOptions { domain_suffix: args.domain.clone(), ..ParseOptions::default() },
        revision: args.revision.clone(),
        discovery_selectors: selectors.clone(),
        ..kube_source::KubeSourceOptions::default()
    };
    let source = kube_source::KubeSource::new(config, options);
    info!(source = %model::ConfigStore::name(&source), "watching Istio config in Kubernetes");
    Ok(Arc::new(source))
}

/// The Kubernetes service registry, when a kubeconfig is given and `--registries` names `Kubernetes`.
async fn kube_registry(
    args: &Args,
    selectors: &model::selector::DiscoverySelectors,
) -> Result<Option<kube_source::KubeRegistry>, String> {
    for r in &args.registries {
        if !r.is_empty() && r != "Kubernetes" {
            return Err(format!("unknown --registries entry {r:?}: meshpilot knows Kubernetes"));
        }
    }
    let Some(path) = args.kubeconfig.as_deref().filter(|_| args.registries.iter().any(|r| r == "Kubernetes"))
    else {
        return Ok(None);
    };
    let config = kube_source::client_config(Some(path)).await.map_err(|e| e.to_string())?;
    let options = kube_source::KubeRegistryOptions {
        cluster_id: args.cluster_id.clone(),
        domain_suffix: args.domain.clone(),
        discovery_selectors: selectors.clone(),
        ..kube_source::KubeRegistryOptions::default()
    };
    info!(cluster = %args.cluster_id, "reading Kubernetes services");
    Ok(Some(kube_source::KubeRegistry::new(config, options)))
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Listens on `addr` with the kernel's largest accept queue (`net.core.somaxconn`, which Go's `net`
/// package and so Istio use) instead of tokio's fixed 1,024: when thousands of proxies connect at
/// once (a control-plane restart), connections wait in the queue instead of having their SYNs
/// dropped and retried a second later.
fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket =
        if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    // As `TcpListener::bind` does on Unix: a restarted server can listen while old connections
    // linger in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    let backlog = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(1024);
    socket.listen(backlog)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser as _;

    use super::*;

    /// `meshpilot discovery ARGV…` parsed as the binary parses it.
    fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
        let cli = crate::Cli::try_parse_from(["meshpilot", "discovery"].iter().chain(argv))?;
        match cli.command {
            crate::Command::Discovery(args) => Ok(*args),
            other => panic!("not discovery: {other:?}"),
        }
    }

    /// The container args of Istio's istiod chart with its default values, rendered by hand from
    /// istio.io/istio@v0.0.0-20260827124520-eed52ebb66ad
    /// `manifests/charts/istio-control/istio-discovery/templates/deployment.yaml` (`args:`) and that
    /// chart's `values.yaml`: `global.logging.level: "default:info"`, `global.logAsJson: false` (no
    /// `--log_as_json`), `global.proxy.clusterDomain: "cluster.local"`, `taint.namespace: ""` (no
    /// `--cniNamespace`), `keepaliveMaxServerConnectionAge: 30m`, `extraContainerArgs: []`.
    const ISTIOD_CHART_ARGS: &[&str] = &[
        "--monitoringAddr=:15014",
        "--log_output_level=default:info",
        "--domain",
        "cluster.local",
        "--keepaliveMaxServerConnectionAge",
        "30m",
    ];

    #[test]
    fn the_istiod_charts_args_parse() {
        let args = parse(ISTIOD_CHART_ARGS).unwrap();
        assert_eq!(args.monitoring_addr, ":15014");
        assert_eq!(args.domain, "cluster.local");
        assert_eq!(args.keepalive.max_connection_age(), Some(Duration::from_secs(1800)));
        assert_eq!(args.log.filter(), "info");
        assert!(!args.log.json());
        assert!(args.flags_not_used().is_empty(), "{:?}", args.flags_not_used());

        // The chart's other branches: global.logAsJson: true, taint.namespace: kube-system, and
        // extraContainerArgs.
        let mut argv = ISTIOD_CHART_ARGS.to_vec();
        argv.extend(["--log_as_json", "--cniNamespace=kube-system", "--configDir", "/etc/config"]);
        let args = parse(&argv).unwrap();
        assert!(args.log.json());
        assert_eq!(args.config_dirs, [PathBuf::from("/etc/config")]);
        assert_eq!(args.flags_not_used(), ["--cniNamespace"]);
    }

    #[test]
    fn the_kebab_case_spellings_still_parse_to_the_same_options() {
        let istiod = parse(&[
            "--configDir=/etc/config",
            "--meshConfig",
            "/etc/mesh.yaml",
            "--grpcAddr=:15010",
            "--httpAddr",
            ":8081",
            "--monitoringAddr=:15015",
            "--secureGRPCAddr",
            ":15012",
            "--httpsAddr=:15017",
        ])
        .unwrap();
        let kebab = parse(&[
            "--config-dir",
            "/etc/config",
            "--mesh-config=/etc/mesh.yaml",
            "--grpc-addr",
            ":15010",
            "--http-addr=:8081",
            "--monitoring-addr",
            ":15015",
            "--secure-grpc-addr=:15012",
            "--https-addr",
            ":15017",
        ])
        .unwrap();
        assert_eq!(format!("{istiod:?}"), format!("{kebab:?}"));
        assert_eq!(kebab.http_addr, ":8081");
        assert_eq!(kebab.mesh_config, Some(PathBuf::from("/etc/mesh.yaml")));
    }

    #[test]
    fn every_istiod_flag_is_accepted() {
        // Every flag of `pilot-discovery discovery` (see crate::discovery_flags for where istiod
        // defines them), with a value of its type; Go booleans without a value.
        let args = parse(&[
            "--registries=Kubernetes",
            "--clusterRegistriesNamespace=istio-system",
            "--kubeconfig=/kubeconfig",
            "--meshConfig=./etc/istio/config/mesh",
            "--networksConfig=./etc/istio/config/meshNetworks",
            "-n",
            "istio-system",
            "--cniNamespace=kube-system",
            "--shutdownDuration=10s",
            "--configDir=/etc/config",
            "--domain=cluster.local",
            "--clusterID=Kubernetes",
            "--clusterAliases=alias1=cluster1,alias2=cluster2",
            "--httpAddr=:8080",
            "--httpsAddr=:15017",
            "--grpcAddr=:15010",
            "--secureGRPCAddr=:15012",
            "--monitoringAddr=:15014",
            "--profile=false",
            "--caCertFile=/ca.pem",
            "--tlsCertFile=/cert.pem",
            "--tlsKeyFile=/key.pem",
            "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "--tls-min-version=1.2",
            "--kubernetesApiQPS=80",
            "--kubernetesApiBurst=160",
            "--log_target=stdout",
            "--log_as_json",
            "--log_output_level=default:debug,ads:warn",
            "--log_stacktrace_level=default:none",
            "--log_caller=default",
            "--ctrlz_port=9876",
            "--ctrlz_address=localhost",
            "--keepaliveInterval=30s",
            "--keepaliveTimeout=10s",
            "--keepaliveMaxServerConnectionAge=30m",
            "--vklog=9",
        ])
        .unwrap();
        assert_eq!(args.log.filter(), "debug,ads=warn");
        assert_eq!(args.shutdown_duration, Duration::from_secs(10));
        let not_used = args.flags_not_used();
        for flag in ["--namespace", "--profile", "--ctrlz_port", "--vklog"] {
            assert!(not_used.iter().any(|f| f == flag), "{flag}: {not_used:?}");
        }
        // Every flag under the not-used heading of --help is named when given.
        let command = <crate::Cli as clap::CommandFactory>::command();
        let discovery = command.find_subcommand("discovery").unwrap();
        let listed = discovery
            .get_arguments()
            .filter(|arg| arg.get_help_heading() == Some(crate::discovery_flags::NOT_USED_HEADING))
            .map(|arg| format!("--{}", arg.get_long().unwrap()));
        let expected: Vec<String> = listed.collect();
        assert_eq!(not_used, expected);
        assert_eq!(not_used.len(), 19);
    }

    #[test]
    fn keepalive_flags_reach_the_ads_ports() {
        let args = parse(&["--keepaliveInterval", "1m", "--keepaliveTimeout=5s"]).unwrap();
        let config = args.keepalive.apply(AdsConfig::default());
        assert_eq!(
            (config.keepalive_interval, config.keepalive_timeout),
            (Duration::from_secs(60), Duration::from_secs(5))
        );
    }

    #[test]
    fn an_unknown_flag_is_an_error_naming_it() {
        for (argv, flag) in [
            (&["--monitoringAddr=:15014", "--noSuchFlag=1"][..], "--noSuchFlag"),
            (&["--monitoringaddr", ":15014"][..], "--monitoringaddr"),
            // Older istiods had --resync; the istiod followed does not, and ignores it as unknown.
            (&["--resync=60s"][..], "--resync"),
        ] {
            let err = parse(argv).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument, "{argv:?}");
            assert!(err.to_string().contains(flag), "{argv:?}: {err}");
        }
    }

    #[test]
    fn bad_values_are_refused_as_istiod_refuses_them() {
        for argv in [
            &["--log_output_level=default:loud"][..],
            &["--keepaliveMaxServerConnectionAge", "30"][..],
            &["--ctrlz_port=99999"][..],
            &["--profile=yes"][..],
            // A Go boolean flag takes its value after `=` only: `false` here is an argument.
            &["--log_as_json", "false"][..],
        ] {
            assert!(parse(argv).is_err(), "{argv:?}");
        }
    }
}
