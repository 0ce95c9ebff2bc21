//! The HTTP client against the echo servers, async and blocking.

use meshpilot_testing::{
    EchoOptions, EchoServer, get, http::request_blocking, http_get, request, wait::wait_for_blocking,
};

#[tokio::test]
async fn echo_server_answers_its_name_and_counts_requests() {
    let e = EchoServer::start("hello").await.unwrap();
    assert_eq!(http_get(e.addr, "/", &[]).await.unwrap(), (200, "hello".to_owned()));
    assert_eq!(get(e.addr, "example.com", "/x", &[]).await.unwrap(), (200, "hello".to_owned()));
    assert_eq!(e.hits(), 2);
}

#[tokio::test]
async fn echo_head_shows_what_the_client_sent() {
    let e = EchoServer::start_with("upstream", EchoOptions { echo_head: true, ..EchoOptions::default() })
        .await
        .unwrap();
    let r = request(e.addr, "reviews:9080", "/path?q=1", &[("End-User", "Jason")]).await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let (name, head) = r.body.split_once('\n').unwrap();
    assert_eq!(name, "upstream");
    assert!(head.starts_with("get /path?q=1 http/1.1\r\n"), "{head}");
    assert!(head.contains("host: reviews:9080\r\n") && head.contains("end-user: jason\r\n"), "{head}");
}

#[tokio::test]
async fn the_first_requests_fail_when_asked() {
    let e = EchoServer::start_with("flaky", EchoOptions { fail_first: 2, ..EchoOptions::default() })
        .await
        .unwrap();
    assert_eq!(http_get(e.addr, "/", &[]).await.unwrap(), (503, "flaky failing".to_owned()));
    assert_eq!(http_get(e.addr, "/", &[]).await.unwrap(), (503, "flaky failing".to_owned()));
    assert_eq!(http_get(e.addr, "/", &[]).await.unwrap(), (200, "flaky".to_owned()));
    assert_eq!(e.hits(), 3);
}

#[tokio::test]
async fn a_closed_port_is_an_error_naming_the_address() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let e = http_get(addr, "/", &[]).await.unwrap_err();
    assert!(e.to_string().contains(&addr.to_string()), "{e}");
}

#[test]
fn the_blocking_client_and_wait_work_without_a_runtime() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let e = runtime.block_on(EchoServer::start("sync")).unwrap();
    let body = wait_for_blocking("the echo server", std::time::Duration::from_secs(5), || {
        request_blocking(e.addr, "localhost", "/", &[]).ok().map(|r| r.body)
    })
    .unwrap();
    assert_eq!(body, "sync");
}
