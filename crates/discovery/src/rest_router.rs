//! The HTTP side of the REST-JSON discovery endpoints (Envoy's `api_type: REST`): `POST
//! /v3/discovery:clusters`, `:listeners`, `:routes`, `:endpoints`, `:secrets` as an axum router,
//! answered by [`RestXds`]. Served on two ports:
//!
//! - the plain HTTP port (`--http-addr`, merged by `meshpilot_http::rest`): no caller identity, so
//!   like the plaintext ADS port (15010) any caller gets the config of the node it names and never a
//!   secret;
//! - the secure port (15012, [`crate::secure`]), over HTTP/2 in the same TLS (ALPN `h2`) as ADS and
//!   the CA: every poll is authenticated first ([`RestAuth`]: the client certificate's SPIFFE id, or a
//!   bearer token, as ADS there) — `401` without — then the node is checked against the caller's
//!   namespaces and SDS is served to it.
//!
//! Request bodies are bounded ([`MAX_REQUEST_BYTES`]: `413` over it). Each poll is answered on a
//! blocking thread (generation never stalls the async workers that serve ADS streams), at most
//! `concurrent` at once per router ([`MAX_CONCURRENT_POLLS`]); a poll over that is `503` with
//! `Retry-After: 1` (Envoy's REST client polls again after its refresh delay). docs/REST-XDS.md,
//! docs/SECURITY.md.

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::{ConnectInfo, DefaultBodyLimit, Request, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use xds::{StreamAuthenticator, StreamCaller};

use crate::rest::{MAX_REQUEST_BYTES, PollMeta, RestType, RestXds};

/// Most polls generating at once per router (each on a blocking thread); more answer `503` with
/// `Retry-After: 1`.
pub const MAX_CONCURRENT_POLLS: usize = 64;

/// How the polls of a router are authenticated (the secure port's rules for ADS).
#[derive(Clone, Debug)]
pub struct RestAuth {
    /// Authenticates each poll from its headers (`authorization`) and its connection (the TLS peer
    /// certificates in the request extensions), as ADS streams on the same port.
    pub authenticator: Arc<dyn StreamAuthenticator>,
    /// Refuse a node of a namespace none of the caller's identities belongs to
    /// (`PILOT_ENABLE_XDS_IDENTITY_CHECK`).
    pub identity_check: bool,
}

#[derive(Clone)]
struct RestState {
    rest: Arc<RestXds>,
    permits: Arc<tokio::sync::Semaphore>,
    auth: Option<RestAuth>,
}

/// The router of the REST-JSON endpoints answering from `rest`, at most `concurrent` polls generating
/// at once, each poll authenticated by `auth` when given (without, no poll has a caller: SDS is `403`).
pub fn router(rest: Arc<RestXds>, concurrent: usize, auth: Option<RestAuth>) -> Router {
    let state = RestState { rest, permits: Arc::new(tokio::sync::Semaphore::new(concurrent)), auth };
    let mut router = Router::new();
    for kind in RestType::ALL {
        router = router.route(
            kind.path(),
            post(move |State(state): State<RestState>, request: Request| poll(kind, state, request)),
        );
    }
    router.with_state(state).layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
}

/// The caller of a request with `headers` and `extensions` (`Ok(None)` when the router does not
/// authenticate), or the `401`.
async fn authenticate(
    auth: Option<&RestAuth>,
    headers: &axum::http::HeaderMap,
    extensions: &axum::http::Extensions,
    peer: Option<SocketAddr>,
) -> Result<Option<StreamCaller>, Response> {
    let Some(auth) = auth else { return Ok(None) };
    let metadata = tonic::metadata::MetadataMap::from_headers(headers.clone());
    match auth.authenticator.authenticate(&metadata, extensions).await {
        Ok(caller) => Ok(Some(caller)),
        Err(reason) => {
            tracing::warn!(peer = ?peer, reason = %reason, "REST xDS: refusing poll: caller not authenticated");
            xds::metrics::record_auth_failure("authentication");
            Err((
                StatusCode::UNAUTHORIZED,
                "authentication failure: present a workload certificate of the control plane's CA \
                 (or a bearer token)\n",
            )
                .into_response())
        }
    }
}

async fn poll(kind: RestType, state: RestState, request: Request) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
        .or_else(|| state.auth.as_ref().and_then(|a| a.authenticator.peer_addr(request.extensions())));
    // The request's body is not `Sync`: what authentication reads is taken out of it first.
    let (parts, body) = request.into_parts();
    let caller = match authenticate(state.auth.as_ref(), &parts.headers, &parts.extensions, peer).await {
        Ok(c) => c,
        Err(refused) => return refused,
    };
    // Envoy's REST client sets Host to the name of the cluster it polls through (rest_api_fetcher.cc);
    // over HTTP/2 it is the request's authority.
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| parts.uri.authority().map(|a| a.as_str().to_owned()));
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
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
    let (rest, identity_check) = (state.rest, state.auth.as_ref().is_some_and(|a| a.identity_check));
    let answered = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let meta = PollMeta { peer, host: host.as_deref(), caller: caller.as_ref(), identity_check };
        rest.poll(kind, &body, meta)
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
