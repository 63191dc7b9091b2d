//! The parity corpus: scenarios off the happy path where canaryd once differed from Argo Rollouts, each stating
//! the scenario, Argo's outcome with the Argo function it comes from, and what canaryd does, on the in-memory
//! cluster. Related scenarios of Argo's e2e suite (test/e2e: TestCanaryScaleDownDelay, TestEphemeralMetadata,
//! abort/retry/promote) are replayed where they touch the same rules.

use std::collections::BTreeMap;

use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd_testkit::rollout::memory::*;
use serde_json::{Value, json};

const DEADLINE: &str = "scale-down-deadline";

/// `replicas` pods behind an Istio route with canary and stable Services.
fn routed(replicas: i32, mut canary: Value) -> MemoryCluster {
    canary["canaryService"] = json!("web-canary");
    canary["stableService"] = json!("web-stable");
    canary["trafficRouting"] = json!({"istio": {"virtualService": {"name": "web-vsvc"}}});
    let mut c = MemoryCluster::new(rollout(replicas, canary));
    let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    c.add_service("web-canary", selector.clone());
    c.add_service("web-stable", selector);
    c
}

/// The annotation `key` of the ReplicaSet of `revision`.
fn rs_annotation(c: &MemoryCluster, revision: &str, key: &str) -> Option<String> {
    let rs = c.replica_sets.iter().find(|r| {
        r.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"] == revision
    })?;
    rs.metadata.annotations.as_ref()?.get(key).cloned()
}

/// Reconciles at `now` until nothing changes, every pod available except those of `stuck` (a crash loop).
fn run_stuck(c: &mut MemoryCluster, now: jiff::Timestamp, stuck: &str) {
    for _ in 0..30 {
        c.make_available();
        c.make_unavailable(stuck);
        let before = c.rollout.status.clone();
        let plan = c.reconcile(now);
        if plan.writes.is_empty() && c.rollout.status == before {
            return;
        }
    }
    panic!("the planner did not settle: {:#?}", c.status());
}

/// Issue item 1. Scenario: a routed Rollout with the default 30 s scaleDownDelaySeconds is promoted to
/// revision 2; revision 1 waits out its delay and is scaled to 0. Revision 3's pods never become ready.
/// Argo (scaleReplicaSet): the full scale-down deletes revision 1's `scale-down-deadline`, so
/// isWaitingForReplicaSetScaleDown is false afterwards and the stuck update times out
/// (ProgressDeadlineExceeded) and, with progressDeadlineAbort, is aborted (evaluateProgressDeadlineAbort).
/// canaryd before: the annotation stayed on the empty ReplicaSet and revision 3 stayed Progressing forever.
#[test]
fn a_full_scale_down_drops_the_scale_down_deadline_so_a_stuck_update_times_out_as_in_argos_scale_replica_set()
 {
    let mut c = routed(2, json!({"steps": [{"setWeight": 50}, {"pause": {}}]}));
    c.edit_spec(|s| {
        s.progress_deadline_seconds = Some(30);
        s.progress_deadline_abort = Some(true);
    });
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(20));
    assert_eq!(phase(&c).0, "Healthy");
    assert!(
        rs_annotation(&c, "1", DEADLINE).is_some(),
        "revision 1 waits for its scaleDownDelaySeconds"
    );
    run(&mut c, at(60));
    assert_eq!(replicas(&c), [0, 2]);
    assert_eq!(
        rs_annotation(&c, "1", DEADLINE),
        None,
        "Argo's scaleReplicaSet deletes the deadline on a full scale-down"
    );

    set_image(&mut c, "web:3");
    c.reconcile(at(100));
    let stuck = c.replica_sets[2].metadata.name.clone().unwrap();
    run_stuck(&mut c, at(100), &stuck);
    assert_eq!(phase(&c).0, "Progressing");
    run_stuck(&mut c, at(140), &stuck);
    let s = c.status();
    assert_eq!(
        condition(&s, "Progressing"),
        ("False", "RolloutAborted"),
        "{s:#?}"
    );
    assert_eq!(
        s.message,
        format!(
            "RolloutAborted: Rollout aborted update to revision 3: ReplicaSet {stuck:?} has timed out progressing."
        )
    );
}

