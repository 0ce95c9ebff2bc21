//! The two wire protocols of an ADS stream (Envoy's xDS protocol doc: "State of the World" and
//! "Incremental" variants): each [`Wire`] implementation holds its session state machine
//! ([`SotwSession`] / [`DeltaSession`]) and response channel, steps it with a request, and turns
//! generated resources into its response message. What the two share — logging and counting what a
//! request was (ACK, NACK, stale nonce), convergence, answering, EDS after CDS — is written once in
//! [`Connection::on_request`].

use std::{collections::BTreeSet, sync::Arc, time::Instant};

use envoy_types::pb::envoy::config::core::v3::ControlPlane;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
    Resource as ProtoResource,
};
use tracing::{debug, info, warn};

use crate::{
    delta::{self, DeltaSession},
    metrics,
    registry::Entry,
    server::Outbox,
    server::{Connection, End, Sent, StreamLimits, content_hash, next_nonce, trigger_label},
    sotw::{self, SentResponse, SotwSession},
    source::{Generated, Resource, ResourceSource, Trigger, Variant, Watch},
    type_url::{self, CLUSTER, ENDPOINT, short_name},
};

/// What a request was, in the terms both protocols share.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The first request for the type (or a restart of it).
    Initial,
    /// The client accepted the response with `nonce`.
    Ack { nonce: String },
    /// The client rejected the response with `nonce` (`current`: it was the latest sent).
    Nack { nonce: String, message: String, current: bool },
    /// A nonce that is not awaited: ignored.
    Stale { nonce: String },
    /// SotW: the client stopped watching the type.
    Unsubscribe,
    /// Delta: a subscription change without a nonce.
    Subscription,
}

/// One request applied to a session: its type, what it was, protocol detail for the log line, and
/// the response due (protocol specific).
pub(crate) struct Step<D> {
    type_url: String,
    answer: Answer,
    detail: String,
    respond: Option<D>,
}

/// One wire protocol's half of a stream: its session state, its response channel, and how it steps
/// a request and sends a type. [`Connection::on_request`], [`Connection::run`] and
/// [`Connection::push`] are the parts common to SotW and Delta.
pub(crate) trait Wire<S: ResourceSource>: Send {
    /// The protocol's request message.
    type Request: prost::Message + Default + Send + 'static;
    /// The response a request calls for.
    type Due: Send;

    /// `Err` with the status ending the stream when `req` would take the stream over `limits`
    /// (checked before the session is stepped, so nothing of it is kept).
    fn check_limits(&self, req: &Self::Request, limits: &StreamLimits) -> Result<(), tonic::Status>;

    /// Steps the session with `req` (ACK/NACK bookkeeping, subscription changes).
    fn step(&mut self, req: &Self::Request) -> Step<Self::Due>;

    /// Copies the session's view of `type_url` into the registry entry (`/debug/syncz`).
    fn mirror_type(&self, entry: &Entry<S::Node, S::Push>, type_url: &str);

    /// The subscribed types in push order.
    fn watched_types(&self) -> Vec<String>;

    /// Whether the client has yet to answer the latest response of an Envoy type (flow control).
    fn awaits_answer(&self) -> bool;

    /// Ends the response stream with `status` (when there is room in its queue).
    fn close_with(&self, status: tonic::Status);

    /// Sends the response `due` to a request for `type_url`.
    async fn answer(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        due: Self::Due,
    ) -> Result<Option<Sent>, End>;

    /// Generates and sends `type_url` for the type's current subscription (a push); `None` when
    /// nothing was sent.
    async fn send_current(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        trigger: Trigger<'_, S::Push>,
    ) -> Result<Option<Sent>, End>;

