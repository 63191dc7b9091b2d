//! Events on their way to the API server. A reconcile queues the Event of a phase change once the status
//! patch that made the change has landed, and returns; a task of its own creates the queued Events, a few at
//! a time, as client-go's event broadcaster does for Argo Rollouts. So a slow Events endpoint never delays a
//! run's next measurement. What enters the queue is decided as the Event is made ([`super::event_queue`]): a
//! repeat of an Event made lately is counted into that Event's series rather than created
//! ([`super::event_series`]), each object's requests are rate-bounded ([`super::event_rate`]), and a full queue
//! sheds its oldest series patches before it drops an Event to create rather than hold up a reconcile. Events
//! are at-most-once anyway (a crash after the patch loses its Event); each one not created is told to
//! [`Lost`].

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Resource;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use serde::de::IgnoredAny;
use tokio::sync::{Notify, watch};

use super::event_queue::{Dropped, Outgoing, Recorder, Request};

/// Creates and series patches waiting to be sent at most. client-go's broadcaster keeps 1,000; 8,192 overflowed
/// at 2,000 Rollouts stepping at once (37–38 Events each within 35 s, 5,500 a second at the peak), and 65,536 at
/// 10,000 once their reconciles read from the watch caches (10,345–15,239 lost in 3 runs), and 131,072 once they
/// read their router objects from watches too (0, 5,082 and 7,070 lost). Full, the queue holds about 105 MB of
/// Events as JSON.
const CAPACITY: usize = 196_608;

/// Events being created (or series patched) at once. 16 created about 1,300 a second against the bench's fake
/// API server on a loaded 2-core machine, each waiting mostly for its turn on a core.
const IN_FLIGHT: usize = 64;

/// Hears of every Event that is not created (over its object's rate, dropped from a full queue, refused by the
/// API server, or still waiting when the daemon stopped) and of every series patch shed or refused, with the
/// reason.
pub type Lost = Arc<dyn Fn(&Event, &str) + Send + Sync>;

/// Hears of every Event created (not of a repeat counted into an Event's series): the notifications' hook.
/// The publisher keeps each queued Event as the JSON it sends, and decodes one for [`Listener::created`] only
/// when [`Listener::listening`] says so: decoding every Event for a hook with nothing to send was 2% of the
/// daemon's CPU at 10,000 Rollouts (perf).
pub trait Listener: Send + Sync {
    /// Whether an Event created now would be acted on at all.
    fn listening(&self) -> bool;
    fn created(&self, event: &Event);
}

pub type Created = Arc<dyn Listener>;

/// The queue both ends share, and the publisher's wake-up when something enters it.
struct Shared {
    recorder: Mutex<Recorder>,
    wake: Notify,
}

impl Shared {
    fn recorder(&self) -> MutexGuard<'_, Recorder> {
        self.recorder.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The reconciles' end of the queue.
#[derive(Clone)]
pub struct EventQueue {
    shared: Arc<Shared>,
    lost: Lost,
}

/// The end that creates the Events; see [`EventPublisher::run`]. Dropped unrun, it takes no more Events.
pub struct EventPublisher {
    client: kube::Client,
    shared: Arc<Shared>,
    lost: Lost,
    created: Option<Created>,
}

impl Drop for EventPublisher {
    fn drop(&mut self) {
        self.shared.recorder().close();
    }
}

/// A queue of Events to create through `client`; `lost` hears of each one that is not.
pub fn queue(client: kube::Client, lost: Lost) -> (EventQueue, EventPublisher) {
    with_capacity(client, lost, CAPACITY)
}

fn with_capacity(
    client: kube::Client,
    lost: Lost,
    capacity: usize,
) -> (EventQueue, EventPublisher) {
    let shared = Arc::new(Shared {
        recorder: Mutex::new(Recorder::new(capacity)),
        wake: Notify::new(),
    });
    let queue = EventQueue {
        shared: shared.clone(),
        lost: lost.clone(),
    };
    (
        queue,
        EventPublisher {
            client,
            shared,
            lost,
            created: None,
        },
    )
}

impl EventQueue {
    /// Takes `events` in order without waiting: each counted into its series, queued, or lost (see
    /// [`super::event_queue`]). The queue is locked and the publisher woken once for them all: a reconcile's
    /// Events come together, and waking the publisher for each was 1.5% of the daemon's CPU at 2,000
    /// Rollouts (perf).
    pub fn push(&self, events: impl IntoIterator<Item = Event>) {
        let dropped: Vec<Dropped> = {
            let mut recorder = self.shared.recorder();
            events
                .into_iter()
                .filter_map(|e| recorder.offer(e))
                .collect()
        };
        self.shared.wake.notify_one();
        for Dropped { event, why } in dropped {
            (self.lost)(&event, &why);
        }
    }
}

impl EventPublisher {
    /// This publisher telling `created` of each Event it creates.
    pub fn on_created(mut self, created: Created) -> EventPublisher {
        self.created = Some(created);
        self
    }

