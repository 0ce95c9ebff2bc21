//! Routes: parent references (which listeners a route attaches to, and why not), the VirtualServices
//! built per parent and hostname (merged across routes for HTTP and gRPC), and route statuses
//! (Istio's `computeRoute`, `extractParentReferenceInfo`, `referenceAllowed`, `createRouteStatus`,
//! `mergeHTTPRoutes`).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
};

use api::{
    Kind, Spec,
    gateway_api::{
        BackendRef, GROUP, ISTIO_CONTROLLER, ParentReference,
        gateway::RouteGroupKind,
        status::{RouteParentStatus, RouteStatus},
    },
    networking::{
        VirtualService,
        virtual_service::{
            Destination, HttpMatchRequest, HttpRoute, L4MatchAttributes, PortSelector, RouteDestination,
            TcpRoute, TlsMatchAttributes, TlsRoute,
        },
    },
};
use model::{Config, host, push::ObjectStatus};

use crate::{
    Ctx, Fits, KUBERNETES_GATEWAY_NAME, Output, PARENTS_ANNOTATION, ROUTE_SEMANTICS_ANNOTATION,
    Representable,
    gateway::{Gateways, ParentInfo},
    http::{RuleResult, convert_grpc_rule, convert_http_rule, sort_http_routes},
    istio_config, parent_meta,
    refs::is_invalid_backend,
    status::{ConfigError, Wanted, conditions},
    unsigned,
};

const MESH: &str = "mesh";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ParentKind {
    Gateway,
    Service,
    ServiceEntry,
}

/// A route's reference resolved against one parent listener (Istio's `routeParentReference`).
#[derive(Clone, Debug)]
struct RouteParent {
    internal_name: String,
    kind: ParentKind,
    /// The listener's hostname.
    hostname: String,
    denied: Option<ConfigError>,
    original: ParentReference,
    banned_hostnames: BTreeSet<String>,
    gateway: Option<(String, String)>,
    section: String,
}

impl RouteParent {
    fn is_mesh(&self) -> bool {
        self.internal_name == MESH
    }

    /// Istio's `hostnameAllowedByIsolation`: a route host more specific to another listener of the
    /// same port goes to that listener only.
    fn hostname_allowed(&self, route_host: &str) -> bool {
        let ours = self.hostname.as_str();
        if !ours.is_empty() && !host::is_wildcard(ours) {
            return true;
        }
        if !ours.is_empty() && !host::matches(route_host, ours) {
            return false;
        }
        !self
            .banned_hostnames
            .iter()
            .any(|other| ours.len() <= other.len() && host::subset_of(route_host, other))
    }
}

/// `group/kind/name/section/port.namespace` (Istio's `parentRefString`).
fn parent_ref_string(r: &ParentReference, namespace: &str) -> String {
    format!(
        "{}/{}/{}/{}/{}.{}",
        r.group_or_default(),
        r.kind_or_default(),
        r.name,
        r.section_name.as_deref().unwrap_or_default(),
        r.port.unwrap_or(0),
        r.namespace.as_deref().unwrap_or(namespace)
    )
}

fn mesh_parent() -> ParentInfo {
    let kind = |k: &str| RouteGroupKind { group: Some(GROUP.to_string()), kind: k.to_string() };
    ParentInfo {
        internal_name: MESH.to_string(),
        allowed_kinds: vec![kind("HTTPRoute"), kind("TCPRoute"), kind("GRPCRoute"), kind("TLSRoute")],
        hostnames: vec![],
        original_hostname: String::new(),
        section_name: String::new(),
        port: 0,
        protocol: String::new(),
    }
}

