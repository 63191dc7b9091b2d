//! Argo's scaling-only reconcile (isScalingEvent / syncReplicasOnly): when `spec.replicas` changed and
//! nothing else needs doing, the new and stable ReplicaSets' `rollout.argoproj.io/desired-replicas`
//! annotation no longer matches it. Then only the ReplicaSets are scaled to the new count and the status
//! keeps its step, pause and analysis as they were, so scaling a paused Rollout neither restarts nor
//! advances its steps. Owns that detection and that short reconcile; the counts are `workloads`'s.

use super::context::Reconcile;

impl Reconcile<'_, '_> {
    /// A new or stable ReplicaSet with pods records another spec.replicas than the Rollout's.
    pub(super) fn scaling_event(&self) -> bool {
        [self.new_rs, self.stable_rs]
            .into_iter()
            .flatten()
            .map(|i| &self.rss[i])
            .filter(|rs| rs.pods.spec > 0)
            .any(|rs| rs.desired_annotation.is_some_and(|d| d != self.replicas))
    }

    /// Scales, then writes the status as it was with the counts Argo refreshes here (available and
    /// HPA replicas) and the conditions and phase they imply.
    pub(super) fn sync_replicas_only(&mut self) {
        self.scale();
        let mut new = self.prev.clone().into_owned();
        new.available_replicas = self.sum(|r| r.pods.available);
        new.hpa_replicas = self.sum(|r| r.pods.current);
        if self.blue_green.is_some() {
            // The active ReplicaSet's, when the active Service selects one.
            let active = self
                .prev
                .blue_green
                .clone()
                .unwrap_or_default()
                .active_selector;
            let mut counted = new.clone();
            self.count_active(&active, &mut counted);
            new.available_replicas = counted.available_replicas;
            new.hpa_replicas = counted.hpa_replicas;
        }
        self.persist(new);
    }
}
