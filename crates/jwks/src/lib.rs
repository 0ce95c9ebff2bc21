//! The JWKS resolver (Istio's `pilot/pkg/model/jwks_resolver.go`): the control plane fetches the JSON
//! Web Key Sets of RequestAuthentication rules with a `jwksUri` (or, with none, from the issuer's
//! OpenID discovery document) and hands them to the JWT filter builder inline
//! ([`networking::jwt::JwksSource`]). This is Istio's default `PILOT_JWT_ENABLE_REMOTE_JWKS=false`
//! (`istiod`) mode; Envoy never fetches keys itself.
//!
//! Behaviour:
//!
//! - **Never blocks a push.** The first ask for an `(issuer, jwksUri)` answers
//!   [`JwksState::Pending`] and starts a background fetch; the builder then sends the fail-closed key
//!   set until it completes. (Istio fetches synchronously once during the push, then in the
//!   background.)
//! - **Notifies.** Every change of what [`JwksSource::jwks`] answers (keys fetched, keys changed, first
//!   failure, stale keys evicted) bumps a counter readable through [`JwksResolver::subscribe`]: the
//!   server turns it into a push. A refresh that returns the same keys (compared as Istio does: JSON,
//!   keys ordered by `kid`) does not notify.
//! - **Fetch.** `GET` over `http` or `https` (system roots plus the PEM files of
//!   [`JwksOptions::extra_root_ca_paths`], Istio's `/cacerts/extra.pem`), one connection per fetch (no
//!   keep-alive, as Istio), the rule's `timeout` (default 5 s) per attempt, a 2xx status and a body
//!   that is a JSON object with a `keys` array (Istio's `validateJWKSFormat`) required. With no
//!   `jwksUri`, `ISSUER/.well-known/openid-configuration` is read first and its `jwks_uri` fetched.
//!   Connections to link-local addresses, well-known cloud metadata addresses and
//!   `BLOCKED_CIDRS_IN_JWKS_URIS` are refused after name resolution (Istio's SSRF guard).
//! - **Retries and refresh** (each entry has its own task): the first fetch is one attempt; after a
//!   failure, [`JwksOptions::refresh_retries`] more attempts [`JwksOptions::retry_interval`] apart
//!   at once, then refreshes after [`JwksOptions::refresh_interval_on_failure`], doubling up to
//!   [`JwksOptions::refresh_backoff_max`]; after a success, a refresh every
//!   [`JwksOptions::refresh_interval`] (`PILOT_JWT_PUB_KEY_REFRESH_INTERVAL`). A failed refresh keeps
//!   the last good keys.
//! - **Eviction.** An entry not asked for, or not refreshed successfully, for
//!   [`JwksOptions::eviction_duration`] (7 days) is removed at its next refresh (Istio's rule).
//! - **Metrics**: counters [`metrics::FETCH_SUCCESS`] and [`metrics::FETCH_FAIL`] per HTTP attempt
//!   (OpenID discovery documents included), Istio's names.
//!
//! Environment (read once by the binary, parsed by `discovery::options::jwks_options_from_lookup`):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `PILOT_JWT_PUB_KEY_REFRESH_INTERVAL` | `20m` | refresh period of fetched key sets |
//! | `PILOT_JWT_ENABLE_REMOTE_JWKS` | `false` | only `false`/`istiod` (and unknown values, as Istio) are supported |
//! | `JWKS_RESOLVER_INSECURE_SKIP_VERIFY` | `false` | accept any server certificate for `https` |
//! | `BLOCKED_CIDRS_IN_JWKS_URIS` | empty | comma-separated CIDRs never connected to |

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod fetch;
pub mod metrics;
#[cfg(test)]
mod tests;

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex, Weak},
    time::{Duration, Instant},
};

use ipnet::IpNet;
use networking::jwt::{DEFAULT_JWKS_TIMEOUT, JwksSource, JwksState};
use tokio::sync::watch;

/// The resolver's tuning, with Istio's defaults (`jwks_resolver.go` constants and `features`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwksOptions {
    /// Refresh period after a successful fetch (`PILOT_JWT_PUB_KEY_REFRESH_INTERVAL`, 20 min).
    pub refresh_interval: Duration,
    /// First wait after a failed refresh (`JwtPubKeyRefreshIntervalOnFailure`, 1 min); doubles after
    /// each further failure.
    pub refresh_interval_on_failure: Duration,
    /// Longest wait between failed refreshes (`JwtPubKeyRefreshIntervalOnFailureResetThreshold`,
    /// 60 min).
    pub refresh_backoff_max: Duration,
    /// Wait between the attempts of one refresh (`JwtPubKeyRetryInterval`, 1 s).
    pub retry_interval: Duration,
    /// Extra attempts of a refresh after a failure (`networkFetchRetryCountOnRefreshFlow`, 7); the
    /// first fetch of an entry makes one attempt (`networkFetchRetryCountOnMainFlow`, 0 retries).
    pub refresh_retries: u32,
    /// An entry not asked for, or not refreshed successfully, for this long is dropped
    /// (`JwtPubKeyEvictionDuration`, 7 days).
    pub eviction_duration: Duration,
    /// Accept any `https` server certificate (`JWKS_RESOLVER_INSECURE_SKIP_VERIFY`, false).
    pub insecure_skip_verify: bool,
    /// PEM files of extra root certificates for `https` (Istio's `/cacerts/extra.pem`); missing
    /// files are skipped.
    pub extra_root_ca_paths: Vec<PathBuf>,
    /// Also trust the system's root certificates (true; tests turn it off).
    pub system_roots: bool,
    /// Addresses never connected to, on top of link-local and cloud metadata addresses
    /// (`BLOCKED_CIDRS_IN_JWKS_URIS`).
    pub blocked_cidrs: Vec<IpNet>,
    /// Largest body read from a JWKS or OpenID discovery response (1 MiB; Istio has no limit).
    pub max_body_bytes: usize,
}

