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
//! Started `without_pods`, the pods are only counted in the controller's memory and never stored: the
//! ReplicaSets' status moves the same, but nothing can list, evict or delete a pod. That is for a scenario in
//! which no client reads pods (the rollouts bench: 20,000 Pod objects and their watch events would be most of
//! the fake's work).
//!
//! Each pass looks only at the ReplicaSets whose objects (or pods) changed since the last one and those with a
//! pod due to become Ready; everything after a start, a change of what is held, or a gap in the change history.
//! It writes only through the store, as the API server would, so watches see its writes like any client's.
//! It knows nothing of Rollouts. TEST FIXTURE ONLY.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::object::now;
use super::store::{Store, Target};
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
    pub(super) fn start(
        shared: Arc<Shared>,
        ready_after: Duration,
        stored_pods: bool,
    ) -> ReplicaSetController {
        let held = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(run(shared, ready_after, stored_pods, held.clone()));
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

/// A ReplicaSet by (namespace, name).
type RsKey = (String, String);

async fn run(
    shared: Arc<Shared>,
    ready_after: Duration,
    stored_pods: bool,
    held: Arc<Mutex<Vec<String>>>,
) {
    let mut signal = shared.signal.subscribe();
    let resources = (
        shared.resource("apps", "v1", "replicasets"),
        shared.resource("", "v1", "pods"),
    );
    let (Some(rs_res), Some(pod_res)) = resources else {
        return;
    };
    let mut sync = Sync {
        rs_id: rs_res.id(),
        rs_res,
        pods: if stored_pods {
            Pods::Stored(pod_res)
        } else {
            Pods::Counted(HashMap::new(), 0)
        },
        ready_after,
        held: Vec::new(),
        pending: HashMap::new(),
    };
    // The store's revision after the last pass: what was written since tells which ReplicaSets to look at.
    let mut seen: Option<u64> = None;
    loop {
        let now_held = held.lock().unwrap_or_else(|p| p.into_inner()).clone();
        // Watches are woken only when something was written: this loop wakes on every write too.
        let changed = {
            let mut store = shared.lock_store();
            let everything = seen.is_none_or(|rv| rv < store.compacted_rv) || now_held != sync.held;
            sync.held = now_held;
            let dirty = if everything {
                sync.all(&store)
            } else {
                sync.touched(&store, seen.unwrap_or_default())
            };
            let changed = sync.pass(&mut store, dirty);
            seen = Some(store.rv);
            let starting = sync.pending.values().map(HashMap::len).sum();
            shared
                .pods_starting
                .store(starting, std::sync::atomic::Ordering::SeqCst);
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

fn key_of(object: &Value) -> RsKey {
    (
        text(object, "/metadata/namespace"),
        text(object, "/metadata/name"),
    )
}

/// The pod's controlling ReplicaSet's reference.
fn controller_of(pod: &Value) -> Option<&Value> {
    pod.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| {
            o.get("controller") == Some(&json!(true)) && o.get("kind") == Some(&json!("ReplicaSet"))
        })
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

/// One pod of a ReplicaSet, as the controller weighs it.
#[derive(Clone)]
struct Pod {
    name: String,
    ready: bool,
    /// `metadata.creationTimestamp`: the newest go first on a scale-down.
    created: String,
}

/// Where the pods live.
enum Pods {
    /// Pod objects in the store, as the real controller makes them.
    Stored(ResourceDef),
    /// Only in this memory, by ReplicaSet (with its uid, and a serial for their names): nothing is stored.
    Counted(HashMap<RsKey, (Value, Vec<Pod>)>, u64),
}

impl Pods {
    /// The pods whose controller is `rs`.
    fn owned(&self, store: &Store, rs: &Value) -> Vec<Pod> {
        match self {
            Pods::Stored(res) => {
                let uid = rs.pointer("/metadata/uid");
                let namespace = text(rs, "/metadata/namespace");
                store
                    .list(&res.id(), Some(&namespace))
                    .filter(|pod| controller_of(pod).and_then(|c| c.get("uid")) == uid)
                    .map(|pod| Pod {
                        name: text(pod, "/metadata/name"),
                        ready: is_ready(pod),
                        created: text(pod, "/metadata/creationTimestamp"),
                    })
                    .collect()
            }
            Pods::Counted(pods, _) => pods
                .get(&key_of(rs))
                .map(|(_, owned)| owned.clone())
                .unwrap_or_default(),
        }
    }

    /// A new pod for `rs`, not Ready; its name, or `None` when it could not be stored.
    fn create(&mut self, store: &mut Store, rs: &Value) -> Option<String> {
        let (namespace, name) = key_of(rs);
        match self {
            Pods::Stored(res) => {
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
                let stored = store.create(res, &namespace, pod).ok()?;
                Some(text(&stored, "/metadata/name"))
            }
            Pods::Counted(pods, serial) => {
                *serial += 1;
                let pod = Pod {
                    name: format!("{name}-{serial}"),
                    ready: false,
                    created: now(),
                };
                let created = pod.name.clone();
                let uid = rs.pointer("/metadata/uid").cloned().unwrap_or_default();
                pods.entry((namespace, name))
                    .or_insert_with(|| (uid, Vec::new()))
                    .1
                    .push(pod);
                Some(created)
            }
        }
    }

    /// Removes pod `name` of `rs`; true when the store was written.
    fn delete(&mut self, store: &mut Store, rs: &RsKey, name: &str) -> bool {
        match self {
            Pods::Stored(res) => {
                let key = (res.id(), rs.0.clone(), name.to_owned());
                store.delete(res, &key, &json!({})).is_ok()
            }
            Pods::Counted(pods, _) => {
                if let Some((_, owned)) = pods.get_mut(rs) {
                    owned.retain(|p| p.name != name);
                }
                false
            }
        }
    }

    /// Makes pod `name` of `rs` Ready or not; true when the store was written.
    fn set_ready(&mut self, store: &mut Store, rs: &RsKey, name: &str, ready: bool) -> bool {
        match self {
            Pods::Stored(res) => {
                let status = json!({"status": {
                    "phase": if ready { "Running" } else { "Pending" },
                    "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                                    "lastTransitionTime": now()}],
                }});
                let key = (res.id(), rs.0.clone(), name.to_owned());
                store.update(res, &key, Target::Status, status).is_ok()
            }
            Pods::Counted(pods, _) => {
                let pod = pods
                    .get_mut(rs)
                    .and_then(|(_, owned)| owned.iter_mut().find(|p| p.name == name));
                if let Some(pod) = pod {
                    pod.ready = ready;
                }
                false
            }
        }
    }

    /// The garbage collector's part: the pods naming `rs` as their controller that are not of its current uid
    /// (`None` once it is gone) are deleted. True when the store was written.
    fn collect(&mut self, store: &mut Store, rs: &RsKey, uid: Option<&Value>) -> bool {
        match self {
            Pods::Stored(res) => {
                let orphans: Vec<String> = store
                    .list(&res.id(), Some(&rs.0))
                    .filter(|pod| {
                        controller_of(pod).is_some_and(|c| {
                            c.get("name").and_then(Value::as_str) == Some(rs.1.as_str())
                                && (uid.is_none() || c.get("uid") != uid)
                        })
                    })
                    .map(|pod| text(pod, "/metadata/name"))
                    .collect();
                let mut changed = false;
                for name in orphans {
                    changed |= self.delete(store, rs, &name);
                }
                changed
            }
            Pods::Counted(pods, _) => {
                if pods.get(rs).is_some_and(|(of, _)| Some(of) != uid) {
                    pods.remove(rs);
                }
                false
            }
        }
    }
}

struct Sync {
    rs_res: ResourceDef,
    rs_id: String,
    pods: Pods,
    ready_after: Duration,
    held: Vec<String>,
    /// Pods not Ready yet, by ReplicaSet and pod name: since when they count toward becoming Ready.
    pending: HashMap<RsKey, HashMap<String, Instant>>,
}

impl Sync {
    /// Every ReplicaSet, and the owners named by stored pods (pods of a gone one are collected).
    fn all(&self, store: &Store) -> BTreeSet<RsKey> {
        let mut dirty: BTreeSet<RsKey> =
            store.list(&self.rs_id, None).map(|rs| key_of(rs)).collect();
        if let Pods::Stored(res) = &self.pods {
            for pod in store.list(&res.id(), None) {
                if let Some(owner) = controller_of(pod) {
                    dirty.insert((text(pod, "/metadata/namespace"), text(owner, "/name")));
                }
            }
        }
        dirty.extend(self.pending.keys().cloned());
        dirty
    }

    /// The ReplicaSets written since `rv`, those whose stored pods were, and those with a pod due to be Ready.
    fn touched(&self, store: &Store, rv: u64) -> BTreeSet<RsKey> {
        let pod_id = match &self.pods {
            Pods::Stored(res) => Some(res.id()),
            Pods::Counted(..) => None,
        };
        let mut dirty = BTreeSet::new();
        for change in store.changes_after(rv) {
            if change.key.0 == self.rs_id {
                dirty.insert((change.key.1.clone(), change.key.2.clone()));
            } else if pod_id.as_ref() == Some(&change.key.0)
                && let Some(owner) = controller_of(&change.object)
            {
                dirty.insert((change.key.1.clone(), text(owner, "/name")));
            }
        }
        // One reading of the clock for every pending pod: this runs on every write, over every ReplicaSet with
        // pods starting (a clock reading per pod was 2% of the rollouts bench's fake at 2,000 Rollouts).
        let now = Instant::now();
        let due = |since: &Instant| now.saturating_duration_since(*since) >= self.ready_after;
        for (rs, pods) in &self.pending {
            if pods.values().any(due) {
                dirty.insert(rs.clone());
            }
        }
        dirty
    }

    /// Brings each of `dirty` to its spec; true when something was written. A write that loses a race (an
    /// object deleted meanwhile) is simply not made.
    fn pass(&mut self, store: &mut Store, dirty: BTreeSet<RsKey>) -> bool {
        let mut changed = false;
        for key in dirty {
            let store_key = (self.rs_id.clone(), key.0.clone(), key.1.clone());
            match store.get(&store_key).cloned() {
                Some(rs) => changed |= self.sync(store, &key, &rs),
                None => {
                    self.pending.remove(&key);
                    changed |= self.pods.collect(store, &key, None);
                }
            }
        }
        changed
    }

    /// Brings one ReplicaSet's pods to its spec and its status to its pods.
    fn sync(&mut self, store: &mut Store, key: &RsKey, rs: &Value) -> bool {
        let number = |pointer: &str| rs.pointer(pointer).and_then(Value::as_i64);
        let spec = usize::try_from(number("/spec/replicas").unwrap_or(1)).unwrap_or(0);
        let hash = text(rs, "/metadata/labels/rollouts-pod-template-hash");
        let held = self
            .held
            .iter()
            .any(|h| *h == key.1 || (!hash.is_empty() && *h == hash));
        let mut changed = self.pods.collect(store, key, rs.pointer("/metadata/uid"));
        let mut owned = self.pods.owned(store, rs);
        // The real controller removes unready pods first, then the newest.
        owned.sort_by(|a, b| (a.ready, &b.created).cmp(&(b.ready, &a.created)));
        let surplus = owned.len().saturating_sub(spec);
        for pod in owned.drain(..surplus) {
            changed |= self.pods.delete(store, key, &pod.name);
        }
        let mut pending = self.pending.remove(key).unwrap_or_default();
        for _ in owned.len()..spec {
            if let Some(name) = self.pods.create(store, rs) {
                pending.insert(name.clone(), Instant::now());
                owned.push(Pod {
                    name,
                    ready: false,
                    created: String::new(),
                });
                changed |= matches!(self.pods, Pods::Stored(_));
            }
        }
        let mut ready = 0;
        let mut still = HashMap::new();
        for pod in owned {
            let becomes = if held {
                false
            } else if pod.ready {
                true
            } else {
                let since = pending.remove(&pod.name).unwrap_or_else(Instant::now);
                let due = since.elapsed() >= self.ready_after;
                if !due {
                    still.insert(pod.name.clone(), since);
                }
                due
            };
            ready += usize::from(becomes);
            if becomes != pod.ready {
                changed |= self.pods.set_ready(store, key, &pod.name, becomes);
            }
        }
        if !still.is_empty() {
            self.pending.insert(key.clone(), still);
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
            let store_key = (self.rs_id.clone(), key.0.clone(), key.1.clone());
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
}
