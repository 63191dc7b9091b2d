//! The Events an AnalysisRun's steps leave on it, against the fake API server: Argo's AnalysisRun controller's
//! (`assessRunStatus`, `recordAnalysisRunCompletionEvent`), one per metric completed and one for the run, with
//! Argo's reasons, notes and types.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use std::time::Duration;

use canaryd::api::AnalysisPhase;
use canaryd_testkit::fake_apiserver::CrdSet;
use canaryd_testkit::harness::{self, Answer, create, eventually, run};
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

/// The Events on the run `name` as (reason, note, type), in the order they were made (their names sort so).
async fn said_on(client: &kube::Client, name: &str) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut events = api
        .list(&ListParams::default())
        .await
        .expect("events list")
        .items;
    events.retain(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name));
    events.sort_by_key(|e| e.metadata.name.clone());
    events
        .into_iter()
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
                e.type_.unwrap_or_default(),
            )
        })
        .collect()
}

fn said(reason: &str, note: &str, type_: &str) -> (String, String, String) {
    (reason.into(), note.into(), type_.into())
}

async fn an_inconclusive_run_says_so_per_metric_and_once_for_the_run_in_normal_events(
    crds: CrdSet,
) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    // "rate" is neither a success nor a failure at 1.0: Inconclusive; "ready" succeeds.
    let mut unsure = run(
        "unsure",
        &prom.uri(),
        json!({"count": 1, "successCondition": "result > 2", "failureCondition": "result < 0"}),
    );
    let mut ready = unsure.spec.metrics[0].clone();
    ready.name = "ready".into();
    ready.success_condition = Some("result == 1".into());
    ready.failure_condition = None;
    unsure.spec.metrics.push(ready);
    create(&client, &unsure).await;
    let done = harness::finished(&server, "unsure", WAIT).await;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase),
        Some(AnalysisPhase::Inconclusive)
    );
    let events = eventually(WAIT, "the run's three Events", || async {
        let events = said_on(&client, "unsure").await;
        (events.len() >= 3).then_some(events)
    })
    .await;
    daemon.stop().await;
    assert_eq!(
        events,
        [
            said(
                "MetricInconclusive",
                "Metric 'rate' Completed. Result: Inconclusive",
                "Normal"
            ),
            said(
                "MetricSuccessful",
                "Metric 'ready' Completed. Result: Successful",
                "Normal"
            ),
            said(
                "AnalysisRunInconclusive",
                "Analysis Completed. Result: Inconclusive",
                "Normal"
            ),
        ]
    );
}

with_each_crd_set!(an_inconclusive_run_says_so_per_metric_and_once_for_the_run_in_normal_events);