impl Default for JwksOptions {
    fn default() -> Self {
        JwksOptions {
            refresh_interval: Duration::from_secs(20 * 60),
            refresh_interval_on_failure: Duration::from_secs(60),
            refresh_backoff_max: Duration::from_secs(60 * 60),
            retry_interval: Duration::from_secs(1),
            refresh_retries: 7,
            eviction_duration: Duration::from_secs(7 * 24 * 60 * 60),
            insecure_skip_verify: false,
            extra_root_ca_paths: vec![PathBuf::from("/cacerts/extra.pem")],
            system_roots: true,
            blocked_cidrs: Vec::new(),
            max_body_bytes: 1 << 20,
        }
    }
}

/// Cache key: the rule's issuer and `jwksUri` (empty: OpenID discovery).
type Key = (String, String);

/// One cached key set.
#[derive(Debug)]
struct Entry {
    /// The last good key set (kept through failed refreshes).
    keys: Option<String>,
    /// The last fetch error, if the last fetch failed.
    error: Option<String>,
    /// Last time the builder asked for it.
    last_used: Instant,
    /// Last successful fetch (creation time until the first).
    last_refreshed: Instant,
    /// The rule's fetch timeout (the latest asked with).
    timeout: Duration,
}

impl Entry {
    fn state(&self) -> JwksState {
        match (&self.keys, &self.error) {
            (Some(keys), _) => JwksState::Resolved(keys.clone()),
            (None, Some(error)) => JwksState::Failed(error.clone()),
            (None, None) => JwksState::Pending,
        }
    }
}

/// Shared state of a resolver and its fetch tasks.
struct Inner {
    options: JwksOptions,
    entries: Mutex<HashMap<Key, Entry>>,
    changes: watch::Sender<u64>,
    client: fetch::Client,
    runtime: tokio::runtime::Handle,
    /// Dropped with the resolver: its receivers in the tasks then see the end.
    _shutdown: watch::Sender<()>,
    shutdown: watch::Receiver<()>,
}

/// Fetches, caches and refreshes remote JSON Web Key Sets; see the module doc. Cheap to clone (one
/// shared cache); the fetch tasks end when the last clone is dropped.
#[derive(Clone)]
pub struct JwksResolver {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for JwksResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksResolver").field("options", &self.inner.options).finish_non_exhaustive()
    }
}

