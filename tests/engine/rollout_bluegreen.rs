//! The blue-green strategy on the in-memory cluster, through Argo's own scenarios (its e2e
//! `bluegreen_test.go` and `docs/features/bluegreen.md`): the preview and active Services, the pause before
//! promotion, previewReplicaCount, the scale-down delays, an abort, and a restart's pace.

use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd_testkit::rollout::memory::*;
use serde_json::json;

const DEADLINE: &str = "scale-down-deadline";
const MANAGED_BY: &str = "argo-rollouts.argoproj.io/managed-by-rollouts";

fn first_deploy(c: &mut MemoryCluster) {
    run(c, at(0));
    assert_eq!(phase(c), ("Healthy".into(), String::new()));
}

fn deadline_of(c: &MemoryCluster, index: usize) -> Option<String> {
    let annotations = c.replica_sets[index].metadata.annotations.as_ref()?;
    annotations.get(DEADLINE).cloned()
}

/// Argo's initial deploy: the first ReplicaSet is stable at once, then both Services select it, each marked
/// managed by the Rollout.
#[test]
fn a_first_deploy_is_stable_at_once_and_both_services_select_it() {
    let mut c = blue_green_rollout(
        2,
        json!({"activeService": "web-active", "previewService": "web-preview"}),
    );
    first_deploy(&mut c);
    let s = c.status();
    assert_eq!(s.stable_rs, s.current_pod_hash);
    assert_eq!(
        blue_green_selectors(&c),
        (s.current_pod_hash.clone(), s.current_pod_hash.clone())
    );
    assert_eq!(service_hash(&c, "web-active"), s.current_pod_hash);
    assert_eq!(service_hash(&c, "web-preview"), s.current_pod_hash);
    for svc in &c.services {
        let annotations = svc.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations[MANAGED_BY], "web");
    }
    assert_eq!(
        s.selector,
        format!("app=web,rollouts-pod-template-hash={}", s.current_pod_hash)
    );
    assert_eq!(
        s.current_step_hash, "",
        "Argo's ComputeStepHash: none for blue-green"
    );
    assert_eq!(condition(&s, "Healthy"), ("True", "RolloutHealthy"));
    let reasons = reasons_since(&c, 0);
    assert!(
        reasons.contains(&"RolloutCompleted".to_string()),
        "{reasons:?}"
    );
    assert_eq!(
        reasons.iter().filter(|r| *r == "SwitchService").count(),
        2,
        "{reasons:?}"
    );
}

/// `autoPromotionEnabled: false` (Argo's TestBlueGreenUpdate with a manual promotion): the new ReplicaSet is
/// scaled up behind the preview Service and the Rollout pauses with BlueGreenPause; `promote` switches the
/// active Service, the new ReplicaSet becomes stable and the old one waits scaleDownDelaySeconds (30 s).
#[test]
fn without_auto_promotion_it_pauses_until_promoted_then_keeps_the_old_pods_for_the_delay() {
    let mut c = blue_green_rollout(
        3,
        json!({"activeService": "web-active", "previewService": "web-preview", "autoPromotionEnabled": false}),
    );
    first_deploy(&mut c);
    let old = c.status().current_pod_hash;
    set_image(&mut c, "web:2");
    let mark = c.events.len();
    run(&mut c, at(10));
    let new = c.status().current_pod_hash;
    assert_ne!(old, new);
    assert_eq!(replicas(&c), [3, 3]);
    assert_eq!(phase(&c), ("Paused".into(), "BlueGreenPause".into()));
    assert_eq!(blue_green_selectors(&c), (old.clone(), new.clone()));
    assert_eq!(service_hash(&c, "web-active"), old);
    assert_eq!(service_hash(&c, "web-preview"), new);
    assert_eq!(c.status().stable_rs, old);
    let reasons = reasons_since(&c, mark);
    assert!(
        reasons.contains(&"RolloutPaused".to_string()),
        "{reasons:?}"
    );
    assert_eq!(
        c.reconcile(at(500)).writes.len(),
        0,
        "paused until a person promotes"
    );

    // kubectl-argo-rollouts promote: the pause condition cleared, controllerPause left as the controller set it.
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(600));
    let s = c.status();
    assert_eq!(service_hash(&c, "web-active"), new);
    assert_eq!(s.stable_rs, new);
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    assert_eq!(
        replicas(&c),
        [3, 3],
        "the old pods wait out the scale-down delay"
    );
    assert_eq!(deadline_of(&c, 0).as_deref(), Some("2027-01-15T08:10:30Z"));
    assert_eq!(c.reconcile(at(601)).wake_at, Some(at(630)));
    run(&mut c, at(630));
    assert_eq!(replicas(&c), [0, 3]);
}

