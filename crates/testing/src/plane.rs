//! The whole control plane in-process, as `meshpilot discovery` wires it:
//!
//! ```text
//!   config dirs (FileSource) ─┐
//!   cluster (KubeSource)¹ ────┴► Aggregate store ─► ServiceEntry registry ─┐
//!   cluster (KubeRegistry)¹ ───────────────────────────────────────────────┴► AggregateRegistry
//!        ─► DiscoveryServer ─► NetworkingSource ─► AdsServer 127.0.0.1:P (RunningAds)
//!                          └─► debug HTTP 127.0.0.1:H (/ready, /debug/*)
//!   ¹ feature `kube`
//! ```
//!
//! What differs between tests is in [`PlaneOptions`]; the wiring of server, source and ADS engine
//! is in one function (`wire`), the debug HTTP in another (`serve_debug_http`).

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use config::mesh::parse_mesh_config;
use config::{Aggregate, FileSource, FileSourceOptions, QueueOptions, ReadOnlySource};
use discovery::{DiscoveryServer, Input, NetworkingSource, SecretsChanged, ServerOptions};
use model::{
    ConfigStoreController, Shutdown, ShutdownTrigger,
    push::{PushRequest, TriggerReason},
    service::ServiceController,
    shutdown_channel,
};
use registry::{AggregateRegistry, ServiceEntryOptions, ServiceEntryRegistry};
use sds::{FileSecretOptions, FileSecrets};
use xds::{AdsConfig, AdsServer};

use crate::{AdsApi, Bootstrap, HarnessError, RunningAds, error::io, wait_for};

/// What a [`Plane`] reads and how long it may take to become ready.
#[derive(Debug, Clone)]
pub struct PlaneOptions {
    /// `--config-dir` directories (watched), in precedence order.
    pub config_dirs: Vec<PathBuf>,
    /// `--file-secret-root` and friends: which files may be served as SDS secrets.
    pub file_secrets: FileSecretOptions,
    /// Also read the Istio custom resources and the Services/EndpointSlices of a cluster.
    #[cfg(feature = "kube")]
    pub kube: Option<KubeOptions>,
    /// How long [`Plane::start`] waits for the server to be ready (a limit, not an assertion).
    pub ready_timeout: Duration,
    /// Mesh config YAML (`--mesh-config`'s content); empty: Istio's defaults.
    pub mesh_config: String,
    /// `ENABLE_XDS_API_GENERATOR_AUTH` (default true): MCP-over-xDS config only for callers
    /// authenticated in the root namespace, so never on the plane's plaintext ADS port.
    pub api_generator_auth: bool,
    /// `ENABLE_TLS_ON_SIDECAR_INGRESS` (default false, as istiod): Sidecar `ingress[].tls` terminates
    /// TLS.
    pub tls_on_sidecar_ingress: bool,
}

impl Default for PlaneOptions {
    fn default() -> Self {
        PlaneOptions {
            config_dirs: Vec::new(),
            file_secrets: FileSecretOptions::default(),
            #[cfg(feature = "kube")]
            kube: None,
            ready_timeout: Duration::from_secs(5),
            mesh_config: String::new(),
            api_generator_auth: true,
            tls_on_sidecar_ingress: false,
        }
    }
}

impl PlaneOptions {
    /// Config from one directory, nothing else.
    pub fn config_dir(dir: impl Into<PathBuf>) -> Self {
        PlaneOptions { config_dirs: vec![dir.into()], ..PlaneOptions::default() }
    }

    /// Config and services from `namespace` of a cluster (60 s to become ready: a cluster's first
    /// list is slow on a loaded machine).
    #[cfg(feature = "kube")]
    pub fn kube(config: kube_source::ClientConfig, namespace: &str) -> Self {
        PlaneOptions {
            kube: Some(KubeOptions { config, namespace: namespace.to_owned(), ingress: None }),
            ready_timeout: Duration::from_secs(60),
            ..PlaneOptions::default()
        }
    }
}

/// The cluster a [`Plane`] reads (feature `kube`).
#[cfg(feature = "kube")]
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// How to reach the API server.
    pub config: kube_source::ClientConfig,
    /// The one namespace read (also the namespace of objects that name none).
    pub namespace: String,
    /// Also read the cluster's Ingresses (all namespaces) as Gateways and VirtualServices.
    pub ingress: Option<kube_source::ingress_source::IngressSourceOptions>,
}

/// The cluster parts of a running [`Plane`] (feature `kube`).
#[cfg(feature = "kube")]
#[derive(Clone)]
pub struct KubeParts {
    /// The Istio config source.
    pub source: kube_source::KubeSource,
    /// The Kubernetes service registry.
    pub registry: kube_source::KubeRegistry,
    /// The Ingress source, when [`KubeOptions::ingress`] was set.
    pub ingress: Option<kube_source::ingress_source::IngressSource>,
}

