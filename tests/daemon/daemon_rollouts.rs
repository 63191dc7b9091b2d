//! `canaryd run --rollouts` against the fake API server (with its simulated ReplicaSet controller) and a
//! scripted Prometheus: a first deploy, a healthy update promoted through `setWeight`, a timed pause, a step
//! analysis executed by canaryd's own AnalysisRun controller and another `setWeight`, a bad update aborted with
//! the run's message, a daemon killed mid-step and started again, a missing template and Service reported and
//! retried, and Rollouts left alone without `--rollouts` or when another instance owns them.

#![allow(clippy::disallowed_methods)] // Not the Clock: the tests wait on real time, as all daemons here but one (on a manual clock) run.

use std::time::Duration;

use canaryd::api::rollout::RolloutStatus;
use canaryd::api::{AnalysisPhase, AnalysisRun, Rollout};
use canaryd_testkit::fake_apiserver::{self, CrdSet};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::apps::v1::ReplicaSet;

async fn a_first_deploy_goes_straight_to_full_with_the_stable_replica_set_recorded(crds: CrdSet) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "2s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let s = until(&server, "the first deploy to be Healthy", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    // Settled: no further write (Events, published on their own, may still be on their way).
    let writes = || {
        let requests = server.requests();
        requests
            .iter()
            .filter(|r| r.method != "GET" && !r.path.ends_with("/events"))
            .count()
    };
    let settled = writes();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(writes(), settled, "a settled Rollout is written again");
    daemon.stop().await;
    assert_eq!(s.stable_rs, s.current_pod_hash);
    assert_eq!(s.current_step_index, Some(4), "no step is run: {s:?}");
    assert_eq!(
        (s.replicas, s.updated_replicas, s.available_replicas),
        (5, 5, 5)
    );
    assert_eq!(replicas_of(&server, &s.stable_rs), Some(5));
    assert_eq!(replica_sets(&server).len(), 1);
    assert!(server.list::<AnalysisRun>("default").is_empty());
    assert_eq!(condition(&s, "Healthy").0, "True");
    assert_eq!(
        condition(&s, "Completed"),
        (
            "True".into(),
            "RolloutCompleted".into(),
            "RolloutCompleted".into()
        )
    );
    assert_eq!(service_hash(&server, "web-stable"), s.stable_rs);
    let reasons: Vec<String> = events(&client).await.into_iter().map(|e| e.0).collect();
    // Argo's informer tells the Rollout it was added, then the first plan updates it.
    assert_eq!(
        reasons
            .iter()
            .take(2)
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["RolloutAddedToInformer", "RolloutUpdated"],
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&"RolloutCompleted".to_string()),
        "{reasons:?}"
    );
}

with_each_crd_set!(a_first_deploy_goes_straight_to_full_with_the_stable_replica_set_recorded);

