//! The state one reconcile of a Rollout carries between its parts (Argo's rolloutContext): what was
//! observed, the ReplicaSets as the planner reads them, the status so far, and the writes, Events and
//! wake-up gathered on the way. `plan`, `workloads`, `runs` and `persist` each add their rules to it in
//! their own `impl`; this module owns only the shared state and its small accessors, so they depend on it
//! and not on each other.

use std::borrow::Cow;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;

use super::Route;
use super::basic_canary::Pods;
use super::hash::HASH_LABEL;
use super::pause::PauseContext;
use super::{
    DESIRED_REPLICAS_ANNOTATION, Event, Observed, REVISION_ANNOTATION,
    SCALE_DOWN_DEADLINE_ANNOTATION, Write, steps,
};
use crate::api::AnalysisPhase;
use crate::api::rollout::{
    BlueGreenStrategy, CanaryStep, CanaryStrategy, RolloutStatus, TrafficWeights,
};

pub(super) struct Reconcile<'r, 'a> {
    pub o: &'r Observed<'a>,
    pub name: String,
    pub generation: String,
    pub replicas: i32,
    pub steps: &'r [CanaryStep],
    pub canary: Option<&'r CanaryStrategy>,
    pub blue_green: Option<&'r BlueGreenStrategy>,
    /// The status as read, with the conditions this reconcile already set on the way (Argo updates its
    /// copy of the Rollout the same way): borrowed until one is set (a copy of each status read was about 1%
    /// of the daemon's CPU at 10,000 Rollouts, by perf).
    pub prev: Cow<'r, RolloutStatus>,
    /// What this reconcile learned for the new status before it is assembled (run statuses).
    pub new: RolloutStatus,
    pub pause: PauseContext,
    pub rss: Vec<Rs>,
    pub new_rs: Option<usize>,
    pub stable_rs: Option<usize>,
    pub revision: String,
    pub writes: Vec<Write>,
    pub events: Vec<Event>,
    pub wake: Option<Timestamp>,
    pub status: Option<RolloutStatus>,
    pub step_run: Option<RunState>,
    /// `status.canary.weights` to write: as read, until `traffic_routing` decides.
    pub weights: Option<TrafficWeights>,
    pub route: Option<Route>,
    /// How many of `writes` come before the routers are brought to `route` (Plan::route_after).
    pub route_after: usize,
}

