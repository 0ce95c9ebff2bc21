//! `WorkloadGroup` (`networking.istio.io`): a template for the WorkloadEntries of VMs that join the
//! mesh, with their metadata and readiness probe.
//!
//! Follows `networking/v1alpha3/workload_group.proto` of the Istio API (package
//! `istio.networking.v1alpha3`). The message nested in `WorkloadGroup` ([`ObjectMeta`]) lives in this
//! module, which is the `workload_group` module prost-build would generate for it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::wkt::is_default;

/// Describes a group of workload instances: the template of their WorkloadEntries and how their
/// readiness is checked.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadGroup {
    /// Labels and annotations given to every WorkloadEntry of the group (put user labels here).
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub metadata: Option<ObjectMeta>,
    /// Template of the generated WorkloadEntries; `address` and `labels` should be left empty, an empty
    /// `serviceAccount` means `default`. Required.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub template: Option<super::workload_entry::WorkloadEntry>,
    /// Readiness check run by the proxy on each workload of the group.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub probe: Option<ReadinessProbe>,
}

/// Metadata attached to the WorkloadEntries of a group (a subset of Kubernetes object metadata).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    /// Labels to attach.
    #[prost(btree_map = "string, string", tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub labels: BTreeMap<String, String>,
    /// Annotations to attach.
    #[prost(btree_map = "string, string", tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub annotations: BTreeMap<String, String>,
}

/// A readiness probe, like Kubernetes': timing and thresholds plus one check method.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReadinessProbe {
    /// Seconds after the workload starts before the first probe.
    #[prost(int32, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub initial_delay_seconds: i32,
    /// Seconds after which a probe times out (default 1, minimum 1).
    #[prost(int32, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub timeout_seconds: i32,
    /// Seconds between probes (default 10, minimum 1).
    #[prost(int32, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub period_seconds: i32,
    /// Consecutive successes needed to become ready after a failure (default 1).
    #[prost(int32, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub success_threshold: i32,
    /// Consecutive failures needed to become unready after a success (default 3).
    #[prost(int32, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub failure_threshold: i32,
    /// Healthy when an HTTP GET succeeds.
    /// One of `health_check_method`: at most one of `httpGet`, `tcpSocket`, `exec`, `grpc` may be set.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub http_get: Option<HttpHealthCheckConfig>,
    /// Healthy when a TCP connection can be opened.
    /// One of `health_check_method`: at most one of `httpGet`, `tcpSocket`, `exec`, `grpc` may be set.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub tcp_socket: Option<TcpHealthCheckConfig>,
    /// Healthy when a command exits with status 0.
    /// One of `health_check_method`: at most one of `httpGet`, `tcpSocket`, `exec`, `grpc` may be set.
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub exec: Option<ExecHealthCheckConfig>,
    /// Healthy when a gRPC health check call reports serving.
    /// One of `health_check_method`: at most one of `httpGet`, `tcpSocket`, `exec`, `grpc` may be set.
    #[prost(message, optional, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub grpc: Option<GrpcHealthCheckConfig>,
}

/// An HTTP GET health check.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpHealthCheckConfig {
    /// Request path.
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub path: String,
    /// Port of the endpoint (1–65535). Required.
    #[prost(uint32, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: u32,
    /// Host to connect to (default the workload IP); usually a `Host` header is what you want.
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub host: String,
    /// `HTTP` (default) or `HTTPS`.
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub scheme: String,
    /// Headers sent with the request (repeats allowed).
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub http_headers: Vec<HttpHeader>,
}

/// A gRPC health check (`grpc.health.v1.Health/Check`).
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcHealthCheckConfig {
    /// Port of the endpoint (1–65535).
    #[prost(uint32, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: u32,
    /// Fully qualified name of the service asked about; empty asks about the server as a whole.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub service: String,
}

/// An HTTP header of a health check request.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpHeader {
    /// Header name (letters, digits, `-`, `_`).
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    /// Header value.
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub value: String,
}

/// A TCP connect health check.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpHealthCheckConfig {
    /// Host to connect to (default localhost).
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub host: String,
    /// Port to connect to (1–65535). Required.
    #[prost(uint32, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub port: u32,
}

/// A command health check: exit status 0 is healthy.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExecHealthCheckConfig {
    /// The command and its arguments. Required.
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub command: Vec<String>,
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::{de::from_node, yaml::parse_documents};

    fn spec(text: &str) -> (WorkloadGroup, Vec<String>) {
        let root = parse_documents(text).remove(0).unwrap().root.unwrap();
        let (v, unknown) = from_node::<WorkloadGroup>(&root, "spec").unwrap();
        (v, unknown.into_iter().map(|u| u.path).collect())
    }

    const WG: &str = r#"
