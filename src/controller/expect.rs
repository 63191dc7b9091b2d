//! What this process knows the API server holds of the objects one Rollout's reconcile reads, so that the next
//! reconcile reads them from the watch caches only once the caches show at least that much (client-go's
//! controller expectations). A cache older than this process's own last write would plan from the past: a
//! status from before its last step would scale the ReplicaSets back to an earlier one.
//!
//! Versions compare as `k8s::versions` says; one that compares with nothing is not shown, and the reconcile
//! reads from the API server.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::engine::rollout::change::Kind;
use crate::k8s::versions::{Expected, Held};

use super::watch::Key;

/// By Rollout: what the caches must show before its reconcile reads from them.
#[derive(Default)]
pub struct Expectations(Mutex<HashMap<Key, Vec<Expected>>>);

impl Expectations {
    /// Adds what `rollout`'s caches must show, replacing what was expected of the same object.
    pub fn expect(&self, rollout: &Key, expected: impl IntoIterator<Item = Expected>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let list = map.entry(rollout.clone()).or_default();
        for e in expected {
            list.retain(|old| old.kind != e.kind || old.name != e.name);
            list.push(e);
        }
    }

    /// Whether the caches (`held` says what they hold of an object) show all that is expected for `rollout`;
    /// what they show is forgotten.
    pub fn met(&self, rollout: &Key, held: impl Fn(Kind, &str) -> Held) -> bool {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(list) = map.get_mut(rollout) else {
            return true;
        };
        list.retain(|e| !e.met(held(e.kind, &e.name)));
        let met = list.is_empty();
        if met {
            map.remove(rollout);
        }
        met
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
    use crate::k8s::versions::Least;

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
        // The Rollout's echo has come (later: someone wrote after), the ReplicaSet's not, the run is still there.
        assert!(!expectations.met(&key, held("25", Some("19"), Some("u"))));
        // The run made again under its name is not the one deleted; the ReplicaSet's write is shown. The
        // Rollout's is forgotten already: an older copy no longer holds the reconcile back.
        assert!(expectations.met(&key, held("3", Some("22"), Some("v"))));
        assert!(
            expectations.met(&key, held("1", None, None)),
            "nothing left"
        );
        // A later write replaces the expectation of the same object.
        expectations.expect(
            &key,
            [expected(Kind::Rollout, "web", Least::Version("30".into()))],
        );
        expectations.expect(
            &key,
            [expected(Kind::Rollout, "web", Least::Version("31".into()))],
        );
        assert!(!expectations.met(&key, held("30", None, None)));
        expectations.forget(&key);
        assert!(expectations.met(&key, held("30", None, None)));
    }
}
