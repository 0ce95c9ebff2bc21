//! Test support for meshpilot's end-to-end tests (a dev-dependency only; never published).
//!
//! ```text
//!   test ──► Plane: stores → registries → DiscoveryServer ─► AdsServer 127.0.0.1:P ◄── ADS ── Envoy
//!              │                                  └──────► debug HTTP 127.0.0.1:H (/ready, /debug/*)
//!   test ── get(L, host, …) ──► Envoy listener 127.0.0.1:L ──► EchoServer "reviews-v1" (127.0.0.1:A)
//!   test ── envoy.stat(..) / envoy.admin_get(..) ──► Envoy admin (port from --admin-address-path)
//! ```
//!
//! - [`envoy`]: a real Envoy driven over ADS, or polling over REST-JSON (`AdsApi::Rest`) ([`Envoy`], [`Bootstrap`], [`AdsApi`]). Envoy is found at
//!   `$ENVOY_BIN` or `<repo>/.venv-envoy/bin/envoy` (installed by `scripts/install-envoy.sh`); a
//!   missing binary is an error naming the script, never a silent skip.
//! - [`ads`]: [`RunningAds`], an `xds::AdsServer` of any `ResourceSource` on a loopback port.
//! - [`ads_client`]: [`AckingClient`], a proxy on a real ADS stream that ACKs everything (no Envoy).
//! - [`plane`]: [`Plane`], the whole control plane in-process (config directories and/or a Kubernetes
//!   cluster with feature `kube` → aggregate store → ServiceEntry (and Kubernetes) registry →
//!   `DiscoveryServer` → ADS and debug HTTP on loopback).
//! - [`http`]: a small HTTP/1.1 client (`GET` with a `Host` header, plain or over any stream such as
//!   TLS), async and blocking.
//! - [`echo`]: [`EchoServer`], loopback HTTP/1.1 upstreams answering their name (optionally with the
//!   request head, failing the first N requests, counting requests).
//! - [`jwt`]: [`jwt::TestKey`], an ES256 signing key generated at run time: its JWKS, signed tokens,
//!   tampered tokens (for RequestAuthentication tests).
//! - [`wait`]: [`wait_for`] and friends (poll until a condition holds, fail naming what was awaited),
//!   [`free_port`], [`free_port_block`], [`repo_root`], [`testdata`].
//!
//! Timeouts here are limits that keep a broken test from hanging, never assertions on how fast
//! something happened.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod ads;
pub mod ads_client;
pub mod echo;
pub mod envoy;
mod error;
pub mod http;
pub mod jwt;
pub mod plane;
pub mod wait;

pub use ads::RunningAds;
pub use ads_client::{AckingClient, sidecar_node};
pub use echo::{EchoOptions, EchoServer};
pub use envoy::{AdsApi, Bootstrap, Envoy, envoy_binary, percent_decode};
pub use error::HarnessError;
pub use http::{Response, exchange, exchange_method, get, http_get, request, request_method};
pub use plane::{Plane, PlaneOptions};
pub use wait::{free_port, free_port_block, repo_root, testdata, wait_for, wait_until, write_atomic};
