//! `Telemetry` (`telemetry.istio.io`): tracing, metrics and access logging of workloads.
//!
//! Follows `telemetry/v1alpha1/telemetry.proto` of the Istio API (`istio.telemetry.v1alpha1.Telemetry`).
//!
//! Note that this package has its own [`WorkloadMode`] (`CLIENT_AND_SERVER` is 0), which differs
//! from [`crate::type_v1beta1::WorkloadMode`] (`UNDEFINED` is 0).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    type_v1beta1::{PolicyTargetReference, WorkloadSelector},
    wkt::{Duration, is_default},
};

/// Telemetry settings for the selected workloads; they override those inherited from the mesh
/// (root namespace) and the namespace.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Telemetry {
    /// Workloads of the policy's namespace it applies to. Unset with no `targetRefs`: all of them.
    /// At most one of `selector` and `targetRefs` may be set.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub selector: Option<WorkloadSelector>,
    /// A single resource the policy attaches to (undocumented form of `targetRefs`).
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_ref: Option<PolicyTargetReference>,
    /// Resources (Gateway, GatewayClass, Service, ServiceEntry) the policy attaches to; up to 16.
    /// Waypoints only honour policies that use this field.
    #[prost(message, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub target_refs: Vec<PolicyTargetReference>,
    /// Tracing settings.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub tracing: Vec<Tracing>,
    /// Metrics settings.
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub metrics: Vec<Metrics>,
    /// Access logging settings.
    #[prost(message, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub access_logging: Vec<AccessLogging>,
}

/// Tracing settings: providers, sampling and custom span tags. Unset fields are inherited from
/// the parent level; `customTags`, when set, replaces the parent's tags entirely.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Tracing {
    /// Which traffic direction the settings apply to.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: Option<tracing::TracingSelector>,
    /// Providers that receive spans (at most one today). Empty: the mesh's default tracing provider.
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub providers: Vec<ProviderRef>,
    /// Percentage (0–100, in steps of 0.01) of requests without an earlier sampling decision
    /// that are traced. Default 0.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub random_sampling_percentage: Option<f64>,
    /// `true` stops span reporting (context propagation and sampling are unaffected).
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub disable_span_reporting: Option<bool>,
    /// Extra span tags by tag name.
    #[prost(btree_map = "string, message", tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub custom_tags: BTreeMap<String, tracing::CustomTag>,
    /// Whether Envoy bases its sampling decision on the request ID. Default `true`.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub use_request_id_for_trace_sampling: Option<bool>,
    /// Whether spans carry Istio-specific tags. Default `true`.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub enable_istio_tags: Option<bool>,
    /// `true` stops forwarding trace context headers (`traceparent`, `X-B3-*`, …) upstream, e.g.
    /// at an egress gateway. Default `false`. Span reporting is unaffected.
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub disable_context_propagation: Option<bool>,
}

/// Nested types of [`Tracing`].
pub mod tracing {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// Selects traffic by direction for tracing settings.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TracingSelector {
        /// Traffic direction relative to the workload. Default `CLIENT_AND_SERVER`.
        #[prost(enumeration = "super::WorkloadMode", tag = "1")]
        #[serde(with = "super::WorkloadMode", skip_serializing_if = "is_default")]
        pub mode: i32,
    }

    /// Where the value of a custom span tag comes from; exactly one member should be set.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct CustomTag {
        /// A fixed value.
        ///
        /// One of `type`: at most one of `literal`, `environment`, `header`, `formatter` may be set.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub literal: Option<Literal>,
        /// The value of a proxy environment variable.
        ///
        /// One of `type`: at most one of `literal`, `environment`, `header`, `formatter` may be set.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub environment: Option<Environment>,
        /// The value of a request header.
        ///
        /// One of `type`: at most one of `literal`, `environment`, `header`, `formatter` may be set.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "is_default")]
        pub header: Option<RequestHeader>,
        /// An access-log format string.
        ///
        /// One of `type`: at most one of `literal`, `environment`, `header`, `formatter` may be set.
        #[prost(message, optional, tag = "4")]
        #[serde(skip_serializing_if = "is_default")]
        pub formatter: Option<Formatter>,
    }

    /// A fixed tag value.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Literal {
        /// The value. Required (non-empty).
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub value: String,
    }

    /// A tag value read from an environment variable of the proxy.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Environment {
        /// The variable's name. Required (non-empty).
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
        /// The value used when the variable is not set.
        #[prost(string, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub default_value: String,
    }

    /// A tag value read from a request header.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct RequestHeader {
        /// The header's name. Required (non-empty).
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub name: String,
        /// The value used when the header is absent.
        #[prost(string, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub default_value: String,
    }

    /// A tag value computed with an access-log format string.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Formatter {
        /// The format, e.g. `%REQUESTED_SERVER_NAME%`; unknown operators become empty. Required.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub value: String,
    }
}

