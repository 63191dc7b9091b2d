//! What each [`Write`] of a plan changes, said once as data: the object it creates, or the merge patch (RFC
//! 7386) it sends to a named object, or the object it deletes or evicts. The API edge (`k8s::rollout_writes`)
//! sends the [`Change`] as it is; [`Change::apply`] makes it to objects held in memory with the API server's
//! merge rules ([`crate::merge_patch::apply`]), for the in-memory cluster ([`super::memory`]) and for the
//! reconcile loop's plans after a plan's writes. So every annotation, label and field a write sets is set here
//! and nowhere else, and a rehearsal cannot drift from the daemon.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
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
                    merge_parts(rollout, patch, |r, spec| merge_into(&mut r.spec, spec));
                    if rollout.spec != spec_before {
                        let generation = rollout.metadata.generation.unwrap_or(0);
                        rollout.metadata.generation = Some(generation.saturating_add(1));
                    }
                }
                Kind::ReplicaSet => {
                    patched(objects.replica_sets(), name, patch, |rs, spec| {
                        match (rs.spec.as_mut(), replicas_only(spec)) {
                            (Some(rs_spec), Some(replicas)) => {
                                rs_spec.replicas = Some(replicas);
                                true
                            }
                            _ => merge_into(&mut rs.spec, spec),
                        }
                    })
                }
                Kind::Service => patched(objects.services(), name, patch, |service, spec| {
                    merge_into(&mut service.spec, spec)
                }),
                Kind::AnalysisRun => patched(objects.analysis_runs(), name, patch, |run, spec| {
                    merge_into(&mut run.spec, spec)
                }),
                Kind::Pod => patched(objects.pods(), name, patch, |pod, spec| {
                    merge_into(&mut pod.spec, spec)
                }),
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

/// `patch` applied to the object named `name` among `objects`, if there is one ([`merge_parts`], its `spec`
/// part by `spec`).
fn patched<T: Resource + Serialize + DeserializeOwned>(
    objects: &mut [T],
    name: &str,
    patch: &Value,
    spec: impl FnOnce(&mut T, &Value) -> bool,
) {
    if let Some(object) = objects
        .iter_mut()
        .find(|o| o.meta().name.as_deref() == Some(name))
    {
        merge_parts(object, patch, spec);
    }
}

/// `patch` applied to `object` as [`merge_into`] applies it, part by part: its `metadata` merged into the
/// object's metadata alone, its `spec` by `spec` (which merges it into the object's spec alone, or sets what it
/// names directly, and says whether it did), since a merge patch merges each field on its own. So a count or an
/// annotation does not take the whole object (a ReplicaSet's pod template) through JSON and back: that was a
/// third of the snapshot made after a plan's writes, 1.5% of the daemon's CPU at 10,000 Rollouts (perf). As
/// with the whole merge, a part that would leave its field ill-formed changes nothing, the other part included.
/// A patch with another field, or whose parts are not objects, is merged whole.
fn merge_parts<T: Resource + Serialize + DeserializeOwned>(
    object: &mut T,
    patch: &Value,
    spec: impl FnOnce(&mut T, &Value) -> bool,
) {
    let Some(fields) = patch.as_object() else {
        merge_into(object, patch);
        return;
    };
    let by_part = fields
        .iter()
        .all(|(key, part)| matches!(key.as_str(), "metadata" | "spec") && part.is_object());
    if !by_part {
        merge_into(object, patch);
        return;
    }
    let metadata = fields.get("metadata");
    // Metadata that is not set in place is merged first, apart, so that an ill-formed one changes nothing.
    let merged_meta = match metadata.filter(|m| !in_place(m)) {
        Some(m) => match merged(object.meta(), m) {
            Some(meta) => Some(meta),
            None => return,
        },
        None => None,
    };
    if let Some(part) = fields.get("spec")
        && !spec(object, part)
    {
        return;
    }
    match (merged_meta, metadata) {
        (Some(meta), _) => *object.meta_mut() = meta,
        (None, Some(m)) => set_in_place(object.meta_mut(), m),
        (None, None) => {}
    }
}

/// Whether a metadata patch names only labels and annotations, each set to a string or removed (`null`), as
/// the planner's patches of ReplicaSets do: [`set_in_place`] applies it.
fn in_place(patch: &Value) -> bool {
    let strings = |part: &Value| {
        part.as_object()
            .is_some_and(|m| m.values().all(|v| v.is_string() || v.is_null()))
    };
    patch.as_object().is_some_and(|fields| {
        fields
            .iter()
            .all(|(key, part)| matches!(key.as_str(), "labels" | "annotations") && strings(part))
    })
}

