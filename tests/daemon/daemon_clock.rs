//! `canaryd run` on a manual clock the test moves, against the fake API server and a scripted Prometheus:
//! analyses and pauses of realistic length (minutes, an hour) run in seconds of real time, and the times the
//! daemon writes are checked to the second, which tests on real time cannot do.

#![allow(clippy::disallowed_methods)] // The harness times its waits on real time; the daemon runs on the clock.

use std::time::Duration;

use canaryd::api::AnalysisPhase;
use canaryd_testkit::fake_apiserver::CrdSet;
use canaryd_testkit::harness::{self, Answer, create, first_result, run, run_clock_until};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

fn minutes(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

async fn an_analysis_of_minutes_measures_exactly_on_its_clock_in_seconds_of_real_time(
    crds: CrdSet,
) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let clock = harness::manual_clock();
    let start = clock.now();
    let daemon = harness::spawn_on(client.clone(), harness::config(), clock.clone()).await;
    create(
        &client,
        &run(
            "slow",
            &prom.uri(),
            json!({"initialDelay": "10m", "interval": "5m", "count": 3, "successCondition": "result >= 0.5"}),
        ),
    )
    .await;
    let done = harness::finished_on(&server, &clock, "slow").await;
    daemon.stop().await;
    let status = done.status.clone().expect("a status");
    assert_eq!(status.phase, Some(AnalysisPhase::Successful), "{status:?}");
    let began = status.started_at.expect("startedAt").0;
    assert_eq!(began, start, "the run starts at the clock's time");
    let r = first_result(&done).expect("a metric result");
    let started: Vec<Option<Timestamp>> = r
        .measurements
        .iter()
        .map(|m| m.started_at.as_ref().map(|t| t.0))
        .collect();
    let due = [10, 15, 20].map(|m| began.checked_add(minutes(m)).ok());
    assert_eq!(started, due, "after the initial delay, then every interval");
    assert_eq!(prom.queries(), 3);
    assert!(server.pruned().is_empty(), "{:?}", server.pruned());
}

async fn an_hour_long_pause_holds_until_the_clock_passes_the_hour(crds: CrdSet) {
    let steps = json!([
        {"setWeight": 20},
        {"pause": {"duration": "1h"}},
        {"setWeight": 100},
    ]);
    let (server, client, _prom, _rsc) =
        deployed_with(crds, Answer::Scalar(1.0), &with_steps("web:1", steps)).await;
    let clock = harness::manual_clock();
    let start = clock.now();
    let daemon = harness::spawn_on(client.clone(), config(), clock.clone()).await;
    let manual = clock.manual().expect("a manual clock");
    let first = until_on(&server, &clock, "the first deploy", |s| healthy_at(s, None)).await;
    set_image(&client, "web:2").await;
    let paused = until_on(&server, &clock, "the pause", |s| {
        s.phase == "Paused" && !s.pause_conditions.is_empty()
    })
    .await;
    let canary = paused.current_pod_hash.clone();
    assert_ne!(canary, first.stable_rs);
    let began = paused.pause_conditions[0].start_time.0;
    // The clock moved only by the daemon's short requeues while pods started on real time.
    assert!(
        start <= began && began <= clock.now() && began.duration_since(start) < minutes(1),
        "the pause began at {began}; the clock started at {start} and is at {}",
        clock.now()
    );
    let hour = began.checked_add(minutes(60)).expect("a time");
    // The reconciles that follow the pause's start (its Event among them) run before time is moved by hand.
    run_clock_until(&server, &clock, "the daemon to wait for the hour", || {
        (manual.next_wakeup() == Some(hour)).then_some(())
    })
    .await;
    manual.set(
        began
            .checked_add(minutes(59) + SignedDuration::from_secs(59))
            .expect("a time"),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = status(&server);
    assert_eq!(
        (held.phase.as_str(), held.current_step_index),
        ("Paused", Some(1)),
        "still paused a second before the hour: {held:?}"
    );
    assert_eq!(
        manual.next_wakeup(),
        Some(hour),
        "the daemon wakes at the hour"
    );

    let done = until_on(&server, &clock, "the promotion", |s| {
        s.phase == "Healthy" && !s.stable_rs.is_empty() && s.current_step_index == Some(3)
    })
    .await;
    daemon.stop().await;
    assert_eq!(done.stable_rs, canary);
    assert!(clock.now() >= hour);
    assert!(server.pruned().is_empty(), "{:?}", server.pruned());
    let events = timed_events(&client).await;
    let at = |note: &str| {
        events
            .iter()
            .find(|e| e.1 == note)
            .and_then(|e| e.2)
            .unwrap_or_else(|| panic!("no Event {note:?} with a time in {events:?}"))
    };
    let paused_at = events
        .iter()
        .find(|e| e.0 == "RolloutPaused")
        .and_then(|e| e.2)
        .unwrap_or_else(|| panic!("no RolloutPaused Event with a time in {events:?}"));
    // The status stores whole seconds; the Event, the clock's instant.
    assert_eq!(canaryd::time::whole_second(paused_at), began, "{events:?}");
    assert_eq!(at("Rollout step 2/3 completed (pause: 1h)"), hour);
    assert!(at("Rollout step 3/3 completed (setWeight: 100)") >= hour);
}

with_each_crd_set!(
    an_analysis_of_minutes_measures_exactly_on_its_clock_in_seconds_of_real_time,
    an_hour_long_pause_holds_until_the_clock_passes_the_hour,
);
