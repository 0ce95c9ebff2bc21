//! `meshpilot discovery`: the control plane. Reads `--configDir` directories (watched) and/or the
//! Istio custom resources of the control plane's cluster (watched; `--kubeconfig`, else `KUBECONFIG`,
//! else the in-cluster service account: [`kube_source::resolve_access`]), builds the
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

use config::parse::ParseOptions;
use config::{Aggregate, FileSource, FileSourceOptions, QueueOptions, ReadOnlySource};
use discovery::{DiscoveryServer, Input, SecretsChanged, SecurityOptions, ServerOptions, secure::SecurePort};
use meshpilot_http::{DebugState, debug_router, monitoring_router};
use model::{ConfigStoreController, service::ServiceController, shutdown_channel};
use registry::{
    AggregateRegistry, AutoAllocate, InMemoryAllocator, ServiceEntryOptions, ServiceEntryRegistry,
};
use sds::{FileSecretOptions, FileSecrets};
use security::{Authenticator, CaOptions, IstioCa, authn::TokenReviewer};
use tracing::{error, info, warn};
use xds::AdsConfig;

use crate::discovery_flags::{KeepaliveArgs, LogArgs, NotUsedArgs};
use crate::env::{DiscoveryEnv, Environment};
use crate::mesh_source::{self, Origin};

/// Arguments of `meshpilot discovery`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Run the control plane: serve Istio config from --configDir to Envoy and gRPC clients over xDS",
    long_about = "Run the control plane (Istio's pilot-discovery). Config is read from --configDir \
directories (watched; a bad file keeps its last good objects and is listed under /debug/configstatusz) \
and/or from the Istio custom resources of the cluster (watched; an invalid object is skipped \
with a warning). The cluster is --kubeconfig, else the file KUBECONFIG names if it exists, else the pod's \
service account (KUBERNETES_SERVICE_HOST/PORT and /var/run/secrets/kubernetes.io/serviceaccount), else none; \
~/.kube/config is never read. ServiceEntries and WorkloadEntries are a service registry; with a cluster, so are the \
cluster's Services and EndpointSlices (--registries Kubernetes, the default). With mesh config configSources \
(xds://HOST:PORT, fs:///PATH, k8s://; as istiod), config is read from those sources, in order, instead: \
xds:// reads an MCP-over-xDS server such as istiod or another meshpilot (docs/MCP.md).\n\n\
Certificate files named by DestinationRule and Gateway `tls` settings are sent to proxies as SDS secrets \
(`file-cert:CERT~KEY`, `file-root:CA`), read by meshpilot itself and re-sent when they change, but only \
from directories given with --file-secret-root (none by default: any proxy may ask for any file name).\n\n\
Ports: --grpcAddr ADS (SotW + Delta, plaintext, Istio's 15010); --secureGRPCAddr ADS and the CA \
over TLS (Istio's 15012) and --httpsAddr the admission webhooks (Istio's 15017), both on by default as \
istiod's when the CA has a place for its root (cluster access, --ca-dir, a plugged-in CA), else off; an \
empty value (--secureGRPCAddr=) turns one off; --httpAddr /ready and /debug/* \
(configz, syncz, adsz, registryz, endpointz, config_dump?proxyID=, configstatusz, proxystatusz); --monitoringAddr \
/metrics (Prometheus, Istio metric names).\n\n\
Flags are spelled as istiod's (--grpcAddr, --meshConfig, --log_output_level, …); the kebab-case spellings \
(--grpc-addr, --mesh-config, …) still work. istiod's flags that meshpilot does not act on are accepted, \
listed under their own heading below, and named in a warning at start when given; an unknown flag is \
an error naming it (istiod ignores unknown flags).\n\n\
Environment: PILOT_DEBOUNCE_AFTER (100ms), PILOT_DEBOUNCE_MAX (10s), PILOT_ENABLE_EDS_DEBOUNCE (true); \
for the secure port XDS_AUTH (true), PILOT_ENABLE_XDS_IDENTITY_CHECK (true), TOKEN_AUDIENCES (istio-ca), \
DEFAULT_WORKLOAD_CERT_TTL (24h), MAX_WORKLOAD_CERT_TTL (2160h), POD_NAMESPACE (istio-system), ROOT_CA_DIR; \
with a cluster, PILOT_ENABLE_ANALYSIS (false: analysis messages in objects' status) and PILOT_ENABLE_STATUS \
(false: a Reconciled condition), written by the leader of a Lease (POD_NAME, POD_NAMESPACE; docs/CONFIG-FEEDBACK.md), and \
PILOT_ENABLE_GATEWAY_API_STATUS (true: the status of Gateway API objects, written by the leader of \
istio-gateway-status-leader-<revision>; docs/GATEWAY-API.md); \
RUST_LOG sets the log level, replacing --log_output_level (default info).\n\n\
Stops cleanly on SIGTERM or SIGINT."
)]
pub struct Args {
    /// A directory of Istio config (YAML/JSON, read recursively, watched); repeatable. The first wins
    /// for an object defined in several. Unlike istiod's --configDir (one directory, instead of the
    /// cluster's custom resources), combined with the cluster's. Give it, cluster access, or mesh config
    /// configSources.
    #[arg(long = "configDir", visible_alias = "config-dir", value_name = "DIR")]
    config_dirs: Vec<PathBuf>,

