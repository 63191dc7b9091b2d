//! The Rollout planner's step and background analysis on the in-memory cluster: AnalysisRuns named,
//! labelled and argued as Argo creates them, and Successful, Failed, Inconclusive and promote --full
//! handled as Argo handles them.

use canaryd::api::AnalysisPhase;
use canaryd::engine::rollout::Write;
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd_testkit::rollout::memory::*;
use serde_json::json;

#[test]
fn a_failed_step_analysis_aborts_with_the_runs_message_and_scales_the_canary_back() {
    let mut c = analysis_rollout();
    run(&mut c, at(0));
    let stable = c.status().stable_rs;
    assert_eq!(service_hash(&c, "web-stable"), stable);
    assert_eq!(service_hash(&c, "web-canary"), stable);

    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let s = c.status();
    assert_eq!(s.current_step_index, Some(1));
    assert_eq!(
        service_hash(&c, "web-canary"),
        s.current_pod_hash,
        "canary Service follows the new pods"
    );
    assert_eq!(c.analysis_runs.len(), 1);
    let run_name = format!("web-{}-2-1", s.current_pod_hash);
    let ar = &c.analysis_runs[0];
    assert_eq!(ar.metadata.name.as_deref(), Some(run_name.as_str()));
    let labels = ar.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["rollout-type"], "Step");
    assert_eq!(labels["step-index"], "1");
    assert_eq!(labels["rollouts-pod-template-hash"], s.current_pod_hash);
    assert_eq!(labels["app"], "web");
    assert_eq!(
        ar.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"],
        "2"
    );
    let args = ar.spec.args.as_ref().unwrap();
    assert_eq!(args[0].value.as_deref(), Some("web"));
    assert_eq!(args[1].value.as_deref(), Some(s.current_pod_hash.as_str()));
    let step_status = s.canary.current_step_analysis_run_status.as_ref().unwrap();
    assert_eq!(
        (step_status.name.as_str(), step_status.status.as_str()),
        (run_name.as_str(), "Running")
    );

    let mark = c.events.len();
    let why = "Metric \"rate\" assessed Failed due to failed (1) > failureLimit (0)";
    c.finish_run(&run_name, AnalysisPhase::Failed, why);
    run(&mut c, at(20));
    assert_eq!(
        phase(&c),
        (
            "Degraded".into(),
            format!(
                "RolloutAborted: Rollout aborted update to revision 2: Step-based analysis phase error/failed: {why}"
            )
        )
    );
    assert_eq!(replicas(&c), [4, 0]);
    assert_eq!(
        service_hash(&c, "web-canary"),
        stable,
        "an aborted canary's Service points back at stable"
    );
    let aborted = c.events[mark..]
        .iter()
        .find(|e| e.reason == "RolloutAborted")
        .unwrap();
    assert!(aborted.warning);
    // Argo's emitAnalysisRunStatusChanges: the run's new phase, told on the Rollout before the abort.
    let told: Vec<_> = c.events[mark..]
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str(), e.warning))
        .take_while(|e| e.0 != "RolloutAborted")
        .collect();
    assert_eq!(
        told,
        [(
            "AnalysisRunFailed",
            format!("Step Analysis Run '{run_name}' Status New: 'Failed' Previous: 'Running'")
                .as_str(),
            true
        )]
    );
    assert_eq!(c.analysis_runs.len(), 1, "no second run for the same step");
}

#[test]
fn a_successful_step_analysis_moves_on_and_a_promote_finishes_the_rollout() {
    let mut c = analysis_rollout();
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let run_name = c.analysis_runs[0].metadata.name.clone().unwrap();
    c.finish_run(&run_name, AnalysisPhase::Successful, "");
    run(&mut c, at(20));
    assert_eq!(c.status().current_step_index, Some(2));
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
    assert!(c.status().canary.current_step_analysis_run_status.is_none());

    // kubectl argo rollouts promote: {"status":{"pauseConditions":null}}
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(30));
    let s = c.status();
    assert_eq!(s.phase, "Healthy");
    assert_eq!(s.stable_rs, s.current_pod_hash);
    assert_eq!(replicas(&c), [0, 4]);
    assert_eq!(service_hash(&c, "web-stable"), s.current_pod_hash);
    assert!(!s.controller_pause);
}

