//! Hand-made seeds for the protobuf-shaped targets (`ads_requests`, `node_id`, `grpc_frames`), written into
//! `fuzz/corpus/<target>/seed-<name>` by `cargo test -p meshpilot-fuzzing --test it seeds:: -- --ignored`.
//! The YAML corpora come from Istio's test inputs instead (`scripts/fuzz-seeds.py`).
//!
//! `seeds_are_checked_in` keeps the generator and the corpus in step: every seed built here must be
//! in the corpus byte for byte.

use std::{collections::HashMap, path::PathBuf};

use envoy_types::pb::{
    envoy::{
        config::core::v3::{Locality, Node},
        service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest},
    },
    google::rpc::Status,
};
use meshpilot_fuzzing::{ADS_OP_DELTA, ADS_OP_PUSH, ADS_OP_RECONNECT, ADS_OP_SOTW};
use prost::Message;
use serde_json::{Value as Json, json};
use xds::type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

fn corpus(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target)
}

fn node(id: &str, metadata: Json) -> Node {
    Node {
        id: id.into(),
        metadata: Some(xds::convert::json_to_struct(metadata.as_object().expect("metadata is an object"))),
        locality: Some(Locality { region: "r1".into(), zone: "z1".into(), sub_zone: String::new() }),
        user_agent_name: "envoy".into(),
        ..Default::default()
    }
}

fn sidecar() -> Node {
    node(
        "sidecar~10.1.0.7~reviews-v1-abc.default~default.svc.cluster.local",
        json!({"NAMESPACE": "default", "INSTANCE_IPS": "10.1.0.7", "LABELS": {"app": "reviews"}}),
    )
}

/// An ADS op sequence under construction (see `meshpilot_fuzzing::fuzz_ads_requests`).
#[derive(Default)]
struct Seq(Vec<u8>);

impl Seq {
    fn sotw(mut self, type_url: &str, names: &[&str], nonce: &str, version: &str) -> Self {
        self.0.push(ADS_OP_SOTW);
        let req = DiscoveryRequest {
            type_url: type_url.into(),
            resource_names: names.iter().map(|n| (*n).into()).collect(),
            response_nonce: nonce.into(),
            version_info: version.into(),
            node: nonce.is_empty().then(sidecar),
            ..Default::default()
        };
        req.encode_length_delimited(&mut self.0).expect("a Vec grows");
        self
    }

    fn sotw_nack(mut self, type_url: &str, nonce: &str, version: &str) -> Self {
        self.0.push(ADS_OP_SOTW);
        let req = DiscoveryRequest {
            type_url: type_url.into(),
            response_nonce: nonce.into(),
            version_info: version.into(),
            error_detail: Some(Status { code: 3, message: "rejected by the client".into(), details: vec![] }),
            ..Default::default()
        };
        req.encode_length_delimited(&mut self.0).expect("a Vec grows");
        self
    }

    fn delta(mut self, type_url: &str, subscribe: &[&str], unsubscribe: &[&str], nonce: &str) -> Self {
        self.0.push(ADS_OP_DELTA);
        let req = DeltaDiscoveryRequest {
            type_url: type_url.into(),
            resource_names_subscribe: subscribe.iter().map(|n| (*n).into()).collect(),
            resource_names_unsubscribe: unsubscribe.iter().map(|n| (*n).into()).collect(),
            response_nonce: nonce.into(),
            node: Some(sidecar()),
            ..Default::default()
        };
        req.encode_length_delimited(&mut self.0).expect("a Vec grows");
        self
    }

    fn delta_initial(mut self, type_url: &str, held: &[(&str, &str)]) -> Self {
        self.0.push(ADS_OP_DELTA);
        let req = DeltaDiscoveryRequest {
            type_url: type_url.into(),
            initial_resource_versions: held
                .iter()
                .map(|(n, v)| ((*n).into(), (*v).into()))
                .collect::<HashMap<_, _>>(),
            node: Some(sidecar()),
            ..Default::default()
        };
        req.encode_length_delimited(&mut self.0).expect("a Vec grows");
        self
    }

    fn delta_nack(mut self, type_url: &str, nonce: &str) -> Self {
        self.0.push(ADS_OP_DELTA);
        let req = DeltaDiscoveryRequest {
            type_url: type_url.into(),
            response_nonce: nonce.into(),
            error_detail: Some(Status { code: 3, message: "rejected by the client".into(), details: vec![] }),
            ..Default::default()
        };
        req.encode_length_delimited(&mut self.0).expect("a Vec grows");
        self
    }

    /// A config change; `what` as `fuzz_ads_requests` reads `op >> 2`.
    fn push(mut self, what: u8) -> Self {
        self.0.push(ADS_OP_PUSH | (what << 2));
        self
    }

    fn reconnect(mut self) -> Self {
        self.0.push(ADS_OP_RECONNECT);
        self
    }
}

