//! The four xDS types an Envoy follows over ADS, with their type URLs.

use serde::Serialize;

/// An xDS resource type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum XdsType {
    /// CDS (`envoy.config.cluster.v3.Cluster`).
    #[value(name = "cds")]
    Cluster,
    /// EDS (`envoy.config.endpoint.v3.ClusterLoadAssignment`).
    #[value(name = "eds")]
    Endpoint,
    /// LDS (`envoy.config.listener.v3.Listener`).
    #[value(name = "lds")]
    Listener,
    /// RDS (`envoy.config.route.v3.RouteConfiguration`).
    #[value(name = "rds")]
    Route,
}

impl XdsType {
    /// In the order Envoy requests them.
    pub const ALL: [XdsType; 4] = [XdsType::Cluster, XdsType::Endpoint, XdsType::Listener, XdsType::Route];

    /// The type URL.
    pub fn url(self) -> &'static str {
        match self {
            XdsType::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            XdsType::Endpoint => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            XdsType::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            XdsType::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        }
    }

    /// The type of a type URL, if it is one of the four.
    pub fn from_url(url: &str) -> Option<XdsType> {
        XdsType::ALL.into_iter().find(|t| t.url() == url)
    }

    /// Index in [`XdsType::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// `cds`, `eds`, `lds`, `rds`.
    pub fn short(self) -> &'static str {
        match self {
            XdsType::Cluster => "cds",
            XdsType::Endpoint => "eds",
            XdsType::Listener => "lds",
            XdsType::Route => "rds",
        }
    }
}
