//! What the Event recorder keeps between a reconcile making an Event and the publisher ([`super::events`])
//! sending it: the decisions, without I/O. As each Event is made:
//!
//! - a repeat of one still queued or being sent only adds to its series' count ([`super::event_series`]) and
//!   takes no place in the queue; a repeat of one already told queues one patch of its series;
//! - a request about an object over its rate ([`super::event_rate`], client-go's spam filter) is not queued:
//!   a first occurrence is dropped (as client-go drops it), a repeat stays counted in its series, which its
//!   next patch tells;
//! - the queue holds at most `capacity` creates and patches; when full, the oldest patch waiting goes before
//!   any first occurrence does, and a first occurrence is dropped only when every place holds one.
//!
//! Creates are sent before patches, in the order they were made. Every first occurrence not created and every
//! patch shed or not sent is [`Dropped`], which the publisher reports as lost. An Event waiting is kept as the
//! JSON it is sent as (about 500 bytes; the Event itself takes about twice that in a dozen allocations), so a
//! full queue stays within a few tens of MB.

use std::collections::VecDeque;

use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;

use super::event_rate::{self, Rate};
use super::event_series::{Correlator, Seen, SeriesPatch};

/// A create or patch to send now. `key` and `id` name its series (none for an Event never counted in one),
/// `object` what it is about.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub key: Option<u128>,
    pub id: u64,
    pub object: u128,
    pub request: Request,
}

#[derive(Debug, Clone)]
pub enum Request {
    /// The Event to create in `namespace`, as JSON.
    Create {
        namespace: String,
        body: String,
    },
    Patch(SeriesPatch),
}

impl Request {
    /// The Event this sends, as far as it is known: whole for a create; for a patch, its name and series.
    pub fn event(&self) -> Event {
        match self {
            Request::Create { body, .. } => decoded(body),
            Request::Patch(patch) => patch_event(patch),
        }
    }
}

/// An Event, or the repeats a series patch would have told, that the API server will not hear of, and why.
#[derive(Debug)]
pub struct Dropped {
    pub event: Event,
    pub why: String,
}

struct Create {
    key: Option<u128>,
    id: u64,
    object: u128,
    namespace: Box<str>,
    body: Box<str>,
}

struct Patch {
    key: u128,
    id: u64,
    object: u128,
}

/// The queue and what decides what enters it.
pub struct Recorder {
    correlator: Correlator,
    rate: Rate,
    creates: VecDeque<Create>,
    patches: VecDeque<Patch>,
    capacity: usize,
    closed: bool,
}

impl Recorder {
    pub fn new(capacity: usize) -> Recorder {
        Recorder {
            correlator: Correlator::default(),
            rate: Rate::default(),
            creates: VecDeque::new(),
            patches: VecDeque::new(),
            capacity,
            closed: false,
        }
    }

    /// Nothing waits to be sent.
    pub fn is_empty(&self) -> bool {
        self.creates.is_empty() && self.patches.is_empty()
    }

    /// `event` was made: counted into its series, queued, or dropped (and then said so). When it takes the
    /// place of a patch, that patch is what is dropped.
    pub fn offer(&mut self, event: Event) -> Option<Dropped> {
        if self.closed {
            return Some(Dropped {
                event,
                why: "the Event publisher has stopped".to_string(),
            });
        }
        let object = event_rate::object_of(&event);
        let at = event.event_time.as_ref().map(|t| t.0);
        match self.correlator.observe(&event) {
            Seen::Counted => None,
            Seen::Repeat(key) => self.patch(key, object, at),
            Seen::First(key) => {
                if !self.allowed(object, at) {
                    let why = format!(
                        "over its object's rate ({} Events at once, then one per {}s)",
                        event_rate::BURST,
                        event_rate::REFILL.as_secs()
                    );
                    return Some(Dropped { event, why });
                }
                let body = match serde_json::to_string(&event) {
                    Ok(body) => body.into(),
                    Err(e) => {
                        let why = format!("the Event cannot be written as JSON: {e}");
                        return Some(Dropped { event, why });
                    }
                };
                let shed = if self.len() < self.capacity {
                    None
                } else {
                    match self.shed() {
                        Some(shed) => Some(shed),
                        None => {
                            let why = self.full();
                            return Some(Dropped { event, why });
                        }
                    }
                };
                let id = key.map_or(0, |key| self.correlator.remember(key, &event));
                let namespace = event.metadata.namespace.unwrap_or_default().into();
                self.creates.push_back(Create {
                    key,
                    id,
                    object,
                    namespace,
                    body,
                });
                shed
            }
        }
    }