/// `autoPromotionSeconds`: the pause ends by itself that long after it began.
#[test]
fn auto_promotion_seconds_switch_the_active_service_when_they_have_passed() {
    let mut c = blue_green_rollout(
        1,
        json!({"activeService": "web-active", "autoPromotionSeconds": 20, "scaleDownDelaySeconds": 5}),
    );
    first_deploy(&mut c);
    let old = c.status().current_pod_hash;
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(phase(&c), ("Paused".into(), "BlueGreenPause".into()));
    assert_eq!(c.reconcile(at(11)).wake_at, Some(at(30)));
    run(&mut c, at(29));
    assert_eq!(service_hash(&c, "web-active"), old);
    run(&mut c, at(30));
    let new = c.status().current_pod_hash;
    assert_eq!(service_hash(&c, "web-active"), new);
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    assert_eq!(
        c.status().blue_green.unwrap().preview_selector,
        "",
        "no preview Service"
    );
    run(&mut c, at(35));
    assert_eq!(replicas(&c), [0, 1], "scaleDownDelaySeconds: 5");
}

/// `previewReplicaCount` (Argo's TestBlueGreenPreviewReplicaCount): the preview runs 1 pod while paused; once
/// promoted it reaches `scaleUpPreviewCheckPoint`, scales to the full count, and only then takes the traffic.
#[test]
fn preview_replica_count_runs_a_smaller_preview_until_promoted() {
    let mut c = blue_green_rollout(
        3,
        json!({"activeService": "web-active", "previewService": "web-preview",
               "autoPromotionEnabled": false, "previewReplicaCount": 1}),
    );
    first_deploy(&mut c);
    let old = c.status().current_pod_hash;
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(replicas(&c), [3, 1]);
    assert_eq!(phase(&c), ("Paused".into(), "BlueGreenPause".into()));
    c.patch_status(|s| s.pause_conditions.clear());
    c.reconcile(at(20)); // the resume is written
    c.reconcile(at(20)); // the pause is over: the checkpoint is passed
    assert!(c.status().blue_green.unwrap().scale_up_preview_check_point);
    assert_eq!(
        service_hash(&c, "web-active"),
        old,
        "not before the preview is at full size"
    );
    run(&mut c, at(21));
    assert_eq!(replicas(&c), [3, 3]);
    let s = c.status();
    assert_eq!(service_hash(&c, "web-active"), s.current_pod_hash);
    assert_eq!(s.stable_rs, s.current_pod_hash);
    assert!(
        !s.blue_green.unwrap().scale_up_preview_check_point,
        "reset once promoted"
    );
}

