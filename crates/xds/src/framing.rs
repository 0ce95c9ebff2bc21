//! The ADS gRPC endpoint: meshpilot's own gRPC framing of requests and responses over hyper's HTTP/2.
//!
//! tonic's generated server encodes every response into one buffer per stream that grows to the
//! largest message the stream has carried and is kept for the stream's lifetime (`EncodeBody`'s
//! `BytesMut`), and its request decoder (`Streaming`) likewise keeps a buffer the size of the largest
//! request; with thousands of long-lived xDS streams the first was the largest item of the control
//! plane's memory (≈ 125 MiB at 2,000 sidecars, see BENCHMARKS.md). [`AdsService`] serves the two ADS
//! methods of an [`AdsServer`]: each response is framed into its own exactly sized buffer that is
//! freed once HTTP/2 has written it, and requests are decoded by [`Requests`], which holds a buffer
//! only while a message is split over DATA frames.
//!
//! The wire format is gRPC's (`grpc/PROTOCOL-HTTP2.md`): response headers `:status 200` and
//! `content-type: application/grpc`, each message as a 5-byte prefix (compressed flag 0, big-endian
//! length) and the protobuf bytes, then trailers with `grpc-status` (and `grpc-message`). An error
//! before the first response is a trailers-only response, as tonic sends it. Compression is not
//! offered (Envoy does not ask for it on ADS).

use std::{
    convert::Infallible,
    future::Future,
    marker::PhantomData,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use bytes::{Buf as _, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue};
use http_body::{Body as _, Frame};
use prost::Message;
use tonic::{Code, Status, body::Body, server::NamedService};

use crate::{
    AdsServer,
    server::{Dequeued, Queue, abandoned},
    source::ResourceSource,
};

/// Path of the state-of-the-world method.
const SOTW_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
/// Path of the incremental (delta) method.
const DELTA_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";
/// Length of the gRPC message prefix: compressed flag (1 byte) and length (4 bytes, big-endian).
const PREFIX_LEN: usize = 5;

/// The ADS endpoint of an [`AdsServer`] (both methods), for [`tonic::transport::Server::add_service`].
/// Made by [`AdsServer::into_service`].
pub struct AdsService<S: ResourceSource> {
    server: Arc<AdsServer<S>>,
}

impl<S: ResourceSource> Clone for AdsService<S> {
    fn clone(&self) -> Self {
        AdsService { server: self.server.clone() }
    }
}

impl<S: ResourceSource> std::fmt::Debug for AdsService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdsService").field("server", &self.server).finish()
    }
}

impl<S: ResourceSource> AdsService<S> {
    /// The endpoint over `server` (its `AdsConfig` message size limits apply).
    pub(crate) fn new(server: AdsServer<S>) -> Self {
        AdsService { server: Arc::new(server) }
    }
}

impl<S: ResourceSource> NamedService for AdsService<S> {
    const NAME: &'static str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
}

impl<S: ResourceSource> tower_service::Service<http::Request<Body>> for AdsService<S> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let config = this.server.config();
            let max_in = config.max_decoding_message_size;
            let server = &this.server;
            let response = match parts.uri.path() {
                SOTW_PATH => one_stream(parts, body, max_in, |r| server.stream_aggregated_resources(r)).await,
                DELTA_PATH => one_stream(parts, body, max_in, |r| server.delta_aggregated_resources(r)).await,
                other => Status::unimplemented(format!("unknown method {other}")).into_http(),
            };
            Ok(response)
        })
    }
}

/// Runs one ADS method: hands it the requests decoded from `body` ([`Requests`]) and frames what it
/// answers (an error before the first response is a trailers-only response).
async fn one_stream<Req, Resp, F, Fut>(
    parts: http::request::Parts,
    body: Body,
    max_in: usize,
    method: F,
) -> http::Response<Body>
where
    Req: Message + Default + Send + 'static,
    Resp: Message + 'static,
    F: FnOnce(tonic::Request<Requests<Req>>) -> Fut,
    Fut: Future<Output = Result<Queue<Resp>, Status>>,
{
    let inbound = Requests::new(body, max_in);
    match method(tonic::Request::from_http(http::Request::from_parts(parts, inbound))).await {
        Ok(queue) => streaming_response(queue),
        Err(status) => status.into_http(),
    }
}

