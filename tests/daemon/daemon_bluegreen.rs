//! `canaryd run --rollouts` progressing Argo's blue-green example (`examples/rollout-bluegreen.yaml` with the
//! analyses of `docs/features/bluegreen.md`) against the fake API server under both CRD sets: promoted after
//! its pre-promotion analysis and a person's `promote`, with the daemon restarted while it waits; a failed
//! post-promotion analysis putting the active Service back on the old pods; an abort before the switch;
//! canaryd's own actions (`set image`, `abort`, `retry`, `promote`, `undo`) as kubectl-argo-rollouts' plugin
//! sends them; `antiAffinity`'s term on each new ReplicaSet, moved when a rollback re-uses one.

#![allow(clippy::disallowed_methods)] // Not the Clock: the tests wait on real time.

use canaryd::api::{AnalysisPhase, AnalysisRun, Rollout};
use canaryd_testkit::cli::Canaryd;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use serde_json::{Value, json};

const CANARYD: Canaryd = canaryd_testkit::canaryd!();

/// `canaryd ARGS` against `server`'s cluster, which must succeed.
async fn act(server: &FakeApiServer, args: &[&str]) {
    let ran = CANARYD.on_cluster(server.kubeconfig_path(), args).await;
    assert_eq!(ran.code, Some(0), "canaryd {args:?}: {}", ran.stderr);
}

/// `web`, 2 replicas, behind `web-active` and `web-preview`, with the blue-green `strategy` (whose
/// `"success-rate"` analyses name the scripted Prometheus's template), and a ReplicaSet controller.
async fn blue_green(crds: CrdSet, answer: Answer, strategy: Value) -> Deployed {
    let (server, client, prom) = harness::cluster(crds, answer).await;
    let controller = server.replica_set_controller(POD_START);
    create_service(&client, "web-active").await;
    create_service(&client, "web-preview").await;
    create_template(&client, &prom).await;
    let mut rollout: Rollout =
        canaryd_testkit::rollout::object("default", "web", 2, "web:1", json!({}));
    rollout.spec.strategy = serde_json::from_value(json!({"blueGreen": strategy})).ok();
    create_rollout(&client, &rollout).await;
    (server, client, prom, controller)
}

fn success_rate() -> Value {
    json!({"templates": [{"templateName": "success-rate"}]})
}

fn blue_green_status(s: &canaryd::api::rollout::RolloutStatus) -> (String, String) {
    let b = s.blue_green.clone().unwrap_or_default();
    (b.active_selector, b.preview_selector)
}

fn runs(server: &FakeApiServer) -> Vec<AnalysisRun> {
    server.list::<AnalysisRun>("default")
}

async fn argos_example_is_promoted_after_its_pre_promotion_analysis_across_a_restart(crds: CrdSet) {
    let strategy = json!({"activeService": "web-active", "previewService": "web-preview",
                          "autoPromotionEnabled": false, "prePromotionAnalysis": success_rate()});
    let (server, client, _prom, _rsc) = blue_green(crds, Answer::Scalar(1.0), strategy).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| {
        healthy_at(s, None) && blue_green_status(s).0 == s.stable_rs
    })
    .await;
    assert_eq!(service_hash(&server, "web-active"), first.stable_rs);
    assert!(runs(&server).is_empty(), "no analysis on the first deploy");
    set_image(&client, "web:2").await;
    let paused = until(&server, "the pause after the pre-promotion analysis", |s| {
        s.message == "BlueGreenPause"
    })
    .await;
    let new = paused.current_pod_hash.clone();
    assert_eq!(paused.phase, "Paused");
    assert_eq!(
        blue_green_status(&paused),
        (first.stable_rs.clone(), new.clone())
    );
    let recorded = paused
        .blue_green
        .clone()
        .unwrap()
        .pre_promotion_analysis_run_status
        .unwrap();
    assert_eq!(
        (recorded.name.as_str(), recorded.status.as_str()),
        (format!("web-{new}-2-pre").as_str(), "Successful")
    );
    let run = &runs(&server)[0];
    assert_eq!(
        run.metadata.labels.as_ref().unwrap()["rollout-type"],
        "PrePromotion"
    );
    assert_eq!(
        run.status.as_ref().and_then(|s| s.phase),
        Some(AnalysisPhase::Successful)
    );
    assert_eq!(service_hash(&server, "web-active"), first.stable_rs);
    assert_eq!(service_hash(&server, "web-preview"), new);
    assert_eq!(
        (
            replicas_of(&server, &new),
            replicas_of(&server, &first.stable_rs)
        ),
        (Some(2), Some(2))
    );

    // The Events of the analysis and the pause are published from a queue: let them reach the API server
    // before the crash, which would lose what is still queued (as client-go's recorder would).
    eventually(WAIT, "the analysis and pause Events", || async {
        let reasons: Vec<String> = events(&client).await.into_iter().map(|e| e.0).collect();
        ["AnalysisRunSuccessful", "RolloutPaused"]
            .iter()
            .all(|r| reasons.iter().any(|seen| seen == r))
            .then_some(())
    })
    .await;
    // Restarted while it waits for a person: nothing is made twice and the pause holds.
    daemon.kill().await;
    let again = harness::spawn(client.clone(), config()).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(status(&server).message, "BlueGreenPause");
    // kubectl-argo-rollouts promote.
    patch_status(&client, json!({"status": {"pauseConditions": null}})).await;
    let done = until(&server, "the promotion", |s| healthy_at(s, Some(&new))).await;
    again.stop().await;
    assert_eq!(service_hash(&server, "web-active"), new);
    assert_eq!(blue_green_status(&done), (new.clone(), new.clone()));
    assert_eq!(
        done.selector,
        format!("app=web,rollouts-pod-template-hash={new}")
    );
    assert_eq!(
        creates(&server),
        (2, 1),
        "one ReplicaSet per revision, one run"
    );
    let reasons: Vec<String> = events(&client).await.into_iter().map(|e| e.0).collect();
    for reason in [
        "AnalysisRunSuccessful",
        "RolloutPaused",
        "SwitchService",
        "RolloutCompleted",
    ] {
        assert!(
            reasons.contains(&reason.to_string()),
            "{reason}: {reasons:?}"
        );
    }
}

