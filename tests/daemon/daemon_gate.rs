//! The Progressive Sync gate run by `canaryd run` against the fake API server and a scripted Prometheus:
//! the shipped `progressive-sync-gate` turned into a per-revision AnalysisRun as the example chart ships it
//! (its metrics, its args with values; no Rollout-only args), with the soak compressed to looks a second
//! apart. It ends Successful only after the soak, and Failed when the error rate rises during it.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use std::path::Path;
use std::time::{Duration, Instant};

use canaryd::api::{AnalysisPhase, AnalysisRun, AnalysisTemplate, Argument};
use canaryd_testkit::fake_apiserver::CrdSet;
use canaryd_testkit::harness::{self, Answer, create, eventually};
use canaryd_testkit::with_each_crd_set;
use jiff::SignedDuration;

const WAIT: Duration = Duration::from_secs(40);

/// The gate as an AnalysisRun named per revision, with `soak_looks` looks a second apart. It gives no
/// `prometheus-address`: the shipped template names none, so the daemon's configured address applies.
fn gate_run(name: &str, soak_looks: u32) -> AnalysisRun {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("analysis-templates/progressive-sync-gate.yaml");
    let (docs, error) = canaryd::cli::load::load_file(&path);
    assert!(error.is_none(), "{error:?}");
    let doc = docs
        .iter()
        .find(|d| d.name() == Some("progressive-sync-gate"))
        .expect("the gate template");
    let template: AnalysisTemplate = serde_json::from_value(doc.value.clone()).expect("a template");
    let supplied = [
        ("app", "checkout"),
        ("namespace", "shop"),
        ("cluster", "prod-east"),
        ("soak-looks", &soak_looks.to_string()),
        ("interval", "1s"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()));
    let args: Vec<Argument> = template
        .spec
        .args
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|mut a| {
            if let Some((_, v)) = supplied.iter().find(|(k, _)| *k == a.name) {
                a.value = Some(v.clone());
            }
            a
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"app.kubernetes.io/instance": "checkout-prod-east"}},
        "spec": {"args": args, "metrics": template.spec.metrics},
    }))
    .expect("an AnalysisRun")
}

/// The daemon with `prom` as its default Prometheus (`--prometheus`, the chart's `prometheus.address`).
fn configured_with(prom: &harness::FakePrometheus) -> canaryd::controller::Config {
    canaryd::controller::Config {
        prometheus: Some(prom.uri()),
        ..harness::config()
    }
}

fn phase(run: &AnalysisRun) -> Option<AnalysisPhase> {
    run.status.as_ref().and_then(|s| s.phase)
}

fn started(run: &AnalysisRun) -> Option<jiff::Timestamp> {
    run.status.as_ref()?.started_at.as_ref().map(|t| t.0)
}

async fn a_healthy_gate_is_successful_after_the_soak_and_never_before(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Vector(0.001)).await;
    let daemon = harness::spawn(client.clone(), configured_with(&prom)).await;
    create(&client, &gate_run("checkout-gate-v2", 5)).await;
    // Watch every state the API server holds until the run completes.
    let began = Instant::now();
    let mut seen = Vec::new();
    let done = loop {
        assert!(began.elapsed() < WAIT, "no verdict; last seen {seen:?}");
        if let Some(run) = server.get::<AnalysisRun>("default", "checkout-gate-v2") {
            seen.push((jiff::Timestamp::now(), phase(&run), started(&run)));
            if phase(&run).is_some_and(|p| p.is_completed()) {
                break run;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    daemon.stop().await;
    assert_eq!(phase(&done), Some(AnalysisPhase::Successful), "{done:#?}");
    let status = done.status.as_ref().expect("a status");
    let start = started(&done).expect("startedAt");
    let soak = SignedDuration::from_secs(5);
    let completed = status.completed_at.as_ref().expect("completedAt").0;
    assert!(
        completed >= start + soak,
        "completed {completed}, started {start}"
    );
    // No state the server held before the soak had passed was Successful.
    for (at, p, _) in &seen {
        if *p == Some(AnalysisPhase::Successful) {
            assert!(
                *at >= start + soak,
                "Successful at {at}, soak ends {}",
                start + soak
            );
        }
    }
    for result in status.metric_results.iter().flatten() {
        assert_eq!((result.count, result.successful), (5, 5), "{result:#?}");
    }
}

async fn an_error_rate_that_rises_during_the_soak_fails_the_gate(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Vector(0.001)).await;
    let daemon = harness::spawn(client.clone(), configured_with(&prom)).await;
    create(&client, &gate_run("checkout-gate-v3", 10)).await;
    eventually(WAIT, "two healthy looks", || async {
        let run = server.get::<AnalysisRun>("default", "checkout-gate-v3")?;
        let results = run.status?.metric_results?;
        results
            .iter()
            .find(|r| r.name == "error-rate")
            .filter(|r| r.successful >= 2)
            .map(|_| ())
    })
    .await;
    // 5% errors from now on (the latency query gets the same 0.05 s: still healthy).
    prom.set(Answer::Vector(0.05));
    let done = harness::finished(&server, "checkout-gate-v3", WAIT).await;
    daemon.stop().await;
    assert_eq!(phase(&done), Some(AnalysisPhase::Failed), "{done:#?}");
    let status = done.status.as_ref().expect("a status");
    let error_rate = status
        .metric_results
        .iter()
        .flatten()
        .find(|r| r.name == "error-rate")
        .expect("the error-rate metric");
    assert_eq!(
        (error_rate.phase, error_rate.failed),
        (AnalysisPhase::Failed, 2)
    );
    assert!(
        error_rate.count < 10,
        "failed during the soak: {error_rate:#?}"
    );
    assert!(
        status
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("error-rate"),
        "{status:#?}"
    );
}

with_each_crd_set!(
    a_healthy_gate_is_successful_after_the_soak_and_never_before,
    an_error_rate_that_rises_during_the_soak_fails_the_gate,
);
