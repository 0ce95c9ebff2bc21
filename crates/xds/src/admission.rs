//! Admission control of new ADS streams: Istio's `PILOT_MAX_REQUESTS_PER_SECOND`
//! (`pilot/pkg/xds/discovery.go` `WaitForRequestLimit`).
//!
//! Every new stream (SotW or Delta, on the port the limiter is given to) takes one token from a
//! token bucket refilled at `rate` tokens per second, holding at most `burst` tokens. A stream that
//! finds no token waits for its turn when that turn comes within [`MAX_WAIT`] (1 s, as Istio); when
//! it would come later the stream is refused at once with `RESOURCE_EXHAUSTED` and Istio's message
//! `request rate limit exceeded: …`, so the proxy reconnects (to another replica, or to this one after
//! its backoff). Like Go's `rate.Limiter.Wait` under a 1 s deadline, a refused stream takes no token.
//!
//! The rule is [`TokenBucket::reserve`], a pure function of the bucket and the time given to it;
//! [`RequestLimiter`] wraps it with the clock, the wait and the metric.
//!
//! **Default** ([`default_max_requests_per_second`]): Istio's is `min(15 + 5 × CPUs, 100)` per second
//! (25 on 2 cores), which makes 10,000 proxies reconnecting after a restart take ≥ 400 s. meshpilot
//! admits `max(Istio's, 500 × CPUs)` per second (1,000 on 2 cores: a 10,000-proxy storm is admitted
//! in ≈ 10 s, what the machine serves anyway; docs/RELIABILITY.md "Connection storms"). Istio's burst
//! of 1 is kept.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use tonic::Status;
use tracing::warn;

use crate::metrics;

/// Longest wait of a new stream for its token (Istio's `WaitForRequestLimit`: 1 s).
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// meshpilot's default `PILOT_MAX_REQUESTS_PER_SECOND`: `max(min(15 + 5 × CPUs, 100), 500 × CPUs)`
/// new streams per second (1,000 on 2 cores). See the module docs for why it differs from Istio.
pub fn default_max_requests_per_second() -> f64 {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let istio = (15 + 5 * cpus).min(100);
    #[allow(clippy::cast_precision_loss)]
    let rate = istio.max(500 * cpus) as f64;
    rate
}

/// A token bucket (Go's `rate.Limiter` reservation rule): `rate` tokens per second, at most `burst`
/// held, starting full. Tokens may go negative: each admitted caller reserves the next token and
/// waits until the bucket would have refilled it.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket. `rate` ≤ 0 (or not finite) means no limit; `burst` is at least 1.
    pub fn new(rate: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket { rate, burst, tokens: burst, last: None }
    }

    /// Whether the bucket limits at all.
    pub fn is_limited(&self) -> bool {
        self.rate > 0.0 && self.rate.is_finite()
    }

    /// Takes one token at `now` for a caller willing to wait up to `max_wait`.
    ///
    /// # Errors
    /// The wait the token would need, when it is longer than `max_wait`; nothing is taken then.
    /// `Ok` carries the wait before the caller may go on (zero when a token was there).
    pub fn reserve(&mut self, now: Instant, max_wait: Duration) -> Result<Duration, Duration> {
        if !self.is_limited() {
            return Ok(Duration::ZERO);
        }
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        }
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        let left = self.tokens - 1.0;
        let wait = if left >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-left / self.rate) };
        if wait > max_wait {
            return Err(wait);
        }
        self.tokens = left;
        Ok(wait)
    }
}

/// One ADS port's admission of new streams. Istio has one `RequestRateLimit` per `DiscoveryServer`,
/// shared by its ports; `meshpilot discovery` gives each port its own, because admission comes before
/// authentication (docs/SECURITY.md).
#[derive(Debug)]
pub struct RequestLimiter {
    bucket: Mutex<TokenBucket>,
    rate: f64,
}

impl RequestLimiter {
    /// `rate` new streams per second (≤ 0: no limit), burst 1 (Istio's).
    pub fn new(rate: f64) -> Self {
        RequestLimiter { bucket: Mutex::new(TokenBucket::new(rate, 1)), rate }
    }