/// Istio's `referenceAllowed`: why `route` may not attach to `parent` (None: it may).
#[allow(clippy::too_many_arguments)]
fn reference_allowed(
    ctx: &Ctx<'_>,
    parent: &ParentInfo,
    route_kind: Kind,
    kind: ParentKind,
    (ns, name, section, port): (&str, &str, &str, i32),
    hostnames: &[String],
    local_namespace: &str,
) -> Option<ConfigError> {
    match kind {
        ParentKind::Service => {
            if !ctx.kube_service_exists(ns, name) {
                return Some(ConfigError::new(
                    "NoMatchingParent",
                    format!("parent service: {name:?} not found"),
                ));
            }
        }
        ParentKind::ServiceEntry => {
            if ctx.input.store.get(Kind::ServiceEntry, ns, name).is_none() {
                return Some(ConfigError::new(
                    "NoMatchingParent",
                    format!("parent service entry: {name:?} not found"),
                ));
            }
        }
        ParentKind::Gateway => {
            if port != 0 && port != parent.port {
                return Some(ConfigError::new("NoMatchingParent", format!("port {port} not found")));
            }
            if !section.is_empty() && section != parent.section_name {
                return Some(ConfigError::new(
                    "NoMatchingParent",
                    format!("sectionName {section:?} not found"),
                ));
            }
            let star = ["*".to_string()];
            let hostnames = if hostnames.is_empty() { &star[..] } else { hostnames };
            if !parent.hostnames.is_empty() {
                let mut matched = false;
                let mut host_matched = false;
                'out: for route_host in hostnames {
                    for parent_host in &parent.hostnames {
                        let (pns, phost) = parent_host.split_once('/').unwrap_or(("*", parent_host));
                        let host_match = host::matches(phost, route_host);
                        host_matched |= host_match;
                        if host_match && (pns == "*" || pns == local_namespace) {
                            matched = true;
                            break 'out;
                        }
                    }
                }
                if !matched {
                    return Some(if host_matched {
                        ConfigError::new(
                            "NotAllowedByListeners",
                            format!(
                                "hostnames matched parent hostname {:?}, but namespace {local_namespace:?} is not allowed by the parent",
                                parent.original_hostname
                            ),
                        )
                    } else {
                        ConfigError::new(
                            "NoMatchingListenerHostname",
                            format!("no hostnames matched parent hostname {:?}", parent.original_hostname),
                        )
                    });
                }
            }
        }
    }
    let allowed = parent.allowed_kinds.iter().any(|k| {
        k.kind == route_kind.as_str() && k.group.as_deref().unwrap_or(GROUP) == route_kind.schema().group
    });
    if !allowed {
        let s = route_kind.schema();
        return Some(ConfigError::new(
            "NotAllowedByListeners",
            format!("kind {}/{}/{} is not allowed", s.group, s.version, route_kind.as_str()),
        ));
    }
    None
}

/// Istio's `extractParentReferenceInfo`.
fn parent_references(
    ctx: &Ctx<'_>,
    gateways: &Gateways,
    route: &Config,
    route_kind: Kind,
    refs: &[ParentReference],
    hostnames: &[String],
) -> Vec<RouteParent> {
    let local = route.meta.namespace.as_str();
    let mut out = Vec::new();
    let mesh = [mesh_parent()];
    for r in refs {
        let kind = match (r.group_or_default(), r.kind_or_default()) {
            (GROUP, "Gateway") => ParentKind::Gateway,
            ("", "Service") => ParentKind::Service,
            ("networking.istio.io", "ServiceEntry") => ParentKind::ServiceEntry,
            _ => continue,
        };
        let ns = r.namespace.as_deref().unwrap_or(local);
        let current: &[ParentInfo] = match kind {
            ParentKind::Gateway => {
                gateways.parents.get(&(ns.to_string(), r.name.clone())).map_or(&[], Vec::as_slice)
            }
            _ => &mesh,
        };
        let section = r.section_name.as_deref().unwrap_or_default();
        for p in current {
            let banned: BTreeSet<String> = current
                .iter()
                .filter(|g| !std::ptr::eq(*g, p) && g.port == p.port && g.protocol == p.protocol)
                .map(|g| g.original_hostname.clone())
                .filter(|h| h != &p.original_hostname)
                .collect();
            let denied = reference_allowed(
                ctx,
                p,
                route_kind,
                kind,
                (ns, &r.name, section, r.port.unwrap_or(0)),
                hostnames,
                local,
            );
            out.push(RouteParent {
                internal_name: p.internal_name.clone(),
                kind,
                hostname: p.original_hostname.clone(),
                denied,
                original: r.clone(),
                banned_hostnames: banned,
                gateway: (kind == ParentKind::Gateway).then(|| (ns.to_string(), r.name.clone())),
                section: p.section_name.clone(),
            });
        }
    }
    out.sort_by_cached_key(|p| parent_ref_string(&p.original, local));
    out
}