/// Names a telemetry provider declared in MeshConfig `extensionProviders`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProviderRef {
    /// The provider's name. Required (non-empty).
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
}

/// Metrics settings: providers, per-metric overrides, reporting interval.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Metrics {
    /// Providers the settings apply to. Empty: the mesh's default metrics providers.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub providers: Vec<ProviderRef>,
    /// Overrides applied in order, after the inherited mesh and namespace overrides (so list the
    /// general ones first).
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub overrides: Vec<MetricsOverrides>,
    /// Interval between metric reports for long-lived connections (TCP today). Default 5s.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub reporting_interval: Option<Duration>,
}

crate::proto_enum! {
    /// The role of a workload in the traffic a setting applies to.
    pub enum WorkloadMode {
        /// The workload as either source or destination. The default.
        ClientAndServer = 0 => "CLIENT_AND_SERVER",
        /// The workload as the source (outbound traffic).
        Client = 1 => "CLIENT",
        /// The workload as the destination (inbound traffic).
        Server = 2 => "SERVER",
    }
}

/// Selects the metrics (and traffic direction) an override applies to.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MetricSelector {
    /// One of Istio's standard metrics.
    ///
    /// One of `metric_match`: at most one of `metric`, `customMetric` may be set.
    #[prost(enumeration = "metric_selector::IstioMetric", optional, tag = "1")]
    #[serde(
        with = "crate::wkt::OptEnum::<metric_selector::IstioMetric>",
        skip_serializing_if = "is_default"
    )]
    pub metric: Option<i32>,
    /// Any metric by name (not validated).
    ///
    /// One of `metric_match`: at most one of `metric`, `customMetric` may be set.
    #[prost(string, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub custom_metric: Option<String>,
    /// Traffic direction the override applies to. Default `CLIENT_AND_SERVER`.
    #[prost(enumeration = "WorkloadMode", tag = "3")]
    #[serde(with = "WorkloadMode", skip_serializing_if = "is_default")]
    pub mode: i32,
}

/// Nested types of [`MetricSelector`].
pub mod metric_selector {
    crate::proto_enum! {
        /// Istio's standard metrics.
        pub enum IstioMetric {
            /// Every standard metric. The default.
            AllMetrics = 0 => "ALL_METRICS",
            /// HTTP/gRPC request count (`istio_requests_total`).
            RequestCount = 1 => "REQUEST_COUNT",
            /// HTTP/gRPC request duration histogram (`istio_request_duration_milliseconds`).
            RequestDuration = 2 => "REQUEST_DURATION",
            /// HTTP/gRPC request body size histogram (`istio_request_bytes`).
            RequestSize = 3 => "REQUEST_SIZE",
            /// HTTP/gRPC response body size histogram (`istio_response_bytes`).
            ResponseSize = 4 => "RESPONSE_SIZE",
            /// TCP connections opened (`istio_tcp_connections_opened_total`).
            TcpOpenedConnections = 5 => "TCP_OPENED_CONNECTIONS",
            /// TCP connections closed (`istio_tcp_connections_closed_total`).
            TcpClosedConnections = 6 => "TCP_CLOSED_CONNECTIONS",
            /// Bytes sent on TCP connections (`istio_tcp_sent_bytes_total`).
            TcpSentBytes = 7 => "TCP_SENT_BYTES",
            /// Bytes received on TCP connections (`istio_tcp_received_bytes_total`).
            TcpReceivedBytes = 8 => "TCP_RECEIVED_BYTES",
            /// gRPC messages sent by clients (`istio_request_messages_total`).
            GrpcRequestMessages = 9 => "GRPC_REQUEST_MESSAGES",
            /// gRPC messages sent by servers (`istio_response_messages_total`).
            GrpcResponseMessages = 10 => "GRPC_RESPONSE_MESSAGES",
        }
    }
}