/// An abort before the switch leaves the active Service on the stable pods and scales the preview down
/// `abortScaleDownDelaySeconds` (30 s by default) after the stable ReplicaSet is at full size.
#[test]
fn an_abort_keeps_the_stable_pods_active_and_scales_the_preview_down_after_its_delay() {
    let mut c = blue_green_rollout(
        2,
        json!({"activeService": "web-active", "previewService": "web-preview", "autoPromotionEnabled": false}),
    );
    first_deploy(&mut c);
    let old = c.status().current_pod_hash;
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let mark = c.events.len();
    c.patch_status(|s| s.abort = true);
    run(&mut c, at(20));
    assert_eq!(
        phase(&c),
        (
            "Degraded".into(),
            "RolloutAborted: Rollout aborted update to revision 2".into()
        )
    );
    assert!(c.status().pause_conditions.is_empty());
    assert_eq!(service_hash(&c, "web-active"), old);
    assert_eq!(
        replicas(&c),
        [2, 2],
        "the preview waits out abortScaleDownDelaySeconds"
    );
    assert_eq!(deadline_of(&c, 1).as_deref(), Some("2027-01-15T08:00:50Z"));
    run(&mut c, at(50));
    assert_eq!(replicas(&c), [2, 0]);
    let reasons = reasons_since(&c, mark);
    assert!(
        reasons.contains(&"RolloutAborted".to_string()),
        "{reasons:?}"
    );
}

/// Argo's blue-green example with `prePromotionAnalysis` and `postPromotionAnalysis` on `smoke`, which takes
/// the new pods' hash (`podTemplateHashValue: Latest`).
fn analysed(extra: serde_json::Value) -> MemoryCluster {
    let analysis = json!({"templates": [{"templateName": "smoke"}],
                          "args": [{"name": "service", "value": "web-preview"},
                                   {"name": "hash", "valueFrom": {"podTemplateHashValue": "Latest"}}]});
    let mut strategy = json!({"activeService": "web-active", "previewService": "web-preview"});
    for (field, value) in extra.as_object().unwrap() {
        strategy[field] = if value == &json!("smoke") {
            analysis.clone()
        } else {
            value.clone()
        };
    }
    let mut c = blue_green_rollout(2, strategy);
    with_analysis_template(
        &mut c,
        "smoke",
        json!([{"name": "up", "count": 1, "provider": {"prometheus": {"query": "up"}}}]),
    );
    c.templates
        .get_mut(&(false, "smoke".to_string()))
        .unwrap()
        .args =
        Some(serde_json::from_value(json!([{"name": "service"}, {"name": "hash"}])).unwrap());
    first_deploy(&mut c);
    set_image(&mut c, "web:2");
    c
}

fn run_named(c: &MemoryCluster, suffix: &str) -> canaryd::api::AnalysisRun {
    c.analysis_runs
        .iter()
        .find(|r| r.metadata.name.as_deref().unwrap().ends_with(suffix))
        .unwrap_or_else(|| panic!("no run ending {suffix}"))
        .clone()
}

/// A pre-promotion run (Argo's `<rollout>-<hash>-<revision>-pre`, rollout-type PrePromotion) starts once the
/// preview is at full size and holds the switch until it succeeds.
#[test]
fn a_pre_promotion_analysis_runs_against_the_preview_and_its_success_switches_the_active_service() {
    let mut c = analysed(json!({"prePromotionAnalysis": "smoke"}));
    let old = c.status().stable_rs;
    run(&mut c, at(10));
    let new = c.status().current_pod_hash;
    let pre = run_named(&c, "-pre");
    assert_eq!(
        pre.metadata.name.as_deref(),
        Some(format!("web-{new}-2-pre").as_str())
    );
    let labels = pre.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["rollout-type"], "PrePromotion");
    assert_eq!(labels["rollouts-pod-template-hash"], new);
    let args = pre.spec.args.as_ref().unwrap();
    assert_eq!(
        args.iter()
            .find(|a| a.name == "hash")
            .unwrap()
            .value
            .as_deref(),
        Some(new.as_str())
    );
    assert_eq!(
        service_hash(&c, "web-active"),
        old,
        "not before the analysis succeeds"
    );
    assert_eq!(phase(&c).1, "active service cutover pending");
    let recorded = c
        .status()
        .blue_green
        .unwrap()
        .pre_promotion_analysis_run_status
        .unwrap();
    assert_eq!(recorded.name, pre.metadata.name.clone().unwrap());

    c.finish_run(
        pre.metadata.name.as_deref().unwrap(),
        canaryd::api::AnalysisPhase::Successful,
        "",
    );
    run(&mut c, at(20));
    assert_eq!(service_hash(&c, "web-active"), new);
    assert_eq!(c.status().stable_rs, new);
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    let recorded = c
        .status()
        .blue_green
        .unwrap()
        .pre_promotion_analysis_run_status
        .unwrap();
    assert_eq!(
        recorded.status, "Successful",
        "kept once stable, as Argo keeps blue-green's runs"
    );
}

