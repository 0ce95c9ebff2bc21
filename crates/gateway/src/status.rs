//! Conditions as Istio builds them (`gatewaycommon.SetListenerConditions`): a map from condition type
//! to a wanted state, written sorted by type; an error inverts the status and replaces reason and
//! message.

use std::collections::BTreeMap;

use api::gateway_api::status::Condition;

/// A failure that sets a condition's reason and message (Istio's `ConfigError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConfigError {
    pub(crate) reason: String,
    pub(crate) message: String,
}

impl ConfigError {
    pub(crate) fn new(reason: &str, message: impl Into<String>) -> Self {
        ConfigError { reason: reason.to_string(), message: message.into() }
    }
}

/// The wanted state of one condition.
#[derive(Clone, Debug)]
pub(crate) struct Wanted {
    pub(crate) reason: String,
    pub(crate) message: String,
    /// `true` unless set otherwise (Istio: empty status means True).
    pub(crate) status: bool,
    pub(crate) error: Option<ConfigError>,
}

impl Wanted {
    pub(crate) fn ok(reason: &str, message: &str) -> Self {
        Wanted { reason: reason.into(), message: message.into(), status: true, error: None }
    }

    pub(crate) fn with_status(reason: &str, message: &str, status: bool) -> Self {
        Wanted { reason: reason.into(), message: message.into(), status, error: None }
    }
}

/// The conditions, sorted by type, with `generation` as their observed generation.
pub(crate) fn conditions(generation: i64, wanted: &BTreeMap<&str, Wanted>) -> Vec<Condition> {
    wanted
        .iter()
        .map(|(ty, w)| {
            let (status, reason, message) = match &w.error {
                Some(e) => (!w.status, e.reason.as_str(), e.message.as_str()),
                None => (w.status, w.reason.as_str(), w.message.as_str()),
            };
            let mut c = Condition::new(ty, status, reason, message);
            c.observed_generation = generation;
            c
        })
        .collect()
}
