//! The states kubectl-argo-rollouts works out for display from a Rollout's ReplicaSets, pods and AnalysisRuns
//! (`info/replicaset_info.go`, `info/pod_info.go`, `info/analysisrun_info.go`), and the icons it shows them with
//! (`info/info.go`). Display only: no rule of the planner is decided here.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod};

use super::{
    AnalysisRunView, ImageView, MeasurementView, MetricView, Owned, PodView, ReplicaSetView,
    analysis_icon, revision_of,
};
use crate::api::meta::Controlled;
use crate::api::{AnalysisRun, Rollout};
use crate::engine::rollout::{Rs, SCALE_DOWN_DEADLINE_ANNOTATION};

pub const ICON_WAITING: &str = "◷";
pub const ICON_PROGRESSING: &str = "◌";
pub const ICON_WARNING: &str = "⚠";
pub const ICON_UNKNOWN: &str = "?";
pub const ICON_OK: &str = "✔";
pub const ICON_BAD: &str = "✖";
pub const ICON_PAUSED: &str = "॥";
pub const ICON_NEUTRAL: &str = "•";

/// The metadata key a job metric's measurement names its Job with.
const JOB_NAME_KEY: &str = "job-name";

/// The ReplicaSets `uid` controls, newest revision first then by name, each with its pods (Argo's
/// `GetReplicaSetInfo` and `addPodInfos`); stable and canary are the engine's `status.stableRS` and
/// `status.currentPodHash`.
pub(super) fn replica_sets(
    rollout: &Rollout,
    uid: &str,
    owned: &Owned,
) -> Vec<(Rs, ReplicaSetView)> {
    let status = rollout.status.clone().unwrap_or_default();
    let mut views: Vec<(Rs, ReplicaSetView)> = owned
        .replica_sets
        .iter()
        .filter(|rs| rs.metadata.controlled_by(uid))
        .map(|rs| {
            let read = Rs::read(rs);
            let health = replica_set_health(rs, &read);
            let [stable, canary, active, preview] = roles(rollout, &status, &read.hash);
            let rs_uid = rs.metadata.uid.clone().unwrap_or_default();
            let mut pods: Vec<PodView> = owned
                .pods
                .iter()
                .filter(|p| p.metadata.controlled_by(&rs_uid))
                .map(pod_view)
                .collect();
            pods.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
            let view = ReplicaSetView {
                name: read.name.clone(),
                created_at: read.created,
                icon: replica_set_icon(health),
                status: health.to_string(),
                stable,
                canary,
                active,
                preview,
                replicas: read.pods.current,
                available: read.pods.available,
                scale_down_deadline: rs
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(SCALE_DOWN_DEADLINE_ANNOTATION))
                    .cloned(),
                images: rs
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .and_then(|t| t.spec.as_ref())
                    .map(|s| {
                        s.containers
                            .iter()
                            .filter_map(|c| c.image.clone())
                            .collect()
                    })
                    .unwrap_or_default(),
                pods,
            };
            (read, view)
        })
        .collect();
    views.sort_by(|(a, _), (b, _)| b.revision.cmp(&a.revision).then(a.name.cmp(&b.name)));
    views
}

/// Argo's `getReplicaSetHealth`: Progressing until its controller has seen its spec and its pods are
/// available, ReplicaFailure when the controller says so, ScaledDown at zero, else Healthy.
/// Whether the ReplicaSet of pod-template hash `hash` is stable, canary, active and preview (Argo's
/// `NewReplicaSetInfo`): a canary Rollout's is `canary` when it runs the current pod template and is not stable;
/// a blue-green's is `active` when the active Service selects it, else `preview` when the preview Service does.
fn roles(rollout: &Rollout, status: &crate::api::rollout::RolloutStatus, hash: &str) -> [bool; 4] {
    let is = |selected: &str| !hash.is_empty() && hash == selected;
    let stable = is(&status.stable_rs);
    let canary = rollout.spec.canary().is_some() && !stable && is(&status.current_pod_hash);
    let selectors = match rollout.spec.blue_green() {
        Some(_) => status.blue_green.clone().unwrap_or_default(),
        None => Default::default(),
    };
    let active = is(&selectors.active_selector);
    let preview = !active && is(&selectors.preview_selector);
    [stable, canary, active, preview]
}