/// Accepted references, by internal name (Istio's `filteredReferences`).
fn filtered(parents: &[RouteParent]) -> Vec<&RouteParent> {
    let mut out: Vec<&RouteParent> = parents.iter().filter(|p| p.denied.is_none()).collect();
    out.sort_by(|a, b| a.internal_name.cmp(&b.internal_name));
    out
}

/// Istio's `createRouteStatus` for a route with no prior status.
fn route_status(
    parents: &[RouteParent],
    gw_error: &Option<ConfigError>,
    mesh_error: &Option<ConfigError>,
    route: &Config,
) -> RouteStatus {
    let ns = &route.meta.namespace;
    let rank = |p: &RouteParent| match p.denied.as_ref().map(|d| d.reason.as_str()) {
        None => 0,
        Some("NotAllowedByListeners") => 1,
        Some("NoMatchingListenerHostname") => 2,
        Some("ParentRefConflict") => 3,
        Some("NoMatchingParent") => 4,
        Some(_) => 0,
    };
    let mut seen: Vec<(ParentReference, Vec<&RouteParent>)> = Vec::new();
    for p in parents {
        match seen.iter_mut().find(|(r, _)| r == &p.original) {
            Some((_, list)) => list.push(p),
            None => seen.push((p.original.clone(), vec![p])),
        }
    }
    let mut out = Vec::new();
    for (reference, results) in seen {
        let successes = results.iter().filter(|p| p.denied.is_none()).count();
        let mut report = results[0].clone();
        let mut best = rank(results[0]);
        for r in &results[1..] {
            let rr = rank(r);
            if rr < best {
                best = rr;
                report = (*r).clone();
            } else if rr == best {
                match (&mut report.denied, &r.denied) {
                    (None, d) => report.denied = d.clone(),
                    (Some(d), Some(other)) => d.message = format!("{}; {}", d.message, other.message),
                    (Some(_), None) => {}
                }
            }
        }
        let message = if successes > 1 {
            format!("Route was valid, bound to {successes} parents")
        } else {
            "Route was valid".to_string()
        };
        let mut wanted = BTreeMap::from([
            ("Accepted", Wanted::ok("Accepted", &message)),
            ("ResolvedRefs", Wanted::ok("ResolvedRefs", "All references resolved")),
        ]);
        let error = if report.is_mesh() { mesh_error } else { gw_error };
        if let Some(e) = error {
            wanted.get_mut("ResolvedRefs").expect("set above").error = Some(e.clone());
        }
        if let Some(d) = &report.denied {
            wanted.get_mut("Accepted").expect("set above").error = Some(d.clone());
        }
        out.push(RouteParentStatus {
            parent_ref: reference,
            controller_name: ISTIO_CONTROLLER.to_string(),
            conditions: conditions(route.meta.generation, &wanted),
        });
    }
    out.sort_by_cached_key(|p| std::cmp::Reverse(parent_ref_string(&p.parent_ref, ns)));
    RouteStatus { parents: out }
}

/// Runs `convert` over every rule (Istio's `convertRules`): a rejected rule drops them all.
fn convert_rules<T: Default>(
    results: impl Iterator<Item = RuleResult<T>>,
) -> (Fits<Vec<T>>, Option<ConfigError>) {
    let mut routes = Vec::new();
    let mut rep = Representable::default();
    let mut error = None;
    for (route, e) in results {
        match route {
            None => return (Ok(Vec::new()), e),
            Some(r) => {
                if e.is_some() {
                    error = e;
                }
                routes.push(rep.take(r));
            }
        }
    }
    (rep.finish(routes), error)
}

