//! How long an object whose reconcile failed waits before the next try: Argo Rollouts' rate limiter
//! (`utils/queue`'s `DefaultArgoRolloutsRateLimiter`, client-go's `ItemExponentialFailureRateLimiter` with a base
//! of 1 ms and a cap of 10 s) for each object on its own. The first failure waits 1 ms, each further one twice
//! as long, up to 10 s; a reconcile that succeeds forgets the object's failures (Argo's `Forget`), so its next
//! failure waits 1 ms again. A change to the object still reconciles it at once, as a watch event added to
//! Argo's queue does.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

/// The first retry's wait.
pub const BASE: Duration = Duration::from_millis(1);

/// The longest wait.
pub const CAP: Duration = Duration::from_secs(10);

/// The failures in a row of each object that has failed since its last success.
#[derive(Debug)]
pub struct Backoff<K> {
    failures: HashMap<K, u32>,
}

impl<K: Eq + Hash> Default for Backoff<K> {
    fn default() -> Self {
        Backoff {
            failures: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash> Backoff<K> {
    /// `key`'s reconcile failed: how long it waits before the next try.
    pub fn failed(&mut self, key: K) -> Duration {
        let failures = self.failures.entry(key).or_insert(0);
        let wait = 2u32
            .checked_pow(*failures)
            .and_then(|factor| BASE.checked_mul(factor))
            .map_or(CAP, |wait| wait.min(CAP));
        *failures = failures.saturating_add(1);
        wait
    }

    /// `key`'s reconcile succeeded (or it is gone): its next failure starts over.
    pub fn forget(&mut self, key: &K) {
        self.failures.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn failures_in_a_row_wait_twice_as_long_each_time_up_to_ten_seconds() {
        let mut backoff = Backoff::default();
        let waits: Vec<Duration> = (0..16).map(|_| backoff.failed("web")).collect();
        let doubling = (0..14).map(|n| millis(1 << n));
        let expected: Vec<Duration> = doubling.chain([CAP, CAP]).collect();
        assert_eq!(waits, expected);
        // Argo's cap holds however long the failures go on, with no overflow.
        for _ in 0..100 {
            assert_eq!(backoff.failed("web"), CAP);
        }
    }

    #[test]
    fn each_object_backs_off_on_its_own_and_a_success_starts_it_over() {
        let mut backoff = Backoff::default();
        assert_eq!(backoff.failed("a"), millis(1));
        assert_eq!(backoff.failed("a"), millis(2));
        assert_eq!(backoff.failed("b"), millis(1));
        assert_eq!(backoff.failed("a"), millis(4));
        backoff.forget(&"a");
        assert_eq!(backoff.failed("a"), millis(1));
        assert_eq!(backoff.failed("b"), millis(2));
    }
}
