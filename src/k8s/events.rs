//! Events on their way to the API server. A reconcile queues the Event of a phase change once the status
//! patch that made the change has landed, and returns; a task of its own creates the queued Events, a few at
//! a time, as client-go's event broadcaster does for Argo Rollouts. So a slow Events endpoint never delays a
//! run's next measurement. Like client-go's, a full queue drops the Event rather than holding up a
//! reconcile: Events are at-most-once anyway (a crash after the patch loses its Event).

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PostParams};
use tokio::sync::{mpsc, watch};

/// Events waiting to be created at most; client-go's broadcaster keeps 1,000.
const CAPACITY: usize = 1024;

/// Events being created at once.
const IN_FLIGHT: usize = 4;

/// Why an Event was not queued.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Dropped {
    #[error("{CAPACITY} Events are already waiting to be created")]
    Full,
    #[error("the Event publisher has stopped")]
    Stopped,
}

/// The reconciles' end of the queue.
#[derive(Debug, Clone)]
pub struct EventQueue {
    sender: mpsc::Sender<Event>,
}

/// The end that creates the Events; see [`EventPublisher::run`].
pub struct EventPublisher {
    client: kube::Client,
    receiver: mpsc::Receiver<Event>,
}

/// A queue of Events to create through `client`.
pub fn queue(client: kube::Client) -> (EventQueue, EventPublisher) {
    with_capacity(client, CAPACITY)
}

fn with_capacity(client: kube::Client, capacity: usize) -> (EventQueue, EventPublisher) {
    let (sender, receiver) = mpsc::channel(capacity);
    (EventQueue { sender }, EventPublisher { client, receiver })
}

impl EventQueue {
    /// Queues `event` without waiting.
    pub fn push(&self, event: Event) -> Result<(), Dropped> {
        self.sender.try_send(event).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => Dropped::Full,
            mpsc::error::TrySendError::Closed(_) => Dropped::Stopped,
        })
    }
}

impl EventPublisher {
    /// Creates queued Events, [`IN_FLIGHT`] at a time, until `stop` resolves; then nothing more is queued,
    /// and what is queued or in flight is still created for at most `drain`. `failed` hears of every Event
    /// that was not created, with the reason.
    pub async fn run(
        self,
        stop: impl Future<Output = ()>,
        drain: Duration,
        failed: impl Fn(&Event, &str),
    ) {
        let EventPublisher {
            client,
            mut receiver,
        } = self;
        let (give_up, given_up) = watch::channel(false);
        let create = |event: Event| {
            let api: Api<Event> = Api::namespaced(
                client.clone(),
                event.metadata.namespace.as_deref().unwrap_or_default(),
            );
            let mut given_up = given_up.clone();
            async move {
                let params = PostParams::default();
                let created = tokio::select! {
                    created = api.create(&params, &event) => {
                        created.map(drop).map_err(|e| e.to_string())
                    }
                    _ = given_up.wait_for(|g| *g) => {
                        Err("the daemon stopped before it was created".to_string())
                    }
                };
                (event, created)
            }
        };
        let mut sending = FuturesUnordered::new();
        let mut stop = std::pin::pin!(stop);
        // Whether the queue may still hold Events; when the drain ends.
        let mut open = true;
        let mut deadline = None;
        while open || !sending.is_empty() {
            let drained = deadline.unwrap_or_else(tokio::time::Instant::now);
            tokio::select! {
                () = &mut stop, if deadline.is_none() => {
                    receiver.close();
                    deadline = Some(tokio::time::Instant::now() + drain);
                }
                event = receiver.recv(), if open && sending.len() < IN_FLIGHT => match event {
                    Some(event) => sending.push(create(event)),
                    None => open = false,
                },
                Some((event, created)) = sending.next() => {
                    if let Err(e) = created {
                        failed(&event, &e);
                    }
                }
                () = tokio::time::sleep_until(drained), if deadline.is_some() && !*give_up.borrow() => {
                    give_up.send_replace(true);
                }
            }
        }
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

    #[tokio::test]
    async fn a_full_queue_drops_the_event_and_a_stopped_publisher_takes_none() {
        // Never connected to: nothing here reaches an API server.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let (queue, publisher) = with_capacity(client, 1);
        assert_eq!(queue.push(event("first")), Ok(()));
        assert_eq!(queue.push(event("second")), Err(Dropped::Full));
        drop(publisher);
        assert_eq!(queue.push(event("third")), Err(Dropped::Stopped));
    }
}