    /// Creates queued Events, or patches the series of the Event they repeat, [`IN_FLIGHT`] at a time, until
    /// `stop` resolves; then nothing more is taken, and what is queued or in flight is still sent for at most
    /// `drain`; the rest is lost.
    /// The drain is real time, not the daemon's clock: it bounds requests to the API server at shutdown.
    pub async fn run(self, stop: impl Future<Output = ()>, drain: Duration) {
        let (give_up, given_up) = watch::channel(false);
        let send = |send: Outgoing| {
            let client = self.client.clone();
            let mut given_up = given_up.clone();
            async move {
                let sent = async {
                    let request = match &send.request {
                        Request::Create { namespace, body } => {
                            kube::core::Request::new(Event::url_path(&(), Some(namespace)))
                                .create(&PostParams::default(), body.clone().into_bytes())
                        }
                        Request::Patch(patch) => {
                            let body = Patch::Merge(patch.body());
                            kube::core::Request::new(Event::url_path(&(), Some(&patch.namespace)))
                                .patch(&patch.name, &PatchParams::default(), &body)
                        }
                    }
                    .map_err(kube::Error::BuildRequest)?;
                    // The reply is not read: what was sent is what the hooks hear of.
                    client.request::<IgnoredAny>(request).await.map(drop)
                };
                let sent = tokio::select! {
                    sent = sent => sent.map_err(|e| e.to_string()),
                    _ = given_up.wait_for(|g| *g) => {
                        Err("the daemon stopped before it was created".to_string())
                    }
                };
                (send, sent)
            }
        };
        let lose = |dropped: Vec<Dropped>| {
            for Dropped { event, why } in dropped {
                (self.lost)(&event, &why);
            }
        };
        let mut sending = FuturesUnordered::new();
        let mut stop = std::pin::pin!(stop);
        // When the drain ends, once stopped.
        let mut deadline = None;
        loop {
            while sending.len() < IN_FLIGHT {
                let Some(next) = self.shared.recorder().pop() else {
                    break;
                };
                sending.push(send(next));
            }
            if deadline.is_some() && sending.is_empty() && self.shared.recorder().is_empty() {
                break;
            }
            let drained = deadline.unwrap_or_else(crate::time::monotonic);
            tokio::select! {
                () = &mut stop, if deadline.is_none() => {
                    self.shared.recorder().close();
                    deadline = Some(crate::time::monotonic() + drain);
                }
                // With every slot in flight, a finished send takes the next: a push then wakes nothing.
                () = self.shared.wake.notified(), if deadline.is_none() && sending.len() < IN_FLIGHT => {}
                Some((done, sent)) = sending.next() => {
                    match (&sent, &done.request, &self.created) {
                        (Err(e), request, _) => (self.lost)(&request.event(), e),
                        (Ok(()), request @ Request::Create { .. }, Some(created))
                            if created.listening() =>
                        {
                            created.created(&request.event());
                        }
                        (Ok(()), _, _) => {}
                    }
                    let dropped = self.shared.recorder().sent(&done, sent.is_ok());
                    lose(dropped.into_iter().collect());
                }
                () = crate::time::real_sleep_until(drained), if deadline.is_some() && !*give_up.borrow() => {
                    give_up.send_replace(true);
                    let dropped = self.shared.recorder().drain();
                    lose(dropped);
                }
            }
        }
    }
}

/// What an Event says happened: the action taken, Argo's reason, the note, and whether it is a Warning.
pub struct Happened<'a> {
    pub action: &'a str,
    pub reason: &'a str,
    pub note: String,
    pub warning: bool,
}

/// The number in the name of the last Event this process made.
static LAST_NAMED: Mutex<i128> = Mutex::new(i128::MIN);

/// The number naming an Event made at `now`: its instant in nanoseconds plus `serial`, or one more than the
/// last one made if that is not more. So names never repeat and sort in the order the Events were made, even
/// when two reconciles read the same instant (a manual clock a test holds still) or the clock steps back.
fn name_number(now: Timestamp, serial: u32) -> i128 {
    let wanted = now.as_nanosecond().saturating_add(i128::from(serial));
    let mut last = LAST_NAMED.lock().unwrap_or_else(PoisonError::into_inner);
    *last = wanted.max(last.saturating_add(1));
    *last
}