#[test]
fn promote_full_skips_a_running_analysis_and_terminates_it() {
    let mut c = analysis_rollout();
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(c.status().current_step_index, Some(1));
    c.patch_status(|s| s.promote_full = true);
    run(&mut c, at(11));
    let s = c.status();
    assert_eq!(s.phase, "Healthy");
    assert_eq!(s.current_step_index, Some(3));
    assert!(!s.promote_full);
    assert_eq!(c.analysis_runs[0].spec.terminate, Some(true));
    assert!(
        c.events
            .iter()
            .any(|e| e.message.ends_with(": Full promotion requested"))
    );
}

#[test]
fn background_analysis_starts_at_its_step_and_an_inconclusive_run_pauses_the_rollout() {
    let mut c = MemoryCluster::new(rollout(
        2,
        json!({"analysis": {"templates": [{"templateName": "bg"}], "startingStep": 1},
               "steps": [{"setWeight": 50}, {"setWeight": 75}, {"pause": {}}]}),
    ));
    with_analysis_template(
        &mut c,
        "bg",
        json!([{"name": "m", "interval": "1m", "provider": {"prometheus": {"query": "up"}}}]),
    );
    c.templates
        .get_mut(&(false, "bg".to_string()))
        .unwrap()
        .args = None;
    run(&mut c, at(0));
    assert!(
        c.analysis_runs.is_empty(),
        "no background run on first deploy"
    );
    set_image(&mut c, "web:2");
    while c.status().current_step_index != Some(1) {
        c.reconcile(at(10));
        c.make_available();
        assert!(
            c.analysis_runs.is_empty(),
            "no background run before startingStep"
        );
    }
    c.reconcile(at(11));
    assert_eq!(c.analysis_runs.len(), 1);
    let name = c.analysis_runs[0].metadata.name.clone().unwrap();
    assert_eq!(name, format!("web-{}-2", c.status().current_pod_hash));
    assert_eq!(
        c.analysis_runs[0].metadata.labels.as_ref().unwrap()["rollout-type"],
        "Background"
    );
    c.finish_run(&name, AnalysisPhase::Inconclusive, "");
    let mark = c.events.len();
    c.reconcile(at(12));
    let told = &c.events[mark];
    assert_eq!(
        (told.reason.as_str(), told.message.as_str(), told.warning),
        (
            "AnalysisRunInconclusive",
            // No reconcile saw it Running: the status last recorded it without a phase.
            format!("Background Analysis Run '{name}' Status New: 'Inconclusive' Previous: ''")
                .as_str(),
            false
        )
    );
    assert_eq!(
        phase(&c),
        ("Paused".into(), "InconclusiveAnalysisRun".into())
    );
    let before = replicas(&c);
    c.reconcile(at(13));
    c.reconcile(at(14));
    assert_eq!(
        replicas(&c),
        before,
        "nothing scales while an inconclusive run holds the rollout"
    );
    assert_eq!(phase(&c).1, "InconclusiveAnalysisRun");
}

#[test]
fn returning_to_the_stable_template_is_a_fast_rollback_that_skips_steps() {
    let mut c = analysis_rollout();
    run(&mut c, at(0));
    let stable = c.status().stable_rs;
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let mark = c.events.len();
    set_image(&mut c, "web:1");
    run(&mut c, at(11));
    let s = c.status();
    assert_eq!(s.current_pod_hash, stable);
    assert_eq!(s.current_step_index, Some(3));
    assert_eq!(s.phase, "Healthy");
    let reasons = reasons_since(&c, mark);
    assert!(reasons.contains(&"SkipSteps".to_string()), "{reasons:?}");
    assert!(
        !reasons.contains(&"RolloutCompleted".to_string()),
        "{reasons:?}"
    );
    assert_eq!(c.analysis_runs[0].spec.terminate, Some(true));
    // The old ReplicaSet became the newest revision again.
    let revisions: Vec<String> = c
        .replicas_by_revision()
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(revisions, ["2", "3"]);
}

