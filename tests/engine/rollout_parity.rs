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
