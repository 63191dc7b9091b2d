//! `canaryd run` against the fake API server and a scripted Prometheus: runs from creation to verdict,
//! terminate, secrets, invalid specs, ownership, TTL, API faults, Prometheus outages and `/metrics`.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use std::time::Duration;

use canaryd::api::{AnalysisPhase, AnalysisRun};
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern};
use canaryd_testkit::harness::{
    self, Answer, FakePrometheus, create, eventually, first_result, run,
};
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn phase(run: &AnalysisRun) -> Option<AnalysisPhase> {
    run.status.as_ref().and_then(|s| s.phase)
}

fn result(run: &AnalysisRun) -> canaryd::api::MetricResult {
    first_result(run).expect("a metric result")
}

async fn event_reasons(client: &kube::Client, name: &str) -> Vec<String> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let events = api.list(&ListParams::default()).await.expect("events list");
    events
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

/// Measurement start of each measurement minus when the status said it was due (previous finish + 1 s).
fn spacing_ok(result: &canaryd::api::MetricResult, interval: Duration) -> bool {
    result.measurements.windows(2).all(|w| {
        let (Some(prev), Some(next)) = (w[0].finished_at.as_ref(), w[1].started_at.as_ref()) else {
            return false;
        };
        let gap = next.0.duration_since(prev.0);
        gap >= jiff::SignedDuration::try_from(interval).unwrap_or_default()
    })
}

async fn each_measurement_starts_in_the_second_its_status_says_it_is_due(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    create(
        &client,
        &run(
            "punctual",
            &prom.uri(),
            json!({"interval": "2s", "count": 4, "successCondition": "result >= 0.5"}),
        ),
    )
    .await;
    let done = harness::finished(&server, "punctual", WAIT).await;
    daemon.stop().await;
    let r = result(&done);
    assert_eq!((r.count, r.measurements.len()), (4, 4));
    assert_on_time(&r, 2, &prom);
}

/// Every measurement after the first started `interval` seconds after the previous one finished (whole
/// seconds, as the status stores them), and its query reached Prometheus in that second.
fn assert_on_time(r: &canaryd::api::MetricResult, interval: i64, prom: &FakePrometheus) {
    let arrivals = prom.arrivals.lock().expect("arrivals").clone();
    for w in r.measurements.windows(2) {
        let (Some(previous), Some(next)) = (&w[0].finished_at, &w[1].started_at) else {
            panic!("measurements without timestamps: {r:?}");
        };
        assert_eq!(
            next.0,
            previous.0 + jiff::SignedDuration::from_secs(interval),
            "{r:?}"
        );
        assert!(
            arrivals
                .iter()
                .any(|(_, at)| canaryd::time::whole_second(*at) == next.0),
            "no query reached Prometheus in the second {} it was due: {arrivals:?}",
            next.0
        );
    }
}

async fn a_slow_events_endpoint_neither_delays_measurements_nor_loses_the_events(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    // Each Event is created three seconds after it is sent: longer than the interval.
    server.delay_next(
        RequestPattern::new("POST", "/events"),
        10,
        Duration::from_secs(3),
    );
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    create(
        &client,
        &run(
            "patient",
            &prom.uri(),
            json!({"interval": "1s", "count": 3, "successCondition": "result == 1"}),
        ),
    )
    .await;
    let done = harness::finished(&server, "patient", WAIT).await;
    let r = result(&done);
    assert_eq!((r.count, r.measurements.len()), (3, 3));
    assert_on_time(&r, 1, &prom);
    let reasons = eventually(WAIT, "both Events", || async {
        let reasons = event_reasons(&client, "patient").await;
        (reasons.len() == 2).then_some(reasons)
    })
    .await;
    assert_eq!(reasons, ["MetricSuccessful", "AnalysisRunSuccessful"]);
    daemon.stop().await;
}

