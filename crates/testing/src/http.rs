//! A small HTTP/1.1 client for tests: one `GET` per connection (`Connection: close`), a `Host`
//! header of the caller's choice, plain TCP or any stream (e.g. TLS), async or blocking.
//!
//! A response is read until its `Content-Length` is complete, its last chunk
//! (`Transfer-Encoding: chunked`, decoded) or end of stream, whichever comes first: Envoy delays
//! closing after a locally generated response (`delayed_close_timeout`, 1 s) until the client closes.

use std::{net::SocketAddr, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
};

use crate::{HarnessError, error::io};

/// How long one request may take before it fails (5 s).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A response as read by [`exchange`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The status line and headers, lowercased.
    pub head: String,
    /// The body (chunked encoding removed).
    pub body: String,
}

impl Response {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim())
        })
    }
}

/// `GET path` to `addr` with `Host: host` and `headers`: (status, body).
///
/// # Errors
/// [`HarnessError::Io`] (connect, read, write, or not an HTTP response) or
/// [`HarnessError::Timeout`] after [`REQUEST_TIMEOUT`].
pub async fn get(
    addr: SocketAddr,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String), HarnessError> {
    request(addr, host, path, headers).await.map(|r| (r.status, r.body))
}

/// [`get`] with `Host: <addr>` (e.g. Envoy's admin endpoint or an echo server).
///
/// # Errors
/// As [`get`].
pub async fn http_get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String), HarnessError> {
    get(addr, &addr.to_string(), path, headers).await
}

/// Like [`get`], returning the headers too.
///
/// # Errors
/// As [`get`].
pub async fn request(
    addr: SocketAddr,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Response, HarnessError> {
    request_method(addr, "GET", host, path, headers).await
}

/// Like [`request`] with another method (`POST`, `DELETE`, …; no body).
///
/// # Errors
/// As [`get`].
pub async fn request_method(
    addr: SocketAddr,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Response, HarnessError> {
    let what = format!("{method} {path} from {addr}");
    let fut = async {
        let mut s = TcpStream::connect(addr).await.map_err(io(format!("connect {addr}")))?;
        exchange_method(&mut s, method, host, path, headers).await.map_err(io(what.clone()))
    };
    tokio::time::timeout(REQUEST_TIMEOUT, fut).await.map_err(|_| HarnessError::Timeout {
        what,
        after: REQUEST_TIMEOUT,
        log_tail: String::new(),
    })?
}

/// The blocking form of [`request`], for tests without an async runtime (it runs one of its own).
///
/// # Errors
/// As [`get`], or [`HarnessError::Io`] if no runtime can be built.
pub fn request_blocking(
    addr: SocketAddr,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Response, HarnessError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("build a runtime"))?
        .block_on(request(addr, host, path, headers))
}

/// One `GET` over an open connection (plain or TLS), read as the module says.
///
/// # Errors
/// The stream's I/O errors; [`std::io::ErrorKind::InvalidData`] when the bytes are not an HTTP
/// response.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    exchange_method(s, "GET", host, path, headers).await
}

/// [`exchange`] with another method (no body: `Content-Length: 0` for methods that usually carry one).
///
/// # Errors
/// As [`exchange`].
pub async fn exchange_method<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<Response> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if matches!(method, "POST" | "PUT" | "PATCH") {
        req.push_str("Content-Length: 0\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if is_complete(&buf) {
            break;
        }
    }
    parse_response(&buf).map_err(|detail| std::io::Error::new(std::io::ErrorKind::InvalidData, detail))
}

/// Where the head ends (the index after `\r\n\r\n`).
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn header_value<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Whether `buf` holds a whole response by its own framing (not counting end of stream).
fn is_complete(buf: &[u8]) -> bool {
    let Some(end) = head_end(buf) else { return false };
    let head = String::from_utf8_lossy(&buf[..end]);
    if header_value(&head, "transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        return buf[end..].ends_with(b"0\r\n\r\n");
    }
    header_value(&head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|len| buf.len() >= end + len)
}

fn parse_response(buf: &[u8]) -> Result<Response, String> {
    let end = head_end(buf).ok_or("no end of headers")?;
    let head = String::from_utf8_lossy(&buf[..end - 4]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|_| head.starts_with("http/"))
        .ok_or("no status line")?;
    let body = String::from_utf8_lossy(&buf[end..]);
    let chunked =
        header_value(&head, "transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let body = if chunked { dechunk(&body) } else { body.into_owned() };
    Ok(Response { status, head, body })
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A slowloris client on `stream` (plain TCP or TLS), whose request line (and perhaps some headers)
/// were written: writes a header line (`X-Slow: 1`) every 50 ms, never ending the headers, until the
/// server closes the connection, and checks that it answered nothing or at most hyper's `408`.
///
/// # Panics
/// When the server has not closed the connection within `limit` (a bound that keeps a broken test
/// from hanging, not a timing assertion), or answered something else.
pub async fn trickle_headers_until_closed<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, limit: Duration) {
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(limit, async {
        loop {
            tokio::select! {
                n = stream.read(&mut buf) => match n {
                    Ok(0) | Err(_) => return,
                    Ok(n) => answer.extend_from_slice(&buf[..n]),
                },
                () = tokio::time::sleep(Duration::from_millis(50)) => {
                    if stream.write_all(b"X-Slow: 1\r\n").await.is_err() {
                        return;
                    }
                }
            }
        }
    })
    .await
    .expect("the server closes the slowloris connection");
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
        "closed, at most with 408: {}",
        String::from_utf8_lossy(&answer)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_responses() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-A: B\r\n\r\na").unwrap();
        assert_eq!(
            (r.status, r.body.as_str(), r.header("x-a")),
            (200, "a", Some("b")),
            "the head is lowercased"
        );
        let chunked = b"HTTP/1.1 418 X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert!(is_complete(chunked));
        let r = parse_response(chunked).unwrap();
        assert_eq!((r.status, r.body.as_str()), (418, "abcde"));
        assert!(parse_response(b"garbage").is_err());
        assert!(parse_response(b"garbage\r\n\r\n").is_err());
    }

    #[test]
    fn a_response_is_complete_by_its_length_not_before() {
        assert!(!is_complete(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nab"));
        assert!(is_complete(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc"));
        assert!(!is_complete(b"HTTP/1.1 200 OK\r\n\r\nabc"), "no framing: read to end of stream");
    }
}