/// A metadata patch [`in_place`] says is one, applied to `meta`'s maps directly, as [`merge_into`] would.
fn set_in_place(meta: &mut ObjectMeta, patch: &Value) {
    let maps = [
        (&mut meta.labels, patch.get("labels")),
        (&mut meta.annotations, patch.get("annotations")),
    ];
    for (map, part) in maps {
        // A map the patch names is there afterwards, empty or not, as a merge into an absent field leaves it.
        let Some(part) = part.and_then(Value::as_object) else {
            continue;
        };
        let map = map.get_or_insert_default();
        for (key, value) in part {
            match value.as_str() {
                Some(text) => map.insert(key.clone(), text.to_string()),
                None => map.remove(key),
            };
        }
    }
}

/// The count a spec patch sets when a count is all it sets (`{"replicas": 3}`).
fn replicas_only(spec: &Value) -> Option<i32> {
    let fields = spec.as_object()?;
    let replicas = fields.get("replicas").filter(|_| fields.len() == 1)?;
    replicas.as_i64()?.try_into().ok()
}

fn removed<T: Resource>(objects: &mut Vec<T>, name: &str) {
    objects.retain(|o| o.meta().name.as_deref() != Some(name));
}

/// `patch` applied to `object` with the API server's merge rules, through its JSON form; whether it was.
/// Objects of these kinds always serialize, and a patch the planner makes keeps them well-formed; were either
/// to fail, the object would stay as it was, which the daemon-against-memory comparison test would show.
fn merge_into<T: Serialize + DeserializeOwned>(object: &mut T, patch: &Value) -> bool {
    match merged(object, patch) {
        Some(patched) => {
            *object = patched;
            true
        }
        None => false,
    }
}