/// A daemon that has just completed the one-measurement run `name`, whose two Events (its metric's and its
/// own) the API server holds for `hold`; and the server, the client and the stored run.
async fn completed_with_its_event_held(
    crds: CrdSet,
    name: &str,
    hold: Duration,
) -> (FakeApiServer, kube::Client, harness::Running, AnalysisRun) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    server.delay_next(RequestPattern::new("POST", "/events"), 2, hold);
    create(
        &client,
        &run(
            name,
            &prom.uri(),
            json!({"count": 1, "successCondition": "result == 1"}),
        ),
    )
    .await;
    let done = harness::finished(&server, name, WAIT).await;
    (server, client, daemon, done)
}

async fn a_graceful_stop_publishes_the_events_still_on_their_way(crds: CrdSet) {
    let (_server, client, daemon, done) =
        completed_with_its_event_held(crds, "last-words", Duration::from_secs(3)).await;
    assert_eq!(phase(&done), Some(AnalysisPhase::Successful));
    // Its Events are still held by the API server when the daemon is told to stop.
    assert!(event_reasons(&client, "last-words").await.is_empty());
    daemon.stop().await;
    assert_eq!(
        event_reasons(&client, "last-words").await,
        ["MetricSuccessful", "AnalysisRunSuccessful"]
    );
}

async fn a_stop_gives_up_on_an_event_the_api_server_never_answers_and_counts_it(crds: CrdSet) {
    let (_server, client, daemon, _) =
        completed_with_its_event_held(crds, "unheard", Duration::from_secs(60)).await;
    let ctx = daemon.ctx.clone();
    let stopping = std::time::Instant::now();
    daemon.stop().await;
    let took = stopping.elapsed();
    // Five seconds of drain, not the minute the API server holds the Event (nor the harness's 20 s).
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(15),
        "{took:?}"
    );
    let metrics = canaryd::observe::Probe::metrics(&*ctx);
    assert!(
        metrics.contains("canaryd_reconcile_errors_total{reason=\"event\"} 2\n"),
        "{metrics}"
    );
    assert!(event_reasons(&client, "unheard").await.is_empty());
}

async fn a_verdict_is_written_at_once_while_routine_writes_wait_for_a_slot(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    // The API server holds every status write of the busy runs for 30 s: no slot frees up during the test, on
    // however loaded a machine.
    let busy = RequestPattern::new("PATCH", "/analysisruns/busy-");
    let held = jiff::SignedDuration::from_secs(30);
    server.delay_next(busy.clone(), 1000, held.unsigned_abs());
    let metric = json!({"interval": "60s", "count": 2, "successCondition": "result == 1"});
    for i in 0..100 {
        create(
            &client,
            &run(&format!("busy-{i}"), &prom.uri(), metric.clone()),
        )
        .await;
    }
    eventually(WAIT, "64 routine writes in flight", || async {
        (server.request_count(&busy) >= 64).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // 100 runs have a first measurement to write; 64 writes are at the API server, the rest wait in the daemon.
    assert_eq!(server.request_count(&busy), 64);
    create(
        &client,
        &run(
            "verdict",
            &prom.uri(),
            json!({"count": 1, "successCondition": "result == 1"}),
        ),
    )
    .await;
    let done = harness::finished(&server, "verdict", WAIT).await;
    assert_eq!(phase(&done), Some(AnalysisPhase::Successful));
    let requests = server.requests();
    let first_busy = requests
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.contains("/analysisruns/busy-"))
        .map(|r| r.at)
        .min()
        .expect("busy writes");
    let verdict = requests
        .iter()
        .find(|r| r.method == "PATCH" && r.path.contains("/analysisruns/verdict"))
        .map(|r| r.at)
        .expect("the verdict's write");
    // Before any slot was free again.
    assert!(
        verdict < first_busy + held,
        "the verdict was written at {verdict}, the first busy write at {first_busy}"
    );
    assert_eq!(server.request_count(&busy), 64);
    // The held writes would keep a graceful stop waiting.
    daemon.kill().await;
}

async fn a_share_window_serves_runs_due_in_other_seconds_with_one_query(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let config = canaryd::controller::Config {
        prometheus_share_window: Duration::from_secs(10),
        ..harness::config()
    };
    let clock = harness::manual_clock();
    let (manual, start) = (clock.manual().expect("a manual clock"), clock.now());
    let daemon = harness::spawn_on(client.clone(), config, clock.clone()).await;
    let metric = json!({"interval": "3s", "count": 2, "successCondition": "result == 1"});
    create(&client, &run("first", &prom.uri(), metric.clone())).await;
    harness::run_clock_until(&server, &clock, "first's first measurement", || {
        first_result(&server.get::<AnalysisRun>("default", "first")?)
    })
    .await;
    // Due a second after the first run's measurements, within the window.
    manual.advance(Duration::from_secs(1));
    create(&client, &run("second", &prom.uri(), metric)).await;
    let mut started = Vec::new();
    for name in ["first", "second"] {
        let done = harness::finished_on(&server, &clock, name).await;
        assert_eq!(phase(&done), Some(AnalysisPhase::Successful));
        assert_eq!(result(&done).count, 2);
        started.extend(
            result(&done)
                .measurements
                .iter()
                .map(|m| m.started_at.clone()),
        );
    }
    daemon.stop().await;
    // Four measurements due in four different seconds over five, one query.
    let second = |s: i64| {
        let at = start.checked_add(jiff::SignedDuration::from_secs(s));
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            at.expect("a time"),
        ))
    };
    assert_eq!(
        started,
        [0, 3, 1, 4].map(second),
        "first at 0 and 3 s, second at 1 and 4 s"
    );
    assert_eq!(prom.queries(), 1);
}

