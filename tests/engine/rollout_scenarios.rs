//! More of Argo Rollouts' end-to-end scenarios replayed on the in-memory cluster: scaling, restarts,
//! rollback windows, ephemeral metadata and history limits, with the counts, statuses and Events Argo's
//! suite asserts.

use canaryd::api::AnalysisPhase;
use canaryd::engine::rollout::Write;
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd_testkit::rollout::memory::*;
use serde_json::json;

#[test]
fn a_template_and_replica_change_at_once_scales_first_then_runs_the_steps() {
    // Argo's TestSpecAndReplicaChangeSameTime.
    let mut c = MemoryCluster::new(rollout(
        2,
        json!({"steps": [{"setWeight": 10}, {"pause": {"duration": "10s"}},
                         {"setWeight": 20}, {"pause": {"duration": "5s"}}]}),
    ));
    run(&mut c, at(0));
    c.edit_spec(|s| s.replicas = Some(3));
    set_image(&mut c, "web:2");
    run_until(&mut c, 1, "Paused");
    c.edit_spec(|s| s.replicas = Some(4));
    set_image(&mut c, "web:3");
    run_until(&mut c, 10, "Healthy");
    assert_eq!(counts(&c), (4, 4, 4, 4, 4));
    assert_eq!(replicas(&c), [0, 0, 4]);
}

#[test]
fn scaling_while_paused_scales_alone_and_leaves_steps_and_analysis_for_the_next_reconcile() {
    // Argo's TestRolloutScalingWhenPaused (setWeight 25, pause{}: 1/1 → 2/6 at 8 → 1/3 at 4), with
    // Argo's scaling-only reconcile: a finished analysis is judged only once the scaling is done.
    let mut c = analysis_rollout();
    c.edit_spec(|s| s.replicas = Some(1));
    c.edit_spec(|s| {
        let steps = s.strategy.as_mut().unwrap().canary.as_mut().unwrap();
        steps.steps = serde_json::from_value(json!([
            {"setWeight": 25},
            {"pause": {}},
            {"analysis": {"templates": [{"templateName": "success-rate"}],
                          "args": [{"name": "service", "value": "web"}, {"name": "hash", "value": "h"}]}}
        ]))
        .unwrap();
    });
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(1));
    assert_eq!(replicas(&c), [1, 1]);
    let paused = c.status();
    assert_eq!(paused.phase, "Paused");

    let mark = c.events.len();
    c.edit_spec(|s| s.replicas = Some(8));
    run(&mut c, at(2));
    assert_eq!(replicas(&c), [6, 2]);
    assert_eq!(
        reasons_since(&c, mark),
        ["ScalingReplicaSet", "ScalingReplicaSet"]
    );
    let s = c.status();
    assert_eq!(s.current_step_index, Some(1));
    assert_eq!(s.pause_conditions, paused.pause_conditions);
    assert_eq!(
        s.observed_generation,
        c.rollout.metadata.generation.unwrap().to_string()
    );
    c.edit_spec(|s| s.replicas = Some(4));
    run(&mut c, at(3));
    assert_eq!(replicas(&c), [3, 1]);

    // Promote into the analysis step; its run fails while the Rollout is being scaled.
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(4));
    let name = c.analysis_runs[0].metadata.name.clone().unwrap();
    c.finish_run(&name, AnalysisPhase::Failed, "error rate too high");
    c.edit_spec(|s| s.replicas = Some(8));
    let scaling = c.reconcile(at(5));
    assert!(
        scaling
            .writes
            .iter()
            .all(|w| matches!(w, Write::ScaleReplicaSet { .. })),
        "{:?}",
        scaling.writes
    );
    assert!(
        !scaling.status.abort,
        "the scaling reconcile judges nothing"
    );
    run(&mut c, at(6));
    assert!(c.status().abort);
    assert_eq!(
        c.status().message,
        "RolloutAborted: Rollout aborted update to revision 2: Step-based analysis phase error/failed: error rate too high"
    );
}

/// Updates the analysis Rollout to `image` and ends its step run with `phase`; a Successful update is
/// then promoted past its last pause to Healthy, a failed one is left aborted.
fn update_with_run(c: &mut MemoryCluster, image: &str, phase: AnalysisPhase, second: i64) {
    set_image(c, image);
    run(c, at(second));
    let hash = c.status().current_pod_hash;
    let name = c
        .analysis_runs
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .find(|n| n.starts_with(&format!("web-{hash}-")))
        .unwrap();
    c.finish_run(&name, phase, "");
    run(c, at(second + 1));
    if phase == AnalysisPhase::Successful {
        c.patch_status(|s| s.pause_conditions.clear());
        run(c, at(second + 2));
        assert_eq!(c.status().phase, "Healthy");
    } else {
        assert_eq!(c.status().phase, "Degraded");
    }
}