/// Issue item 2. Scenario: `kubectl argo rollouts abort` on a Healthy Rollout whose update is fully promoted.
/// Argo (newRolloutContext: IsFullyPromoted and aborted → pauseContext.RemoveAbort): the abort is cleared and
/// the Rollout stays Healthy, with no RolloutAborted Event. canaryd before: Degraded, "Rollout aborted update to
/// revision 1", until a retry.
#[test]
fn an_abort_of_a_fully_promoted_rollout_is_cleared_and_it_stays_healthy_as_argos_remove_abort() {
    let mut c = MemoryCluster::new(rollout(
        2,
        json!({"steps": [{"setWeight": 50}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    assert_eq!(phase(&c).0, "Healthy");
    let mark = c.events.len();
    c.patch_status(|s| s.abort = true);
    run(&mut c, at(10));
    let s = c.status();
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    assert!(!s.abort && s.aborted_at.is_none(), "{s:#?}");
    assert_eq!(condition(&s, "Progressing").1, "NewReplicaSetAvailable");
    assert!(
        !reasons_since(&c, mark).contains(&"RolloutAborted".to_string()),
        "{:?}",
        reasons_since(&c, mark)
    );

    // Argo's TestRolloutAbortRetryPromote: mid-update the abort holds, as before.
    set_image(&mut c, "web:2");
    run(&mut c, at(20));
    c.patch_status(|s| s.abort = true);
    run(&mut c, at(30));
    assert_eq!(phase(&c).0, "Degraded");
    assert!(c.status().abort);
}

/// Issue item 4, first part. Scenario: while revision 2 runs, the Rollout's minReadySeconds and an annotation of
/// its own change. Argo (syncReplicaSetRevision, SetNewReplicaSetAnnotations): the existing new ReplicaSet gets
/// both, and its revision is recorded in its revision-history as on any change. canaryd before: only a
/// ReplicaSet created afterwards had them.
#[test]
fn the_new_replica_set_follows_the_rollouts_min_ready_seconds_and_annotations_as_argos_sync_replica_set_revision()
 {
    let mut c = MemoryCluster::new(rollout(
        2,
        json!({"steps": [{"setWeight": 50}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    c.edit_spec(|s| s.min_ready_seconds = Some(5));
    c.rollout
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("team".into(), "payments".into());
    run(&mut c, at(20));
    let new_rs = &c.replica_sets[1];
    assert_eq!(new_rs.spec.as_ref().unwrap().min_ready_seconds, Some(5));
    assert_eq!(rs_annotation(&c, "2", "team").as_deref(), Some("payments"));
    assert_eq!(
        rs_annotation(&c, "2", "rollout.argoproj.io/revision-history").as_deref(),
        Some("2")
    );
    assert_eq!(
        rs_annotation(&c, "1", "team"),
        None,
        "only the new ReplicaSet follows"
    );
    assert_eq!(c.replica_sets.len(), 2, "no new ReplicaSet for either");
    assert_eq!(phase(&c).0, "Paused");
    assert!(
        c.plan(at(21)).writes.is_empty(),
        "once in line, nothing more is written"
    );
}

/// The labels of the running pods of the ReplicaSet of `revision`, without the pod-template hash, one string
/// per pod.
fn running_pod_labels(c: &MemoryCluster, revision: &str) -> Vec<String> {
    let rs = c
        .replica_sets
        .iter()
        .find(|r| {
            r.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"] == revision
        })
        .unwrap();
    let name = rs.metadata.name.clone().unwrap();
    c.pods
        .iter()
        .filter(|p| p.metadata.owner_references.as_ref().unwrap()[0].name == name)
        .map(|p| {
            let labels = p.metadata.labels.iter().flatten();
            let shown: Vec<String> = labels
                .filter(|(k, _)| *k != "rollouts-pod-template-hash")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            shown.join(",")
        })
        .collect()
}

/// Issue item 4, second part; Argo's e2e TestEphemeralMetadata (canary). Scenario: canaryMetadata `role:
/// canary`, stableMetadata `role: stable`; revision 2 runs as the canary, its canaryMetadata changes to `role2:
/// canary2`, then it is promoted. Argo (syncEphemeralMetadata, updatePodMetadataWithRetry): the running pods
/// follow at each step, so after the promotion revision 2's pods read `role=stable`. canaryd before: only the
/// ReplicaSets' pod templates changed, and the running pods kept `role=canary`.
#[test]
fn running_pods_change_role_with_their_replica_set_as_argos_sync_ephemeral_metadata() {
    let mut c = MemoryCluster::new(rollout(
        2,
        json!({"canaryMetadata": {"labels": {"role": "canary"}},
               "stableMetadata": {"labels": {"role": "stable"}},
               "steps": [{"setWeight": 50}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    assert_eq!(running_pod_labels(&c, "1"), ["app=web,role=stable"; 2]);
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(phase(&c).0, "Paused");
    assert_eq!(running_pod_labels(&c, "2"), ["app=web,role=canary"]);
    assert_eq!(running_pod_labels(&c, "1"), ["app=web,role=stable"]);

    c.edit_spec(|s| {
        let canary = s.strategy.as_mut().unwrap().canary.as_mut().unwrap();
        canary.canary_metadata =
            serde_json::from_value(json!({"labels": {"role2": "canary2"}})).ok();
    });
    run(&mut c, at(20));
    assert_eq!(
        running_pod_labels(&c, "2"),
        ["app=web,role2=canary2"],
        "the old canary label is taken off the running pod"
    );

    let before = c.pods.len();
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(30));
    assert_eq!(phase(&c).0, "Healthy");
    assert_eq!(running_pod_labels(&c, "2"), ["app=web,role=stable"; 2]);
    assert!(
        c.pods.len() <= before + 1,
        "relabelled, not replaced: {} pods",
        c.pods.len()
    );
    assert!(c.plan(at(31)).writes.is_empty(), "settled");

    // The e2e's last step: a new stableMetadata reaches the stable's running pods.
    c.edit_spec(|s| {
        let canary = s.strategy.as_mut().unwrap().canary.as_mut().unwrap();
        canary.stable_metadata =
            serde_json::from_value(json!({"labels": {"role2": "stable2"}})).ok();
    });
    run(&mut c, at(40));
    assert_eq!(running_pod_labels(&c, "2"), ["app=web,role2=stable2"; 2]);
}

/// Issue item 4, third part. Scenario: a Rollout without `spec.replicas`. Argo (syncHandler): the default, 1,
/// is written into the spec before anything else (an HPA scaling the Rollout reads it there), then the Rollout
/// is reconciled as usual. canaryd before: 1 was used but never written.
#[test]
fn a_missing_spec_replicas_is_written_as_one_first_as_argos_sync_handler() {
    let mut r = rollout(1, json!({"steps": [{"setWeight": 50}, {"pause": {}}]}));
    r.spec.replicas = None;
    let mut c = MemoryCluster::new(r);
    let plan = c.reconcile(at(0));
    assert!(
        matches!(
            plan.writes.as_slice(),
            [canaryd::engine::rollout::Write::RolloutReplicas { replicas: 1 }]
        ),
        "{:?}",
        plan.writes
    );
    assert!(c.replica_sets.is_empty(), "nothing else this reconcile");
    assert_eq!(c.rollout.spec.replicas, Some(1));
    assert_eq!(c.rollout.metadata.generation, Some(2), "a spec change");
    run(&mut c, at(1));
    assert_eq!(phase(&c).0, "Healthy");
    assert_eq!(replicas(&c), [1]);
}

/// Argo's e2e TestCanaryScaleDownDelay, with scaleDownDelayRevisionLimit 1 and no steps: revision 1 waits with a
/// deadline after revision 2's promotion; at revision 3 only revision 2 may wait, so revision 1 is scaled to 0
/// and, by Argo's scaleReplicaSet, loses its deadline; going back to revision 2's template re-uses its
/// ReplicaSet as revision 4, whose deadline removeScaleDownDeadlines takes off, while revision 3 waits.
#[test]
fn the_scale_down_deadline_follows_argos_e2e_scale_down_delay_across_revisions() {
    let mut c = routed(1, json!({"scaleDownDelayRevisionLimit": 1}));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(phase(&c).0, "Healthy");
    assert_eq!(replicas(&c), [1, 1]);
    assert!(rs_annotation(&c, "1", DEADLINE).is_some());

    set_image(&mut c, "web:3");
    run(&mut c, at(20));
    assert_eq!(phase(&c).0, "Healthy");
    assert_eq!(replicas(&c), [0, 1, 1]);
    assert_eq!(rs_annotation(&c, "1", DEADLINE), None);
    assert!(rs_annotation(&c, "2", DEADLINE).is_some());

    set_image(&mut c, "web:2");
    run(&mut c, at(30));
    assert_eq!(phase(&c).0, "Healthy");
    assert_eq!(rs_annotation(&c, "1", DEADLINE), None);
    assert_eq!(rs_annotation(&c, "4", DEADLINE), None, "the stable again");
    assert!(rs_annotation(&c, "3", DEADLINE).is_some());
    assert_eq!(replicas(&c), [0, 1, 1], "revisions 1, 3 and 4");
}

/// Argo's e2e TestCanaryScaleDownDelayWithProgressDeadline: while the old stable waits out its
/// scaleDownDelaySeconds (30 s) past a progressDeadlineSeconds of 5, the promoted Rollout stays Healthy
/// (isWaitingForReplicaSetScaleDown; a completed update is never timed out).
#[test]
fn a_pending_scale_down_past_the_progress_deadline_leaves_the_rollout_healthy_as_in_argos_e2e() {
    let mut c = routed(1, json!({}));
    c.edit_spec(|s| s.progress_deadline_seconds = Some(5));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert!(rs_annotation(&c, "1", DEADLINE).is_some());
    run(&mut c, at(25));
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    assert_eq!(replicas(&c), [1, 1], "still waiting");
    run(&mut c, at(41));
    assert_eq!(phase(&c).0, "Healthy");
    assert_eq!(replicas(&c), [0, 1]);
}

/// Reconciles second by second from `from` to `to` (inclusive), each pod Ready `ready_after` seconds after it
/// was created (a readiness probe's initial delay).
fn run_with_slow_pods(c: &mut MemoryCluster, from: i64, to: i64, ready_after: i64) {
    for second in from..=to {
        for _ in 0..5 {
            c.make_available();
            for rs in c.replica_sets.iter_mut() {
                let name = rs.metadata.name.clone();
                let ready = c
                    .pods
                    .iter()
                    .filter(|p| {
                        p.metadata.owner_references.as_ref().unwrap()[0].name
                            == *name.as_ref().unwrap()
                    })
                    .filter(|p| {
                        p.metadata.creation_timestamp.as_ref().unwrap().0
                            <= at(second - ready_after)
                    })
                    .count() as i32;
                let status = rs.status.get_or_insert_with(Default::default);
                status.ready_replicas = Some(ready);
                status.available_replicas = Some(ready);
            }
            c.reconcile(at(second));
        }
    }
}

/// Argo's e2e TestCanaryProgressDeadlineExceededWithPause: progressDeadlineSeconds 5, each pod ready 10 s after it
/// was created. The first deploy, the update and the promotion (surging one pod at a time) each go Degraded
/// (ProgressDeadlineExceeded, Argo's calculateRolloutConditions) and recover once the pods are ready: Healthy,
/// then Paused with 1 canary and 3 stable pods, then Healthy.
#[test]
fn each_slow_stage_exceeds_the_progress_deadline_and_recovers_as_argos_e2e_with_pause() {
    let mut r = rollout(3, json!({"steps": [{"setWeight": 20}, {"pause": {}}]}));
    r.spec.progress_deadline_seconds = Some(5);
    let mut c = MemoryCluster::new(r);
    let mut phases = Vec::new();
    let mut stage = |c: &mut MemoryCluster, from: i64| {
        run_with_slow_pods(c, from, from + 8, 10);
        phases.push(phase(c).0);
        run_with_slow_pods(c, from + 9, from + 35, 10);
        phases.push(phase(c).0);
    };
    stage(&mut c, 0);
    set_image(&mut c, "web:2");
    stage(&mut c, 40);
    assert_eq!(replicas(&c), [3, 1], "ExpectCanaryStablePodCount(1, 3)");
    c.patch_status(|s| s.pause_conditions.clear());
    stage(&mut c, 80);
    assert_eq!(
        phases,
        [
            "Degraded", "Healthy", "Degraded", "Paused", "Degraded", "Healthy"
        ]
    );
}

/// `status.duration` as a JSON value, for comparing with what Argo writes.
fn duration(c: &MemoryCluster) -> Value {
    serde_json::to_value(c.rollout.status.as_ref().and_then(|s| s.duration.clone())).unwrap()
}

/// Issue item 5 (`status.duration`). Scenario: revision 2 is shipped at 10 s and waits at an indefinite pause
/// until a person promotes it at 70 s; it then completes. Argo (calculateStatusDuration): the attempt starts
/// when the template changes, the indefinite pause counts as manual pause time until it is resumed, and the
/// attempt ends Promoted once the new ReplicaSet is stable with all its pods, the first deploy's as well.
/// canaryd before: no `status.duration` at all.
#[test]
fn an_update_is_timed_from_the_new_template_to_promoted_with_its_manual_pause_as_argos_calculate_status_duration()
 {
    let mut c = routed(2, json!({"steps": [{"setWeight": 50}, {"pause": {}}]}));
    run(&mut c, at(0));
    assert_eq!(
        duration(&c),
        json!({
            "rolloutStartedAt": at(0).to_string(),
            "finishedAt": at(0).to_string(),
            "completionStatus": "Promoted",
        }),
        "the first deploy is an attempt too (no currentPodHash yet), promoted once its pods are available"
    );
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(
        duration(&c),
        json!({"rolloutStartedAt": at(10).to_string(), "manualPauseStartedAt": at(10).to_string()})
    );
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(70));
    assert_eq!(phase(&c).0, "Healthy");
    assert_eq!(
        duration(&c),
        json!({
            "rolloutStartedAt": at(10).to_string(),
            "totalManualPauseDurationSeconds": 60,
            "finishedAt": at(70).to_string(),
            "completionStatus": "Promoted",
        })
    );
}

/// Scenario: revision 2 is aborted at 20 s, then retried at 30 s. Argo: the abort ends the attempt
/// (Aborted); the retry starts a new one.
#[test]
fn an_abort_ends_the_attempt_and_a_retry_starts_another_as_argos_calculate_status_duration() {
    let mut c = routed(
        2,
        json!({"steps": [{"setWeight": 50}, {"pause": {"duration": "1h"}}]}),
    );
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    c.patch_status(|s| s.abort = true);
    run(&mut c, at(20));
    assert_eq!(duration(&c)["completionStatus"], "Aborted");
    assert_eq!(duration(&c)["finishedAt"], at(20).to_string());
    c.patch_status(|s| s.abort = false);
    run(&mut c, at(30));
    assert_eq!(
        duration(&c),
        json!({"rolloutStartedAt": at(30).to_string()})
    );
}

/// A basic canary of `size` pods through `setWeight: 20, pause: 10s, setWeight: 50, pause: 10s` and its
/// promotion, with `fenceposts` (maxSurge, maxUnavailable) merged into the strategy: each (canary, stable)
/// pair of `spec.replicas` as it changes, every pod available as soon as it is asked for.
fn basic_counts(size: i32, fenceposts: Value) -> Vec<(i32, i32)> {
    let mut canary = json!({"steps": [
        {"setWeight": 20}, {"pause": {"duration": "10s"}},
        {"setWeight": 50}, {"pause": {"duration": "10s"}},
    ]});
    if let (Some(c), Some(f)) = (canary.as_object_mut(), fenceposts.as_object()) {
        c.extend(f.clone());
    }
    let mut c = MemoryCluster::new(rollout(size, canary));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    let mut seen: Vec<(i32, i32)> = Vec::new();
    for second in 1..60 {
        for _ in 0..30 {
            let became_available = c.make_available();
            let before = c.rollout.status.clone();
            let plan = c.reconcile(at(second));
            if let [stable, canary] = replicas(&c)[..]
                && seen.last() != Some(&(canary, stable))
            {
                seen.push((canary, stable));
            }
            if plan.writes.is_empty() && c.rollout.status == before && !became_available {
                break;
            }
        }
        let s = c.status();
        if s.phase == "Healthy" && s.stable_rs == s.current_pod_hash {
            return seen;
        }
    }
    panic!("never promoted: {:#?}", c.status());
}

/// Argo's canary defaults are `maxSurge: "25"` and `maxUnavailable: "25"` (utils/defaults: strings without
/// a `%`), which its replica arithmetic (utils/replicaset `resolveFenceposts`, `MaxUnavailable`) resolves
/// with apimachinery's GetValueFromIntOrPercent, reading any string as a percentage: 25% each, the surge
/// rounded up and the unavailable pods down (3 and 2 of 10; 1 and 0 of 3). So a Rollout that writes them
/// unset, as "25%" or as "25" moves its pods alike, and the integer 25 does not. Each count below is Argo's
/// CalculateReplicaCountsForBasicCanary: the stable side scaled first (reconcileCanaryStableReplicaSet), at
/// most replicas + surge pods, at least replicas - unavailable available, one scaling per reconcile.
#[test]
fn the_default_fenceposts_are_argos_25_percent_however_they_are_written() {
    let defaults_of_10 = [
        (0, 10),
        (0, 8),
        (2, 8),
        (2, 6),
        (5, 6),
        (5, 5),
        (5, 3),
        (10, 3),
        (10, 0),
    ];
    let defaults_of_3 = [(0, 3), (1, 3), (1, 2), (2, 2), (2, 1), (3, 1), (3, 0)];
    for (replicas, expected) in [(10, &defaults_of_10[..]), (3, &defaults_of_3[..])] {
        for written in [
            json!({}),
            json!({"maxSurge": "25%", "maxUnavailable": "25%"}),
            json!({"maxSurge": "25", "maxUnavailable": "25"}),
        ] {
            assert_eq!(
                basic_counts(replicas, written.clone()),
                expected,
                "{replicas} replicas, {written}"
            );
        }
    }
    let pods = json!({"maxSurge": 25, "maxUnavailable": 25});
    assert_ne!(basic_counts(10, pods), defaults_of_10, "25 pods each");
}

/// Explicit fenceposts, as Argo resolves them: one pod at a time up (`maxSurge: 1, maxUnavailable: 0`) or
/// down (`0, 1`), the canary first or the stable side first; a surge as a percentage (`"50%"` of 10 is 5).
#[test]
fn explicit_fenceposts_move_the_pods_as_argos_replica_arithmetic_does() {
    // The canary up one, then the stable side down one, ten times; or the other way round.
    let one_up: Vec<(i32, i32)> = (0..=10)
        .flat_map(|n| [(n, 11 - n), (n, 10 - n)])
        .skip(1)
        .collect();
    let one_down: Vec<(i32, i32)> = (0..=10)
        .flat_map(|n| [(n, 10 - n), (n, 9 - n)])
        .take(21)
        .collect();
    let cases = [
        (10, json!({"maxSurge": 1, "maxUnavailable": 0}), one_up),
        (10, json!({"maxSurge": 0, "maxUnavailable": 1}), one_down),
        (
            10,
            json!({"maxSurge": "50%", "maxUnavailable": 0}),
            vec![(0, 10), (2, 10), (2, 8), (5, 8), (5, 5), (10, 5), (10, 0)],
        ),
        (
            3,
            json!({"maxSurge": 1, "maxUnavailable": 0}),
            vec![(0, 3), (1, 3), (1, 2), (2, 2), (2, 1), (3, 1), (3, 0)],
        ),
        (
            3,
            json!({"maxSurge": 0, "maxUnavailable": 1}),
            vec![(0, 3), (0, 2), (1, 2), (1, 1), (2, 1), (2, 0), (3, 0)],
        ),
    ];
    for (replicas, written, expected) in cases {
        assert_eq!(
            basic_counts(replicas, written.clone()),
            expected,
            "{replicas} replicas, {written}"
        );
    }
}
