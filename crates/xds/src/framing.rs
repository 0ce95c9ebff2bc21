//! The ADS gRPC endpoint with meshpilot's own response framing.
//!
//! tonic's generated server encodes every response into one buffer per stream that grows to the
//! largest message the stream has carried and is kept for the stream's lifetime (`EncodeBody`'s
//! `BytesMut`); with thousands of long-lived xDS streams that is the largest item of the control
//! plane's memory (≈ 125 MiB at 2,000 sidecars, see BENCHMARKS.md). [`AdsService`] serves the same two
//! methods through the same [`AggregatedDiscoveryService`] implementation, decoding requests with
//! tonic's [`Streaming`], but frames each response into its own exactly sized buffer that is freed
//! once HTTP/2 has written it.
//!
//! The wire format is gRPC's (`grpc/PROTOCOL-HTTP2.md`): response headers `:status 200` and
//! `content-type: application/grpc`, each message as a 5-byte prefix (compressed flag 0, big-endian
//! length) and the protobuf bytes, then trailers with `grpc-status` (and `grpc-message`). An error
//! before the first response is a trailers-only response, as tonic sends it. Compression is not
//! offered (Envoy does not ask for it on ADS).

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryService;
use http::{HeaderMap, HeaderValue};
use http_body::Frame;
use prost::Message;
use tonic::{
    Code, Status,
    body::Body,
    codec::{BufferSettings, Streaming},
    server::NamedService,
};
use tonic_prost::ProstDecoder;

use crate::{
    AdsServer,
    server::{Dequeued, Queue, ResponseStream, abandoned},
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
            let max_in = Some(config.max_decoding_message_size);
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

/// Runs one ADS method: decodes the request stream of `Req` from `body`, calls `method`, and frames
/// what it answers (an error before the first response is a trailers-only response).
async fn one_stream<Req, Resp, F, Fut>(
    parts: http::request::Parts,
    body: Body,
    max_in: Option<usize>,
    method: F,
) -> http::Response<Body>
where
    Req: Message + Default + Send + 'static,
    Resp: Message + 'static,
    F: FnOnce(tonic::Request<Streaming<Req>>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<ResponseStream<Resp>>, Status>>,
{
    let inbound = Streaming::new_request(ProstDecoder::<Req>::new(request_buffer()), body, None, max_in);
    match method(tonic::Request::from_http(http::Request::from_parts(parts, inbound))).await {
        Ok(response) => streaming_response(response.into_inner().into_inner()),
        Err(status) => status.into_http(),
    }
}

/// The request decoder's buffer: 1 KiB to start (it grows to the largest request the stream carries),
/// instead of tonic's 8 KiB per stream; Envoy's requests after the first are a few hundred bytes. The
/// yield threshold stays tonic's default (32 KiB).
fn request_buffer() -> BufferSettings {
    BufferSettings::new(1024, 32 * 1024)
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

/// The message of a frame made by [`frame`].
///
/// # Errors
/// `INTERNAL` when the frame does not decode (never for frames made here).
pub(crate) fn unframe<M: Message + Default>(frame: &Bytes) -> Result<M, Status> {
    frame
        .get(PREFIX_LEN..)
        .and_then(|body| M::decode(body).ok())
        .ok_or_else(|| Status::internal("a queued response does not decode"))
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
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;

    use super::*;

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