/// The ADS seeds. Nonces are the simulated engine's (`n0`, `n1`, … in send order).
fn ads_seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "sotw-envoy-startup",
            // CDS (n0), ACK; EDS (n1); LDS (n2); ACKs; RDS (n3), ACK; a push (CDS n4, EDS n5, LDS n6, RDS n7), ACKs.
            Seq::default()
                .sotw(CLUSTER, &[], "", "")
                .sotw(CLUSTER, &[], "n0", "v0")
                .sotw(ENDPOINT, &["a", "b"], "", "")
                .sotw(LISTENER, &[], "", "")
                .sotw(ENDPOINT, &["a", "b"], "n1", "v0")
                .sotw(LISTENER, &[], "n2", "v0")
                .sotw(ROUTE, &["80"], "", "")
                .sotw(ROUTE, &["80"], "n3", "v0")
                .push(0)
                .sotw(CLUSTER, &[], "n4", "v1")
                .sotw(ENDPOINT, &["a", "b"], "n5", "v1")
                .sotw(LISTENER, &[], "n6", "v1")
                .sotw(ROUTE, &["80"], "n7", "v1")
                .0,
        ),
        (
            "sotw-nack-stale-unsubscribe",
            Seq::default()
                .sotw(CLUSTER, &[], "", "")
                .sotw_nack(CLUSTER, "n0", "")
                .sotw(CLUSTER, &[], "n9", "")
                .sotw(ENDPOINT, &["a", "missing-1"], "", "")
                .sotw(ENDPOINT, &["a", "missing-1", "c"], "n1", "v0")
                .sotw(ENDPOINT, &[], "n2", "v0")
                .push(1)
                .sotw(CLUSTER, &[], "n3", "v1")
                .reconnect()
                .sotw(CLUSTER, &["*", "b"], "", "")
                .0,
        ),
        (
            "delta-wildcard-subscribe-remove",
            Seq::default()
                .delta(CLUSTER, &[], &[], "")
                .delta(CLUSTER, &[], &[], "n0")
                .delta(ENDPOINT, &["a", "missing-x"], &[], "")
                .delta(ENDPOINT, &[], &[], "n1")
                .push(1)
                .delta(CLUSTER, &[], &[], "n2")
                .delta(ENDPOINT, &["c"], &["a"], "n3")
                .push(3)
                .push(2)
                .delta(CLUSTER, &["*"], &[], "")
                .delta(CLUSTER, &[], &["*"], "n6")
                .0,
        ),
        (
            "delta-reconnect-initial-versions",
            Seq::default()
                .delta(CLUSTER, &[], &[], "")
                .delta(CLUSTER, &[], &[], "n0")
                .reconnect()
                .delta_initial(CLUSTER, &[("a", "v0"), ("b", "v0"), ("gone", "v0")])
                .delta_initial(ENDPOINT, &[("a", "v0")])
                .push(0)
                .delta_nack(CLUSTER, "n3")
                .delta(CLUSTER, &[], &[], "n2")
                .0,
        ),
        (
            "mixed-sotw-delta",
            Seq::default()
                .sotw(LISTENER, &[], "", "")
                .delta(ROUTE, &["80", "8080"], &[], "")
                .sotw_nack(LISTENER, "n0", "")
                .delta_nack(ROUTE, "n1")
                .push(0)
                .sotw(LISTENER, &[], "n2", "v1")
                .delta(ROUTE, &[], &["8080"], "n3")
                .0,
        ),
    ]
}

/// The node seeds: `id\nmetadata-json` text and protobuf `Node`s.
fn node_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let text = |id: &str, meta: Json| format!("{id}\n{meta}").into_bytes();
    vec![
        (
            "text-sidecar",
            text(
                "sidecar~10.1.0.7~reviews-v1-abc.default~default.svc.cluster.local",
                json!({"NAMESPACE": "default", "INSTANCE_IPS": "10.1.0.7,fd00::7", "LABELS": {"app": "reviews", "version": "v1"},
                       "ISTIO_VERSION": "1.28.0", "INTERCEPTION_MODE": "REDIRECT", "ANNOTATIONS": {"a": "b"}}),
            ),
        ),
        (
            "text-router",
            text(
                "router~10.1.0.9~istio-ingressgateway-1.istio-system~istio-system.svc.cluster.local",
                json!({"CLUSTER_ID": "Kubernetes", "INTERCEPTION_MODE": "NONE"}),
            ),
        ),
        (
            "text-grpc",
            text("sidecar~fd00::1~grpc-1.test~test.svc.cluster.local", json!({"GENERATOR": "grpc"})),
        ),
        ("text-bad-ip", text("sidecar~not-an-ip~x.y~y.svc", json!({"INSTANCE_IPS": "1.2.3.4, nope"}))),
        ("text-bad-type", text("waypoint~1.2.3.4~x.y~y.svc", json!({"LABELS": "not a map"}))),
        ("text-parts", text("sidecar~1.2.3.4~x", json!({}))),
        ("pb-sidecar", sidecar().encode_to_vec()),
        (
            "pb-nested-metadata",
            node(
                "router~10.0.0.1~gw.ns~ns.svc.cluster.local",
                json!({"NAMESPACE": "ns", "PROXY_CONFIG": {"concurrency": 2, "tracing": {"sampling": 1.5}},
                       "LABELS": {"k": "v"}, "ISTIO_META_DNS_CAPTURE": true, "list": [1, "x", null]}),
            )
            .encode_to_vec(),
        ),
    ]
}

