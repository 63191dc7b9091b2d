//! Which Events are repeats of one already created, as client-go's recorder (`tools/record`'s
//! `EventCorrelator`, which Argo Rollouts' controller records through) counts them: an Event about the same
//! object with the same type, reason, action, note and reporter as one made at most [`WINDOW`] before is not
//! created again; the first one's `series` counts the repeats (`count`, every occurrence the first included, and
//! `lastObservedTime`), as events.k8s.io/v1 carries them and client-go's `tools/events` writes them. So a
//! reconcile that fails over and over (a refused ReplicaSet create, a router that cannot be written) leaves one
//! Event whose count grows, not an Event per try.
//!
//! This module decides what to send; [`super::events`] sends it, a create or a merge patch of the series at a
//! time per Event, so a repeat that arrives while its Event is being created or patched is sent once that ends.

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// How long after an Event's last occurrence a repeat still counts into it: client-go's
/// `defaultAggregateIntervalInSeconds`.
pub const WINDOW: Duration = Duration::from_secs(600);

/// Events remembered at most: client-go's `maxLruCacheEntries`. When full, the one seen longest ago goes.
const REMEMBERED: usize = 4096;

/// What makes two Events one repeated: all they say but their name and times.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Same {
    namespace: Option<String>,
    regarding: Option<(Option<String>, Option<String>, Option<String>)>,
    type_: Option<String>,
    reason: Option<String>,
    action: Option<String>,
    note: Option<String>,
    reporter: Option<String>,
}

impl Same {
    fn of(event: &Event) -> Same {
        Same {
            namespace: event.metadata.namespace.clone(),
            regarding: event
                .regarding
                .as_ref()
                .map(|r| (r.kind.clone(), r.name.clone(), r.uid.clone())),
            type_: event.type_.clone(),
            reason: event.reason.clone(),
            action: event.action.clone(),
            note: event.note.clone(),
            reporter: event.reporting_controller.clone(),
        }
    }
}

/// One Event created (or being created) and its repeats so far.
#[derive(Debug)]
struct Series {
    /// Tells this Event from a later one of the same [`Same`] that replaced it.
    id: u64,
    /// As created, or as last patched.
    event: Event,
    /// Occurrences so far, the first included.
    count: i32,
    last: Timestamp,
    /// Occurrences the API server has been told of.
    told: i32,
    /// A create or patch of it is under way.
    busy: bool,
}

/// A create or patch to send: `event` is the whole Event, with `series` set for a patch.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub id: u64,
    pub event: Event,
    pub create: bool,
}

impl Outgoing {
    /// The merge patch that brings the created Event's series to this one's.
    pub fn series_patch(&self) -> serde_json::Value {
        serde_json::json!({ "series": self.event.series })
    }
}

/// The Events made lately, by what they say.
#[derive(Debug, Default)]
pub struct Correlator {
    made: HashMap<Same, Series>,
    next_id: u64,
}

impl Correlator {
    /// `event` was made: a create to send, a patch of the Event it repeats, or nothing while that Event is
    /// being sent (what it adds follows in [`Correlator::sent`]). An Event without a time is never a repeat.
    pub fn observe(&mut self, event: Event) -> Option<Outgoing> {
        let Some(at) = event.event_time.as_ref().map(|t| t.0) else {
            return Some(self.create(None, Timestamp::MIN, event));
        };
        let same = Same::of(&event);
        match self.made.get_mut(&same) {
            Some(series) if at.duration_since(series.last).unsigned_abs() <= WINDOW => {
                series.count = series.count.saturating_add(1);
                series.last = series.last.max(at);
                if series.busy {
                    return None;
                }
                Some(patch(series))
            }
            _ => {
                self.forget_beyond(at);
                Some(self.create(Some(same), at, event))
            }
        }
    }

    /// `done` was sent, `ok` or not: the patch for the repeats that came meanwhile, if any. An Event whose
    /// create or patch failed is forgotten, so its next repeat is created afresh.
    pub fn sent(&mut self, done: &Outgoing, ok: bool) -> Option<Outgoing> {
        let same = Same::of(&done.event);
        let series = self.made.get_mut(&same).filter(|s| s.id == done.id)?;
        if !ok {
            self.made.remove(&same);
            return None;
        }
        series.busy = false;
        series.told = done.event.series.as_ref().map_or(1, |s| s.count);
        (series.count > series.told).then(|| patch(series))
    }

    fn create(&mut self, same: Option<Same>, at: Timestamp, event: Event) -> Outgoing {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        if let Some(same) = same {
            let series = Series {
                id,
                event: event.clone(),
                count: 1,
                last: at,
                told: 0,
                busy: true,
            };
            self.made.insert(same, series);
        }
        Outgoing {
            id,
            event,
            create: true,
        }
    }

