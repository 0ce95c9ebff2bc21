//! [`DiscoveryServer`]: turns config and registry events into debounced, merged pushes of a new
//! immutable [`PushContext`], publishes each snapshot, and pushes it to the engine's
//! [`ConnectionRegistry`].
//!
//! ```text
//!  Aggregate config store ── handler per kind ──┐            (one merged slot per kind of input)
//!  ServiceController ── RegistryEvent ──────────┤
//!  mesh config, Gateway API cluster objects ────┼─► Inputs ─► debounce (AFTER / MAX) ─► push():
//!  /debug/adsz?push=true ── forced ─────────────┘              build PushContext (Arc, versioned)
//!                                                              publish it (watch ─► NetworkingSource)
//!                                                              ConnectionRegistry::push_where(needs)
//!                                                                   │ per connection: one pending,
//!                                                                   ▼ merged (PushEvent::merge)
//!                                                 engine ─► NetworkingSource::generate (types filtered)
//! ```
//!
//! Data flows one way: the server never calls into the source; the source reads the published
//! snapshots ([`DiscoveryServer::push_contexts`]) and the snapshot a push carries.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use api::Kind;
use model::push::node::Proxy;
use model::{
    ConfigStore, ConfigStoreController, Event, Shutdown,
    push::{MeshSettings, ProxyKind, PushContext, PushRequest, TriggerReason, proxy_needs_push},
    service::{EndpointPush, REGISTRY_KINDS, RegistryEvent, ServiceController, service_config_key},
};
use tokio::sync::watch;
use tracing::{debug, info, warn};
use xds::{AdsConfig, AdsServer, ConnectionRegistry};

use jwks::JwksResolver;
use networking::GenerationCache;
use sds::FileSecrets;

use crate::{
    NetworkingSource,
    debounce::{Debouncer, Decision},
    input::{Input, Inputs, Pending, SecretsChanged},
    metrics as m,
    objects::Tracking,
    options::{DebounceOptions, ServerOptions},
};

/// Turns changes of fetched key sets into a push of every RequestAuthentication (their listeners
/// inline the keys; Istio pushes when its `JwksResolver` sees new keys), until `shutdown`.
async fn push_on_jwks_changes(
    server: std::sync::Weak<DiscoveryServer>,
    mut changes: watch::Receiver<u64>,
    mut shutdown: Shutdown,
) {
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = shutdown.wait() => return,
        }
        let Some(server) = server.upgrade() else { return };
        let keys: Vec<model::ConfigKey> =
            server.store.list(Kind::RequestAuthentication, None).iter().map(|c| c.key()).collect();
        if !keys.is_empty() {
            debug!(policies = keys.len(), "JWKS changed; pushing RequestAuthentications");
            server.config_update(PushRequest::config(keys, TriggerReason::Config));
        }
    }
}

/// The push request of one config event: an update of a WasmPlugin or TrafficExtension that leaves
/// its placement in listeners as it was concerns ECDS only ([`PushRequest::extension_content`]);
/// everything else is an ordinary config request.
/// Counts one config event in `pilot_k8s_cfg_events{type,event}` (type: the Kubernetes kind name, as
/// istiod's config client labels it).
fn count_config_event(kind: Kind, event: Event) {
    metrics::counter!(m::K8S_CFG_EVENTS, "type" => kind.as_str(), "event" => event.as_str()).increment(1);
}

fn config_request(old: Option<&Arc<model::Config>>, new: &Arc<model::Config>, event: Event) -> PushRequest {
    if event == Event::Update
        && model::push::extensions::is_extension_kind(new.kind())
        && let Some(old) = old
        && !model::push::extensions::placement_changed(old, new)
    {
        return PushRequest::extension_content(new.key());
    }
    PushRequest::config([new.key()], TriggerReason::Config)
}

/// The published push contexts (a `tokio::sync::watch` receiver; named apart from
/// `networking::Snapshot`, a push context with the generators' cache): `None` until the first
/// [`PushContext`] is built (config and services synced), then always the newest. Readers never block
/// the server.
pub type PushContexts = watch::Receiver<Option<Arc<PushContext>>>;