fn route_annotations(route: &Config) -> BTreeMap<String, String> {
    BTreeMap::from([
        (PARENTS_ANNOTATION.to_string(), parent_meta(route, None)),
        (ROUTE_SEMANTICS_ANNOTATION.to_string(), "gateway".to_string()),
    ])
}

/// A VirtualService before merging: its merge key and parts.
struct BaseVs {
    key: String,
    route: Arc<Config>,
    host: String,
    gateway: String,
    http: Fits<Vec<HttpRoute>>,
}

/// Hosts a mesh parent routes for: the Service's hostname or the ServiceEntry's hosts.
fn mesh_hosts(ctx: &Ctx<'_>, p: &RouteParent, route_ns: &str) -> Vec<String> {
    let ns = p.original.namespace.as_deref().unwrap_or(route_ns);
    match p.kind {
        ParentKind::ServiceEntry => {
            match ctx.input.store.get(Kind::ServiceEntry, ns, &p.original.name).map(|c| c.spec.clone()) {
                Some(Spec::ServiceEntry(se)) => se.hosts,
                _ => vec![],
            }
        }
        _ => vec![ctx.service_hostname(&p.original.name, ns)],
    }
}

/// Sets the port of a mesh parent on every match of the routes; a route without matches gets one.
fn with_port(routes: Vec<HttpRoute>, port: i32) -> Fits<Vec<HttpRoute>> {
    routes
        .into_iter()
        .map(|mut r| {
            let port = unsigned(port)?;
            if r.r#match.is_empty() {
                r.r#match = vec![HttpMatchRequest { port, ..Default::default() }];
            } else {
                r.r#match.iter_mut().for_each(|m| m.port = port);
            }
            Ok(r)
        })
        .collect()
}

fn record(gateways: &mut Gateways, parents: &[RouteParent], route: &Config) {
    for p in filtered(parents) {
        if let Some(gw) = &p.gateway
            && let Some(state) = gateways
                .states
                .iter_mut()
                .find(|s| s.config.meta.namespace == gw.0 && s.config.meta.name == gw.1)
        {
            state.attached.entry(p.section.clone()).or_default().insert(format!(
                "{}/{}",
                route.kind(),
                route.key()
            ));
        }
    }
}

fn push_status(out: &mut Output, route: &Config, status: RouteStatus) {
    out.statuses.push(ObjectStatus {
        key: route.key(),
        generation: route.meta.generation,
        status: serde_json::to_value(status).unwrap_or_default(),
    });
}

