//! `status.duration`, Argo's timing of a rollout attempt (calculateStatusDuration in rollout/sync.go): when
//! the attempt started (a new pod template or steps, or a retry after an abort), when and how it ended
//! (Promoted once the new ReplicaSet is stable with all its pods, Aborted, Superseded by another change,
//! RolledBack or FastRolledBack), and how long it waited for a person (an indefinite pause step, an
//! Inconclusive analysis, `spec.paused`). Owns those transitions; the facts they read are the reconcile's.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions as cond;
use super::context::Reconcile;
use crate::api::rollout::{RolloutDurationStatus, RolloutStatus};

/// What one reconcile knows that the duration's transitions depend on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The first deploy, or the pod template or steps changed since the last status.
    pub pod_spec_changed: bool,
    /// The new ReplicaSet is the stable one.
    pub promoted: bool,
    /// The new ReplicaSet has all the Rollout's replicas available.
    pub reached_desired: bool,
    pub aborted: bool,
    /// The last status said the update was aborted.
    pub was_aborted: bool,
    /// `RolledBack` or `FastRolledBack` when the new template is an older one (Argo's isRollback).
    pub rollback: Option<&'static str>,
    /// Waiting for a person: spec.paused, an indefinite pause step, an Inconclusive analysis.
    pub manual_pause: bool,
    pub invalid_spec: bool,
}

/// The duration status after a reconcile that found `facts`, from the one before (`prev`) and the one the
/// new status carries so far (`current`, a copy of `prev`).
pub fn next(
    prev: Option<&RolloutDurationStatus>,
    current: Option<RolloutDurationStatus>,
    facts: &Facts,
    now: Timestamp,
) -> Option<RolloutDurationStatus> {
    if facts.invalid_spec {
        return current;
    }
    let completed = facts.promoted && facts.reached_desired;
    let mut paused = prev.is_some_and(|d| d.manual_pause_started_at.is_some());
    let in_progress = prev.is_some_and(|d| d.rollout_started_at.is_some() && !is_completed(d));
    let mut duration = current;
    if in_progress && let Some(d) = duration.as_mut() {
        if facts.pod_spec_changed {
            match facts.rollback {
                Some(how) => d.completion_status = Some(how.to_string()),
                None => complete(d, now, "Superseded"),
            }
        }
        if completed && !is_completed(d) {
            let how = d
                .completion_status
                .clone()
                .unwrap_or_else(|| "Promoted".into());
            complete(d, now, &how);
            return duration;
        } else if facts.aborted && !is_completed(d) {
            let how = d
                .completion_status
                .clone()
                .unwrap_or_else(|| "Aborted".into());
            complete(d, now, &how);
        }
    }
    if duration
        .as_ref()
        .is_none_or(|d| is_completed(d) && !completed)
    {
        paused = false;
        let retry = !facts.aborted && facts.was_aborted;
        if (facts.pod_spec_changed && !completed) || retry {
            duration = Some(RolloutDurationStatus {
                rollout_started_at: Some(Time(now)),
                ..Default::default()
            });
        }
    }
    let mut d = duration?;
    if is_completed(&d) {
        return Some(d);
    }
    if paused && !facts.manual_pause {
        if let Some(Time(started)) = d.manual_pause_started_at.take() {
            let total = d.total_manual_pause_duration_seconds.unwrap_or(0) + seconds(started, now);
            d.total_manual_pause_duration_seconds = Some(total);
        }
    } else if !paused && facts.manual_pause && d.manual_pause_started_at.is_none() {
        d.manual_pause_started_at = Some(Time(now));
    }
    Some(d)
}

fn is_completed(d: &RolloutDurationStatus) -> bool {
    d.rollout_started_at.is_some() && d.finished_at.is_some()
}

/// Argo's CompleteRollout: a manual pause still running is added to the total, then the end is recorded.
fn complete(d: &mut RolloutDurationStatus, now: Timestamp, how: &str) {
    if let Some(Time(started)) = d.manual_pause_started_at.take() {
        let total = d.total_manual_pause_duration_seconds.unwrap_or(0) + seconds(started, now);
        d.total_manual_pause_duration_seconds = Some(total);
    }
    d.finished_at = Some(Time(now));
    d.completion_status = Some(how.to_string());
}

/// Whole seconds from `from` to `to` (Go's Duration.Seconds truncated, as Argo stores them).
fn seconds(from: Timestamp, to: Timestamp) -> i64 {
    to.duration_since(from).as_secs()
}

