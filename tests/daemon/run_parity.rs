//! One analysis loop: the same AnalysisRun, measured against the same scripted Prometheus from the same instant,
//! ends with the same status whether the daemon runs it (against the fake API server, on a manual clock) or a
//! rehearsal does (the in-memory cluster, on a virtual clock): the measurements, counts, phases, message and
//! times to the second. Also for a run that can never be measured and for one terminated before it starts,
//! where the rehearsal once ended runs by rules of its own.

#![allow(clippy::disallowed_methods)] // The harness times its waits on real time; the daemon runs on the clock.

use std::sync::Arc;

use canaryd::api::{AnalysisPhase, AnalysisRun, AnalysisRunStatus};
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd::measure::Providers;
use canaryd::rehearsal::runs::Runs;
use canaryd::time::Clock;
use canaryd_testkit::fake_apiserver::CrdSet;
use canaryd_testkit::harness::{self, Answer, create, run};
use canaryd_testkit::rollout::memory::rollout;
use jiff::Timestamp;
use serde_json::{Value, json};

/// The status a rehearsal leaves on `run`, stepped from `start` on a virtual clock until it completes.
async fn by_a_rehearsal(run: &AnalysisRun, start: Timestamp) -> AnalysisRunStatus {
    let mut memory = MemoryCluster::new(rollout(1, json!({"steps": []})));
    memory.analysis_runs.push(run.clone());
    let clock = Arc::new(Clock::virtual_at(start));
    let providers = Providers::new(None);
    let mut runs = Runs::new(&[], None);
    for _ in 0..100 {
        runs.measure_due(&mut memory, &providers, &clock, &mut |_| {})
            .await;
        match runs.next_due(&memory, clock.now()) {
            Some(at) => clock.sleep_until(at).await,
            None => break,
        }
    }
    memory.analysis_runs[0].status.clone().expect("a status")
}

/// A run of `metric` measured both ways against a Prometheus answering `answer`: the same status. The daemon
/// runs it on a manual clock from its start; the rehearsal steps it from the same instant.
async fn both_ways(metric: Value, answer: Answer, terminate: bool) -> AnalysisRunStatus {
    let (server, client, prom) = harness::cluster(CrdSet::Argo, answer).await;
    let mut object = run("same", &prom.uri(), metric);
    object.spec.terminate = terminate.then_some(true);
    let clock = harness::manual_clock();
    let start = clock.now();
    let daemon = harness::spawn_on(client.clone(), harness::config(), clock.clone()).await;
    create(&client, &object).await;
    let done = harness::finished_on(&server, &clock, "same").await;
    daemon.stop().await;
    let by_the_daemon = done.status.expect("a status");
    let rehearsed = by_a_rehearsal(&object, start).await;
    assert_eq!(
        rehearsed, by_the_daemon,
        "the rehearsal (left) and the daemon (right) disagree"
    );
    by_the_daemon
}

#[tokio::test]
async fn a_failing_run_ends_the_same_in_a_rehearsal_and_in_the_daemon() {
    let status = both_ways(
        json!({"interval": "5m", "count": 4, "failureLimit": 1, "successCondition": "result >= 0.5"}),
        Answer::Scalar(0.25),
        false,
    )
    .await;
    assert_eq!(status.phase, Some(AnalysisPhase::Failed), "{status:?}");
}

#[tokio::test]
async fn a_run_that_cannot_be_measured_ends_error_the_same_way() {
    let status = both_ways(
        json!({"interval": "5m", "count": 2, "successCondition": "result >= 0.5", "failureLimit": "{{args.missing}}"}),
        Answer::Scalar(1.0),
        false,
    )
    .await;
    assert_eq!(status.phase, Some(AnalysisPhase::Error), "{status:?}");
    assert!(
        status.started_at.is_some() && status.completed_at.is_some(),
        "{status:?}"
    );
}

#[tokio::test]
async fn a_run_terminated_before_it_starts_ends_the_same_way() {
    let status = both_ways(
        json!({"interval": "5m", "count": 3, "successCondition": "result >= 0.5"}),
        Answer::Scalar(1.0),
        true,
    )
    .await;
    assert_eq!(status.phase, Some(AnalysisPhase::Successful), "{status:?}");
}