/// `object` with `patch` applied through its JSON form; `None` when the result is not one of its kind.
fn merged<T: Serialize + DeserializeOwned>(object: &T, patch: &Value) -> Option<T> {
    let mut value = serde_json::to_value(object).ok()?;
    merge_patch::apply(&mut value, patch);
    serde_json::from_value(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::ephemeral::MetadataPatch;
    use crate::rollout::memory::MemoryCluster;

    fn object<T: DeserializeOwned>(value: Value) -> T {
        serde_json::from_value(value).expect("a well-formed object")
    }

    fn json_of<T: Serialize>(object: &T) -> Value {
        serde_json::to_value(object).expect("serializes")
    }

    /// What merging `patch` into the whole of `object` through its JSON form leaves: the object unchanged
    /// when the result is not one of its kind.
    fn whole<T: Serialize + DeserializeOwned>(object: &T, patch: &Value) -> Value {
        let mut value = json_of(object);
        merge_patch::apply(&mut value, patch);
        serde_json::from_value::<T>(value).map_or_else(|_| json_of(object), |t| json_of(&t))
    }

    fn patch_of(write: &Write) -> Value {
        match write.change() {
            Change::Patch { patch, .. } => patch,
            other => panic!("not a patch: {other:?}"),
        }
    }

    /// A ReplicaSet as the cluster holds one a Rollout controls (annotations, a pod template, a count), or
    /// without a spec.
    fn replica_set(with_spec: bool) -> ReplicaSet {
        let mut rs = json!({
            "metadata": {"name": "web-7d9", "resourceVersion": "41", "labels": {HASH_LABEL: "7d9"},
                "annotations": {DESIRED_REPLICAS_ANNOTATION: "5", SCALE_DOWN_DEADLINE_ANNOTATION: "2026-01-01T00:00:30Z"}},
        });
        if with_spec {
            rs["spec"] = json!({
                "replicas": 5,
                "selector": {"matchLabels": {"app": "web", HASH_LABEL: "7d9"}},
                "template": {
                    "metadata": {"labels": {"app": "web", HASH_LABEL: "7d9"}, "annotations": {"a": "1"}},
                    "spec": {"containers": [{"name": "web", "image": "web:2", "ports": [{"containerPort": 80}]}]},
                },
            });
        }
        object(rs)
    }

    #[test]
    fn a_replica_set_patched_by_part_is_what_the_whole_merge_leaves() {
        let name = || "web-7d9".to_string();
        let scale = |clear| Write::ScaleReplicaSet {
            name: name(),
            replicas: 2,
            desired: 10,
            clear_scale_down_deadline: clear,
        };
        let relabel = MetadataPatch {
            labels: [("role".to_string(), Some("canary".to_string()))].into(),
            annotations: [("a".to_string(), None)].into(),
        };
        let writes = [
            scale(false),
            scale(true),
            Write::AnnotateReplicaSet {
                name: name(),
                key: SCALE_DOWN_DEADLINE_ANNOTATION.into(),
                value: None,
            },
            Write::ReviseReplicaSet {
                name: name(),
                annotations: [(REVISION_ANNOTATION.to_string(), "3".to_string())].into(),
                min_ready_seconds: Some(10),
                affinity: Some(json!({"podAntiAffinity": {}})),
            },
            Write::SyncPodMetadata {
                name: name(),
                patch: relabel,
                ephemeral: None,
            },
        ];
        let mut patches: Vec<Value> = writes.iter().map(patch_of).collect();
        // Patches no plan makes, each taking another way: a count removed, out of range or not a number, with
        // another spec field, labels and annotations set and removed or not strings, another metadata field, a
        // part that is not an object, another field, not an object at all; and a part set while the other one
        // leaves its field ill-formed, which changes nothing at all.
        patches.extend([
            json!({"metadata": {"annotations": {"new": "v"}}, "spec": {"replicas": 3, "selector": null}}),
            json!({"metadata": {"name": "other", "labels": {"x": 1}}, "spec": {"replicas": 3}}),
            json!({"metadata": {"labels": {}, "annotations": {"new": "v", DESIRED_REPLICAS_ANNOTATION: null}}}),
            json!({"metadata": {"annotations": {DESIRED_REPLICAS_ANNOTATION: 1}}}),
            json!({"metadata": {"annotations": null}}),
            json!({"metadata": {"name": "other", "annotations": {"new": "v"}}}),
            json!({"spec": {"replicas": null}}),
            json!({"spec": {"replicas": 3_000_000_000_i64}}),
            json!({"spec": {"replicas": "3"}}),
            json!({"spec": {"replicas": 3, "selector": null}}),
            json!({"metadata": null, "spec": {"replicas": 3}}),
            json!({"status": {"replicas": 3}}),
            json!("not an object"),
        ]);
        for with_spec in [true, false] {
            for patch in &patches {
                let rs = replica_set(with_spec);
                let mut held =
                    MemoryCluster::new(object(json!({"metadata": {"name": "web"}, "spec": {}})));
                held.replica_sets.push(rs.clone());
                let change = Change::Patch {
                    kind: Kind::ReplicaSet,
                    name: "web-7d9",
                    patch: patch.clone(),
                    versioned: true,
                };
                change.apply(&mut held, Timestamp::UNIX_EPOCH);
                assert_eq!(
                    json_of(&held.replica_sets[0]),
                    whole(&rs, patch),
                    "{patch} (with a spec: {with_spec})"
                );
            }
        }
    }

    #[test]
    fn a_service_a_rollout_and_a_pod_patched_by_part_are_what_the_whole_merge_leaves() {
        let service: Service = object(json!({
            "metadata": {"name": "web-canary", "annotations": {"keep": "me"}},
            "spec": {"selector": {"app": "web", HASH_LABEL: "old"}, "ports": [{"port": 80}]},
        }));
        let pod: Pod = object(json!({
            "metadata": {"name": "web-7d9-x", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "web:2"}]},
        }));
        let rollout: Rollout = object(json!({
            "metadata": {"name": "web", "annotations": {"keep": "me"}},
            "spec": {"replicas": 5, "template": {"metadata": {"labels": {"app": "web"}}}},
        }));
        let mut held = MemoryCluster::new(rollout);
        let rollout = held.rollout.clone();
        held.services.push(service.clone());
        held.pods.push(pod.clone());
        let switch = Write::SwitchService {
            name: "web-canary".into(),
            hash: "7d9".into(),
            rollout: "web".into(),
        };
        switch.change().apply(&mut held, Timestamp::UNIX_EPOCH);
        assert_eq!(
            json_of(&held.services[0]),
            whole(&service, &patch_of(&switch))
        );
        let relabel = Write::RelabelPod {
            name: "web-7d9-x".into(),
            patch: MetadataPatch {
                labels: [
                    ("app".to_string(), None),
                    ("role".to_string(), Some("canary".to_string())),
                ]
                .into(),
                annotations: Default::default(),
            },
        };
        relabel.change().apply(&mut held, Timestamp::UNIX_EPOCH);
        assert_eq!(json_of(&held.pods[0]), whole(&pod, &patch_of(&relabel)));

        let revision = Write::RolloutRevision {
            revision: "3".into(),
        };
        revision.change().apply(&mut held, Timestamp::UNIX_EPOCH);
        let revised = whole(&rollout, &patch_of(&revision));
        assert_eq!(json_of(&held.rollout), revised);
        // A change of the spec is a new generation.
        let replicas = Write::RolloutReplicas { replicas: 1 };
        replicas.change().apply(&mut held, Timestamp::UNIX_EPOCH);
        let mut expected = whole(&object::<Rollout>(revised), &patch_of(&replicas));
        expected["metadata"]["generation"] = json!(2);
        assert_eq!(json_of(&held.rollout), expected);
    }
}