/// Changes to the generation of the selected metrics.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MetricsOverrides {
    /// The metrics and direction affected. Unset: every metric, both directions.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: Option<MetricSelector>,
    /// `true` turns the metrics off; `false` turns them back on after a parent disabled them.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub disabled: Option<bool>,
    /// Changes to metric tags (labels), by tag name. Some providers cannot add or remove tags.
    #[prost(btree_map = "string, message", tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub tag_overrides: BTreeMap<String, metrics_overrides::TagOverride>,
}

/// Nested types of [`MetricsOverrides`].
pub mod metrics_overrides {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// Adds, changes or removes one metric tag.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct TagOverride {
        /// Whether the tag is set or removed. Default `UPSERT`.
        #[prost(enumeration = "tag_override::Operation", tag = "1")]
        #[serde(with = "tag_override::Operation", skip_serializing_if = "is_default")]
        pub operation: i32,
        /// CEL expression for the tag's value (e.g. `request.host`); required for `UPSERT`, must
        /// be empty for `REMOVE`.
        #[prost(string, tag = "2")]
        #[serde(skip_serializing_if = "is_default")]
        pub value: String,
    }

    /// Nested types of [`TagOverride`].
    pub mod tag_override {
        crate::proto_enum! {
            /// What to do with a metric tag.
            pub enum Operation {
                /// Add the tag, or replace its value, with `value`. The default.
                Upsert = 0 => "UPSERT",
                /// Leave the tag out of the metric.
                Remove = 1 => "REMOVE",
            }
        }
    }
}

/// Access log settings: providers, on/off, and a filter.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AccessLogging {
    /// Which traffic direction the settings apply to.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#match: Option<access_logging::LogSelector>,
    /// Providers the settings apply to. Empty: the mesh's default access log providers.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub providers: Vec<ProviderRef>,
    /// `true` turns access logs off for these providers.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub disabled: Option<bool>,
    /// Only requests/connections the filter accepts are logged.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub filter: Option<access_logging::Filter>,
}

/// Nested types of [`AccessLogging`].
pub mod access_logging {
    use serde::{Deserialize, Serialize};

    use crate::wkt::is_default;

    /// Selects traffic by direction for access log settings.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct LogSelector {
        /// Traffic direction relative to the workload. Default `CLIENT_AND_SERVER`.
        #[prost(enumeration = "super::WorkloadMode", tag = "1")]
        #[serde(with = "super::WorkloadMode", skip_serializing_if = "is_default")]
        pub mode: i32,
    }

    /// Decides which requests/connections are logged.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    pub struct Filter {
        /// CEL expression over request/connection attributes, e.g. `response.code >= 400`.
        #[prost(string, tag = "1")]
        #[serde(skip_serializing_if = "is_default")]
        pub expression: String,
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::{metric_selector::IstioMetric, metrics_overrides::tag_override::Operation, *};
    use crate::{
        de::from_node,
        test_corpus::{Scope, check_corpus},
    };

    use crate::test_corpus::spec_of as spec;

    const FULL: &str = r#"
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata:
  name: mesh-default
  namespace: istio-system
spec:
  selector:
    matchLabels:
      app: reviews
  tracing:
  - match:
      mode: SERVER
    providers:
    - name: otel-tracing
    randomSamplingPercentage: 12.5
    disableSpanReporting: false
    useRequestIdForTraceSampling: true
    enableIstioTags: false
    disableContextPropagation: true
    customTags:
      cluster:
        environment:
          name: ISTIO_META_CLUSTER_ID
          defaultValue: unknown
      user:
        header:
          name: x-user
      team:
        literal:
          value: payments
      sni:
        formatter:
          value: "%REQUESTED_SERVER_NAME%"
  metrics:
  - providers:
    - name: prometheus
    reportingInterval: 15s
    overrides:
    - match:
        metric: REQUEST_COUNT
        mode: CLIENT
      tagOverrides:
        request_host:
          value: request.host
        response_flags:
          operation: REMOVE
    - match:
        customMetric: my_metric
      disabled: true
  accessLogging:
  - match:
      mode: CLIENT
    providers:
    - name: envoy
    disabled: false
    filter:
      expression: response.code >= 400