    /// EDS right after a CDS response that carried clusters ([`Sent::eds_names`]), as its
    /// dependency, in one response: SotW sends the watched assignments plus those of the new
    /// clusters (before Envoy asks for them); Delta sends the assignments of the added or changed
    /// clusters the client subscribes to (even unchanged ones: a changed cluster warms until they
    /// arrive) plus whatever else changed, or, with no such cluster, what `push` changes.
    async fn send_dependency(
        &mut self,
        conn: &mut Connection<S>,
        eds_names: &BTreeSet<String>,
        push: Option<&S::Push>,
    ) -> Result<Option<Sent>, End>;
}

/// The EDS service names of the EDS clusters among CDS `resources` (`eds_cluster_config.service_name`,
/// else the cluster name); resources that do not decode as clusters are skipped.
pub(crate) fn eds_service_names<'a>(resources: impl IntoIterator<Item = &'a Resource>) -> BTreeSet<String> {
    use envoy_types::pb::envoy::config::cluster::v3::{
        Cluster,
        cluster::{ClusterDiscoveryType, DiscoveryType},
    };
    use prost::Message;
    resources
        .into_iter()
        .filter_map(|r| Cluster::decode(r.body.value.as_slice()).ok())
        .filter(|c| c.cluster_discovery_type == Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)))
        .map(|c| match c.eds_cluster_config {
            Some(e) if !e.service_name.is_empty() => e.service_name,
            _ => c.name,
        })
        .collect()
}

impl<S: ResourceSource> Connection<S> {
    /// Handles one request of either protocol: logs and counts what it was, tracks convergence,
    /// mirrors the state for `/debug/syncz`, answers if an answer is due, and follows CDS with EDS
    /// (Envoy needs the endpoints to finish warming new clusters).
    pub(crate) async fn on_request<W: Wire<S>>(&mut self, wire: &mut W, req: &W::Request) -> Result<(), End> {
        wire.check_limits(req, self.limits()).map_err(End::Refused)?;
        let Step { type_url, answer, detail, respond } = wire.step(req);
        let type_url = type_url.as_str();
        let short = short_name(type_url);
        match answer {
            Answer::Initial => debug!(connection = %self.id(), "{short}: initial request{detail}"),
            Answer::Ack { nonce } => {
                debug!(connection = %self.id(), %nonce, "{short}: ACK{detail}");
                self.answered(type_url, &nonce, true);
            }
            Answer::Nack { nonce, message, current } => {
                if let Some(suppressed) = self.nack_log.admit(std::time::Instant::now()) {
                    let (nonce, message) =
                        (NackLog::clip(&nonce, 64), NackLog::clip(&message, NackLog::MAX_MESSAGE_BYTES));
                    warn!(connection = %self.id(), %nonce, current, suppressed, "{short}: NACK{detail}: {message}");
                }
                metrics::record_reject(type_url);
                self.entry().update_type(type_url, |s| s.rejects += 1);
                self.answered(type_url, &nonce, false);
            }
            Answer::Stale { nonce } => {
                debug!(connection = %self.id(), %nonce, "{short}: expired nonce, ignored");
                metrics::record_expired_nonce(type_url);
                // Nothing changed: no mirroring (a flood of them costs one lookup each).
                return Ok(());
            }
            Answer::Unsubscribe => {
                debug!(connection = %self.id(), "{short}: unsubscribed");
                self.entry().remove_type(type_url);
                return Ok(());
            }
            Answer::Subscription => debug!(connection = %self.id(), "{short}: subscription change{detail}"),
        }
        wire.mirror_type(self.entry(), type_url);
        let Some(due) = respond else { return Ok(()) };
        let sent = wire.answer(self, type_url, due).await?;
        if let Some(sent) = sent.filter(|s| type_url == CLUSTER && s.resources > 0) {
            wire.send_dependency(self, &sent.eds_names, None).await?;
        }
        Ok(())
    }
}

/// State-of-the-world half of a stream.
pub(crate) struct SotwWire {
    pub(crate) session: SotwSession,
    pub(crate) tx: Outbox<DiscoveryResponse>,
}

impl<S: ResourceSource> Wire<S> for SotwWire {
    type Request = DiscoveryRequest;
    type Due = Watch;