/// The events.k8s.io/v1 Event about `regarding` at `now`. Named as client-go names Events (see
/// [`name_number`]); `serial` tells apart the Events of one object in one instant. Not kube's `Recorder`,
/// which keeps every Event for six minutes to count repeats into a series and scans them all on every publish:
/// [`super::event_series`] finds a repeat with one lookup.
pub fn about(
    reporter: &Reporter,
    regarding: ObjectReference,
    what: Happened<'_>,
    now: Timestamp,
    serial: u32,
) -> Event {
    let name = regarding.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", name_number(now, serial))),
            namespace: regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        action: Some(what.action.to_string()),
        reason: Some(what.reason.to_string()),
        note: Some(what.note),
        type_: Some(if what.warning { "Warning" } else { "Normal" }.to_string()),
        event_time: Some(MicroTime(now)),
        regarding: Some(regarding),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str) -> Event {
        Event {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            ..Event::default()
        }
    }

    #[test]
    fn event_names_never_repeat_nor_go_back_even_when_the_clock_does() {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().expect("a timestamp");
        let first = name_number(t, 0);
        let again = name_number(t, 0);
        let earlier = name_number(
            t.checked_sub(jiff::SignedDuration::from_secs(1))
                .expect("a time"),
            1,
        );
        assert!(
            first < again && again < earlier,
            "{first} {again} {earlier}"
        );
        let later = t
            .checked_add(jiff::SignedDuration::from_secs(1))
            .expect("a time");
        assert_eq!(name_number(later, 2), later.as_nanosecond() + 2);
    }

    /// Three times as many Events as are sent at once, each about an object of its own (no rate bounds them)
    /// and queued while every slot is in flight: each finished send takes the next, and all are created.
    #[tokio::test]
    async fn events_queued_while_every_slot_is_in_flight_are_all_created() {
        use wiremock::matchers::method;
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        let slow = ResponseTemplate::new(201)
            .set_body_json(serde_json::json!({}))
            .set_delay(Duration::from_millis(100));
        Mock::given(method("POST"))
            .respond_with(slow)
            .mount(&server)
            .await;
        let config = kube::Config::new(server.uri().parse().expect("the mock's address"));
        let client = kube::Client::try_from(config).expect("a client");
        let lost = Arc::new(std::sync::Mutex::new(Vec::new()));
        let heard = lost.clone();
        let (queue, publisher) = queue(
            client,
            Arc::new(move |_, why| heard.lock().unwrap().push(why.to_string())),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(publisher.run(
            async {
                let _ = stopped.await;
            },
            Duration::from_secs(10),
        ));
        let events = 3 * IN_FLIGHT;
        queue.push((0..events).map(|i| {
            let mut e = event(&format!("e{i}"));
            e.metadata.namespace = Some("shop".to_string());
            e.reason = Some("ScalingReplicaSet".to_string());
            e.regarding = Some(ObjectReference {
                kind: Some("Rollout".to_string()),
                namespace: Some("shop".to_string()),
                name: Some(format!("web-{i}")),
                ..Default::default()
            });
            e
        }));
        let deadline = crate::time::monotonic() + Duration::from_secs(20);
        let mut created = 0;
        while created < events && crate::time::monotonic() < deadline {
            crate::time::real_sleep_until(crate::time::monotonic() + Duration::from_millis(50))
                .await;
            created = server.received_requests().await.map_or(0, |r| r.len());
        }
        let _ = stop.send(());
        run.await.expect("the publisher ends");
        assert_eq!(created, events, "created");
        assert!(
            lost.lock().unwrap().is_empty(),
            "{:?}",
            lost.lock().unwrap()
        );
    }

    #[tokio::test]
    async fn a_full_queue_drops_the_event_and_a_stopped_publisher_takes_none() {
        // Never connected to: nothing here reaches an API server.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let heard = seen.clone();
        let lost: Lost = Arc::new(move |event, why| {
            let name = event.metadata.name.clone().unwrap_or_default();
            heard.lock().unwrap().push((name, why.to_string()));
        });
        let (queue, publisher) = with_capacity(client, lost, 1);
        queue.push([event("first")]);
        queue.push([event("second")]);
        drop(publisher);
        queue.push([event("third")]);
        assert_eq!(
            *seen.lock().unwrap(),
            [
                (
                    "second".to_string(),
                    "the queue of Events to create is full (1 waiting)".to_string()
                ),
                (
                    "third".to_string(),
                    "the Event publisher has stopped".to_string()
                ),
            ]
        );
    }
}
