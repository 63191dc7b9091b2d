//! One reconcile of a Rollout, in Argo's order: pause-state conditions, spec validation, the new
//! ReplicaSet (a blue-green Rollout goes on in `bluegreen`), a restart of the steps when the template or steps changed, Services, analysis, scaling, the
//! pause step, then the status (`persist`). Like Argo, a reconcile that scaled something stops there and
//! lets the next one continue, so each Plan is one small step a restart can resume from.

use std::sync::{Mutex, OnceLock, PoisonError};

use jiff::Timestamp;
use serde_json::Value;

use super::analysis;
use super::conditions::{self as cond, CANARY_PAUSE_STEP};
use super::context::Reconcile;
use super::hash;
use super::steps::{self, pause_seconds};
use super::{Observed, Plan, Write, basic_canary, references, spec};
use crate::api::AnalysisPhase;
use crate::api::rollout::{CanaryStep, RolloutStatus};
use crate::template::Severity;

/// What [`Reconcile::validate`] found for each pair of canary and stable ReplicaSet hashes, kept for the
/// plans made from the same objects (the plans a reconcile runs on in memory, which differ only in the
/// Rollout's status, and those after a plan's writes when none wrote the Rollout or a Service, the objects
/// the checks read besides the templates and router objects, which plans do not write): of the status the
/// checks read only those hashes, at which the router objects are checked. The checks (a VirtualService is
/// checked by building it) were 6% of the daemon's CPU at 2,000 Rollouts, made again for each of a
/// reconcile's plans (perf). Also the hashes of the Rollout's pod template and steps, which those plans share
/// (1.4% of the daemon's CPU at 10,000 Rollouts, hashed again for each plan; perf).
#[derive(Debug, Default)]
pub struct Validated {
    found: Mutex<Vec<Found>>,
    /// The pod-template hash, and the collision count it was made with.
    pod_hash: OnceLock<(Option<i32>, String)>,
    step_hash: OnceLock<String>,
}

impl Validated {
    /// The pod-template hash of `template` with `collision_count`, as made before for these objects.
    pub(super) fn pod_hash(&self, template: &Value, collision_count: Option<i32>) -> String {
        let made = self.pod_hash.get_or_init(|| {
            (
                collision_count,
                hash::pod_template_hash(template, collision_count),
            )
        });
        match made {
            (count, hash) if *count == collision_count => hash.clone(),
            // A collision counted since (a plan never changes the count while it runs on): not kept.
            _ => hash::pod_template_hash(template, collision_count),
        }
    }

    /// The hash of `steps` ([`hash::step_hash`]), as made before for these objects.
    pub(super) fn step_hash(&self, steps: Option<&Vec<CanaryStep>>) -> String {
        self.step_hash
            .get_or_init(|| hash::step_hash(steps))
            .clone()
    }
}

/// The canary and stable hashes a Rollout was checked at, and what the checks found.
type Found = ((String, String), Result<(), String>);

/// Plans one reconcile.
pub fn plan(observed: &Observed<'_>) -> Plan {
    let mut r = Reconcile::new(observed);
    r.run();
    let desired_weight = r.route.as_ref().map_or(r.desired_weight(), |t| t.weight);
    Plan {
        writes: r.writes,
        status: r.status.unwrap_or_else(|| r.prev.into_owned()),
        events: r.events,
        wake_at: r.wake,
        desired_weight,
        route: r.route,
        route_after: r.route_after,
    }
}

impl Reconcile<'_, '_> {
    fn run(&mut self) {
        // Argo's syncHandler: a missing spec.replicas is written as its default, and nothing else this time.
        if self.o.rollout.spec.replicas.is_none() {
            self.writes.push(Write::RolloutReplicas {
                replicas: self.replicas,
            });
            return;
        }
        if self.check_paused_conditions() {
            return;
        }
        if let Err(message) = self.validate() {
            self.invalid(message);
            return;
        }
        if cond::get(&self.prev, cond::INVALID_SPEC).is_some() {
            cond::remove(self.prev.to_mut(), cond::INVALID_SPEC);
        }
        if let Err(message) = self.find_replica_sets() {
            self.invalid(message);
            return;
        }
        if self.new_rs.is_some() {
            self.sync_revision();
        }
        if self.scaling_event() {
            self.sync_replicas_only();
            return;
        }
        if self.new_rs.is_none() {
            match self.create_new_replica_set() {
                Ok(true) => {}
                Ok(false) => {
                    self.status = Some(self.prev.clone().into_owned());
                    return;
                }
                Err(message) => {
                    self.invalid(message);
                    return;
                }
            }
        }
        if let Some(strategy) = self.blue_green {
            self.blue_green(strategy);
            return;
        }
        if self.template_or_steps_changed() {
            self.sync_status();
            return;
        }
        if self.restart_pods() {
            return;
        }
        self.ephemeral_metadata();
        self.revision_history();
        self.services();
        self.traffic_routing();
        if let Err(message) = self.analysis() {
            self.invalid(message);
            return;
        }
        if !self.pause.add.is_empty() {
            self.sync_status();
            return;
        }
        if self.scale() {
            self.sync_status();
            return;
        }
        self.canary_pause();
        self.sync_status();
    }

