//! Argo's rollback rules (isRollback, isFastRollback, isRollbackWithinWindow): going back to the stable
//! template, or to a ReplicaSet at most `spec.rollbackWindow.revisions` older than the stable one, skips
//! the steps and the analysis. Owns the detection; what is skipped is decided where the steps and runs are.

use super::context::Reconcile;

impl Reconcile<'_, '_> {
    /// The new ReplicaSet was created before the stable one, and fewer than `rollbackWindow.revisions`
    /// ReplicaSets were created between them.
    pub(super) fn rollback_within_window(&self) -> bool {
        let (Some(new), Some(stable)) = (self.new_rs, self.stable_rs) else {
            return false;
        };
        let (Some(new_at), Some(stable_at)) = (self.rss[new].created, self.rss[stable].created)
        else {
            return false;
        };
        if new_at >= stable_at {
            return false;
        }
        let window = self
            .o
            .rollout
            .spec
            .rollback_window
            .as_ref()
            .and_then(|w| w.revisions)
            .unwrap_or(0);
        if window <= 0 {
            return false;
        }
        let between = self
            .rss
            .iter()
            .filter(|r| r.created.is_some_and(|at| new_at < at && at < stable_at))
            .count();
        i64::try_from(between).is_ok_and(|n| n < i64::from(window))
    }

    /// Back to the stable template, or within the rollback window.
    pub(super) fn fast_rollback(&self) -> bool {
        let to_stable = self
            .new_rs
            .is_some_and(|i| self.rss[i].hash == self.prev.stable_rs);
        self.stable_rs.is_some() && (to_stable || self.rollback_within_window())
    }

    /// Argo's isRollback and isFastRollback for the duration: back to the stable template or to an older
    /// ReplicaSet than the stable one; fast when to the stable template or within the window.
    pub(super) fn rollback_kind(&self) -> Option<&'static str> {
        let (Some(new), Some(stable)) = (self.new_rs, self.stable_rs) else {
            return None;
        };
        let to_stable = self.rss[new].hash == self.prev.stable_rs;
        let older = matches!(
            (self.rss[new].created, self.rss[stable].created),
            (Some(n), Some(s)) if n < s
        );
        if !(to_stable || older) {
            None
        } else if to_stable || self.rollback_within_window() {
            Some("FastRolledBack")
        } else {
            Some("RolledBack")
        }
    }
}