/// One gRPC frame (uncompressed flag, big-endian length, the message).
fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&u32::try_from(message.len()).expect("small").to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// `grpc_frames` inputs: limit byte, DATA frame size byte, then a request body (no maps in the
/// messages, so the encoding is stable byte for byte).
fn grpc_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let with_id = |type_url: &str, names: &[&str], nonce: &str| DiscoveryRequest {
        node: Some(Node {
            id: "sidecar~10.1.0.7~a.default~default.svc.cluster.local".into(),
            ..Default::default()
        }),
        type_url: type_url.into(),
        resource_names: names.iter().map(|n| (*n).to_owned()).collect(),
        response_nonce: nonce.into(),
        ..Default::default()
    };
    let cds = grpc_frame(&with_id(CLUSTER, &[], "").encode_to_vec());
    let eds =
        grpc_frame(&with_id(ENDPOINT, &["outbound|80||a.default.svc.cluster.local"], "").encode_to_vec());
    let ack = grpc_frame(
        &DiscoveryRequest {
            type_url: CLUSTER.into(),
            response_nonce: "n0".into(),
            version_info: "v1".into(),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let delta = grpc_frame(
        &DeltaDiscoveryRequest {
            type_url: ENDPOINT.into(),
            resource_names_subscribe: vec!["outbound|80||a.default.svc.cluster.local".into()],
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let stream = [cds.clone(), eds.clone(), ack].concat();
    let mut compressed = cds.clone();
    compressed[0] = 1;
    let with = |limit: u8, size: u8, body: &[u8]| [&[limit, size][..], body].concat();
    vec![
        ("envoy-start-small-frames", with(8, 6, &stream)),
        ("envoy-start-one-frame", with(8, 255, &stream)),
        ("over-the-limit", with(0, 16, &cds)),
        ("compressed-flag", with(8, 255, &compressed)),
        ("ends-inside-a-message", with(8, 3, &eds[..eds.len() - 2])),
        ("delta-subscribe", with(8, 9, &delta)),
        ("not-a-message", with(8, 255, &grpc_frame(&[0xff, 0xff, 0xff, 0x0f]))),
    ]
}

fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let ads = ads_seeds().into_iter().map(|(n, d)| ("ads_requests", n, d));
    let grpc = grpc_seeds().into_iter().map(|(n, d)| ("grpc_frames", n, d));
    ads.chain(node_seeds().into_iter().map(|(n, d)| ("node_id", n, d))).chain(grpc).collect()
}

#[test]
#[ignore = "writes the seed corpus; run by hand after changing the seeds"]
fn write_seed_corpus() {
    for (target, name, data) in seeds() {
        let dir = corpus(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        std::fs::write(dir.join(format!("seed-{name}")), data).expect("seed written");
    }
}

/// One decoded op of an ADS seed (protobuf maps encode in no fixed order, so seeds compare decoded).
#[derive(Debug, PartialEq)]
enum Op {
    Sotw(DiscoveryRequest),
    Delta(DeltaDiscoveryRequest),
    Other(u8),
}

fn decode_ops(data: &[u8]) -> Vec<Op> {
    let mut rest = data;
    let mut ops = Vec::new();
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        ops.push(match op % 4 {
            ADS_OP_SOTW => {
                Op::Sotw(DiscoveryRequest::decode_length_delimited(&mut rest).expect("a SotW request"))
            }
            ADS_OP_DELTA => {
                Op::Delta(DeltaDiscoveryRequest::decode_length_delimited(&mut rest).expect("a Delta request"))
            }
            _ => Op::Other(op),
        });
    }
    ops
}

#[test]
fn seeds_are_checked_in() {
    for (target, name, data) in seeds() {
        let path = corpus(target).join(format!("seed-{name}"));
        let on_disk = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run the ignored write_seed_corpus)", path.display()));
        let hint =
            format!("{} differs from its generator (run the ignored write_seed_corpus)", path.display());
        match (target, name.starts_with("pb-")) {
            ("ads_requests", _) => assert_eq!(decode_ops(&on_disk), decode_ops(&data), "{hint}"),
            (_, true) => assert_eq!(
                Node::decode(on_disk.as_slice()).ok(),
                Node::decode(data.as_slice()).ok(),
                "{hint}"
            ),
            _ => assert_eq!(on_disk, data, "{hint}"),
        }
    }
}

#[test]
fn seeds_run_through_their_entry_points() {
    // Also replayed by tests/it/replay.rs; here they must decode as the sequences they were built as,
    // so a malformed generator (which would end every sequence at its first op) shows.
    for (name, data) in ads_seeds() {
        let ops = decode_ops(&data);
        assert!(ops.len() > 3, "{name}: {} ops", ops.len());
        meshpilot_fuzzing::fuzz_ads_requests(&data);
    }
    for (_, data) in node_seeds() {
        meshpilot_fuzzing::fuzz_node_id(&data);
    }
    for (_, data) in grpc_seeds() {
        meshpilot_fuzzing::fuzz_grpc_frames(&data);
    }
}
