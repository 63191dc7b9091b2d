//! The Rollout planner: given a Rollout, the ReplicaSets and AnalysisRuns it owns, its Services and `now`,
//! it returns one reconcile's [`Plan`] (the writes to make in order, the new status, the Events and when to
//! look again) following Argo Rollouts' canary and blue-green controllers rule for rule, so status, conditions, Events,
//! names, labels and annotations are Argo's. Pure and synchronous: the daemon, `rehearse` and `demo` run the
//! same planner in the same reconcile loop ([`reconcile_loop`]); only the [`reconcile_loop::Cluster`] under them differs (the API
//! server, or [`memory`]'s [`memory::MemoryCluster`]).
//!
//! Traffic routing is a seam: the planner decides the weight ([`Plan::route`]) and `status.canary.weights`;
//! the routers (`crate::routers`) apply it.

pub mod actions;
pub mod analysis;
mod anti_affinity;
pub mod basic_canary;
mod bluegreen;
pub mod change;
pub mod conditions;
mod context;
pub mod duration;
mod ephemeral;
pub mod hash;
mod history;
pub mod memory;
mod pause;
mod persist;
mod plan;
pub(crate) mod pod_template;
pub mod reconcile_loop;
pub mod references;
mod restart;
mod rollback;
mod runs;
mod scaling_only;
mod snapshot;
pub mod spec;
pub mod status_write;
pub mod steps;
pub mod traffic;
mod workloads;

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};

use crate::api::rollout::RolloutStatus;
use crate::api::{AnalysisRun, Rollout};
use crate::compose::Lookup;

pub use context::Rs;
pub use plan::{Validated, plan};
pub use restart::restart_due;

pub const REVISION_ANNOTATION: &str = analysis::REVISION_ANNOTATION;
pub const REVISION_HISTORY_ANNOTATION: &str = "rollout.argoproj.io/revision-history";
pub const DESIRED_REPLICAS_ANNOTATION: &str = "rollout.argoproj.io/desired-replicas";
pub const SCALE_DOWN_DEADLINE_ANNOTATION: &str = "scale-down-deadline";
pub use crate::api::rollout::MANAGED_BY_ANNOTATION;
pub use ephemeral::{EPHEMERAL_METADATA_ANNOTATION, MetadataPatch, ephemeral_metadata_configured};

/// Everything one reconcile reads. `replica_sets` and `analysis_runs` are those the Rollout controls
/// (ownerReference with controller: true and the Rollout's uid); `services` those it may name.
pub struct Observed<'a> {
    pub rollout: &'a Rollout,
    pub replica_sets: &'a [ReplicaSet],
    pub analysis_runs: &'a [AnalysisRun],
    pub services: &'a [Service],
    /// The router objects it names, as read (`routing::RouterObject`): checked before anything is acted on.
    pub routers: &'a [crate::routing::RouterObject],
    /// The pods of those ReplicaSets (controller ownerReference to one of them), read to restart them and to
    /// relabel them with canaryMetadata/stableMetadata; `None` when they were not read: a `restartAt` then
    /// waits, "rollout is restarting", and evicts nothing, and no pod is relabelled.
    pub pods: Option<&'a [Pod]>,
    /// Resolves `templates[]` references of step and background analyses (and their nested templates).
    pub templates: &'a Lookup<'a>,
    /// `--instance-id`: labels the AnalysisRuns this instance creates.
    pub instance_id: Option<&'a str>,
    pub now: Timestamp,
    /// Where the checks of the spec and what it names are kept for the next plan from the same objects (a
    /// fresh [`Validated`] for other objects).
    pub validated: &'a Validated,
}

