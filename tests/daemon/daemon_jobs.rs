//! `canaryd run` with job metrics, against the fake API server and its simulated Job controller: Argo's
//! published job templates run unchanged, a Job's outcome becomes the measurement, a terminated run deletes
//! its Job, a restarted daemon neither runs a Job twice nor loses its outcome, a Job that cannot be read for a
//! moment is looked at again rather than run twice, and a Job the API server refuses is an Error measurement
//! with the server's message, and a run keeps only the Jobs of the measurements its retention keeps (a delete
//! the API server refuses is tried again).

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use std::path::Path;
use std::time::Duration;

use canaryd::api::{AnalysisPhase, AnalysisRun, Measurement};
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, JobController, RequestPattern};
use canaryd_testkit::harness::{self, create, eventually, first_result};
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(40);

async fn cluster(crds: CrdSet, job_delay: Duration) -> (FakeApiServer, kube::Client) {
    let server = FakeApiServer::builder()
        .crds(crds)
        .job_controller(JobController::by_exit_code(job_delay))
        .start()
        .await;
    let client = server.client().await;
    (server, client)
}

/// An AnalysisRun in `default` with the metrics of the published Argo template in `file`.
fn argo_run(name: &str, file: &str) -> AnalysisRun {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/argo-examples")
        .join(file);
    let (docs, error) = canaryd::cli::load::load_file(&path);
    assert!(error.is_none(), "{error:?}");
    let spec = &docs.first().expect("a template").value["spec"];
    run_of(name, spec["metrics"].clone())
}

fn run_of(name: &str, metrics: Value) -> AnalysisRun {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"metrics": metrics},
    }))
    .expect("a valid AnalysisRun")
}

/// A smoke test: one Job whose container exits `code`.
fn smoke(name: &str, code: u8) -> AnalysisRun {
    run_of(
        name,
        json!([{"name": "smoke", "provider": {"job": {
            "metadata": {"labels": {"team": "shop"}},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "smoke", "image": "busybox", "command": ["sh", "-c"],
                                "args": [format!("exit {code}")]}]}}}}}}]),
    )
}

fn jobs_of(server: &FakeApiServer, uid: &str) -> Vec<Job> {
    (1..=9)
        .filter_map(|n| server.get::<Job>("default", &format!("{uid}.smoke.{n}")))
        .collect()
}

async fn job_count(client: &kube::Client) -> usize {
    let api: Api<Job> = Api::namespaced(client.clone(), "default");
    let jobs = api.list(&ListParams::default()).await.expect("jobs list");
    jobs.items.len()
}

/// The run's first metric's in-flight measurement, once the status shows one.
async fn in_flight(server: &FakeApiServer, name: &str) -> Measurement {
    eventually(WAIT, "a measurement in flight", || async {
        let run = server.get::<AnalysisRun>("default", name)?;
        let m = first_result(&run)?.measurements.last()?.clone();
        (m.phase == AnalysisPhase::Running).then_some(m)
    })
    .await
}

/// The first in-flight measurement of the run `name`'s first metric among the versions the fake API server
/// committed after `from_rv`: one stored for less time than a poll may take to look is still found.
fn first_in_flight(server: &FakeApiServer, from_rv: u64, name: &str) -> Measurement {
    let mut found = None;
    server.versions_after::<AnalysisRun>(from_rv, |_, version| {
        if found.is_some() || version["metadata"]["name"] != name {
            return;
        }
        let run: Option<AnalysisRun> = serde_json::from_value(Value::clone(version)).ok();
        found = run
            .and_then(|run| first_result(&run)?.measurements.last().cloned())
            .filter(|m| m.phase == AnalysisPhase::Running);
    });
    found.expect("a version with a measurement in flight")
}

fn measurements(run: &AnalysisRun) -> Vec<Measurement> {
    first_result(run).expect("a metric result").measurements
}

