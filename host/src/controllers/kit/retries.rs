//! One error policy for every controller: exponential backoff with jitter per object, and a
//! cap on how often the same failure of the same object reaches the log.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// How long a repeated, identical failure of one object stays out of the log.
const LOG_EVERY: Duration = Duration::from_secs(300);

/// Per-object retry state, keyed by `Kind/namespace/name`.
pub(crate) struct Retries {
    builder: ExponentialBuilder,
    entries: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    backoff: ExponentialBackoff,
    attempt: u32,
    /// The failure last written to the log, and when.
    logged: Option<(String, Instant)>,
    /// Identical failures since then that were not logged.
    suppressed: u64,
    touched: Instant,
}

/// What to do about one more failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Retry {
    pub(crate) delay: Duration,
    /// 1 for the first failure in a row.
    pub(crate) attempt: u32,
    pub(crate) log: LogLine,
}

/// Whether the failure is worth a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogLine {
    /// New (or changed) failure: log it.
    Write,
    /// The same failure again after a quiet period: log it with how often it was not.
    Repeat { suppressed: u64 },
    /// The same failure again: keep quiet (a debug line at most).
    Quiet,
}

impl Retries {
    /// Delays from `min` doubling to `max`, each stretched by a random 0–100 %.
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self {
            builder: ExponentialBuilder::new()
                .with_jitter()
                .with_factor(2.0)
                .with_min_delay(min)
                .with_max_delay(max)
                .without_max_times(),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// One more failure of `key`, described by `message`.
    pub(crate) fn fail(&self, key: &str, message: &str) -> Retry {
        let now = Instant::now();
        let mut entries = self.entries.lock().expect("retries lock");
        let entry = entries.entry(key.to_string()).or_insert_with(|| Entry {
            backoff: self.builder.build(),
            attempt: 0,
            logged: None,
            suppressed: 0,
            touched: now,
        });
        entry.attempt += 1;
        entry.touched = now;
        let delay = entry.backoff.next().unwrap_or(Duration::from_secs(300));
        let log = match &entry.logged {
            Some((last, at)) if last == message && now.duration_since(*at) < LOG_EVERY => {
                entry.suppressed += 1;
                LogLine::Quiet
            }
            Some((last, _)) if last == message => {
                let suppressed = std::mem::take(&mut entry.suppressed);
                entry.logged = Some((message.to_string(), now));
                LogLine::Repeat { suppressed }
            }
            _ => {
                entry.suppressed = 0;
                entry.logged = Some((message.to_string(), now));
                LogLine::Write
            }
        };
        Retry {
            delay,
            attempt: entry.attempt,
            log,
        }
    }

    /// `key` succeeded: the next failure starts from the shortest delay again. Failures
    /// recorded after `since` (a retryable wait decided in the same reconcile) are kept.
    pub(crate) fn succeeded(&self, key: &str, since: Instant) {
        let mut entries = self.entries.lock().expect("retries lock");
        if entries.get(key).is_some_and(|e| e.touched < since) {
            entries.remove(key);
        }
    }
}

impl Default for Retries {
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(300))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_with_jitter_up_to_the_cap() {
        let r = Retries::new(Duration::from_secs(1), Duration::from_secs(8));
        let delays: Vec<Duration> = (0..8).map(|_| r.fail("a", "boom").delay).collect();
        for (i, d) in delays.iter().enumerate() {
            let base = Duration::from_secs(1 << i.min(3));
            assert!(*d >= base && *d < base * 2, "attempt {i}: {d:?}");
        }
        // Another object has its own count.
        assert!(r.fail("b", "boom").delay < Duration::from_secs(2));
        assert_eq!(r.fail("a", "boom").attempt, 9);
    }

    #[test]
    fn the_same_failure_is_logged_once_per_quiet_period() {
        let r = Retries::default();
        assert_eq!(r.fail("a", "boom").log, LogLine::Write);
        for _ in 0..100 {
            assert_eq!(r.fail("a", "boom").log, LogLine::Quiet);
        }
        // A different failure is news.
        assert_eq!(r.fail("a", "bang").log, LogLine::Write);
    }

    #[test]
    fn success_resets_but_keeps_a_wait_decided_in_the_same_pass() {
        let r = Retries::default();
        let before = Instant::now();
        r.fail("a", "boom");
        r.succeeded("a", before);
        assert_eq!(
            r.fail("a", "boom").attempt,
            2,
            "failed during this pass: kept"
        );
        r.succeeded("a", Instant::now());
        assert_eq!(r.fail("a", "boom").attempt, 1);
    }
}