/// Converts every route; records attachments on `gateways`.
pub(crate) fn convert_routes(ctx: &Ctx<'_>, gateways: &mut Gateways, out: &mut Output) {
    let mut base: Vec<BaseVs> = Vec::new();
    for kind in [Kind::HTTPRoute, Kind::GRPCRoute] {
        for route in ctx.list(kind) {
            let (refs, hostnames) = match &route.spec {
                Spec::HTTPRoute(s) => (&s.parent_refs, &s.hostnames),
                Spec::GRPCRoute(s) => (&s.parent_refs, &s.hostnames),
                _ => continue,
            };
            let parents = parent_references(ctx, gateways, &route, kind, refs, hostnames);
            let need_mesh = parents.iter().any(RouteParent::is_mesh);
            let need_gw = parents.iter().any(|p| !p.is_mesh());
            let route_ref: &Config = &route;
            let run = |mesh: bool| -> (Fits<Vec<HttpRoute>>, Option<ConfigError>) {
                match &route_ref.spec {
                    Spec::HTTPRoute(s) => convert_rules(s.rules.iter().enumerate().flat_map(|(n, rule)| {
                        let matches: Vec<Option<&_>> = if rule.matches.is_empty() {
                            vec![None]
                        } else {
                            rule.matches.iter().map(Some).collect()
                        };
                        matches
                            .into_iter()
                            .map(move |m| convert_http_rule(ctx, rule, m, route_ref, n, !mesh))
                            .collect::<Vec<_>>()
                    })),
                    Spec::GRPCRoute(s) => convert_rules(s.rules.iter().enumerate().flat_map(|(n, rule)| {
                        let matches: Vec<Option<&_>> = if rule.matches.is_empty() {
                            vec![None]
                        } else {
                            rule.matches.iter().map(Some).collect()
                        };
                        matches
                            .into_iter()
                            .map(move |m| convert_grpc_rule(ctx, rule, m, route_ref, n, !mesh))
                            .collect::<Vec<_>>()
                    })),
                    _ => (Ok(Vec::new()), None),
                }
            };
            let (mesh_routes, mesh_error) = if need_mesh { run(true) } else { (Ok(Vec::new()), None) };
            let (gw_routes, gw_error) = if need_gw { run(false) } else { (Ok(Vec::new()), None) };
            let status = route_status(&parents, &gw_error, &mesh_error, &route);
            record(gateways, &parents, &route);
            for p in filtered(&parents) {
                let mut key = p.internal_name.clone();
                let mut hosts = if hostnames.is_empty() { vec!["*".to_string()] } else { hostnames.clone() };
                let mut routes = gw_routes.clone();
                if p.is_mesh() {
                    routes = mesh_routes.clone();
                    key = route.meta.namespace.clone();
                    if let Some(port) = p.original.port {
                        routes = routes.and_then(|r| with_port(r, port));
                        key = format!("{key}/{port}");
                    }
                    hosts = mesh_hosts(ctx, p, &route.meta.namespace);
                }
                if routes.as_ref().is_ok_and(Vec::is_empty) {
                    continue;
                }
                for h in hosts {
                    if !p.hostname_allowed(&h) {
                        continue;
                    }
                    let http = routes.clone().map(|mut http| {
                        sort_http_routes(&mut http);
                        http
                    });
                    base.push(BaseVs {
                        key: format!("{key}/{h}"),
                        route: route.clone(),
                        host: h,
                        gateway: p.internal_name.clone(),
                        http,
                    });
                }
            }
            push_status(out, &route, status);
        }
    }
    merge_http(ctx, base, out);
    convert_l4(ctx, gateways, out);
}

/// Istio's `mergeHTTPRoutes`: one VirtualService per key, routes of all routes sorted together.
fn merge_http(ctx: &Ctx<'_>, base: Vec<BaseVs>, out: &mut Output) {
    let mut by_key: HashMap<String, Vec<BaseVs>> = HashMap::new();
    let mut order = Vec::new();
    for b in base {
        if !by_key.contains_key(&b.key) {
            order.push(b.key.clone());
        }
        by_key.entry(b.key.clone()).or_default().push(b);
    }
    for key in order {
        let mut list = by_key.remove(&key).unwrap_or_default();
        list.sort_by(|a, b| {
            let ka = (&a.route.meta.creation_timestamp, &a.route.meta.namespace, &a.route.meta.name);
            let kb = (&b.route.meta.creation_timestamp, &b.route.meta.namespace, &b.route.meta.name);
            ka.cmp(&kb)
        });
        let first = &list[0];
        let mut annotations = route_annotations(&first.route);
        let parents: Vec<String> = list.iter().map(|b| parent_meta(&b.route, None)).collect();
        annotations.insert(PARENTS_ANNOTATION.to_string(), parents.join(","));
        // An unrepresentable route drops the whole merged VirtualService.
        let Ok(parts) = list.iter().map(|b| b.http.clone()).collect::<Fits<Vec<_>>>() else { continue };
        let mut http: Vec<HttpRoute> = parts.into_iter().flatten().collect();
        sort_http_routes(&mut http);
        let spec = VirtualService {
            hosts: vec![first.host.clone()],
            gateways: vec![first.gateway.clone()],
            http,
            ..Default::default()
        };
        out.virtual_services.push(istio_config(
            &first.route.meta.namespace,
            &key.replace('/', "~"),
            annotations,
            first.route.meta.creation_timestamp.clone(),
            ctx.domain_suffix,
            Spec::VirtualService(Box::new(spec)),
        ));
    }
}