/// The request messages of one ADS call, decoded from the HTTP/2 request body as gRPC frames
/// (`grpc/PROTOCOL-HTTP2.md`: a 5-byte prefix, compressed flag and big-endian length, then the
/// message).
///
/// A message split over DATA frames is collected in a buffer that is released as soon as the
/// message is decoded: between requests a stream holds no buffer at all. (tonic's `Streaming`
/// keeps its buffer at the size of the largest request the stream carried: the first one, with the
/// node metadata, ≈ 4 KiB per stream with `xds-load`'s metadata and more with pilot-agent's, for
/// the stream's lifetime.)
///
/// Errors are gRPC's own (grpc-go's codes and texts, what istiod answers): a message over the limit
/// is `RESOURCE_EXHAUSTED`, a compressed message (never negotiated on ADS) or one that does not
/// decode is `INTERNAL`, a body ending inside a message is `INTERNAL`. The first error ends the
/// stream.
pub(crate) struct Requests<T> {
    body: Body,
    /// Bytes of the message being collected; unallocated between messages.
    partial: BytesMut,
    /// Largest request message in bytes (`AdsConfig::max_decoding_message_size`).
    max_message_size: usize,
    /// The body ended or failed: nothing more comes.
    done: bool,
    _message: PhantomData<fn() -> T>,
}

impl<T: Message + Default> Requests<T> {
    /// The messages of `body`, each at most `max_message_size` bytes.
    pub(crate) fn new(body: Body, max_message_size: usize) -> Self {
        Requests { body, partial: BytesMut::new(), max_message_size, done: false, _message: PhantomData }
    }

    /// The next message; `Ok(None)` when the client half-closed the stream.
    ///
    /// # Errors
    /// The status ending the stream (see the type's docs), or the transport's error.
    pub(crate) async fn message(&mut self) -> Result<Option<T>, Status> {
        std::future::poll_fn(|cx| self.poll_message(cx)).await
    }

    fn poll_message(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<T>, Status>> {
        loop {
            if self.done {
                return Poll::Ready(Ok(None));
            }
            match self.decode_one() {
                Ok(Some(message)) => return Poll::Ready(Ok(Some(message))),
                Ok(None) => {}
                Err(status) => {
                    self.done = true;
                    return Poll::Ready(Err(status));
                }
            }
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers from a client carry nothing for ADS.
                    if let Ok(data) = frame.into_data() {
                        self.partial.extend_from_slice(&data);
                    }
                }
                Poll::Ready(Some(Err(status))) => {
                    self.done = true;
                    return Poll::Ready(Err(status));
                }
                Poll::Ready(None) => {
                    self.done = true;
                    if self.partial.is_empty() {
                        return Poll::Ready(Ok(None));
                    }
                    let status = Status::internal(format!(
                        "grpc: the request stream ended inside a message ({} bytes received)",
                        self.partial.len()
                    ));
                    self.partial = BytesMut::new();
                    return Poll::Ready(Err(status));
                }
            }
        }
    }

    /// Decodes the first message of `partial` if it is complete.
    fn decode_one(&mut self) -> Result<Option<T>, Status> {
        let Some(prefix) = self.partial.get(..PREFIX_LEN) else { return Ok(None) };
        match prefix[0] {
            0 => {}
            1 => return Err(Status::internal("grpc: compressed flag set with identity or empty encoding")),
            other => {
                return Err(Status::internal(format!("grpc: received unexpected payload format {other}")));
            }
        }
        let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
        if len > self.max_message_size {
            return Err(Status::resource_exhausted(format!(
                "grpc: received message larger than max ({len} vs. {})",
                self.max_message_size
            )));
        }
        // Incomplete: wait for more DATA. The buffer grows with what arrives, not with the length
        // the client announced (which could claim the limit and send nothing).
        let Some(body) = self.partial.get(PREFIX_LEN..PREFIX_LEN + len) else { return Ok(None) };
        let message = T::decode(body)
            .map_err(|e| Status::internal(format!("grpc: failed to unmarshal the received message: {e}")))?;
        if self.partial.len() == PREFIX_LEN + len {
            // Released, not kept for the next request.
            self.partial = BytesMut::new();
        } else {
            self.partial.advance(PREFIX_LEN + len);
        }
        Ok(Some(message))
    }
}