    fn check_limits(&self, req: &DiscoveryRequest, limits: &StreamLimits) -> Result<(), tonic::Status> {
        limits.check_names(&req.type_url, req.resource_names.len())?;
        // A request for a type not watched yet starts a watch, unless it is an unsubscribe (no names
        // for a type without wildcard).
        let starts_watch = self.session.get(&req.type_url).is_none()
            && (type_url::is_wildcard_type(&req.type_url) || !req.resource_names.is_empty());
        if starts_watch {
            limits.check_new_type(&req.type_url, self.session.watched_types().len())?;
        }
        Ok(())
    }

    fn step(&mut self, req: &DiscoveryRequest) -> Step<Watch> {
        let outcome = self.session.on_request(&sotw::SotwRequest::from_proto(req));
        let (answer, detail) = match outcome.verdict {
            sotw::Verdict::Initial => (Answer::Initial, format!(" ({} names)", req.resource_names.len())),
            sotw::Verdict::Ack { nonce, version } => (Answer::Ack { nonce }, format!(" (version {version})")),
            sotw::Verdict::Nack { nonce, version, message, current } => {
                (Answer::Nack { nonce, message, current }, format!(" (running version {version})"))
            }
            sotw::Verdict::Stale { nonce } => (Answer::Stale { nonce }, String::new()),
            sotw::Verdict::Unsubscribe => (Answer::Unsubscribe, String::new()),
        };
        Step { type_url: req.type_url.clone(), answer, detail, respond: outcome.respond.map(|r| r.watch) }
    }

    fn mirror_type(&self, entry: &Entry<S::Node, S::Push>, type_url: &str) {
        self.mirror(entry, type_url);
    }

    fn close_with(&self, status: tonic::Status) {
        self.tx.close_with(status);
    }

    fn watched_types(&self) -> Vec<String> {
        self.session.watched_types()
    }

    fn awaits_answer(&self) -> bool {
        self.session.awaits_answer()
    }

    async fn answer(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        watch: Watch,
    ) -> Result<Option<Sent>, End> {
        self.send(conn, type_url, &watch, Trigger::Request, BTreeSet::new()).await
    }

    async fn send_current(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        trigger: Trigger<'_, S::Push>,
    ) -> Result<Option<Sent>, End> {
        let Some(watch) = self.session.get(type_url).map(|t| t.watch.clone()) else { return Ok(None) };
        self.send(conn, type_url, &watch, trigger, BTreeSet::new()).await
    }

    async fn send_dependency(
        &mut self,
        conn: &mut Connection<S>,
        eds_names: &BTreeSet<String>,
        _push: Option<&S::Push>,
    ) -> Result<Option<Sent>, End> {
        let Some(current) = self.session.get(ENDPOINT).map(|t| Arc::clone(&t.watch)) else { return Ok(None) };
        let unsolicited: BTreeSet<String> =
            eds_names.iter().filter(|n| !current.covers(n)).cloned().collect();
        if unsolicited.is_empty() {
            // The watch as it is: no copy of its names (a client may watch thousands).
            return self.send(conn, ENDPOINT, &current, Trigger::Dependency, unsolicited).await;
        }
        let mut watch = (*current).clone();
        watch.names.extend(unsolicited.iter().cloned());
        self.send(conn, ENDPOINT, &watch, Trigger::Dependency, unsolicited).await
    }
}