/// The route of an L4 rule whose backends all have weight 0: a destination that does not exist.
fn zero_weight() -> TlsRoute {
    let destination = Destination {
        host: "internal.cluster.local".to_string(),
        subset: "zero-weight".to_string(),
        port: Some(PortSelector { number: 65535 }),
    };
    TlsRoute {
        route: vec![RouteDestination { destination: Some(destination), weight: 0 }],
        ..Default::default()
    }
}

/// TCP and TLS route destinations (Istio's `buildTCPDestination`).
fn l4_destinations(
    ctx: &Ctx<'_>,
    refs: &[BackendRef],
    ns: &str,
    enforce: bool,
    kind: Kind,
    rep: &mut Representable,
) -> Result<(Vec<RouteDestination>, Option<ConfigError>), ConfigError> {
    let action: Vec<&BackendRef> = refs.iter().filter(|r| r.weight.unwrap_or(1) != 0).collect();
    let single = action.len() == 1;
    let mut invalid = None;
    let mut out = Vec::new();
    for r in action {
        let dst = match ctx.destination(&r.object_ref(), ns, enforce, kind) {
            Ok(d) => d,
            Err((Some(d), e)) if is_invalid_backend(&e) => {
                invalid = Some(e);
                d
            }
            Err((_, e)) => return Err(e),
        };
        let mut rd = RouteDestination { destination: Some(rep.take(dst)), weight: 0 };
        if !single {
            rd.weight = r.weight.unwrap_or(1);
        }
        out.push(rd);
    }
    Ok((out, invalid))
}

/// One TCPRoute or TLSRoute rule (`sni`: the TLSRoute's hostnames). Both kinds are built as a
/// [`TlsRoute`]; a TCP rule has no SNI match and becomes a [`TcpRoute`] with [`tcp_route`].
fn l4_rule(
    ctx: &Ctx<'_>,
    refs: &[BackendRef],
    route: &Config,
    enforce: bool,
    sni: Option<&[String]>,
) -> RuleResult<TlsRoute> {
    if refs.iter().map(|b| b.weight.unwrap_or(1)).sum::<i32>() == 0 {
        return (Some(Ok(zero_weight())), None);
    }
    let mut rep = Representable::default();
    match l4_destinations(ctx, refs, &route.meta.namespace, enforce, route.kind(), &mut rep) {
        Ok((dsts, invalid)) => {
            let mut r = TlsRoute { route: dsts, ..Default::default() };
            if let Some(hosts) = sni {
                let sni_hosts = if hosts.is_empty() { vec!["*".to_string()] } else { hosts.to_vec() };
                r.r#match = vec![TlsMatchAttributes { sni_hosts, ..Default::default() }];
            }
            (Some(rep.finish(r)), invalid)
        }
        Err(e) => (None, Some(e)),
    }
}

/// A TCP rule built by [`l4_rule`] as a [`TcpRoute`]: its matches only ever carry a mesh parent's port.
fn tcp_route(r: TlsRoute) -> TcpRoute {
    TcpRoute {
        r#match: r
            .r#match
            .into_iter()
            .map(|m| L4MatchAttributes { port: m.port, ..Default::default() })
            .collect(),
        route: r.route,
    }
}

/// Sets the port of a mesh parent on every match of L4 routes; a TCP route without matches gets one.
fn l4_with_port(routes: Vec<TlsRoute>, port: i32, tls: bool) -> Fits<Vec<TlsRoute>> {
    routes
        .into_iter()
        .map(|mut r| {
            if !r.r#match.is_empty() {
                let port = unsigned(port)?;
                r.r#match.iter_mut().for_each(|m| m.port = port);
            } else if !tls {
                r.r#match = vec![TlsMatchAttributes { port: unsigned(port)?, ..Default::default() }];
            }
            Ok(r)
        })
        .collect()
}

/// Keeps the SNI hosts of TLS routes that a gateway listener's hostname allows; drops a route left
/// without any (a route without matches is kept).
fn restrict_sni(routes: Vec<TlsRoute>, listener: &[String]) -> Vec<TlsRoute> {
    routes
        .into_iter()
        .filter_map(|mut r| {
            let no_match = r.r#match.is_empty();
            let mut has_hosts = false;
            for m in &mut r.r#match {
                let kept = intersect_names(&m.sni_hosts, listener);
                has_hosts |= !kept.is_empty();
                m.sni_hosts = kept;
            }
            (has_hosts || no_match).then_some(r)
        })
        .collect()
}

