//! The Rollout planner driven through Argo's own scenarios on the in-memory cluster: plan → apply the
//! writes → make pods available → plan again, with the Event sequences, counts and status Argo's
//! end-to-end suite asserts.

use std::collections::BTreeMap;

use canaryd::api::rollout::{CanaryStep, RolloutStatus};
use canaryd::engine::rollout::conditions;
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd_testkit::rollout::memory::*;
use serde_json::json;

#[test]
fn abort_retry_promote_replays_argos_event_sequence() {
    // Argo's TestRolloutAbortRetryPromote: 1 replica, setWeight 50 then pause 3s.
    let mut c = MemoryCluster::new(rollout(
        1,
        json!({"steps": [{"setWeight": 50}, {"pause": {"duration": "3s"}}]}),
    ));
    run(&mut c, at(0));
    assert_eq!(
        reasons_since(&c, 0),
        [
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "RolloutCompleted"
        ]
    );
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));

    let mark = c.events.len();
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(
        reasons_since(&c, mark),
        [
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "RolloutStepCompleted",
            "RolloutPaused"
        ]
    );
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
    assert_eq!(replicas(&c), [1, 1]);

    let mark = c.events.len();
    c.patch_status(|s| s.abort = true);
    run(&mut c, at(11));
    assert_eq!(
        reasons_since(&c, mark),
        ["ScalingReplicaSet", "RolloutAborted"]
    );
    assert_eq!(
        phase(&c),
        (
            "Degraded".into(),
            "RolloutAborted: Rollout aborted update to revision 2".into()
        )
    );
    assert_eq!(replicas(&c), [1, 0]);
    assert_eq!(c.status().current_step_index, Some(0));
    assert_eq!(
        c.reconcile(at(11)).desired_weight,
        0,
        "an aborted canary gets no traffic"
    );

    let mark = c.events.len();
    c.patch_status(|s| s.abort = false);
    run(&mut c, at(12));
    assert_eq!(
        reasons_since(&c, mark),
        ["ScalingReplicaSet", "RolloutStepCompleted", "RolloutPaused"]
    );
    assert_eq!(phase(&c).0, "Paused");
    assert_eq!(replicas(&c), [1, 1]);
    let waiting = c.reconcile(at(13));
    assert_eq!(
        waiting.wake_at,
        Some(at(15)),
        "woken when the 3 s pause from 12 s ends"
    );
    assert_eq!(waiting.desired_weight, 50);

    let mark = c.events.len();
    // Argo's now.After(end) on whole-second stamps: the pause is over at 15 s, not a second later.
    run(&mut c, at(15));
    assert_eq!(
        reasons_since(&c, mark),
        [
            "RolloutStepCompleted",
            "RolloutResumed",
            "ScalingReplicaSet",
            "RolloutCompleted"
        ]
    );
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    assert_eq!(replicas(&c), [0, 1]);
    let s = c.status();
    assert_eq!(s.stable_rs, s.current_pod_hash);
    assert_eq!(condition(&s, "Healthy"), ("True", "RolloutHealthy"));
    assert_eq!(condition(&s, "Completed"), ("True", "RolloutCompleted"));
    let messages: Vec<&str> = c.events.iter().map(|e| e.message.as_str()).collect();
    assert!(
        messages.contains(&"Rollout step 2/2 completed (pause: 3s)"),
        "{messages:#?}"
    );
    assert!(
        messages.contains(&"Rollout is paused (CanaryPauseStep)"),
        "{messages:#?}"
    );
}

