//! Assembling the status one reconcile writes, as Argo's persistRolloutStatus does: counts from the
//! ReplicaSets, the pause and abort bookkeeping (`pause`), a progress-deadline abort, the
//! conditions, the phase, and the Events that announce a change. Owns the status fields' rules; the
//! decisions that feed them (steps, analysis, scaling) are `plan`'s.

use super::conditions::{self as cond};
use super::context::{Reconcile, Rs};
use crate::api::rollout::RolloutStatus;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

impl Reconcile<'_, '_> {
    pub(super) fn sum(&self, f: impl Fn(&Rs) -> i32) -> i32 {
        self.rss.iter().map(f).fold(0, i32::saturating_add)
    }

    /// Argo's calculateBaseStatus plus the canary counts: built afresh each reconcile from the ReplicaSets,
    /// keeping only what must carry over.
    pub(super) fn base_status(&self) -> RolloutStatus {
        let mut new = self.new.clone();
        let new_rs = self.new_rs.map(|i| &self.rss[i]);
        new.current_pod_hash = new_rs.map(|r| r.hash.clone()).unwrap_or_default();
        new.replicas = self.sum(|r| r.pods.current);
        new.updated_replicas = new_rs.map_or(0, |r| r.pods.current);
        new.ready_replicas = self.sum(|r| r.ready);
        new.available_replicas = self.sum(|r| r.pods.available);
        new.hpa_replicas = new.replicas;
        new.collision_count = self.prev.collision_count;
        new.conditions = self.prev.conditions.clone();
        new.promote_full = new.current_pod_hash != self.prev.stable_rs && self.prev.promote_full;
        new.selector = selector_string(self.o.rollout);
        new.stable_rs = self.prev.stable_rs.clone();
        // Argo's ComputeStepHash: none for a blue-green Rollout, whose `status.blueGreen` is its own.
        if self.blue_green.is_none() {
            new.current_step_hash =
                (self.o.validated).step_hash(self.canary.and_then(|c| c.steps.as_ref()));
            new.blue_green = self.prev.blue_green.clone();
        }
        new.canary.stable_ping_pong = self.prev.canary.stable_ping_pong.clone();
        new.canary.weights = self.weights.clone();
        new.rest = self.prev.rest.clone();
        new
    }

    fn indefinite_step(&self) -> bool {
        let (step, _) = super::steps::current(self.steps, &self.prev);
        let waiting = step.is_some_and(|i| {
            let s = &self.steps[i];
            s.pause.is_some() || s.analysis.is_some() || s.experiment.is_some()
        });
        waiting || cond::get(&self.prev, cond::PAUSED).is_some_and(|c| c.status == "True")
    }

    fn waiting_for_scale_down(&self) -> bool {
        self.rss.iter().enumerate().any(|(i, r)| {
            Some(i) != self.new_rs && Some(i) != self.stable_rs && r.scale_down_deadline.is_some()
        })
    }

    fn deadline_seconds(&self) -> i64 {
        i64::from(self.o.rollout.spec.progress_deadline_seconds.unwrap_or(600))
    }

    /// Argo's RolloutProgressing: did anything move since the last status?
    fn progressing(&self, new: &RolloutStatus) -> bool {
        let prev = &self.prev;
        let index_moved = matches!((new.current_step_index, prev.current_step_index), (Some(a), Some(b)) if a != b);
        let selectors = |s: &RolloutStatus| {
            s.blue_green
                .as_ref()
                .map(|b| (b.active_selector.clone(), b.preview_selector.clone()))
        };
        let strategy = new.stable_rs != prev.stable_rs
            || index_moved
            || new.current_step_hash != prev.current_step_hash
            || (self.blue_green.is_some() && selectors(new) != selectors(prev));
        new.updated_replicas != prev.updated_replicas
            || new.replicas.saturating_sub(new.updated_replicas)
                < prev.replicas.saturating_sub(prev.updated_replicas)
            || new.ready_replicas > prev.ready_replicas
            || new.available_replicas > prev.available_replicas
            || strategy
    }

    fn new_rs_name(&self) -> String {
        self.new_rs
            .map(|i| self.rss[i].name.clone())
            .unwrap_or_default()
    }

    fn timeout_message(&self) -> String {
        match self.new_rs {
            Some(i) => format!(
                "ReplicaSet {:?} has timed out progressing.",
                self.rss[i].name
            ),
            None => format!("Rollout {:?} has timed out progressing.", self.name),
        }
    }

    fn healthy(&self, new: &RolloutStatus) -> bool {
        if let Some(strategy) = self.blue_green {
            return cond::healthy_blue_green(
                self.replicas,
                strategy,
                self.prev.observed_generation == self.generation,
                new,
            );
        }
        cond::healthy(
            self.replicas,
            self.steps.len(),
            self.prev.observed_generation == self.generation,
            new,
        )
    }