"#;

    fn decode(text: &str) -> Telemetry {
        let (t, unknown) = from_node::<Telemetry>(&spec(text), "spec").unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        t
    }

    #[test]
    fn decodes_tracing() {
        let t = decode(FULL);
        assert_eq!(t.selector.as_ref().unwrap().match_labels["app"], "reviews");
        let tr = &t.tracing[0];
        assert_eq!(tr.r#match.as_ref().unwrap().mode, WorkloadMode::Server as i32);
        assert_eq!(tr.providers[0].name, "otel-tracing");
        assert_eq!(tr.random_sampling_percentage, Some(12.5));
        assert_eq!(tr.disable_span_reporting, Some(false));
        assert_eq!(tr.use_request_id_for_trace_sampling, Some(true));
        assert_eq!(tr.enable_istio_tags, Some(false));
        assert_eq!(tr.disable_context_propagation, Some(true));
        let tags = &tr.custom_tags;
        assert_eq!(tags.len(), 4);
        assert_eq!(
            tags["cluster"].environment,
            Some(tracing::Environment {
                name: "ISTIO_META_CLUSTER_ID".into(),
                default_value: "unknown".into()
            })
        );
        assert_eq!(tags["user"].header.as_ref().unwrap().name, "x-user");
        assert_eq!(tags["team"].literal.as_ref().unwrap().value, "payments");
        assert_eq!(tags["sni"].formatter.as_ref().unwrap().value, "%REQUESTED_SERVER_NAME%");
        assert!(tags["team"].header.is_none() && tags["team"].environment.is_none());
    }

    #[test]
    fn decodes_metrics_and_access_logging() {
        let t = decode(FULL);
        let m = &t.metrics[0];
        assert_eq!(m.providers[0].name, "prometheus");
        assert_eq!(m.reporting_interval, Some(Duration::from_millis(15_000)));
        let o0 = &m.overrides[0];
        let sel = o0.r#match.as_ref().unwrap();
        assert_eq!(sel.metric, Some(IstioMetric::RequestCount as i32));
        assert_eq!(sel.custom_metric, None);
        assert_eq!(sel.mode, WorkloadMode::Client as i32);
        assert_eq!(
            o0.tag_overrides["request_host"],
            metrics_overrides::TagOverride {
                operation: Operation::Upsert as i32,
                value: "request.host".into()
            }
        );
        assert_eq!(o0.tag_overrides["response_flags"].operation, Operation::Remove as i32);
        let o1 = &m.overrides[1];
        assert_eq!(o1.r#match.as_ref().unwrap().metric, None);
        assert_eq!(o1.r#match.as_ref().unwrap().custom_metric.as_deref(), Some("my_metric"));
        assert_eq!(o1.disabled, Some(true));

        let a = &t.access_logging[0];
        assert_eq!(a.r#match.as_ref().unwrap().mode, WorkloadMode::Client as i32);
        assert_eq!(a.providers[0].name, "envoy");
        assert_eq!(a.disabled, Some(false));
        assert_eq!(a.filter.as_ref().unwrap().expression, "response.code >= 400");
    }

    #[test]
    fn explicit_default_enum_member_is_kept() {
        // `metric: ALL_METRICS` is a set oneof member even though its value is 0.
        let t = decode("spec:\n  metrics:\n  - overrides:\n    - match: {metric: ALL_METRICS}\n");
        let sel = t.metrics[0].overrides[0].r#match.as_ref().unwrap();
        assert_eq!(sel.metric, Some(0));
        assert_eq!(serde_json::to_value(sel).unwrap(), serde_json::json!({"metric": "ALL_METRICS"}));
        // Field 1, varint 0.
        assert_eq!(sel.encode_to_vec(), [0x08, 0]);
    }

    #[test]
    fn misspelt_field_is_reported_with_its_path() {
        let text = "spec:\n  tracing:\n  - customTags:\n      a:\n        header:\n          nmae: x\n";
        let (_, unknown) = from_node::<Telemetry>(&spec(text), "spec").unwrap();
        let paths: Vec<_> = unknown.iter().map(|u| (u.path.as_str(), u.mark.line)).collect();
        assert_eq!(paths, [("spec.tracing[0].customTags.a.header.nmae", 6)]);
    }

    #[test]
    fn type_v1beta1_mode_name_is_rejected() {
        // UNDEFINED belongs to istio.type.v1beta1.WorkloadMode, not to this package's enum.
        let err =
            from_node::<Telemetry>(&spec("spec:\n  accessLogging:\n  - match: {mode: UNDEFINED}\n"), "spec")
                .unwrap_err();
        assert_eq!(err.path, "spec.accessLogging[0].match.mode");
        assert!(err.message.contains("CLIENT_AND_SERVER, CLIENT, SERVER"), "{err}");
    }

    #[test]
    fn protobuf_round_trip() {
        let t = decode(FULL);
        assert_eq!(Telemetry::decode(&*t.encode_to_vec()).unwrap(), t);
    }

    #[test]
    fn wire_field_numbers() {
        // Tracing: match = 7 { mode = 1 }, randomSamplingPercentage = 3 (DoubleValue { value = 1 }),
        // disableContextPropagation = 9 (BoolValue { value = 1 }).
        let tr = Tracing {
            r#match: Some(tracing::TracingSelector { mode: WorkloadMode::Server as i32 }),
            random_sampling_percentage: Some(1.0),
            disable_context_propagation: Some(true),
            ..Default::default()
        };
        let one = 1.0f64.to_le_bytes();
        let mut want = vec![0x1a, 9, 0x09];
        want.extend(one);
        want.extend([0x3a, 2, 0x08, 2, 0x4a, 2, 0x08, 1]);
        assert_eq!(tr.encode_to_vec(), want);

        // CustomTag oneof: formatter = 4 { value = 1 }.
        let tag = tracing::CustomTag {
            formatter: Some(tracing::Formatter { value: "f".into() }),
            ..Default::default()
        };
        assert_eq!(tag.encode_to_vec(), [0x22, 3, 0x0a, 1, b'f']);

        // MetricSelector oneof: customMetric = 2; mode = 3.
        let sel = MetricSelector {
            custom_metric: Some("m".into()),
            mode: WorkloadMode::Server as i32,
            ..Default::default()
        };
        assert_eq!(sel.encode_to_vec(), [0x12, 1, b'm', 0x18, 2]);

        // Telemetry: accessLogging = 4 { match = 4 { mode = 1 }, filter = 3 { expression = 1 } }.
        let t = Telemetry {
            access_logging: vec![AccessLogging {
                r#match: Some(access_logging::LogSelector { mode: WorkloadMode::Client as i32 }),
                filter: Some(access_logging::Filter { expression: "e".into() }),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(t.encode_to_vec(), [0x22, 9, 0x1a, 3, 0x0a, 1, b'e', 0x22, 2, 0x08, 1]);

        // Metrics: reportingInterval = 3 (Duration { seconds (field 1) = 5 }).
        let m = Metrics { reporting_interval: Some(Duration { seconds: 5, nanos: 0 }), ..Default::default() };
        assert_eq!(m.encode_to_vec(), [0x1a, 2, 0x08, 5]);
    }

    #[test]
    fn json_uses_camel_case_and_enum_names() {
        let t = decode(FULL);
        let json = serde_json::to_value(&t).unwrap();
        let tr = &json["tracing"][0];
        assert_eq!(tr["match"], serde_json::json!({"mode": "SERVER"}));
        assert_eq!(tr["randomSamplingPercentage"], 12.5);
        // Wrapper values are written even when they hold the default.
        assert_eq!(tr["disableSpanReporting"], false);
        assert_eq!(tr["enableIstioTags"], false);
        assert_eq!(
            tr["customTags"]["cluster"],
            serde_json::json!({"environment": {"name": "ISTIO_META_CLUSTER_ID", "defaultValue": "unknown"}})
        );
        let m = &json["metrics"][0];
        assert_eq!(m["reportingInterval"], "15s");
        assert_eq!(
            m["overrides"][0],
            serde_json::json!({
                "match": {"metric": "REQUEST_COUNT", "mode": "CLIENT"},
                "tagOverrides": {
                    "request_host": {"value": "request.host"},
                    "response_flags": {"operation": "REMOVE"},
                },
            })
        );
        assert_eq!(json["accessLogging"][0]["match"], serde_json::json!({"mode": "CLIENT"}));
        // CLIENT_AND_SERVER (0) is omitted.
        let sel = MetricSelector { custom_metric: Some("x".into()), ..Default::default() };
        assert_eq!(serde_json::to_value(&sel).unwrap(), serde_json::json!({"customMetric": "x"}));
        let back: Telemetry = serde_json::from_value(json).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn corpus_decodes_without_unknown_fields() {
        assert!(check_corpus::<Telemetry>(crate::Kind::Telemetry, Scope::Valid, &[]) > 0);
        assert!(check_corpus::<Telemetry>(crate::Kind::Telemetry, Scope::Other, &[]) > 0);
    }
}