impl<'r, 'a> Reconcile<'r, 'a> {
    pub fn new(o: &'r Observed<'a>) -> Reconcile<'r, 'a> {
        let meta = &o.rollout.metadata;
        let canary = o.rollout.spec.canary();
        let prev = match &o.rollout.status {
            Some(status) => Cow::Borrowed(status),
            None => Cow::Owned(RolloutStatus::default()),
        };
        // Argo's newRolloutContext: an abort of a fully promoted Rollout (stable is the current template)
        // has nothing to abort and is cleared (pauseContext.RemoveAbort), so it stays Healthy.
        let pause = PauseContext {
            remove_abort: prev.abort && prev.stable_rs == prev.current_pod_hash,
            ..PauseContext::default()
        };
        Reconcile {
            o,
            name: meta.name.clone().unwrap_or_default(),
            generation: meta.generation.unwrap_or(0).to_string(),
            replicas: o.rollout.spec.replicas.unwrap_or(1),
            steps: steps::steps(o.rollout),
            canary,
            blue_green: o.rollout.spec.blue_green(),
            prev,
            // restartedAt carries over unless a restart completes or the steps restart, and the duration
            // until this reconcile's transitions change it (Argo's newStatus).
            new: RolloutStatus {
                restarted_at: o
                    .rollout
                    .status
                    .as_ref()
                    .and_then(|s| s.restarted_at.clone()),
                duration: o.rollout.status.as_ref().and_then(|s| s.duration.clone()),
                ..Default::default()
            },
            pause,
            rss: Vec::new(),
            new_rs: None,
            stable_rs: None,
            revision: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(super::REVISION_ANNOTATION))
                .cloned()
                .unwrap_or_default(),
            writes: Vec::new(),
            events: Vec::new(),
            wake: None,
            status: None,
            step_run: None,
            weights: o
                .rollout
                .status
                .as_ref()
                .and_then(|s| s.canary.weights.clone()),
            route: None,
            route_after: 0,
        }
    }

    pub fn event(&mut self, reason: &str, message: String) {
        self.events.push(Event {
            reason: reason.to_string(),
            message,
            warning: false,
            after_write: None,
        });
    }

    /// A Normal Event reporting the write just planned ([`Event::after_write`]).
    pub fn told_write(&mut self, reason: &str, message: String) {
        self.events.push(Event {
            reason: reason.to_string(),
            message,
            warning: false,
            after_write: self.writes.len().checked_sub(1),
        });
    }

    pub fn warning(&mut self, reason: &str, message: String) {
        self.events.push(Event {
            reason: reason.to_string(),
            message,
            warning: true,
            after_write: None,
        });
    }

    pub fn wake_at(&mut self, at: Timestamp) {
        if at > self.o.now && self.wake.is_none_or(|w| at < w) {
            self.wake = Some(at);
        }
    }

    pub fn revision_number(&self) -> i64 {
        self.revision.parse().unwrap_or(0)
    }

    pub fn spec_paused(&self) -> bool {
        self.o.rollout.spec.paused == Some(true)
    }

    pub fn new_hash(&self) -> String {
        self.new_rs
            .map(|i| self.rss[i].hash.clone())
            .unwrap_or_default()
    }

    pub fn current_step(&self) -> (Option<usize>, Option<usize>) {
        steps::current(self.steps, &self.prev)
    }
}

/// One owned ReplicaSet, as the planner reads it.
#[derive(Debug, Clone)]
pub struct Rs {
    pub name: String,
    pub hash: String,
    pub revision: i64,
    pub pods: Pods,
    pub ready: i32,
    pub created: Option<Timestamp>,
    /// `scale-down-deadline`: when (RFC 3339) a traffic-routed Rollout may scale it to 0.
    pub scale_down_deadline: Option<String>,
    /// `rollout.argoproj.io/desired-replicas`: spec.replicas when the ReplicaSet was last scaled.
    pub desired_annotation: Option<i32>,
    /// Being deleted (a deletionTimestamp).
    pub deleting: bool,
    /// Its controller has seen its latest spec (status.observedGeneration ≥ generation).
    pub observed: bool,
}

impl Rs {
    pub fn read(rs: &ReplicaSet) -> Rs {
        let meta = &rs.metadata;
        let annotations = meta.annotations.clone().unwrap_or_default();
        let status = rs.status.as_ref();
        Rs {
            name: meta.name.clone().unwrap_or_default(),
            hash: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(HASH_LABEL))
                .cloned()
                .unwrap_or_default(),
            revision: annotations
                .get(REVISION_ANNOTATION)
                .and_then(|r| r.parse().ok())
                .unwrap_or(0),
            pods: Pods {
                spec: rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                current: status.map_or(0, |s| s.replicas),
                available: status.and_then(|s| s.available_replicas).unwrap_or(0),
            },
            ready: status.and_then(|s| s.ready_replicas).unwrap_or(0),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            scale_down_deadline: annotations.get(SCALE_DOWN_DEADLINE_ANNOTATION).cloned(),
            desired_annotation: annotations
                .get(DESIRED_REPLICAS_ANNOTATION)
                .and_then(|d| d.parse().ok()),
            deleting: meta.deletion_timestamp.is_some(),
            observed: meta.generation.unwrap_or(0)
                <= status.and_then(|s| s.observed_generation).unwrap_or(0),
        }
    }
}

/// The AnalysisRun that is current for a step or the background, as the planner reads it.
#[derive(Debug, Clone)]
pub(super) struct RunState {
    pub name: String,
    pub phase: Option<AnalysisPhase>,
    pub step_index: Option<String>,
}