async fn a_passing_smoke_test_job_is_a_successful_measurement_with_argos_job(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_millis(500)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let from_rv = server.resource_version();
    let created = create(&client, &smoke("passes", 0)).await;
    let uid = created.metadata.uid.clone().expect("a uid");
    let done = harness::finished(&server, "passes", WAIT).await;
    daemon.stop().await;
    // The Job ends 500 ms after it is created, so the status shows the measurement running only that long.
    let flying = first_in_flight(&server, from_rv, "passes");
    assert!(flying.started_at.is_some() && flying.finished_at.is_none());

    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase),
        Some(AnalysisPhase::Successful)
    );
    let m = measurements(&done);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].phase, AnalysisPhase::Successful);
    assert_eq!(
        m[0].started_at, flying.started_at,
        "the measurement that ran is the one that ended"
    );
    let name = format!("{uid}.smoke.1");
    let metadata = m[0].metadata.clone().unwrap_or_default();
    assert_eq!(metadata.get("job-name"), Some(&name));
    assert_eq!(
        metadata.get("job-namespace").map(String::as_str),
        Some("default")
    );

    let job = server
        .get_json::<Job>("default", &name)
        .expect("the Job is kept");
    let meta = &job["metadata"];
    assert_eq!(meta["labels"]["analysisrun.argoproj.io/uid"], uid.as_str());
    assert_eq!(meta["labels"]["team"], "shop");
    assert_eq!(
        meta["annotations"]["analysisrun.argoproj.io/name"],
        "passes"
    );
    assert_eq!(
        meta["annotations"]["analysisrun.argoproj.io/metric-name"],
        "smoke"
    );
    let owner = &meta["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str()),
        (Some("AnalysisRun"), Some(uid.as_str()))
    );
    assert_eq!(owner["controller"], true);
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"]["analysisrun.argoproj.io/uid"],
        uid.as_str()
    );
}

async fn a_failing_smoke_test_job_fails_the_run_with_the_jobs_reason(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_millis(500)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    create(&client, &smoke("fails", 1)).await;
    let done = harness::finished(&server, "fails", WAIT).await;
    daemon.stop().await;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase),
        Some(AnalysisPhase::Failed)
    );
    let m = measurements(&done);
    assert_eq!(
        (m.len(), m[0].phase, m[0].message.as_deref()),
        (
            1,
            AnalysisPhase::Failed,
            Some("BackoffLimitExceeded: Job has reached the specified backoff limit")
        )
    );
}

async fn a_run_terminated_mid_job_deletes_the_job_and_ends_inconclusive(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_secs(600)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let created = create(&client, &smoke("stopped", 0)).await;
    let uid = created.metadata.uid.clone().expect("a uid");
    in_flight(&server, "stopped").await;
    assert_eq!(jobs_of(&server, &uid).len(), 1, "the Job runs");
    let api: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
    api.patch(
        "stopped",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"terminate": true}})),
    )
    .await
    .expect("terminate");
    let done = harness::finished(&server, "stopped", WAIT).await;
    daemon.stop().await;
    assert!(jobs_of(&server, &uid).is_empty(), "the Job is deleted");
    let m = measurements(&done);
    assert_eq!(
        (m.len(), m[0].phase, m[0].message.as_deref()),
        (1, AnalysisPhase::Inconclusive, Some("Metric Terminated"))
    );
    assert!(m[0].finished_at.is_some());
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase),
        Some(AnalysisPhase::Inconclusive)
    );
}

async fn a_daemon_killed_while_a_job_runs_collects_that_job_after_a_restart(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_secs(4)).await;
    let first = harness::spawn(client.clone(), harness::config()).await;
    create(&client, &smoke("restarted", 0)).await;
    let flying = in_flight(&server, "restarted").await;
    first.kill().await;
    let second = harness::spawn(client.clone(), harness::config()).await;
    let done = harness::finished(&server, "restarted", WAIT).await;
    second.stop().await;
    assert_eq!(job_count(&client).await, 1, "no second Job");
    let m = measurements(&done);
    let r = first_result(&done).expect("a result");
    assert_eq!(
        (m.len(), r.count, r.successful),
        (1, 1, 1),
        "the outcome is recorded once"
    );
    assert_eq!(m[0].started_at, flying.started_at);
}

