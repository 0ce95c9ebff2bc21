//! References from routes to backends: ReferenceGrant checks and the destination Istio builds for a
//! backendRef (`buildDestination`, `ReferenceGrants.BackendAllowed`).

use api::{
    Kind, Spec,
    gateway_api::BackendObjectReference,
    networking::virtual_service::{Destination, PortSelector},
};

use crate::{Ctx, Fits, status::ConfigError, unsigned};

/// The destination of a backendRef; [`crate::Unrepresentable`] for a negative port.
pub(crate) type BackendDestination = Fits<Destination>;

/// Reasons of route `ResolvedRefs` failures (Gateway API names).
pub(crate) const INVALID_DESTINATION: &str = "InvalidDestination";
pub(crate) const REF_NOT_PERMITTED: &str = "RefNotPermitted";
pub(crate) const INVALID_KIND: &str = "InvalidKind";
pub(crate) const BACKEND_NOT_FOUND: &str = "BackendNotFound";
pub(crate) const INVALID_FILTER: &str = "InvalidFilter";
pub(crate) const INVALID_CONFIGURATION: &str = "InvalidConfiguration";

/// `true` for the errors that keep the route (its destination is kept, traffic gets 500): not
/// permitted, not found, wrong kind (Istio's `isInvalidBackend`).
pub(crate) fn is_invalid_backend(e: &ConfigError) -> bool {
    e.reason == REF_NOT_PERMITTED || e.reason == BACKEND_NOT_FOUND || e.reason == INVALID_KIND
}

impl Ctx<'_> {
    /// `true` if a ReferenceGrant in `to_namespace` lets objects of `from_kind` in `from_namespace`
    /// refer to the `to_group`/`to_kind` object named `to_name`.
    pub(crate) fn grant_allows(
        &self,
        from_kind: Kind,
        from_namespace: &str,
        to_group: &str,
        to_kind: &str,
        to_name: &str,
        to_namespace: &str,
    ) -> bool {
        let from_group = from_kind.schema().group;
        self.grants.iter().filter(|g| g.meta.namespace == to_namespace).any(|g| {
            let Spec::ReferenceGrant(spec) = &g.spec else { return false };
            spec.from.iter().any(|f| {
                f.group == from_group && f.kind == from_kind.as_str() && f.namespace == from_namespace
            }) && spec.to.iter().any(|t| {
                t.group == to_group && t.kind == to_kind && t.name.as_deref().is_none_or(|n| n == to_name)
            })
        })
    }

    /// The Istio `destination` of a backendRef of a `route_kind` object in `namespace`. `Err` with
    /// `Some(destination)` is an invalid backend that keeps its place in the route (Istio answers 500
    /// for it); `Err` with `None` rejects the rule.
    pub(crate) fn destination(
        &self,
        to: &BackendObjectReference,
        namespace: &str,
        enforce_grant: bool,
        route_kind: Kind,
    ) -> Result<BackendDestination, (Option<BackendDestination>, ConfigError)> {
        let group = to.group_or_default();
        let kind = to.kind_or_default();
        if enforce_grant
            && let Some(to_ns) = to.namespace.as_deref()
            && to_ns != namespace
            && !self.grant_allows(route_kind, namespace, group, kind, &to.name, to_ns)
        {
            return Err((
                Some(Ok(Destination::default())),
                ConfigError::new(
                    REF_NOT_PERMITTED,
                    format!(
                        "backendRef {}/{to_ns} not accessible to a {} in namespace {namespace:?} (missing a ReferenceGrant?)",
                        to.name,
                        route_kind.as_str()
                    ),
                ),
            ));
        }
        let backend_namespace = to.namespace.as_deref().unwrap_or(namespace);
        let mut invalid = None;
        let hostname = match (group, kind) {
            ("", "Service") => {
                if to.name.contains('.') {
                    return Err((
                        None,
                        ConfigError::new(
                            INVALID_DESTINATION,
                            "service name invalid; the name of the Service must be used, not the hostname.",
                        ),
                    ));
                }
                let hostname = self.service_hostname(&to.name, backend_namespace);
                if !self.kube_service_exists(backend_namespace, &to.name) {
                    invalid =
                        Some(ConfigError::new(BACKEND_NOT_FOUND, format!("backend({hostname}) not found")));
                }
                hostname
            }
            ("networking.istio.io", "Hostname") => {
                if to.namespace.is_some() {
                    return Err((
                        None,
                        ConfigError::new(INVALID_DESTINATION, "namespace may not be set with Hostname type"),
                    ));
                }
                if self.service(&to.name, backend_namespace).is_none() {
                    invalid =
                        Some(ConfigError::new(BACKEND_NOT_FOUND, format!("backend({}) not found", to.name)));
                }
                to.name.clone()
            }
            _ => {
                return Err((
                    Some(Ok(Destination::default())),
                    ConfigError::new(
                        INVALID_KIND,
                        format!(
                            "referencing unsupported backendRef: group {:?} kind {:?}",
                            to.group.as_deref().unwrap_or_default(),
                            to.kind.as_deref().unwrap_or_default()
                        ),
                    ),
                ));
            }
        };
        let Some(port) = to.port else {
            return Err((None, ConfigError::new(INVALID_DESTINATION, "port is required in backendRef")));
        };
        let destination = unsigned(port).map(|number| Destination {
            host: hostname,
            port: Some(PortSelector { number }),
            ..Default::default()
        });
        match invalid {
            Some(e) => Err((Some(destination), e)),
            None => Ok(destination),
        }
    }
}