/// Decodes the request messages in `chunks` (each one DATA frame of a request body, in order) as
/// [`Requests`] does on an ADS stream, each at most `max_message_size` bytes: every message up to the
/// first error, then that error, if any. For the fuzz target `grpc_frames` (`crates/fuzzing`) and tests.
pub fn decode_request_frames<T: Message + Default>(
    chunks: Vec<Bytes>,
    max_message_size: usize,
) -> Vec<Result<T, Status>> {
    let mut requests = Requests::<T>::new(Body::new(Chunks(chunks.into())), max_message_size);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut out = Vec::new();
    // `Chunks` is always ready, so the decoder never waits.
    while let Poll::Ready(next) = requests.poll_message(&mut cx) {
        match next {
            Ok(Some(message)) => out.push(Ok(message)),
            Ok(None) => break,
            Err(status) => {
                out.push(Err(status));
                break;
            }
        }
    }
    out
}

/// A request body made of the given DATA frames, each ready at once, then its end.
struct Chunks(std::collections::VecDeque<Bytes>);

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

/// A `200 application/grpc` response whose body sends the frames of `queue`.
fn streaming_response<M: Message + 'static>(queue: Queue<M>) -> http::Response<Body> {
    let mut response = http::Response::new(Body::new(FramedMessages { queue: Some(queue) }));
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    response
}

/// Response body: each response of the queue as the gRPC frame it was queued as (in its own buffer,
/// [`frame`]), then the trailers (the first error ends the stream with its status; the end of the
/// channel ends it with `OK`; a queue the stream's task abandoned ends it with `DEADLINE_EXCEEDED`).
struct FramedMessages<M> {
    /// `None` once the trailers were sent.
    queue: Option<Queue<M>>,
}

/// One message as a gRPC frame: prefix and protobuf bytes, in a buffer of exactly that size.
///
/// # Errors
/// `RESOURCE_EXHAUSTED` when the message is larger than `max_message_size` bytes.
pub(crate) fn frame<M: Message>(message: &M, max_message_size: usize) -> Result<Bytes, Status> {
    let len = message.encoded_len();
    if len > max_message_size {
        return Err(Status::resource_exhausted(format!(
            "response of {len} bytes is larger than the limit of {max_message_size} bytes"
        )));
    }
    let prefix = u32::try_from(len).map_err(|_| Status::resource_exhausted("response larger than 4 GiB"))?;
    let mut buf = Vec::with_capacity(PREFIX_LEN + len);
    buf.push(0);
    buf.extend_from_slice(&prefix.to_be_bytes());
    message.encode_raw(&mut buf);
    Ok(Bytes::from(buf))
}

/// The trailers ending a stream with `status`.
fn trailers(status: &Status) -> HeaderMap {
    let mut map = HeaderMap::new();
    if status.add_header(&mut map).is_err() {
        map.insert(Status::GRPC_STATUS, HeaderValue::from(Code::Internal as i32));
    }
    map
}