async fn a_healthy_update_is_promoted_step_by_step_with_argos_status_and_events(crds: CrdSet) {
    // A pause long enough to be seen (and its counts read) on a loaded machine.
    let (server, client, prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "4s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    set_image(&client, "web:2").await;
    let paused = until(&server, "the pause step", |s| {
        s.phase == "Paused" && s.current_step_index == Some(1)
    })
    .await;
    let canary = paused.current_pod_hash.clone();
    assert_ne!(canary, first.stable_rs);
    assert_eq!(paused.message, "CanaryPauseStep");
    assert_eq!(
        (
            replicas_of(&server, &canary),
            replicas_of(&server, &first.stable_rs)
        ),
        (Some(1), Some(4)),
        "setWeight 20 of 5 replicas: 1 canary, 4 stable (Argo's basic-canary counts)"
    );
    assert_eq!(service_hash(&server, "web-canary"), canary);
    assert_eq!(service_hash(&server, "web-stable"), first.stable_rs);
    let done = until(&server, "the promotion", |s| {
        healthy_at(s, Some(&canary)) && condition(s, "Healthy").0 == "True"
    })
    .await;
    // The stable Service is switched by the reconcile after the promotion, as Argo does.
    eventually(WAIT, "the stable Service switched", || async {
        (service_hash(&server, "web-stable") == canary).then_some(())
    })
    .await;
    daemon.stop().await;
    assert_eq!(done.current_pod_hash, canary);
    assert_eq!(done.current_step_index, Some(4));
    assert_eq!(done.observed_generation, "2");
    assert_eq!(
        (
            done.replicas,
            done.updated_replicas,
            done.ready_replicas,
            done.available_replicas
        ),
        (5, 5, 5, 5)
    );
    assert_eq!(
        (done.message.as_str(), done.selector.as_str()),
        ("", "app=web")
    );
    assert!(done.pause_conditions.is_empty() && !done.controller_pause && !done.abort);
    assert_eq!(done.canary.current_step_analysis_run_status, None);
    let types: Vec<(String, String, String)> =
        ["Available", "Completed", "Healthy", "Paused", "Progressing"]
            .iter()
            .map(|t| condition(&done, t))
            .collect();
    assert_eq!(
        types,
        [
            (
                "True",
                "AvailableReason",
                "Rollout has minimum availability"
            ),
            ("True", "RolloutCompleted", "RolloutCompleted"),
            ("True", "RolloutHealthy", "Rollout is healthy"),
            ("False", "RolloutPaused", "Rollout is paused"),
            (
                "True",
                "NewReplicaSetAvailable",
                &*format!("ReplicaSet \"web-{canary}\" has successfully progressed."),
            ),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );
    assert_eq!(
        (
            replicas_of(&server, &canary),
            replicas_of(&server, &first.stable_rs)
        ),
        (Some(5), Some(0))
    );
    assert_eq!(service_hash(&server, "web-canary"), canary);
    assert_eq!(service_hash(&server, "web-stable"), canary);
    // The step's run, executed by canaryd's AnalysisRun controller against Prometheus.
    let runs = server.list::<AnalysisRun>("default");
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0].metadata.name, Some(format!("web-{canary}-2-2")));
    assert_eq!(
        runs[0].status.as_ref().and_then(|s| s.phase),
        Some(AnalysisPhase::Successful)
    );
    assert_eq!(prom.queries(), 2);
    let (old, new) = (&first.stable_rs, &canary);
    let expected = [
        (
            "RolloutUpdated",
            "Rollout updated to revision 2".to_string(),
        ),
        (
            "NewReplicaSetCreated",
            format!("Created ReplicaSet web-{new} (revision 2)"),
        ),
        (
            "RolloutNotCompleted",
            format!("Rollout not completed, started update to revision 2 ({new})"),
        ),
        (
            "ScalingReplicaSet",
            format!("Scaled down ReplicaSet web-{old} (revision 1) from 5 to 4"),
        ),
        (
            "ScalingReplicaSet",
            format!("Scaled up ReplicaSet web-{new} (revision 2) from 0 to 1"),
        ),
        (
            "SwitchService",
            format!("Switched selector for service 'web-canary' from '{old}' to '{new}'"),
        ),
        (
            "RolloutStepCompleted",
            "Rollout step 1/4 completed (setWeight: 20)".to_string(),
        ),
        (
            "RolloutPaused",
            "Rollout is paused (CanaryPauseStep)".to_string(),
        ),
        (
            "RolloutStepCompleted",
            "Rollout step 2/4 completed (pause: 4s)".to_string(),
        ),
        ("RolloutResumed", "Rollout is resumed".to_string()),
        // The step's run is Running for its two measurements a second apart, and each change of it wakes
        // the Rollout.
        (
            "AnalysisRunRunning",
            format!("Step Analysis Run 'web-{new}-2-2' Status New: 'Running' Previous: ''"),
        ),
    ]
    .map(|(r, m)| (r.to_string(), m))
    .into_iter()
    .chain(events_after_step_analysis(
        old,
        new,
        &format!("web-{new}-2-2"),
    ))
    .collect::<Vec<_>>();
    // The update's Events: from its first on (the first deploy's may be published late, Events having a
    // publisher of their own).
    let all = events(&client).await;
    let update = all
        .iter()
        .position(|e| *e == expected[0])
        .unwrap_or(all.len());
    assert_eq!(all[update..], expected);
}

with_each_crd_set!(a_healthy_update_is_promoted_step_by_step_with_argos_status_and_events);