/// Shared state of the control plane: stores, the current snapshot, the connections.
pub struct DiscoveryServer {
    store: Arc<dyn ConfigStoreController>,
    services: Arc<dyn ServiceController>,
    /// The mesh settings; replaced by an [`Input::Mesh`] (mesh config over MCP).
    mesh: Mutex<Arc<MeshSettings>>,
    options: DebounceOptions,
    current: watch::Sender<Option<Arc<PushContext>>>,
    counter: AtomicU64,
    /// The one door into the push model ([`crate::input`]).
    inputs: Inputs,
    connections: ConnectionRegistry<Proxy, PushRequest>,
    /// The proxies polling the REST-JSON endpoints ([`crate::rest`]).
    polling: xds::PollingRegistry<Proxy>,
    pushes: AtomicU64,
    /// The generators' cache, shared by every xDS server of this DiscoveryServer (and read by the
    /// debug handlers for generation findings).
    cache: Arc<GenerationCache>,
    /// Fetches the remote key sets (`jwksUri`) of RequestAuthentications; `None` when the server was
    /// made outside a tokio runtime (every remote key set is then unresolved: fail closed).
    jwks: Option<JwksResolver>,
    /// The last pushes ([`crate::push_log`]).
    push_log: crate::push_log::PushLog,
    /// Per object the first push holding its version, per proxy the newest push generated
    /// ([`crate::objects`]).
    tracking: Arc<Tracking>,
    /// `ENABLE_XDS_API_GENERATOR_AUTH` for the xDS servers made next ([`mcp::server`]).
    api_generator_auth: bool,
    /// `PILOT_ENABLE_IP_AUTOALLOCATE` for the xDS servers made next (NDS).
    ip_autoallocate: bool,
    /// `PILOT_TRACE_SAMPLING`, set into every mesh settings taken (`MeshSettings::trace_sampling`).
    trace_sampling: f64,
    /// `ENABLE_TLS_ON_SIDECAR_INGRESS`, set into every mesh settings taken
    /// (`MeshSettings::enable_tls_on_sidecar_ingress`).
    tls_on_sidecar_ingress: bool,
    /// The Gateway API converter (always installed, as istiod's `PILOT_ENABLE_GATEWAY_API`).
    gateway_api: Arc<gateway::GatewayApiConverter>,
    /// Converters run on each full push context build ([`model::push::ConfigConverter`]).
    converters: Vec<Arc<dyn model::push::ConfigConverter>>,
    /// The `credentialName` secrets (Kubernetes Secrets from the cluster and config directories),
    /// answered over SDS by every xDS server of this DiscoveryServer.
    credentials: Arc<sds::CredentialSecrets>,
    /// Answers istiod's debug types on every xDS server of this DiscoveryServer ([`crate::debug`]).
    debug: crate::debug::DebugSlot,
}

impl std::fmt::Debug for DiscoveryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscoveryServer")
            .field("options", &self.options)
            .field("ready", &self.is_ready())
            .field("connections", &self.connections.len())
            .finish_non_exhaustive()
    }
}

