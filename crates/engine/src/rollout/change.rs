//! What each [`Write`] of a plan changes, said once as data: the object it creates, or the merge patch (RFC
//! 7386) it sends to a named object, or the object it deletes or evicts. The API edge (`k8s::rollout_writes`)
//! sends the [`Change`] as it is; [`Change::apply`] makes it to objects held in memory with the API server's
//! merge rules ([`crate::merge_patch::apply`]), for the in-memory cluster ([`super::memory`]) and for the
//! reconcile loop's plans after a plan's writes. So every annotation, label and field a write sets is set here
//! and nowhere else, and a rehearsal cannot drift from the daemon.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::hash::HASH_LABEL;
use super::{
    DESIRED_REPLICAS_ANNOTATION, EPHEMERAL_METADATA_ANNOTATION, MANAGED_BY_ANNOTATION,
    MetadataPatch, REVISION_ANNOTATION, SCALE_DOWN_DEADLINE_ANNOTATION, Write,
};
use crate::api::{AnalysisRun, Rollout};
use crate::merge_patch;

/// The kinds of object a Rollout's writes touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Rollout,
    ReplicaSet,
    Service,
    AnalysisRun,
    Pod,
}

/// An object a write creates, controlled by the Rollout.
#[derive(Debug, Clone, Copy)]
pub enum Created<'a> {
    ReplicaSet(&'a ReplicaSet),
    AnalysisRun(&'a AnalysisRun),
}

/// What one write does to the cluster.
#[derive(Debug, Clone)]
pub enum Change<'a> {
    /// Creates the object; one of that name the Rollout controls already is this write made before.
    Create(Created<'a>),
    /// A merge patch of the named object (of the Rollout itself for [`Kind::Rollout`], whose `name` is empty:
    /// the Rollout's own). `versioned`: sent
    /// with the resourceVersion the plan was made from, so a change made since is a conflict and the loop
    /// plans again; otherwise it applies to whatever is there (a run's `terminate`).
    Patch {
        kind: Kind,
        name: &'a str,
        patch: Value,
        versioned: bool,
    },
    /// Deletes the named object; gone already is done. `only_as_read`: the one read (its uid as a
    /// precondition), not one recreated under the same name since.
    Delete {
        kind: Kind,
        name: &'a str,
        only_as_read: bool,
    },
    /// Evicts the named pod through the Eviction API, so PodDisruptionBudgets hold.
    Evict { name: &'a str },
}

impl Change<'_> {
    /// The kind of the object this change makes, patches, deletes or evicts.
    pub fn kind(&self) -> Kind {
        match self {
            Change::Create(Created::ReplicaSet(_)) => Kind::ReplicaSet,
            Change::Create(Created::AnalysisRun(_)) => Kind::AnalysisRun,
            Change::Patch { kind, .. } | Change::Delete { kind, .. } => *kind,
            Change::Evict { .. } => Kind::Pod,
        }
    }
}

impl Write {
    /// What this write changes: the one statement of its meaning, for every cluster.
    pub fn change(&self) -> Change<'_> {
        let patch = |kind, name, patch| Change::Patch {
            kind,
            name,
            patch,
            versioned: true,
        };
        match self {
            Write::RolloutRevision { revision } => patch(
                Kind::Rollout,
                "",
                json!({"metadata": {"annotations": {REVISION_ANNOTATION: revision}}}),
            ),
            Write::CreateReplicaSet(rs) => Change::Create(Created::ReplicaSet(rs)),
            Write::ReviseReplicaSet {
                name,
                annotations,
                min_ready_seconds,
                affinity,
            } => {
                let mut spec = serde_json::Map::new();
                if let Some(seconds) = min_ready_seconds {
                    spec.insert("minReadySeconds".into(), json!(seconds));
                }
                if let Some(affinity) = affinity {
                    spec.insert("template".into(), json!({"spec": {"affinity": affinity}}));
                }
                let mut body = json!({"metadata": {"annotations": annotations}});
                if !spec.is_empty() {
                    body["spec"] = Value::Object(spec);
                }
                patch(Kind::ReplicaSet, name, body)
            }
            Write::ScaleReplicaSet {
                name,
                replicas,
                desired,
                clear_scale_down_deadline,
            } => {
                let mut annotations = json!({DESIRED_REPLICAS_ANNOTATION: desired.to_string()});
                if *clear_scale_down_deadline {
                    annotations[SCALE_DOWN_DEADLINE_ANNOTATION] = Value::Null;
                }
                patch(
                    Kind::ReplicaSet,
                    name,
                    json!({"metadata": {"annotations": annotations}, "spec": {"replicas": replicas}}),
                )
            }
            Write::SwitchService {
                name,
                hash,
                rollout,
            } => patch(
                Kind::Service,
                name,
                json!({
                    "metadata": {"annotations": {MANAGED_BY_ANNOTATION: rollout}},
                    "spec": {"selector": {HASH_LABEL: hash}},
                }),
            ),
            Write::CreateAnalysisRun(run) => Change::Create(Created::AnalysisRun(run)),
            Write::TerminateAnalysisRun { name } => Change::Patch {
                kind: Kind::AnalysisRun,
                name,
                patch: json!({"spec": {"terminate": true}}),
                versioned: false,
            },
            Write::DeleteReplicaSet { name } => Change::Delete {
                kind: Kind::ReplicaSet,
                name,
                only_as_read: true,
            },
            Write::SyncPodMetadata {
                name,
                patch: metadata,
                ephemeral,
            } => patch(Kind::ReplicaSet, name, pod_metadata(metadata, ephemeral)),
            // Unversioned: it sets or removes only the keys it names, on the pod as it is now; a pod gone since
            // has nothing left to change (Argo's updatePodMetadataWithRetry).
            Write::RelabelPod {
                name,
                patch: metadata,
            } => Change::Patch {
                kind: Kind::Pod,
                name,
                patch: json!({"metadata": labels_and_annotations(metadata)}),
                versioned: false,
            },
            Write::RolloutReplicas { replicas } => {
                patch(Kind::Rollout, "", json!({"spec": {"replicas": replicas}}))
            }
            Write::EvictPod { name } => Change::Evict { name },
            Write::DeleteAnalysisRun { name } => Change::Delete {
                kind: Kind::AnalysisRun,
                name,
                only_as_read: false,
            },
            // `null` removes the annotation, as Argo's removeScaleDownDelay does.
            Write::AnnotateReplicaSet { name, key, value } => patch(
                Kind::ReplicaSet,
                name,
                json!({"metadata": {"annotations": {key.as_str(): value}}}),
            ),
        }
    }
}

