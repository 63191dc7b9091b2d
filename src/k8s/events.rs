//! Events on their way to the API server. A reconcile queues the Event of a phase change once the status
//! patch that made the change has landed, and returns; a task of its own creates the queued Events, a few at
//! a time, as client-go's event broadcaster does for Argo Rollouts. So a slow Events endpoint never delays a
//! run's next measurement. Like client-go's, a full queue drops the Event rather than holding up a
//! reconcile: Events are at-most-once anyway (a crash after the patch loses its Event). A repeat of an Event
//! made lately is counted into that Event's series rather than created ([`super::event_series`]).

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use tokio::sync::{mpsc, watch};

use super::event_series::{Correlator, Outgoing};

/// Events waiting to be created at most. client-go's broadcaster keeps 1,000, which a slow API server overflowed
/// at 200 Rollouts stepping at once (92–142 lost per update in the rollouts bench); 8,192 lost none there, for
/// at most a few MB of queued Events.
const CAPACITY: usize = 8192;

/// Events being created at once.
const IN_FLIGHT: usize = 16;

/// Hears of every Event that is not created (dropped from a full queue, refused by the API server, or
/// still waiting when the daemon stopped), with the reason.
pub type Lost = Arc<dyn Fn(&Event, &str) + Send + Sync>;

/// Hears of every Event created (not of a repeat counted into an Event's series): the notifications' hook.
pub type Created = Arc<dyn Fn(&Event) + Send + Sync>;

/// The reconciles' end of the queue.
#[derive(Clone)]
pub struct EventQueue {
    sender: mpsc::Sender<Event>,
    lost: Lost,
}

/// The end that creates the Events; see [`EventPublisher::run`].
pub struct EventPublisher {
    client: kube::Client,
    receiver: mpsc::Receiver<Event>,
    lost: Lost,
    created: Option<Created>,
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
    let (sender, receiver) = mpsc::channel(capacity);
    let queue = EventQueue {
        sender,
        lost: lost.clone(),
    };
    (
        queue,
        EventPublisher {
            client,
            receiver,
            lost,
            created: None,
        },
    )
}

impl EventQueue {
    /// Queues `event` without waiting; when the queue is full or the publisher has stopped, the Event is lost.
    pub fn push(&self, event: Event) {
        let (event, why) = match self.sender.try_send(event) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Full(event)) => (
                event,
                format!(
                    "the queue of Events to create is full ({} waiting)",
                    self.sender.max_capacity()
                ),
            ),
            Err(mpsc::error::TrySendError::Closed(event)) => {
                (event, "the Event publisher has stopped".to_string())
            }
        };
        (self.lost)(&event, &why);
    }
}

impl EventPublisher {
    /// This publisher telling `created` of each Event it creates.
    pub fn on_created(self, created: Created) -> EventPublisher {
        EventPublisher {
            created: Some(created),
            ..self
        }
    }

    /// Creates queued Events, or patches the series of the Event they repeat, [`IN_FLIGHT`] at a time, until
    /// `stop` resolves; then nothing more is queued, and what is queued or in flight is still sent for at most
    /// `drain`; the rest is lost.
    /// The drain is real time, not the daemon's clock: it bounds requests to the API server at shutdown.
    pub async fn run(self, stop: impl Future<Output = ()>, drain: Duration) {
        let EventPublisher {
            client,
            mut receiver,
            lost,
            created,
        } = self;
        let (give_up, given_up) = watch::channel(false);
        let send = |send: Outgoing| {
            let api: Api<Event> = Api::namespaced(
                client.clone(),
                send.event.metadata.namespace.as_deref().unwrap_or_default(),
            );
            let mut given_up = given_up.clone();
            async move {
                let sent = async {
                    if send.create {
                        api.create(&PostParams::default(), &send.event).await
                    } else {
                        let name = send.event.metadata.name.as_deref().unwrap_or_default();
                        let patch = Patch::Merge(send.series_patch());
                        api.patch(name, &PatchParams::default(), &patch).await
                    }
                };
                let sent = tokio::select! {
                    sent = sent => sent.map(drop).map_err(|e| e.to_string()),
                    _ = given_up.wait_for(|g| *g) => {
                        Err("the daemon stopped before it was created".to_string())
                    }
                };
                (send, sent)
            }
        };
        let mut correlator = Correlator::default();
        let mut sending = FuturesUnordered::new();
        let mut stop = std::pin::pin!(stop);
        // Whether the queue may still hold Events; when the drain ends.
        let mut open = true;
        let mut deadline = None;
        while open || !sending.is_empty() {
            let drained = deadline.unwrap_or_else(crate::time::monotonic);
            tokio::select! {
                () = &mut stop, if deadline.is_none() => {
                    receiver.close();
                    deadline = Some(crate::time::monotonic() + drain);
                }
                event = receiver.recv(), if open && sending.len() < IN_FLIGHT => match event {
                    Some(event) => sending.extend(correlator.observe(event).map(send)),
                    None => open = false,
                },
                Some((done, sent)) = sending.next() => {
                    match (&sent, &created) {
                        (Err(e), _) => lost(&done.event, e),
                        (Ok(()), Some(created)) if done.create => created(&done.event),
                        (Ok(()), _) => {}
                    }
                    sending.extend(correlator.sent(&done, sent.is_ok()).map(send));
                }
                () = crate::time::real_sleep_until(drained), if deadline.is_some() && !*give_up.borrow() => {
                    give_up.send_replace(true);
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
        queue.push(event("first"));
        queue.push(event("second"));
        drop(publisher);
        queue.push(event("third"));
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
