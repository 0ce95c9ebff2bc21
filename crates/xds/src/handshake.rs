//! A bound on how long a new connection to an ADS port may take to start: [`HandshakeDeadline`]
//! wraps the connection's I/O and fails its reads once the deadline passes before the client has
//! sent the HTTP/2 connection preface and the headers of its first request (a `HEADERS` frame).
//! The HTTP/2 server then drops the connection.
//!
//! Without it a client that sends half a preface (or connects and says nothing) holds a connection
//! and its HTTP/2 state for as long as it likes: hyper's server waits for the preface with no timer,
//! and keepalive pings only start once the handshake is done. grpc-go (istiod's server) bounds the
//! same phase with its `ConnectionTimeout` (120 s by default); meshpilot's bound also covers the
//! first request headers and is shorter ([`crate::server::DEFAULT_HANDSHAKE_TIMEOUT`]).
//!
//! The wrapper only counts bytes; it does not validate them (a wrong preface is the HTTP/2 server's
//! to refuse, at once).

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::Sleep,
};
use tracing::debug;

/// Length of the HTTP/2 client connection preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`, RFC 9113 §3.4).
const PREFACE_LEN: usize = 24;
/// Length of an HTTP/2 frame header (RFC 9113 §4.1).
const FRAME_HEADER_LEN: usize = 9;
/// Frame type of `HEADERS` (RFC 9113 §6.2).
const HEADERS: u8 = 0x1;

/// How far a client has got with the preface and its frames.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Progress {
    /// Preface bytes still to come.
    preface_left: usize,
    /// The frame header being read.
    header: [u8; FRAME_HEADER_LEN],
    header_len: usize,
    /// Payload bytes of the current frame still to skip.
    skip: usize,
}

impl Progress {
    fn new() -> Self {
        Progress { preface_left: PREFACE_LEN, header: [0; FRAME_HEADER_LEN], header_len: 0, skip: 0 }
    }

    /// Takes the next bytes read; `true` once a `HEADERS` frame header has been read.
    fn feed(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                self.preface_left -= n;
                bytes = &bytes[n..];
            } else if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
            } else {
                let n = (FRAME_HEADER_LEN - self.header_len).min(bytes.len());
                self.header[self.header_len..self.header_len + n].copy_from_slice(&bytes[..n]);
                self.header_len += n;
                bytes = &bytes[n..];
                if self.header_len == FRAME_HEADER_LEN {
                    if self.header[3] == HEADERS {
                        return true;
                    }
                    let [a, b, c, ..] = self.header;
                    self.skip = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
                    self.header_len = 0;
                }
            }
        }
        false
    }
}

/// A connection's I/O whose reads fail with `TimedOut` when the client has not sent the HTTP/2
/// preface and its first request headers within the deadline. Implements tonic's `Connected` with
/// the inner connection's info, so peer addresses and TLS certificates are seen as before.
#[derive(Debug)]
pub struct HandshakeDeadline<IO> {
    inner: IO,
    /// `None` once the first request headers arrived (or with no deadline).
    progress: Option<Progress>,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<IO> HandshakeDeadline<IO> {
    /// Wraps `inner`; `timeout` zero: no deadline.
    pub fn new(inner: IO, timeout: Duration) -> Self {
        if timeout.is_zero() {
            return HandshakeDeadline { inner, progress: None, deadline: None };
        }
        HandshakeDeadline {
            inner,
            progress: Some(Progress::new()),
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
        }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &IO {
        &self.inner
    }

    fn timed_out() -> io::Error {
        crate::metrics::record_handshake_timeout();
        debug!("ADS: closing connection: no HTTP/2 preface and first request within the handshake timeout");
        io::Error::new(
            io::ErrorKind::TimedOut,
            "no HTTP/2 preface and first request within the handshake timeout (MESHPILOT_XDS_HANDSHAKE_TIMEOUT)",
        )
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for HandshakeDeadline<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        let Some(progress) = this.progress.as_mut() else { return read };
        match read {
            Poll::Ready(Ok(())) => {
                if progress.feed(&buf.filled()[before..]) {
                    this.progress = None;
                    this.deadline = None;
                } else if this.deadline.as_ref().is_some_and(|d| d.is_elapsed()) {
                    // A client trickling bytes never lets the read pend.
                    return Poll::Ready(Err(Self::timed_out()));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.deadline.as_mut().map(|d| d.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(Err(Self::timed_out())),
                _ => Poll::Pending,
            },
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for HandshakeDeadline<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected for HandshakeDeadline<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, 0, 0, 0, 0, 0];
        f.extend_from_slice(payload);
        f
    }

    /// The preface, SETTINGS and WINDOW_UPDATE frames are skipped by length; the first HEADERS frame
    /// header ends the handshake, whatever the chunking of the bytes.
    #[test]
    fn the_first_headers_frame_after_the_preface_ends_the_handshake() {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, &[0; 12]));
        bytes.extend(frame(0x8, &[0, 0, 0, 1]));
        let headers = frame(HEADERS, &[1, 2, 3]);
        for chunk in [1, 2, 5, 9, 100] {
            let mut p = Progress::new();
            let done = bytes.chunks(chunk).any(|c| p.feed(c));
            assert!(!done, "no HEADERS frame yet (chunks of {chunk})");
            assert!(headers.chunks(chunk).any(|c| p.feed(c)), "HEADERS seen (chunks of {chunk})");
        }
    }

    /// Half a preface, or a HEADERS type byte inside another frame's payload, is not a request.
    #[test]
    fn half_a_preface_or_a_headers_byte_in_a_payload_is_not_a_request() {
        let mut p = Progress::new();
        assert!(!p.feed(b"PRI * HTTP/2.0\r\n"));
        assert_eq!(p.preface_left, 8);
        let mut p = Progress::new();
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, &frame(HEADERS, &[])));
        assert!(!p.feed(&bytes));
    }
}
