//! When the daemon stores a Rollout's planned status. At once when anything a person or a tool acts on changed:
//! phase, step, conditions (but `Available`), pause state, abort, canary weights, the stable and canary hashes,
//! a run's status. A change only in what follows the ReplicaSets' pods (`replicas`, `updatedReplicas`,
//! `readyReplicas`, `availableReplicas`, `HPAReplicas`, the message they make under an unchanged phase, the
//! `Available` condition (Argo's `RolloutAvailable`: whether `availableReplicas` reaches the minimum, a function
//! of the counts that nothing in Argo reads back, held with them so the stored status never shows one without
//! the other), and the `lastUpdateTime` a condition's progress moves, Argo's RolloutProgressing) is stored at
//! most once every [`COUNTS_EVERY`] per Rollout. Argo writes the status on every change it computes, one write
//! per count seen as pods come up; this is a deliberate difference, to spare the API server those writes. The
//! counts a stored status shows are never more than [`COUNTS_EVERY`] behind (plus the whole second stamps are
//! rounded to): a change held back names the moment it is due, and the reconcile loop wakes the Rollout then.

use jiff::{SignedDuration, Timestamp};

use crate::api::reasons::rollout as cond;
use crate::api::rollout::{RolloutCondition, RolloutStatus};

/// How long a change of the counts alone may wait after the Rollout's last status write.
pub const COUNTS_EVERY: SignedDuration = SignedDuration::from_secs(5);

/// Whether and when a planned status is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusWrite {
    /// The planned status is the stored one.
    Unchanged,
    /// Store it now.
    Now,
    /// Only the counts changed and the last write is recent: store it at this moment, unless a change that is
    /// stored at once comes first.
    At(Timestamp),
}

/// When `planned` is stored over `stored`, the status last written at `last_written` (`None`: not known, as
/// after a restart, or not kept, as in a rehearsal), at `now`.
pub fn status_write(
    stored: Option<&RolloutStatus>,
    planned: &RolloutStatus,
    last_written: Option<Timestamp>,
    now: Timestamp,
) -> StatusWrite {
    if stored == Some(planned) {
        return StatusWrite::Unchanged;
    }
    let (Some(stored), Some(Ok(due))) = (stored, last_written.map(|t| t.checked_add(COUNTS_EVERY)))
    else {
        return StatusWrite::Now;
    };
    if due > now && only_counts_differ(stored, planned) {
        StatusWrite::At(due)
    } else {
        StatusWrite::Now
    }
}

/// Whether `planned` differs from `stored` only in what follows the ReplicaSets' pods.
fn only_counts_differ(stored: &RolloutStatus, planned: &RolloutStatus) -> bool {
    let beyond_counts = |s: &RolloutStatus| -> Vec<RolloutCondition> {
        let mut conditions = s.conditions.clone();
        conditions.retain(|c| c.type_ != cond::AVAILABLE);
        conditions
    };
    let (stored_conditions, planned_conditions) = (beyond_counts(stored), beyond_counts(planned));
    let same_conditions = stored_conditions.len() == planned_conditions.len()
        && planned_conditions
            .iter()
            .all(|p| stored_conditions.iter().any(|s| same_but_progress(s, p)));
    if stored.phase != planned.phase || !same_conditions {
        return false;
    }
    let mut as_stored = planned.clone();
    as_stored.replicas = stored.replicas;
    as_stored.updated_replicas = stored.updated_replicas;
    as_stored.ready_replicas = stored.ready_replicas;
    as_stored.available_replicas = stored.available_replicas;
    as_stored.hpa_replicas = stored.hpa_replicas;
    as_stored.message.clone_from(&stored.message);
    as_stored.conditions.clone_from(&stored.conditions);
    as_stored == *stored
}