async fn a_bad_update_is_aborted_with_the_runs_message_and_the_canary_scaled_back(crds: CrdSet) {
    // The first deploy runs no analysis; the update's step analysis measures 0.5 < 0.95.
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(0.5), "1s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    set_image(&client, "web:2").await;
    let aborted = until(&server, "the abort", |s| s.phase == "Degraded").await;
    let canary = aborted.current_pod_hash.clone();
    eventually(WAIT, "the canary scaled back", || async {
        let stable = server.get::<ReplicaSet>("default", &format!("web-{}", first.stable_rs))?;
        let available = stable.status?.available_replicas;
        (replicas_of(&server, &canary) == Some(0) && available == Some(5)).then_some(())
    })
    .await;
    let s = until(&server, "the status to show it", |s| {
        s.available_replicas == 5
    })
    .await;
    daemon.stop().await;
    let runs = server.list::<AnalysisRun>("default");
    assert_eq!(runs.len(), 1, "{runs:#?}");
    let run_status = runs[0].status.clone().unwrap_or_default();
    assert_eq!(run_status.phase, Some(AnalysisPhase::Failed));
    let run_message = run_status.message.unwrap_or_default();
    assert!(!run_message.is_empty());
    let why = format!(
        "Rollout aborted update to revision 2: Step-based analysis phase error/failed: {run_message}"
    );
    assert!(s.abort && s.aborted_at.is_some());
    assert_eq!(
        (s.phase.as_str(), s.message.clone()),
        ("Degraded", format!("RolloutAborted: {why}"))
    );
    assert_eq!(
        condition(&s, "Progressing"),
        (
            "False".to_string(),
            "RolloutAborted".to_string(),
            why.clone()
        )
    );
    assert_eq!(s.stable_rs, first.stable_rs, "the stable ReplicaSet stays");
    assert_eq!(s.current_step_index, Some(0));
    assert_eq!(replicas_of(&server, &first.stable_rs), Some(5));
    assert_eq!(service_hash(&server, "web-canary"), first.stable_rs);
    assert_eq!(service_hash(&server, "web-stable"), first.stable_rs);
    let aborted_events: Vec<(String, String)> = events(&client)
        .await
        .into_iter()
        .filter(|e| e.0 == "RolloutAborted")
        .collect();
    assert_eq!(aborted_events, [("RolloutAborted".to_string(), why)]);
}

with_each_crd_set!(a_bad_update_is_aborted_with_the_runs_message_and_the_canary_scaled_back);

/// Waits until the Rollout is paused and its Events so far are published: Events are at most once (a crash
/// loses those still queued), and the crash tests count them.
async fn paused_and_told(
    server: &fake_apiserver::FakeApiServer,
    client: &kube::Client,
) -> RolloutStatus {
    let paused = until(server, "the pause", |s| s.phase == "Paused").await;
    told_up_to_the_pause(client).await;
    paused
}

/// Waits until the first step's completion and the pause are told: one reconcile publishes them together and
/// the publisher creates them at once, so either may land first.
async fn told_up_to_the_pause(client: &kube::Client) {
    eventually(WAIT, "the first step's and the pause's Events", || async {
        let all = events(client).await;
        let told = |reason: &str| all.iter().any(|e| e.0 == reason);
        (told("RolloutStepCompleted") && told("RolloutPaused")).then_some(())
    })
    .await;
}

/// Every step completed once, in order, and the pause (`pause` long) began once.
async fn assert_each_step_once(client: &kube::Client, pause: &str) {
    let all = events(client).await;
    let steps: Vec<&str> = all
        .iter()
        .filter(|e| e.0 == "RolloutStepCompleted")
        .map(|e| e.1.as_str())
        .collect();
    assert_eq!(
        steps,
        [
            "Rollout step 1/4 completed (setWeight: 20)",
            format!("Rollout step 2/4 completed (pause: {pause})").as_str(),
            "Rollout step 3/4 completed (analysis)",
            "Rollout step 4/4 completed (setWeight: 60)",
        ]
    );
    assert_eq!(all.iter().filter(|e| e.0 == "RolloutPaused").count(), 1);
}