    /// Makes room for one more: those last seen more than [`WINDOW`] before `now` go, then, if still full, the
    /// one seen longest ago. Events being sent stay.
    fn forget_beyond(&mut self, now: Timestamp) {
        if self.made.len() < REMEMBERED {
            return;
        }
        self.made
            .retain(|_, s| s.busy || now.duration_since(s.last).unsigned_abs() <= WINDOW);
        if self.made.len() < REMEMBERED {
            return;
        }
        let oldest = self
            .made
            .iter()
            .filter(|(_, s)| !s.busy)
            .min_by_key(|(_, s)| s.last)
            .map(|(same, _)| same.clone());
        if let Some(oldest) = oldest {
            self.made.remove(&oldest);
        }
    }
}

/// The patch telling the API server of `series`' occurrences so far; it is busy until that is sent.
fn patch(series: &mut Series) -> Outgoing {
    series.busy = true;
    series.event.series = Some(EventSeries {
        count: series.count,
        last_observed_time: MicroTime(series.last),
    });
    Outgoing {
        id: series.id,
        event: series.event.clone(),
        create: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("a time")
    }

    fn event(name: &str, reason: &str, secs: i64) -> Event {
        Event {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("{name}.{secs}")),
                namespace: Some("default".into()),
                ..Default::default()
            },
            regarding: Some(ObjectReference {
                kind: Some("Rollout".into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            reason: Some(reason.into()),
            note: Some("refused".into()),
            event_time: Some(MicroTime(at(secs))),
            ..Event::default()
        }
    }

    fn series(send: &Outgoing) -> Option<(i32, Timestamp)> {
        send.event
            .series
            .as_ref()
            .map(|s| (s.count, s.last_observed_time.0))
    }

    #[test]
    fn a_repeat_patches_the_first_events_series_and_one_made_while_it_is_sent_follows() {
        let mut c = Correlator::default();
        let first = c.observe(event("web", "Refused", 0)).expect("a create");
        assert!(first.create);
        assert_eq!(first.event.metadata.name.as_deref(), Some("web.0"));
        // Two repeats while the create is under way: nothing more is sent yet.
        assert!(c.observe(event("web", "Refused", 1)).is_none());
        assert!(c.observe(event("web", "Refused", 2)).is_none());
        let patch = c.sent(&first, true).expect("the repeats follow");
        assert!(!patch.create);
        assert_eq!(patch.event.metadata.name.as_deref(), Some("web.0"));
        assert_eq!(series(&patch), Some((3, at(2))));
        assert_eq!(
            patch.series_patch()["series"]["count"],
            serde_json::json!(3)
        );
        assert!(c.sent(&patch, true).is_none(), "nothing new since");
        let again = c.observe(event("web", "Refused", 3)).expect("a patch");
        assert_eq!(series(&again), Some((4, at(3))));
    }

    #[test]
    fn another_reason_object_or_a_repeat_after_the_window_is_an_event_of_its_own() {
        let mut c = Correlator::default();
        let first = c.observe(event("web", "Refused", 0)).expect("a create");
        c.sent(&first, true);
        assert!(c.observe(event("web", "Other", 1)).expect("sent").create);
        assert!(c.observe(event("api", "Refused", 1)).expect("sent").create);
        let window = i64::try_from(WINDOW.as_secs()).expect("seconds");
        let within = c.observe(event("web", "Refused", window)).expect("sent");
        assert!(!within.create, "at the window's end it still counts");
        c.sent(&within, true);
        let after = c.observe(event("web", "Refused", 2 * window + 1));
        assert!(after.expect("sent").create);
    }

    #[test]
    fn a_failed_send_is_forgotten_so_the_next_repeat_is_created_afresh() {
        let mut c = Correlator::default();
        let first = c.observe(event("web", "Refused", 0)).expect("a create");
        assert!(c.observe(event("web", "Refused", 1)).is_none());
        assert!(c.sent(&first, false).is_none());
        assert!(c.observe(event("web", "Refused", 2)).expect("sent").create);
    }

    #[test]
    fn a_full_memory_forgets_the_event_seen_longest_ago() {
        // All within the window, a millisecond apart.
        let made_at = |name: &str, ms: usize| {
            let mut e = event(name, "Refused", 0);
            let ms = i64::try_from(ms).expect("small");
            e.event_time = Some(MicroTime(at(0) + jiff::SignedDuration::from_millis(ms)));
            e
        };
        let mut c = Correlator::default();
        for n in 0..REMEMBERED {
            let sent = c.observe(made_at(&format!("r{n}"), n));
            c.sent(&sent.expect("a create"), true);
        }
        let newcomer = c.observe(made_at("new", REMEMBERED)).expect("a create");
        c.sent(&newcomer, true);
        assert_eq!(c.made.len(), REMEMBERED);
        assert!(c.observe(made_at("r0", REMEMBERED)).expect("sent").create);
        assert!(!c.observe(made_at("r2", REMEMBERED)).expect("sent").create);
    }
}