impl Reconcile<'_, '_> {
    /// `new` with its duration brought up to date from what this reconcile found.
    pub(super) fn duration(&self, new: &RolloutStatus) -> Option<RolloutDurationStatus> {
        let new_rs = self.new_rs.map(|i| &self.rss[i]);
        let progressing = cond::get(&self.prev, cond::PROGRESSING);
        let facts = Facts {
            // Before the ReplicaSets are read (the pause-conditions path) the spec is known unchanged: that
            // path runs only for a generation already observed.
            pod_spec_changed: self.prev.current_pod_hash.is_empty()
                || (self.new_rs.is_some() && self.template_or_steps_changed()),
            promoted: new.stable_rs == new.current_pod_hash,
            reached_desired: new_rs.is_some_and(|rs| rs.pods.available >= self.replicas),
            aborted: new.abort,
            was_aborted: progressing.is_some_and(|c| c.reason == cond::ROLLOUT_ABORTED),
            rollback: self.rollback_kind(),
            manual_pause: self.waits_for_a_person(new),
            invalid_spec: cond::get(new, cond::INVALID_SPEC).is_some(),
        };
        next(
            self.prev.duration.as_ref(),
            new.duration.clone(),
            &facts,
            self.o.now,
        )
    }

    /// Argo's requiresManualAction over the pause conditions, or spec.paused.
    fn waits_for_a_person(&self, new: &RolloutStatus) -> bool {
        let indefinite_step = || {
            let (step, _) = super::steps::current(self.steps, &self.prev);
            step.and_then(|i| self.steps.get(i))
                .and_then(|s| s.pause.as_ref())
                .is_some_and(|p| p.duration.is_none())
        };
        self.spec_paused()
            || new.pause_conditions.iter().any(|p| {
                p.reason == cond::INCONCLUSIVE_ANALYSIS
                    || (p.reason == cond::CANARY_PAUSE_STEP && indefinite_step())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).expect("a time")
    }

    fn started(s: i64) -> RolloutDurationStatus {
        RolloutDurationStatus {
            rollout_started_at: Some(Time(at(s))),
            ..Default::default()
        }
    }

    fn step(
        prev: Option<&RolloutDurationStatus>,
        facts: Facts,
        s: i64,
    ) -> Option<RolloutDurationStatus> {
        next(prev, prev.cloned(), &facts, at(s))
    }

    #[test]
    fn a_new_template_starts_an_attempt_that_ends_promoted_with_its_manual_pause_counted() {
        let changed = Facts {
            pod_spec_changed: true,
            ..Default::default()
        };
        let d = step(None, changed, 0).expect("started");
        assert_eq!(d, started(0));
        let paused = Facts {
            manual_pause: true,
            ..Default::default()
        };
        let d = step(Some(&d), paused, 10).expect("paused");
        assert_eq!(d.manual_pause_started_at, Some(Time(at(10))));
        let resumed = step(Some(&d), Facts::default(), 70).expect("resumed");
        assert_eq!(resumed.total_manual_pause_duration_seconds, Some(60));
        let done = Facts {
            promoted: true,
            reached_desired: true,
            ..Default::default()
        };
        let d = step(Some(&resumed), done.clone(), 100).expect("done");
        assert_eq!(
            (d.finished_at.clone(), d.completion_status.as_deref()),
            (Some(Time(at(100))), Some("Promoted"))
        );
        assert_eq!(
            step(Some(&d), done, 200),
            Some(d),
            "a completed attempt is left as it is"
        );
    }

    #[test]
    fn a_change_mid_attempt_supersedes_it_and_starts_the_next() {
        let changed = Facts {
            pod_spec_changed: true,
            ..Default::default()
        };
        assert_eq!(step(Some(&started(0)), changed, 50), Some(started(50)));
    }

    #[test]
    fn an_abort_ends_the_attempt_and_a_retry_starts_another() {
        let aborted = Facts {
            aborted: true,
            ..Default::default()
        };
        let d = step(Some(&started(0)), aborted, 30).expect("aborted");
        assert_eq!(d.completion_status.as_deref(), Some("Aborted"));
        let retry = Facts {
            was_aborted: true,
            ..Default::default()
        };
        assert_eq!(step(Some(&d), retry, 40), Some(started(40)));
    }

    #[test]
    fn a_rollback_is_classified_while_it_progresses_and_ends_so() {
        let back = Facts {
            pod_spec_changed: true,
            rollback: Some("FastRolledBack"),
            ..Default::default()
        };
        let d = step(Some(&started(0)), back, 20).expect("rolling back");
        assert_eq!(
            (d.finished_at.as_ref(), d.completion_status.as_deref()),
            (None, Some("FastRolledBack"))
        );
        let done = Facts {
            promoted: true,
            reached_desired: true,
            ..Default::default()
        };
        let d = step(Some(&d), done, 25).expect("rolled back");
        assert_eq!(d.completion_status.as_deref(), Some("FastRolledBack"));
    }

    #[test]
    fn an_invalid_spec_changes_nothing() {
        let facts = Facts {
            invalid_spec: true,
            pod_spec_changed: true,
            ..Default::default()
        };
        assert_eq!(step(None, facts, 0), None);
    }
}