/// A failed pre-promotion run aborts: the active Service never moves, the preview goes after its delay.
#[test]
fn a_failed_pre_promotion_analysis_aborts_before_the_switch() {
    let mut c = analysed(json!({"prePromotionAnalysis": "smoke"}));
    let old = c.status().stable_rs;
    run(&mut c, at(10));
    let pre = run_named(&c, "-pre").metadata.name.unwrap();
    c.finish_run(
        &pre,
        canaryd::api::AnalysisPhase::Failed,
        "error rate too high",
    );
    run(&mut c, at(20));
    assert_eq!(
        phase(&c),
        (
            "Degraded".into(),
            "RolloutAborted: Rollout aborted update to revision 2: Blue/green pre-promotion analysis phase \
             error/failed: error rate too high"
                .into()
        )
    );
    assert_eq!(service_hash(&c, "web-active"), old);
    run(&mut c, at(50));
    assert_eq!(replicas(&c), [2, 0]);
}

/// An inconclusive pre-promotion run pauses the Rollout (InconclusiveAnalysisRun) and holds the Services.
#[test]
fn an_inconclusive_pre_promotion_analysis_pauses() {
    let mut c = analysed(json!({"prePromotionAnalysis": "smoke"}));
    run(&mut c, at(10));
    let pre = run_named(&c, "-pre").metadata.name.unwrap();
    c.finish_run(&pre, canaryd::api::AnalysisPhase::Inconclusive, "");
    run(&mut c, at(20));
    assert_eq!(
        phase(&c),
        ("Paused".into(), "InconclusiveAnalysisRun".into())
    );
    assert_eq!(service_hash(&c, "web-active"), c.status().stable_rs);
}

/// The post-promotion run starts after the switch; while it runs the new ReplicaSet is not stable and the
/// old one keeps its pods; when it fails, the active Service goes back to the old pods, still up (Argo's
/// TestBlueGreenPostPromotionFail).
#[test]
fn a_failed_post_promotion_analysis_switches_the_active_service_back_to_the_old_pods() {
    let mut c = analysed(json!({"postPromotionAnalysis": "smoke"}));
    let old = c.status().stable_rs;
    run(&mut c, at(10));
    let new = c.status().current_pod_hash;
    assert_eq!(service_hash(&c, "web-active"), new);
    let post = run_named(&c, "-post");
    assert_eq!(
        post.metadata.labels.as_ref().unwrap()["rollout-type"],
        "PostPromotion"
    );
    assert_eq!(
        c.status().stable_rs,
        old,
        "not stable before the analysis succeeds"
    );
    assert_eq!(phase(&c).1, "waiting for analysis to complete");
    run(&mut c, at(100));
    assert_eq!(
        replicas(&c),
        [2, 2],
        "the old pods stay while the analysis runs"
    );

    c.finish_run(
        post.metadata.name.as_deref().unwrap(),
        canaryd::api::AnalysisPhase::Failed,
        "",
    );
    run(&mut c, at(110));
    assert_eq!(service_hash(&c, "web-active"), old, "switched back");
    assert_eq!(c.status().stable_rs, old);
    assert_eq!(phase(&c).0, "Degraded");
    assert_eq!(
        replicas(&c)[0],
        2,
        "the old pods took the traffic back at full size"
    );
}

/// A successful post-promotion run makes the new ReplicaSet stable; then the old one waits its delay.
#[test]
fn a_successful_post_promotion_analysis_completes_the_update() {
    let mut c = analysed(json!({"postPromotionAnalysis": "smoke"}));
    run(&mut c, at(10));
    let post = run_named(&c, "-post").metadata.name.unwrap();
    c.finish_run(&post, canaryd::api::AnalysisPhase::Successful, "");
    run(&mut c, at(20));
    let s = c.status();
    assert_eq!(s.stable_rs, s.current_pod_hash);
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    run(&mut c, at(50));
    assert_eq!(replicas(&c), [0, 2]);
}