fn run_revisions(c: &MemoryCluster) -> Vec<String> {
    let mut out: Vec<String> = c
        .analysis_runs
        .iter()
        .map(|r| r.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"].clone())
        .collect();
    out.sort();
    out
}

#[test]
fn finished_analysis_runs_beyond_the_history_limits_are_deleted_oldest_first() {
    let mut c = analysis_rollout();
    c.edit_spec(|s| {
        s.analysis = serde_json::from_value(
            json!({"successfulRunHistoryLimit": 1, "unsuccessfulRunHistoryLimit": 1}),
        )
        .unwrap()
    });
    run(&mut c, at(0));
    update_with_run(&mut c, "web:2", AnalysisPhase::Successful, 10);
    update_with_run(&mut c, "web:3", AnalysisPhase::Successful, 20);
    assert_eq!(run_revisions(&c), ["3"], "one successful run is kept");
    update_with_run(&mut c, "web:4", AnalysisPhase::Successful, 30);
    update_with_run(&mut c, "web:5", AnalysisPhase::Failed, 40);
    assert_eq!(run_revisions(&c), ["4", "5"]);
    update_with_run(&mut c, "web:6", AnalysisPhase::Failed, 50);
    run(&mut c, at(60));
    // An abort drops the run from the status, so it is history at once; newest first, revision 6 is
    // the one unsuccessful run kept and 4 the one successful.
    assert_eq!(run_revisions(&c), ["4", "6"]);
}

#[test]
fn an_old_replica_set_past_the_history_limit_is_deleted_with_its_analysis_runs() {
    let mut c = analysis_rollout();
    c.edit_spec(|s| s.revision_history_limit = Some(0));
    run(&mut c, at(0));
    update_with_run(&mut c, "web:2", AnalysisPhase::Successful, 10);
    let rev2 = c.status().current_pod_hash;
    assert_eq!(run_revisions(&c), ["2"]);
    set_image(&mut c, "web:3");
    let mut deleted = Vec::new();
    for second in 20..40 {
        c.make_available();
        let plan = c.reconcile(at(second));
        deleted.extend(plan.writes.iter().filter_map(|w| match w {
            Write::DeleteReplicaSet { name } => Some(format!("rs {name}")),
            Write::DeleteAnalysisRun { name } => Some(format!("run {name}")),
            _ => None,
        }));
        let current = c.status().current_pod_hash;
        if let Some(run) = c
            .analysis_runs
            .iter()
            .find(|r| r.metadata.name.as_ref().unwrap().contains(&current))
        {
            let name = run.metadata.name.clone().unwrap();
            c.finish_run(&name, AnalysisPhase::Successful, "");
        }
        c.patch_status(|s| s.pause_conditions.clear());
    }
    assert_eq!(c.status().phase, "Healthy");
    assert_eq!(
        deleted,
        [format!("rs web-{rev2}"), format!("run web-{rev2}-2-1")],
        "the ReplicaSet and its run go in the same reconcile"
    );
    assert_eq!(run_revisions(&c), ["3"]);
    assert_eq!(c.replica_sets.len(), 1);
}

/// Argo's rollback-window Rollout: 2 replicas, `setWeight: 50` then a step analysis, window of 2.
fn window_rollout() -> MemoryCluster {
    let mut c = analysis_rollout();
    c.edit_spec(|s| {
        s.replicas = Some(2);
        s.rollback_window = serde_json::from_value(json!({"revisions": 2})).unwrap();
        let canary = s.strategy.as_mut().unwrap().canary.as_mut().unwrap();
        canary.steps = serde_json::from_value(json!([
            {"setWeight": 50},
            {"analysis": {"templates": [{"templateName": "success-rate"}],
                          "args": [{"name": "service", "value": "web"},
                                   {"name": "hash", "valueFrom": {"podTemplateHashValue": "Latest"}}]}}
        ]))
        .unwrap();
    });
    c
}

/// Updates to `image` and lets it go Healthy, every step run ending Successful.
fn update_to_healthy(c: &mut MemoryCluster, image: &str, from: i64) {
    set_image(c, image);
    for second in from..from + 30 {
        run(c, at(second));
        for name in c
            .analysis_runs
            .iter()
            .filter(|r| r.status.as_ref().and_then(|s| s.phase) == Some(AnalysisPhase::Running))
            .filter_map(|r| r.metadata.name.clone())
            .collect::<Vec<_>>()
        {
            c.finish_run(&name, AnalysisPhase::Successful, "");
        }
        if c.status().phase == "Healthy" {
            return;
        }
    }
    panic!("never Healthy: {:#?}", c.status());
}

#[test]
fn a_rollback_within_the_window_skips_steps_and_analysis() {
    // Argo's TestRollbackAnalysisWithinWindow: revisions 2, 3, 4 each run one analysis; back to 2's
    // template (revision 5) runs none.
    let mut c = window_rollout();
    run(&mut c, at(0));
    for (i, image) in ["web:2", "web:3", "web:4"].into_iter().enumerate() {
        update_to_healthy(&mut c, image, 100 * (i as i64 + 1));
    }
    assert_eq!(c.analysis_runs.len(), 3);
    let mark = c.events.len();
    update_to_healthy(&mut c, "web:2", 500);
    assert_eq!(
        c.analysis_runs.len(),
        3,
        "no analysis for a rollback within the window"
    );
    let completed: Vec<&str> = c.events[mark..]
        .iter()
        .filter(|e| e.reason == "RolloutCompleted")
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(completed.len(), 1);
    assert!(
        completed[0].starts_with("Rollout completed update to revision 5 (")
            && completed[0].ends_with("): Rollback within window"),
        "{completed:?}"
    );
    assert_eq!(c.status().current_step_index, Some(2));
}

#[test]
fn a_rollback_outside_the_window_runs_the_steps_again() {
    // Argo's TestRollbackAnalysisOutsideWindow: back to the initial template, three revisions older.
    let mut c = window_rollout();
    run(&mut c, at(0));
    for (i, image) in ["web:2", "web:3", "web:4"].into_iter().enumerate() {
        update_to_healthy(&mut c, image, 100 * (i as i64 + 1));
    }
    update_to_healthy(&mut c, "web:1", 500);
    assert_eq!(c.analysis_runs.len(), 4);
    assert!(c.events.iter().any(|e| {
        e.message.ends_with(": Completed all 2 canary steps")
            && e.message
                .starts_with("Rollout completed update to revision 5 ")
    }));
}

fn pod_labels(c: &MemoryCluster, revision: &str) -> (Vec<String>, Option<String>) {
    let rs = c
        .replica_sets
        .iter()
        .find(|r| {
            r.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"] == revision
        })
        .unwrap();
    let labels = rs
        .spec
        .as_ref()
        .unwrap()
        .template
        .as_ref()
        .unwrap()
        .metadata
        .as_ref()
        .unwrap();
    let mut out: Vec<String> = labels
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| *k != "rollouts-pod-template-hash")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    out.extend(
        labels
            .annotations
            .iter()
            .flatten()
            .map(|(k, v)| format!("@{k}={v}")),
    );
    let recorded = rs
        .metadata
        .annotations
        .as_ref()
        .unwrap()
        .get("rollout.argoproj.io/ephemeral-metadata")
        .cloned();
    (out, recorded)
}

