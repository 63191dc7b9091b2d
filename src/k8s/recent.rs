//! A map of bounded size that forgets the entry used longest ago, as client-go's LRU caches do for its Event
//! correlator and spam filter: what the Event recorder remembers of the Events' series
//! ([`super::event_series`]) and of each object's rate ([`super::event_rate`]).
//!
//! Each use stamps the entry and appends (key, stamp) to a queue of uses; the oldest use whose stamp is still
//! the entry's names the entry used longest ago. Uses superseded since are skipped, and dropped in one pass once
//! they outnumber the entries, so every operation is O(1) amortised. An insert looks at no more than [`LOOKS`]
//! of the entries used longest ago for one to forget: when those must all be kept, the map holds more than its
//! capacity until later inserts find entries to forget.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// How many entries that must be kept one insert passes over, at most, looking for one to forget: with the
/// Event queue full (65,536 series waiting to be sent, each kept) one insert used to look at all of them.
const LOOKS: usize = 8;

#[derive(Debug)]
pub struct Recent<K, V> {
    entries: HashMap<K, (V, u64)>,
    uses: VecDeque<(K, u64)>,
    next: u64,
    capacity: usize,
}

impl<K: Copy + Eq + Hash, V> Recent<K, V> {
    /// A map of at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Recent<K, V> {
        Recent {
            entries: HashMap::new(),
            uses: VecDeque::new(),
            next: 0,
            capacity: capacity.max(1),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entry of `key`, now the one used last.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let stamp = self.stamp(*key);
        let (value, used) = self.entries.get_mut(key)?;
        *used = stamp;
        Some(value)
    }

    /// The entry of `key` without counting it as a use.
    pub fn peek_mut(&mut self, key: &K) -> Option<&mut V> {
        self.entries.get_mut(key).map(|(value, _)| value)
    }

    /// Puts `value` under `key`, the one used last. When that makes one too many, the entry used longest ago
    /// for which `keep` is false goes; those for which it is true count as used now (so the map stays over
    /// its capacity while the [`LOOKS`] entries used longest ago are kept).
    pub fn insert(&mut self, key: K, value: V, keep: impl Fn(&V) -> bool) {
        let stamp = self.stamp(key);
        self.entries.insert(key, (value, stamp));
        let mut tries = LOOKS;
        while self.entries.len() > self.capacity && tries > 0 {
            let Some((oldest, used)) = self.uses.pop_front() else {
                break;
            };
            match self.entries.get(&oldest) {
                Some((value, last)) if *last == used => {
                    tries -= 1;
                    if keep(value) {
                        let again = self.stamp(oldest);
                        if let Some(entry) = self.entries.get_mut(&oldest) {
                            entry.1 = again;
                        }
                    } else {
                        self.entries.remove(&oldest);
                    }
                }
                _ => {}
            }
        }
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.entries.remove(key).map(|(value, _)| value)
    }

    /// A new stamp for a use of `key`, queued; superseded uses are dropped once they outnumber the entries.
    fn stamp(&mut self, key: K) -> u64 {
        if self.uses.len() > 2 * self.entries.len() + 16 {
            let entries = &self.entries;
            self.uses
                .retain(|(k, used)| entries.get(k).is_some_and(|(_, last)| last == used));
        }
        let stamp = self.next;
        self.next += 1;
        self.uses.push_back((key, stamp));
        stamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_map_forgets_the_entry_used_longest_ago_but_one_it_must_keep() {
        let mut recent = Recent::new(3);
        for k in 0..3 {
            recent.insert(k, k * 10, |_| false);
        }
        // 0 is used again: 1 is now the one used longest ago.
        assert_eq!(recent.get_mut(&0), Some(&mut 0));
        recent.insert(3, 30, |_| false);
        assert_eq!(recent.len(), 3);
        assert!(recent.peek_mut(&1).is_none());
        // 2 is kept (say, being sent): 0 goes in its place.
        recent.insert(4, 40, |v| *v == 20);
        assert!(recent.peek_mut(&0).is_none());
        assert_eq!(recent.peek_mut(&2), Some(&mut 20));
        // When every one must stay, the map holds one more rather than forget one of them.
        recent.insert(5, 50, |_| true);
        assert_eq!(recent.len(), 4);
    }

    #[test]
    fn an_insert_looks_at_a_few_kept_entries_not_all_of_them_and_later_ones_catch_up() {
        let mut recent = Recent::new(100);
        for k in 0..100 {
            recent.insert(k, true, |_| false);
        }
        let looked = std::cell::Cell::new(0);
        let keep = |kept: &bool| {
            looked.set(looked.get() + 1);
            *kept
        };
        // Every entry is kept (say, waiting to be sent): an insert passes over a few, not a hundred.
        recent.insert(100, false, keep);
        assert_eq!(looked.get(), LOOKS);
        assert_eq!(recent.len(), 101);
        // Those sent, later inserts forget the oldest until the map is back at its capacity.
        for k in 0..100 {
            *recent.peek_mut(&k).expect("kept") = false;
        }
        recent.insert(101, false, |kept| *kept);
        assert_eq!(recent.len(), 100);
        assert!(recent.peek_mut(&101).is_some());
    }

    #[test]
    fn uses_are_remembered_in_memory_bounded_by_the_entries() {
        let mut recent = Recent::new(2);
        recent.insert(1, (), |_| false);
        recent.insert(2, (), |_| false);
        for _ in 0..10_000 {
            recent.get_mut(&1);
        }
        assert!(
            recent.uses.len() <= 2 * recent.len() + 17,
            "{}",
            recent.uses.len()
        );
        // 2 was used longest ago, however many uses of 1 came since.
        recent.insert(3, (), |_| false);
        assert!(recent.peek_mut(&2).is_none());
        assert!(recent.peek_mut(&1).is_some());
    }
}
