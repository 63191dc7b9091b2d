//! The echo cache: a status this process wrote (or computed and failed to write) that the watch cache may not
//! show yet, so that the watch's echo of it is known for what it is and a reconcile builds on it rather than on
//! the older cached copy. Owns only that bookkeeping; the driver decides when to consult it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::driver::Reconciled;
use super::watch::Key;

/// A status this process computed that the watch cache may not show yet: after a successful patch the
/// cached object lags until its watch event arrives; after a failed one the work is kept to write again
/// rather than done again.
#[derive(Debug, Clone)]
pub struct Ahead<S> {
    /// The resourceVersion of the cached object the status was computed from.
    pub base_rv: String,
    pub status: S,
    /// The resourceVersion the patch produced; `None` when the patch did not land.
    pub written_rv: Option<String>,
    /// Measurements (phase, provider) not yet counted in `canaryd_measurements_total`.
    pub uncounted: Vec<(&'static str, &'static str)>,
    /// When the written status next needs a reconcile; `None` when it is complete or was not written.
    pub wakeup: Option<jiff::Timestamp>,
    /// The resourceVersions this one was written on top of that the cache had not shown when it was built
    /// (this process's earlier writes, which [`EchoCache::remember`] keeps, and the version the write was
    /// made against when it was not `base_rv`): when a watch lags by more than a run's interval, the cache
    /// shows them after the status built on them was written, and they are stale.
    pub superseded: Vec<String>,
}

/// One kind's echo cache, by object.
pub struct EchoCache<K: Reconciled> {
    map: Mutex<HashMap<Key, Ahead<K::Status>>>,
}