#[test]
fn canary_and_stable_metadata_follow_the_replica_sets_roles() {
    let mut c = MemoryCluster::new(rollout(
        2,
        json!({"canaryMetadata": {"labels": {"role": "canary"}, "annotations": {"tier": "canary"}},
               "stableMetadata": {"labels": {"role": "stable"}},
               "steps": [{"setWeight": 50}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    assert_eq!(
        pod_labels(&c, "1"),
        (
            vec!["app=web".to_string(), "role=stable".to_string()],
            Some(r#"{"labels":{"role":"stable"}}"#.to_string())
        ),
        "a first deploy is to become stable"
    );
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(phase(&c).0, "Paused");
    assert_eq!(
        pod_labels(&c, "2"),
        (
            vec![
                "app=web".into(),
                "role=canary".into(),
                "@tier=canary".into()
            ],
            Some(r#"{"labels":{"role":"canary"},"annotations":{"tier":"canary"}}"#.to_string())
        )
    );
    assert_eq!(pod_labels(&c, "1").0, ["app=web", "role=stable"]);
    let canary_name = c.replica_sets[1].metadata.name.clone();

    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(20));
    assert_eq!(phase(&c).0, "Healthy");
    assert_eq!(
        pod_labels(&c, "2"),
        (
            vec!["app=web".into(), "role=stable".into()],
            Some(r#"{"labels":{"role":"stable"}}"#.to_string())
        ),
        "promoted, the canary's metadata is swapped for the stable's"
    );
    assert_eq!(
        pod_labels(&c, "1"),
        (vec!["app=web".into()], None),
        "an old ReplicaSet keeps none"
    );
    assert_eq!(
        c.replica_sets[1].metadata.name, canary_name,
        "no new ReplicaSet for metadata"
    );

    // Argo's reconcileEphemeralMetadata: metadata no longer in the spec is taken out of what it was put in.
    c.edit_spec(|s| {
        let canary = s.strategy.as_mut().unwrap().canary.as_mut().unwrap();
        canary.canary_metadata = None;
        canary.stable_metadata = None;
    });
    run(&mut c, at(30));
    assert_eq!(pod_labels(&c, "2"), (vec!["app=web".into()], None));
}

fn restart_at(c: &mut MemoryCluster, second: i64) {
    c.edit_spec(|s| {
        s.restart_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(
            second,
        )))
    });
}

fn evictions(plan: &canaryd::engine::rollout::Plan) -> usize {
    plan.writes
        .iter()
        .filter(|w| matches!(w, Write::EvictPod { .. }))
        .count()
}

#[test]
fn a_restart_evicts_as_many_old_pods_as_max_unavailable_allows_while_paused() {
    // Argo's TestRolloutRestart: 4 replicas, maxUnavailable 75%, paused at setWeight 25 → (4,4,1,1,1).
    let mut c = MemoryCluster::new(rollout(
        4,
        json!({"maxUnavailable": "75%", "steps": [{"setWeight": 25}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(
        (replicas(&c), phase(&c).0),
        (vec![3, 1], "Paused".to_string())
    );
    restart_at(&mut c, 11);
    let early = c.reconcile(at(10));
    assert_eq!(
        (evictions(&early), early.wake_at),
        (0, Some(at(11))),
        "nothing before restartAt; woken when it comes"
    );
    // Argo's restartAt.Before(now): on whole-second stamps, from restartAt's own second on.
    let first = c.reconcile(at(11));
    assert_eq!(evictions(&first), 3);
    assert!(first.events.is_empty());
    c.reconcile(at(12));
    assert_eq!(counts(&c), (4, 4, 1, 1, 1));
    let waiting = c.reconcile(at(13));
    assert_eq!(waiting.wake_at, Some(at(43)), "looked at again in 30 s");
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
    run(&mut c, at(43));
    let s = c.status();
    assert_eq!(s.restarted_at, c.rollout.spec.restart_at);
    assert!(
        c.pods
            .iter()
            .all(|p| p.metadata.creation_timestamp.as_ref().unwrap().0 >= at(11))
    );
    assert_eq!(counts(&c), (4, 4, 1, 4, 4));
}

#[test]
fn a_restart_of_a_healthy_rollout_goes_one_pod_at_a_time_and_reads_restarting() {
    let mut c = MemoryCluster::new(rollout(
        4,
        json!({"steps": [{"setWeight": 25}, {"pause": {}}]}),
    ));
    run(&mut c, at(0));
    restart_at(&mut c, 30);
    let before = c.reconcile(at(10));
    assert_eq!(before.wake_at, Some(at(30)), "woken when restartAt comes");
    let mut evicted = Vec::new();
    for second in 30..200 {
        let plan = c.reconcile(at(second));
        evicted.push(evictions(&plan));
        if !c.status().phase.is_empty() && c.status().restarted_at.is_some() {
            break;
        }
        assert_eq!(
            phase(&c),
            ("Progressing".into(), "rollout is restarting".into())
        );
        if second % 5 == 0 {
            c.make_available();
        }
    }
    assert!(
        evicted.iter().all(|n| *n <= 1),
        "maxUnavailable 25% of 4 is one: {evicted:?}"
    );
    assert_eq!(evicted.iter().sum::<usize>(), 4);
    run(&mut c, at(300));
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    assert_eq!(c.status().restarted_at, c.rollout.spec.restart_at);
    let again = c.reconcile(at(301));
    assert_eq!(evictions(&again), 0, "a restart is done once");
}

#[test]
fn every_unsupported_part_is_invalid_spec_naming_its_field_never_a_crash() {
    let parts = [
        // Beside the canary strategy, Argo's ValidateRolloutStrategy: Multiple Strategies.
        ("blueGreen", "spec.strategy.strategy"),
        ("experiment", "spec.strategy.canary.steps[0].experiment"),
        ("plugin", "spec.strategy.canary.steps[0].plugin"),
        ("workloadRef", "spec.workloadRef"),
    ];
    for (part, field) in parts {
        let mut r = rollout(1, json!({"steps": [{"setWeight": 10}]}));
        match part {
            "blueGreen" => {
                r.spec.strategy.as_mut().unwrap().blue_green = Some(json!({"activeService": "a"}))
            }
            "workloadRef" => {
                r.spec.workload_ref =
                    Some(json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}))
            }
            step => {
                let canary = r.spec.strategy.as_mut().unwrap().canary.as_mut().unwrap();
                canary.steps = serde_json::from_value(json!([{step: {"name": "x"}}])).unwrap();
            }
        }
        let mut c = MemoryCluster::new(r);
        let plan = c.reconcile(at(0));
        assert!(plan.writes.is_empty(), "{part}: {:?}", plan.writes);
        assert!(
            plan.status.message.starts_with(&format!(
                "InvalidSpec: The Rollout \"web\" is invalid: {field}: "
            )),
            "{part}: {}",
            plan.status.message
        );
        assert_eq!(plan.status.phase, "Degraded");
    }
}