async fn a_job_created_before_a_crash_is_adopted_rather_than_run_again(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_millis(500)).await;
    // The daemon created the Job and died before its status write: only the Job exists.
    let created = create(&client, &smoke("adopted", 0)).await;
    let uid = created.metadata.uid.clone().expect("a uid");
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": format!("{uid}.smoke.1"), "namespace": "default",
            "labels": {"analysisrun.argoproj.io/uid": uid},
            "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
                "name": "adopted", "uid": uid, "controller": true}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "smoke", "image": "busybox"}]}}},
    }))
    .expect("a job");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &job)
        .await
        .expect("the Job");
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let done = harness::finished(&server, "adopted", WAIT).await;
    daemon.stop().await;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase),
        Some(AnalysisPhase::Successful)
    );
    assert_eq!(job_count(&client).await, 1);
}

async fn a_job_the_api_server_refuses_is_an_error_measurement_with_its_message(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_millis(500)).await;
    server.fail_next(RequestPattern::new("POST", "/jobs"), 1, 403);
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let created = create(&client, &smoke("refused", 0)).await;
    let uid = created.metadata.uid.clone().expect("a uid");
    let done = harness::finished(&server, "refused", WAIT).await;
    daemon.stop().await;
    let m = measurements(&done);
    assert_eq!(
        (m[0].phase, m[0].message.as_deref()),
        (
            AnalysisPhase::Error,
            Some("injected by the test: Forbidden")
        )
    );
    // Argo's retry 10 s later is a new Job, numbered after the error.
    assert_eq!(m.len(), 2);
    assert_eq!(m[1].phase, AnalysisPhase::Successful);
    let names: Vec<String> = jobs_of(&server, &uid)
        .iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    assert_eq!(names, [format!("{uid}.smoke.2")]);
}

async fn argos_published_job_templates_run_unchanged(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_millis(300)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    for (name, file, phase) in [
        (
            "pass",
            "examples__analysis-templates.yaml__01.yaml",
            AnalysisPhase::Successful,
        ),
        (
            "always-pass",
            "examples__cluster-analysis-templates.yaml",
            AnalysisPhase::Successful,
        ),
        (
            "random-fail",
            "examples__analysis-templates.yaml__02.yaml",
            AnalysisPhase::Failed,
        ),
    ] {
        create(&client, &argo_run(name, file)).await;
        let done = harness::finished(&server, name, WAIT).await;
        assert_eq!(
            done.status.as_ref().and_then(|s| s.phase),
            Some(phase),
            "{file}"
        );
    }
    daemon.stop().await;
}

async fn a_run_whose_job_spec_no_job_controller_would_run_ends_error_before_any_job(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_millis(300)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let mut bad = smoke("restarts", 0);
    let mut spec = serde_json::to_value(&bad.spec).expect("a spec");
    spec["metrics"][0]["provider"]["job"]["spec"]["template"]["spec"]["restartPolicy"] =
        json!("Always");
    bad.spec = serde_json::from_value(spec).expect("a spec");
    create(&client, &bad).await;
    let done = harness::finished(&server, "restarts", WAIT).await;
    daemon.stop().await;
    let status = done.status.expect("a status");
    assert_eq!(status.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "Analysis spec invalid: metric \"smoke\": provider.job.spec.template.spec.restartPolicy: \"Always\" is not allowed for a Job: use Never or OnFailure"
        )
    );
    assert_eq!(job_count(&client).await, 0);
}

