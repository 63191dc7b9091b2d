//! What each of kubectl-argo-rollouts' actions on a Rollout writes (`pkg/kubectl-argo-rollouts/cmd/`), so a
//! person can steer a Rollout from `canaryd` and Argo Rollouts and canaryd both honour it: the fixed patches of
//! `abort`, `retry`, `pause`, `resume` and `restart`, the patches `promote` picks from the Rollout it read, the
//! ReplicaSet `undo` goes back to and its JSON patch, and the container edit of `set image`. Pure: the
//! requests themselves are made by `canaryd::k8s::rollout_actions`.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::REVISION_ANNOTATION;
use super::hash::HASH_LABEL;
use super::steps;
use crate::api::{Controlled, Rollout};

/// An action that writes one fixed merge patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toggle {
    /// `abortPatch` (abort.go).
    Abort,
    /// `retryRolloutPatch` (retry.go).
    Retry,
    /// pause.go's `spec.paused: true`.
    Pause,
    /// promote.go's `unpausePatch`: undoes `pause` alone, leaving a step's pause to `promote`.
    Resume,
}

impl Toggle {
    /// The merge patch.
    pub fn patch(self) -> Value {
        match self {
            Toggle::Abort => json!({"status": {"abort": true}}),
            Toggle::Retry => json!({"status": {"abort": false}}),
            Toggle::Pause => json!({"spec": {"paused": true}}),
            Toggle::Resume => json!({"spec": {"paused": false}}),
        }
    }

    /// Whether the plugin sends it to the status subresource first (AbortRollout, RetryRollout), falling back
    /// to the object when the CRD has none; else it goes to the object alone.
    pub fn on_status(self) -> bool {
        matches!(self, Toggle::Abort | Toggle::Retry)
    }
}

/// restart.go's `restartPatch`: `spec.restartAt` at `at`, to the second as Go's `time.RFC3339` writes it.
pub fn restart_patch(at: Timestamp) -> Value {
    json!({"spec": {"restartAt": at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}})
}

/// The merge patches `promote` sends (promote.go `getPatches`): `status` to the status subresource first,
/// then `spec` to the object; when the status subresource does not exist, `unified` goes to the object in
/// place of `spec`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromotePatches {
    pub spec: Option<Value>,
    pub status: Option<Value>,
    pub unified: Value,
}

/// Why `promote` refuses a Rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromoteRefusal {
    /// Neither `strategy.canary` nor `strategy.blueGreen`: nothing canaryd progresses.
    NotCanary,
    /// The stable ReplicaSet is the current revision and nothing pauses the Rollout: the plugin would send
    /// nothing (`--full`) or a patch that changes nothing.
    AlreadyPromoted,
}

/// The patches `promote` (`full`: `promote --full`) makes for `rollout`, by promote.go's `getPatches`.
pub fn promote(rollout: &Rollout, full: bool) -> Result<PromotePatches, PromoteRefusal> {
    if rollout.spec.canary().is_none() && rollout.spec.blue_green().is_none() {
        return Err(PromoteRefusal::NotCanary);
    }
    let status = rollout.status.clone().unwrap_or_default();
    let paused = rollout.spec.paused == Some(true);
    // rolloututil.IsFullyPromoted: the stable ReplicaSet is the current pod template's.
    let fully_promoted = status.current_pod_hash == status.stable_rs;
    if fully_promoted && !paused && status.pause_conditions.is_empty() {
        return Err(PromoteRefusal::AlreadyPromoted);
    }
    let unpause = paused.then(|| json!({"spec": {"paused": false}}));
    if full {
        return Ok(PromotePatches {
            spec: unpause,
            status: (!fully_promoted).then(|| json!({"status": {"promoteFull": true}})),
            unified: json!({"spec": {"paused": false}, "status": {"promoteFull": true}}),
        });
    }
    // GetCurrentCanaryStep's index, moved one step on and kept within the steps.
    // A blue-green Rollout has no steps: promote ends its pause (getPatches, which moves no step for it).
    let steps = (rollout.spec.canary())
        .and_then(|c| c.steps.as_deref())
        .unwrap_or_default();
    let next_step = steps::current(steps, &status)
        .1
        .map(|index| (index + 1).min(steps.len()));
    let inconclusive = status
        .canary
        .current_step_analysis_run_status
        .as_ref()
        .is_some_and(|run| run.status == "Inconclusive");
    let mut patches = PromotePatches {
        spec: unpause,
        status: None,
        unified: json!({"spec": {"paused": false}, "status": {"pauseConditions": null}}),
    };
    if inconclusive && !status.pause_conditions.is_empty() && status.controller_pause {
        patches.status = next_step.map(|i| {
            json!({"status": {"pauseConditions": null, "controllerPause": false, "currentStepIndex": i}})
        });
    } else if !status.pause_conditions.is_empty() {
        patches.status = Some(json!({"status": {"pauseConditions": null}}));
    } else if let Some(i) = next_step {
        patches.status = Some(json!({"status": {"pauseConditions": null, "currentStepIndex": i}}));
        patches.unified = json!({"spec": {"paused": false}, "status": {"pauseConditions": null, "currentStepIndex": i}});
    }
    Ok(patches)
}