async fn a_run_goes_from_creation_to_successful_with_its_events_and_metrics(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(0.99)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    create(
        &client,
        &run(
            "ok",
            &prom.uri(),
            json!({"interval": "1s", "count": 3, "successCondition": "result >= 0.95"}),
        ),
    )
    .await;
    let done = harness::finished(&server, "ok", WAIT).await;
    assert_eq!(phase(&done), Some(AnalysisPhase::Successful));
    let r = result(&done);
    assert_eq!((r.count, r.successful, r.measurements.len()), (3, 3, 3));
    assert!(spacing_ok(&r, Duration::from_secs(1)), "{r:?}");
    let reasons = eventually(WAIT, "the metric's and the run's Events", || async {
        let reasons = event_reasons(&client, "ok").await;
        (reasons.len() >= 2).then_some(reasons)
    })
    .await;
    // Argo's: the metric's completion, then the run's; nothing for the run starting or measuring.
    assert_eq!(reasons, ["MetricSuccessful", "AnalysisRunSuccessful"]);
    // /metrics, parsed as Prometheus parses it.
    assert_eq!(
        daemon
            .metric(
                "canaryd_measurements_total",
                &[("phase", "Successful"), ("provider", "prometheus")]
            )
            .await,
        3.0
    );
    assert_eq!(daemon.metric("canaryd_leader", &[]).await, 1.0);
    assert_eq!(
        daemon
            .metric(
                "canaryd_build_info",
                &[("version", env!("CARGO_PKG_VERSION"))]
            )
            .await,
        1.0
    );
    assert_eq!(
        daemon
            .metric("canaryd_analysis_runs", &[("phase", "Successful")])
            .await,
        1.0
    );
    assert_eq!(
        daemon
            .metric(
                "canaryd_provider_query_duration_seconds_count",
                &[("provider", "prometheus")]
            )
            .await,
        3.0
    );
    assert_eq!(daemon.scrape("/healthz").await.0, 200);
    assert_eq!(daemon.scrape("/readyz").await.0, 200);
    assert_eq!(
        server.pruned(),
        Vec::<String>::new(),
        "nothing written was pruned"
    );
    daemon.stop().await;
}