/// One write to the cluster, to be made in order; a failed write ends the reconcile (the next one re-plans
/// from what is there).
#[derive(Debug, Clone)]
pub enum Write {
    /// Sets `rollout.argoproj.io/revision` on the Rollout's metadata.
    RolloutRevision {
        revision: String,
    },
    CreateReplicaSet(Box<ReplicaSet>),
    /// Brings the existing new ReplicaSet in line with the Rollout: `annotations` to set (the Rollout's
    /// copied ones; on an undo, the newest revision with the old one appended to
    /// `rollout.argoproj.io/revision-history`), `spec.minReadySeconds` when it is to change, and the merge
    /// patch of its pod template's `spec.affinity` when the anti-affinity term it carries is to change.
    ReviseReplicaSet {
        name: String,
        annotations: BTreeMap<String, String>,
        min_ready_seconds: Option<i32>,
        affinity: Option<serde_json::Value>,
    },
    /// Sets `spec.replicas` and the `rollout.argoproj.io/desired-replicas` annotation (`desired`);
    /// `clear_scale_down_deadline`: a full scale-down also removes `scale-down-deadline`, whose wait is over.
    ScaleReplicaSet {
        name: String,
        replicas: i32,
        desired: i32,
        clear_scale_down_deadline: bool,
    },
    /// Points a Service's `rollouts-pod-template-hash` selector at `hash` and marks it managed by `rollout`.
    SwitchService {
        name: String,
        hash: String,
        rollout: String,
    },
    CreateAnalysisRun(Box<AnalysisRun>),
    /// Sets `spec.terminate: true` on a run that is still running.
    TerminateAnalysisRun {
        name: String,
    },
    DeleteReplicaSet {
        name: String,
    },
    /// Injects or removes canaryMetadata/stableMetadata in a ReplicaSet's pod template (`patch`);
    /// `ephemeral` is the ReplicaSet's new `rollout.argoproj.io/ephemeral-metadata` annotation (`None`
    /// removes it).
    SyncPodMetadata {
        name: String,
        patch: MetadataPatch,
        ephemeral: Option<String>,
    },
    /// Brings canaryMetadata/stableMetadata onto a running pod (`patch` of its labels and annotations), so
    /// pods that already run change role with their ReplicaSet.
    RelabelPod {
        name: String,
        patch: MetadataPatch,
    },
    /// Sets the Rollout's `spec.replicas`: Argo writes the default there when it is missing, as an HPA
    /// scaling the Rollout reads it.
    RolloutReplicas {
        replicas: i32,
    },
    /// Evicts a pod (Eviction API, so PodDisruptionBudgets hold; a refusal is retried next time).
    EvictPod {
        name: String,
    },
    /// Deletes a finished AnalysisRun beyond the history limits, or one of a deleted ReplicaSet.
    DeleteAnalysisRun {
        name: String,
    },
    /// Sets (`Some`) or removes (`None`) one annotation of a ReplicaSet, leaving its size alone: Argo's
    /// `scale-down-deadline`, written as a JSON patch of that one key.
    AnnotateReplicaSet {
        name: String,
        key: String,
        value: Option<String>,
    },
}

/// A Kubernetes Event on the Rollout, with Argo's reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub reason: String,
    pub message: String,
    /// Type Warning rather than Normal.
    pub warning: bool,
    /// For an Event that reports a write of its plan (Argo records it as it makes the write): the index of the
    /// last write of the plan it follows. It is published once the writes up to that one have landed, whatever
    /// fails after them; every other Event only with the plan's status.
    pub after_write: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub writes: Vec<Write>,
    /// The whole new status; the edge writes it (through the status subresource) when it differs.
    pub status: RolloutStatus,
    pub events: Vec<Event>,
    /// When to reconcile again even if nothing changes (a pause or a progress deadline ending).
    pub wake_at: Option<Timestamp>,
    /// The canary traffic weight the steps ask for now (with a traffic router: [`Plan::route`]'s).
    pub desired_weight: i32,
    /// With a traffic router: the weight and pod hashes the routers are to show, applied after the first
    /// [`Plan::route_after`] writes. `None`: leave the routers as they are this reconcile. When applying
    /// fails, nothing after it may be written (`status.canary.weights` already says the weight is applied).
    pub route: Option<Route>,
    /// How many of `writes` are made before the routers are brought to `route`, in Argo's order: ReplicaSets
    /// created, metadata, history and the Services' selectors first (so a weight never reaches a Service
    /// still selecting the pods it is to leave), the traffic, then AnalysisRuns and scaling.
    pub route_after: usize,
}

/// What the routers are to show after this reconcile: the Rollout controller hands it to `routers::apply`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The canary's share, out of `maxTrafficWeight` (100 when unset).
    pub weight: i32,
    /// `rollouts-pod-template-hash` of the new and the stable ReplicaSet.
    pub canary_hash: String,
    pub stable_hash: String,
    /// What happens to the header and mirror routes the steps add.
    pub managed: crate::routing::ManagedRouteChange,
}