pub fn replica_set_health(rs: &ReplicaSet, read: &Rs) -> &'static str {
    if !read.observed {
        return "Progressing";
    }
    let failed = rs
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "ReplicaFailure" && c.status == "True");
    let spec = rs.spec.as_ref().and_then(|s| s.replicas);
    if failed {
        "ReplicaFailure"
    } else if spec.is_some_and(|want| read.pods.available < want) {
        "Progressing"
    } else if spec == Some(0) {
        "ScaledDown"
    } else {
        "Healthy"
    }
}

fn replica_set_icon(health: &str) -> &'static str {
    match health {
        "Progressing" => ICON_PROGRESSING,
        "Healthy" => ICON_OK,
        "ReplicaFailure" => ICON_BAD,
        "ScaledDown" => ICON_NEUTRAL,
        _ => " ",
    }
}

/// The images of the ReplicaSets that have pods, each once with the tags of every ReplicaSet running it,
/// sorted by image (Argo's `Images` and `mergeImageAndTags`).
pub(super) fn images(replica_sets: &[(Rs, ReplicaSetView)]) -> Vec<ImageView> {
    let mut images: Vec<ImageView> = Vec::new();
    for (_, rs) in replica_sets.iter().filter(|(_, rs)| rs.replicas > 0) {
        let tags = rs.tags().into_iter().map(str::to_string);
        for image in &rs.images {
            match images.iter_mut().find(|i| &i.image == image) {
                Some(known) => known.tags.extend(tags.clone()),
                None => images.push(ImageView {
                    image: image.clone(),
                    tags: tags.clone().collect(),
                }),
            }
        }
    }
    for image in &mut images {
        image.tags.sort();
        image.tags.dedup();
    }
    images.sort_by(|a, b| a.image.cmp(&b.image));
    images
}

fn pod_view(pod: &Pod) -> PodView {
    let (status, ready, restarts) = pod_state(pod);
    PodView {
        name: pod.metadata.name.clone().unwrap_or_default(),
        created_at: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
        icon: pod_icon(&status),
        status,
        ready,
        restarts,
    }
}

/// kubectl's STATUS column for a pod, its ready containers (`1/2`) and its restarts (Argo's `newPodInfo`,
/// kubectl's `printPod`): an init container that failed or waits names the state, then the last container
/// that waits or terminated, then the pod's phase or reason; Terminating once it is being deleted.
pub fn pod_state(pod: &Pod) -> (String, String, i32) {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let total = spec.map_or(0, |s| s.containers.len());
    let mut reason = status
        .and_then(|s| s.reason.clone().or_else(|| s.phase.clone()))
        .unwrap_or_default();
    let (init_reason, init_restarts) = init_state(pod);
    let mut restarts = init_restarts;
    let mut ready = 0;
    match init_reason {
        Some(init) => reason = init,
        None => {
            restarts = 0;
            let mut running = false;
            let containers = status.and_then(|s| s.container_statuses.as_ref());
            for c in containers.into_iter().flatten().rev() {
                restarts += c.restart_count;
                let state = c.state.as_ref();
                let waiting = state.and_then(|s| s.waiting.as_ref());
                let terminated = state.and_then(|s| s.terminated.as_ref());
                if let Some(why) = waiting
                    .and_then(|w| w.reason.clone())
                    .filter(|r| !r.is_empty())
                {
                    reason = why;
                } else if let Some(t) = terminated {
                    reason = terminated_reason(t);
                } else if c.ready && state.is_some_and(|s| s.running.is_some()) {
                    running = true;
                    ready += 1;
                }
            }
            if reason == "Completed" && running {
                reason = "Running".to_string();
            }
        }
    }
    if pod.metadata.deletion_timestamp.is_some() {
        let unreachable = status.and_then(|s| s.reason.as_deref()) == Some("NodeLost");
        reason = if unreachable {
            "Unknown"
        } else {
            "Terminating"
        }
        .to_string();
    }
    (reason, format!("{ready}/{total}"), restarts)
}