/// `host.NewNames(a).Intersection(b)`: for each matching pair, the more specific name.
fn intersect_names(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            if let Some(i) = host::intersect(x, y)
                && !out.iter().any(|o: &String| o == i)
            {
                out.push(i.to_string());
            }
        }
    }
    out
}

/// TCPRoute and TLSRoute: one VirtualService per parent and host, not merged.
fn convert_l4(ctx: &Ctx<'_>, gateways: &mut Gateways, out: &mut Output) {
    for kind in [Kind::TLSRoute, Kind::TCPRoute] {
        for route in ctx.list(kind) {
            let (refs, hostnames, rules): (&[ParentReference], Vec<String>, Vec<&[BackendRef]>) =
                match &route.spec {
                    Spec::TCPRoute(s) => {
                        (&s.parent_refs, vec![], s.rules.iter().map(|r| r.backend_refs.as_slice()).collect())
                    }
                    Spec::TLSRoute(s) => (
                        &s.parent_refs,
                        s.hostnames.clone(),
                        s.rules.iter().map(|r| r.backend_refs.as_slice()).collect(),
                    ),
                    _ => continue,
                };
            let tls = kind == Kind::TLSRoute;
            let parents = parent_references(ctx, gateways, &route, kind, refs, &hostnames);
            let run = |mesh: bool| {
                convert_rules(
                    rules.iter().map(|r| l4_rule(ctx, r, &route, !mesh, tls.then_some(hostnames.as_slice()))),
                )
            };
            let need_mesh = parents.iter().any(RouteParent::is_mesh);
            let need_gw = parents.iter().any(|p| !p.is_mesh());
            let (mesh_routes, mesh_error) = if need_mesh { run(true) } else { (Ok(Vec::new()), None) };
            let (gw_routes, gw_error) = if need_gw { run(false) } else { (Ok(Vec::new()), None) };
            let status = route_status(&parents, &gw_error, &mesh_error, &route);
            record(gateways, &parents, &route);
            let mut count = 0;
            for p in filtered(&parents) {
                let mut routes = if p.is_mesh() { mesh_routes.clone() } else { gw_routes.clone() };
                let mut hosts = if tls {
                    if hostnames.is_empty() { vec!["*".to_string()] } else { hostnames.clone() }
                } else {
                    vec!["*".to_string()]
                };
                if p.is_mesh() {
                    hosts = mesh_hosts(ctx, p, &route.meta.namespace);
                    if let Some(port) = p.original.port {
                        routes = routes.and_then(|r| l4_with_port(r, port, tls));
                    }
                } else if tls && !p.hostname.is_empty() {
                    let listener = [p.hostname.clone()];
                    hosts = intersect_names(&hosts, &listener);
                    routes = routes.map(|r| restrict_sni(r, &listener));
                }
                for h in hosts {
                    let name = format!(
                        "{}~{}~{count}~{KUBERNETES_GATEWAY_NAME}",
                        route.meta.name,
                        if tls { "tls" } else { "tcp" }
                    );
                    // An unrepresentable route drops the VirtualService (it still takes its number).
                    if let Ok(routes) = &routes {
                        let mut spec = VirtualService {
                            hosts: vec![h],
                            gateways: vec![p.internal_name.clone()],
                            ..Default::default()
                        };
                        if tls {
                            spec.tls = routes.clone();
                        } else {
                            spec.tcp = routes.iter().cloned().map(tcp_route).collect();
                        }
                        out.virtual_services.push(istio_config(
                            &route.meta.namespace,
                            &name,
                            route_annotations(&route),
                            route.meta.creation_timestamp.clone(),
                            ctx.domain_suffix,
                            Spec::VirtualService(Box::new(spec)),
                        ));
                    }
                    count += 1;
                }
            }
            push_status(out, &route, status);
        }
    }
}
