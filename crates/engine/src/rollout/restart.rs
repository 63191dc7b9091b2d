//! Argo's pod restarter (`spec.restartAt`, `kubectl argo rollouts restart`): once restartAt has passed,
//! the Rollout's pods created before it are evicted, as many at a time as availability allows (at least
//! one, at most maxUnavailable), looking again every 30 s until none is left; then `status.restartedAt`
//! records it. Owns that rule; the eviction itself (which a PodDisruptionBudget may refuse) is the edge's.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::context::Reconcile;
use super::{Write, basic_canary};
use crate::api::Controlled;
use crate::api::Rollout;

/// How often Argo looks again while pods still wait for their restart.
const RECHECK_SECONDS: i64 = 30;

fn created(pod: &Pod) -> Option<Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Kubernetes' IsPodAvailable: Ready for at least minReadySeconds, and not being deleted.
fn available(pod: &Pod, min_ready_seconds: i64, now: Timestamp) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let Some(ready) = ready.filter(|c| c.status == "True") else {
        return false;
    };
    if min_ready_seconds <= 0 {
        return true;
    }
    ready
        .last_transition_time
        .as_ref()
        .and_then(|t| {
            t.0.checked_add(SignedDuration::from_secs(min_ready_seconds))
                .ok()
        })
        .is_some_and(|since| since < now)
}

/// Whether a reconcile of `rollout` at `now` restarts pods: `spec.restartAt` has passed and
/// `status.restartedAt` does not record it yet. Only then are the Rollout's pods needed.
pub fn restart_due(rollout: &Rollout, now: Timestamp) -> bool {
    let Some(restart_at) = &rollout.spec.restart_at else {
        return false;
    };
    let done = rollout
        .status
        .as_ref()
        .and_then(|s| s.restarted_at.as_ref());
    // Argo's restartAt.Before(now) on the clock; on whole-second stamps (`now` truncated, restartAt a whole
    // second as the plugin writes it) that is `restartAt <= now`.
    restart_at.0 <= now && done != Some(restart_at)
}

impl Reconcile<'_, '_> {
    /// Argo's MaxUnavailable: a canary's from its fenceposts; a blue-green Rollout's `maxUnavailable` (Argo's
    /// default `"25"` when unset, a string and so 25%) rounded down, 0 when it cannot be read, at most
    /// `replicas`.
    fn max_unavailable(&self) -> i32 {
        if let Some(blue_green) = self.blue_green {
            let default = IntOrString::String(basic_canary::DEFAULT.to_string());
            let written = blue_green.max_unavailable.as_ref().unwrap_or(&default);
            let resolved = basic_canary::int_or_percent(written, self.replicas, false).ok();
            return resolved.unwrap_or(0).clamp(0, self.replicas.max(0));
        }
        let canary = self.canary.cloned().unwrap_or_default();
        basic_canary::fenceposts(
            canary.max_surge.as_ref(),
            canary.max_unavailable.as_ref(),
            self.replicas,
        )
        .map_or(1, |f| f.unavailable)
    }

    /// Argo's RolloutPodRestarter.Reconcile; true when pods were evicted (the reconcile then ends, as the
    /// ReplicaSets' availability no longer counts them).
    pub(super) fn restart_pods(&mut self) -> bool {
        let Some(restart_at) = self.o.rollout.spec.restart_at.clone() else {
            return false;
        };
        if !restart_due(self.o.rollout, self.o.now) {
            // Not yet: look again when it comes.
            if restart_at.0 > self.o.now {
                self.wake_at(restart_at.0);
            }
            return false;
        }
        let Some(all) = self.o.pods else {
            // Not read here (every eviction was just refused): look again as Argo's restarter does.
            self.recheck();
            return false;
        };
        let owned = |pod: &&Pod| {
            (pod.metadata.controller()).is_some_and(|o| self.rss.iter().any(|rs| rs.name == o.name))
        };
        let pods: Vec<&Pod> = all.iter().filter(owned).collect();
        let min_ready = i64::from(self.o.rollout.spec.min_ready_seconds.unwrap_or(0));
        let total = self.sum(|r| r.pods.spec);
        let max_unavailable = self.max_unavailable();
        let available_now = pods
            .iter()
            .filter(|p| available(p, min_ready, self.o.now))
            .count();
        let effective_min = self
            .replicas
            .max(total)
            .saturating_sub(max_unavailable.max(1));
        let mut can_restart =
            i64::try_from(available_now).unwrap_or(i64::MAX) - i64::from(effective_min);
        let (mut needs, mut restarted) = (0, 0);
        for pod in pods {
            if created(pod).is_some_and(|c| c >= restart_at.0) {
                continue;
            }
            needs += 1;
            if can_restart <= 0 || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            self.writes.push(Write::EvictPod {
                name: pod.metadata.name.clone().unwrap_or_default(),
            });
            can_restart -= 1;
            restarted += 1;
        }
        if needs == restarted {
            self.new.restarted_at = Some(restart_at);
        } else {
            self.recheck();
        }
        restarted > 0
    }

    /// Look again in [`RECHECK_SECONDS`] while pods still wait for their restart.
    fn recheck(&mut self) {
        if let Ok(at) = self
            .o
            .now
            .checked_add(SignedDuration::from_secs(RECHECK_SECONDS))
        {
            self.wake_at(at);
        }
    }
}
