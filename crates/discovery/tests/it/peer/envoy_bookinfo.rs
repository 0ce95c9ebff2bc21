//! Bookinfo routing through a real Envoy sidecar (INTERCEPTION_MODE NONE, loopback) driven by the
//! whole control plane: Istio's sample VirtualService/DestinationRule files, reviews v1/v2/v3 as
//! loopback upstreams. Needs Envoy (scripts/install-envoy.sh).

use crate::support;

use std::time::Duration;

use meshpilot_testing::{AdsApi, get, wait_for};
use support::{NS, setup};

async fn jason_v2_others_v3(api: AdsApi) {
    let (_dir, _reviews, plane, envoy, addr) = setup(api, "virtual-service-reviews-jason-v2-v3.yaml").await;
    let host = format!("reviews:{}", addr.port());
    for i in 0..20 {
        let (s, body) = get(addr, &host, "/", &[("end-user", "jason")]).await.unwrap();
        assert_eq!((s, body.as_str()), (200, "reviews-v2"), "jason request {i}");
        let (s, body) = get(addr, &host, "/", &[("end-user", "alice")]).await.unwrap();
        assert_eq!((s, body.as_str()), (200, "reviews-v3"), "alice request {i}");
        let (s, body) = get(addr, &host, "/", &[]).await.unwrap();
        assert_eq!((s, body.as_str()), (200, "reviews-v3"), "anonymous request {i}");
    }
    envoy.assert_no_rejected_updates().await;
    assert!(plane.server.connections().len() == 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bookinfo_jason_v2_others_v3_sotw() {
    jason_v2_others_v3(AdsApi::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bookinfo_jason_v2_others_v3_delta() {
    jason_v2_others_v3(AdsApi::Delta).await;
}

/// Rewriting the VirtualService file moves traffic without an Envoy restart and without a failed
/// request while a client sends a steady stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_virtual_service_change_moves_traffic_without_errors() {
    let (dir, _reviews, _plane, envoy, addr) = setup(AdsApi::Sotw, "virtual-service-reviews-v3.yaml").await;
    let host = format!("reviews:{}", addr.port());
    let pid = envoy.pid();
    let vs_v2 = std::fs::read_to_string(
        meshpilot_testing::testdata()
            .join("samples/bookinfo/networking/virtual-service-reviews-test-v2.yaml"),
    )
    .unwrap()
    .replace("metadata:\n", &format!("metadata:\n  namespace: {NS}\n"));
    for round in 0..3 {
        // Alternate: v3-only file ⇄ "jason → v2" file; watch what jason gets.
        let (file_text, want) = if round % 2 == 0 {
            (vs_v2.clone(), "reviews-v2")
        } else {
            (
                std::fs::read_to_string(
                    meshpilot_testing::testdata()
                        .join("samples/bookinfo/networking/virtual-service-reviews-v3.yaml"),
                )
                .unwrap()
                .replace("metadata:\n", &format!("metadata:\n  namespace: {NS}\n")),
                "reviews-v3",
            )
        };
        let target = dir.path().join("virtual-service-reviews-v3.yaml");
        let tmp = dir.path().join(".vs.tmp");
        std::fs::write(&tmp, file_text).unwrap();
        std::fs::rename(&tmp, &target).unwrap();
        // Every request during the switch succeeds; the limit only stops a broken switch from hanging.
        wait_for(
            &format!("jason's traffic to move to {want} (round {round})"),
            Duration::from_secs(30),
            async || {
                let (s, body) = get(addr, &host, "/", &[("end-user", "jason")]).await.unwrap();
                assert_eq!(s, 200, "request failed during the switch (round {round}): {body}");
                (body == want).then_some(())
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", envoy.log_tail(40)));
        // Steady after the switch.
        for _ in 0..10 {
            let (s, body) = get(addr, &host, "/", &[("end-user", "jason")]).await.unwrap();
            assert_eq!((s, body.as_str()), (200, want));
        }
    }
    assert_eq!(envoy.pid(), pid);
}

/// `virtual-service-reviews-90-10.yaml`: 90 % v1, 10 % v2 over 1,000 requests (±4 points).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bookinfo_90_10_split() {
    let (_dir, _reviews, _plane, _envoy, addr) =
        setup(AdsApi::Sotw, "virtual-service-reviews-90-10.yaml").await;
    let host = format!("reviews:{}", addr.port());
    let (mut v1, mut v2) = (0u32, 0u32);
    for _ in 0..1000 {
        match get(addr, &host, "/", &[]).await.unwrap() {
            (200, b) if b == "reviews-v1" => v1 += 1,
            (200, b) if b == "reviews-v2" => v2 += 1,
            other => panic!("unexpected response {other:?}"),
        }
    }
    assert!((860..=940).contains(&v1), "v1 {v1}, v2 {v2}");
    assert_eq!(v1 + v2, 1000);
}
