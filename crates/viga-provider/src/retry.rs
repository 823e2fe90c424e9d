//! How failed calls are retried: exponential backoff with jitter, bounded both in attempts and
//! in total waiting, and overridden by the server's own `Retry-After`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The longest wait a server can ask for and have it recorded as asked (see
/// `HttpClient::classify`). A broken or hostile server can send `Retry-After:
/// 18446744073709551615`; anything past this is taken as this (a day), which is past any
/// retry budget anyway: the call fails at once and says to wait.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The retry budget of one model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; 1 turns retries off.
    pub max_attempts: u32,
    /// The wait before the first retry; each later retry doubles it.
    #[serde(rename = "initial_backoff_secs", with = "crate::config::secs")]
    pub initial_backoff: Duration,
    /// The longest computed wait between two attempts (a server's `Retry-After` may ask more).
    #[serde(rename = "max_backoff_secs", with = "crate::config::secs")]
    pub max_backoff: Duration,
    /// The most time spent waiting between attempts, summed over the call. A wait that would
    /// pass it ends the retries at once, so a long `Retry-After` fails fast instead of hanging.
    #[serde(rename = "max_total_wait_secs", with = "crate::config::secs")]
    pub max_total_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_total_wait: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1 for the first retry). A server's `Retry-After`
    /// wins; otherwise the backoff doubles from `initial_backoff` up to `max_backoff` and is
    /// scaled by `jitter` (in 0..=1) into its upper half, so that clients that failed together
    /// do not come back together while the wait still grows.
    pub(crate) fn delay(&self, retry: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        if let Some(after) = retry_after {
            return after;
        }
        let doublings = retry.saturating_sub(1).min(31);
        let base = self
            .initial_backoff
            .saturating_mul(1u32 << doublings)
            .min(self.max_backoff);
        // Not `mul_f64`, which panics when the product rounds past Duration::MAX (a
        // `max_backoff_secs` near u64::MAX) or the jitter is NaN: the base wait is kept then.
        let scale = 0.5 + 0.5 * jitter.clamp(0.0, 1.0);
        Duration::try_from_secs_f64(base.as_secs_f64() * scale).unwrap_or(base)
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.max_attempts == 0 {
            return Err("retry.max_attempts must be at least 1 (1 turns retries off)".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_total_wait: Duration::from_secs(60),
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitter_stays_in_the_upper_half() {
        let policy = policy();
        let full: Vec<_> = (1..=6)
            .map(|retry| policy.delay(retry, None, 1.0))
            .collect();
        let millis: Vec<_> = full.iter().map(Duration::as_millis).collect();
        assert_eq!(millis, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(
            policy.delay(3, None, 0.0),
            Duration::from_millis(200),
            "the least jitter halves the wait"
        );
        assert_eq!(policy.delay(40, None, 1.0), Duration::from_millis(1000));
    }

    #[test]
    fn retry_after_from_the_server_wins() {
        let after = Duration::from_secs(7);
        assert_eq!(policy().delay(1, Some(after), 0.3), after);
    }

    #[test]
    fn an_absurd_backoff_is_computed_without_panicking() {
        let policy = policy();
        let huge = RetryPolicy {
            initial_backoff: Duration::MAX,
            max_backoff: Duration::MAX,
            ..policy
        };
        for jitter in [0.0, 1.0, f64::NAN] {
            assert!(huge.delay(u32::MAX, None, jitter) > Duration::from_secs(1 << 62));
        }
    }

    #[test]
    fn zero_attempts_is_refused() {
        let policy = RetryPolicy {
            max_attempts: 0,
            ..policy()
        };
        assert!(policy.validate().unwrap_err().contains("max_attempts"));
    }
}
