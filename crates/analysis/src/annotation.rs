//! Istio's resource annotations as data (istio/api `annotation/annotations.yaml`, July 2026): name,
//! feature status, whether deprecated, and the resource kinds it belongs on (`Any` = every kind).
//! The catalogue `annotations.K8sAnalyzer` checks Kubernetes objects against. Generated from that file.

/// One Istio annotation (istio/api `annotation.Instance`).
#[derive(Debug, PartialEq, Eq)]
pub struct Annotation {
    /// The annotation key (`sidecar.istio.io/inject`).
    pub name: &'static str,
    /// `Alpha`, `Beta` or `Stable`.
    pub feature_status: &'static str,
    /// Deprecated: using it is reported (IST0135).
    pub deprecated: bool,
    /// Kinds it may be set on (`Pod`, `Service`, …, or `Any`).
    pub resources: &'static [&'static str],
}

/// Every annotation, in the order of istio/api's file.
pub static ANNOTATIONS: &[Annotation] = &[
    Annotation {
        name: "prometheus.istio.io/merge-metrics",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "alpha.istio.io/kubernetes-serviceaccounts",
        feature_status: "Alpha",
        deprecated: true,
        resources: &["Service"],
    },
    Annotation {
        name: "alpha.istio.io/canonical-serviceaccounts",
        feature_status: "Alpha",
        deprecated: true,
        resources: &["Service"],
    },
    Annotation {
        name: "networking.istio.io/exportTo",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Service"],
    },
    Annotation {
        name: "sidecar.istio.io/inject",
        feature_status: "Beta",
        deprecated: true,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/status",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/rewriteAppHTTPProbers",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/discoveryAddress",
        feature_status: "Alpha",
        deprecated: true,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/proxyImage",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/proxyImageType",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/proxyCPU",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/proxyCPULimit",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/proxyMemory",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/proxyMemoryLimit",
        feature_status: "",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/interceptionMode",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/bootstrapOverride",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/statsInclusionPrefixes",
        feature_status: "Alpha",
        deprecated: true,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/statsInclusionSuffixes",
        feature_status: "Alpha",
        deprecated: true,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/statsInclusionRegexps",
        feature_status: "Alpha",
        deprecated: true,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/statsHistogramBuckets",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/statsFlushInterval",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/statsEvictionInterval",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/statsHistogramBins",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/userVolume",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/userVolumeMount",
        feature_status: "",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "status.sidecar.istio.io/port",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/logLevel",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/componentLogLevel",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/agentLogLevel",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/nativeSidecar",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "readiness.status.sidecar.istio.io/initialDelaySeconds",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "readiness.status.sidecar.istio.io/periodSeconds",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "readiness.status.sidecar.istio.io/failureThreshold",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "readiness.status.sidecar.istio.io/applicationPorts",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "traffic.istio.io/nodeSelector",
        feature_status: "Stable",
        deprecated: false,
        resources: &["Service"],
    },
    Annotation {
        name: "traffic.sidecar.istio.io/includeOutboundIPRanges",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "traffic.sidecar.istio.io/excludeOutboundIPRanges",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "traffic.sidecar.istio.io/includeInboundPorts",
        feature_status: "",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "traffic.sidecar.istio.io/excludeInboundPorts",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "traffic.sidecar.istio.io/excludeInterfaces",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "traffic.sidecar.istio.io/includeOutboundPorts",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "traffic.sidecar.istio.io/excludeOutboundPorts",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "traffic.sidecar.istio.io/kubevirtInterfaces",
        feature_status: "Alpha",
        deprecated: true,
        resources: &["Pod"],
    },
    Annotation {
        name: "kubernetes.io/ingress.class",
        feature_status: "Stable",
        deprecated: false,
        resources: &["Ingress"],
    },
    Annotation {
        name: "galley.istio.io/analyze-suppress",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Any"],
    },
    Annotation {
        name: "proxy.istio.io/config",
        feature_status: "Beta",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "istio.io/dry-run",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["AuthorizationPolicy"],
    },
    Annotation { name: "istio.io/rev", feature_status: "Alpha", deprecated: false, resources: &["Pod"] },
    Annotation {
        name: "proxy.istio.io/overrides",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "inject.istio.io/templates",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/extraStatTags",
        feature_status: "Alpha",
        deprecated: true,
        resources: &["Pod"],
    },
    Annotation {
        name: "istio.io/autoRegistrationGroup",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["WorkloadEntry"],
    },
    Annotation {
        name: "istio.io/workloadController",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["WorkloadEntry"],
    },
    Annotation {
        name: "istio.io/connectedAt",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["WorkloadEntry"],
    },
    Annotation {
        name: "istio.io/disconnectedAt",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["WorkloadEntry"],
    },
    Annotation {
        name: "topology.istio.io/controlPlaneClusters",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Namespace"],
    },
    Annotation {
        name: "gateway.istio.io/controller-version",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Any"],
    },
    Annotation {
        name: "ambient.istio.io/redirection",
        feature_status: "Beta",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "ambient.istio.io/waypoint-inbound-binding",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["GatewayClass", "Gateway"],
    },
    Annotation {
        name: "gateway.istio.io/service-account",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Gateway"],
    },
    Annotation {
        name: "gateway.istio.io/name-override",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Gateway"],
    },
    Annotation {
        name: "networking.istio.io/service-type",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Gateway"],
    },
    Annotation {
        name: "networking.istio.io/traffic-distribution",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Namespace", "Service", "ServiceEntry"],
    },
    Annotation {
        name: "istio.io/use-waypoint-canary-weight",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Service", "ServiceEntry", "Namespace"],
    },
    Annotation {
        name: "ambient.istio.io/bypass-inbound-capture",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "istio.io/reroute-virtual-interfaces",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "ambient.istio.io/dns-capture",
        feature_status: "Alpha",
        deprecated: false,
        resources: &["Pod"],
    },
    Annotation {
        name: "sidecar.istio.io/statsCompression",
        feature_status: "Alpha",
        deprecated: true,
        resources: &["Pod"],
    },
];

/// The annotation named `name`.
pub fn lookup(name: &str) -> Option<&'static Annotation> {
    ANNOTATIONS.iter().find(|a| a.name == name)
}