    /// Argo's persistRolloutStatus.
    pub(super) fn persist(&mut self, mut new: RolloutStatus) {
        let now = self.o.now;
        new.observed_generation = self.generation.clone();
        new.workload_observed_generation = String::new();
        self.progress_deadline_abort(&new);
        self.pause.apply(&self.prev, &mut new, now);
        self.conditions(&mut new);
        let (phase, message) = cond::phase(&self.o.rollout.spec, &new);
        new.phase = phase.to_string();
        new.message = message;
        new.duration = self.duration(&new);
        let was_paused = !self.prev.pause_conditions.is_empty();
        if let Some(first) = new.pause_conditions.first().filter(|_| !was_paused) {
            let message = format!("{} ({})", cond::PAUSED_MESSAGE, first.reason);
            self.event(cond::ROLLOUT_PAUSED, message);
        } else if was_paused && new.pause_conditions.is_empty() && new.aborted_at.is_none() {
            self.event(cond::ROLLOUT_RESUMED, cond::RESUMED_MESSAGE.to_string());
        }
        self.progress_wake(&new);
        self.status = Some(new);
    }

    /// Argo's evaluateProgressDeadlineAbort: with progressDeadlineAbort, a timed-out update aborts.
    fn progress_deadline_abort(&mut self, new: &RolloutStatus) {
        if self.o.rollout.spec.progress_deadline_abort != Some(true)
            || self.pause.aborted(&self.prev)
            || cond::completed(new)
            || self.progressing(new)
            || self.indefinite_step()
            || self.waiting_for_scale_down()
            || !cond::timed_out(&self.prev, self.deadline_seconds(), self.o.now)
        {
            return;
        }
        let message = self.timeout_message();
        self.pause.abort(message.clone());
        self.warning(cond::ROLLOUT_ABORTED, message);
    }

    /// Argo's calculateRolloutConditions: Healthy, Progressing, Available and Completed, in that order.
    fn conditions(&mut self, new: &mut RolloutStatus) {
        let paused = !new.pause_conditions.is_empty() || self.spec_paused();
        let aborted = self.pause.aborted(&self.prev);
        let became_unhealthy = self.healthy_condition(new, paused);
        self.progressing_condition(new, aborted, became_unhealthy);
        self.available_condition(new);
        self.replica_failure_condition(new);
        self.completed_condition(new);
    }

    /// Argo's getReplicaFailures: a ReplicaSet's `ReplicaFailure` condition (a quota or an admission webhook
    /// refusing its pods) copied onto the Rollout, the new ReplicaSet's before any other's, its transition
    /// time as both times; removed when none has one.
    fn replica_failure_condition(&self, new: &mut RolloutStatus) {
        let new_name = self.new_rs.map(|i| self.rss[i].name.as_str());
        let of_new = self
            .o
            .replica_sets
            .iter()
            .filter(|rs| new_name.is_some() && rs.metadata.name.as_deref() == new_name)
            .find_map(replica_failure);
        let Some(found) = of_new.or_else(|| self.o.replica_sets.iter().find_map(replica_failure))
        else {
            cond::remove(new, cond::REPLICA_FAILURE);
            return;
        };
        let at = found
            .last_transition_time
            .as_ref()
            .map_or(self.o.now, |t| t.0);
        let mut copied = cond::condition(
            cond::REPLICA_FAILURE,
            &found.status,
            found.reason.as_deref().unwrap_or_default(),
            found.message.as_deref().unwrap_or_default(),
            at,
        );
        copied.last_update_time = Time(at);
        cond::set(new, copied);
    }

    /// The Healthy condition: True when healthy and not `paused`, else False once it was set; whether it
    /// just became False.
    fn healthy_condition(&self, new: &mut RolloutStatus, paused: bool) -> bool {
        let now = self.o.now;
        let mut became_unhealthy = false;
        if !paused && self.healthy(new) {
            cond::set(
                new,
                cond::condition(
                    cond::HEALTHY,
                    "True",
                    cond::ROLLOUT_HEALTHY,
                    cond::HEALTHY_MESSAGE,
                    now,
                ),
            );
        } else if cond::get(&self.prev, cond::HEALTHY).is_some() {
            became_unhealthy = cond::set(
                new,
                cond::condition(
                    cond::HEALTHY,
                    "False",
                    cond::ROLLOUT_HEALTHY,
                    cond::NOT_HEALTHY_MESSAGE,
                    now,
                ),
            );
        }
        became_unhealthy
    }

