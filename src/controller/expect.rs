//! What this process knows the API server holds of the objects one Rollout's reconcile reads, so that the next
//! reconcile reads them from the watch caches only once the caches show at least that much (client-go's
//! controller expectations). A cache older than this process's own last write would plan from the past: a
//! status from before its last step would scale the ReplicaSets back to an earlier one.
//!
//! Versions compare as `k8s::versions` says; one that compares with nothing is not shown, and the reconcile
//! reads from the API server.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use jiff::Timestamp;

use crate::engine::rollout::change::Kind;
use crate::k8s::versions::{Expected, Held, Least};

use super::watch::Key;

/// What the caches must show of one Rollout's objects, and since when they have not.
#[derive(Default)]
struct Pending {
    expected: Vec<Expected>,
    lagging_since: Option<Timestamp>,
}

/// How the caches stand against what is expected of a Rollout's objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    All,
    /// Not yet: first found so at `since`.
    Lagging {
        since: Timestamp,
    },
}

/// By Rollout: what the caches must show before its reconcile reads from them.
#[derive(Default)]
pub struct Expectations(Mutex<HashMap<Key, Pending>>);

impl Expectations {
    /// Adds what `rollout`'s caches must show, replacing what was expected of the same object.
    pub fn expect(&self, rollout: &Key, expected: impl IntoIterator<Item = Expected>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let list = &mut map.entry(rollout.clone()).or_default().expected;
        for e in expected {
            list.retain(|old| old.kind != e.kind || old.name != e.name);
            list.push(e);
        }
    }

    /// Whether the caches (`held` says what they hold of an object) show all that is expected for `rollout`
    /// at `now`; what they show is forgotten.
    pub fn shown(&self, rollout: &Key, held: impl Fn(Kind, &str) -> Held, now: Timestamp) -> Shown {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(pending) = map.get_mut(rollout) else {
            return Shown::All;
        };
        pending.expected.retain(|e| !e.met(held(e.kind, &e.name)));
        if pending.expected.is_empty() {
            map.remove(rollout);
            return Shown::All;
        }
        Shown::Lagging {
            since: *pending.lagging_since.get_or_insert(now),
        }
    }

    /// Whether the caches are to show `version` of `rollout`'s object `kind` `name`: this process wrote it.
    pub fn awaits(&self, rollout: &Key, kind: Kind, name: &str, version: &str) -> bool {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let pending = map
            .get(rollout)
            .map(|p| p.expected.as_slice())
            .unwrap_or_default();
        pending.iter().any(|e| {
            e.kind == kind
                && e.name == name
                && matches!(&e.least, Least::Version(v) if v == version)
        })
    }

    /// Forgets `rollout` (it is gone).
    pub fn forget(&self, rollout: &Key) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(rollout);
    }

    pub fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollouts_caches_are_read_once_they_show_every_write_and_what_they_show_is_forgotten() {
        let expectations = Expectations::default();
        let key = ("shop".to_string(), "web".to_string());
        let expected = |kind, name: &str, least| Expected {
            kind,
            name: name.to_string(),
            least,
        };
        expectations.expect(
            &key,
            [
                expected(Kind::Rollout, "web", Least::Version("20".into())),
                expected(Kind::ReplicaSet, "web-1", Least::Version("21".into())),
                expected(Kind::AnalysisRun, "web-1-2", Least::Gone(Some("u".into()))),
            ],
        );
        let held = |rollout: &str, rs: Option<&str>, run_uid: Option<&str>| {
            let (rollout, rs, run_uid) = (
                rollout.to_string(),
                rs.map(str::to_string),
                run_uid.map(str::to_string),
            );
            move |kind: Kind, _: &str| match kind {
                Kind::Rollout => Some((rollout.clone(), String::new())),
                Kind::ReplicaSet => rs.clone().map(|rv| (rv, String::new())),
                _ => run_uid.clone().map(|uid| ("5".to_string(), uid)),
            }
        };
        let at = |s: &str| -> Timestamp { s.parse().expect("a timestamp") };
        let (t0, t1) = (at("2026-01-01T00:00:00Z"), at("2026-01-01T00:00:01Z"));
        let lagging = Shown::Lagging { since: t0 };
        // The Rollout's echo has come (later: someone wrote after), the ReplicaSet's not, the run is still there.
        assert_eq!(
            expectations.shown(&key, held("25", Some("19"), Some("u")), t0),
            lagging
        );
        // Still lagging a second later: since the first time.
        assert_eq!(
            expectations.shown(&key, held("25", Some("19"), Some("u")), t1),
            lagging
        );
        // The run made again under its name is not the one deleted; the ReplicaSet's write is shown. The
        // Rollout's is forgotten already: an older copy no longer holds the reconcile back.
        assert_eq!(
            expectations.shown(&key, held("3", Some("22"), Some("v")), t1),
            Shown::All
        );
        assert_eq!(
            expectations.shown(&key, held("1", None, None), t1),
            Shown::All,
            "nothing left"
        );
        // A later write replaces the expectation of the same object; lagging is counted afresh.
        expectations.expect(
            &key,
            [expected(Kind::Rollout, "web", Least::Version("30".into()))],
        );
        expectations.expect(
            &key,
            [expected(Kind::Rollout, "web", Least::Version("31".into()))],
        );
        assert_eq!(
            expectations.shown(&key, held("30", None, None), t1),
            Shown::Lagging { since: t1 }
        );
        expectations.forget(&key);
        assert_eq!(
            expectations.shown(&key, held("30", None, None), t1),
            Shown::All
        );
    }
}