async fn a_daemon_killed_mid_step_and_started_again_creates_nothing_twice_and_keeps_the_pause(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "4s").await;
    let clock = harness::manual_clock();
    let manual = clock.manual().expect("a manual clock");
    let daemon = harness::spawn_on(client.clone(), config(), clock.clone()).await;
    until_on(&server, &clock, "the first deploy", |s| healthy_at(s, None)).await;
    set_image(&client, "web:2").await;
    let paused = until_on(&server, &clock, "the pause", |s| s.phase == "Paused").await;
    let started = paused.pause_conditions[0].start_time.0;
    let ends = started
        .checked_add(jiff::SignedDuration::from_secs(4))
        .expect("a time");
    // The daemon has done all it does before the pause ends, its Events published (at most once: a crash
    // loses those still queued, and the steps' Events are counted below).
    harness::run_clock_until(
        &server,
        &clock,
        "the daemon to wait for the pause's end",
        || (manual.next_wakeup() == Some(ends)).then_some(()),
    )
    .await;
    told_up_to_the_pause(&client).await;
    daemon.kill().await;
    // Down for half the pause.
    manual.advance(Duration::from_secs(2));
    let again = harness::spawn_on(client.clone(), config(), clock.clone()).await;
    until_on(&server, &clock, "the promotion", |s| {
        healthy_at(s, Some(&paused.current_pod_hash))
    })
    .await;
    again.stop().await;
    // The pause ends 4 s after the start its condition recorded; started again by the restart, it would end
    // 2 s later.
    let resumed = timed_events(&client)
        .await
        .into_iter()
        .find(|e| e.0 == "RolloutResumed")
        .and_then(|e| e.2);
    assert_eq!(resumed, Some(ends));
    assert_eq!(
        creates(&server),
        (2, 1),
        "one ReplicaSet per revision, one run"
    );
    assert_eq!(replica_sets(&server).len(), 2);
    assert_each_step_once(&client, "4s").await;
}

with_each_crd_set!(
    a_daemon_killed_mid_step_and_started_again_creates_nothing_twice_and_keeps_the_pause
);

async fn when_the_leader_dies_mid_rollout_the_standby_finishes_it(crds: CrdSet) {
    // Long enough that the leader is still in the pause when it is killed, even on a loaded machine: a step
    // completed just before the kill would lose its queued Event (Events are at most once).
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "8s").await;
    let elected = |id: &str| canaryd::controller::Config {
        rollouts: true,
        ..harness::elected(id)
    };
    let a = harness::spawn(client.clone(), elected("a")).await;
    eventually(WAIT, "a to lead", || async {
        (a.metric("canaryd_leader", &[]).await == 1.0).then_some(())
    })
    .await;
    let b = harness::spawn(client.clone(), elected("b")).await;
    until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    set_image(&client, "web:2").await;
    let paused = paused_and_told(&server, &client).await;
    a.kill().await;
    until(&server, "the standby's promotion", |s| {
        healthy_at(s, Some(&paused.current_pod_hash))
    })
    .await;
    assert_eq!(b.metric("canaryd_leader", &[]).await, 1.0);
    b.stop().await;
    assert_eq!(
        creates(&server),
        (2, 1),
        "one ReplicaSet per revision, one run"
    );
    assert_each_step_once(&client, "8s").await;
}

with_each_crd_set!(when_the_leader_dies_mid_rollout_the_standby_finishes_it);

/// With Argo's CRDs only: nothing here depends on the CRD set, and each retry waits Argo's 20 s.
#[test]
fn a_missing_template_or_service_is_invalid_spec_until_it_appears() {
    harness::run_test(missing_template_or_service());
}