async fn a_failing_run_ends_failed_with_the_limit_in_its_message_and_event(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(0.5)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    create(
        &client,
        &run(
            "bad",
            &prom.uri(),
            json!({"interval": "1s", "count": 5, "failureLimit": 1, "successCondition": "result >= 0.95"}),
        ),
    )
    .await;
    let done = harness::finished(&server, "bad", WAIT).await;
    assert_eq!(phase(&done), Some(AnalysisPhase::Failed));
    let message = done
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default();
    assert_eq!(
        message,
        "Metric \"rate\" assessed Failed due to failed (2) > failureLimit (1)"
    );
    assert_eq!(result(&done).failed, 2);
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let event = eventually(WAIT, "the Failed event", || async {
        api.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("AnalysisRunFailed"))
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reporting_controller.as_deref(), Some("canaryd"));
    assert_eq!(event.reporting_instance.as_deref(), Some("test"));
    let regarding = event.regarding.clone().unwrap_or_default();
    assert_eq!(
        (regarding.kind.as_deref(), regarding.namespace.as_deref()),
        (Some("AnalysisRun"), Some("default"))
    );
    assert_eq!(
        event.note.as_deref(),
        Some("Analysis Completed. Result: Failed")
    );
    assert_eq!(
        server.pruned(),
        Vec::<String>::new(),
        "nothing written was pruned"
    );
    daemon.stop().await;
}

async fn terminating_a_run_mid_way_stops_measuring_and_ends_it_successful(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let clock = harness::manual_clock();
    let daemon = harness::spawn_on(client.clone(), harness::config(), clock.clone()).await;
    create(
        &client,
        &run(
            "bg",
            &prom.uri(),
            json!({"interval": "1s", "successCondition": "result == 1"}),
        ),
    )
    .await;
    harness::run_clock_until(&server, &clock, "two measurements", || {
        let r = server.get::<AnalysisRun>("default", "bg")?;
        (first_result(&r)?.count >= 2).then_some(())
    })
    .await;
    let api: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
    api.patch(
        "bg",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"terminate": true}})),
    )
    .await
    .expect("terminate");
    let done = harness::finished_on(&server, &clock, "bg").await;
    assert_eq!(phase(&done), Some(AnalysisPhase::Successful));
    assert_eq!(
        done.status.as_ref().and_then(|s| s.message.as_deref()),
        Some("Run Terminated")
    );
    let measured = result(&done).count;
    // An hour of one-second intervals later, and time for the daemon to act on it.
    clock
        .manual()
        .expect("a manual clock")
        .advance(Duration::from_secs(3600));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = server
        .get::<AnalysisRun>("default", "bg")
        .expect("still there");
    assert_eq!(
        result(&later).count,
        measured,
        "no measurement after terminate"
    );
    daemon.stop().await;
}

async fn a_secret_arg_is_used_but_appears_in_no_stored_object_or_event(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "prom-creds", "namespace": "default"},
                "stringData": {"token": "hunter2-very-secret"}
            }))
            .expect("a Secret"),
        )
        .await
        .expect("secret created");
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let mut r = run(
        "secret",
        &prom.uri(),
        json!({
            "count": 1,
            "successCondition": "result == 1",
            "provider": {"prometheus": {
                "query": "up{token=\"{{args.token}}\"}",
                "headers": [{"key": "Authorization", "value": "Bearer {{args.token}}"}]
            }}
        }),
    );
    r.spec.args = Some(vec![
        serde_json::from_value(json!({
            "name": "token",
            "valueFrom": {"secretKeyRef": {"name": "prom-creds", "key": "token"}}
        }))
        .expect("an arg"),
    ]);
    create(&client, &r).await;
    let done = harness::finished(&server, "secret", WAIT).await;
    assert_eq!(phase(&done), Some(AnalysisPhase::Successful));
    let seen = prom.seen.lock().expect("requests").clone();
    assert!(
        seen.iter().any(|q| q
            .headers
            .get("authorization")
            .is_some_and(|v| v.to_str().unwrap_or_default() == "Bearer hunter2-very-secret")),
        "the secret was sent to Prometheus"
    );
    let stored = server
        .get_json::<AnalysisRun>("default", "secret")
        .expect("stored")
        .to_string();
    assert!(!stored.contains("hunter2"), "{stored}");
    assert!(
        stored.contains("*****"),
        "the resolved query shows the secret masked: {stored}"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let all = eventually(WAIT, "the Successful event", || async {
        let items = events.list(&ListParams::default()).await.ok()?.items;
        items
            .iter()
            .any(|e| e.reason.as_deref() == Some("AnalysisRunSuccessful"))
            .then_some(items)
    })
    .await;
    let all = serde_json::to_string(&all).expect("json");
    assert!(!all.contains("hunter2"));
    assert_eq!(
        server.pruned(),
        Vec::<String>::new(),
        "nothing written was pruned"
    );
    daemon.stop().await;
}