impl DiscoveryServer {
    /// A server over `store` (config) and `services` (service registry) with its own connection
    /// registry; serve it with [`DiscoveryServer::ads_server`]. Everything else it is built with is in
    /// `options` (debounce, `ENABLE_XDS_API_GENERATOR_AUTH`, the JWKS resolver's settings, the input
    /// handle). Registers its event handlers right away; call [`DiscoveryServer::run`] to start.
    pub fn new(
        store: Arc<dyn ConfigStoreController>,
        services: Arc<dyn ServiceController>,
        mut mesh: MeshSettings,
        options: ServerOptions,
    ) -> Arc<DiscoveryServer> {
        let ServerOptions {
            debounce,
            api_generator_auth,
            jwks,
            inputs,
            ip_autoallocate,
            trace_sampling,
            tls_on_sidecar_ingress,
        } = options;
        mesh.trace_sampling = trace_sampling;
        mesh.enable_tls_on_sidecar_ingress = tls_on_sidecar_ingress;
        let jwks = tokio::runtime::Handle::try_current()
            .ok()
            .map(|runtime| JwksResolver::with_runtime(jwks, runtime));
        let gateway_api = Arc::new(gateway::GatewayApiConverter::new());
        let server = Arc::new(DiscoveryServer {
            store: store.clone(),
            services: services.clone(),
            mesh: Mutex::new(Arc::new(mesh)),
            options: debounce,
            current: watch::Sender::new(None),
            counter: AtomicU64::new(0),
            inputs,
            connections: ConnectionRegistry::new(),
            polling: xds::PollingRegistry::default(),
            pushes: AtomicU64::new(0),
            cache: Arc::new(match &jwks {
                Some(j) => GenerationCache::with_jwks(Arc::new(j.clone())),
                None => GenerationCache::new(),
            }),
            jwks,
            push_log: crate::push_log::PushLog::default(),
            tracking: Arc::new(Tracking::new()),
            api_generator_auth,
            ip_autoallocate,
            trace_sampling,
            tls_on_sidecar_ingress,
            gateway_api: gateway_api.clone(),
            converters: vec![gateway_api],
            credentials: sds::CredentialSecrets::new(),
            debug: Arc::default(),
        });
        for kind in store.schemas().to_vec() {
            if REGISTRY_KINDS.contains(&kind) {
                // Their changes reach proxies through the registry, which raises nothing for some
                // (a WorkloadGroup, a WorkloadEntry no ServiceEntry selects): MCP clients get them
                // straight away, with no push context rebuild ([`mcp::server`]).
                let weak = Arc::downgrade(&server);
                store.register_event_handler(
                    kind,
                    Arc::new(move |_old, new, event: Event| {
                        if let Some(s) = weak.upgrade() {
                            count_config_event(kind, event);
                            let request = PushRequest::config([new.key()], TriggerReason::Config);
                            s.connections.push_where(Proxy::uses_api_generator, request);
                        }
                        Ok(())
                    }),
                );
                continue;
            }
            let weak = Arc::downgrade(&server);
            store.register_event_handler(
                kind,
                Arc::new(move |old, new, event: Event| {
                    if let Some(s) = weak.upgrade() {
                        count_config_event(kind, event);
                        metrics::counter!(m::INBOUND_UPDATES, "type" => "config").increment(1);
                        debug!(key = %new.key(), %event, "config event");
                        s.config_update(config_request(old, new, event));
                    }
                    Ok(())
                }),
            );
        }
        let weak = Arc::downgrade(&server);
        services.append_event_handler(Arc::new(move |event: &RegistryEvent| {
            let Some(s) = weak.upgrade() else { return };
            let request = match event {
                RegistryEvent::Service(e) => {
                    let t = if e.event == Event::Delete { "svcdelete" } else { "svc" };
                    metrics::counter!(m::INBOUND_UPDATES, "type" => t).increment(1);
                    PushRequest::config([e.config_key()], TriggerReason::Service)
                }
                RegistryEvent::Endpoints(u) => {
                    metrics::counter!(m::INBOUND_UPDATES, "type" => "eds").increment(1);
                    match u.push {
                        EndpointPush::Incremental => PushRequest::endpoints(&u.hostname, &u.namespace),
                        EndpointPush::Full => {
                            let mut r = PushRequest::config(
                                [service_config_key(&u.hostname, &u.namespace)],
                                TriggerReason::Endpoint,
                            );
                            r.endpoints_updated.insert((u.hostname.clone(), u.namespace.clone()));
                            r
                        }
                    }
                }
            };
            s.config_update(request);
        }));
        server
    }

    /// Queues a change (Istio's `ConfigUpdate`): merged into the one pending request, picked up by
    /// the debounce loop. Never blocks.
    pub fn config_update(&self, request: PushRequest) {
        self.inputs.send(Input::Config(request));
    }