impl JwksResolver {
    /// A resolver whose fetch tasks run on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn new(options: JwksOptions) -> Self {
        Self::with_runtime(options, tokio::runtime::Handle::current())
    }

    /// A resolver whose fetch tasks run on `runtime`.
    pub fn with_runtime(options: JwksOptions, runtime: tokio::runtime::Handle) -> Self {
        let client = fetch::Client::new(&options);
        let (shutdown_tx, shutdown_rx) = watch::channel(());
        JwksResolver {
            inner: Arc::new(Inner {
                client,
                entries: Mutex::new(HashMap::new()),
                changes: watch::channel(0).0,
                runtime,
                _shutdown: shutdown_tx,
                shutdown: shutdown_rx,
                options,
            }),
        }
    }

    /// A receiver of the change counter: bumped whenever what [`JwksSource::jwks`] answers for some
    /// entry changed (wait with `changed()`; the value is the number of changes so far).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// The options in force.
    pub fn options(&self) -> &JwksOptions {
        &self.inner.options
    }

    /// Number of cached entries (for `/debug` and tests).
    pub fn len(&self) -> usize {
        self.inner.lock().len()
    }

    /// `true` when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl JwksSource for JwksResolver {
    fn jwks(&self, issuer: &str, jwks_uri: &str) -> JwksState {
        self.jwks_with_timeout(issuer, jwks_uri, DEFAULT_JWKS_TIMEOUT)
    }

    fn jwks_with_timeout(&self, issuer: &str, jwks_uri: &str, timeout: Duration) -> JwksState {
        if issuer.is_empty() && jwks_uri.is_empty() {
            return JwksState::Failed("jwksUri and issuer are both empty".to_string());
        }
        let key: Key = (issuer.to_string(), jwks_uri.to_string());
        let now = Instant::now();
        let mut entries = self.inner.lock();
        if let Some(entry) = entries.get_mut(&key) {
            entry.last_used = now;
            entry.timeout = timeout;
            return entry.state();
        }
        entries.insert(
            key.clone(),
            Entry { keys: None, error: None, last_used: now, last_refreshed: now, timeout },
        );
        drop(entries);
        let weak = Arc::downgrade(&self.inner);
        let shutdown = self.inner.shutdown.clone();
        self.inner.runtime.spawn(run_entry(weak, key, shutdown));
        JwksState::Pending
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn notify(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Records a fetch result; returns `false` when the entry is gone (the task then ends).
    fn apply(&self, key: &Key, result: &Result<String, String>) -> bool {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(key) else { return false };
        let changed = match result {
            Ok(body) => {
                entry.last_refreshed = Instant::now();
                entry.error = None;
                let same = entry.keys.as_deref().is_some_and(|old| same_key_set(old, body));
                if !same {
                    tracing::info!(issuer = %key.0, jwks_uri = %key.1, "JWKS updated");
                    entry.keys = Some(body.clone());
                }
                !same
            }
            Err(error) => {
                let was_pending = entry.keys.is_none() && entry.error.is_none();
                tracing::warn!(issuer = %key.0, jwks_uri = %key.1, %error, stale_keys = entry.keys.is_some(), "JWKS fetch failed");
                entry.error = Some(error.clone());
                was_pending
            }
        };
        drop(entries);
        if changed {
            self.notify();
        }
        true
    }

    /// Removes the entry if it was not used or not refreshed for the eviction duration; returns its
    /// timeout when it stays.
    fn keep_or_evict(&self, key: &Key) -> Option<Duration> {
        let mut entries = self.lock();
        let entry = entries.get(key)?;
        let eviction = self.options.eviction_duration;
        if entry.last_used.elapsed() < eviction && entry.last_refreshed.elapsed() < eviction {
            return Some(entry.timeout);
        }
        tracing::info!(issuer = %key.0, jwks_uri = %key.1, "cached JWKS evicted (unused or not refreshed)");
        let had_keys = entries.remove(key).is_some_and(|e| e.keys.is_some() || e.error.is_some());
        drop(entries);
        if had_keys {
            self.notify();
        }
        None
    }
}

/// The task of one entry: first fetch, retries, refreshes, eviction; ends with the resolver or the
/// entry.
async fn run_entry(weak: Weak<Inner>, key: Key, mut shutdown: watch::Receiver<()>) {
    let mut retries = 0;
    let mut failure_wait: Option<Duration> = None;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let Some(timeout) = inner.keep_or_evict(&key) else { return };
        let result = tokio::select! {
            r = fetch_with_retries(&inner, &key, retries, timeout) => r,
            _ = shutdown.changed() => return,
        };
        if !inner.apply(&key, &result) {
            return;
        }
        let options = &inner.options;
        let wait = match (&result, retries) {
            (Ok(_), _) => {
                failure_wait = None;
                Some(options.refresh_interval)
            }
            // The first attempt failed: the retries follow at once.
            (Err(_), 0) => None,
            (Err(_), _) => {
                let next = match failure_wait {
                    None => options.refresh_interval_on_failure,
                    Some(previous) => (previous * 2).min(options.refresh_backoff_max),
                };
                failure_wait = Some(next);
                Some(next)
            }
        };
        retries = options.refresh_retries;
        drop(inner);
        if let Some(wait) = wait {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// One fetch of the entry's key set with up to `retries` extra attempts.
async fn fetch_with_retries(
    inner: &Inner,
    key: &Key,
    retries: u32,
    timeout: Duration,
) -> Result<String, String> {
    let mut attempt = 0;
    loop {
        match inner.client.fetch_jwks(&key.0, &key.1, timeout).await {
            Ok(body) => return Ok(body),
            Err(error) if attempt >= retries => return Err(error),
            Err(error) => {
                tracing::debug!(issuer = %key.0, jwks_uri = %key.1, %error, "JWKS fetch failed; retrying");
                attempt += 1;
                tokio::time::sleep(inner.options.retry_interval).await;
            }
        }
    }
}

/// Istio's `compareJWKSResponse`: the same text, or the same JSON once both `keys` arrays are
/// ordered by `kid`.
fn same_key_set(old: &str, new: &str) -> bool {
    if old == new {
        return true;
    }
    let parse = |text: &str| -> Option<serde_json::Value> {
        let mut value: serde_json::Value = serde_json::from_str(text).ok()?;
        if let Some(serde_json::Value::Array(keys)) = value.get_mut("keys") {
            keys.sort_by(|a, b| {
                let kid = |v: &serde_json::Value| v.get("kid").and_then(|k| k.as_str()).map(str::to_owned);
                kid(a).cmp(&kid(b))
            });
        }
        Some(value)
    };
    match (parse(old), parse(new)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}