    /// The next create or patch to send, creates first.
    pub fn pop(&mut self) -> Option<Outgoing> {
        if let Some(Create {
            key,
            id,
            object,
            namespace,
            body,
        }) = self.creates.pop_front()
        {
            let series = key.and_then(|key| self.correlator.creating(key, id));
            // Repeats came while it waited: it is created with their series.
            let body = match series {
                Some(series) => {
                    let mut event = decoded(&body);
                    event.series = Some(series);
                    serde_json::to_string(&event).unwrap_or_else(|_| body.into())
                }
                None => body.into(),
            };
            let request = Request::Create {
                namespace: namespace.into(),
                body,
            };
            return Some(Outgoing {
                key,
                id,
                object,
                request,
            });
        }
        while let Some(Patch { key, id, object }) = self.patches.pop_front() {
            if let Some(patch) = self.correlator.patching(key, id) {
                let request = Request::Patch(patch);
                return Some(Outgoing {
                    key: Some(key),
                    id,
                    object,
                    request,
                });
            }
        }
        None
    }

    /// `done` was sent, `ok` or not: repeats counted meanwhile queue a patch.
    pub fn sent(&mut self, done: &Outgoing, ok: bool) -> Option<Dropped> {
        let key = done.key?;
        let last = self.correlator.sent(key, done.id, ok)?;
        self.patch(key, done.object, Some(last))
    }

    /// Nothing more is taken.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Everything still waiting, dropped: the daemon stopped before it was sent.
    pub fn drain(&mut self) -> Vec<Dropped> {
        self.close();
        let why = || "the daemon stopped before it was created".to_string();
        let mut dropped: Vec<Dropped> = std::mem::take(&mut self.creates)
            .into_iter()
            .map(|c| Dropped {
                event: decoded(&c.body),
                why: why(),
            })
            .collect();
        while let Some(Patch { key, id, .. }) = self.patches.pop_front() {
            if let Some(patch) = self.correlator.unqueued(key, id) {
                dropped.push(Dropped {
                    event: patch_event(&patch),
                    why: why(),
                });
            }
        }
        dropped
    }

    fn len(&self) -> usize {
        self.creates.len() + self.patches.len()
    }

    fn allowed(&mut self, object: u128, at: Option<Timestamp>) -> bool {
        at.is_none_or(|at| self.rate.take(object, at))
    }

    fn full(&self) -> String {
        format!(
            "the queue of Events to create is full ({} waiting)",
            self.capacity
        )
    }

    /// Queues a patch telling series `key`'s repeats, when its object's rate allows one; else the series
    /// waits for its next repeat. A full queue sheds its oldest patch for it, or drops it when it holds
    /// only creates.
    fn patch(&mut self, key: u128, object: u128, at: Option<Timestamp>) -> Option<Dropped> {
        if !self.allowed(object, at) {
            return None;
        }
        let shed = if self.len() < self.capacity {
            None
        } else if let Some(shed) = self.shed() {
            Some(shed)
        } else {
            let why = self.full();
            // Queued and at once unqueued: the series stays idle, and says what it would have sent.
            let id = self.correlator.queued(key)?;
            let patch = self.correlator.unqueued(key, id)?;
            return Some(Dropped {
                event: patch_event(&patch),
                why,
            });
        };
        let id = self.correlator.queued(key)?;
        self.patches.push_back(Patch { key, id, object });
        shed
    }

    /// Drops the oldest patch waiting, if any, to make room.
    fn shed(&mut self) -> Option<Dropped> {
        while let Some(Patch { key, id, .. }) = self.patches.pop_front() {
            if let Some(patch) = self.correlator.unqueued(key, id) {
                let why = format!(
                    "the queue of Events to create is full ({} waiting): the oldest series patch, of {}, gave way",
                    self.capacity, patch.name
                );
                return Some(Dropped {
                    event: patch_event(&patch),
                    why,
                });
            }
        }
        None
    }
}

/// The Event `body` says, as this queue wrote it.
fn decoded(body: &str) -> Event {
    serde_json::from_str(body).unwrap_or_default()
}