    /// Argo's checkPausedConditions: when pausing, resuming or retrying changed since the last status
    /// write of this generation, only the Progressing/Paused conditions are written, and the reconcile ends.
    fn check_paused_conditions(&mut self) -> bool {
        if self.prev.observed_generation != self.generation {
            return false;
        }
        let now = self.o.now;
        let progressing = cond::get(&self.prev, cond::PROGRESSING);
        let progressing_paused = progressing.is_some_and(|c| c.reason == cond::ROLLOUT_PAUSED);
        let abort_condition = progressing.is_some_and(|c| c.reason == cond::ROLLOUT_ABORTED);
        let is_paused = !self.prev.pause_conditions.is_empty() || self.spec_paused();
        let mut updates = Vec::new();
        if is_paused != progressing_paused && !abort_condition && !cond::completed(&self.prev) {
            updates.push(if is_paused {
                cond::condition(
                    cond::PROGRESSING,
                    "Unknown",
                    cond::ROLLOUT_PAUSED,
                    cond::PAUSED_MESSAGE,
                    now,
                )
            } else {
                cond::condition(
                    cond::PROGRESSING,
                    "Unknown",
                    cond::ROLLOUT_RESUMED,
                    cond::RESUMED_MESSAGE,
                    now,
                )
            });
        }
        if !self.prev.abort && abort_condition {
            updates.push(cond::condition(
                cond::PROGRESSING,
                "Unknown",
                cond::ROLLOUT_RETRY,
                cond::RETRY_MESSAGE,
                now,
            ));
        }
        let paused_true = cond::get(&self.prev, cond::PAUSED).is_some_and(|c| c.status == "True");
        if is_paused != paused_true && !abort_condition {
            let status = if is_paused { "True" } else { "False" };
            updates.push(cond::condition(
                cond::PAUSED,
                status,
                cond::ROLLOUT_PAUSED,
                cond::PAUSED_MESSAGE,
                now,
            ));
        }
        if updates.is_empty() {
            return false;
        }
        let mut status = self.prev.clone().into_owned();
        for c in updates {
            cond::set(&mut status, c);
        }
        self.finish_status_only(status);
        true
    }

    /// Writes a status that changed only in its conditions, with the phase they imply.
    fn finish_status_only(&mut self, mut status: RolloutStatus) {
        status.observed_generation = self.generation.clone();
        let (phase, message) = cond::phase(&self.o.rollout.spec, &status);
        status.phase = phase.to_string();
        status.message = message;
        status.duration = self.duration(&status);
        self.status = Some(status);
    }

