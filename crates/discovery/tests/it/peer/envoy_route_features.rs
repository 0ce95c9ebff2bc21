//! VirtualService HTTP route features through a real Envoy sidecar (INTERCEPTION_MODE NONE,
//! loopback) driven by the whole control plane: one loopback upstream `echo` that reflects the
//! request head, one VirtualService per test. Needs Envoy (scripts/install-envoy.sh).

use crate::support;

use std::{net::SocketAddr, time::Duration};

use meshpilot_testing::{EchoOptions, EchoServer, Envoy, Response, request, wait_for};
use support::setup_echo;

/// Waits (10 s) until a request to `echo` satisfies `ok` — the VirtualService has reached Envoy.
async fn wait_effect(envoy: &Envoy, addr: SocketAddr, what: &str, ok: impl Fn(&Response) -> bool) {
    let host = format!("echo:{}", addr.port());
    let mut last = None;
    let r = wait_for(what, Duration::from_secs(10), async || {
        let r = request(addr, &host, "/old", &[]).await.ok()?;
        let hit = ok(&r);
        last = Some(r);
        hit.then_some(())
    })
    .await;
    if let Err(e) = r {
        panic!("{e}; last response {last:?}\n{}", envoy.log_tail(40));
    }
}

async fn get(addr: SocketAddr) -> Response {
    request(addr, &format!("echo:{}", addr.port()), "/old", &[]).await.unwrap()
}

/// The upstream `echo`: it answers with the request head; the first `fail_first` requests get 503.
async fn echo(fail_first: usize) -> EchoServer {
    EchoServer::start_with("echo", EchoOptions { echo_head: true, fail_first, ..EchoOptions::default() })
        .await
        .unwrap()
}

async fn no_nacks(envoy: &Envoy) {
    envoy.assert_no_rejected_updates().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fault_abort_answers_418() {
    let echo = echo(0).await;
    let vs = "  hosts: [echo]\n  http:\n  - fault: {abort: {httpStatus: 418, percentage: {value: 100}}}\n    \
              route:\n    - destination: {host: echo}\n";
    let (_dir, _plane, envoy, addr) = setup_echo(echo.addr, vs).await;
    wait_effect(&envoy, addr, "abort 418", |r| r.status == 418).await;
    let before = echo.hits();
    for i in 0..10 {
        assert_eq!(get(addr).await.status, 418, "request {i}");
    }
    assert_eq!(echo.hits(), before, "aborted requests reached the upstream");
    no_nacks(&envoy).await;
}

/// Envoy's count of delays its fault filter injected, over all listeners
/// (`http.<prefix>.fault.delays_injected`).
async fn delays_injected(envoy: &Envoy) -> u64 {
    let (_, body) = envoy.admin_get("/stats?filter=fault.delays_injected").await.unwrap();
    body.lines().filter_map(|l| l.split_once(": ")?.1.trim().parse::<u64>().ok()).sum()
}

/// The delay is checked by Envoy's own count of injected delays and the fixed delay in the route it
/// was sent, not by timing requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fault_delay_of_300ms_is_injected_into_every_request() {
    let echo = echo(0).await;
    let vs = "  hosts: [echo]\n  http:\n  - fault: {delay: {fixedDelay: 0.3s, percentage: {value: 100}}}\n    \
              route:\n    - destination: {host: echo}\n";
    let (_dir, _plane, envoy, addr) = setup_echo(echo.addr, vs).await;
    wait_effect(&envoy, addr, "200 through the delay", |r| r.status == 200).await;
    let routes = envoy.config_dump(false).await.unwrap().to_string();
    assert!(routes.contains(r#""fixed_delay":"0.300s""#), "no 0.3 s fixed delay in {routes}");
    let before = delays_injected(&envoy).await;
    assert!(before >= 1, "the first request was not delayed");
    for i in 0..5 {
        let r = get(addr).await;
        assert_eq!(r.status, 200, "request {i}: {r:?}");
    }
    assert_eq!(delays_injected(&envoy).await, before + 5, "every request is delayed");
    no_nacks(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn header_manipulation_sets_request_and_adds_response_headers() {
    let echo = echo(0).await;
    let vs = "  hosts: [echo]\n  http:\n  - headers: {request: {set: {x-test: on}}, response: {add: {x-resp: yes}}}\n    \
              route:\n    - destination: {host: echo}\n";
    let (_dir, _plane, envoy, addr) = setup_echo(echo.addr, vs).await;
    wait_effect(&envoy, addr, "x-resp header", |r| r.header("x-resp").is_some()).await;
    for i in 0..5 {
        let r = get(addr).await;
        assert_eq!(r.status, 200, "request {i}: {r:?}");
        assert!(r.body.lines().any(|l| l.trim() == "x-test: on"), "upstream saw no x-test: on: {r:?}");
        assert_eq!(r.header("x-resp"), Some("yes"), "request {i}: {r:?}");
    }
    no_nacks(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redirect_answers_301_to_new_uri() {
    let echo = echo(0).await;
    let vs = "  hosts: [echo]\n  http:\n  - redirect: {uri: /new, redirectCode: 301}\n";
    let (_dir, _plane, envoy, addr) = setup_echo(echo.addr, vs).await;
    wait_effect(&envoy, addr, "redirect 301", |r| r.status == 301).await;
    for i in 0..5 {
        let r = get(addr).await;
        assert_eq!(r.status, 301, "request {i}: {r:?}");
        assert!(r.header("location").is_some_and(|l| l.ends_with("/new")), "request {i}: {r:?}");
    }
    assert_eq!(echo.hits(), 0, "redirected requests reached the upstream");
    no_nacks(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn direct_response_answers_503_down() {
    let echo = echo(0).await;
    let vs = "  hosts: [echo]\n  http:\n  - directResponse: {status: 503, body: {string: \"down\"}}\n";
    let (_dir, _plane, envoy, addr) = setup_echo(echo.addr, vs).await;
    wait_effect(&envoy, addr, "direct 503", |r| r.status == 503 && r.body == "down").await;
    for i in 0..5 {
        let r = get(addr).await;
        assert_eq!((r.status, r.body.as_str()), (503, "down"), "request {i}: {r:?}");
    }
    assert_eq!(echo.hits(), 0, "direct responses reached the upstream");
    no_nacks(&envoy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retries_hide_a_failed_first_attempt() {
    // The upstream fails its first request only; with retries the client never sees the 503.
    let echo = echo(1).await;
    let vs = "  hosts: [echo]\n  http:\n  - retries: {attempts: 3, retryOn: 5xx}\n    \
              route:\n    - destination: {host: echo}\n";
    let (_dir, _plane, envoy, addr) = setup_echo(echo.addr, vs).await;
    // Wait for the listener without touching the upstream (a warming listener accepts only once its
    // routes are in).
    wait_for("envoy listener", Duration::from_secs(10), async || {
        tokio::net::TcpStream::connect(addr).await.ok().map(drop)
    })
    .await
    .unwrap();
    let r = get(addr).await;
    assert_eq!(r.status, 200, "{r:?}\n{}", envoy.log_tail(40));
    assert_eq!(echo.hits(), 2, "first attempt failed, the retry succeeded");
    no_nacks(&envoy).await;
}
