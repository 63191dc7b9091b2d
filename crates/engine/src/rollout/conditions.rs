//! Rollout conditions, phase and message exactly as Argo computes them (`utils/conditions`,
//! `CalculateRolloutPhase`): the reasons and messages kubectl-argo-rollouts and Argo CD read. Owns the
//! strings and the rules that pick them; it does not decide steps or scaling.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::Rollout;
use crate::api::rollout::{BlueGreenStrategy, RolloutCondition, RolloutSpec, RolloutStatus};

// The names are spelled once, in `api::reasons`; this module owns the rules that pick them.
pub use crate::api::reasons::rollout::*;

pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> RolloutCondition {
    RolloutCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_update_time: Time(now),
        last_transition_time: Time(now),
    }
}

pub fn get<'a>(status: &'a RolloutStatus, type_: &str) -> Option<&'a RolloutCondition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// Argo's SetRolloutCondition: the same status and reason is no change (times kept); a new reason with
/// the same status keeps lastTransitionTime. The condition moves to the end. True when it changed.
pub fn set(status: &mut RolloutStatus, mut new: RolloutCondition) -> bool {
    if let Some(current) = get(status, &new.type_) {
        if current.status == new.status && current.reason == new.reason {
            return false;
        }
        if current.status == new.status {
            new.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove(status, &new.type_);
    status.conditions.push(new);
    true
}

pub fn remove(status: &mut RolloutStatus, type_: &str) {
    status.conditions.retain(|c| c.type_ != type_);
}

/// `Completed`: the current pod hash is the stable one.
pub fn completed(status: &RolloutStatus) -> bool {
    !status.stable_rs.is_empty() && status.stable_rs == status.current_pod_hash
}

/// Argo's CalculateRolloutPhase for a canary: first match wins.
pub fn phase(spec: &RolloutSpec, status: &RolloutStatus) -> (&'static str, String) {
    let replicas = spec.replicas.unwrap_or(1);
    for c in &status.conditions {
        if c.type_ == INVALID_SPEC {
            return ("Degraded", format!("{INVALID_SPEC}: {}", c.message));
        }
        if c.reason == ROLLOUT_ABORTED || c.reason == TIMED_OUT {
            return ("Degraded", format!("{}: {}", c.reason, c.message));
        }
    }
    if spec.paused == Some(true) {
        return ("Paused", "manually paused".to_string());
    }
    if let Some(p) = status.pause_conditions.first() {
        return ("Paused", p.reason.clone());
    }
    if spec.restart_at.is_some() && status.restarted_at != spec.restart_at {
        return ("Progressing", "rollout is restarting".to_string());
    }
    if status.updated_replicas < replicas {
        return (
            "Progressing",
            "more replicas need to be updated".to_string(),
        );
    }
    if status.available_replicas < status.updated_replicas {
        return (
            "Progressing",
            "updated replicas are still becoming available".to_string(),
        );
    }
    if let Some(blue_green) = spec.blue_green() {
        return blue_green_phase(blue_green, status);
    }
    // Without a router old pods go as the canary grows; with one they wait out their scale-down delay.
    let routed = spec.canary().is_some_and(|c| c.traffic_routing.is_some());
    if !routed && status.replicas > status.updated_replicas {
        return (
            "Progressing",
            "old replicas are pending termination".to_string(),
        );
    }
    if status.stable_rs.is_empty() || !fully_promoted(status) {
        return (
            "Progressing",
            "waiting for all steps to complete".to_string(),
        );
    }
    ("Healthy", String::new())
}

/// The end of CalculateRolloutPhase for blueGreen: the active Service's cutover, then the promotion to stable
/// (waiting for the post-promotion analysis while it runs).
fn blue_green_phase(
    strategy: &BlueGreenStrategy,
    status: &RolloutStatus,
) -> (&'static str, String) {
    let blue_green = status.blue_green.clone().unwrap_or_default();
    if blue_green.active_selector.is_empty()
        || blue_green.active_selector != status.current_pod_hash
    {
        return ("Progressing", "active service cutover pending".to_string());
    }
    if status.stable_rs.is_empty() || !fully_promoted(status) {
        // Argo's waitingForBlueGreenPostPromotionAnalysis.
        let analysing = strategy.post_promotion_analysis.is_some()
            && blue_green
                .post_promotion_analysis_run_status
                .is_none_or(|r| {
                    !matches!(
                        r.status.as_str(),
                        "Successful" | "Failed" | "Error" | "Inconclusive"
                    )
                });
        let message = if analysing {
            "waiting for analysis to complete"
        } else {
            "waiting for post-promotion verification to complete"
        };
        return ("Progressing", message.to_string());
    }
    ("Healthy", String::new())
}

/// The phase and message a client shows for `rollout` (Argo's `GetRolloutPhase`, which kubectl-argo-rollouts
/// and Argo CD read): Progressing while the controller has not yet observed the latest spec or is unpausing,
/// else what the controller stored, and [`phase`] worked out from the status when it stored none.
pub fn shown_phase(rollout: &Rollout) -> (String, String) {
    let none = RolloutStatus::default();
    let status = rollout.status.as_ref().unwrap_or(&none);
    // A status.observedGeneration that is not a number is an old controller's hash: taken as observed.
    let generation = rollout.metadata.generation.unwrap_or(0);
    if status
        .observed_generation
        .parse::<i64>()
        .is_ok_and(|observed| observed < generation)
    {
        let message = "waiting for rollout spec update to be observed";
        return ("Progressing".to_string(), message.to_string());
    }
    if status.controller_pause && status.pause_conditions.is_empty() {
        let message = "waiting for rollout to unpause";
        return ("Progressing".to_string(), message.to_string());
    }
    if !status.phase.is_empty() {
        return (status.phase.clone(), status.message.clone());
    }
    let (phase, message) = phase(&rollout.spec, status);
    (phase.to_string(), message)
}

/// Argo's report of a new ReplicaSet the API server refused to create (a quota, an admission webhook, RBAC:
/// `getNewReplicaSet`, then `patchCondition`): the message of its Warning Event, and the status `rollout`
/// holds with the Progressing condition False `ReplicaSetCreateError` saying it, observedGeneration, phase
/// and message worked out again; nothing else changes. `error` is the API server's message. The create that
/// succeeds later sets Progressing to `NewReplicaSetCreated` again.
pub fn create_refused(
    rollout: &Rollout,
    replica_set: &str,
    error: &str,
    now: Timestamp,
) -> (RolloutStatus, String) {
    let message = format!("Failed to create new replica set {replica_set:?}: {error}");
    let mut status = rollout.status.clone().unwrap_or_default();
    let refused = condition(PROGRESSING, "False", FAILED_RS_CREATE, &message, now);
    set(&mut status, refused);
    status.observed_generation = rollout.metadata.generation.unwrap_or(0).to_string();
    let (phase, shown) = phase(&rollout.spec, &status);
    status.phase = phase.to_string();
    status.message = shown;
    (status, message)
}

/// Argo's createInvalidRolloutCondition: `prev` with the InvalidSpec condition saying `error` (Argo's
/// `The Rollout "NAME" is invalid: ...`; replaced, times and all, when the message changes), observedGeneration,
/// phase (Degraded) and message worked out again; nothing else changes. For the planner's spec checks and for a
/// Rollout that cannot be decoded at all (`rollout` then holds only its metadata).
pub fn invalid_spec(
    rollout: &Rollout,
    mut prev: RolloutStatus,
    error: &str,
    now: Timestamp,
) -> RolloutStatus {
    let name = rollout.metadata.name.as_deref().unwrap_or_default();
    let message = format!("The Rollout {name:?} is invalid: {error}");
    if get(&prev, INVALID_SPEC).is_some_and(|c| c.message != message) {
        remove(&mut prev, INVALID_SPEC);
    }
    set(
        &mut prev,
        condition(INVALID_SPEC, "True", INVALID_SPEC, &message, now),
    );
    prev.observed_generation = rollout.metadata.generation.unwrap_or(0).to_string();
    let (phase, shown) = phase(&rollout.spec, &prev);
    prev.phase = phase.to_string();
    prev.message = shown;
    prev
}

/// Argo's IsFullyPromoted for a canary: the stable ReplicaSet is the current one.
pub fn fully_promoted(status: &RolloutStatus) -> bool {
    status.stable_rs == status.current_pod_hash
}

/// Argo's RolloutHealthy: every pod updated and available, every step done, no old pods left.
pub fn healthy(
    replicas: i32,
    steps: usize,
    generation_observed: bool,
    status: &RolloutStatus,
) -> bool {
    let all_steps = steps == 0
        || status
            .current_step_index
            .is_none_or(|i| i as usize == steps);
    status.updated_replicas == replicas
        && status.available_replicas == replicas
        && generation_observed
        && all_steps
        && completed(status)
        && status.replicas == replicas
}

/// Argo's RolloutHealthy for blueGreen: every pod updated and available, and the active (and preview)
/// Service selecting the new ReplicaSet.
pub fn healthy_blue_green(
    replicas: i32,
    strategy: &BlueGreenStrategy,
    generation_observed: bool,
    status: &RolloutStatus,
) -> bool {
    let selectors = status.blue_green.clone().unwrap_or_default();
    let preview_done = strategy
        .preview_service
        .as_deref()
        .is_none_or(str::is_empty)
        || selectors.preview_selector == status.current_pod_hash;
    status.updated_replicas == replicas
        && status.available_replicas == replicas
        && generation_observed
        && selectors.active_selector == status.current_pod_hash
        && preview_done
}

/// Argo's RolloutTimedOut: the Progressing condition is ProgressDeadlineExceeded already, or reported no
/// progress for longer than the deadline (never while paused or aborted).
pub fn timed_out(status: &RolloutStatus, deadline_seconds: i64, now: Timestamp) -> bool {
    let Some(c) = get(status, PROGRESSING) else {
        return false;
    };
    if c.reason == ROLLOUT_ABORTED || c.reason == ROLLOUT_PAUSED {
        return false;
    }
    if c.reason == TIMED_OUT {
        return true;
    }
    deadline(c, deadline_seconds) < now
}

/// When the Progressing condition's last progress runs out of time.
pub fn deadline(progressing: &RolloutCondition, deadline_seconds: i64) -> Timestamp {
    let from = progressing.last_update_time.0;
    from.checked_add(jiff::SignedDuration::from_secs(deadline_seconds))
        .unwrap_or(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn setting_the_same_status_and_reason_keeps_the_old_times() {
        let mut s = RolloutStatus::default();
        assert!(set(
            &mut s,
            condition(PROGRESSING, "True", RS_UPDATED, "a", at(0))
        ));
        assert!(!set(
            &mut s,
            condition(PROGRESSING, "True", RS_UPDATED, "b", at(5))
        ));
        assert_eq!(s.conditions[0].message, "a");
        assert!(set(
            &mut s,
            condition(PROGRESSING, "True", NEW_RS_AVAILABLE, "c", at(9))
        ));
        assert_eq!(s.conditions[0].last_transition_time, Time(at(0)));
        assert_eq!(s.conditions[0].last_update_time, Time(at(9)));
    }

    /// Argo's `GetRolloutPhase`: an unobserved spec and an unpausing Rollout come before the stored phase,
    /// which comes before the one worked out from the status.
    #[test]
    fn shown_phase_follows_get_rollout_phase() {
        let mut rollout: Rollout = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "generation": 3},
            "spec": {"replicas": 1, "strategy": {"canary": {}}},
            "status": {"observedGeneration": "2", "phase": "Healthy", "stableRS": "a", "currentPodHash": "a"},
        }))
        .unwrap();
        let waiting = "waiting for rollout spec update to be observed";
        assert_eq!(
            shown_phase(&rollout),
            ("Progressing".into(), waiting.into())
        );
        let status = rollout.status.as_mut().unwrap();
        status.observed_generation = "3".into();
        status.controller_pause = true;
        let unpausing = "waiting for rollout to unpause";
        assert_eq!(
            shown_phase(&rollout),
            ("Progressing".into(), unpausing.into())
        );
        let status = rollout.status.as_mut().unwrap();
        status.controller_pause = false;
        assert_eq!(shown_phase(&rollout), ("Healthy".into(), String::new()));
        let status = rollout.status.as_mut().unwrap();
        status.phase = String::new();
        let more = "more replicas need to be updated";
        assert_eq!(shown_phase(&rollout), ("Progressing".into(), more.into()));
    }

    #[test]
    fn phase_follows_argos_order() {
        let mut s = RolloutStatus {
            replicas: 2,
            updated_replicas: 1,
            available_replicas: 1,
            stable_rs: "a".into(),
            current_pod_hash: "b".into(),
            ..Default::default()
        };
        let running = RolloutSpec::default();
        let paused = RolloutSpec {
            paused: Some(true),
            ..Default::default()
        };
        assert_eq!(
            phase(&running, &s),
            ("Progressing", "old replicas are pending termination".into())
        );
        assert_eq!(phase(&paused, &s).1, "manually paused");
        let restarting = RolloutSpec {
            restart_at: Some(Time(at(3))),
            ..Default::default()
        };
        assert_eq!(phase(&restarting, &s).1, "rollout is restarting");
        s.restarted_at = Some(Time(at(3)));
        assert_eq!(
            phase(&restarting, &s).1,
            "old replicas are pending termination"
        );
        set(
            &mut s,
            condition(
                PROGRESSING,
                "False",
                ROLLOUT_ABORTED,
                "Rollout aborted update to revision 2",
                at(0),
            ),
        );
        assert_eq!(
            phase(&paused, &s),
            (
                "Degraded",
                "RolloutAborted: Rollout aborted update to revision 2".into()
            )
        );
    }
}