/// A running control plane; everything stops when it is dropped.
pub struct Plane {
    /// The DiscoveryServer.
    pub server: Arc<DiscoveryServer>,
    /// ADS on loopback.
    pub ads: RunningAds<NetworkingSource>,
    /// `/ready` and `/debug/*` on loopback.
    pub http: SocketAddr,
    /// The file sources, one per [`PlaneOptions::config_dirs`] entry.
    pub file_sources: Vec<Arc<FileSource>>,
    /// The SDS file secrets.
    pub secrets: Arc<FileSecrets>,
    /// The cluster source and registry, when [`PlaneOptions::kube`] was set.
    #[cfg(feature = "kube")]
    pub kube: Option<KubeParts>,
    _trigger: ShutdownTrigger,
}

impl Plane {
    /// A plane reading config from `dir` (watched), ready.
    ///
    /// # Panics
    /// If it cannot start (see [`Plane::start_with`]); tests want the message, not a `Result`.
    pub async fn start(dir: impl Into<PathBuf>) -> Plane {
        Self::start_with(PlaneOptions::config_dir(dir)).await.unwrap()
    }

    /// Starts a plane as `options` say and waits until the server is ready (stores and registries
    /// synced, first push context built).
    ///
    /// # Errors
    /// [`HarnessError::Plane`] for a bad config directory or file secret root, [`HarnessError::Io`]
    /// if no port can be bound, [`HarnessError::Timeout`] if it is not ready in
    /// [`PlaneOptions::ready_timeout`].
    pub async fn start_with(options: PlaneOptions) -> Result<Plane, HarnessError> {
        let plane_error = |what: &str, e: &dyn std::fmt::Display| HarnessError::Plane(format!("{what}: {e}"));
        let mut file_sources = Vec::new();
        let mut sources: Vec<Arc<dyn ConfigStoreController>> = Vec::new();
        for dir in &options.config_dirs {
            let files = FileSource::new(dir, FileSourceOptions::default())
                .map_err(|e| plane_error(&format!("config dir {}", dir.display()), &e))?;
            sources.push(Arc::new(ReadOnlySource::new(files.clone())));
            file_sources.push(Arc::new(files));
        }
        #[cfg(feature = "kube")]
        let kube = options.kube.as_ref().map(kube_parts);
        #[cfg(feature = "kube")]
        if let Some(k) = &kube {
            sources.push(Arc::new(k.source.clone()));
            if let Some(ingress) = &k.ingress {
                sources.push(Arc::new(ReadOnlySource::new(ingress.clone())));
            }
        }
        let store: Arc<dyn ConfigStoreController> =
            Arc::new(Aggregate::new(sources, QueueOptions::default()));
        let se = Arc::new(ServiceEntryRegistry::new(store.clone(), ServiceEntryOptions::default()));
        let services = Arc::new(AggregateRegistry::new());
        #[cfg(feature = "kube")]
        if let Some(k) = &kube {
            services.add_registry(Arc::new(k.registry.clone()));
        }
        services.add_registry(se);
        let secrets =
            FileSecrets::new(options.file_secrets.clone()).map_err(|e| plane_error("file secrets", &e))?;

        let (mesh, _warnings) = parse_mesh_config(&options.mesh_config, "cluster.local")
            .map_err(|e| plane_error("mesh config", &e))?;
        let server_options = ServerOptions {
            api_generator_auth: options.api_generator_auth,
            tls_on_sidecar_ingress: options.tls_on_sidecar_ingress,
            ..ServerOptions::default()
        };
        let (server, ads) = wire(store, services, secrets.clone(), mesh, server_options);
        let ads = RunningAds::start(ads, None).await?;
        let (trigger, shutdown) = shutdown_channel();
        #[cfg(feature = "kube")]
        if let Some(k) = &kube {
            tokio::spawn(k.registry.run(shutdown.clone()));
        }
        tokio::spawn(server.clone().run(shutdown.clone()));
        let files_changed = {
            let inputs = server.inputs().clone();
            move |names| inputs.send(Input::Secrets(SecretsChanged::files(names)))
        };
        tokio::spawn(secrets.clone().run(ads.registry.clone(), shutdown.clone(), files_changed));
        let http = serve_debug_http(&server, &file_sources, &secrets, shutdown).await?;
        wait_for("the discovery server to be ready", options.ready_timeout, async || {
            server.is_ready().then_some(())
        })
        .await?;
        Ok(Plane {
            server,
            ads,
            http,
            file_sources,
            secrets,
            #[cfg(feature = "kube")]
            kube,
            _trigger: trigger,
        })
    }

