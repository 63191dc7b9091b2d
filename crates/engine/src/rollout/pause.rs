//! What one reconcile asks of the pause conditions and the abort flag (Argo's pauseContext): requests
//! gathered on the way (add or remove a pause reason, clear them all, abort with a message, retry), applied
//! once to the new status. Owns that bookkeeping only; when to pause or abort is the planner's.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::rollout::{PauseCondition, RolloutStatus};

/// What this reconcile asks of the pause conditions and the abort flag; applied once, in `persist`.
#[derive(Debug, Default)]
pub(super) struct PauseContext {
    pub add: Vec<&'static str>,
    pub remove_reasons: Vec<&'static str>,
    pub clear: bool,
    pub add_abort: bool,
    pub remove_abort: bool,
    pub abort_message: String,
}

impl PauseContext {
    pub fn add(&mut self, reason: &'static str) {
        self.add.push(reason);
    }

    pub fn remove(&mut self, reason: &'static str) {
        self.remove_reasons.push(reason);
    }

    pub fn abort(&mut self, message: String) {
        self.add_abort = true;
        self.abort_message = message;
    }

    pub fn aborted(&self, prev: &RolloutStatus) -> bool {
        !self.remove_abort && (self.add_abort || prev.abort)
    }

    /// The abort fields; true when aborted (then no pause condition is kept).
    fn apply_abort(&self, prev: &RolloutStatus, new: &mut RolloutStatus, now: Timestamp) -> bool {
        if self.aborted(prev) {
            new.abort = true;
            new.aborted_at = Some(prev.aborted_at.clone().unwrap_or(Time(now)));
            return true;
        }
        new.abort = false;
        new.aborted_at = None;
        false
    }

    pub fn apply(&self, prev: &RolloutStatus, new: &mut RolloutStatus, now: Timestamp) {
        if self.apply_abort(prev, new, now) || self.clear {
            return;
        }
        let mut controller_pause = prev.controller_pause;
        let mut conditions: Vec<PauseCondition> = prev
            .pause_conditions
            .iter()
            .filter(|c| !self.remove_reasons.contains(&c.reason.as_str()))
            .cloned()
            .collect();
        for reason in &self.add {
            if !prev.pause_conditions.iter().any(|c| c.reason == *reason) {
                conditions.push(PauseCondition {
                    reason: reason.to_string(),
                    start_time: Time(now),
                });
                controller_pause = true;
            }
        }
        // With no condition left, controllerPause is not carried over: the resume has been consumed.
        if conditions.is_empty() {
            return;
        }
        new.controller_pause = controller_pause;
        new.pause_conditions = conditions;
    }
}