async fn an_invalid_run_ends_error_with_a_clear_message_and_never_stops_a_valid_one(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    create(
        &client,
        &run(
            "broken",
            &prom.uri(),
            json!({"count": 3, "successCondition": "result == 1"}),
        ),
    )
    .await;
    create(
        &client,
        &run(
            "typo",
            &prom.uri(),
            json!({"count": 1, "successCondition": "result =="}),
        ),
    )
    .await;
    create(
        &client,
        &run(
            "fine",
            &prom.uri(),
            json!({"interval": "1s", "count": 2, "successCondition": "result == 1"}),
        ),
    )
    .await;
    let broken = harness::finished(&server, "broken", WAIT).await;
    assert_eq!(phase(&broken), Some(AnalysisPhase::Error));
    assert_eq!(
        broken.status.as_ref().and_then(|s| s.message.as_deref()),
        Some("metric \"rate\": count is 3 but no interval says how far apart to measure")
    );
    let typo = harness::finished(&server, "typo", WAIT).await;
    assert_eq!(phase(&typo), Some(AnalysisPhase::Error));
    assert!(
        typo.status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .is_some_and(|m| m.contains("successCondition")),
        "{typo:?}"
    );
    let fine = harness::finished(&server, "fine", WAIT).await;
    assert_eq!(phase(&fine), Some(AnalysisPhase::Successful));
    assert_eq!(result(&fine).count, 2);
    let reasons = eventually(WAIT, "the Error event", || async {
        let reasons = event_reasons(&client, "broken").await;
        (!reasons.is_empty()).then_some(reasons)
    })
    .await;
    assert_eq!(reasons, ["AnalysisRunError"]);
    assert_eq!(
        server.pruned(),
        Vec::<String>::new(),
        "nothing written was pruned"
    );
    daemon.stop().await;
}

async fn only_runs_of_this_instance_are_touched_and_completed_runs_expire(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let mut theirs = run("argo-owned", &prom.uri(), json!({"count": 1}));
    theirs.metadata.labels = Some(
        [(canaryd::k8s::INSTANCE_LABEL.to_string(), "argo".to_string())]
            .into_iter()
            .collect(),
    );
    create(&client, &theirs).await;
    let mut ours = run("short-lived", &prom.uri(), json!({"count": 1}));
    ours.spec.ttl_strategy = Some(canaryd::api::TtlStrategy {
        seconds_after_completion: Some(1),
        seconds_after_failure: None,
        seconds_after_success: None,
    });
    create(&client, &ours).await;
    eventually(WAIT, "the expired run to be deleted", || async {
        server
            .get::<AnalysisRun>("default", "short-lived")
            .is_none()
            .then_some(())
    })
    .await;
    let untouched = server
        .get::<AnalysisRun>("default", "argo-owned")
        .expect("still there");
    assert!(untouched.status.is_none(), "{untouched:?}");
    daemon.stop().await;
}

async fn conflicts_expired_watches_and_a_flapping_api_server_neither_lose_nor_repeat_measurements(
    crds: CrdSet,
) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    create(
        &client,
        &run(
            "flaky",
            &prom.uri(),
            json!({"interval": "1s", "count": 6, "successCondition": "result == 1"}),
        ),
    )
    .await;
    eventually(WAIT, "a first measurement", || async {
        let r = server.get::<AnalysisRun>("default", "flaky")?;
        (first_result(&r)?.count >= 1).then_some(())
    })
    .await;
    server.conflict_next_write::<AnalysisRun>("default", "flaky");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    server.expire_history();
    server.drop_watches();
    server.fail_next(RequestPattern::new("PATCH", "/analysisruns/"), 2, 500);
    server.fail_next(RequestPattern::new("GET", "/analysisruns"), 2, 503);
    let done = harness::finished(&server, "flaky", WAIT).await;
    assert_eq!(phase(&done), Some(AnalysisPhase::Successful));
    let r = result(&done);
    assert_eq!((r.count, r.successful, r.measurements.len()), (6, 6, 6));
    assert!(spacing_ok(&r, Duration::from_secs(1)), "{r:?}");
    assert!(
        daemon
            .metric("canaryd_reconcile_errors_total", &[("reason", "conflict")])
            .await
            >= 1.0
    );
    assert!(
        daemon
            .metric(
                "canaryd_reconcile_errors_total",
                &[("reason", "status_patch")]
            )
            .await
            >= 1.0
    );
    daemon.stop().await;
}