impl<M: Message> http_body::Body for FramedMessages<M> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let Some(queue) = self.queue.as_ref() else { return Poll::Ready(None) };
        let end = match queue.poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Dequeued::Abandoned) => abandoned(),
            Poll::Ready(Dequeued::Item(Ok(frame))) => return Poll::Ready(Some(Ok(Frame::data(frame)))),
            Poll::Ready(Dequeued::Item(Err(status))) => status,
            Poll::Ready(Dequeued::End) => Status::ok(""),
        };
        self.queue = None;
        Poll::Ready(Some(Ok(Frame::trailers(trailers(&end)))))
    }

    fn is_end_stream(&self) -> bool {
        self.queue.is_none()
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};

    use super::*;

    fn requests(chunks: Vec<Vec<u8>>, max: usize) -> Requests<DiscoveryRequest> {
        Requests::new(Body::new(Chunks(chunks.into_iter().map(Bytes::from).collect())), max)
    }

    fn request(type_url: &str) -> DiscoveryRequest {
        DiscoveryRequest { type_url: type_url.into(), ..Default::default() }
    }

    fn framed(m: &DiscoveryRequest) -> Vec<u8> {
        frame(m, usize::MAX).unwrap().to_vec()
    }

    /// Messages split over DATA frames, and several in one frame, come out whole and in order; the
    /// collecting buffer is released once a message is decoded.
    #[tokio::test]
    async fn requests_are_reassembled_across_data_frames_and_the_buffer_released() {
        let (a, b, c) = (framed(&request("a")), framed(&request("bb")), framed(&request("ccc")));
        // `a` in three pieces (the prefix itself split), then the end of `a` with `b` and the start of `c`.
        let mut second = a[7..].to_vec();
        second.extend_from_slice(&b);
        second.extend_from_slice(&c[..4]);
        let mut r = requests(vec![a[..3].to_vec(), a[3..7].to_vec(), second, c[4..].to_vec()], 1 << 20);
        assert_eq!(r.message().await.unwrap().unwrap().type_url, "a");
        assert_eq!(r.message().await.unwrap().unwrap().type_url, "bb");
        assert_eq!(r.message().await.unwrap().unwrap().type_url, "ccc");
        assert_eq!(r.partial.capacity(), 0, "no buffer kept between requests");
        assert_eq!(r.message().await.unwrap(), None, "the client half-closed the stream");
    }

    /// The limit, compression and broken bodies end the stream with gRPC's codes.
    #[tokio::test]
    async fn bad_requests_end_the_stream_with_grpc_codes() {
        let big = framed(&DiscoveryRequest { type_url: "x".repeat(200), ..Default::default() });
        let err = requests(vec![big[..5].to_vec()], 100).message().await.unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted);
        assert!(err.message().starts_with("grpc: received message larger than max ("), "{}", err.message());

        let mut compressed = framed(&request("a"));
        compressed[0] = 1;
        assert_eq!(requests(vec![compressed], 100).message().await.unwrap_err().code(), Code::Internal);

        let a = framed(&request("a"));
        let mut r = requests(vec![a[..a.len() - 1].to_vec()], 100);
        let err = r.message().await.unwrap_err();
        assert_eq!(err.code(), Code::Internal);
        assert!(err.message().contains("ended inside a message"), "{}", err.message());
        assert_eq!(r.message().await.unwrap(), None, "nothing after the error");

        let garbage = vec![0, 0, 0, 0, 3, 0xff, 0xff, 0xff];
        let err = requests(vec![garbage], 100).message().await.unwrap_err();
        assert_eq!(err.code(), Code::Internal);
        assert!(err.message().contains("failed to unmarshal"), "{}", err.message());
    }

    /// A frame is the 5-byte gRPC prefix (uncompressed, big-endian length) and the message, nothing more.
    #[test]
    fn frame_is_prefix_and_message() {
        let m = DiscoveryResponse { version_info: "v1".into(), nonce: "n".into(), ..Default::default() };
        let bytes = frame(&m, 1024).unwrap();
        let body = m.encode_to_vec();
        assert_eq!(bytes[0], 0);
        assert_eq!(u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize, body.len());
        assert_eq!(&bytes[5..], body.as_slice());
        assert_eq!(DiscoveryResponse::decode(&bytes[5..]).unwrap(), m);
    }

    /// A response above the encoding limit is not sent; the stream ends with RESOURCE_EXHAUSTED.
    #[test]
    fn oversized_response_is_refused() {
        let m = DiscoveryResponse { version_info: "x".repeat(100), ..Default::default() };
        let err = frame(&m, 10).unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted);
        let t = trailers(&err);
        assert_eq!(t.get("grpc-status").unwrap(), "8");
    }
}
