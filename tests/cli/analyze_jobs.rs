//! `canaryd analyze` with job metrics: run against the cluster the kubeconfig names (the fake API server and
//! its simulated Job controller), keeping only the Jobs of the measurements its retention keeps, and stopped before any measurement, with a message saying why, when no
//! cluster is reachable or a backtest is asked for.

#![allow(clippy::disallowed_methods)] // Not the Clock: the child process runs on real time.

use std::time::Duration;

use crate::CANARYD;
use canaryd_testkit::cli::Ran;
use canaryd_testkit::fake_apiserver::{FakeApiServer, JobController, RequestPattern};
use k8s_openapi::api::batch::v1::Job;
use serde_json::Value;

const TEMPLATE: &str = "analysis-templates/job-smoke-test.yaml";

/// `canaryd analyze` of the shipped smoke test with `env` set and the usual cluster settings cleared.
async fn analyze(env: &[(&str, &str)], extra: &[&str]) -> Ran {
    analyze_file(TEMPLATE, env, extra).await
}

/// `canaryd analyze` of the template `file`, as [`analyze`].
async fn analyze_file(file: &str, env: &[(&str, &str)], extra: &[&str]) -> Ran {
    let home = tempfile::tempdir().expect("a home without ~/.kube");
    let mut command = CANARYD.command();
    command
        .args([
            "analyze",
            "-f",
            file,
            "--arg",
            "url=http://checkout-canary.shop.svc/healthz",
        ])
        .args(extra)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("HOME", home.path());
    for (k, v) in env {
        command.env(k, v);
    }
    tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("joined")
        .expect("the canaryd binary runs")
        .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_metric_runs_its_job_on_the_cluster_the_kubeconfig_names() {
    let server = FakeApiServer::builder()
        .job_controller(JobController {
            delay: Duration::from_millis(300),
            succeeds: std::sync::Arc::new(|job: &Value| {
                job.to_string().contains("checkout-canary")
            }),
        })
        .start()
        .await;
    let kubeconfig = server.kubeconfig_path().display().to_string();
    let ran = analyze(&[("KUBECONFIG", &kubeconfig)], &["--output", "json"]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let status: Value = serde_json::from_str(&ran.stdout).expect("the status as JSON");
    assert_eq!(status["phase"], "Successful");
    let m = &status["metricResults"][0]["measurements"][0];
    assert_eq!(m["phase"], "Successful");
    assert_eq!(m["metadata"]["job-namespace"], "default");
    let created = RequestPattern::new("POST", "/apis/batch/v1/namespaces/default/jobs");
    assert_eq!(server.request_count(&created), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_jobs_of_the_measurements_the_retention_keeps_remain() {
    let server = FakeApiServer::builder()
        .job_controller(JobController::by_exit_code(Duration::from_millis(200)))
        .start()
        .await;
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("three.yaml");
    std::fs::write(
        &file,
        "apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: three}
spec:
  args: [{name: url}]
  measurementRetention: [{metricName: smoke, limit: 1}]
  metrics:
  - name: smoke
    count: 3
    interval: 1s
    provider:
      job:
        spec:
          backoffLimit: 0
          template:
            spec:
              restartPolicy: Never
              containers: [{name: smoke, image: busybox, command: [sh, -c, exit 0]}]
",
    )
    .expect("the template");
    let kubeconfig = server.kubeconfig_path().display().to_string();
    let file = file.display().to_string();
    let ran = analyze_file(&file, &[("KUBECONFIG", &kubeconfig)], &["--output", "json"]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let status: Value = serde_json::from_str(&ran.stdout).expect("the status as JSON");
    let result = &status["metricResults"][0];
    assert_eq!(
        (result["count"].as_i64(), result["successful"].as_i64()),
        (Some(3), Some(3))
    );
    let kept = &result["measurements"][0]["metadata"]["job-name"];
    let names: Vec<Option<String>> = server
        .list::<Job>("default")
        .into_iter()
        .map(|j| j.metadata.name)
        .collect();
    assert_eq!(names, [kept.as_str().map(String::from)], "{ran:?}");
    assert!(kept.as_str().is_some_and(|k| k.ends_with(".smoke.3")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_reachable_cluster_a_job_metric_stops_the_run_before_measuring() {
    let ran = analyze(&[("KUBECONFIG", "/nonexistent/kubeconfig")], &[]).await;
    assert_eq!(ran.code, Some(4), "{ran:?}");
    assert!(
        ran.stderr.contains("metric \"smoke-test\" runs a Kubernetes Job, and no cluster is reachable (nothing was measured)"),
        "{}",
        ran.stderr
    );
    assert!(ran.stdout.is_empty(), "{}", ran.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_metric_cannot_be_backtested() {
    let window = [
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T01:00:00Z",
    ];
    let ran = analyze(&[], &window).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr
            .contains("runs a Kubernetes Job, which cannot be backtested"),
        "{}",
        ran.stderr
    );
}
