//! A simulated ReplicaSet controller for the fake API server (kube-controller-manager's part in what a Rollout
//! does): each ReplicaSet's `status` follows its `spec.replicas` — pods removed at once on a scale-down, new pods
//! ready and available `ready_after` after they were asked for — and `status.observedGeneration` follows
//! `metadata.generation`. A test can hold the pods of one ReplicaSet (by name or by pod-template hash) unready,
//! as a crash-looping canary: they exist (`status.replicas`) but never become ready or available.
//!
//! It writes only through the store, as the status subresource would, so watches see its writes like any
//! client's. It knows nothing of Rollouts. TEST FIXTURE ONLY.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::Shared;
use super::store::Target;

/// How often the controller looks when nothing is written meanwhile (pods due to become ready).
const TICK: Duration = Duration::from_millis(25);

/// The running controller; dropping it stops it.
pub struct ReplicaSetController {
    held: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Drop for ReplicaSetController {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ReplicaSetController {
    pub(super) fn start(shared: Arc<Shared>, ready_after: Duration) -> ReplicaSetController {
        let held = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(run(shared, ready_after, held.clone()));
        ReplicaSetController { held, task }
    }

    /// The pods of the ReplicaSet named `name_or_hash`, or carrying `rollouts-pod-template-hash: name_or_hash`
    /// (also one created later), are created but never become ready.
    pub fn hold_unready(&self, name_or_hash: &str) {
        self.lock().push(name_or_hash.to_owned());
    }

    /// Their pods become ready `ready_after` from now.
    pub fn release(&self, name_or_hash: &str) {
        self.lock().retain(|h| h != name_or_hash);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Pods asked for and not ready yet: (spec.replicas they were asked for at, since when).
type Pending = HashMap<(String, String), (i64, Instant)>;

async fn run(shared: Arc<Shared>, ready_after: Duration, held: Arc<Mutex<Vec<String>>>) {
    let mut signal = shared.signal.subscribe();
    let mut pending = Pending::new();
    loop {
        let held = held.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (key, status) in due(&shared, &mut pending, ready_after, &held) {
            let Some(resource) = shared.resource("apps", "v1", "replicasets") else {
                return;
            };
            let store_key = (resource.id(), key.0, key.1);
            // A write that lost a race with the ReplicaSet's deletion is simply not made.
            let _ = shared.write(|store| {
                store.update(
                    &resource,
                    &store_key,
                    Target::Status,
                    json!({ "status": status }),
                )
            });
        }
        tokio::select! {
            _ = signal.changed() => {}
            () = tokio::time::sleep(TICK) => {}
        }
    }
}

/// The ReplicaSets whose status is to change now, with their new status.
fn due(
    shared: &Shared,
    pending: &mut Pending,
    ready_after: Duration,
    held: &[String],
) -> Vec<((String, String), Value)> {
    let Some(resource) = shared.resource("apps", "v1", "replicasets") else {
        return Vec::new();
    };
    let store = shared.lock_store();
    let now = Instant::now();
    let mut writes = Vec::new();
    let mut seen = Vec::new();
    for rs in store.list(&resource.id(), None) {
        let text = |pointer: &str| {
            rs.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let key = (text("/metadata/namespace"), text("/metadata/name"));
        seen.push(key.clone());
        let number = |pointer: &str| rs.pointer(pointer).and_then(Value::as_i64);
        let spec = number("/spec/replicas").unwrap_or(1).max(0);
        let available = number("/status/availableReplicas").unwrap_or(0);
        let hash = text("/metadata/labels/rollouts-pod-template-hash");
        let is_held = held
            .iter()
            .any(|h| *h == key.1 || (!hash.is_empty() && *h == hash));
        let ready = if is_held {
            pending.remove(&key);
            0
        } else if available >= spec {
            pending.remove(&key);
            spec
        } else {
            let since = pending.entry(key.clone()).or_insert((spec, now));
            if since.0 != spec {
                *since = (spec, now);
            }
            if now.duration_since(since.1) >= ready_after {
                pending.remove(&key);
                spec
            } else {
                available
            }
        };
        let mut status = json!({ "replicas": spec });
        if ready > 0 {
            status["readyReplicas"] = json!(ready);
            status["availableReplicas"] = json!(ready);
        }
        if let Some(generation) = number("/metadata/generation") {
            status["observedGeneration"] = json!(generation);
        }
        if rs.get("status") != Some(&status) {
            writes.push((key, status));
        }
    }
    pending.retain(|key, _| seen.contains(key));
    writes
}
