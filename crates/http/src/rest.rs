//! The REST-JSON discovery endpoints (Envoy's `api_type: REST`): `POST /v3/discovery:clusters`,
//! `:listeners`, `:routes`, `:endpoints`, `:secrets`, answered by [`discovery::rest::RestXds`].
//!
//! Not behind the debug guard ([`crate::access`]): like the plaintext ADS port (15010), they answer
//! any caller that reaches the HTTP port with the config of the node it names, and never a secret
//! (SDS is `403` here). Request bodies are bounded ([`MAX_REQUEST_BYTES`]: `413` over it); a body
//! that is no `DiscoveryRequest` is `400` with the reason. Each poll is answered on a blocking thread
//! (generation never stalls the async workers that serve ADS streams), at most
//! [`MAX_CONCURRENT_POLLS`] at once; a poll over that is `503` with `Retry-After: 1` (Envoy's REST
//! client polls again after its refresh delay). docs/REST-XDS.md, docs/SECURITY.md.

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

/// Most polls generating at once (each on a blocking thread); more answer `503` with `Retry-After: 1`.
pub const MAX_CONCURRENT_POLLS: usize = 64;

#[derive(Clone)]
struct RestState {
    rest: Arc<RestXds>,
    permits: Arc<tokio::sync::Semaphore>,
}

/// The router of the REST-JSON endpoints, to merge into the `--http-addr` router next to (not under)
/// the guarded debug routes.
pub fn rest_router(rest: Arc<RestXds>) -> Router {
    rest_router_with(rest, MAX_CONCURRENT_POLLS)
}

/// [`rest_router`] with at most `concurrent` polls generating at once.
pub fn rest_router_with(rest: Arc<RestXds>, concurrent: usize) -> Router {
    let state = RestState { rest, permits: Arc::new(tokio::sync::Semaphore::new(concurrent)) };
    let mut router = Router::new();
    for kind in RestType::ALL {
        router = router.route(
            kind.path(),
            post(move |State(state): State<RestState>, request: Request| poll(kind, state, request)),
        );
    }
    router.with_state(state).layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
}

async fn poll(kind: RestType, state: RestState, request: Request) -> Response {
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
    let Ok(permit) = state.permits.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "too many polls are being answered; poll again\n",
        )
            .into_response();
    };
    let rest = state.rest;
    let answered = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        rest.poll(kind, &body, PollMeta { peer, host: host.as_deref() })
    })
    .await;
    let reply = match answered {
        Ok(reply) => reply,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("poll failed: {e}\n")).into_response(),
    };
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if reply.is_json() { "application/json" } else { "text/plain; charset=utf-8" };
    if status == StatusCode::NOT_MODIFIED {
        return status.into_response();
    }
    (status, [(header::CONTENT_TYPE, content_type)], reply.body).into_response()
}