/// The state an unfinished init container gives the pod (`Init:1/2`, `Init:CrashLoopBackOff`), with the
/// restarts counted up to it; `None` when every init container is done.
fn init_state(pod: &Pod) -> (Option<String>, i32) {
    let spec = pod.spec.as_ref();
    let inits = spec.and_then(|s| s.init_containers.as_ref());
    let count = inits.map_or(0, Vec::len);
    let sidecar = |name: &str| {
        inits
            .into_iter()
            .flatten()
            .any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
    };
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.init_container_statuses.as_ref());
    let mut restarts = 0;
    for (i, c) in statuses.into_iter().flatten().enumerate() {
        restarts += c.restart_count;
        let state = c.state.as_ref();
        let terminated = state.and_then(|s| s.terminated.as_ref());
        let waiting = state.and_then(|s| s.waiting.as_ref());
        if let Some(t) = terminated {
            if t.exit_code == 0 {
                continue;
            }
            return (Some(format!("Init:{}", terminated_reason(t))), restarts);
        }
        if sidecar(&c.name) && c.started == Some(true) && c.ready {
            continue;
        }
        let why = waiting
            .and_then(|w| w.reason.clone())
            .filter(|r| !r.is_empty() && r != "PodInitializing");
        let shown = why.unwrap_or_else(|| format!("{i}/{count}"));
        return (Some(format!("Init:{shown}")), restarts);
    }
    (None, restarts)
}

/// Why a container terminated: its reason, else the signal or the exit code that ended it.
fn terminated_reason(t: &ContainerStateTerminated) -> String {
    match t.reason.clone().filter(|r| !r.is_empty()) {
        Some(why) => why,
        None => match t.signal.filter(|s| *s != 0) {
            Some(signal) => format!("Signal:{signal}"),
            None => format!("ExitCode:{}", t.exit_code),
        },
    }
}

/// Argo's `podIcon`.
fn pod_icon(status: &str) -> &'static str {
    if status.starts_with("Init:") {
        return ICON_PROGRESSING;
    }
    if status.starts_with("Signal:") || status.starts_with("ExitCode:") {
        return ICON_BAD;
    }
    if status.ends_with("Error") || status.starts_with("Err") {
        return ICON_WARNING;
    }
    match status {
        "Pending" | "Terminating" | "ContainerCreating" => ICON_PROGRESSING,
        "Running" | "Completed" => ICON_OK,
        "Failed" | "InvalidImageName" | "CrashLoopBackOff" => ICON_BAD,
        "ImagePullBackOff" | "RegistryUnavailable" => ICON_WARNING,
        "Unknown" => ICON_UNKNOWN,
        _ => " ",
    }
}

/// One AnalysisRun with its revision (Argo's `getAnalysisRunInfo`): its phase, the counts summed over its
/// metrics, and each metric's measurements.
pub(super) fn analysis_run(run: &AnalysisRun) -> (i64, AnalysisRunView) {
    let status = run.status.as_ref();
    let results = status
        .and_then(|s| s.metric_results.as_deref())
        .unwrap_or_default();
    let sum =
        |count: fn(&crate::api::analysis::MetricResult) -> i32| results.iter().map(count).sum();
    let metrics = results
        .iter()
        .map(|result| MetricView {
            name: result.name.clone(),
            phase: result.phase.as_str().to_string(),
            icon: analysis_icon(Some(result.phase)),
            measurements: result
                .measurements
                .iter()
                .map(|m| MeasurementView {
                    phase: m.phase.as_str().to_string(),
                    icon: analysis_icon(Some(m.phase)),
                    value: m.value.clone(),
                    started_at: m.started_at.as_ref().map(|t| t.0),
                    job: m
                        .metadata
                        .as_ref()
                        .and_then(|md| md.get(JOB_NAME_KEY))
                        .cloned(),
                })
                .collect(),
        })
        .collect();
    let phase = status.and_then(|s| s.phase);
    let view = AnalysisRunView {
        name: run.metadata.name.clone().unwrap_or_default(),
        created_at: run.metadata.creation_timestamp.as_ref().map(|t| t.0),
        status: phase.map(|p| p.as_str().to_string()).unwrap_or_default(),
        icon: analysis_icon(phase),
        successful: sum(|r| r.successful),
        failed: sum(|r| r.failed),
        inconclusive: sum(|r| r.inconclusive),
        error: sum(|r| r.error),
        metrics,
    };
    (revision_of(&run.metadata), view)
}