#[test]
fn a_first_deploy_goes_straight_to_full_with_the_stable_hash_recorded_at_once() {
    let mut c = MemoryCluster::new(rollout(
        3,
        json!({"steps": [{"setWeight": 20}, {"pause": {}}]}),
    ));
    let first = c.reconcile(at(0));
    assert_eq!(first.status.current_step_index, Some(0));
    let second = c.reconcile(at(1));
    // Before any pod is ready: promoted, every step counted done.
    assert_eq!(second.status.stable_rs, second.status.current_pod_hash);
    assert_eq!(second.status.current_step_index, Some(2));
    assert_eq!(second.status.phase, "Progressing");
    assert_eq!(second.status.message, "more replicas need to be updated");
    c.make_available();
    run(&mut c, at(2));
    let s = c.status();
    assert_eq!(s.phase, "Healthy");
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.available_replicas,
            s.hpa_replicas
        ),
        (3, 3, 3, 3)
    );
    assert_eq!(s.selector, "app=web");
    assert_eq!(s.observed_generation, "1");
    let rs = &c.replica_sets[0];
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(format!("web-{}", s.current_pod_hash).as_str())
    );
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Rollout", Some(true))
    );
    let annotations = rs.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations["rollout.argoproj.io/revision"], "1");
    assert_eq!(annotations["rollout.argoproj.io/desired-replicas"], "3");
    let selector = rs
        .spec
        .as_ref()
        .unwrap()
        .selector
        .match_labels
        .as_ref()
        .unwrap();
    assert_eq!(selector["rollouts-pod-template-hash"], s.current_pod_hash);
}

