//! The HTTP client of the CLI verbs that read a running control plane (`proxy-status`,
//! `proxy-config`, `status`): a GET on meshpilot's debug address (`discovery --http-addr`, 8080),
//! the JSON body decoded. istioctl reaches istiod through a port-forward or its xDS debug types;
//! meshpilot's verbs read the same data from the debug endpoints over plain HTTP.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use serde_json::Value;

/// The default debug address: `discovery --http-addr`'s default, on loopback.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

/// How long one request may take, connect included (10 s).
const TIMEOUT: Duration = Duration::from_secs(10);

/// Bodies larger than this are refused (256 MiB: a config dump of a large mesh fits).
const MAX_BODY: usize = 256 << 20;

/// The control plane's address, shared by every verb that reads it.
#[derive(clap::Args, Debug, Clone)]
pub struct AddrArgs {
    /// meshpilot's debug HTTP address (`discovery --http-addr`), HOST:PORT or a URL.
    #[arg(long = "addr", env = "MESHPILOT_ADDR", default_value = DEFAULT_ADDR, value_name = "HOST:PORT")]
    pub addr: String,
}

/// Why a debug request failed, in words for the terminal.
#[derive(Debug, thiserror::Error)]
pub enum DebugError {
    /// The address or path does not form a URL.
    #[error("bad address {addr:?}: {reason}")]
    BadAddress {
        /// The address given.
        addr: String,
        /// Why it is not a URL.
        reason: String,
    },
    /// No answer: connection refused, reset, or timed out.
    #[error(
        "cannot reach meshpilot at {url}: {reason} (is `meshpilot discovery` running with --http-addr there?)"
    )]
    Unreachable {
        /// The URL asked.
        url: String,
        /// The transport error.
        reason: String,
    },
    /// A non-2xx status; `body` is the server's text.
    #[error("{url} answered {status}: {body}")]
    Status {
        /// The URL asked.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The body, trimmed.
        body: String,
    },
    /// The body is not the JSON expected.
    #[error("{url} answered with a body that is not JSON: {reason}")]
    NotJson {
        /// The URL asked.
        url: String,
        /// The decoder's error.
        reason: String,
    },
}

/// The URL of `path_and_query` (starting with `/`) on `addr` (`HOST:PORT`, or a URL with scheme).
pub fn url(addr: &str, path_and_query: &str) -> String {
    let base = addr.trim_end_matches('/');
    if base.contains("://") {
        format!("{base}{path_and_query}")
    } else {
        format!("http://{base}{path_and_query}")
    }
}

/// Percent-encodes a query value (RFC 3986: unreserved characters kept, every other byte `%XX`).
pub fn encode_query(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GETs `path_and_query` from `addr` and returns the status code and body text. Blocking: runs its
/// own single-threaded runtime, so call it from synchronous CLI code only.
pub fn get_text(addr: &str, path_and_query: &str) -> Result<(u16, String), DebugError> {
    let url = url(addr, path_and_query);
    let uri: hyper::Uri = url.parse().map_err(|e: hyper::http::uri::InvalidUri| DebugError::BadAddress {
        addr: addr.to_owned(),
        reason: e.to_string(),
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
        DebugError::Unreachable { url: url.clone(), reason: format!("cannot start a runtime: {e}") }
    })?;
    runtime.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        let fetch = async {
            let response = client.get(uri).await.map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok::<_, String>((status, String::from_utf8_lossy(&body).into_owned()))
        };
        match tokio::time::timeout(TIMEOUT, fetch).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(reason)) => Err(DebugError::Unreachable { url: url.clone(), reason }),
            Err(_) => Err(DebugError::Unreachable {
                url: url.clone(),
                reason: format!("no answer within {} s", TIMEOUT.as_secs()),
            }),
        }
    })
}

/// GETs `path_and_query` from `addr` and decodes the JSON body; a non-2xx status is an error
/// carrying the body.
pub fn get_json(addr: &str, path_and_query: &str) -> Result<Value, DebugError> {
    let (status, body) = get_text(addr, path_and_query)?;
    let url = url(addr, path_and_query);
    if !(200..300).contains(&status) {
        return Err(DebugError::Status { url, status, body: body.trim().to_owned() });
    }
    serde_json::from_str(&body).map_err(|e| DebugError::NotJson { url, reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_adds_the_scheme_only_when_missing() {
        assert_eq!(url("127.0.0.1:8080", "/debug/syncz"), "http://127.0.0.1:8080/debug/syncz");
        assert_eq!(url("http://h:1/", "/debug/syncz"), "http://h:1/debug/syncz");
        assert_eq!(url("https://h:1", "/x?a=b"), "https://h:1/x?a=b");
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(
            encode_query("sidecar~10.0.0.1~a.ns~ns.svc.cluster.local"),
            "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local"
        );
        assert_eq!(encode_query("a.b-1"), "a.b-1");
        assert_eq!(encode_query("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn refused_connection_names_the_url() {
        // Port 1 on loopback: nothing listens there for an unprivileged test.
        let err = get_json("127.0.0.1:1", "/debug/syncz").unwrap_err();
        assert!(matches!(err, DebugError::Unreachable { .. }), "{err:?}");
        assert!(err.to_string().contains("http://127.0.0.1:1/debug/syncz"), "{err}");
    }
}
