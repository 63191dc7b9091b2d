//! The blue-green strategy (Argo's `rolloutBlueGreen`, rollout/bluegreen.go): one reconcile in Argo's order
//! — the preview Service to the new pods, the ReplicaSets (`replicas`), the pause before promotion, the
//! active Service's switch (`services`), the pre- and post-promotion analyses (`analysis`), then the
//! status (`status`). The shared parts (the new ReplicaSet,
//! revisions, pause bookkeeping, conditions, persisting) are the planner's; `plan` hands a blue-green
//! Rollout to [`Reconcile::blue_green`] once its new ReplicaSet exists.

mod analysis;
mod replicas;
mod services;
mod status;

use jiff::SignedDuration;

use super::conditions::{self as cond, BLUE_GREEN_PAUSE};
use super::context::Reconcile;
use crate::api::rollout::BlueGreenStrategy;

/// What the Services select as this reconcile goes (Argo switches them in place), and what was read before
/// anything moved.
pub(super) struct Sides {
    /// The pod-template hash the active Service selects; empty when none.
    pub active: String,
    /// The pod-template hash the preview Service selects; empty when none (or no preview Service).
    pub preview: String,
    /// The new ReplicaSet still had a `scale-down-deadline` to come when read (Argo's newRSWithinDelay): a
    /// Rollout going back to a ReplicaSet it is still waiting to scale down is fast-tracked.
    pub new_within_delay: bool,
}

impl Reconcile<'_, '_> {
    /// Argo's rolloutBlueGreen, from the preview Service on.
    pub(super) fn blue_green(&mut self, strategy: &BlueGreenStrategy) {
        let mut sides = self.read_sides(strategy);
        self.switch_preview(strategy, &mut sides);
        if self.pod_template_changed() {
            self.blue_green_status(strategy, &sides, None);
            return;
        }
        if self.restart_pods() {
            return;
        }
        self.blue_green_replica_sets(strategy);
        self.blue_green_pause(strategy, &sides);
        self.switch_active(strategy, &mut sides);
        match self.blue_green_analysis(strategy, &sides) {
            Ok(post) => {
                self.ephemeral_metadata();
                self.blue_green_status(strategy, &sides, post.as_ref());
            }
            Err(message) => self.invalid(message),
        }
    }

    /// Argo's CheckPodSpecChange: the new ReplicaSet is not the one the status last recorded.
    fn pod_template_changed(&self) -> bool {
        self.new_rs.is_some() && self.prev.current_pod_hash != self.new_hash()
    }

    /// Argo's haltProgress: `spec.paused` or an inconclusive analysis holds every Service and count.
    fn halt_progress(&self) -> bool {
        self.spec_paused()
            || self
                .prev
                .pause_conditions
                .iter()
                .any(|p| p.reason == cond::INCONCLUSIVE_ANALYSIS)
    }

    /// Argo's isBlueGreenFastTracked: no pause before the switch when rolling back fast, promoting fully,
    /// when the active Service selects no ReplicaSet yet, or already the new one.
    fn fast_tracked(&self, sides: &Sides) -> bool {
        self.blue_green_fast_rollback(sides)
            || self.prev.promote_full
            || sides.active.is_empty()
            || sides.active == self.new_hash()
    }

    /// Argo's isFastRollback for blue-green: back to the stable template, within the rollback window, or
    /// back to an older ReplicaSet whose scale-down delay has not run out.
    fn blue_green_fast_rollback(&self, sides: &Sides) -> bool {
        self.fast_rollback() || (sides.new_within_delay && self.rollback_kind().is_some())
    }

    fn pause_condition_start(&self) -> Option<jiff::Timestamp> {
        self.prev
            .pause_conditions
            .iter()
            .find(|p| p.reason == BLUE_GREEN_PAUSE)
            .map(|p| p.start_time.0)
    }

    /// Argo's reconcileBlueGreenPause: once the new ReplicaSet is ready, pause before the switch when
    /// `autoPromotionEnabled: false` or `autoPromotionSeconds` asks for it, and end the pause when its
    /// time is up (a person ends it with `promote`).
    fn blue_green_pause(&mut self, strategy: &BlueGreenStrategy, sides: &Sides) {
        if self.prev.abort || !self.ready_for_pause(strategy) || self.halt_progress() {
            return;
        }
        let checkpoint = self.prev_blue_green().scale_up_preview_check_point;
        if self.fast_tracked(sides) || checkpoint || !needs_controller_pause(strategy) {
            self.pause.remove(BLUE_GREEN_PAUSE);
            return;
        }
        if !self.completed_pre_promotion(strategy) {
            return;
        }
        match self.pause_condition_start() {
            Some(start) => {
                if self.completed_blue_green_pause(strategy) {
                    self.pause.remove(BLUE_GREEN_PAUSE);
                } else if let Some(seconds) = auto_promotion_seconds(strategy)
                    && let Ok(at) = start.checked_add(SignedDuration::from_secs(seconds))
                {
                    self.wake_at(at);
                }
            }
            None => {
                if !self.prev.controller_pause {
                    self.pause.add(BLUE_GREEN_PAUSE);
                }
            }
        }
    }

    /// Argo's CompletedBlueGreenPause: a person resumed the Rollout, or `autoPromotionSeconds` passed (at
    /// once when there are none), or the preview checkpoint was passed before; never in the reconcile that
    /// paused.
    fn completed_blue_green_pause(&self, strategy: &BlueGreenStrategy) -> bool {
        if !self.pause.add.is_empty() {
            return false;
        }
        if self.prev_blue_green().scale_up_preview_check_point {
            return true;
        }
        let start = self.pause_condition_start();
        if strategy.auto_promotion_enabled != Some(false) {
            return match (auto_promotion_seconds(strategy), start) {
                (None, _) => true,
                (Some(seconds), Some(start)) => start
                    .checked_add(SignedDuration::from_secs(seconds))
                    // Whole-second stamps, as for a canary's timed pause (`plan::completed_current_step`).
                    .is_ok_and(|end| self.o.now >= end),
                (Some(_), None) => false,
            };
        }
        self.prev.controller_pause && start.is_none()
    }

    /// `status.blueGreen` as read (empty when absent).
    fn prev_blue_green(&self) -> crate::api::rollout::BlueGreenStatus {
        self.prev.blue_green.clone().unwrap_or_default()
    }
}

/// Argo's needsBlueGreenControllerPause.
fn needs_controller_pause(strategy: &BlueGreenStrategy) -> bool {
    strategy.auto_promotion_enabled == Some(false) || auto_promotion_seconds(strategy).is_some()
}

/// `autoPromotionSeconds` when positive.
fn auto_promotion_seconds(strategy: &BlueGreenStrategy) -> Option<i64> {
    strategy
        .auto_promotion_seconds
        .filter(|s| *s > 0)
        .map(i64::from)
}
