//! How many requests about one object the Event recorder makes: a token bucket per object, as client-go's
//! spam filter (`EventSourceObjectSpamFilter`) keeps one per source and object: [`BURST`] at once, then one per
//! [`REFILL`]. Not client-go's defaults (25, then one per 300 s), which Argo Rollouts' recorder runs with: a
//! Rollout deployed and then updated through a five-step canary makes 37–38 Events within 35 s (the rollouts
//! bench), so they would drop a third of them. This bound is for an object making distinct Events in a loop (its repeats are
//! counted into series and cost no more than one patch in flight). Time is the Events' own (the daemon's
//! clock), so a test's manual clock drives it.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;

use super::event_series::digest;
use super::recent::Recent;

/// Requests about one object at once: room for several updates of a Rollout of many steps.
pub const BURST: u32 = 100;

/// How long one more request takes to be allowed after the burst: 12 a minute.
pub const REFILL: Duration = Duration::from_secs(5);

/// Objects whose rate is remembered at most. One forgotten (the one heard of longest ago) starts again with a
/// full burst, as in client-go's LRU of 4,096 buckets; this one holds the Rollouts and AnalysisRuns of a
/// daemon at 10,000 Rollouts, at about 64 bytes each.
const OBJECTS: usize = 32_768;

/// The digest of what an Event's rate is counted by: its reporter and the object it is about, as client-go's
/// spam key.
pub fn object_of(event: &Event) -> u128 {
    let regarding = event.regarding.as_ref().map(|r| (&r.kind, &r.name, &r.uid));
    digest(&(
        &event.reporting_controller,
        &event.metadata.namespace,
        regarding,
    ))
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Requests allowed now, in thousandths.
    milli: u64,
    at: Timestamp,
}

const FULL: u64 = BURST as u64 * 1000;

/// Each object's bucket, by a digest of what identifies the object.
#[derive(Debug)]
pub struct Rate {
    buckets: Recent<u128, Bucket>,
}

impl Default for Rate {
    fn default() -> Rate {
        Rate {
            buckets: Recent::new(OBJECTS),
        }
    }
}

impl Rate {
    /// Whether one more request about `object` is allowed at `now`; if so, it is counted.
    pub fn take(&mut self, object: u128, now: Timestamp) -> bool {
        let Some(bucket) = self.buckets.get_mut(&object) else {
            let left = Bucket {
                milli: FULL - 1000,
                at: now,
            };
            self.buckets.insert(object, left, |_| false);
            return true;
        };
        // Earned in whole thousandths, the time of any fraction kept for the next request.
        let thousandth = REFILL.as_nanos() / 1000;
        let elapsed = u128::try_from(now.duration_since(bucket.at).as_nanos()).unwrap_or(0);
        let earned = u64::try_from(elapsed / thousandth).unwrap_or(u64::MAX);
        let milli = bucket.milli.saturating_add(earned);
        if milli >= FULL {
            bucket.at = now;
        } else {
            let spent = i64::try_from(u128::from(earned) * thousandth).unwrap_or(i64::MAX);
            bucket.at = (bucket.at)
                .checked_add(jiff::SignedDuration::from_nanos(spent))
                .unwrap_or(now);
        }
        let milli = milli.min(FULL);
        if milli < 1000 {
            bucket.milli = milli;
            return false;
        }
        bucket.milli = milli - 1000;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + i64::try_from(secs).expect("small")).expect("a time")
    }

    #[test]
    fn an_object_gets_a_burst_then_one_request_per_refill_and_others_their_own() {
        let mut rate = Rate::default();
        for n in 0..BURST {
            assert!(rate.take(1, at(0)), "request {n} of the burst");
        }
        assert!(!rate.take(1, at(0)), "one over the burst");
        assert!(rate.take(2, at(0)), "another object has a burst of its own");
        let refill = REFILL.as_secs();
        assert!(!rate.take(1, at(refill - 1)), "not yet refilled");
        assert!(rate.take(1, at(refill)), "one more after the refill");
        assert!(!rate.take(1, at(refill)));
        // A long quiet time refills the burst, and no more.
        let later = refill * u64::from(BURST) * 4;
        for n in 0..BURST {
            assert!(rate.take(1, at(later)), "request {n} of the refilled burst");
        }
        assert!(!rate.take(1, at(later)));
    }
}
