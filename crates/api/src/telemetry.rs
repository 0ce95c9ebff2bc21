//! PLACEHOLDER: to be written from the Istio API.

use serde::{Deserialize, Serialize};

/// PLACEHOLDER.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Telemetry {}
