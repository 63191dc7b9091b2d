//! Watch streams: newline-delimited JSON events over a chunked, long-lived response, resumed from a
//! resourceVersion out of the store's change history; the events ready at once go out together (in chunks
//! of about 64 kB), as kube-apiserver flushes a watch only when no further event is queued. Owns event
//! selection (resource, namespace, selectors, selector transitions), BOOKMARKs, `timeoutSeconds`, 410 Expired
//! and being cut by the fixture. It never writes.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Bytes, Frame};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::error::ApiError;
use super::selector::{FieldSelector, LabelSelector};
use super::store::{Change, ChangeKind};
use super::{Body, ResourceDef, Shared};

/// One watch request, parsed from the query string.
pub struct WatchRequest {
    pub resource: ResourceDef,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// `None` for an absent or "0" resourceVersion: start with the current state as ADDED events.
    pub from: Option<u64>,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: the current state, then a BOOKMARK annotated `k8s.io/initial-events-end`.
    pub initial_events: bool,
}

impl WatchRequest {
    fn selects(&self, object: &Value) -> bool {
        let namespace = object
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.namespace.as_deref().is_none_or(|n| n == namespace)
            && self.labels.matches(object)
            && self.fields.matches(object)
    }

    /// Appends the event this watch sees for a change, if any: leaving the selector reads as DELETED, entering
    /// as ADDED.
    fn event_for(&self, change: &Change, out: &mut Vec<u8>) {
        if change.key.0 != self.resource.id() {
            return;
        }
        let now = self.selects(&change.object);
        let before = change.previous.as_ref().is_some_and(|p| self.selects(p));
        let kind = match change.kind {
            ChangeKind::Added => now.then_some("ADDED"),
            ChangeKind::Deleted => now.then_some("DELETED"),
            ChangeKind::Modified => match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            },
        };
        if let Some(kind) = kind {
            event_line(out, kind, change.object.json());
        }
    }

    /// The events of `changes` from `from` on, in a buffer sized once for them and ended once it holds about
    /// [`CHUNK`] bytes, and where the next one starts: a burst of thousands of changes would otherwise grow
    /// one buffer of many megabytes, copying it as it grows.
    fn events_from(&self, changes: &[Change], from: usize) -> (Vec<u8>, usize) {
        let mut size = 0;
        let end = changes[from..]
            .iter()
            .position(|c| {
                size += c.object.json().len() + EVENT_FRAMING;
                size >= CHUNK
            })
            .map_or(changes.len(), |at| from + at + 1);
        let mut events = Vec::with_capacity(size);
        for change in &changes[from..end] {
            self.event_for(change, &mut events);
        }
        (events, end)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Vec<u8> {
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let bookmark = json!({ "type": "BOOKMARK", "object": {
            "kind": self.resource.kind, "apiVersion": self.resource.api_version(), "metadata": metadata,
        }});
        let mut line = bookmark.to_string().into_bytes();
        line.push(b'\n');
        line
    }
}

/// About how many bytes of events go out in one chunk at most (one event may take it past).
const CHUNK: usize = 64 << 10;

/// What [`event_line`] adds around the object: `{"type":"MODIFIED","object":` and `}\n`.
const EVENT_FRAMING: usize = 32;

/// Appends one watch event line as sent, around the object's JSON as the store made it once for the reply and
/// every watch.
fn event_line(out: &mut Vec<u8>, kind: &str, object: &[u8]) {
    out.reserve(object.len() + EVENT_FRAMING);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
}

/// An ERROR event carrying `error`'s Status.
fn error_line(error: &ApiError) -> Vec<u8> {
    let mut line = Vec::new();
    event_line(&mut line, "ERROR", error.status().to_string().as_bytes());
    line
}

enum Step {
    Send(Vec<Change>),
    /// The fixture cut open watches: end the body with an error so the connection drops mid-stream.
    Cut,
    /// The watch fell out of the history window.
    Expired(u64),
}

/// Start the stream task and return the response body it feeds.
pub fn serve(shared: Arc<Shared>, request: WatchRequest) -> Body {
    let (tx, mut rx) = mpsc::channel::<Result<Frame<Bytes>, io::Error>>(256);
    tokio::spawn(run(shared, request, tx));
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    BodyExt::boxed(StreamBody::new(stream))
}

