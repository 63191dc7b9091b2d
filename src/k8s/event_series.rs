//! Which Events are repeats of one already made, as client-go's recorder (`tools/record`'s
//! `EventCorrelator`, which Argo Rollouts' controller records through) counts them: an Event about the same
//! object with the same type, reason, action, note and reporter as one made at most [`WINDOW`] before is not
//! created again; the first one's `series` counts the repeats (`count`, every occurrence the first included, and
//! `lastObservedTime`), as events.k8s.io/v1 carries them and client-go's `tools/events` writes them. So a
//! reconcile that fails over and over (a refused ReplicaSet create, a router that cannot be written) leaves one
//! Event whose count grows, not an Event per try.
//!
//! The Event recorder ([`super::event_queue`]) asks here as each Event is made, before it takes a place in the
//! queue: a repeat of an Event still queued or being sent only adds to its count, which the create (if it has
//! not started) or the next patch carries. What is remembered of a series is compact (a digest of what it says,
//! the Event's name, its counts), so the Events of 10,000 Rollouts fit in a few MB.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use super::recent::Recent;

/// How long after an Event's last occurrence a repeat still counts into it: client-go's
/// `defaultAggregateIntervalInSeconds`.
pub const WINDOW: Duration = Duration::from_secs(600);

/// Series remembered at most; when full, the one heard of longest ago goes (unless it is queued or being sent).
/// client-go remembers 4,096, which the Events of 2,000 Rollouts stepping at once overflow; this holds those of
/// 10,000 (a few distinct Events each within the window) at about 150 bytes a series.
const REMEMBERED: usize = 65_536;

/// A 128-bit digest of `what`: two different Events (or objects) share one with odds of about 2^-90 even among
/// a million remembered, so the digest stands for them.
pub fn digest(what: &impl Hash) -> u128 {
    let mut high = DefaultHasher::new();
    what.hash(&mut high);
    let mut low = DefaultHasher::new();
    "canaryd".hash(&mut low);
    what.hash(&mut low);
    (u128::from(high.finish()) << 64) | u128::from(low.finish())
}

/// The digest of what makes two Events one repeated: all they say but their name and times.
pub fn key_of(event: &Event) -> u128 {
    let regarding = event.regarding.as_ref().map(|r| (&r.kind, &r.name, &r.uid));
    digest(&(
        &event.metadata.namespace,
        regarding,
        &event.type_,
        &event.reason,
        &event.action,
        &event.note,
        &event.reporting_controller,
    ))
}

/// Where a series' Event stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Its create or a patch of it waits in the queue.
    Queued,
    /// Its create or a patch of it is under way.
    Sending,
    /// The API server has been told all it has to tell, or waits for the next repeat to tell the rest.
    Idle,
}

/// One Event created (or to be created) and its repeats so far.
#[derive(Debug)]
struct Series {
    /// Tells this Event from a later one of the same key that replaced it.
    id: u64,
    namespace: Box<str>,
    name: Box<str>,
    /// Occurrences so far, the first included.
    count: i32,
    last: Timestamp,
    /// Occurrences the API server has been told of (or is being told of).
    told: i32,
    stage: Stage,
}

/// What an Event made is to the series.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    /// The first of a series (of none, for an Event without a time): to be created.
    First(Option<u128>),
    /// A repeat counted into a series whose create or patch is queued or under way, which will tell it.
    Counted,
    /// A repeat counted into a series the API server was up to date with: a patch of that series to send.
    Repeat(u128),
}

/// The patch of a series' Event: where it is and the series it is to carry.
#[derive(Debug, Clone)]
pub struct SeriesPatch {
    pub namespace: String,
    pub name: String,
    pub series: EventSeries,
}

impl SeriesPatch {
    /// The merge patch that brings the created Event's series to this one's.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "series": self.series })
    }
}

/// The Events made lately, by what they say.
#[derive(Debug)]
pub struct Correlator {
    made: Recent<u128, Series>,
    next_id: u64,
}

impl Default for Correlator {
    fn default() -> Correlator {
        Correlator::remembering(REMEMBERED)
    }
}

impl Correlator {
    fn remembering(capacity: usize) -> Correlator {
        Correlator {
            made: Recent::new(capacity),
            next_id: 0,
        }
    }