async fn missing_template_or_service() {
    let (server, client, prom) = harness::cluster(CrdSet::Argo, Answer::Scalar(1.0)).await;
    let _rsc = server.replica_set_controller(POD_START);
    create_service(&client, "web-stable").await;
    create_rollout(&client, &rollout("web:1", "1s")).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let invalid = |field: &'static str| {
        move |s: &RolloutStatus| {
            let (state, reason, message) = condition(s, "InvalidSpec");
            state == "True" && reason == "InvalidSpec" && message.contains(field)
        }
    };
    // Argo's getRolloutValidationErrors: the Services before the templates.
    let s = until(
        &server,
        "InvalidSpec naming the Service",
        invalid("canaryService"),
    )
    .await;
    assert_eq!(s.phase, "Degraded");
    assert_eq!(
        s.message,
        "InvalidSpec: The Rollout \"web\" is invalid: spec.strategy.canary.canaryService: Invalid value: \"web-canary\": service \"web-canary\" not found"
    );
    assert!(replica_sets(&server).is_empty(), "nothing is created");
    create_service(&client, "web-canary").await;
    let s = until(
        &server,
        "InvalidSpec naming the template",
        invalid("steps[2].analysis"),
    )
    .await;
    assert!(
        s.message
            .starts_with("InvalidSpec: The Rollout \"web\" is invalid: "),
        "{}",
        s.message
    );
    assert!(replica_sets(&server).is_empty(), "nothing is created");
    create_template(&client, &prom).await;
    let s = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    daemon.stop().await;
    assert_eq!(condition(&s, "InvalidSpec"), Default::default());
}

async fn rollouts_are_left_alone_without_the_flag_or_when_another_instance_owns_them(crds: CrdSet) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "1s").await;
    // Argo Rollouts' (instance `argo`): never canaryd's, whatever its flags.
    let mut theirs = rollout("web:1", "1s");
    theirs.metadata.name = Some("theirs".into());
    theirs.metadata.labels =
        Some([(canaryd::api::INSTANCE_LABEL.to_string(), "argo".to_string())].into());
    create_rollout(&client, &theirs).await;
    let without_flag = harness::spawn(client.clone(), harness::config()).await;
    eventually(WAIT, "the daemon to be ready", || async {
        (without_flag.scrape("/readyz").await.0 == 200).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    without_flag.stop().await;
    assert_eq!(
        status(&server),
        RolloutStatus::default(),
        "without --rollouts"
    );
    assert!(replica_sets(&server).is_empty());
    let with_flag = harness::spawn(client.clone(), config()).await;
    until(&server, "its own Rollout's first deploy", |s| {
        healthy_at(s, None)
    })
    .await;
    with_flag.stop().await;
    let untouched = server.get::<Rollout>("default", "theirs").expect("theirs");
    assert_eq!(untouched.status, None, "another instance's Rollout");
    let owners: Vec<String> = replica_sets(&server)
        .iter()
        .flat_map(|rs| rs.metadata.owner_references.clone().unwrap_or_default())
        .map(|o| o.name)
        .collect();
    assert_eq!(owners, ["web"]);
}

with_each_crd_set!(rollouts_are_left_alone_without_the_flag_or_when_another_instance_owns_them);

async fn writes_refused_with_409_are_planned_again_and_nothing_is_done_twice(crds: CrdSet) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "1s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    // Another writer wins the next ReplicaSet write and the next two status writes.
    let refuse = |path: &str, times: usize| {
        server.fail_next(
            fake_apiserver::RequestPattern::new("PATCH", path),
            times,
            409,
        );
    };
    refuse("/replicasets/", 1);
    refuse("/rollouts/web/status", 2);
    set_image(&client, "web:2").await;
    // A state that stays: step 0 alone can pass between two looks.
    let canary = until(&server, "the new revision", |s| {
        !s.current_pod_hash.is_empty() && s.current_pod_hash != first.stable_rs
    })
    .await
    .current_pod_hash;
    until(&server, "the promotion", |s| healthy_at(s, Some(&canary))).await;
    let conflicts = daemon
        .metric("canaryd_reconcile_errors_total", &[("reason", "conflict")])
        .await;
    daemon.stop().await;
    assert!(conflicts >= 2.0, "{conflicts} conflicts seen");
    assert_eq!(
        creates(&server),
        (2, 1),
        "one ReplicaSet per revision, one run"
    );
    let steps: Vec<String> = events(&client)
        .await
        .into_iter()
        .filter(|e| e.0 == "RolloutStepCompleted")
        .map(|e| e.1)
        .collect();
    assert_eq!(steps.len(), 4, "each step completed once: {steps:?}");
}

with_each_crd_set!(writes_refused_with_409_are_planned_again_and_nothing_is_done_twice);