struct OpenWatch(Arc<Shared>);

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.open_watches.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where a new watch starts: its cursor, the watch epoch it belongs to and the initial events to send (the
/// current state as ADDED, for a watch from no resourceVersion); or the 410 message for a resourceVersion out of
/// the history window.
fn start(shared: &Shared, request: &WatchRequest) -> Result<(u64, u64, Vec<u8>), String> {
    let mut store = shared.lock_store();
    let refused = request
        .from
        .and_then(|rv| Some((rv, store.refuse_watch_from(rv)?)));
    match (request.from, refused) {
        (_, Some((rv, oldest))) => Err(format!("too old resource version: {rv} ({oldest})")),
        (Some(rv), None) => Ok((rv, store.watch_epoch, Vec::new())),
        (None, None) => {
            let res_id = request.resource.id();
            let mut events = Vec::new();
            for object in store.list(&res_id, request.namespace.as_deref()) {
                if request.selects(object) {
                    event_line(&mut events, "ADDED", object.json());
                }
            }
            if request.initial_events {
                events.extend(request.bookmark(store.rv, true));
            }
            Ok((store.rv, store.watch_epoch, events))
        }
    }
}

/// What the watch at `cursor` does next, moving the cursor past the changes it takes: only those of its
/// resource are taken out (every write wakes every watch, and most writes are of other kinds).
fn next_step(shared: &Shared, res_id: &str, epoch: u64, cursor: &mut u64) -> Step {
    let store = shared.lock_store();
    if store.watch_epoch != epoch {
        Step::Cut
    } else if *cursor < store.compacted_rv {
        Step::Expired(*cursor)
    } else {
        let changes: Vec<Change> = store
            .changes_after(*cursor)
            .filter(|c| c.key.0 == res_id)
            .cloned()
            .collect();
        *cursor = store.rv;
        Step::Send(changes)
    }
}

async fn run(
    shared: Arc<Shared>,
    request: WatchRequest,
    tx: mpsc::Sender<Result<Frame<Bytes>, io::Error>>,
) {
    shared.open_watches.fetch_add(1, Ordering::SeqCst);
    let _open = OpenWatch(shared.clone());
    let mut signal = shared.signal.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    // Whole lines, as many as are ready: kube-apiserver flushes a watch only when no further event is queued.
    let send = |lines: Vec<u8>| {
        let tx = tx.clone();
        async move { tx.send(Ok(Frame::data(Bytes::from(lines)))).await.is_ok() }
    };
    let far = Instant::now() + Duration::from_secs(24 * 3600);
    let deadline = request.timeout.map_or(far, |t| Instant::now() + t);
    let interval = shared.bookmark_interval;

    let (mut cursor, epoch, initial) = match start(&shared, &request) {
        Ok(start) => start,
        Err(message) => {
            send(error_line(&ApiError::new(410, "Expired", message))).await;
            return;
        }
    };
    if !initial.is_empty() && !send(initial).await {
        return;
    }

    let mut next_bookmark = Instant::now() + interval;
    let mut bookmark_due = false;
    let res_id = request.resource.id();
    loop {
        match next_step(&shared, &res_id, epoch, &mut cursor) {
            Step::Cut => {
                let _ = tx
                    .send(Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "watch cut by the fixture",
                    )))
                    .await;
                return;
            }
            Step::Expired(rv) => {
                let gone = ApiError::new(410, "Expired", format!("too old resource version: {rv}"));
                send(error_line(&gone)).await;
                return;
            }
            Step::Send(changes) => {
                // Serialized here, not under the store lock, where it would hold up every write.
                let mut from = 0;
                while from < changes.len() {
                    let (events, next) = request.events_from(&changes, from);
                    from = next;
                    if !events.is_empty() && !send(events).await {
                        return;
                    }
                }
            }
        }
        if bookmark_due {
            bookmark_due = false;
            if !send(request.bookmark(cursor, false)).await {
                return;
            }
        }
        tokio::select! {
            changed = signal.changed() => if changed.is_err() { return },
            _ = sleep_until(next_bookmark), if request.bookmarks => {
                bookmark_due = true;
                next_bookmark = Instant::now() + interval;
            }
            _ = sleep_until(deadline) => return,
            _ = tx.closed() => return,
            _ = shutdown.changed() => return,
        }
    }
}