/// The Event a series patch is about, as far as the patch knows it: its name and the series it carries.
fn patch_event(patch: &SeriesPatch) -> Event {
    Event {
        metadata: kube::api::ObjectMeta {
            name: Some(patch.name.clone()),
            namespace: Some(patch.namespace.clone()),
            ..Default::default()
        },
        series: Some(patch.series.clone()),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("a time")
    }

    /// An Event about the Rollout `object` saying `reason`, made `secs` in.
    fn event(object: &str, reason: &str, secs: i64) -> Event {
        Event {
            metadata: kube::api::ObjectMeta {
                name: Some(format!("{object}.{reason}.{secs}")),
                namespace: Some("default".into()),
                ..Default::default()
            },
            regarding: Some(ObjectReference {
                kind: Some("Rollout".into()),
                name: Some(object.into()),
                ..Default::default()
            }),
            reason: Some(reason.into()),
            event_time: Some(MicroTime(at(secs))),
            ..Event::default()
        }
    }

    /// What `pop` sends: the created Event's name and series count, or the patched one's.
    fn sends(recorder: &mut Recorder) -> Option<(String, &'static str, i32)> {
        let next = recorder.pop()?;
        let shown = match &next.request {
            Request::Create { .. } => {
                let e = next.request.event();
                (
                    e.metadata.name.clone().unwrap_or_default(),
                    "create",
                    e.series.as_ref().map_or(1, |s| s.count),
                )
            }
            Request::Patch(p) => (p.name.clone(), "patch", p.series.count),
        };
        recorder.sent(&next, true);
        Some(shown)
    }

    fn shown(name: &str, how: &'static str, count: i32) -> Option<(String, &'static str, i32)> {
        Some((name.to_string(), how, count))
    }

    #[test]
    fn repeats_of_a_queued_event_take_no_place_and_ride_on_its_create() {
        let mut recorder = Recorder::new(2);
        for n in 0..100 {
            assert!(recorder.offer(event("web", "Refused", n)).is_none());
        }
        assert!(recorder.offer(event("api", "Refused", 0)).is_none());
        assert_eq!(recorder.len(), 2);
        assert_eq!(sends(&mut recorder), shown("web.Refused.0", "create", 100));
        assert_eq!(sends(&mut recorder), shown("api.Refused.0", "create", 1));
        assert_eq!(sends(&mut recorder), None);
    }

    #[test]
    fn a_full_queue_sheds_its_oldest_patch_before_any_event_to_create() {
        let mut recorder = Recorder::new(2);
        for object in ["a", "b"] {
            recorder.offer(event(object, "Refused", 0));
            sends(&mut recorder);
        }
        // A repeat of each: two patches fill the queue.
        assert!(recorder.offer(event("a", "Refused", 1)).is_none());
        assert!(recorder.offer(event("b", "Refused", 1)).is_none());
        let shed = recorder
            .offer(event("c", "Refused", 2))
            .expect("a patch shed");
        assert_eq!(shed.event.metadata.name.as_deref(), Some("a.Refused.0"));
        assert!(shed.why.contains("oldest series patch"), "{}", shed.why);
        // The Event to create goes first; b's patch follows.
        assert_eq!(sends(&mut recorder), shown("c.Refused.2", "create", 1));
        assert_eq!(sends(&mut recorder), shown("b.Refused.0", "patch", 2));
        // a's shed repeat is still counted: its next repeat's patch tells both.
        recorder.offer(event("a", "Refused", 3));
        assert_eq!(sends(&mut recorder), shown("a.Refused.0", "patch", 3));
        // A queue full of Events to create drops the next one.
        recorder.offer(event("d", "Refused", 4));
        recorder.offer(event("e", "Refused", 4));
        let dropped = recorder.offer(event("f", "Refused", 4)).expect("dropped");
        assert_eq!(dropped.event.metadata.name.as_deref(), Some("f.Refused.4"));
        assert_eq!(
            dropped.why,
            "the queue of Events to create is full (2 waiting)"
        );
        // So is a patch with no patch to shed; its repeat stays counted.
        recorder
            .offer(event("c", "Refused", 5))
            .expect("no room for c's patch");
        assert_eq!(sends(&mut recorder), shown("d.Refused.4", "create", 1));
        assert_eq!(sends(&mut recorder), shown("e.Refused.4", "create", 1));
        recorder.offer(event("c", "Refused", 6));
        assert_eq!(sends(&mut recorder), shown("c.Refused.2", "patch", 3));
    }

    #[test]
    fn an_object_over_its_rate_loses_new_events_but_its_repeats_stay_counted() {
        let mut recorder = Recorder::new(1000);
        let burst = i64::from(event_rate::BURST);
        for n in 0..burst {
            assert!(recorder.offer(event("web", &format!("R{n}"), 0)).is_none());
        }
        let over = recorder
            .offer(event("web", "Another", 0))
            .expect("over the rate");
        assert!(over.why.contains("rate"), "{}", over.why);
        assert!(
            recorder.offer(event("api", "Another", 0)).is_none(),
            "another object"
        );
        while sends(&mut recorder).is_some() {}
        // A repeat over the rate is counted, not sent and not lost; once the rate allows, a patch tells it.
        assert!(recorder.offer(event("web", "R0", 1)).is_none());
        assert_eq!(sends(&mut recorder), None);
        let refill = i64::try_from(event_rate::REFILL.as_secs()).expect("seconds");
        assert!(recorder.offer(event("web", "R0", 1 + refill)).is_none());
        assert_eq!(sends(&mut recorder), shown("web.R0.0", "patch", 3));
    }

    #[test]
    fn a_stopped_recorder_takes_nothing_and_drops_what_waits() {
        let mut recorder = Recorder::new(10);
        recorder.offer(event("a", "Refused", 0));
        sends(&mut recorder);
        recorder.offer(event("a", "Refused", 1));
        recorder.offer(event("b", "Refused", 1));
        recorder.close();
        let late = recorder.offer(event("c", "Refused", 2)).expect("not taken");
        assert_eq!(late.why, "the Event publisher has stopped");
        let dropped: Vec<_> = recorder
            .drain()
            .into_iter()
            .map(|d| (d.event.metadata.name.unwrap_or_default(), d.why))
            .collect();
        let why = "the daemon stopped before it was created".to_string();
        assert_eq!(
            dropped,
            [
                ("b.Refused.1".to_string(), why.clone()),
                ("a.Refused.0".to_string(), why)
            ]
        );
        assert!(recorder.is_empty());
    }
}
