//! The daemon's reconcile queue: when each object is next due, and which objects have a reconcile in flight.
//!
//! kube-runtime's `applier` keeps its in-flight reconciles in a map it polls in full whenever any one of
//! them wakes, so its cost per wake-up grows with the number in flight; at 10,000 runs (about a thousand in
//! flight at every moment) that polling was a fifth of the daemon's CPU. This queue does the same job with
//! ordered timers and a set: scheduling, starting and finishing a reconcile each cost O(log n).
//!
//! Its rules are the applier's: the earliest requested time wins, an object never has two reconciles at
//! once, and a request for an object that is busy is kept and served as soon as its reconcile ends. Its times
//! are the daemon's [`Clock`](crate::time::Clock)'s steady time, so the queue follows whatever time the daemon
//! runs on (real time, or a test's manual clock), and not a wall clock that steps.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;

use jiff::Timestamp;

/// Due times of objects keyed by `K`, and the objects being reconciled.
#[derive(Debug)]
pub struct Queue<K> {
    due: HashMap<K, Timestamp>,
    order: BTreeSet<(Timestamp, K)>,
    busy: HashSet<K>,
    /// Busy objects asked for again meanwhile: due once their reconcile ends.
    again: HashSet<K>,
}

impl<K: Ord + Hash + Clone> Default for Queue<K> {
    fn default() -> Self {
        Queue {
            due: HashMap::new(),
            order: BTreeSet::new(),
            busy: HashSet::new(),
            again: HashSet::new(),
        }
    }
}

impl<K: Ord + Hash + Clone> Queue<K> {
    /// Asks for a reconcile of `key` at `at`; an earlier request already queued stands.
    pub fn schedule(&mut self, key: K, at: Timestamp) {
        if let Some(&queued) = self.due.get(&key) {
            if queued <= at {
                return;
            }
            self.order.remove(&(queued, key.clone()));
        }
        self.due.insert(key.clone(), at);
        self.order.insert((at, key));
    }

    /// When the earliest queued request is due.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.order.first().map(|(at, _)| *at)
    }

    /// Takes the next object due at `now` that is free to start and marks it busy. A due request for a busy
    /// object is set aside until [`Queue::finish`].
    pub fn start_due(&mut self, now: Timestamp) -> Option<K> {
        while let Some((at, _)) = self.order.first()
            && *at <= now
        {
            let (_, key) = self.order.pop_first()?;
            self.due.remove(&key);
            if self.busy.contains(&key) {
                self.again.insert(key);
                continue;
            }
            self.busy.insert(key.clone());
            return Some(key);
        }
        None
    }

    /// `key`'s reconcile ended; `then` is when it asked to run again (`None`: only on a change). A request
    /// that arrived while it ran is due now.
    pub fn finish(&mut self, key: &K, now: Timestamp, then: Option<Timestamp>) {
        self.busy.remove(key);
        if self.again.remove(key) {
            self.schedule(key.clone(), now);
        }
        if let Some(at) = then {
            self.schedule(key.clone(), at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn secs(t0: Timestamp, s: u64) -> Timestamp {
        t0.checked_add(Duration::from_secs(s)).expect("a time")
    }

    fn start() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().expect("a time")
    }

    #[test]
    fn the_earliest_request_wins_and_objects_come_out_in_due_order() {
        let t0 = start();
        let mut q = Queue::default();
        q.schedule("b", secs(t0, 5));
        q.schedule("a", secs(t0, 7));
        q.schedule("a", secs(t0, 3));
        q.schedule("b", secs(t0, 9));
        assert_eq!(q.next_due(), Some(secs(t0, 3)));
        assert_eq!(q.start_due(secs(t0, 2)), None);
        assert_eq!(q.start_due(secs(t0, 10)), Some("a"));
        assert_eq!(q.start_due(secs(t0, 10)), Some("b"));
        assert_eq!(q.start_due(secs(t0, 10)), None);
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn a_busy_object_is_never_started_twice_and_is_served_when_it_finishes() {
        let t0 = start();
        let mut q = Queue::default();
        q.schedule("a", t0);
        assert_eq!(q.start_due(t0), Some("a"));
        // A change arrives while "a" runs: held, not started a second time.
        q.schedule("a", secs(t0, 1));
        assert_eq!(q.start_due(secs(t0, 1)), None);
        assert_eq!(q.next_due(), None);
        // It ends asking for a wake-up in 10 s; the held request makes it due at once.
        q.finish(&"a", secs(t0, 2), Some(secs(t0, 12)));
        assert_eq!(q.start_due(secs(t0, 2)), Some("a"));
        q.finish(&"a", secs(t0, 3), Some(secs(t0, 12)));
        assert_eq!(q.next_due(), Some(secs(t0, 12)));
    }

    #[test]
    fn a_finished_object_that_asks_for_nothing_is_not_queued() {
        let t0 = start();
        let mut q = Queue::default();
        q.schedule("a", t0);
        assert_eq!(q.start_due(t0), Some("a"));
        q.finish(&"a", secs(t0, 1), None);
        assert_eq!(q.next_due(), None);
        assert_eq!(q.start_due(secs(t0, 100)), None);
    }
}