impl SotwWire {
    /// Generates `type_url` for `watch` and sends it unless nothing is due (see the rules inline).
    async fn send<S: ResourceSource>(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        watch: &Watch,
        trigger: Trigger<'_, S::Push>,
        unsolicited: BTreeSet<String>,
    ) -> Result<Option<Sent>, End> {
        let t0 = Instant::now();
        let is_request = matches!(trigger, Trigger::Request);
        let full_state = type_url::sotw_requires_full_state(type_url);
        let generated = match conn.generate(Variant::Sotw, type_url, watch, trigger)? {
            Some(g) => g,
            // Answer a request even without resources, where an empty response changes nothing.
            None if is_request && !full_state => Generated::full(
                self.session
                    .get(type_url)
                    .and_then(|t| t.sent.as_ref())
                    .map(|s| s.version.clone())
                    .unwrap_or_default(),
                Vec::new(),
            ),
            None => return Ok(None),
        };
        if generated.removed.is_some() && full_state {
            warn!(
                connection = %conn.id(),
                "{}: source returned an incremental result; SotW needs the complete set, not sending",
                short_name(type_url)
            );
            metrics::record_internal_error();
            return Ok(None);
        }
        let content = content_hash(&generated.resources);
        if !is_request && self.session.is_rejected_content(type_url, content) {
            debug!(connection = %conn.id(), "{}: not re-sending the config the proxy rejected", short_name(type_url));
            return Ok(None);
        }
        // A push that would repeat the last response byte for byte (same names, same resources) is
        // not sent: the proxy would change nothing. Istio sends it anyway; here it is the EDS of a
        // new service's push, whose new cluster the proxy asks for right after the CDS update. Requests
        // and dependencies (EDS after CDS, which Envoy needs to finish warming a cluster) are always
        // answered.
        if matches!(trigger, Trigger::Push(_))
            && self
                .session
                .get(type_url)
                .and_then(|t| t.sent.as_ref())
                .is_some_and(|sent| sent.content == content)
        {
            debug!(connection = %conn.id(), "{}: push changes nothing for this proxy, not sent", short_name(type_url));
            return Ok(None);
        }
        let nonce = next_nonce();
        let count = generated.resources.len();
        let bytes: usize = generated.resources.iter().map(|r| r.body.value.len()).sum();
        // The new clusters: those whose endpoints the client does not watch yet.
        let eds_names = match self.session.get(ENDPOINT) {
            Some(eds) if type_url == CLUSTER => {
                eds_service_names(generated.resources.iter().filter(|r| !eds.watch.covers(&r.name)))
                    .into_iter()
                    .filter(|n| !eds.watch.covers(n))
                    .collect()
            }
            _ => BTreeSet::new(),
        };
        let version = generated.version;
        let response = DiscoveryResponse {
            version_info: version.clone(),
            resources: generated.resources.into_iter().map(|r| r.body).collect(),
            type_url: type_url.to_owned(),
            nonce: nonce.clone(),
            control_plane: generated.control_plane.map(control_plane),
            ..Default::default()
        };
        conn.send_on(&self.tx, response, type_url).await?;
        self.session.on_sent(
            type_url,
            SentResponse {
                nonce: nonce.clone(),
                version: version.clone(),
                content,
                resources: count,
                unsolicited,
            },
        );
        metrics::record_push(type_url, t0.elapsed(), bytes);
        self.mirror(conn.entry(), type_url);
        conn.count_sent(type_url, count, bytes);
        info!(
            connection = %conn.id(), %nonce, %version,
            "{}: PUSH{} resources:{count} size:{bytes}B",
            short_name(type_url), trigger_label(&trigger)
        );
        Ok(Some(Sent { nonce, resources: count, eds_names }))
    }

    /// Copies the session's view of `type_url` into the registry entry (`/debug/syncz`).
    fn mirror<N, P>(&self, entry: &Entry<N, P>, type_url: &str) {
        let Some(t) = self.session.get(type_url) else { return };
        entry.update_type(type_url, |s| {
            s.watch = Arc::clone(&t.watch);
            s.state = t.state;
            if let Some(sent) = &t.sent {
                s.nonce_sent.clone_from(&sent.nonce);
                s.version_sent.clone_from(&sent.version);
            }
            if let Some((nonce, version)) = &t.acked {
                s.nonce_acked.clone_from(nonce);
                s.version_acked.clone_from(version);
            }
            s.last_error = t.last_error.as_ref().map(|e| e.message.clone());
        });
    }
}

/// What a Delta request calls for: the names to generate, whether they are the whole subscription,
/// and whether to answer even with nothing (initial requests).
pub(crate) struct DeltaDue {
    watch: Watch,
    full: bool,
    always: bool,
}