    /// The Progressing condition: False when `aborted` (with a warning the first time), True when the new
    /// ReplicaSet has progressed or is progressing (or not available, when the stable one `became_unhealthy`),
    /// False when it timed out.
    fn progressing_condition(
        &mut self,
        new: &mut RolloutStatus,
        aborted: bool,
        became_unhealthy: bool,
    ) {
        let now = self.o.now;
        if aborted {
            let mut message = format!(
                "Rollout aborted update to revision {}",
                self.revision_number()
            );
            if !self.pause.abort_message.is_empty() {
                message = format!("{message}: {}", self.pause.abort_message);
            }
            let c = cond::condition(
                cond::PROGRESSING,
                "False",
                cond::ROLLOUT_ABORTED,
                &message,
                now,
            );
            if cond::set(new, c) {
                self.warning(cond::ROLLOUT_ABORTED, message);
            }
        } else if self.healthy(new) {
            let message = format!(
                "ReplicaSet {:?} has successfully progressed.",
                self.new_rs_name()
            );
            cond::set(
                new,
                cond::condition(
                    cond::PROGRESSING,
                    "True",
                    cond::NEW_RS_AVAILABLE,
                    &message,
                    now,
                ),
            );
        } else if self.progressing(new) || became_unhealthy {
            let (reason, message) = if new.stable_rs == new.current_pod_hash && became_unhealthy {
                (
                    cond::RS_NOT_AVAILABLE,
                    cond::NOT_AVAILABLE_MESSAGE.to_string(),
                )
            } else {
                (
                    cond::RS_UPDATED,
                    format!("ReplicaSet {:?} is progressing.", self.new_rs_name()),
                )
            };
            let mut c = cond::condition(cond::PROGRESSING, "True", reason, &message, now);
            if let Some(current) = cond::get(&self.prev, cond::PROGRESSING) {
                if current.status == "True" {
                    c.last_transition_time = current.last_transition_time.clone();
                }
                cond::remove(new, cond::PROGRESSING);
            }
            cond::set(new, c);
        } else if !self.indefinite_step()
            && !self.waiting_for_scale_down()
            && cond::timed_out(new, self.deadline_seconds(), now)
        {
            let message = self.timeout_message();
            cond::set(
                new,
                cond::condition(cond::PROGRESSING, "False", cond::TIMED_OUT, &message, now),
            );
        }
    }

    /// The Available condition: whether the available pods reach the Rollout's replicas.
    fn available_condition(&self, new: &mut RolloutStatus) {
        let now = self.o.now;
        let available = new.available_replicas >= self.replicas;
        let (status, message) = if available {
            ("True", cond::AVAILABLE_MESSAGE)
        } else {
            ("False", cond::NOT_AVAILABLE_MESSAGE)
        };
        cond::set(
            new,
            cond::condition(
                cond::AVAILABLE,
                status,
                cond::AVAILABLE_REASON,
                message,
                now,
            ),
        );
    }

    /// The Completed condition, with an Event when it turns False (an update started).
    fn completed_condition(&mut self, new: &mut RolloutStatus) {
        let now = self.o.now;
        let done = cond::completed(new);
        let c = cond::condition(
            cond::COMPLETED,
            if done { "True" } else { "False" },
            cond::ROLLOUT_COMPLETED,
            cond::ROLLOUT_COMPLETED,
            now,
        );
        if cond::set(new, c) && !done {
            let message = format!(
                "Rollout not completed, started update to revision {} ({})",
                self.revision_number(),
                new.current_pod_hash
            );
            self.event(cond::ROLLOUT_NOT_COMPLETED, message);
        }
    }

    /// Argo's requeueStuckRollout: while progress is expected, look again when the deadline passes.
    fn progress_wake(&mut self, new: &RolloutStatus) {
        let Some(current) = cond::get(&self.prev, cond::PROGRESSING) else {
            return;
        };
        let paused = !self.prev.pause_conditions.is_empty() || self.spec_paused();
        if self.healthy(new)
            || current.reason == cond::TIMED_OUT
            || paused
            || self.prev.abort
            || self.indefinite_step()
        {
            return;
        }
        let at = cond::deadline(current, self.deadline_seconds());
        if let Ok(at) = at.checked_add(jiff::SignedDuration::from_secs(1)) {
            self.wake_at(at);
        }
    }
}

/// A ReplicaSet's own `ReplicaFailure` condition.
fn replica_failure(rs: &ReplicaSet) -> Option<&ReplicaSetCondition> {
    let conditions = rs.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == cond::REPLICA_FAILURE)
}

/// `metav1.FormatLabelSelector` of the Rollout's selector, e.g. `app=web`.
fn selector_string(rollout: &crate::api::Rollout) -> String {
    let Some(selector) = &rollout.spec.selector else {
        return String::new();
    };
    let text = crate::api::meta::selector_string(selector);
    if text.is_empty() {
        "<none>".to_string()
    } else {
        text
    }
}
