//! The blue-green ReplicaSets (Argo's reconcileBlueGreenReplicaSets and NewRSNewReplicas for blueGreen): the
//! stable one at full size, the new one at `previewReplicaCount` until it is to take the traffic (at full
//! size after), the others kept `scaleDownDelaySeconds` after they stop being selected, then scaled to 0;
//! an aborted preview waits `abortScaleDownDelaySeconds`. The delays' bookkeeping is `traffic`'s, shared
//! with the traffic-routed canary.

use super::super::conditions as cond;
use super::super::context::Reconcile;
use super::super::hash::HASH_LABEL;
use crate::api::rollout::{BlueGreenStrategy, RolloutStatus};

impl Reconcile<'_, '_> {
    /// Argo's NewRSNewReplicas for blueGreen: `previewReplicaCount` while the new ReplicaSet is a preview,
    /// the Rollout's replicas once it is active, fully promoted, or past its preview checkpoint.
    pub(super) fn new_count(&self, strategy: &BlueGreenStrategy) -> i32 {
        let Some(preview) = strategy.preview_replica_count else {
            return self.replicas;
        };
        let prev = self.prev_blue_green();
        let active = self
            .rss
            .iter()
            .position(|r| !prev.active_selector.is_empty() && r.hash == prev.active_selector);
        if active.is_none() || active == self.new_rs || self.prev.promote_full {
            return self.replicas;
        }
        if self.new_hash() != self.prev.current_pod_hash {
            return preview;
        }
        let paused = self.spec_paused() || !self.prev.pause_conditions.is_empty();
        if !paused && prev.scale_up_preview_check_point {
            return self.replicas;
        }
        preview
    }

    /// Argo's ReadyForPause: the new ReplicaSet is at its count, every pod available.
    pub(super) fn ready_for_pause(&self, strategy: &BlueGreenStrategy) -> bool {
        let count = self.new_count(strategy);
        self.new_rs
            .is_some_and(|i| self.rss[i].pods.spec == count && self.rss[i].pods.available == count)
    }

    /// Argo's IsSaturated: the new ReplicaSet runs the Rollout's replicas, recorded as such, all available.
    pub(super) fn saturated(&self) -> bool {
        self.new_rs.is_some_and(|i| {
            let rs = &self.rss[i];
            rs.pods.spec == self.replicas
                && rs.desired_annotation == Some(self.replicas)
                && rs.pods.available == self.replicas
        })
    }

    /// Argo's reconcileBlueGreenReplicaSets: deadlines off the new and stable ReplicaSets, the stable one at
    /// full size, the new one at [`Self::new_count`] (an aborted one after its delay), the others down after
    /// theirs, then the revision history. Unlike the canary, the reconcile goes on after scaling.
    pub(in crate::rollout) fn blue_green_replica_sets(&mut self, strategy: &BlueGreenStrategy) {
        self.remove_scale_down_deadlines();
        if let Some(s) = self.stable_rs {
            self.scale_to(s, self.replicas);
        }
        if let Some(n) = self.new_rs.filter(|n| Some(*n) != self.stable_rs) {
            let count = self.new_count(strategy);
            if let Some(count) = self.abort_scale_down(n, count) {
                self.scale_to(n, count);
            }
        }
        self.scale_down_old_blue_green(strategy);
        self.revision_history();
    }

    /// Argo's scaleDownOldReplicaSetsForBlueGreen: nothing while an inconclusive analysis pauses or a
    /// post-promotion run is awaited; else the others with pods, newest revision first, each after its
    /// scale-down delay.
    fn scale_down_old_blue_green(&mut self, strategy: &BlueGreenStrategy) {
        let inconclusive = self
            .prev
            .pause_conditions
            .iter()
            .any(|p| p.reason == cond::INCONCLUSIVE_ANALYSIS);
        if inconclusive || self.waits_for_post_promotion(strategy) {
            return;
        }
        let mut old: Vec<usize> = (0..self.rss.len())
            .filter(|i| self.is_other(*i) && self.rss[*i].pods.spec > 0)
            .collect();
        old.sort_by_key(|i| std::cmp::Reverse(self.rss[*i].revision));
        self.scale_down_old_routed(&old, i32::MAX);
    }

    /// Argo's replica counts for a blue-green status: those of the ReplicaSet the active Service selects
    /// (`active`), its selector with it; when it selects none, every ReplicaSet's pods (HPA replicas and
    /// available; the rest as `base_status` counted them).
    pub(in crate::rollout) fn count_active(&self, active: &str, new: &mut RolloutStatus) {
        let Some(rs) = self
            .rss
            .iter()
            .find(|r| !active.is_empty() && r.hash == active)
        else {
            new.hpa_replicas = self.sum(|r| r.pods.current);
            new.available_replicas = self.sum(|r| r.pods.available);
            return;
        };
        let mut selector = self.o.rollout.spec.selector.clone().unwrap_or_default();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(HASH_LABEL.to_string(), rs.hash.clone());
        new.selector = crate::api::meta::selector_string(&selector);
        new.hpa_replicas = rs.pods.current;
        new.available_replicas = rs.pods.available;
        new.ready_replicas = rs.ready;
    }
}