    /// `event` was made: the first of a series, or a repeat counted into one (and whether that needs a patch).
    /// An Event without a time is never a repeat.
    pub fn observe(&mut self, event: &Event) -> Seen {
        let Some(at) = event.event_time.as_ref().map(|t| t.0) else {
            return Seen::First(None);
        };
        let key = key_of(event);
        match self.made.get_mut(&key) {
            Some(series) if at.duration_since(series.last).unsigned_abs() <= WINDOW => {
                series.count = series.count.saturating_add(1);
                series.last = series.last.max(at);
                match series.stage {
                    Stage::Idle => Seen::Repeat(key),
                    Stage::Queued | Stage::Sending => Seen::Counted,
                }
            }
            _ => Seen::First(Some(key)),
        }
    }

    /// The create of `event`, the first of series `key`, is queued: its series starts, and the id to send it
    /// under is returned. A series it replaces (one whose window had passed) is forgotten.
    pub fn remember(&mut self, key: u128, event: &Event) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let series = Series {
            id,
            namespace: event.metadata.namespace.clone().unwrap_or_default().into(),
            name: event.metadata.name.clone().unwrap_or_default().into(),
            count: 1,
            last: event.event_time.as_ref().map_or(Timestamp::MIN, |t| t.0),
            told: 0,
            stage: Stage::Queued,
        };
        self.made.insert(key, series, |s| s.stage != Stage::Idle);
        id
    }

    /// A patch of series `key` is queued; its id.
    pub fn queued(&mut self, key: u128) -> Option<u64> {
        let series = self.made.peek_mut(&key)?;
        series.stage = Stage::Queued;
        Some(series.id)
    }

    /// The queued patch of series `key` was dropped: the series waits for its next repeat to tell the count.
    /// The patch it would have sent.
    pub fn unqueued(&mut self, key: u128, id: u64) -> Option<SeriesPatch> {
        let series = self.series(key, id)?;
        series.stage = Stage::Idle;
        Some(patch_of(series))
    }

    /// Forgets series `key` (its create was not sent, or a send failed): its next repeat is created afresh.
    pub fn forget(&mut self, key: u128, id: u64) {
        if self.series(key, id).is_some() {
            self.made.remove(&key);
        }
    }

    /// Series `key`'s create is sent now: the series to create it with, when repeats came while it waited.
    pub fn creating(&mut self, key: u128, id: u64) -> Option<EventSeries> {
        let series = self.series(key, id)?;
        series.stage = Stage::Sending;
        series.told = series.count;
        (series.count > 1).then_some(EventSeries {
            count: series.count,
            last_observed_time: MicroTime(series.last),
        })
    }

    /// Series `key`'s patch is sent now: the patch, carrying every occurrence counted so far; none when the
    /// series was forgotten or replaced meanwhile.
    pub fn patching(&mut self, key: u128, id: u64) -> Option<SeriesPatch> {
        let series = self.series(key, id)?;
        series.stage = Stage::Sending;
        series.told = series.count;
        Some(patch_of(series))
    }

    /// Series `key`'s create or patch was sent, `ok` or not: the time of the last repeat when repeats came
    /// meanwhile that a patch must tell. A series whose send failed is forgotten, so its next repeat is
    /// created afresh.
    pub fn sent(&mut self, key: u128, id: u64, ok: bool) -> Option<Timestamp> {
        if !ok {
            self.forget(key, id);
            return None;
        }
        let series = self.series(key, id)?;
        series.stage = Stage::Idle;
        (series.count > series.told).then_some(series.last)
    }

    fn series(&mut self, key: u128, id: u64) -> Option<&mut Series> {
        self.made.peek_mut(&key).filter(|s| s.id == id)
    }
}