#[test]
fn set_weight_steps_scale_by_argos_approximation_and_wait_for_availability() {
    // 10 replicas, default 25% surge (3) and unavailable (2); setWeight 20 → canary 2, stable 8.
    let mut c = MemoryCluster::new(rollout(
        10,
        json!({"steps": [{"setWeight": 20}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    c.reconcile(at(1)); // creates the new ReplicaSet
    c.reconcile(at(1)); // stable first: down to 8, as 2 of 10 may be unavailable
    assert_eq!(replicas(&c), [8, 0]);
    c.reconcile(at(1)); // then the canary, within the surge
    assert_eq!(replicas(&c), [8, 2]);
    c.make_unavailable(&c.replica_sets[1].metadata.name.clone().unwrap());
    c.reconcile(at(3));
    assert_eq!(
        c.status().current_step_index,
        Some(0),
        "the canary pods are not available yet"
    );
    run(&mut c, at(4));
    assert_eq!(replicas(&c), [8, 2]);
    assert_eq!(c.status().current_step_index, Some(1));
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
}

/// Sets (or with `None` clears) the `ReplicaFailure` condition of the `index`th ReplicaSet, as its controller
/// would when a quota refuses its pods (`FailedCreate`) or their deletion fails (`FailedDelete`).
fn replica_failure(c: &mut MemoryCluster, index: usize, failed: Option<(&str, &str)>) {
    let status = c.replica_sets[index]
        .status
        .get_or_insert_with(Default::default);
    status.conditions = failed.map(|(reason, message)| {
        vec![
            serde_json::from_value(json!({
                "type": "ReplicaFailure", "status": "True", "reason": reason, "message": message,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }))
            .expect("a condition"),
        ]
    });
}

#[test]
fn a_replica_sets_replica_failure_is_the_rollouts_the_new_ones_first_as_argos_get_replica_failures()
{
    let mut c = MemoryCluster::new(rollout(
        4,
        json!({"steps": [{"setWeight": 50}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    c.reconcile(at(1)); // creates the new ReplicaSet
    replica_failure(&mut c, 0, Some(("FailedDelete", "stable: cannot delete")));
    replica_failure(&mut c, 1, Some(("FailedCreate", "canary: exceeded quota")));
    c.reconcile(at(2));
    let failure = |c: &MemoryCluster| {
        let s = c.status();
        let found = s.conditions.iter().find(|c| c.type_ == "ReplicaFailure");
        found.map(|c| {
            let t = c.last_update_time.0;
            (c.status.clone(), c.reason.clone(), c.message.clone(), t)
        })
    };
    let then: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("a time");
    let copied =
        |reason: &str, message: &str| Some(("True".into(), reason.into(), message.into(), then));
    assert_eq!(
        failure(&c),
        copied("FailedCreate", "canary: exceeded quota")
    );
    replica_failure(&mut c, 1, None);
    c.reconcile(at(3));
    assert_eq!(failure(&c), copied("FailedDelete", "stable: cannot delete"));
    replica_failure(&mut c, 0, None);
    c.reconcile(at(4));
    assert_eq!(failure(&c), None);
}

#[test]
fn scaling_while_paused_keeps_the_weight_as_argo_does() {
    // Argo's TestRolloutScalingWhenPaused: setWeight 25, pause{} at 1 replica → 1/1; scale to 8 → 2/6.
    let mut c = MemoryCluster::new(rollout(
        1,
        json!({"steps": [{"setWeight": 25}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(1));
    assert_eq!(replicas(&c), [1, 1]);
    c.edit_spec(|s| s.replicas = Some(8));
    run(&mut c, at(2));
    assert_eq!(replicas(&c), [6, 2]);
    for rs in &c.replica_sets {
        let desired =
            &rs.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/desired-replicas"];
        assert_eq!(
            desired, "8",
            "every scaled ReplicaSet records the Rollout's replicas"
        );
    }
    assert_eq!(phase(&c).0, "Paused");
}

#[test]
fn spec_paused_holds_every_replica_set_and_reads_manually_paused() {
    let mut c = MemoryCluster::new(rollout(
        2,
        json!({"steps": [{"setWeight": 50}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    c.edit_spec(|s| s.paused = Some(true));
    set_image(&mut c, "web:2");
    run(&mut c, at(1));
    assert_eq!(replicas(&c), [2, 0]);
    assert_eq!(phase(&c), ("Paused".into(), "manually paused".into()));
    assert_eq!(
        condition(&c.status(), "Progressing"),
        ("Unknown", "RolloutPaused")
    );
    assert_eq!(condition(&c.status(), "Paused"), ("True", "RolloutPaused"));
    c.edit_spec(|s| s.paused = None);
    run(&mut c, at(2));
    assert_eq!(replicas(&c), [1, 1], "50% of 2 replicas is one pod each");
}

#[test]
fn a_progress_deadline_degrades_the_rollout_and_progress_recovers_it() {
    let mut r = rollout(1, json!({"steps": [{"setWeight": 50}, {"pause": {}}]}));
    r.spec.progress_deadline_seconds = Some(30);
    let mut c = MemoryCluster::new(r);
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    c.reconcile(at(10));
    let plan = c.reconcile(at(10));
    let canary = c.replica_sets[1].metadata.name.clone().unwrap();
    c.make_unavailable(&canary);
    assert!(
        plan.wake_at.is_some_and(|w| w <= at(41)),
        "{:?}",
        plan.wake_at
    );
    c.reconcile(at(20)); // the canary's pods exist: that is progress, the deadline restarts
    assert_eq!(c.status().phase, "Progressing");
    c.reconcile(at(45));
    assert_eq!(c.status().phase, "Progressing");
    c.reconcile(at(55));
    assert_eq!(
        phase(&c),
        (
            "Degraded".into(),
            format!("ProgressDeadlineExceeded: ReplicaSet {canary:?} has timed out progressing.")
        )
    );
    run(&mut c, at(50));
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
}

#[test]
fn progress_deadline_abort_aborts_a_stuck_update() {
    let mut r = rollout(1, json!({"steps": [{"setWeight": 50}, {"pause": {}}]}));
    r.spec.progress_deadline_seconds = Some(30);
    r.spec.progress_deadline_abort = Some(true);
    let mut c = MemoryCluster::new(r);
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    c.reconcile(at(10));
    c.reconcile(at(10));
    let canary = c.replica_sets[1].metadata.name.clone().unwrap();
    c.make_unavailable(&canary);
    c.reconcile(at(20));
    c.reconcile(at(55));
    c.reconcile(at(56));
    let s = c.status();
    assert!(s.abort);
    assert_eq!(
        s.message,
        format!(
            "RolloutAborted: Rollout aborted update to revision 2: ReplicaSet {canary:?} has timed out progressing."
        )
    );
}

#[test]
fn unsupported_strategies_and_missing_templates_are_invalid_spec_never_a_crash() {
    let mut r = rollout(1, json!({"steps": [{"setHeaderRoute": {"name": "h"}}]}));
    r.spec.strategy.as_mut().unwrap().blue_green =
        serde_json::from_value(json!({"activeService": "a"})).ok();
    let mut c = MemoryCluster::new(r);
    let plan = c.reconcile(at(0));
    assert!(plan.writes.is_empty());
    assert_eq!(
        plan.wake_at,
        Some(at(20)),
        "an invalid Rollout is looked at again"
    );
    assert_eq!(plan.status.phase, "Degraded");
    assert_eq!(
        plan.status.message,
        "InvalidSpec: The Rollout \"web\" is invalid: spec.strategy.strategy: Invalid value: \"blueGreen: true canary: true\": Multiple Strategies can not be listed"
    );

    let mut c = MemoryCluster::new(rollout(
        1,
        json!({"analysis": {"templates": [{"templateName": "later"}]}}),
    ));
    let plan = c.reconcile(at(0));
    assert!(
        plan.status.message.contains(
            "spec.strategy.canary.analysis.templates: Invalid value: \"later\": AnalysisTemplate 'later' not found"
        ),
        "{}",
        plan.status.message
    );
    with_analysis_template(
        &mut c,
        "later",
        json!([{"name": "m", "provider": {"prometheus": {"query": "up"}}}]),
    );
    c.templates
        .get_mut(&(false, "later".to_string()))
        .unwrap()
        .args = None;
    run(&mut c, at(1));
    assert_eq!(c.status().phase, "Healthy");
    assert!(conditions::get(&c.status(), "InvalidSpec").is_none());
}

/// A Healthy Rollout Argo Rollouts left, with `extra` in its canary strategy, and Argo's ReplicaSet, whose pod
/// template (as the API server returns it) carries `injected` labels recorded in `rollout.argoproj.io/ephemeral-metadata`,
/// after one reconcile.
fn handed_over_from_argo(extra: serde_json::Value, injected: serde_json::Value) -> MemoryCluster {
    let steps: Vec<CanaryStep> =
        serde_json::from_value(json!([{"setWeight": 20}, {"pause": {}}])).unwrap();
    let mut canary = json!({"steps": steps});
    canary
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let mut r = rollout(2, canary);
    r.metadata.annotations = Some(BTreeMap::from([(
        "rollout.argoproj.io/revision".into(),
        "1".into(),
    )]));
    let argo_hash = "674d8cf959";
    r.status = Some(RolloutStatus {
        stable_rs: argo_hash.into(),
        current_pod_hash: argo_hash.into(),
        current_step_hash: canaryd::engine::rollout::hash::step_hash(Some(&steps)),
        current_step_index: Some(2),
        observed_generation: "1".into(),
        ..Default::default()
    });
    let mut labels = json!({"app": "web", "rollouts-pod-template-hash": argo_hash});
    labels
        .as_object_mut()
        .unwrap()
        .extend(injected.as_object().unwrap().clone());
    let mut annotations = json!({"rollout.argoproj.io/revision": "1"});
    if !injected.as_object().unwrap().is_empty() {
        annotations["rollout.argoproj.io/ephemeral-metadata"] =
            json!(json!({"labels": injected}).to_string());
    }
    let mut c = MemoryCluster::new(r);
    c.replica_sets.push(serde_json::from_value(json!({
        "metadata": {"name": format!("web-{argo_hash}"), "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"app": "web", "rollouts-pod-template-hash": argo_hash},
                     "annotations": annotations},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web", "rollouts-pod-template-hash": argo_hash}},
                 "template": {"metadata": {"creationTimestamp": null, "labels": labels},
                              "spec": {"containers": [{"name": "web", "image": "web:1", "resources": {},
                                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                                        "imagePullPolicy": "IfNotPresent"}],
                                       "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
                                       "securityContext": {}, "terminationGracePeriodSeconds": 30}}},
        "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}
    })).unwrap());
    run(&mut c, at(0));
    c
}

fn assert_adopted(c: &MemoryCluster) {
    assert_eq!(
        c.replica_sets.len(),
        1,
        "the ReplicaSet Argo created is the Rollout's"
    );
    let s = c.status();
    assert_eq!(
        (
            s.phase.as_str(),
            s.current_pod_hash.as_str(),
            s.current_step_index
        ),
        ("Healthy", "674d8cf959", Some(2))
    );
    assert!(!c.events.iter().any(|e| e.reason == "NewReplicaSetCreated"));
}

#[test]
fn a_rollout_started_by_argo_is_adopted_without_a_new_replica_set_or_a_step_restart() {
    assert_adopted(&handed_over_from_argo(json!({}), json!({})));
}

/// Argo's `FindNewReplicaSet` takes the ephemeral metadata it injected out of a ReplicaSet's template before
/// comparing it with the Rollout's.
#[test]
fn find_new_replica_set_ignores_the_stable_metadata_argo_injected() {
    let c = handed_over_from_argo(
        json!({"stableMetadata": {"labels": {"role": "stable"}}}),
        json!({"role": "stable"}),
    );
    assert_adopted(&c);
}

#[test]
fn old_replica_sets_beyond_the_history_limit_are_deleted() {
    let mut r = rollout(1, json!({"steps": [{"setWeight": 50}]}));
    r.spec.revision_history_limit = Some(1);
    let mut c = MemoryCluster::new(r);
    run(&mut c, at(0));
    for (i, image) in ["web:2", "web:3", "web:4"].into_iter().enumerate() {
        set_image(&mut c, image);
        run(&mut c, at(10 * (i as i64 + 1)));
    }
    assert_eq!(c.status().phase, "Healthy");
    let revisions: Vec<String> = c
        .replicas_by_revision()
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(
        revisions,
        ["3", "4"],
        "one old revision kept besides the stable one"
    );
}

#[test]
fn hostile_numbers_and_shapes_in_the_spec_are_refused_or_planned_never_a_panic() {
    let mut r = rollout(
        i32::MAX,
        json!({"maxSurge": "100%", "steps": [{"setWeight": 50}]}),
    );
    r.status = Some(RolloutStatus {
        collision_count: Some(i32::MAX),
        current_step_index: Some(i32::MAX),
        ..Default::default()
    });
    r.metadata.annotations = Some(BTreeMap::from([(
        "rollout.argoproj.io/revision".into(),
        i64::MAX.to_string(),
    )]));
    let mut c = MemoryCluster::new(r);
    for second in 0..5 {
        c.reconcile(at(second));
        c.make_available();
    }
    assert!(!c.status().phase.is_empty());

    let mut c = MemoryCluster::new(rollout(1, json!({"steps": [{"setWeight": 50}]})));
    c.edit_spec(|s| s.template = Some(json!({"metadata": {"labels": {"app": "web"}}, "spec": []})));
    let plan = c.reconcile(at(0));
    assert!(plan.writes.is_empty());
    assert!(
        plan.status
            .message
            .starts_with("InvalidSpec: The Rollout \"web\" is invalid: spec.template: "),
        "{}",
        plan.status.message
    );
}

#[test]
fn an_update_in_the_middle_of_a_rollout_drains_the_intermediate_revision() {
    // Argo's TestCanaryWithPausedRollout: paused at rev 2, then rev 3 → rev1=3, rev2=0, rev3=1.
    let mut c = MemoryCluster::new(rollout(
        3,
        json!({"steps": [{"setWeight": 10}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(
        (replicas(&c), phase(&c).0),
        (vec![3, 1], "Paused".to_string())
    );
    set_image(&mut c, "web:3");
    run(&mut c, at(20));
    assert_eq!(replicas(&c), [3, 0, 1]);
    let s = c.status();
    assert_eq!(
        (s.phase.as_str(), s.current_step_index),
        ("Paused", Some(1))
    );
    assert_eq!(
        c.rollout.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"],
        "3"
    );
}