#[test]
fn a_restart_that_lost_the_status_write_creates_no_second_replica_set_or_run() {
    let mut c = analysis_rollout();
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    let mut created = Vec::new();
    for second in 0..40 {
        c.make_available();
        let now = at(10 + second);
        // The process dies after its writes, before its status write; the next one plans from the objects.
        let lost = c.plan(now);
        c.apply_writes(&lost, now);
        let again = c.reconcile(now);
        for write in lost.writes.iter().chain(&again.writes) {
            let name = match write {
                Write::CreateReplicaSet(rs) => rs.metadata.name.clone(),
                Write::CreateAnalysisRun(run) => run.metadata.name.clone(),
                _ => None,
            };
            if let Some(name) = name {
                assert!(!created.contains(&name), "{name} created twice");
                created.push(name);
            }
        }
        if c.status().current_step_index == Some(2) {
            break;
        }
        if let Some(run) = c.analysis_runs.first() {
            let name = run.metadata.name.clone().unwrap();
            c.finish_run(&name, AnalysisPhase::Successful, "");
        }
    }
    assert_eq!(c.status().current_step_index, Some(2), "{:#?}", c.status());
    assert_eq!((c.replica_sets.len(), c.analysis_runs.len()), (2, 1));
    assert_eq!(created.len(), 2, "{created:?}");
}

#[test]
fn promote_skips_a_pause_and_a_running_analysis_and_promote_full_ends_an_aborted_update() {
    // Argo's TestCanaryPromoteFull: pause 24h, analysis, pause{}, analysis; background from step 4.
    let mut c = MemoryCluster::new(rollout(
        2,
        json!({
            "analysis": {"templates": [{"templateName": "bg"}], "startingStep": 4},
            "steps": [
                {"pause": {"duration": "24h"}},
                {"analysis": {"templates": [{"templateName": "bg"}]}},
                {"pause": {}},
                {"analysis": {"templates": [{"templateName": "bg"}]}}
            ]
        }),
    ));
    with_analysis_template(
        &mut c,
        "bg",
        json!([{"name": "m", "count": 1000, "interval": "1m", "provider": {"prometheus": {"query": "up"}}}]),
    );
    c.templates
        .get_mut(&(false, "bg".to_string()))
        .unwrap()
        .args = None;
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
    // kubectl argo rollouts promote: {"status":{"pauseConditions":null}}
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(20));
    assert_eq!(c.status().current_step_index, Some(1));
    assert_eq!(phase(&c).0, "Progressing");
    assert_eq!(c.analysis_runs.len(), 1);
    // promote during an analysis step: {"status":{"pauseConditions":null,"currentStepIndex":2}}
    c.patch_status(|s| {
        s.pause_conditions.clear();
        s.current_step_index = Some(2);
    });
    run(&mut c, at(30));
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
    assert_eq!(
        c.analysis_runs[0].spec.terminate,
        Some(true),
        "the skipped step's run is stopped"
    );
    c.patch_status(|s| s.abort = true);
    run(&mut c, at(40));
    assert_eq!(phase(&c).0, "Degraded");
    c.patch_status(|s| s.promote_full = true);
    run(&mut c, at(50));
    let s = c.status();
    assert_eq!((s.phase.as_str(), s.abort), ("Healthy", false));
    assert_eq!(
        c.analysis_runs.len(),
        1,
        "no run was started by the full promotion"
    );
    assert_eq!(replicas(&c), [0, 2]);
}

#[test]
fn a_retry_after_a_failed_step_analysis_runs_the_analysis_again_under_argos_next_name() {
    // Argo's CreateWithCollisionCounter: a finished run of that name is not this retry's; `NAME.1` is.
    let mut c = analysis_rollout();
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let run_name = format!("web-{}-2-1", c.status().current_pod_hash);
    c.finish_run(&run_name, AnalysisPhase::Failed, "failed");
    run(&mut c, at(20));
    assert_eq!(phase(&c).0, "Degraded");

    // kubectl argo rollouts retry
    c.patch_status(|s| s.abort = false);
    run(&mut c, at(30));
    let s = c.status();
    assert_eq!(
        (phase(&c).0.as_str(), s.current_step_index),
        ("Progressing", Some(1)),
        "{s:#?}"
    );
    let retried = format!("{run_name}.1");
    assert_eq!(
        s.canary
            .current_step_analysis_run_status
            .as_ref()
            .map(|r| (r.name.as_str(), r.status.as_str())),
        Some((retried.as_str(), "Running"))
    );
    assert_eq!(c.analysis_runs.len(), 2);

    // A restart that lost the status write naming it finds the retry's run, and makes no third.
    c.patch_status(|s| s.canary.current_step_analysis_run_status = None);
    run(&mut c, at(31));
    assert_eq!(c.analysis_runs.len(), 2);
    c.finish_run(&retried, AnalysisPhase::Successful, "");
    run(&mut c, at(40));
    assert_eq!(c.status().current_step_index, Some(2));
    assert_eq!(c.analysis_runs.len(), 2);
}