impl DeltaDue {
    /// The whole subscription `watch`, sent only if something changed (a push).
    fn current(watch: Watch) -> Self {
        DeltaDue { watch, full: true, always: false }
    }
}

/// Incremental (delta) half of a stream.
pub(crate) struct DeltaWire {
    pub(crate) session: DeltaSession,
    pub(crate) tx: Outbox<DeltaDiscoveryResponse>,
}

impl<S: ResourceSource> Wire<S> for DeltaWire {
    type Request = DeltaDiscoveryRequest;
    type Due = DeltaDue;

    fn check_limits(&self, req: &DeltaDiscoveryRequest, limits: &StreamLimits) -> Result<(), tonic::Status> {
        let current = self.session.get(&req.type_url);
        let watched = current.map_or(0, |t| t.subscription.names.len());
        limits.check_names(&req.type_url, watched.saturating_add(req.resource_names_subscribe.len()))?;
        limits.check_names(&req.type_url, req.initial_resource_versions.len())?;
        if current.is_none() {
            limits.check_new_type(&req.type_url, self.session.watched_types().len())?;
        }
        Ok(())
    }

    fn step(&mut self, req: &DeltaDiscoveryRequest) -> Step<DeltaDue> {
        let outcome = self.session.on_request(&delta::DeltaRequest::from_proto(req));
        let always = matches!(outcome.verdict, delta::Verdict::Initial { .. });
        let (answer, detail) = match outcome.verdict {
            delta::Verdict::Initial { known } => (
                Answer::Initial,
                format!(" ({} subscribed, {known} known)", req.resource_names_subscribe.len()),
            ),
            delta::Verdict::Ack { nonce } => (Answer::Ack { nonce }, String::new()),
            delta::Verdict::Nack { nonce, message, current } => {
                (Answer::Nack { nonce, message, current }, String::new())
            }
            delta::Verdict::Stale { nonce } => (Answer::Stale { nonce }, String::new()),
            delta::Verdict::Subscription => (
                Answer::Subscription,
                format!(
                    " (subscribe {}, unsubscribe {} names)",
                    req.resource_names_subscribe.len(),
                    req.resource_names_unsubscribe.len()
                ),
            ),
        };
        let respond = outcome.respond.map(|r| DeltaDue { watch: r.watch, full: r.full, always });
        Step { type_url: req.type_url.clone(), answer, detail, respond }
    }

    fn mirror_type(&self, entry: &Entry<S::Node, S::Push>, type_url: &str) {
        self.mirror(entry, type_url);
    }

    fn close_with(&self, status: tonic::Status) {
        self.tx.close_with(status);
    }

    fn watched_types(&self) -> Vec<String> {
        self.session.watched_types()
    }

    fn awaits_answer(&self) -> bool {
        self.session.awaits_answer()
    }

    async fn answer(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        due: DeltaDue,
    ) -> Result<Option<Sent>, End> {
        self.send(conn, type_url, &due, Trigger::Request, &BTreeSet::new()).await
    }

    async fn send_current(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        trigger: Trigger<'_, S::Push>,
    ) -> Result<Option<Sent>, End> {
        let Some(watch) = self.session.get(type_url).map(|t| t.subscription.clone()) else { return Ok(None) };
        self.send(conn, type_url, &DeltaDue::current(watch), trigger, &BTreeSet::new()).await
    }

    async fn send_dependency(
        &mut self,
        conn: &mut Connection<S>,
        eds_names: &BTreeSet<String>,
        push: Option<&S::Push>,
    ) -> Result<Option<Sent>, End> {
        let Some(due) = self.session.get(ENDPOINT).map(|t| DeltaDue::current(t.subscription.clone())) else {
            return Ok(None);
        };
        let watch = &due.watch;
        // New clusters' assignments are not subscribed yet: Envoy asks for them, and is answered.
        let force: BTreeSet<String> = eds_names.iter().filter(|n| watch.covers(n)).cloned().collect();
        if force.is_empty() {
            return match push {
                Some(p) => self.send(conn, ENDPOINT, &due, Trigger::Push(p), &force).await,
                None => Ok(None),
            };
        }
        self.send(conn, ENDPOINT, &due, Trigger::Dependency, &force).await
    }
}