/// The same condition, but for the `lastUpdateTime` progress moves.
fn same_but_progress(stored: &RolloutCondition, planned: &RolloutCondition) -> bool {
    RolloutCondition {
        last_update_time: stored.last_update_time.clone(),
        ..planned.clone()
    } == *stored
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::rollout::CanaryStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("a time")
    }

    fn progressing(updated: i64) -> RolloutCondition {
        RolloutCondition {
            type_: "Progressing".to_string(),
            status: "True".to_string(),
            reason: "ReplicaSetUpdated".to_string(),
            message: "ReplicaSet \"web-2\" is progressing.".to_string(),
            last_update_time: Time(at(updated)),
            last_transition_time: Time(at(0)),
        }
    }

    fn stored() -> RolloutStatus {
        RolloutStatus {
            phase: "Progressing".to_string(),
            message: "more replicas need to be updated".to_string(),
            replicas: 6,
            updated_replicas: 1,
            current_step_index: Some(0),
            conditions: vec![progressing(10)],
            ..RolloutStatus::default()
        }
    }

    #[test]
    fn counts_moved_by_pods_coming_up_wait_for_the_bound() {
        let mut planned = stored();
        planned.updated_replicas = 2;
        planned.available_replicas = 2;
        planned.message = "updated replicas are still becoming available".to_string();
        planned.conditions = vec![progressing(12)];
        let write = |now| status_write(Some(&stored()), &planned, Some(at(10)), now);
        assert_eq!(write(at(12)), StatusWrite::At(at(10) + COUNTS_EVERY));
        assert_eq!(write(at(15)), StatusWrite::Now, "due");
        let unknown = status_write(Some(&stored()), &planned, None, at(12));
        assert_eq!(unknown, StatusWrite::Now, "no write known");
    }

    fn available(status: &str, at_second: i64) -> RolloutCondition {
        RolloutCondition {
            type_: cond::AVAILABLE.to_string(),
            status: status.to_string(),
            reason: cond::AVAILABLE_REASON.to_string(),
            message: if status == "True" {
                cond::AVAILABLE_MESSAGE
            } else {
                cond::NOT_AVAILABLE_MESSAGE
            }
            .to_string(),
            last_update_time: Time(at(at_second)),
            last_transition_time: Time(at(at_second)),
        }
    }

    #[test]
    fn the_available_condition_waits_with_the_counts_it_follows() {
        let mut before = stored();
        before.conditions.push(available("True", 0));
        let mut planned = before.clone();
        planned.available_replicas = 3;
        planned.conditions[1] = available("False", 12);
        let write =
            |planned: &RolloutStatus, now| status_write(Some(&before), planned, Some(at(10)), now);
        assert_eq!(
            write(&planned, at(12)),
            StatusWrite::At(at(10) + COUNTS_EVERY)
        );
        assert_eq!(write(&planned, at(15)), StatusWrite::Now, "due");
        planned.conditions[0].reason = "NewReplicaSetAvailable".to_string();
        assert_eq!(
            write(&planned, at(12)),
            StatusWrite::Now,
            "another condition too"
        );
    }

    #[test]
    fn anything_beyond_the_counts_is_written_at_once() {
        let changes: [fn(&mut RolloutStatus); 5] = [
            |s| s.current_step_index = Some(1),
            |s| s.phase = "Paused".to_string(),
            |s| s.conditions[0].reason = "NewReplicaSetAvailable".to_string(),
            |s| s.abort = true,
            |s| {
                s.canary = CanaryStatus {
                    current_experiment: "x".to_string(),
                    ..CanaryStatus::default()
                }
            },
        ];
        for change in changes {
            let mut planned = stored();
            planned.available_replicas = 1;
            change(&mut planned);
            let write = status_write(Some(&stored()), &planned, Some(at(10)), at(11));
            assert_eq!(write, StatusWrite::Now, "{planned:#?}");
        }
        let write = status_write(Some(&stored()), &stored(), Some(at(10)), at(11));
        assert_eq!(write, StatusWrite::Unchanged);
    }
}