    /// Watch the Istio custom resources of the cluster in this kubeconfig (combined with --configDir:
    /// an object in both is taken from the directory; writes go to the cluster). istiod's
    /// --kubeconfig. Without it, as client-go: the file KUBECONFIG names when it exists, else the
    /// in-cluster service account, else no cluster (unlike kubectl, ~/.kube/config is not read).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<PathBuf>,

    /// Service registries to read besides ServiceEntries (Istio's --registries, comma-separated):
    /// `Kubernetes` reads Services, EndpointSlices, Pods and Nodes of the cluster.
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
    /// defaultServiceExportTo, connectTimeout, …; istiod's --meshConfig, default
    /// ./etc/istio/config/mesh). Unknown fields are warnings. As istiod: read and watched when the
    /// file exists; else, with cluster access, the key `mesh` of the ConfigMap istio (istio-REVISION)
    /// in POD_NAMESPACE, watched; else Istio's defaults. A change is pushed to proxies; a broken one
    /// keeps the last good one (log, meshpilot_mesh_config_errors, /debug/configstatusz).
    #[arg(long = "meshConfig", visible_alias = "mesh-config", value_name = "FILE")]
    mesh_config: Option<PathBuf>,

    /// Mesh networks YAML (istiod's --networksConfig, default ./etc/istio/config/meshNetworks): found
    /// and watched as the mesh config (ConfigMap key `meshNetworks`), checked as istiod checks it and
    /// shown in /debug/configstatusz; sets endpoints' networks and the east-west gateways of
    /// split-horizon EDS (docs/MULTICLUSTER.md).
    #[arg(long = "networksConfig", value_name = "FILE")]
    networks_config: Option<PathBuf>,

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
    /// certificate or Kubernetes service-account token. Default :15012 (istiod's) when the CA has a
    /// place to keep its root (cluster access, --ca-dir, or a plugged-in CA in --root-ca-dir), else
    /// off; `--secureGRPCAddr=""` turns it off.
    #[arg(long = "secureGRPCAddr", visible_alias = "secure-grpc-addr", value_name = "ADDR")]
    secure_grpc_addr: Option<String>,

    /// Where the self-signed root CA is kept (created at first start: ca-cert.pem, ca-key.pem,
    /// root-cert.pem, as Istio's istio-ca-secret). Without it, with cluster access, the root is kept in
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
    let access = cluster_access(args.kubeconfig.as_deref(), &env.cluster_access).await?;

    // The mesh config and mesh networks where istiod finds them: the file, else the cluster's
    // ConfigMap, else Istio's defaults (crate::mesh_source); watched below.
    let kube_client = access
        .as_ref()
        .map(kube_source::Cluster::connect)
        .transpose()
        .map_err(|e| e.to_string())?
        .map(|c| c.client);
    let mesh_sources = Arc::new(std::sync::RwLock::new(serde_json::Value::Null));
    let mesh_origin = source_origin(args, &env, access.is_some(), mesh_source::MESH_KEY);
    let mesh_start = initial_mesh(&mesh_origin, kube_client.as_ref(), &args.domain).await?;
    let mesh_text = mesh_start.text.clone();
    let mesh_source::CheckedMesh { settings: mesh, warnings: mesh_warnings, selectors, config_sources } =
        mesh_start.checked;
    // Every change reaches the DiscoveryServer through these (mesh config from an MCP server too; the
    // mesh networks from their keeper, so they are made first).
    let inputs = discovery::Inputs::new();
    let networks_origin = source_origin(args, &env, access.is_some(), mesh_source::NETWORKS_KEY);
    let networks = mesh_source::MeshKeeper::new(
        "mesh networks",
        networks_origin.clone(),
        mesh_source::networks_apply(inputs.clone()),
        mesh_sources.clone(),
        "meshNetworks",
    );
    match mesh_source::read(&networks_origin, kube_client.as_ref()).await {
        Ok(text) => {
            networks.offer(text);
        }
        Err(reason) => warn!(source = %networks_origin, %reason, "mesh networks not read; none in force"),
    }
    if config_sources.is_empty() && args.config_dirs.is_empty() && access.is_none() {
        return Err("no config to read: give --configDir, cluster access (--kubeconfig, KUBECONFIG or an \
                    in-cluster service account), or configSources in --meshConfig"
            .into());
    }
    let (mesh_text_tx, mesh_text_rx) = tokio::sync::watch::channel(mesh_text.clone());
    let received_mesh = crate::config_sources::ReceivedMesh::default();
    for w in &mesh_warnings {
        warn!("mesh config: {w}");
    }

