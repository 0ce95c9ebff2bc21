//! The REST-JSON discovery endpoints (Envoy's `api_type: REST`): `POST /v3/discovery:clusters`,
//! `:listeners`, `:routes`, `:endpoints`, `:secrets`, answered by [`discovery::rest::RestXds`].
//!
//! Not behind the debug guard ([`crate::access`]): like the plaintext ADS port (15010), they answer
//! any caller that reaches the HTTP port with the config of the node it names, and never a secret
//! (SDS is `403` here). Request bodies are bounded ([`MAX_REQUEST_BYTES`]: `413` over it); a body
//! that is no `DiscoveryRequest` is `400` with the reason. docs/REST-XDS.md, docs/SECURITY.md.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::{ConnectInfo, DefaultBodyLimit, Request, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use discovery::rest::{PollMeta, RestType, RestXds};

pub use discovery::rest::MAX_REQUEST_BYTES;

/// The router of the REST-JSON endpoints, to merge into the `--http-addr` router next to (not under)
/// the guarded debug routes.
pub fn rest_router(rest: Arc<RestXds>) -> Router {
    let mut router = Router::new();
    for kind in RestType::ALL {
        router = router.route(
            kind.path(),
            post(move |State(rest): State<Arc<RestXds>>, request: Request| poll(kind, rest, request)),
        );
    }
    router.with_state(rest).layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
}

async fn poll(kind: RestType, rest: Arc<RestXds>, request: Request) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    // Envoy's REST client sets Host to the name of the cluster it polls through (rest_api_fetcher.cc);
    // over HTTP/2 it is the request's authority.
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    let body = match axum::body::to_bytes(request.into_body(), MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body not read ({e}); the limit is {MAX_REQUEST_BYTES} bytes\n"),
            )
                .into_response();
        }
    };
    let reply = rest.poll(kind, &body, PollMeta { peer, host: host.as_deref() });
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if reply.is_json() { "application/json" } else { "text/plain; charset=utf-8" };
    if status == StatusCode::NOT_MODIFIED {
        return status.into_response();
    }
    (status, [(header::CONTENT_TYPE, content_type)], reply.body).into_response()
}