impl DeltaWire {
    /// Generates `type_url` for `due.watch` and sends what changed for the client (`due.full`: the
    /// watch is the whole subscription, so resources missing from the result are removed; `due.always`
    /// sends even an empty response, the answer to an initial request), plus the `force`d names even
    /// if the client holds their versions.
    async fn send<S: ResourceSource>(
        &mut self,
        conn: &mut Connection<S>,
        type_url: &str,
        due: &DeltaDue,
        trigger: Trigger<'_, S::Push>,
        force: &BTreeSet<String>,
    ) -> Result<Option<Sent>, End> {
        let DeltaDue { watch, full, always } = due;
        let (watch, full, always) = (watch, *full, *always);
        let t0 = Instant::now();
        let is_request = matches!(trigger, Trigger::Request);
        let generated = match conn.generate(Variant::Delta, type_url, watch, trigger)? {
            Some(g) => g,
            // Nothing from the source changes nothing for the client.
            None if always => Generated::incremental(String::new(), Vec::new(), Vec::new()),
            None => return Ok(None),
        };
        let version = generated.version.clone();
        let control_plane_id = generated.control_plane.clone();
        let report_missing = is_request && type_url::delta_reports_missing(type_url);
        let plan = self.session.plan_forcing(
            type_url,
            watch,
            full,
            generated,
            |n| force.contains(n),
            report_missing,
        );
        if plan.is_empty() && !always {
            debug!(connection = %conn.id(), "{}: nothing changed for this proxy", short_name(type_url));
            return Ok(None);
        }
        let nonce = next_nonce();
        let count = plan.resources.len();
        let bytes: usize = plan.resources.iter().map(|r| r.body.value.len()).sum();
        let eds_names =
            if type_url == CLUSTER { eds_service_names(&plan.resources) } else { BTreeSet::new() };
        let response = DeltaDiscoveryResponse {
            system_version_info: version.clone(),
            resources: plan
                .resources
                .iter()
                .map(|r| ProtoResource {
                    name: r.name.clone(),
                    version: r.version.clone(),
                    resource: Some(r.body.clone()),
                    ..Default::default()
                })
                .collect(),
            type_url: type_url.to_owned(),
            removed_resources: plan.removed.clone(),
            nonce: nonce.clone(),
            control_plane: control_plane_id.map(control_plane),
            ..Default::default()
        };
        conn.send_on(&self.tx, response, type_url).await?;
        self.session.on_sent(type_url, &nonce, &version, &plan);
        metrics::record_push(type_url, t0.elapsed(), bytes);
        self.mirror(conn.entry(), type_url);
        conn.count_sent(type_url, count, bytes);
        info!(
            connection = %conn.id(), %nonce, %version,
            "{}: PUSH{} resources:{count} removed:{} size:{bytes}B",
            short_name(type_url), trigger_label(&trigger), plan.removed.len()
        );
        Ok(Some(Sent { nonce, resources: count, eds_names }))
    }