/// The patch telling the API server of `series`' occurrences so far.
fn patch_of(series: &Series) -> SeriesPatch {
    SeriesPatch {
        namespace: series.namespace.to_string(),
        name: series.name.to_string(),
        series: EventSeries {
            count: series.count,
            last_observed_time: MicroTime(series.last),
        },
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

    /// `event` made, and the create of it queued when it is the first of its series: its key and id.
    fn made(c: &mut Correlator, event: &Event) -> (u128, u64) {
        let Seen::First(Some(key)) = c.observe(event) else {
            panic!("not a first occurrence: {event:?}");
        };
        (key, c.remember(key, event))
    }

    fn counted(send: &SeriesPatch) -> (i32, Timestamp) {
        (send.series.count, send.series.last_observed_time.0)
    }

    #[test]
    fn repeats_while_queued_ride_on_the_create_and_those_while_it_is_sent_follow_in_a_patch() {
        let mut c = Correlator::default();
        let (key, id) = made(&mut c, &event("web", "Refused", 0));
        assert_eq!(c.observe(&event("web", "Refused", 1)), Seen::Counted);
        let series = c.creating(key, id).expect("the repeat rides on the create");
        assert_eq!((series.count, series.last_observed_time.0), (2, at(1)));
        // Two repeats while the create is under way: nothing more to send yet.
        assert_eq!(c.observe(&event("web", "Refused", 2)), Seen::Counted);
        assert_eq!(c.observe(&event("web", "Refused", 3)), Seen::Counted);
        assert_eq!(c.sent(key, id, true), Some(at(3)), "the repeats follow");
        assert_eq!(c.queued(key), Some(id));
        let patch = c.patching(key, id).expect("a patch");
        assert_eq!(patch.name, "web.0");
        assert_eq!(counted(&patch), (4, at(3)));
        assert_eq!(patch.body()["series"]["count"], serde_json::json!(4));
        assert_eq!(c.sent(key, id, true), None, "nothing new since");
        assert_eq!(c.observe(&event("web", "Refused", 4)), Seen::Repeat(key));
    }

    #[test]
    fn a_lone_create_has_no_series_and_a_shed_patch_is_told_by_the_next_one() {
        let mut c = Correlator::default();
        let (key, id) = made(&mut c, &event("web", "Refused", 0));
        assert!(c.creating(key, id).is_none());
        assert_eq!(c.sent(key, id, true), None);
        assert_eq!(c.observe(&event("web", "Refused", 1)), Seen::Repeat(key));
        c.queued(key);
        let shed = c.unqueued(key, id).expect("the patch it would have sent");
        assert_eq!(counted(&shed), (2, at(1)));
        assert_eq!(c.observe(&event("web", "Refused", 2)), Seen::Repeat(key));
        c.queued(key);
        let patch = c.patching(key, id).expect("a patch");
        assert_eq!(
            counted(&patch),
            (3, at(2)),
            "the shed repeat is counted too"
        );
    }

    #[test]
    fn another_reason_object_or_a_repeat_after_the_window_is_an_event_of_its_own() {
        let mut c = Correlator::default();
        let (key, id) = made(&mut c, &event("web", "Refused", 0));
        c.creating(key, id);
        c.sent(key, id, true);
        assert!(matches!(
            c.observe(&event("web", "Other", 1)),
            Seen::First(Some(_))
        ));
        assert!(matches!(
            c.observe(&event("api", "Refused", 1)),
            Seen::First(Some(_))
        ));
        let window = i64::try_from(WINDOW.as_secs()).expect("seconds");
        assert_eq!(
            c.observe(&event("web", "Refused", window)),
            Seen::Repeat(key),
            "at the window's end it still counts"
        );
        assert_eq!(
            c.observe(&event("web", "Refused", 2 * window + 1)),
            Seen::First(Some(key))
        );
        let mut timeless = event("web", "Refused", 1);
        timeless.event_time = None;
        assert_eq!(c.observe(&timeless), Seen::First(None));
    }

    #[test]
    fn a_failed_send_is_forgotten_so_the_next_repeat_is_created_afresh() {
        let mut c = Correlator::default();
        let (key, id) = made(&mut c, &event("web", "Refused", 0));
        c.creating(key, id);
        assert_eq!(c.observe(&event("web", "Refused", 1)), Seen::Counted);
        assert_eq!(c.sent(key, id, false), None);
        assert_eq!(
            c.observe(&event("web", "Refused", 2)),
            Seen::First(Some(key))
        );
    }

    #[test]
    fn a_full_memory_forgets_the_event_seen_longest_ago_but_not_one_being_sent() {
        let mut c = Correlator::remembering(3);
        let mut ids = Vec::new();
        for name in ["a", "b", "c"] {
            let (key, id) = made(&mut c, &event(name, "Refused", 0));
            c.creating(key, id);
            ids.push((key, id));
        }
        // "a" and "c" are told; "b" is still being sent.
        for &(key, id) in [ids[0], ids[2]].iter() {
            c.sent(key, id, true);
        }
        assert_eq!(c.observe(&event("a", "Refused", 1)), Seen::Repeat(ids[0].0));
        made(&mut c, &event("d", "Refused", 1));
        // "b" was heard of longest ago but is being sent: "c" went in its place.
        assert!(matches!(
            c.observe(&event("c", "Refused", 2)),
            Seen::First(_)
        ));
        assert_eq!(c.observe(&event("b", "Refused", 2)), Seen::Counted);
        assert_eq!(c.observe(&event("a", "Refused", 2)), Seen::Repeat(ids[0].0));
        assert_eq!(c.observe(&event("d", "Refused", 2)), Seen::Counted);
    }
}