    // Metrics first, so every later registration lands in the exporter.
    let mut builder = metrics_exporter_prometheus::PrometheusBuilder::new();
    for (name, buckets) in xds::metrics::HISTOGRAM_BUCKETS
        .iter()
        .chain(discovery::metrics::HISTOGRAM_BUCKETS)
        .chain(::webhook::metrics::HISTOGRAM_BUCKETS)
    {
        builder = builder
            .set_buckets_for_metric(metrics_exporter_prometheus::Matcher::Full((*name).to_string()), buckets)
            .map_err(|e| format!("metrics buckets: {e}"))?;
    }
    let handle =
        builder.install_recorder().map_err(|e| format!("cannot install the metrics recorder: {e}"))?;
    discovery::metrics::describe();
    ::webhook::metrics::describe();
    metrics::describe_counter!(kube_source::registry::REG_EVENTS, "Events from k8s registry.");
    record_build_info();

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
    let gateway_failures = kube_source::gateway_deployment::DeploymentFailures::default();
    invalid_objects.push(crate::ingress_source::gateway_invalid_objects(gateway_failures.clone()));
    let mut cluster = None;
    // Mesh config configSources replace --config-dir and the cluster's CRDs (istiod's rule).
    let config_dirs: &[PathBuf] = if config_sources.is_empty() { &args.config_dirs } else { &[] };
    if !config_sources.is_empty() {
        crate::config_sources::warn_ignored(&args.config_dirs, access.is_some());
        let kube = match &access {
            Some(access) if config_sources.contains(&config::mesh::ConfigSource::Kubernetes) => {
                Some(kube_config_source(access, args, &selectors))
            }
            _ => None,
        };
        let built = crate::config_sources::build(
            &config_sources,
            &crate::config_sources::Context {
                file_options: &options,
                revision: args.revision.as_deref(),
                domain: &args.domain,
                local_mesh: mesh_text_rx.clone(),
                received_mesh: received_mesh.clone(),
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
    if let Some(kube) = access.as_ref().filter(|_| config_sources.is_empty()) {
        let source = kube_config_source(kube, args, &selectors);
        invalid_objects.push(crate::webhook::cluster_invalid_objects(&source));
        cluster = Some(source.clone());
        sources.push(source);
    }
    if let Some(kube) = access.as_ref().filter(|_| args.registries.iter().any(|r| r == "Kubernetes")) {
        sources.push(crate::ingress_source::source(kube, &mesh.source, &args.domain, &env).await?);
    }
    let store: Arc<dyn ConfigStoreController> = Arc::new(Aggregate::new(sources, QueueOptions::default()));
    let se = Arc::new(ServiceEntryRegistry::new(
        store.clone(),
        ServiceEntryOptions {
            domain_suffix: args.domain.clone(),
            cluster_id: args.cluster_id.clone(),
            // docs/DNS.md: in a cluster the leader of `istio-ip-autoallocate` writes status.addresses;
            // files only, the addresses are allocated in memory (istiod allocates none there).
            auto_allocate: match (env.ip_autoallocate, access.is_some()) {
                (false, _) => AutoAllocate::Off,
                (true, true) => AutoAllocate::FromStatus,
                (true, false) => AutoAllocate::InMemory(InMemoryAllocator::default()),
            },
            ..ServiceEntryOptions::default()
        },
    ));
    let (trigger, shutdown) = shutdown_channel();
    let services = Arc::new(AggregateRegistry::new());
    let mut remote = None;
    if let Some(registry) = kube_registry(args, access.as_ref(), &selectors)? {
        tokio::spawn(registry.run(shutdown.clone()));
        services.add_registry(Arc::new(registry));
        if let Some(access) = access.as_ref() {
            let clusters = remote_clusters(args, &env, &selectors);
            let client = access.connect().map_err(|e| format!("cannot connect to the cluster: {e}"))?.client;
            tokio::spawn(clusters.run(client, shutdown.clone()));
            services.add_registry(Arc::new(clusters.clone()));
            remote = Some(clusters);
        }
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
    let options = ServerOptions {
        debounce,
        api_generator_auth: security_env.api_generator_auth,
        jwks,
        inputs,
        ip_autoallocate: env.ip_autoallocate,
        trace_sampling: env.trace_sampling,
        tls_on_sidecar_ingress: env.tls_on_sidecar_ingress,
    };
    let mesh_at_start = mesh.source.clone();
    let server = DiscoveryServer::new(store, services, mesh, options);
    // Mesh config changes from now on: checked, pushed, given to the injector (crate::mesh_source).
    let mesh_keeper = mesh_source::MeshKeeper::new(
        "mesh config",
        mesh_origin.clone(),
        mesh_source::mesh_apply(mesh_source::MeshApply {
            domain: args.domain.clone(),
            start: mesh_at_start.clone(),
            trust_domain: trust_domain.clone(),
            inputs: server.inputs().clone(),
            text: mesh_text_tx,
            received: received_mesh,
        }),
        mesh_sources.clone(),
        "meshConfig",
    );
    mesh_keeper.started(mesh_start.seen, mesh_at_start, mesh_start.error);
    let ads_env = env.ads;
    // One admission limiter per ADS port (Istio: one per DiscoveryServer, shared by both): admission
    // comes before authentication, so unauthenticated streams on 15010 must not spend 15012's budget
    // (docs/SECURITY.md).
    let limiter = Arc::new(xds::RequestLimiter::new(ads_env.max_requests_per_second));
    let secure_limiter = Arc::new(xds::RequestLimiter::new(ads_env.max_requests_per_second));
    let ads_config =
        ads_env.apply(args.keepalive.apply(AdsConfig { push_throttle, ..AdsConfig::default() }), &limiter);
    let ads = server.ads_server(secrets.clone(), ads_config);

    let plugged_ca = args.root_ca_dir.join(security::ca::CA_KEY).exists();
    let ca_place = access.is_some() || args.ca_dir.is_some() || plugged_ca;
    let (secure_addr, https_addr) =
        secure_addrs(args.secure_grpc_addr.as_deref(), args.webhook.https_addr.as_deref(), ca_place);
    let secure = match &secure_addr {
        Some(addr) => Some(
            secure_port(args, access.as_ref(), remote.as_ref(), security_env, addr, &trust_domain).await?,
        ),
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
        mesh_sources: mesh_sources.clone(),
        secrets: secrets.clone(),
        invalid_objects,
        access: Arc::new(debug_access(
            args,
            access.as_ref(),
            remote.as_ref(),
            security_env,
            &trust_domain,
            secure.as_ref().map(|(p, ..)| &p.authenticator),
        )?),
        limits: Default::default(),
        control_plane_id: env.control_plane_id.as_str().into(),
        inject_templates: Default::default(),
    };
    // istiod's debug types over xDS (`istio.io/debug/…`: istioctl proxy-status, x version, x
    // internal-debug), answered from the debug handlers' data with their authorisation.
    meshpilot_http::debug_xds::install(&state);
    let inject_templates = state.inject_templates.clone();
    // The exporter's metrics, then the process metrics read from /proc at each scrape.
    let render: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(move || {
        let mut text = handle.render();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text + &crate::process_metrics::render()
    });
    let stop = |s: model::Shutdown| async move {
        let mut s = s;
        s.wait().await;
    };
    // istiod's ReadHeaderTimeout (30 s) on both: slowloris clients are closed (docs/RELIABILITY.md).
    let header_timeout = meshpilot_http::serve::HEADER_READ_TIMEOUT;
    // istiod serves the debug handlers on its monitoring port too (Kiali and tools look there),
    // behind the same guard.
    let monitoring_routes = monitoring_router(render).merge(debug_router(state.clone()));
    // Envoy's REST-JSON xDS on the HTTP port only, outside the debug guard (docs/REST-XDS.md).
    let rest = Arc::new(server.rest_xds(secrets.clone()));
    let http_task = tokio::spawn(meshpilot_http::serve::serve(
        http,
        debug_router(state).merge(meshpilot_http::rest::rest_router(rest)),
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
    let webhook_ca = match (secure.as_ref(), &https_addr, &access) {
        (Some((port, ..)), _, _) => Some(port.ca.clone()),
        (None, Some(_), Some(access)) => {
            let kube = access.connect().map_err(|e| e.to_string())?;
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
            let root_pem = port.ca.root_pem().to_string();
            // Each remote cluster gets the root too, with a leader of its own (docs/MULTICLUSTER.md).
            if let Some(remote) = &remote {
                let (root_pem, leader) = (root_pem.clone(), leader.clone());
                remote.add_component(Arc::new(move |_cluster: &str, client, shutdown| {
                    Box::pin(kube_source::identity::publish_root_cert_while_leading(
                        client,
                        root_pem.clone(),
                        leader.clone(),
                        shutdown,
                    ))
                }));
            }
            root_cert_task = Some(tokio::spawn(kube_source::identity::publish_root_cert_while_leading(
                kube.client,
                root_pem,
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
    // The injection config: istiod's files, else (with a cluster) its ConfigMap, watched; read for
    // the webhook and for the automated Gateway deployment (its kube-gateway template), as istiod.
    let deploys_gateways =
        env.gateway_deployment_controller && args.registries.iter().any(|r| r == "Kubernetes");
    let setup = || crate::webhook::InjectorSetup {
        revision: args.revision.as_deref(),
        native_sidecars: env.native_sidecars,
        status: mesh_sources.clone(),
        shutdown: shutdown.clone(),
    };
    let found = if !env.inject_enabled {
        None
    } else if let Some(found) = crate::webhook::injector_from_files(
        Path::new(crate::webhook::INJECTION_DIRECTORY),
        &mesh_text,
        setup(),
    )? {
        Some(found)
    } else if let Some(kube) = access.as_ref().filter(|_| https_addr.is_some() || deploys_gateways) {
        let mesh_now = mesh_text_rx.borrow().clone();
        crate::webhook::injector_from_cluster(kube, &env.pod_namespace, &mesh_now, setup()).await?
    } else {
        None
    };
    let (injector, injector_task) = found.unzip();
    // The webhook merges the ProxyConfig resources of the current push context (istiod's webhook),
    // and with a cluster decides ENABLE_NATIVE_SIDECARS=auto from its Nodes.
    let mut nodes_task = None;
    if let Some(injector) = &injector {
        // istiod's `/debug/inject`: the raw templates of the injection config in force.
        let reader = injector.clone();
        inject_templates.set(move || reader.state().config.raw_templates.clone());
        injector.set_proxy_configs(crate::proxy_configs::source(server.clone()));
        if let Some(kube) = &access {
            nodes_task = crate::webhook::follow_nodes(injector, kube, &args.cluster_id, shutdown.clone())?;
        }
    }
    // Gateway API Gateways get the objects of the injection config's kube-gateway template.
    if let Some(kube) = access.as_ref().filter(|_| deploys_gateways)
        && let Some(deployer) = crate::ingress_source::gateway_deployer(
            kube,
            args.revision.as_deref(),
            &env,
            crate::ingress_source::GatewayRendering {
                cluster_id: args.cluster_id.clone(),
                injector: injector.clone(),
                proxy_configs: crate::proxy_configs::source(server.clone()),
                failures: gateway_failures,
            },
        )
        .await?
    {
        tokio::spawn(deployer.run(shutdown.clone()));
    }
    // The injected sidecars follow the mesh config in force (its defaultConfig, …).
    let injector_mesh_task = injector.clone().map(|injector| {
        tokio::spawn(crate::webhook::follow_mesh(injector, mesh_text_rx.clone(), shutdown.clone()))
    });
    let mesh_tasks = [
        mesh_keeper.watch(kube_client.clone(), shutdown.clone()),
        networks.watch(kube_client.clone(), shutdown.clone()),
        injector_mesh_task,
    ];
    let webhook_tasks = crate::webhook::start(
        &args.webhook,
        https_addr.as_deref(),
        crate::webhook::Context {
            cluster: access.as_ref(),
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
    // ServiceEntry VIP auto-allocation with a cluster: status.addresses written by the leader of
    // `istio-ip-autoallocate` (docs/DNS.md).
    let mut allocate_task = None;
    if let (Some(kube), Some(source), true) = (&access, &cluster, env.ip_autoallocate) {
        let client = kube.connect().map_err(|e| e.to_string())?.client;
        let source: Arc<dyn ConfigStoreController> = source.clone();
        let allocator = kube_source::ip_autoallocate::IpAutoallocator::new(client, source);
        allocate_task = Some(allocator.start(env.leader.clone(), shutdown.clone()));
    }
    let cluster = cluster.map(|c| c as Arc<dyn model::ConfigStore>);
    // Gateway API with a cluster: the converter's inputs (namespaces, Secrets, Service addresses) and
    // the status writer (docs/GATEWAY-API.md).
    let mut gateway_tasks = Vec::new();
    if let Some(kube) = &access {
        gateway_tasks.push(
            crate::gateway_api::start_inputs(server.clone(), kube, &args.domain, shutdown.clone()).await?,
        );
        if let Some(cluster) = &cluster {
            gateway_tasks.extend(
                crate::gateway_api::start_status(
                    server.clone(),
                    cluster.clone(),
                    kube,
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
        access.as_ref(),
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
    if let Some(kube) = access.clone() {
        let (server, shutdown) = (server.clone(), shutdown.clone());
        tokio::spawn(async move {
            if let Err(e) = crate::credentials::run_kube_secrets(kube, server, shutdown).await {
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
    tasks.extend(webhook_tasks.into_iter().chain(injector_task).chain(nodes_task).map(task));
    tasks.extend(mesh_tasks.into_iter().flatten().map(task));
    tasks.extend(status_task.map(task));
    tasks.extend(gateway_tasks.into_iter().map(task));
    tasks.extend(allocate_task.into_iter().map(task));
    crate::shutdown::wait_for_tasks(tasks, streams_closed, args.shutdown_duration).await;
    Ok(())
}

/// The secure port's listener and settings (CA loaded or created, authenticator with the cluster's
/// TokenReview with cluster access), and the cluster client for publishing the root.
/// Gauge `istio_build{component="pilot",tag}` = 1: the build running, as istiod records it at start
/// (Istio's `pkg/version/stats.go`; `tag` is meshpilot's version, the control-plane dashboard's
/// "Pilot Versions" panel).
fn record_build_info() {
    metrics::describe_gauge!("istio_build", "Istio component build info");
    metrics::gauge!("istio_build", "component" => "pilot", "tag" => env!("CARGO_PKG_VERSION")).set(1.0);
}

async fn secure_port(
    args: &Args,
    access: Option<&kube_source::Cluster>,
    remote: Option<&kube_source::Multicluster>,
    env: &SecurityOptions,
    addr: &str,
    trust_domain: &str,
) -> Result<(SecurePort, tokio::net::TcpListener, AdsConfig, Option<kube_source::client::Connection>), String>
{
    let addr = parse_addr("--secure-grpc-addr", addr)?;
    let kube = access.map(kube_source::Cluster::connect).transpose().map_err(|e| e.to_string())?;
    let ca = control_plane_ca(args, env, trust_domain, kube.as_ref()).await?.ok_or_else(|| {
        format!(
            "--secure-grpc-addr needs a place for the CA: --ca-dir DIR (where the self-signed root is kept), \
             cluster access (kept in the secret istio-ca-secret, as istiod), or a plugged-in CA in \
             --root-ca-dir/ROOT_CA_DIR ({} has no {})",
            args.root_ca_dir.display(),
            security::ca::CA_KEY
        )
    })?;
    let reviewer = kube.as_ref().map(|c| token_reviewer(&c.client, args, remote));
    let authenticator = Arc::new(Authenticator::new(trust_domain, env.token_audiences.clone(), reviewer));
    let listener = listen(addr).map_err(|e| format!("cannot listen on --secure-grpc-addr {addr}: {e}"))?;
    let dns_names = discovery::secure::istiod_dns_names(&env.pod_namespace, args.revision.as_deref());
    let ads_config =
        args.keepalive.apply(AdsConfig { identity_check: env.identity_check, ..AdsConfig::default() });
    let port = SecurePort { ca, authenticator, dns_names, xds_auth: env.xds_auth };
    info!(secure = %addr, xds_auth = env.xds_auth, "secure xDS and CA port");
    Ok((port, listener, ads_config, kube))
}

/// The token reviewer of the secure port and the debug endpoints: TokenReview in the config cluster
/// (`client`), and in the remote cluster a caller names in its `clusterid` metadata when there are
/// remote clusters (docs/MULTICLUSTER.md).
fn token_reviewer(
    client: &kube_source::Client,
    args: &Args,
    remote: Option<&kube_source::Multicluster>,
) -> Arc<dyn TokenReviewer> {
    let local: Arc<dyn TokenReviewer> =
        Arc::new(kube_source::identity::KubeTokenReviewer::new(client.clone()));
    match remote {
        Some(remote) => Arc::new(kube_source::multicluster::ClusterTokenReviewer::new(
            &args.cluster_id,
            local,
            remote.clone(),
        )),
        None => local,
    }
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
/// the control plane's cluster; else loopback only).
fn debug_access(
    args: &Args,
    access: Option<&kube_source::Cluster>,
    remote: Option<&kube_source::Multicluster>,
    env: &SecurityOptions,
    trust_domain: &str,
    secure: Option<&Arc<Authenticator>>,
) -> Result<meshpilot_http::access::DebugAccess, String> {
    let authenticator = match (secure, access) {
        (Some(a), _) => Some(a.clone()),
        (None, Some(access)) => {
            let kube = access.connect().map_err(|e| e.to_string())?;
            let reviewer = token_reviewer(&kube.client, args, remote);
            Some(Arc::new(Authenticator::new(trust_domain, env.token_audiences.clone(), Some(reviewer))))
        }
        (None, None) => None,
    };
    Ok(meshpilot_http::access::DebugAccess {
        authenticator,
        system_namespace: env.pod_namespace.clone(),
        namespace_scoped: env.debug_endpoint_auth,
        unsafe_admin_endpoints: env.unsafe_admin_endpoints,
    })
}

/// The Kubernetes CRD config source of the control plane's cluster.
fn kube_config_source(
    access: &kube_source::Cluster,
    args: &Args,
    selectors: &model::selector::DiscoverySelectors,
) -> Arc<kube_source::KubeSource> {
    let config = access.config();
    let options = kube_source::KubeSourceOptions {
        parse: ParseOptions { domain_suffix: args.domain.clone(), ..ParseOptions::default() },
        revision: args.revision.clone(),
        discovery_selectors: selectors.clone(),
        ..kube_source::KubeSourceOptions::default()
    };
    let source = kube_source::KubeSource::new(config, options);
    info!(source = %model::ConfigStore::name(&source), "watching Istio config in Kubernetes");
    Arc::new(source)
}

/// The Kubernetes service registry, with cluster access and `--registries` naming `Kubernetes`.
fn kube_registry(
    args: &Args,
    access: Option<&kube_source::Cluster>,
    selectors: &model::selector::DiscoverySelectors,
) -> Result<Option<kube_source::KubeRegistry>, String> {
    for r in &args.registries {
        if !r.is_empty() && r != "Kubernetes" {
            return Err(format!("unknown --registries entry {r:?}: meshpilot knows Kubernetes"));
        }
    }
    let Some(access) = access.filter(|_| args.registries.iter().any(|r| r == "Kubernetes")) else {
        return Ok(None);
    };
    let config = access.config();
    let options = kube_source::KubeRegistryOptions {
        cluster_id: args.cluster_id.clone(),
        domain_suffix: args.domain.clone(),
        discovery_selectors: selectors.clone(),
        ..kube_source::KubeRegistryOptions::default()
    };
    info!(cluster = %args.cluster_id, "reading Kubernetes services");
    Ok(Some(kube_source::KubeRegistry::new(config, options)))
}

/// The remote clusters of a multi-cluster mesh (docs/MULTICLUSTER.md): Secrets labelled
/// `istio/multiCluster=true` in `POD_NAMESPACE`, read whenever the Kubernetes registry is (as istiod).
fn remote_clusters(
    args: &Args,
    env: &DiscoveryEnv,
    selectors: &model::selector::DiscoverySelectors,
) -> kube_source::Multicluster {
    kube_source::Multicluster::new(kube_source::MulticlusterOptions {
        system_namespace: env.pod_namespace.clone(),
        config_cluster_id: args.cluster_id.clone(),
        registry: kube_source::KubeRegistryOptions {
            domain_suffix: args.domain.clone(),
            discovery_selectors: selectors.clone(),
            ..kube_source::KubeRegistryOptions::default()
        },
        remote_cluster_timeout: env.remote_cluster_timeout,
        client_config: {
            let allowed = env.insecure_kubeconfig_options.clone();
            Arc::new(move |bytes| {
                Box::pin(kube_source::multicluster::kubeconfig_from_bytes(bytes, allowed.clone()))
            })
        },
    })
}

/// The control plane's cluster access ([`kube_source::resolve_access`]: `--kubeconfig`, else
/// `KUBECONFIG` naming a file that exists, else the in-cluster service account, else none — never
/// `~/.kube/config`), loaded. The choice is logged.
///
/// # Errors
/// The chosen kubeconfig or service account cannot be read.
async fn cluster_access(
    flag: Option<&Path>,
    env: &kube_source::AccessEnv,
) -> Result<Option<kube_source::Cluster>, String> {
    match kube_source::resolve_access(flag, env, &|path: &Path| path.exists()) {
        kube_source::Resolved::Access(access) => {
            let cluster = kube_source::Cluster::load(access).await.map_err(|e| e.to_string())?;
            info!(access = %cluster.access, "cluster access");
            Ok(Some(cluster))
        }
        kube_source::Resolved::NoCluster(reason) => {
            info!(%reason, "no cluster access: config from files only");
            Ok(None)
        }
    }
}

/// istiod's default secure xDS + CA address (`--secureGRPCAddr`).
const DEFAULT_SECURE_GRPC_ADDR: &str = ":15012";
/// istiod's default webhook address (`--httpsAddr`).
const DEFAULT_HTTPS_ADDR: &str = ":15017";

/// The secure xDS + CA address and the webhook address in force, from `--secureGRPCAddr` and
/// `--httpsAddr` as given (`None`: not given; `""`: off, istiod's spelling) and whether the CA has a
/// place for its root (`ca_place`: cluster access, `--ca-dir` or a plugged-in CA). Not given, they are
/// istiod's defaults (`:15012`, `:15017`) when there is such a place, else off, with one log line
/// saying how to turn them on (a root only in memory would change at each start, and sidecars would
/// stop trusting it). An address given is used as given; whether it works is checked when it is
/// opened.
fn secure_addrs(
    secure: Option<&str>,
    https: Option<&str>,
    ca_place: bool,
) -> (Option<String>, Option<String>) {
    let pick = |given: Option<&str>, default: &str| match given {
        Some("") => None,
        Some(addr) => Some(addr.to_string()),
        None => ca_place.then(|| default.to_string()),
    };
    let (secure_addr, https_addr) = (pick(secure, DEFAULT_SECURE_GRPC_ADDR), pick(https, DEFAULT_HTTPS_ADDR));
    if !ca_place && (secure.is_none() || https.is_none()) {
        info!(
            "the secure xDS/CA port (15012) and the webhook port (15017) are off by default without a place for \
             the CA's root: give --ca-dir DIR (or cluster access, or a plugged-in CA in --root-ca-dir), or \
             --secureGRPCAddr / --httpsAddr explicitly"
        );
    }
    (secure_addr, https_addr)
}

/// `--meshConfig` or `--networksConfig` (by `key`: `mesh` or `meshNetworks`) and where it is read from
/// ([`mesh_source::locate`]): the file given or istiod's default path when it exists (as istiod's
/// `os.Stat`: anything but "not found" counts as existing), else the ConfigMap with cluster access,
/// else the defaults. A file given that does not exist falls back as istiod does, with a warning.
fn source_origin(args: &Args, env: &DiscoveryEnv, cluster: bool, key: &'static str) -> Origin {
    let (given, default, flag) = if key == mesh_source::MESH_KEY {
        (&args.mesh_config, mesh_source::DEFAULT_MESH_CONFIG, "--meshConfig")
    } else {
        (&args.networks_config, mesh_source::DEFAULT_NETWORKS_CONFIG, "--networksConfig")
    };
    let file = given.clone().unwrap_or_else(|| PathBuf::from(default));
    let exists = std::fs::metadata(&file).map_or_else(|e| e.kind() != std::io::ErrorKind::NotFound, |_| true);
    let origin =
        mesh_source::locate(&file, exists, cluster, &env.pod_namespace, args.revision.as_deref(), key);
    if given.is_some() && !exists {
        warn!(file = %file.display(), flag, source = %origin, "the file does not exist; reading the next source, as istiod");
    }
    match &origin {
        Origin::Defaults => {
            warn!(file = %file.display(), "{key}: using Istio's defaults - missing file and no cluster access")
        }
        origin => info!(source = %origin, "{key} source"),
    }
    origin
}

/// The mesh config at start.
struct MeshStart {
    /// The text in force (empty: Istio's defaults).
    text: String,
    /// `text` as read by every mesh config reader.
    checked: mesh_source::CheckedMesh,
    /// The text read (`None`: absent).
    seen: Option<String>,
    /// Why the text read is not in force.
    error: Option<String>,
}

/// Reads the mesh config at start from `origin`. A broken file stops the start (istiod fails reading
/// it in `initKubeClient`); a broken ConfigMap key leaves Istio's defaults in force and is reported
/// (istiod: "invalid mesh config, using last known state", with no last state the defaults).
///
/// # Errors
/// The file cannot be read or is broken; the API server cannot be asked for the ConfigMap.
async fn initial_mesh(
    origin: &Origin,
    client: Option<&kube_source::Client>,
    domain: &str,
) -> Result<MeshStart, String> {
    let seen = mesh_source::read(origin, client).await.map_err(|e| format!("mesh config: {e}"))?;
    let text = seen.clone().unwrap_or_default();
    match (origin, mesh_source::check_mesh(&text, domain)) {
        (_, Ok(checked)) => Ok(MeshStart { text, checked, seen, error: None }),
        (Origin::File(path), Err(e)) => Err(format!("--meshConfig {}: {e}", path.display())),
        (_, Err(reason)) => Ok(MeshStart {
            text: String::new(),
            checked: mesh_source::check_mesh("", domain)?,
            seen,
            error: Some(reason),
        }),
    }
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
        assert_eq!(not_used.len(), 18);
    }

    #[test]
    fn secure_ports_default_on_with_a_place_for_the_ca_as_istiod() {
        let on = (Some(":15012".to_string()), Some(":15017".to_string()));
        assert_eq!(secure_addrs(None, None, true), on);
        assert_eq!(secure_addrs(None, None, false), (None, None));
        // istiod's spelling for off, and explicit addresses, whatever the CA's place.
        assert_eq!(secure_addrs(Some(""), Some(""), true), (None, None));
        assert_eq!(secure_addrs(Some("127.0.0.1:1"), None, false), (Some("127.0.0.1:1".into()), None));
        assert_eq!(secure_addrs(None, Some(":9443"), true), (Some(":15012".into()), Some(":9443".into())));
        // The flags parse with an empty value.
        let args = parse(&["--secureGRPCAddr=", "--httpsAddr", ""]).unwrap();
        assert_eq!(
            (args.secure_grpc_addr.as_deref(), args.webhook.https_addr.as_deref()),
            (Some(""), Some(""))
        );
        let args = parse(&[]).unwrap();
        assert_eq!((args.secure_grpc_addr, args.webhook.https_addr, args.mesh_config), (None, None, None));
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