/// An update interrupted before its promotion (Argo's scaleDownOldReplicaSetsForBlueGreen): the preview of
/// the abandoned revision is neither new nor stable, and it too keeps its pods `scaleDownDelaySeconds` once no
/// Service selects it.
#[test]
fn an_abandoned_preview_waits_out_the_scale_down_delay_too() {
    let mut c = blue_green_rollout(
        1,
        json!({"activeService": "web-active", "previewService": "web-preview", "autoPromotionEnabled": false}),
    );
    first_deploy(&mut c);
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(replicas(&c), [1, 1]);
    set_image(&mut c, "web:3");
    run(&mut c, at(20));
    assert_eq!(replicas(&c), [1, 1, 1], "revision 2 waits out its delay");
    assert_eq!(deadline_of(&c, 1).as_deref(), Some("2027-01-15T08:00:50Z"));
    run(&mut c, at(50));
    assert_eq!(replicas(&c), [1, 0, 1]);
}

/// `scaleDownDelayRevisionLimit` (Argo's TestBlueGreenScaleDownLimit): of the old ReplicaSets waiting out
/// `scaleDownDelaySeconds`, only the newest `limit` keep their pods; an older one goes at once.
#[test]
fn scale_down_delay_revision_limit_keeps_only_the_newest_old_pods_up() {
    for (limit, expected) in [
        (None, [2, 2, 2]),
        (Some(1), [0, 2, 2]),
        (Some(0), [0, 0, 2]),
    ] {
        let mut strategy = json!({"activeService": "web-active", "previewService": "web-preview"});
        if let Some(limit) = limit {
            strategy["scaleDownDelayRevisionLimit"] = json!(limit);
        }
        let mut c = blue_green_rollout(2, strategy);
        first_deploy(&mut c);
        set_image(&mut c, "web:2");
        run(&mut c, at(10));
        set_image(&mut c, "web:3");
        run(&mut c, at(20));
        let s = c.status();
        assert_eq!(service_hash(&c, "web-active"), s.current_pod_hash);
        assert_eq!(s.stable_rs, s.current_pod_hash, "limit {limit:?}");
        assert_eq!(replicas(&c), expected, "limit {limit:?}");
        run(&mut c, at(50));
        assert_eq!(
            replicas(&c),
            [0, 0, 2],
            "every delay over (limit {limit:?})"
        );
    }
}

/// `kubectl argo rollouts restart` of a blue-green Rollout: as many pods at a time as Argo's MaxUnavailable
/// for blue-green allows: `maxUnavailable` as written (a percentage rounded down), Argo's default `"25"` when
/// it is unset, which apimachinery's GetValueFromIntOrPercent reads as 25% as it reads every string (2 of 8),
/// and at least one (12% of 8 comes to 0).
#[test]
fn a_restart_evicts_as_many_pods_at_once_as_blue_greens_max_unavailable() {
    for (max_unavailable, at_once) in [
        (None, 2),
        (Some(json!("25")), 2),
        (Some(json!("12%")), 1),
        (Some(json!(3)), 3),
        (Some(json!("50%")), 4),
    ] {
        let mut strategy = json!({"activeService": "web-active"});
        if let Some(m) = &max_unavailable {
            strategy["maxUnavailable"] = m.clone();
        }
        let mut c = blue_green_rollout(8, strategy);
        first_deploy(&mut c);
        c.edit_spec(|s| {
            s.restart_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(10)))
        });
        let plan = c.reconcile(at(10));
        let evicted = plan
            .writes
            .iter()
            .filter(|w| matches!(w, canaryd::engine::rollout::Write::EvictPod { .. }))
            .count();
        assert_eq!(evicted, at_once, "maxUnavailable {max_unavailable:?}");
    }
}