async fn prometheus_down_counts_errors_against_the_limit_and_a_recovery_continues_the_run(
    crds: CrdSet,
) {
    let server = FakeApiServer::builder().crds(crds).start().await;
    let client = server.client().await;
    let down = FakePrometheus::start(Answer::Down).await;
    let flapping = FakePrometheus::start(Answer::Down).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    create(
        &client,
        &run(
            "gives-up",
            &down.uri(),
            json!({"interval": "1s", "count": 3, "consecutiveErrorLimit": 1}),
        ),
    )
    .await;
    create(
        &client,
        &run(
            "recovers",
            &flapping.uri(),
            json!({"interval": "1s", "count": 2, "successCondition": "result == 1"}),
        ),
    )
    .await;
    eventually(WAIT, "a first error", || async {
        let r = server.get::<AnalysisRun>("default", "recovers")?;
        (first_result(&r)?.error >= 1).then_some(())
    })
    .await;
    flapping.set(Answer::Scalar(1.0));
    assert_eq!(daemon.scrape("/healthz").await.0, 200);
    assert_eq!(daemon.scrape("/readyz").await.0, 200);
    let gave_up = harness::finished(&server, "gives-up", WAIT).await;
    assert_eq!(phase(&gave_up), Some(AnalysisPhase::Error));
    let r = result(&gave_up);
    assert_eq!((r.error, r.consecutive_error, r.count), (2, 2, 0));
    assert!(
        gave_up
            .status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .is_some_and(
                |m| m.contains("consecutiveErrors (2) > consecutiveErrorLimit (1)")
                    && m.contains("503")
            ),
        "{gave_up:?}"
    );
    let recovered = harness::finished(&server, "recovers", WAIT).await;
    assert_eq!(phase(&recovered), Some(AnalysisPhase::Successful));
    let r = result(&recovered);
    assert_eq!(
        (r.error, r.successful, r.count, r.consecutive_error),
        (1, 2, 2, 0)
    );
    assert_eq!(
        daemon
            .metric(
                "canaryd_measurements_total",
                &[("phase", "Error"), ("provider", "prometheus")]
            )
            .await,
        3.0
    );
    assert_eq!(
        server.pruned(),
        Vec::<String>::new(),
        "nothing written was pruned"
    );
    daemon.stop().await;
}

with_each_crd_set!(
    each_measurement_starts_in_the_second_its_status_says_it_is_due,
    a_slow_events_endpoint_neither_delays_measurements_nor_loses_the_events,
    a_graceful_stop_publishes_the_events_still_on_their_way,
    a_stop_gives_up_on_an_event_the_api_server_never_answers_and_counts_it,
    a_verdict_is_written_at_once_while_routine_writes_wait_for_a_slot,
    a_share_window_serves_runs_due_in_other_seconds_with_one_query,
    a_run_goes_from_creation_to_successful_with_its_events_and_metrics,
    a_failing_run_ends_failed_with_the_limit_in_its_message_and_event,
    terminating_a_run_mid_way_stops_measuring_and_ends_it_successful,
    a_secret_arg_is_used_but_appears_in_no_stored_object_or_event,
    an_invalid_run_ends_error_with_a_clear_message_and_never_stops_a_valid_one,
    only_runs_of_this_instance_are_touched_and_completed_runs_expire,
    conflicts_expired_watches_and_a_flapping_api_server_neither_lose_nor_repeat_measurements,
    prometheus_down_counts_errors_against_the_limit_and_a_recovery_continues_the_run,
);