with_each_crd_set!(argos_example_is_promoted_after_its_pre_promotion_analysis_across_a_restart);

async fn a_failed_post_promotion_analysis_switches_the_active_service_back(crds: CrdSet) {
    let strategy = json!({"activeService": "web-active", "previewService": "web-preview",
                          "postPromotionAnalysis": success_rate()});
    let (server, client, _prom, _rsc) = blue_green(crds, Answer::Scalar(0.5), strategy).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| {
        healthy_at(s, None) && blue_green_status(s).0 == s.stable_rs
    })
    .await;
    set_image(&client, "web:2").await;
    // The switch to the new pods lasts only until the run fails, too briefly to be seen reliably by polling;
    // the post-promotion run, which starts only after it, is checked below.
    let aborted = until(&server, "the abort", |s| {
        s.abort && !s.current_pod_hash.is_empty() && s.current_pod_hash != first.stable_rs
    })
    .await;
    let new = aborted.current_pod_hash.clone();
    eventually(WAIT, "the active Service switched back", || async {
        (service_hash(&server, "web-active") == first.stable_rs).then_some(())
    })
    .await;
    let back = until(&server, "the status to say so", |s| {
        blue_green_status(s).0 == first.stable_rs
    })
    .await;
    daemon.stop().await;
    assert_eq!(back.phase, "Degraded");
    assert!(back.message.starts_with("RolloutAborted: Rollout aborted update to revision 2: Blue/green post-promotion analysis phase error/failed"), "{}", back.message);
    assert_eq!(aborted.stable_rs, first.stable_rs, "never stable");
    assert_eq!(
        replicas_of(&server, &first.stable_rs),
        Some(2),
        "the old pods stayed up"
    );
    let run = runs(&server)
        .into_iter()
        .next()
        .expect("the post-promotion run");
    assert_eq!(
        run.metadata.name.as_deref(),
        Some(format!("web-{new}-2-post").as_str())
    );
}

with_each_crd_set!(a_failed_post_promotion_analysis_switches_the_active_service_back);

async fn an_abort_before_the_switch_scales_the_preview_down_after_its_delay(crds: CrdSet) {
    let strategy = json!({"activeService": "web-active", "previewService": "web-preview",
                          "autoPromotionEnabled": false, "abortScaleDownDelaySeconds": 1});
    let (server, client, _prom, _rsc) = blue_green(crds, Answer::Scalar(1.0), strategy).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    set_image(&client, "web:2").await;
    let paused = until(&server, "the pause", |s| s.message == "BlueGreenPause").await;
    patch_status(&client, json!({"status": {"abort": true}})).await;
    let new = paused.current_pod_hash.clone();
    eventually(WAIT, "the preview scaled down", || async {
        (replicas_of(&server, &new) == Some(0)).then_some(())
    })
    .await;
    let s = status(&server);
    daemon.stop().await;
    assert_eq!(s.phase, "Degraded");
    assert_eq!(service_hash(&server, "web-active"), first.stable_rs);
    assert_eq!(replicas_of(&server, &first.stable_rs), Some(2));
}

with_each_crd_set!(an_abort_before_the_switch_scales_the_preview_down_after_its_delay);