async fn a_job_that_cannot_be_read_for_a_moment_is_looked_at_again_not_run_twice(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_secs(2)).await;
    // The watch never lists (so every look at the Job is a GET), and the first GETs of the Job fail as an
    // API server restarting would.
    server.fail_next(
        RequestPattern::new("GET", "/jobs").query("labelSelector"),
        10_000,
        500,
    );
    server.fail_next(RequestPattern::new("GET", ".smoke.1"), 2, 500);
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let created = create(&client, &smoke("blip", 0)).await;
    let uid = created.metadata.uid.clone().expect("a uid");
    let done = harness::finished(&server, "blip", WAIT).await;
    daemon.stop().await;
    let m = measurements(&done);
    let r = first_result(&done).expect("a result");
    assert_eq!(
        (m.len(), m[0].phase, r.error),
        (1, AnalysisPhase::Successful, 0),
        "{m:#?}"
    );
    let names: Vec<String> = jobs_of(&server, &uid)
        .iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    assert_eq!(names, [format!("{uid}.smoke.1")], "no second Job");
}

async fn only_the_jobs_of_the_measurements_the_retention_keeps_remain(crds: CrdSet) {
    let (server, client) = cluster(crds, Duration::from_millis(200)).await;
    // The first Job deleted is refused once, as an API server restarting would: it is deleted on a later tick.
    let deleted = RequestPattern::new("DELETE", "/jobs/");
    server.fail_next(deleted.clone(), 1, 500);
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let mut run = smoke("kept", 0);
    let mut spec = serde_json::to_value(&run.spec).expect("a spec");
    spec["metrics"][0]["count"] = json!(5);
    spec["metrics"][0]["interval"] = json!("1s");
    spec["measurementRetention"] = json!([{"metricName": "smoke", "limit": 2}]);
    run.spec = serde_json::from_value(spec).expect("a spec");
    let created = create(&client, &run).await;
    let uid = created.metadata.uid.clone().expect("a uid");
    let done = harness::finished(&server, "kept", WAIT).await;
    daemon.stop().await;

    let r = first_result(&done).expect("a result");
    assert_eq!(
        (r.count, r.successful, r.error),
        (5, 5, 0),
        "no measurement lost"
    );
    let kept: Vec<Option<String>> = measurements(&done)
        .iter()
        .map(|m| {
            m.metadata
                .as_ref()
                .and_then(|md| md.get("job-name").cloned())
        })
        .collect();
    let last_two = [format!("{uid}.smoke.4"), format!("{uid}.smoke.5")];
    assert_eq!(kept, last_two.clone().map(Some));
    let names: Vec<String> = jobs_of(&server, &uid)
        .iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    assert_eq!(
        names, last_two,
        "the Jobs of the measurements trimmed are deleted"
    );
    // Jobs 1 to 3 deleted, one of them refused first and asked again. A Job the watch has not yet reported
    // gone may be asked once more on the next tick (a 404 is done), so the count is a floor.
    let deletes = server.request_count(&deleted);
    assert!(
        deletes >= 4,
        "{deletes} DELETEs: the refused one was not retried"
    );
}

with_each_crd_set!(
    only_the_jobs_of_the_measurements_the_retention_keeps_remain,
    a_run_whose_job_spec_no_job_controller_would_run_ends_error_before_any_job,
    a_passing_smoke_test_job_is_a_successful_measurement_with_argos_job,
    a_failing_smoke_test_job_fails_the_run_with_the_jobs_reason,
    a_run_terminated_mid_job_deletes_the_job_and_ends_inconclusive,
    a_daemon_killed_while_a_job_runs_collects_that_job_after_a_restart,
    a_job_created_before_a_crash_is_adopted_rather_than_run_again,
    a_job_the_api_server_refuses_is_an_error_measurement_with_its_message,
    a_job_that_cannot_be_read_for_a_moment_is_looked_at_again_not_run_twice,
    argos_published_job_templates_run_unchanged,
);
