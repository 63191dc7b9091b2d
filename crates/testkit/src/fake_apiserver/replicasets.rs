//! A simulated ReplicaSet controller for the fake API server (kube-controller-manager's part in what a Rollout
//! does): each ReplicaSet has `spec.replicas` pods, created as the real controller creates them (`generateName:
//! <rs>-`, the template's labels, annotations and spec, a controller ownerReference to the ReplicaSet) and
//! removed at once on a scale-down (unready ones first, then the newest); a pod deleted or evicted by anyone is
//! replaced at once. A pod becomes Ready `ready_after` after it was created; the ReplicaSet's `status` counts
//! its pods (`replicas`, `readyReplicas`, `availableReplicas`: minReadySeconds is not simulated) and
//! `status.observedGeneration` follows `metadata.generation`. Pods whose controlling ReplicaSet is gone are
//! deleted, as the garbage collector does. A test can hold the pods of one ReplicaSet (by name or by
//! pod-template hash) unready, as a crash-looping canary: they exist but are not (or no longer) Ready.
//!
//! It writes only through the store, as the API server would, so watches see its writes like any client's.
//! It knows nothing of Rollouts. TEST FIXTURE ONLY.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::object::now;
use super::store::{Store, Stored, Target};
use super::{ResourceDef, Shared};

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
    /// (also one created later), are created but are not Ready.
    pub fn hold_unready(&self, name_or_hash: &str) {
        self.lock().push(name_or_hash.to_owned());
    }

    /// Their pods become Ready `ready_after` from now.
    pub fn release(&self, name_or_hash: &str) {
        self.lock().retain(|h| h != name_or_hash);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Pods not Ready yet, by (namespace, name): since when they count toward becoming Ready.
type Pending = HashMap<(String, String), Instant>;

async fn run(shared: Arc<Shared>, ready_after: Duration, held: Arc<Mutex<Vec<String>>>) {
    let mut signal = shared.signal.subscribe();
    let mut pending = Pending::new();
    // The store's revision and the held list at the last pass: a pass is made only when ReplicaSets or pods
    // changed since, a pod waits to become Ready, or what is held changed (a bench writes thousands of
    // other objects a second, and a pass looks at every ReplicaSet and pod).
    let mut seen: Option<(u64, Vec<String>)> = None;
    loop {
        let held = held.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let resources = (
            shared.resource("apps", "v1", "replicasets"),
            shared.resource("", "v1", "pods"),
        );
        let (Some(rs_res), Some(pod_res)) = resources else {
            return;
        };
        let sync = Sync {
            rs_res,
            pod_res,
            ready_after,
            held,
        };
        // Watches are woken only when something was written: this loop wakes on every write too.
        let changed = {
            let mut store = shared.lock_store();
            let due = match &seen {
                None => true,
                Some((rv, was_held)) => {
                    let ours = [sync.rs_res.id(), sync.pod_res.id()];
                    !pending.is_empty()
                        || *was_held != sync.held
                        || *rv < store.compacted_rv
                        || store.changes_after(*rv).any(|c| ours.contains(&c.key.0))
                }
            };
            seen = Some((store.rv, sync.held.clone()));
            let changed = due && sync.pass(&mut store, &mut pending);
            shared
                .pods_starting
                .store(pending.len(), std::sync::atomic::Ordering::SeqCst);
            changed
        };
        if changed {
            shared.signal.send_modify(|tick| *tick += 1);
        }
        tokio::select! {
            _ = signal.changed() => {}
            () = tokio::time::sleep(TICK) => {}
        }
    }
}

fn text(object: &Value, pointer: &str) -> String {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn key_of(object: &Value) -> (String, String) {
    (
        text(object, "/metadata/namespace"),
        text(object, "/metadata/name"),
    )
}

/// The uid of the pod's controlling ReplicaSet.
fn controller_uid(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| {
            o.get("controller") == Some(&json!(true)) && o.get("kind") == Some(&json!("ReplicaSet"))
        })?
        .get("uid")?
        .as_str()
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.get("type") == Some(&json!("Ready")) && c.get("status") == Some(&json!("True"))
            })
        })
}

struct Sync {
    rs_res: ResourceDef,
    pod_res: ResourceDef,
    ready_after: Duration,
    held: Vec<String>,
}