/// The plugin's actions on a blue-green Rollout: `abort` leaves the active Service on the stable pods and
/// scales the preview down, `retry` brings the preview and the pause back, `promote` switches the active
/// Service, and `undo` within `scaleDownDelaySeconds` is Argo's fast rollback: the old pods, still up, take
/// the traffic again without a pause.
async fn canaryds_actions_steer_a_blue_green_rollout(crds: CrdSet) {
    let strategy = json!({"activeService": "web-active", "previewService": "web-preview",
                          "autoPromotionEnabled": false, "abortScaleDownDelaySeconds": 1,
                          "scaleDownDelaySeconds": 600});
    let (server, client, _prom, _rsc) = blue_green(crds, Answer::Scalar(1.0), strategy).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    let stable = first.stable_rs.clone();
    // Argo's isRollback compares the ReplicaSets' creationTimestamps, which have whole seconds: revision 2's
    // must come a second later for the undo to be a rollback at all.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    act(&server, &["set", "image", "web", "web=web:2"]).await;
    let paused = until(&server, "the pause", |s| s.message == "BlueGreenPause").await;
    let new = paused.current_pod_hash.clone();
    assert_eq!(service_hash(&server, "web-preview"), new);

    act(&server, &["abort", "web"]).await;
    let aborted = until(&server, "the abort", |s| s.phase == "Degraded").await;
    assert_eq!(
        aborted.message,
        "RolloutAborted: Rollout aborted update to revision 2"
    );
    eventually(WAIT, "the preview scaled down", || async {
        (replicas_of(&server, &new) == Some(0)).then_some(())
    })
    .await;
    assert_eq!(service_hash(&server, "web-active"), stable);

    act(&server, &["retry", "web"]).await;
    until(&server, "the retried pause", |s| {
        s.message == "BlueGreenPause" && !s.abort
    })
    .await;
    assert_eq!(replicas_of(&server, &new), Some(2), "the preview back up");

    act(&server, &["promote", "web"]).await;
    until(&server, "the promotion", |s| healthy_at(s, Some(&new))).await;
    assert_eq!(service_hash(&server, "web-active"), new);
    assert_eq!(replicas_of(&server, &stable), Some(2), "within its delay");
    // The delay starts when the reconcile after the switch marks revision 1 with its scale-down deadline (as
    // Argo's next reconcileBlueGreenReplicaSets does): an undo before that is not yet a fast rollback.
    eventually(WAIT, "revision 1's scale-down deadline", || async {
        let rs = server
            .get::<k8s_openapi::api::apps::v1::ReplicaSet>("default", &format!("web-{stable}"))?;
        rs.metadata
            .annotations?
            .contains_key("scale-down-deadline")
            .then_some(())
    })
    .await;

    act(&server, &["undo", "web"]).await;
    let back = until(&server, "revision 1's pods active again", |s| {
        healthy_at(s, Some(&stable))
    })
    .await;
    daemon.stop().await;
    assert_eq!(back.current_pod_hash, stable);
    assert!(
        back.pause_conditions.is_empty(),
        "{:?}",
        back.pause_conditions
    );
    assert_eq!(service_hash(&server, "web-active"), stable);
    assert_eq!(blue_green_status(&back), (stable.clone(), stable));
}

with_each_crd_set!(canaryds_actions_steer_a_blue_green_rollout);

/// `spec.template.spec.affinity` of the ReplicaSet running `hash`, as the API server holds it.
fn affinity_of(server: &FakeApiServer, hash: &str) -> Value {
    let rs =
        server.get::<k8s_openapi::api::apps::v1::ReplicaSet>("default", &format!("web-{hash}"));
    let affinity = rs.and_then(|rs| rs.spec?.template?.spec?.affinity);
    serde_json::to_value(affinity).unwrap_or(Value::Null)
}

/// Argo's term against the pods of `stable`, preferred with weight 50.
fn avoiding(stable: &str) -> Value {
    json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": {
        "labelSelector": {"matchExpressions": [
            {"key": "rollouts-pod-template-hash", "operator": "In", "values": [stable]}]},
        "namespaces": ["default"],
        "topologyKey": "kubernetes.io/hostname",
    }}]}})
}

/// `antiAffinity` through the API server: each new ReplicaSet is created avoiding the stable pods, and one
/// brought back by a rollback has its term patched to avoid the stable pods of then.
async fn anti_affinity_keeps_each_new_replica_set_off_the_stable_pods(crds: CrdSet) {
    let strategy = json!({"activeService": "web-active", "previewService": "web-preview",
                          "scaleDownDelaySeconds": 1,
                          "antiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 50}}});
    let (server, client, _prom, _rsc) = blue_green(crds, Answer::Scalar(1.0), strategy).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None))
        .await
        .stable_rs;
    assert_eq!(affinity_of(&server, &first), Value::Null);
    let mut hashes = vec![first];
    for image in ["web:2", "web:3"] {
        let before = hashes.last().cloned().unwrap_or_default();
        set_image(&client, image).await;
        let now = until(&server, image, |s| {
            s.stable_rs != before && healthy_at(s, None)
        })
        .await;
        assert_eq!(
            affinity_of(&server, &now.stable_rs),
            avoiding(&before),
            "{image}"
        );
        hashes.push(now.stable_rs);
    }
    set_image(&client, "web:2").await;
    until(&server, "the rollback to web:2", |s| {
        healthy_at(s, Some(&hashes[1]))
    })
    .await;
    daemon.stop().await;
    assert_eq!(affinity_of(&server, &hashes[1]), avoiding(&hashes[2]));
    assert_eq!(creates(&server).0, 3, "web:2's ReplicaSet is re-used");
}

with_each_crd_set!(anti_affinity_keeps_each_new_replica_set_off_the_stable_pods);