    /// The configured rate (streams per second; ≤ 0: none).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Admits one new stream: returns at once or after its wait (≤ [`MAX_WAIT`]).
    ///
    /// # Errors
    /// `RESOURCE_EXHAUSTED` with Istio's message (`request rate limit exceeded: …`) when the stream's
    /// turn is more than [`MAX_WAIT`] away; counted in `meshpilot_xds_rate_limited` and logged with the
    /// peer.
    pub async fn admit(&self, peer: Option<std::net::SocketAddr>) -> Result<(), Status> {
        let reserved =
            self.bucket.lock().unwrap_or_else(|p| p.into_inner()).reserve(Instant::now(), MAX_WAIT);
        match reserved {
            Ok(wait) if wait.is_zero() => Ok(()),
            Ok(wait) => {
                tokio::time::sleep(wait).await;
                Ok(())
            }
            Err(needed) => {
                let status = rate_limited(needed);
                warn!(peer = ?peer, "ADS: exceeded rate limit: {}", status.message());
                metrics::record_rate_limited();
                Err(status)
            }
        }
    }
}

impl Default for RequestLimiter {
    fn default() -> Self {
        RequestLimiter::new(default_max_requests_per_second())
    }
}

/// The status of a refused stream: Istio's text (`request rate limit exceeded: ` and Go's
/// `rate: Wait(n=1) would exceed context deadline`), plus the wait it would have needed.
pub fn rate_limited(needed: Duration) -> Status {
    Status::resource_exhausted(format!(
        "request rate limit exceeded: rate: Wait(n=1) would exceed context deadline (next slot in {} ms)",
        needed.as_millis()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_full_bucket_admits_its_burst_then_spaces_callers_by_the_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 2);
        assert_eq!(b.reserve(t0, MAX_WAIT), Ok(Duration::ZERO));
        assert_eq!(b.reserve(t0, MAX_WAIT), Ok(Duration::ZERO));
        // 10/s: the third waits 100 ms, the fourth 200 ms.
        let w3 = b.reserve(t0, MAX_WAIT).unwrap();
        let w4 = b.reserve(t0, MAX_WAIT).unwrap();
        assert!(w3.abs_diff(100 * MS) < MS, "{w3:?}");
        assert!(w4.abs_diff(200 * MS) < MS, "{w4:?}");
    }

    #[test]
    fn a_caller_whose_turn_is_beyond_the_wait_is_refused_and_takes_nothing() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(2.0, 1);
        assert_eq!(b.reserve(t0, MAX_WAIT), Ok(Duration::ZERO));
        assert!(b.reserve(t0, MAX_WAIT).unwrap().abs_diff(500 * MS) < MS);
        assert!(b.reserve(t0, MAX_WAIT).unwrap().abs_diff(1000 * MS) < MS, "exactly 1 s is admitted");
        let refused = b.reserve(t0, MAX_WAIT).unwrap_err();
        assert!(refused.abs_diff(1500 * MS) < MS, "{refused:?}");
        // Refusals take no token: the next caller still needs 1.5 s, not 2 s.
        assert!(b.reserve(t0, MAX_WAIT).unwrap_err().abs_diff(1500 * MS) < MS);
        // Time refills: 1 s later the same caller waits 0.5 s.
        assert!(b.reserve(t0 + 1000 * MS, MAX_WAIT).unwrap().abs_diff(500 * MS) < MS);
    }

    #[test]
    fn refill_is_capped_at_the_burst() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(100.0, 1);
        assert_eq!(b.reserve(t0, Duration::ZERO), Ok(Duration::ZERO));
        // An hour idle still holds one token only.
        let t1 = t0 + Duration::from_secs(3600);
        assert_eq!(b.reserve(t1, Duration::ZERO), Ok(Duration::ZERO));
        assert!(b.reserve(t1, Duration::ZERO).is_err());
        assert!(b.reserve(t1 + 10 * MS, Duration::ZERO).is_ok());
    }

    #[test]
    fn zero_rate_is_no_limit_and_clock_going_back_is_harmless() {
        let t0 = Instant::now();
        let mut off = TokenBucket::new(0.0, 1);
        assert!(!off.is_limited());
        assert!((0..10_000).all(|_| off.reserve(t0, Duration::ZERO) == Ok(Duration::ZERO)));
        let mut b = TokenBucket::new(1.0, 1);
        assert_eq!(b.reserve(t0 + Duration::from_secs(5), MAX_WAIT), Ok(Duration::ZERO));
        // An earlier instant (another thread's clock read) refills nothing.
        assert!(b.reserve(t0, MAX_WAIT).unwrap().abs_diff(1000 * MS) < MS);
    }

    #[test]
    fn default_is_at_least_istios_and_the_message_is_istios() {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        #[allow(clippy::cast_precision_loss)]
        let expected = ((15 + 5 * cpus).min(100)).max(500 * cpus) as f64;
        assert!((default_max_requests_per_second() - expected).abs() < f64::EPSILON);
        let s = rate_limited(1500 * MS);
        assert_eq!(s.code(), tonic::Code::ResourceExhausted);
        assert!(s.message().starts_with("request rate limit exceeded: "), "{}", s.message());
    }
}