/// One ReplicaSet as `undo` reads it: its metadata and its raw pod template, as the API server returned it.
#[derive(Debug, Clone)]
pub struct RevisionCandidate {
    pub metadata: ObjectMeta,
    pub template: Value,
}

/// Why `undo` finds no ReplicaSet to go back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoRefusal {
    /// `--to-revision N` names no ReplicaSet of the Rollout.
    NoSuchRevision(i64),
    /// Only one revision exists.
    NoPreviousRevision,
}

/// The ReplicaSet `undo` goes back to (undo.go `rolloutRevision`): among those `rollout_uid` controls, the one
/// whose revision annotation is `to_revision`, or with 0 the one of the second highest revision. A ReplicaSet
/// without the annotation is revision 0; one whose annotation is not a number is skipped.
pub fn undo_target<'a>(
    candidates: &'a [RevisionCandidate],
    rollout_uid: &str,
    to_revision: i64,
) -> Result<&'a RevisionCandidate, UndoRefusal> {
    let mut latest: Option<(i64, &RevisionCandidate)> = None;
    let mut previous: Option<(i64, &RevisionCandidate)> = None;
    for candidate in candidates
        .iter()
        .filter(|c| c.metadata.controlled_by(rollout_uid))
    {
        let annotation = candidate
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_ANNOTATION));
        let Ok(revision) = annotation.map_or(Ok(0), |v| v.parse::<i64>()) else {
            continue;
        };
        if to_revision != 0 {
            if revision == to_revision {
                return Ok(candidate);
            }
        } else if latest.is_none_or(|(v, _)| v < revision) {
            previous = latest;
            latest = Some((revision, candidate));
        } else if previous.is_none_or(|(v, _)| v < revision) {
            previous = Some((revision, candidate));
        }
    }
    if to_revision != 0 {
        return Err(UndoRefusal::NoSuchRevision(to_revision));
    }
    previous
        .map(|(_, c)| c)
        .ok_or(UndoRefusal::NoPreviousRevision)
}

/// Whether the Rollout's template already is `candidate`'s, the pod-template-hash label aside (undo.go
/// `equalIgnoreHash`, apimachinery's `Semantic.DeepDerivative`: a field the Rollout leaves unset or empty
/// matches anything).
pub fn template_matches(rollout_template: &Value, candidate: &RevisionCandidate) -> bool {
    derivative(
        &without_hash_label(rollout_template.clone()),
        &without_hash_label(candidate.template.clone()),
    )
}

/// undo.go `getRolloutPatch`: the JSON patch that puts `candidate`'s template, without its
/// pod-template-hash label, in the Rollout's `spec.template`.
pub fn undo_patch(candidate: &RevisionCandidate) -> Value {
    json!([{"op": "replace", "path": "/spec/template", "value": without_hash_label(candidate.template.clone())}])
}

/// `template` without the `rollouts-pod-template-hash` label; a label map left empty is dropped, as Go's
/// `omitempty` drops it.
fn without_hash_label(mut template: Value) -> Value {
    if let Some(metadata) = template.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut)
    {
        labels.remove(HASH_LABEL);
        if labels.is_empty() {
            metadata.remove("labels");
        }
    }
    template
}

/// apimachinery's `DeepDerivative` over JSON: whether `b` has everything `a` sets (null, "", [] and {} in `a`
/// match anything; a list matches one at least as long whose first elements match).
fn derivative(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, _) => true,
        (Value::String(x), _) if x.is_empty() => true,
        (Value::Array(x), _) if x.is_empty() => true,
        (Value::Object(x), _) if x.is_empty() => true,
        (Value::Array(x), Value::Array(y)) => {
            x.len() <= y.len() && x.iter().zip(y).all(|(p, q)| derivative(p, q))
        }
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .all(|(k, v)| y.get(k).is_some_and(|w| derivative(v, w))),
        _ => a == b,
    }
}

/// set_image.go `newRolloutSetImage`: sets `image` on every init, regular and ephemeral container of the pod
/// template in `object` named `container` (every one for `*`). False when none is named so.
pub fn set_image(object: &mut Value, container: &str, image: &str) -> bool {
    let mut found = false;
    let Some(pod) = object.pointer_mut("/spec/template/spec") else {
        return false;
    };
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let Some(containers) = pod.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            if container == "*" || c.get("name").and_then(Value::as_str) == Some(container) {
                c.insert("image".into(), Value::String(image.into()));
                found = true;
            }
        }
    }
    found
}
