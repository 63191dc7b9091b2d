//! The blue-green status (Argo's syncRolloutStatusBlueGreen): the Services' selectors in
//! `status.blueGreen`, when the new ReplicaSet becomes stable (shouldFullPromote for blueGreen: after the
//! switch, and the post-promotion analysis's success), the
//! `scaleUpPreviewCheckPoint` trip-wire, and the counts of the active ReplicaSet. Conditions, phase and the
//! pause bookkeeping are applied by `persist`, as for a canary.

use super::super::context::{Reconcile, RunState};
use super::Sides;
use crate::api::AnalysisPhase;
use crate::api::rollout::{BlueGreenStatus, BlueGreenStrategy};

impl Reconcile<'_, '_> {
    /// `post`: the post-promotion run current after this reconcile's analysis.
    pub(super) fn blue_green_status(
        &mut self,
        strategy: &BlueGreenStrategy,
        sides: &Sides,
        post: Option<&RunState>,
    ) {
        let mut new = self.base_status();
        let mut blue_green = new.blue_green.take().unwrap_or_default();
        if self.pod_template_changed() {
            self.reset(&mut new);
            blue_green = BlueGreenStatus::default();
        }
        if self.prev.promote_full || self.rollback_within_window() {
            self.pause.clear = true;
            self.pause.remove_abort = true;
        }
        blue_green.preview_selector = sides.preview.clone();
        blue_green.active_selector = sides.active.clone();
        let current = new.current_pod_hash.clone();
        if let Some(reason) =
            self.should_promote_blue_green(strategy, &blue_green, &current, sides, post)
        {
            self.promote_stable(&mut new, &reason);
            blue_green.scale_up_preview_check_point = false;
        } else {
            blue_green.scale_up_preview_check_point = self.scale_up_preview_check_point(strategy);
        }
        self.count_active(&sides.active, &mut new);
        new.blue_green = Some(blue_green);
        self.persist(new);
    }

    /// Argo's shouldFullPromote for blueGreen: why the new ReplicaSet becomes the stable one now, if it does.
    fn should_promote_blue_green(
        &self,
        strategy: &BlueGreenStrategy,
        status: &BlueGreenStatus,
        current_pod_hash: &str,
        sides: &Sides,
        post: Option<&RunState>,
    ) -> Option<String> {
        // The first deploy is stable before the active Service selects it, so that it can be switched.
        if self.stable_rs.is_none() || status.active_selector.is_empty() {
            return Some("Initial deploy".to_string());
        }
        if status.active_selector != current_pod_hash {
            return None;
        }
        if self.prev.promote_full {
            return Some("Full promotion requested".to_string());
        }
        if self.blue_green_fast_rollback(sides) {
            if self.rollback_within_window() {
                return Some("Rollback within window".to_string());
            }
            return Some("Fast rollback".to_string());
        }
        if self.pause.aborted(&self.prev) {
            return None;
        }
        let post_succeeded = post.is_some_and(|r| r.phase == Some(AnalysisPhase::Successful));
        if strategy.post_promotion_analysis.is_some() && !post_succeeded {
            return None;
        }
        Some("Completed blue-green update".to_string())
    }

    /// Argo's calculateScaleUpPreviewCheckPoint: with `previewReplicaCount`, set once the pause is over
    /// and the preview pods are all available, and kept until promotion or a new template.
    fn scale_up_preview_check_point(&self, strategy: &BlueGreenStrategy) -> bool {
        let Some(preview) = strategy.preview_replica_count else {
            return false;
        };
        if self.prev_blue_green().scale_up_preview_check_point {
            return true;
        }
        if !self.completed_pre_promotion(strategy) || !self.completed_blue_green_pause(strategy) {
            return false;
        }
        self.new_rs
            .is_some_and(|i| self.rss[i].pods.available == preview)
    }
}