/// canaryMetadata/stableMetadata brought into a ReplicaSet's pod template, and the annotation that records
/// what was injected (`None` removes it).
fn pod_metadata(metadata: &MetadataPatch, ephemeral: &Option<String>) -> Value {
    json!({
        "metadata": {"annotations": {EPHEMERAL_METADATA_ANNOTATION: ephemeral}},
        "spec": {"template": {"metadata": labels_and_annotations(metadata)}},
    })
}

/// The labels and annotations part of an object's metadata that `metadata` sets (`null` removes a key).
fn labels_and_annotations(metadata: &MetadataPatch) -> Value {
    json!({"labels": metadata.labels, "annotations": metadata.annotations})
}

/// The objects a Rollout's writes act on, where they are held (a reconcile's snapshot, the in-memory cluster),
/// each kind lent only for a change of that kind: a holder that shares its objects with a cache copies only
/// those a change makes.
pub trait Objects {
    fn rollout(&mut self) -> &mut Rollout;
    fn replica_sets(&mut self) -> &mut Vec<ReplicaSet>;
    fn analysis_runs(&mut self) -> &mut Vec<AnalysisRun>;
    fn services(&mut self) -> &mut Vec<Service>;
    fn pods(&mut self) -> &mut Vec<Pod>;
}

impl Change<'_> {
    /// Makes this change to `objects` as the API server makes it, and no more: a create adds the object,
    /// created at `now`, unless one of its name is there; a patch is merged (a change of the Rollout's spec is
    /// a new generation); a delete or an eviction removes the object. What the built-in controllers do in
    /// answer (pods following a ReplicaSet's count, a run's controller starting it) is the in-memory cluster's.
    pub fn apply(&self, objects: &mut impl Objects, now: Timestamp) {
        match self {
            Change::Create(Created::ReplicaSet(rs)) => created(objects.replica_sets(), rs, now),
            Change::Create(Created::AnalysisRun(run)) => created(objects.analysis_runs(), run, now),
            Change::Patch {
                kind, name, patch, ..
            } => match kind {
                Kind::Rollout => {
                    let rollout = objects.rollout();
                    let spec_before = rollout.spec.clone();
                    merge_into(rollout, patch);
                    if rollout.spec != spec_before {
                        let generation = rollout.metadata.generation.unwrap_or(0);
                        rollout.metadata.generation = Some(generation.saturating_add(1));
                    }
                }
                Kind::ReplicaSet => patched(objects.replica_sets(), name, patch),
                Kind::Service => patched(objects.services(), name, patch),
                Kind::AnalysisRun => patched(objects.analysis_runs(), name, patch),
                Kind::Pod => patched(objects.pods(), name, patch),
            },
            Change::Delete { kind, name, .. } => match kind {
                Kind::ReplicaSet => removed(objects.replica_sets(), name),
                Kind::AnalysisRun => removed(objects.analysis_runs(), name),
                Kind::Service => removed(objects.services(), name),
                Kind::Pod => removed(objects.pods(), name),
                Kind::Rollout => {}
            },
            Change::Evict { name } => removed(objects.pods(), name),
        }
    }
}

fn created<T: Resource + Clone>(objects: &mut Vec<T>, object: &T, now: Timestamp) {
    if !objects.iter().any(|o| o.meta().name == object.meta().name) {
        let mut object = object.clone();
        object.meta_mut().creation_timestamp = Some(Time(now));
        objects.push(object);
    }
}

fn patched<T: Resource + Serialize + DeserializeOwned>(
    objects: &mut [T],
    name: &str,
    patch: &Value,
) {
    if let Some(object) = objects
        .iter_mut()
        .find(|o| o.meta().name.as_deref() == Some(name))
    {
        merge_into(object, patch);
    }
}

fn removed<T: Resource>(objects: &mut Vec<T>, name: &str) {
    objects.retain(|o| o.meta().name.as_deref() != Some(name));
}

/// `patch` applied to `object` with the API server's merge rules, through its JSON form. Objects of these
/// kinds always serialize, and a patch the planner makes keeps them well-formed; were either to fail, the
/// object would stay as it was, which the daemon-against-memory comparison test would show.
fn merge_into<T: Serialize + DeserializeOwned>(object: &mut T, patch: &Value) {
    let Ok(mut value) = serde_json::to_value(&*object) else {
        return;
    };
    merge_patch::apply(&mut value, patch);
    if let Ok(patched) = serde_json::from_value(value) {
        *object = patched;
    }
}