    /// The handle through which every change reaches this server ([`crate::input`]).
    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }

    /// The current snapshot (`None` before the first one is built).
    pub fn push_context(&self) -> Option<Arc<PushContext>> {
        self.current.borrow().clone()
    }

    /// A receiver of the published snapshots (for the xDS source and debug handlers): `None` until the
    /// first snapshot, then each new one.
    pub fn push_contexts(&self) -> PushContexts {
        self.current.subscribe()
    }

    /// `true` once config and services are synced and the first snapshot is built and published (the
    /// same condition under which the xDS source accepts connections).
    pub fn is_ready(&self) -> bool {
        self.current.borrow().is_some()
    }

    /// The xDS server for this DiscoveryServer: a [`NetworkingSource`] reading its snapshots and
    /// services (answering SDS from `secrets`), registering connections in its registry. The one place
    /// where the server, the source and the engine are wired together.
    pub fn ads_server(&self, secrets: Arc<FileSecrets>, config: AdsConfig) -> AdsServer<NetworkingSource> {
        let services: Arc<dyn model::ServiceDiscovery> = self.services.clone();
        let api = mcp::server::ApiGenerator::new(self.store.clone(), self.api_generator_auth);
        let source =
            NetworkingSource::with_cache(self.push_contexts(), services, secrets, self.cache.clone())
                .with_tracking(self.tracking.clone())
                .with_credentials(self.credentials.clone())
                .with_api_generator(api)
                .with_ip_autoallocate(self.ip_autoallocate)
                .with_debug(self.debug.clone());
        let source = Arc::new(source);
        AdsServer::with_registry(source, config, self.connections.clone())
    }

    /// Installs the generator of istiod's debug types (`istio.io/debug/…`, [`crate::debug`]) for every
    /// xDS server of this DiscoveryServer, made before or after. Only the first call counts (`false`
    /// for the others).
    pub fn set_debug_generator(&self, generator: Arc<dyn crate::debug::DebugGenerator>) -> bool {
        self.debug.set(generator).is_ok()
    }

    /// The REST-JSON discovery service (Envoy's `api_type: REST`, [`crate::rest`]): a
    /// [`NetworkingSource`] like [`DiscoveryServer::ads_server`]'s, with the same cache and secrets,
    /// recording polls in [`DiscoveryServer::polling`]. No MCP-over-xDS config types over REST.
    pub fn rest_xds(&self, secrets: Arc<FileSecrets>) -> crate::rest::RestXds {
        let services: Arc<dyn model::ServiceDiscovery> = self.services.clone();
        let source =
            NetworkingSource::with_cache(self.push_contexts(), services, secrets, self.cache.clone())
                .with_tracking(self.tracking.clone())
                .with_credentials(self.credentials.clone())
                .with_ip_autoallocate(self.ip_autoallocate);
        crate::rest::RestXds::new(Arc::new(source), self.polling.clone())
    }

    /// The proxies polling the REST-JSON endpoints: `/debug/syncz`, proxy-status and the status page
    /// show them beside [`DiscoveryServer::connections`].
    pub fn polling(&self) -> &xds::PollingRegistry<Proxy> {
        &self.polling
    }

    /// The `credentialName` secret store its xDS servers answer SDS from: feed it with
    /// [`sds::ConfigDirSecrets`] and the cluster's Secret watch, and send what changed as
    /// [`Input::Secrets`] ([`DiscoveryServer::inputs`]): the server pushes it over SDS.
    pub fn credentials(&self) -> &Arc<sds::CredentialSecrets> {
        &self.credentials
    }

    /// `PILOT_ENABLE_IP_AUTOALLOCATE` as this server was made with: proxies capturing DNS get the
    /// auto-allocated VIPs in their name table (NDS).
    pub fn ip_autoallocate(&self) -> bool {
        self.ip_autoallocate
    }

    /// The generators' cache (shared by [`DiscoveryServer::ads_server`]'s sources): scopes, route
    /// tables, and the findings generation met per proxy
    /// ([`GenerationCache::generation_findings`]).
    pub fn generation_cache(&self) -> &Arc<GenerationCache> {
        &self.cache
    }

    /// What the object status reads ([`crate::objects`]).
    pub fn tracking(&self) -> &Arc<Tracking> {
        &self.tracking
    }

    /// The engine's connections.
    pub fn connections(&self) -> &ConnectionRegistry<Proxy, PushRequest> {
        &self.connections
    }

    /// The Gateway API converter run on every push context build: the kube source hands it what it
    /// knows of namespaces and Secrets ([`gateway::GatewayApiConverter::set_kube_objects`]).
    pub fn gateway_api(&self) -> &Arc<gateway::GatewayApiConverter> {
        &self.gateway_api
    }

    /// The config store.
    pub fn store(&self) -> &Arc<dyn ConfigStoreController> {
        &self.store
    }

    /// The service registry.
    pub fn services(&self) -> &Arc<dyn ServiceController> {
        &self.services
    }

    /// The mesh settings in force (the next push context is built with them).
    pub fn mesh(&self) -> Arc<MeshSettings> {
        self.mesh.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Applies what was taken from the inputs: new mesh settings and Gateway API cluster objects are
    /// put in force (each, when it differs from what is in force, adds a forced push with reason
    /// `global`, as istiod's mesh watcher); changed secrets are pushed at once over SDS
    /// ([`DiscoveryServer::push_secrets`]); returns the request to push, if any.
    fn apply(&self, pending: Pending) -> Option<PushRequest> {
        if !pending.secrets.is_empty() {
            self.push_secrets(&pending.secrets);
        }
        let mut request = pending.request;
        let mut global = |what: &str| {
            info!("{what} changed; pushing to every proxy");
            let forced = PushRequest::forced(TriggerReason::Global);
            match request.as_mut() {
                Some(r) => r.merge_from(forced),
                None => request = Some(forced),
            }
        };
        if let Some(mut mesh) = pending.mesh {
            mesh.trace_sampling = self.trace_sampling;
            mesh.enable_tls_on_sidecar_ingress = self.tls_on_sidecar_ingress;
            let mut current = self.mesh.lock().unwrap_or_else(|p| p.into_inner());
            // The mesh networks have their own input.
            mesh.mesh_networks = current.mesh_networks.clone();
            if **current != mesh {
                *current = Arc::new(mesh);
                drop(current);
                global("mesh config");
            }
        }
        if let Some(networks) = pending.networks {
            let mut current = self.mesh.lock().unwrap_or_else(|p| p.into_inner());
            if current.mesh_networks != networks {
                let mut mesh = (**current).clone();
                mesh.mesh_networks = networks;
                *current = Arc::new(mesh);
                drop(current);
                global("mesh networks");
            }
        }
        if let Some(objects) = pending.gateway_objects
            && self.gateway_api.set_kube_objects(objects)
        {
            global("the cluster's namespaces, Secrets or Service addresses for the Gateway API");
        }
        request
    }

    /// Pushes changed secrets over SDS, with no new push context and no debounce (they change nothing
    /// else): each connection watching one of them gets a non-full [`PushRequest::secrets`] (reason
    /// `secret`) naming the changed names it watches, and the engine regenerates SDS only. Returns how
    /// many connections.
    fn push_secrets(&self, changed: &SecretsChanged) -> usize {
        let mut pushed = 0;
        for conn in self.connections.snapshot() {
            let Some(t) = conn.types.get(xds::type_url::SECRET) else { continue };
            let names = changed.affected(&t.watch.names, &conn.proxy.config_namespace);
            if names.is_empty() {
                continue;
            }
            if let Some(handle) = self.connections.handle(&conn.id) {
                handle.push(PushRequest::secrets(names));
                pushed += 1;
            }
        }
        metrics::counter!(m::PUSH_TRIGGERS, "type" => TriggerReason::Secret.as_str()).increment(1);
        info!(
            kubernetes_secrets = changed.kubernetes.len(),
            certificate_files = changed.files.len(),
            connections = pushed,
            "secrets changed: SDS push"
        );
        pushed
    }

    /// The most recent pushes (version, reasons, full or incremental, proxies, duration).
    pub fn push_log(&self) -> &crate::push_log::PushLog {
        &self.push_log
    }

    /// How many merged pushes ran.
    pub fn push_count(&self) -> u64 {
        self.pushes.load(Ordering::Relaxed)
    }

    /// Runs the stores, waits for them to sync, builds the first snapshot, then debounces and pushes
    /// until `shutdown`.
    pub async fn run(self: Arc<Self>, shutdown: Shutdown) {
        tokio::spawn(self.store.run(shutdown.clone()));
        let mut stop = shutdown.clone();
        let started = Instant::now();
        let mut warned = false;
        while !(self.store.has_synced() && self.services.has_synced()) {
            if stop.is_shutdown() {
                return;
            }
            if !warned && started.elapsed() > Duration::from_secs(10) {
                // Every source may have synced while the aggregate still delivers what they sent.
                let config = match self.store.not_synced_reason() {
                    Some(reason) => reason,
                    None if self.store.has_synced() => "synced".to_string(),
                    None => "its sources' events are still being delivered".to_string(),
                };
                let services = self.services.has_synced();
                warn!(
                    config = config.as_str(),
                    services = if services { "synced" } else { "not synced" },
                    "config or service registry not synced after 10s; still waiting"
                );
                warned = true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if let Some(jwks) = &self.jwks {
            tokio::spawn(push_on_jwks_changes(Arc::downgrade(&self), jwks.subscribe(), shutdown.clone()));
        }
        // Changes sent while syncing are all in the first snapshot (mesh settings and cluster objects
        // applied now; the requests need no push of their own).
        let _ = self.apply(self.inputs.take());
        self.clone().push(PushRequest::forced(TriggerReason::Global)).await;
        info!(version = ?self.push_context().map(|p| p.version().to_string()), "discovery server ready");
        self.debounce(stop.clone()).await;
        stop.wait().await;
    }

    /// The debounce loop ([`crate::debounce`]): Istio's rule for bursts (a batch is pushed once no
    /// event came for `after`, or `max` after its first event), plus a leading edge: a change after a
    /// quiet period is pushed at once. One push runs at a time (the loop awaits it); events keep
    /// merging into the inbox meanwhile.
    async fn debounce(self: Arc<Self>, mut shutdown: Shutdown) {
        let opts = self.options;
        let mut rule = Debouncer::new(opts.after, opts.max, opts.leading_edge);
        let mut pending: Option<PushRequest> = None;
        loop {
            let deadline = rule.deadline();
            tokio::select! {
                () = self.inputs.notified() => {
                    let Some(request) = self.apply(self.inputs.take()) else { continue };
                    if !opts.eds_debounce && pending.is_none() && request.is_endpoints_only() {
                        self.clone().push(request).await;
                        continue;
                    }
                    match rule.on_change(Instant::now()) {
                        Decision::PushNow => self.clone().push(request).await,
                        Decision::PushAt(_) => match pending.as_mut() {
                            Some(p) => p.merge_from(request),
                            None => pending = Some(request),
                        },
                    }
                }
                () = sleep_until(deadline) => {
                    rule.batch_pushed();
                    if let Some(request) = pending.take() {
                        self.clone().push(request).await;
                    }
                }
                () = shutdown.wait() => return,
            }
        }
    }

    /// One merged push: a new snapshot (incremental for endpoint-only changes), then the connections
    /// the change can matter to.
    async fn push(self: Arc<Self>, mut request: PushRequest) {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let version = format!("{}/{n}", xds::debug::rfc3339_nano(Some(SystemTime::now())));
        let previous = self.push_context();
        let endpoints_only = request.is_endpoints_only() && previous.is_some();
        let this = self.clone();
        let changed: Vec<(String, String)> = request.endpoints_updated.iter().cloned().collect();
        let build_start = Instant::now();
        let built = tokio::task::spawn_blocking(move || {
            let discovery: &dyn model::ServiceDiscovery = this.services.as_ref();
            match previous {
                Some(prev) if endpoints_only => prev.with_endpoints(discovery, &changed, version),
                _ => {
                    let store: &dyn ConfigStore = this.store.as_ref();
                    // Before the build: an object changing meanwhile is credited to the next push.
                    this.tracking.record_push(store, &version);
                    PushContext::with_converters(
                        store,
                        discovery,
                        (*this.mesh()).clone(),
                        version,
                        &this.converters,
                    )
                }
            }
        })
        .await;
        let ctx = match built {
            Ok(ctx) => Arc::new(ctx),
            Err(e) => {
                warn!("building the push context failed: {e}; keeping the previous one");
                return;
            }
        };
        metrics::histogram!(m::PUSHCONTEXT_INIT).record(build_start.elapsed().as_secs_f64());
        self.current.send_replace(Some(ctx.clone()));
        for (reason, count) in &request.reasons {
            metrics::counter!(m::PUSH_TRIGGERS, "type" => reason.as_str()).increment(u64::from(*count));
        }
        metrics::histogram!(m::DEBOUNCE_TIME).record(request.start.elapsed().as_secs_f64());
        self.pushes.fetch_add(1, Ordering::Relaxed);
        request.push = Some(ctx.clone());
        let sent = self.connections.push_where(
            |proxy| {
                // MCP clients: every change may be a config type they watch.
                proxy.uses_api_generator()
                    || ProxyKind::of(proxy.node_type).is_some_and(|k| proxy_needs_push(&request, k))
            },
            request.clone(),
        );
        self.push_log.record_push(ctx.version(), &request, !endpoints_only, sent, build_start);
        let connected: std::collections::HashSet<String> =
            self.connections.handles().iter().map(|h| h.proxy().node_id.clone()).collect();
        self.tracking.retain_proxies(|id| connected.contains(id));
        info!(
            version = ctx.version(),
            configs = request.configs_updated.len(),
            endpoints = request.endpoints_updated.len(),
            endpoints_only,
            forced = request.forced,
            connections = sent,
            "push"
        );
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