impl<K: Reconciled> Default for EchoCache<K> {
    fn default() -> Self {
        EchoCache {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Reconciled> EchoCache<K> {
    /// Whether `rv` is the version this process's last status write of `key` produced, either completing
    /// the object or with a wake-up planned after it: then the watch is only echoing that write and there
    /// is nothing new to do. Returns the planned wake-up, `None` for a completed object (what the writing
    /// reconcile returned stands). The write is forgotten, since the cache now shows it.
    pub fn of_own_write(
        &self,
        key: &Key,
        rv: &str,
        now: jiff::Timestamp,
    ) -> Option<Option<jiff::Timestamp>> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let a = map.get(key)?;
        let superseded = a.superseded.iter().any(|s| s == rv);
        if a.written_rv.as_deref() != Some(rv) && !superseded {
            return None;
        }
        let planned = if K::is_completed(&a.status) {
            None
        } else {
            Some(a.wakeup.filter(|w| *w > now)?)
        };
        // The echo of an earlier write: the last one is still to come.
        if !superseded {
            map.remove(key);
        }
        Some(planned)
    }

    /// What this process computed from exactly version `rv` of `key`, or from a later version it wrote itself
    /// on top of `rv`, and the cache does not show yet. Anything it computed from another version is out of
    /// date: dropped.
    pub fn ahead_of(&self, key: &Key, rv: &str) -> Option<Ahead<K::Status>> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(key) {
            Some(a) if a.base_rv == rv || a.superseded.iter().any(|s| s == rv) => Some(a.clone()),
            _ => {
                map.remove(key);
                None
            }
        }
    }

    /// Keeps (or forgets, with `None`) what this process computed of `key`. A write built on this process's
    /// own earlier write, whose echo the cache has not shown, supersedes it: the earlier one's version is
    /// kept in [`Ahead::superseded`] with those `ahead` names itself (the earlier entry may already be gone:
    /// the driver forgets it when its echo arrives while the write built on it is still in flight), so that
    /// its late echo is known for what it is.
    pub fn remember(&self, key: Key, ahead: Option<Ahead<K::Status>>) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(mut ahead) = ahead else {
            map.remove(&key);
            return;
        };
        if let Some(earlier) = map.remove(&key)
            && let Some(written) = earlier.written_rv
            && ahead.written_rv.is_some()
            && (earlier.base_rv == ahead.base_rv || earlier.superseded.contains(&ahead.base_rv))
        {
            let named = std::mem::replace(&mut ahead.superseded, earlier.superseded);
            for rv in named.into_iter().chain([written]) {
                if !ahead.superseded.contains(&rv) {
                    ahead.superseded.push(rv);
                }
            }
        }
        ahead.superseded.retain(|rv| *rv != ahead.base_rv);
        map.insert(key, ahead);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status this process wrote with `rv` on top of `base`, measured again at `wakeup`.
    fn written(base: &str, rv: &str, wakeup: &str) -> Ahead<crate::api::AnalysisRunStatus> {
        Ahead {
            base_rv: base.to_string(),
            status: Default::default(),
            written_rv: Some(rv.to_string()),
            uncounted: Vec::new(),
            wakeup: wakeup.parse().ok(),
            superseded: Vec::new(),
        }
    }

    #[test]
    fn the_late_echo_of_an_earlier_own_write_is_stale_and_keeps_the_later_one() {
        // A watch lagging by more than a run's interval: from version 1 in the cache this process wrote 2,
        // then, at the next measurement, 3 on top of 2, before the cache showed 2.
        let state: EchoCache<crate::api::AnalysisRun> = EchoCache::default();
        let key = ("default".to_string(), "run".to_string());
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("a timestamp");
        state.remember(key.clone(), Some(written("1", "2", "2026-01-01T00:00:10Z")));
        state.remember(key.clone(), Some(written("1", "3", "2026-01-01T00:00:20Z")));
        // The echo of 2 arrives: an echo of this process's own write (no reconcile until the wake-up), and
        // a reconcile reading 2 builds on 3, not on 2 (which would be refused with 409 Conflict).
        assert_eq!(
            state.of_own_write(&key, "2", now),
            Some("2026-01-01T00:00:20Z".parse().ok())
        );
        let ahead = state.ahead_of(&key, "2").expect("what 3 holds");
        assert_eq!(ahead.written_rv.as_deref(), Some("3"));
        // A write from there (base 2) supersedes 3 in turn.
        state.remember(key.clone(), Some(written("2", "4", "2026-01-01T00:00:30Z")));
        assert_eq!(
            state.ahead_of(&key, "3").and_then(|a| a.written_rv),
            Some("4".to_string())
        );
        // The echo of the last write ends it; a version this process did not write drops what it computed.
        assert!(state.of_own_write(&key, "4", now).is_some());
        assert!(state.ahead_of(&key, "3").is_none());
        state.remember(key.clone(), Some(written("5", "6", "2026-01-01T00:00:40Z")));
        assert!(state.ahead_of(&key, "7").is_none());
        assert!(state.of_own_write(&key, "6", now).is_none());
    }

    #[test]
    fn a_write_built_on_an_earlier_one_whose_echo_was_told_meanwhile_still_knows_that_version_for_stale()
     {
        let state: EchoCache<crate::api::AnalysisRun> = EchoCache::default();
        let key = ("default".to_string(), "run".to_string());
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("a timestamp");
        // From version 1 in the cache this process wrote 2; a reconcile, the cache still at 1, builds on 2.
        state.remember(key.clone(), Some(written("1", "2", "2026-01-01T00:00:10Z")));
        assert_eq!(
            state.ahead_of(&key, "1").and_then(|a| a.written_rv),
            Some("2".to_string())
        );
        // While it measures, the echo of 2 reaches the driver, which forgets the entry.
        assert!(state.of_own_write(&key, "2", now).is_some());
        // It writes 3 on top of 2, from base 1: 2 is named as superseded though the entry is gone.
        let mut on_top = written("1", "3", "2026-01-01T00:00:20Z");
        on_top.superseded.push("2".to_string());
        state.remember(key.clone(), Some(on_top));
        // A reconcile of the cache's 2 builds on 3 (not on 2, which would take 3's measurement again and be
        // refused with 409 Conflict), and 2's echo is known as this process's own.
        assert_eq!(
            state.ahead_of(&key, "2").and_then(|a| a.written_rv),
            Some("3".to_string())
        );
        assert_eq!(
            state.of_own_write(&key, "2", now),
            Some("2026-01-01T00:00:20Z".parse().ok())
        );
        // A later write from the cache's 2, made against 4 (3 with another client's metadata change on top, met
        // after a conflict), keeps both what the entry named and what the write names, less its own base.
        let mut next = written("2", "5", "2026-01-01T00:00:30Z");
        next.superseded.push("4".to_string());
        state.remember(key.clone(), Some(next));
        let ahead = state.ahead_of(&key, "4").expect("what 5 holds");
        assert_eq!(ahead.written_rv.as_deref(), Some("5"));
        assert_eq!(ahead.superseded, ["4".to_string(), "3".to_string()]);
    }
}