impl Sync {
    /// One look at every ReplicaSet and pod; true when something was written. A write that loses a race (an
    /// object deleted meanwhile) is simply not made.
    fn pass(&self, store: &mut Store, pending: &mut Pending) -> bool {
        // Shared handles, not copies: a pass runs on every write, over every pod of every test's cluster.
        let replica_sets: Vec<Arc<Stored>> = store.list(&self.rs_res.id(), None).cloned().collect();
        let pods: Vec<Arc<Stored>> = store.list(&self.pod_res.id(), None).cloned().collect();
        let mut by_owner: HashMap<&str, Vec<&Value>> = HashMap::new();
        for rs in &replica_sets {
            by_owner
                .entry(
                    rs.pointer("/metadata/uid")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                )
                .or_default();
        }
        let mut changed = false;
        for pod in &pods {
            match controller_uid(pod).map(|uid| by_owner.get_mut(uid)) {
                Some(Some(owned)) => owned.push(pod),
                Some(None) => changed |= self.delete(store, pod),
                None => {}
            }
        }
        for rs in &replica_sets {
            let uid = rs
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let owned = by_owner.get(uid).cloned().unwrap_or_default();
            changed |= self.sync(store, pending, rs, owned);
        }
        let existing: HashSet<(String, String)> = pods.iter().map(|p| key_of(p)).collect();
        pending.retain(|key, _| existing.contains(key));
        changed
    }

    /// Brings one ReplicaSet's pods to its spec and its status to its pods.
    fn sync(
        &self,
        store: &mut Store,
        pending: &mut Pending,
        rs: &Value,
        mut owned: Vec<&Value>,
    ) -> bool {
        let (namespace, name) = key_of(rs);
        let number = |pointer: &str| rs.pointer(pointer).and_then(Value::as_i64);
        let spec = usize::try_from(number("/spec/replicas").unwrap_or(1)).unwrap_or(0);
        let hash = text(rs, "/metadata/labels/rollouts-pod-template-hash");
        let held = self
            .held
            .iter()
            .any(|h| *h == name || (!hash.is_empty() && *h == hash));
        let mut changed = false;
        // The real controller removes unready pods first, then the newest.
        owned.sort_by_key(|p| {
            (
                is_ready(p),
                std::cmp::Reverse(text(p, "/metadata/creationTimestamp")),
            )
        });
        let surplus = owned.len().saturating_sub(spec);
        for pod in owned.drain(..surplus) {
            changed |= self.delete(store, pod);
        }
        let mut created = Vec::new();
        for _ in owned.len()..spec {
            let mut pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "generateName": format!("{name}-"),
                    "labels": rs.pointer("/spec/template/metadata/labels"),
                    "annotations": rs.pointer("/spec/template/metadata/annotations"),
                    "ownerReferences": [{
                        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                        "uid": rs.pointer("/metadata/uid"), "controller": true, "blockOwnerDeletion": true,
                    }],
                },
                "spec": rs.pointer("/spec/template/spec"),
            });
            if let Some(meta) = pod["metadata"].as_object_mut() {
                meta.retain(|_, v| !v.is_null());
            }
            if let Ok(stored) = store.create(&self.pod_res, &namespace, pod) {
                pending.insert(key_of(&stored), Instant::now());
                created.push(Value::clone(&stored));
                changed = true;
            }
        }
        let mut ready = 0;
        for pod in owned.into_iter().chain(&created) {
            let key = key_of(pod);
            let becomes = if held {
                pending.remove(&key);
                false
            } else if is_ready(pod) {
                true
            } else {
                let since = pending.entry(key.clone()).or_insert_with(Instant::now);
                since.elapsed() >= self.ready_after
            };
            ready += usize::from(becomes);
            if becomes != is_ready(pod) {
                pending.remove(&key);
                let status = json!({"status": {
                    "phase": if becomes { "Running" } else { "Pending" },
                    "conditions": [{"type": "Ready", "status": if becomes { "True" } else { "False" },
                                    "lastTransitionTime": now()}],
                }});
                let store_key = (self.pod_res.id(), key.0, key.1);
                changed |= store
                    .update(&self.pod_res, &store_key, Target::Status, status)
                    .is_ok();
            }
        }
        let mut status = json!({ "replicas": spec });
        if ready > 0 {
            status["readyReplicas"] = json!(ready);
            status["availableReplicas"] = json!(ready);
        }
        if let Some(generation) = number("/metadata/generation") {
            status["observedGeneration"] = json!(generation);
        }
        if rs.get("status") != Some(&status) {
            let store_key = (self.rs_res.id(), namespace, name);
            changed |= store
                .update(
                    &self.rs_res,
                    &store_key,
                    Target::Status,
                    json!({ "status": status }),
                )
                .is_ok();
        }
        changed
    }

    fn delete(&self, store: &mut Store, pod: &Value) -> bool {
        let (namespace, name) = key_of(pod);
        let key = (self.pod_res.id(), namespace, name);
        store.delete(&self.pod_res, &key, &json!({})).is_ok()
    }
}