    /// Argo's getRolloutValidationErrors ([`Reconcile::check`]), as found before at the same ReplicaSet hashes
    /// by a plan from the same objects ([`Validated`]).
    fn validate(&self) -> Result<(), String> {
        let status = self.o.rollout.status.as_ref();
        let hashes = status.map(|s| (s.current_pod_hash.as_str(), s.stable_rs.as_str()));
        let hashes = hashes.unwrap_or_default();
        let mut held = self
            .o
            .validated
            .found
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, found)) = held
            .iter()
            .find(|(at, _)| (at.0.as_str(), at.1.as_str()) == hashes)
        {
            return found.clone();
        }
        let found = self.check();
        held.push(((hashes.0.to_string(), hashes.1.to_string()), found.clone()));
        found
    }

    /// Argo's getRolloutValidationErrors: the Rollout's own checks, then those of the objects it names as read
    /// (`references::in_argo_order`); the first error.
    fn check(&self) -> Result<(), String> {
        let rollout = self.o.rollout;
        let mut findings = spec::check(rollout);
        findings.extend(references::in_argo_order(
            references::services(rollout, self.o.services),
            analysis::template_findings(rollout, self.o.templates, analysis::Missing::Error),
            references::routers(rollout, self.o.routers),
        ));
        match findings.into_iter().find(|f| f.severity == Severity::Error) {
            Some(f) => Err(format!("{}: {}", f.path, f.message)),
            None => Ok(()),
        }
    }

    /// The InvalidSpec condition (`conditions::invalid_spec`), phase Degraded; nothing else moves. Looked at
    /// again in 20 s, as Argo does: a missing template or Service may have appeared.
    pub(super) fn invalid(&mut self, message: String) {
        let status = cond::invalid_spec(
            self.o.rollout,
            self.prev.clone().into_owned(),
            &message,
            self.o.now,
        );
        self.status = Some(status);
        if let Ok(at) = self.o.now.checked_add(jiff::SignedDuration::from_secs(20)) {
            self.wake_at(at);
        }
    }

    pub(super) fn template_or_steps_changed(&self) -> bool {
        let step_hash = (self.o.validated).step_hash(self.canary.and_then(|c| c.steps.as_ref()));
        self.prev.current_step_hash.is_empty()
            || self.prev.current_step_hash != step_hash
            || self.prev.current_pod_hash.is_empty()
            || self.prev.current_pod_hash != self.new_hash()
    }

    /// The canary weight the steps ask for (all of it when promoted or on first deploy).
    pub fn desired_weight(&self) -> i32 {
        let status = self.status.as_ref().unwrap_or(&self.prev);
        if status.promote_full
            || status.stable_rs.is_empty()
            || status.current_pod_hash == status.stable_rs
        {
            return basic_canary::MAX_WEIGHT;
        }
        let (_, index) = steps::current(self.steps, status);
        steps::set_weight(self.steps, index, status.abort)
    }

    /// Argo's reconcileCanaryPause: entering a pause step adds its pause condition; a timed pause asks to
    /// be woken when it ends.
    fn canary_pause(&mut self) {
        if self.spec_paused() || self.prev.promote_full {
            return;
        }
        let (Some(i), _) = self.current_step() else {
            return;
        };
        let Some(pause) = &self.steps[i].pause else {
            return;
        };
        let condition = self
            .prev
            .pause_conditions
            .iter()
            .find(|p| p.reason == CANARY_PAUSE_STEP)
            .cloned();
        match condition {
            None => {
                if !self.prev.controller_pause {
                    self.pause.add(CANARY_PAUSE_STEP);
                    if let Ok(Some(seconds)) = pause_seconds(pause.duration.as_ref()) {
                        self.wake_after(self.o.now, seconds);
                    }
                }
            }
            Some(c) => {
                if let Ok(Some(seconds)) = pause_seconds(pause.duration.as_ref()) {
                    self.wake_after(c.start_time.0, seconds);
                }
            }
        }
    }

    /// Look again when a pause of `seconds` from `from` ends (see `completed_current_step`).
    fn wake_after(&mut self, from: Timestamp, seconds: i64) {
        if let Ok(at) = from.checked_add(jiff::SignedDuration::from_secs(seconds)) {
            self.wake_at(at);
        }
    }

    /// Argo's completedCurrentCanaryStep.
    fn completed_current_step(&self) -> bool {
        if self.spec_paused() {
            return false;
        }
        let (Some(i), _) = self.current_step() else {
            return false;
        };
        let step = &self.steps[i];
        if let Some(p) = &step.pause {
            let condition = self
                .prev
                .pause_conditions
                .iter()
                .find(|c| c.reason == CANARY_PAUSE_STEP);
            if self.prev.controller_pause && condition.is_none() {
                return true;
            }
            return match (pause_seconds(p.duration.as_ref()), condition) {
                (Ok(Some(seconds)), Some(c)) => c
                    .start_time
                    .0
                    .checked_add(jiff::SignedDuration::from_secs(seconds))
                    // Argo's `now.After(end)` on the clock; on whole-second stamps (`now` truncated, `end` a
                    // whole second) that is `now >= end`.
                    .is_ok_and(|end| self.o.now >= end),
                _ => false,
            };
        }
        if step.set_canary_scale.is_some() {
            return self.at_desired_counts();
        }
        if step.set_weight.is_some() {
            return self.at_desired_counts() && self.weight_applied(i);
        }
        if step.analysis.is_some() {
            return self
                .step_run
                .as_ref()
                .is_some_and(|r| r.phase == Some(AnalysisPhase::Successful));
        }
        // The routers set the route in this reconcile, before the step moves on.
        step.set_header_route.is_some() || step.set_mirror_route.is_some()
    }

    /// Argo's syncRolloutStatusCanary: the canary part of the status, then `persist`.
    fn sync_status(&mut self) {
        let mut new = self.base_status();
        let (step, index) = self.current_step();
        let count = self.steps.len();
        let mut index = index.map(|i| i as i32);
        if self.template_or_steps_changed() {
            self.reset(&mut new);
            if self.new_rs.is_some() && count > 0 && self.prev.stable_rs == self.new_hash() {
                self.event(
                    cond::SKIP_STEPS,
                    "Rollback to stable ReplicaSets".to_string(),
                );
                new.current_step_index = Some(count as i32);
            } else if self.new_rs.is_some_and(|i| self.rss[i].pods.spec > 0)
                && count > 0
                && self.rollback_within_window()
            {
                self.event(
                    cond::SKIP_STEPS,
                    "Rollback to active ReplicaSets within RollbackWindow".to_string(),
                );
                new.current_step_index = Some(count as i32);
            }
            self.persist(new);
            return;
        }
        if self.prev.promote_full || self.rollback_within_window() {
            self.pause.clear = true;
            self.pause.remove_abort = true;
            if count > 0 {
                index = Some(count as i32);
            }
        }
        if let Some(reason) = self.should_full_promote() {
            self.promote_stable(&mut new, &reason);
            self.persist(new);
            return;
        }
        if self.pause.aborted(&self.prev) {
            if count > 0 {
                let back = if new.stable_rs == new.current_pod_hash {
                    count
                } else {
                    0
                };
                new.current_step_index = Some(back as i32);
            }
            self.persist(new);
            return;
        }
        if let Some(i) = step
            && self.completed_current_step()
        {
            let described = steps::describe(&self.steps[i]);
            index = Some(i as i32 + 1);
            new.canary.current_step_analysis_run_status = None;
            self.event(
                cond::ROLLOUT_STEP_COMPLETED,
                format!("Rollout step {}/{count} completed ({described})", i + 1),
            );
            self.pause.remove(CANARY_PAUSE_STEP);
        }
        new.current_step_index = index;
        self.persist(new);
    }

    pub(super) fn reset(&mut self, new: &mut RolloutStatus) {
        self.pause.clear = true;
        self.pause.remove_abort = true;
        new.restarted_at = self.o.rollout.spec.restart_at.clone();
        new.promote_full = false;
        new.canary.current_step_analysis_run_status = None;
        new.canary.current_background_analysis_run_status = None;
        new.current_step_index = (!self.steps.is_empty()).then_some(0);
    }

    fn should_full_promote(&self) -> Option<String> {
        if self.stable_rs.is_none() {
            return Some("Initial deploy".to_string());
        }
        if self.pause.aborted(&self.prev) {
            return None;
        }
        let new = self.new_rs.map(|i| &self.rss[i])?;
        if new.pods.available < self.replicas && !self.progress_met(new.pods, self.replicas) {
            return None;
        }
        if self.prev.promote_full {
            return Some("Full promotion requested".to_string());
        }
        if self.fast_rollback() {
            if self.rollback_within_window() {
                return Some("Rollback within window".to_string());
            }
            return Some("Fast rollback".to_string());
        }
        let (_, index) = self.current_step();
        let count = self.steps.len();
        (count == 0 || index == Some(count)).then(|| format!("Completed all {count} canary steps"))
    }

    pub(super) fn promote_stable(&mut self, new: &mut RolloutStatus, reason: &str) {
        self.pause.clear = true;
        self.pause.remove_abort = true;
        new.promote_full = false;
        new.current_step_index = (!self.steps.is_empty()).then_some(self.steps.len() as i32);
        if new.stable_rs != new.current_pod_hash {
            new.stable_rs = new.current_pod_hash.clone();
            let message = format!(
                "Rollout completed update to revision {} ({}): {reason}",
                self.revision_number(),
                new.current_pod_hash
            );
            self.event(cond::ROLLOUT_COMPLETED, message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_pod_hash_is_the_hash_at_the_collision_count_asked_for() {
        let validated = Validated::default();
        let template =
            serde_json::json!({"spec": {"containers": [{"name": "web", "image": "web:2"}]}});
        let at = |count| hash::pod_template_hash(&template, count);
        assert_eq!(validated.pod_hash(&template, None), at(None));
        assert_ne!(at(None), at(Some(1)));
        assert_eq!(validated.pod_hash(&template, Some(1)), at(Some(1)));
        assert_eq!(validated.pod_hash(&template, None), at(None));
    }
}