metadata:
  labels:
    app.kubernetes.io/name: reviews
    app.kubernetes.io/version: "1.3.4"
  annotations:
    owner: team-a
template:
  ports:
    grpc: 3550
    http: 8080
  serviceAccount: default
  network: vm-net
probe:
  initialDelaySeconds: 5
  timeoutSeconds: 3
  periodSeconds: 4
  successThreshold: 3
  failureThreshold: 3
  httpGet:
    path: /foo/bar
    host: 127.0.0.1
    port: 3100
    scheme: HTTPS
    httpHeaders:
    - name: Lit-Header
      value: Im-The-Best
"#;

    #[test]
    fn reads_yaml() {
        let (wg, unknown) = spec(WG);
        assert!(unknown.is_empty(), "{unknown:?}");
        let meta = wg.metadata.as_ref().unwrap();
        assert_eq!(meta.labels["app.kubernetes.io/version"], "1.3.4");
        assert_eq!(meta.annotations["owner"], "team-a");
        let t = wg.template.as_ref().unwrap();
        assert_eq!(t.ports["grpc"], 3550);
        assert_eq!(t.service_account, "default");
        let p = wg.probe.as_ref().unwrap();
        assert_eq!(
            (
                p.initial_delay_seconds,
                p.timeout_seconds,
                p.period_seconds,
                p.success_threshold,
                p.failure_threshold
            ),
            (5, 3, 4, 3, 3)
        );
        let get = p.http_get.as_ref().unwrap();
        assert_eq!((get.path.as_str(), get.port, get.scheme.as_str()), ("/foo/bar", 3100, "HTTPS"));
        assert_eq!(
            get.http_headers,
            vec![HttpHeader { name: "Lit-Header".into(), value: "Im-The-Best".into() }]
        );
        assert!(p.tcp_socket.is_none() && p.exec.is_none() && p.grpc.is_none());

        let (wg, unknown) = spec(
            "template: {}\nprobe:\n  exec: {command: [./check.sh, -v]}\n  tcpSocket: {port: 80, hots: x}\n",
        );
        let p = wg.probe.unwrap();
        assert_eq!(p.exec.unwrap().command, vec!["./check.sh", "-v"]);
        assert_eq!(p.tcp_socket.unwrap().port, 80);
        assert_eq!(unknown, vec!["spec.probe.tcpSocket.hots"]);
    }

    #[test]
    fn protobuf_round_trip_and_wire() {
        let (wg, _) = spec(WG);
        assert_eq!(WorkloadGroup::decode(&*wg.encode_to_vec()).unwrap(), wg);

        // probe = 3 (0x1a) { period_seconds = 4 (0x20) 7, grpc = 10 (0x52) { port = 1 (0x08) 9,
        // service = 2 (0x12) "s" } }.
        let wg = WorkloadGroup {
            probe: Some(ReadinessProbe {
                period_seconds: 7,
                grpc: Some(GrpcHealthCheckConfig { port: 9, service: "s".into() }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(wg.encode_to_vec(), vec![0x1a, 9, 0x20, 7, 0x52, 5, 0x08, 9, 0x12, 1, b's']);
        // tcp_socket = 8 (0x42) { port = 2 (0x10) 80 }; exec = 9 (0x4a) { command = 1 (0x0a) "x" }.
        let probe = ReadinessProbe {
            tcp_socket: Some(TcpHealthCheckConfig { host: String::new(), port: 80 }),
            exec: Some(ExecHealthCheckConfig { command: vec!["x".into()] }),
            ..Default::default()
        };
        assert_eq!(probe.encode_to_vec(), vec![0x42, 2, 0x10, 80, 0x4a, 3, 0x0a, 1, b'x']);
    }

    #[test]
    fn json_output() {
        let (wg, _) = spec(WG);
        let v = serde_json::to_value(&wg).unwrap();
        assert_eq!(v["probe"]["initialDelaySeconds"], 5);
        assert_eq!(v["probe"]["httpGet"]["httpHeaders"][0]["name"], "Lit-Header");
        assert_eq!(v["template"]["serviceAccount"], "default");
        assert!(v["probe"].get("tcpSocket").is_none());
        let v =
            serde_json::to_value(WorkloadGroup { template: Some(Default::default()), ..Default::default() })
                .unwrap();
        // A present but empty message is written (as protojson does); unset ones are not.
        assert_eq!(v, serde_json::json!({"template": {}}));
    }
}