    /// Copies the session's view of `type_url` into the registry entry (`/debug/syncz`).
    fn mirror<N, P>(&self, entry: &Entry<N, P>, type_url: &str) {
        let Some(t) = self.session.get(type_url) else { return };
        entry.update_type(type_url, |s| {
            if *s.watch != t.subscription {
                s.watch = Arc::new(t.subscription.clone());
            }
            s.state = t.state;
            if let Some((nonce, version)) = &t.last_sent {
                s.nonce_sent.clone_from(nonce);
                s.version_sent.clone_from(version);
            }
            if let Some((nonce, version)) = &t.last_acked {
                s.nonce_acked.clone_from(nonce);
                s.version_acked.clone_from(version);
            }
            s.last_error = t.last_error.as_ref().map(|e| e.message.clone());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::{
        Cluster,
        cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig},
    };

    fn cluster(name: &str, kind: DiscoveryType, service_name: &str) -> Resource {
        Resource::new(
            name,
            &Cluster {
                name: name.into(),
                cluster_discovery_type: Some(ClusterDiscoveryType::Type(kind as i32)),
                eds_cluster_config: Some(EdsClusterConfig {
                    service_name: service_name.into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
    }

    #[test]
    fn eds_names_are_those_of_eds_clusters() {
        let rs = [
            cluster("outbound|80||a", DiscoveryType::Eds, ""),
            cluster("outbound|80||b", DiscoveryType::Eds, "b-eds"),
            cluster("PassthroughCluster", DiscoveryType::OriginalDst, ""),
            cluster("inbound|8080||", DiscoveryType::Static, ""),
        ];
        assert_eq!(
            eds_service_names(&rs),
            ["outbound|80||a".to_owned(), "b-eds".to_owned()].into_iter().collect::<BTreeSet<_>>()
        );
    }
}

/// Bounds one stream's NACK log lines: a client's `error_detail` is its own text, so a client that
/// NACKs in a loop (or sends 30 KiB of garbage per NACK) would write the log without limit. A stream
/// logs at most [`NackLog::BURST`] NACKs at once and then one per [`NackLog::INTERVAL`]; each line is
/// cut to [`NackLog::MAX_MESSAGE_BYTES`] and says how many NACKs were left out before it. Every NACK
/// still counts in `pilot_total_xds_rejects` and in `/debug/syncz`.
#[derive(Debug, Clone, Default)]
pub(crate) struct NackLog {
    tokens: Option<(u32, std::time::Instant)>,
    suppressed: u64,
}

impl NackLog {
    /// NACK lines a stream may log at once.
    pub(crate) const BURST: u32 = 5;
    /// A new line is allowed this often after the burst.
    pub(crate) const INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);
    /// Longest NACK message logged, in bytes.
    pub(crate) const MAX_MESSAGE_BYTES: usize = 1024;

    /// `text` (the client's, untrusted) as a log line quotes it: cut at a character boundary to at
    /// most `max` bytes, with the full length noted when cut.
    pub(crate) fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
        if text.len() <= max {
            return text.into();
        }
        let end = (0..=max).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        format!("{}… ({} bytes)", &text[..end], text.len()).into()
    }

    /// `Some(left out since the last line)` if a NACK at `now` may be logged, else `None` (counted).
    pub(crate) fn admit(&mut self, now: std::time::Instant) -> Option<u64> {
        let (tokens, since) = self.tokens.get_or_insert((Self::BURST, now));
        let refill = now.saturating_duration_since(*since).as_secs() / Self::INTERVAL.as_secs();
        if refill > 0 {
            *tokens = (*tokens).saturating_add(u32::try_from(refill).unwrap_or(u32::MAX)).min(Self::BURST);
            *since = now;
        }
        if *tokens == 0 {
            self.suppressed += 1;
            return None;
        }
        *tokens -= 1;
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod nack_log_tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn nack_lines_are_rate_limited_per_stream() {
        let mut log = NackLog::default();
        let t0 = Instant::now();
        for _ in 0..NackLog::BURST {
            assert_eq!(log.admit(t0), Some(0));
        }
        assert_eq!(log.admit(t0), None);
        assert_eq!(log.admit(t0 + Duration::from_secs(9)), None);
        assert_eq!(log.admit(t0 + NackLog::INTERVAL), Some(2), "the next line counts what was left out");
        assert_eq!(log.admit(t0 + NackLog::INTERVAL), None);
    }
}

/// Envoy's `config.core.v3.ControlPlane` with `identifier` ([`Generated::control_plane`]).
fn control_plane(identifier: String) -> ControlPlane {
    ControlPlane { identifier }
}