    /// The file source of the first config directory.
    ///
    /// # Panics
    /// If the plane reads no config directory.
    pub fn files(&self) -> &Arc<FileSource> {
        self.file_sources.first().expect("the plane reads no config directory")
    }

    /// The cluster's Istio config source.
    ///
    /// # Panics
    /// If the plane reads no cluster.
    #[cfg(feature = "kube")]
    pub fn kube_source(&self) -> &kube_source::KubeSource {
        &self.kube.as_ref().expect("the plane reads no cluster").source
    }

    /// Pushes everything to every proxy now (as `/debug/adsz?push=true`).
    pub fn force_push(&self) {
        self.server.config_update(PushRequest::forced(TriggerReason::Debug));
    }

    /// A sidecar bootstrap ([`Bootstrap::sidecar_in`]) for workload `name` in `namespace` against
    /// this plane.
    pub fn sidecar(&self, name: &str, namespace: &str, api: AdsApi) -> Bootstrap {
        Bootstrap::sidecar_in(name, namespace, self.ads.addr, api)
    }

    /// A sidecar bootstrap like [`Plane::sidecar`] polling this plane's HTTP port over REST-JSON
    /// ([`AdsApi::Rest`]) instead of an ADS stream.
    pub fn rest_sidecar(&self, name: &str, namespace: &str) -> Bootstrap {
        Bootstrap::sidecar_in(name, namespace, self.http, AdsApi::Rest)
    }

    /// An ingress gateway bootstrap ([`Bootstrap::router`]) against this plane.
    pub fn router(&self, api: AdsApi) -> Bootstrap {
        Bootstrap::router(self.ads.addr, api)
    }
}

/// The one place the DiscoveryServer, the engine's resource source and the ADS server are wired
/// together (default debounce).
fn wire(
    store: Arc<dyn ConfigStoreController>,
    services: Arc<dyn ServiceController>,
    secrets: Arc<FileSecrets>,
    mesh: model::push::MeshSettings,
    options: ServerOptions,
) -> (Arc<DiscoveryServer>, AdsServer<NetworkingSource>) {
    let server = DiscoveryServer::new(store, services, mesh, options);
    let ads = server.ads_server(secrets, AdsConfig::default());
    (server, ads)
}

/// Serves `/ready`, `/debug/*` and the REST-JSON xDS paths (the `--http-addr` router) on a free loopback port until
/// `shutdown`; the one use of `discovery::http`.
async fn serve_debug_http(
    server: &Arc<DiscoveryServer>,
    files: &[Arc<FileSource>],
    secrets: &Arc<FileSecrets>,
    mut shutdown: Shutdown,
) -> Result<SocketAddr, HarnessError> {
    use meshpilot_http::{DebugState, debug_router};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(io("bind debug HTTP"))?;
    let addr = listener.local_addr().map_err(io("debug HTTP address"))?;
    let state = DebugState {
        server: server.clone(),
        files: files.to_vec(),
        startup_warnings: Arc::default(),
        mesh_sources: Arc::default(),
        secrets: secrets.clone(),
        invalid_objects: Vec::new(),
        access: Default::default(),
        limits: Default::default(),
        control_plane_id: meshpilot_http::proxystatus::control_plane_id(None, None).into(),
        inject_templates: Default::default(),
    };
    // The binary's server: it tells the debug guard the caller's address (loopback here).
    tokio::spawn(meshpilot_http::serve::serve(
        listener,
        debug_router(state)
            .merge(meshpilot_http::rest::rest_router(Arc::new(server.rest_xds(secrets.clone())))),
        meshpilot_http::serve::HEADER_READ_TIMEOUT,
        async move { shutdown.wait().await },
    ));
    Ok(addr)
}

/// The cluster source and registry for `options`, with fast retries.
#[cfg(feature = "kube")]
fn kube_parts(options: &KubeOptions) -> KubeParts {
    use kube_source::{KubeRegistry, KubeRegistryOptions, KubeSource, KubeSourceOptions};
    let backoff = (Duration::from_millis(100), Duration::from_secs(1));
    let namespace = options.namespace.clone();
    let source = KubeSource::new(
        options.config.clone(),
        KubeSourceOptions {
            parse: config::parse::ParseOptions {
                default_namespace: namespace.clone(),
                ..config::parse::ParseOptions::default()
            },
            namespaces: vec![namespace.clone()],
            backoff,
            ..KubeSourceOptions::default()
        },
    );
    let registry = KubeRegistry::new(
        options.config.clone(),
        KubeRegistryOptions { namespaces: vec![namespace], backoff, ..KubeRegistryOptions::default() },
    );
    let ingress = options
        .ingress
        .clone()
        .map(|o| kube_source::ingress_source::IngressSource::new(options.config.clone(), o));
    KubeParts { source, registry, ingress }
}
