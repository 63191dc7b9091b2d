//! `/metrics` of `canaryd run --rollouts` with Rollouts in every phase Argo's metrics name (Completed,
//! Progressing, Paused, Timeout, Error, Abort, InvalidSpec) and AnalysisRuns in several, against the fake API
//! server: Argo Rollouts' controller families with Argo's labels and values beside canaryd's, every query of
//! Argo's published Grafana dashboard, of the chart's own and of the chart's alerts resolving against the
//! scrape, and the series of a deleted Rollout and run gone from the next scrape.

#![allow(clippy::disallowed_methods)] // Not the Clock: the tests wait on real time.

use std::time::Duration;

use canaryd::api::{AnalysisPhase, AnalysisRun, Rollout};
use canaryd::engine::rollout::hash::pod_template_hash;
use canaryd_testkit::fake_apiserver::{
    CrdSet, FakeApiServer, ReplicaSetController, RequestPattern,
};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::{router_objects, with_each_crd_set};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::dashboard_queries::{samples, unserved, unserved_exprs};

/// The job label the chart's ServiceMonitor gives the daemon's series with
/// `metrics.serviceMonitor.job=argo-rollouts-metrics`, which Argo's dashboard selects.
const ARGO_JOB: &str = "argo-rollouts-metrics";

/// `NAME` with one replica, `setWeight: 50` then an indefinite pause, and its two Services.
async fn create_rollout_named(client: &kube::Client, name: &str, change: impl FnOnce(&mut Value)) {
    create_service_of(client, &format!("{name}-canary"), name).await;
    create_service_of(client, &format!("{name}-stable"), name).await;
    create_bare(client, name, change).await;
}

/// The Rollout alone, without its Services.
async fn create_bare(client: &kube::Client, name: &str, change: impl FnOnce(&mut Value)) {
    let steps = json!([{"setWeight": 50}, {"pause": {}}]);
    let mut value = serde_json::to_value(named(name, 1, &format!("{name}:1"), steps))
        .expect("a Rollout serialises");
    change(&mut value);
    let rollout: Rollout = serde_json::from_value(value).expect("a Rollout");
    create_rollout(client, &rollout).await;
}

/// The pod-template hash of `name` once its image is `image` (what `set_image_of` makes it).
fn hash_with_image(name: &str, image: &str) -> String {
    let rollout = named(name, 1, image, json!([]));
    pod_template_hash(rollout.spec.template.as_ref().expect("a template"), None)
}

/// The reason of the Rollout `name`'s `type_` condition, as stored.
fn reason(server: &FakeApiServer, name: &str, type_: &str) -> String {
    let status = server
        .get::<Rollout>("default", name)
        .and_then(|r| r.status)
        .unwrap_or_default();
    condition(&status, type_).1
}

async fn until_reason(server: &FakeApiServer, name: &str, type_: &str, wanted: &str) {
    eventually(
        WAIT,
        &format!("{name}'s {type_} to be {wanted}"),
        || async { (reason(server, name, type_) == wanted).then_some(()) },
    )
    .await;
}

async fn until_run(server: &FakeApiServer, name: &str, phase: AnalysisPhase) {
    eventually(WAIT, &format!("the run {name} to be {phase:?}"), || async {
        let run = server.get::<AnalysisRun>("default", name)?;
        (run.status?.phase? == phase).then_some(())
    })
    .await;
}

/// Rollouts in each of Argo's metric phases, the Paused one routed through Istio.
async fn rollouts_in_every_phase(
    server: &FakeApiServer,
    rsc: &ReplicaSetController,
    client: &kube::Client,
) {
    server.put(&router_objects::virtual_service(
        "default",
        "paused-vsvc",
        "paused",
    ));
    for name in ["done", "slow", "stuck", "aborted", "broken"] {
        create_rollout_named(client, name, |_| {}).await;
    }
    create_rollout_named(client, "paused", |r| {
        r["spec"]["strategy"]["canary"]["trafficRouting"] =
            json!({"istio": {"virtualService": {"name": "paused-vsvc"}}});
    })
    .await;
    // Its Services are missing.
    create_bare(client, "invalid", |_| {}).await;
    for name in ["done", "slow", "stuck", "aborted", "broken", "paused"] {
        until_reason(server, name, "Progressing", "NewReplicaSetAvailable").await;
    }
    until_reason(server, "invalid", "InvalidSpec", "InvalidSpec").await;

    for (name, image) in [("slow", "slow:2"), ("stuck", "stuck:2")] {
        rsc.hold_unready(&hash_with_image(name, image));
    }
    let deadline = Patch::Merge(json!({"spec": {"progressDeadlineSeconds": 1}}));
    let rollouts: Api<Rollout> = Api::namespaced(client.clone(), "default");
    rollouts
        .patch("stuck", &PatchParams::default(), &deadline)
        .await
        .expect("the deadline is set");
    for name in ["slow", "stuck", "aborted", "paused"] {
        set_image_of(client, name, &format!("{name}:2"), &PatchParams::default()).await;
    }
    until_reason(server, "paused", "Progressing", "RolloutPaused").await;
    until_reason(server, "aborted", "Progressing", "RolloutPaused").await;
    let abort = Patch::Merge(json!({"status": {"abort": true}}));
    rollouts
        .patch_status("aborted", &PatchParams::default(), &abort)
        .await
        .expect("aborted");
    until_reason(server, "aborted", "Progressing", "RolloutAborted").await;
    until_reason(server, "stuck", "Progressing", "ProgressDeadlineExceeded").await;
    until_reason(server, "slow", "Progressing", "ReplicaSetUpdated").await;
    // The API server refuses every new ReplicaSet from now on.
    server.fail_next(RequestPattern::new("POST", "/replicasets"), 10_000, 403);
    set_image_of(client, "broken", "broken:2", &PatchParams::default()).await;
    until_reason(server, "broken", "Progressing", "ReplicaSetCreateError").await;
}

/// Runs ending Successful, Failed and Error, one still Running, and one whose first status write is refused
/// (a reconcile error) before it ends Successful too; one of their Events is refused (lost).
async fn runs_in_several_phases(server: &FakeApiServer, client: &kube::Client, prom: &str) {
    server.fail_next(
        RequestPattern::new("PATCH", "/analysisruns/retried"),
        1,
        500,
    );
    server.fail_next(RequestPattern::new("POST", "/events"), 1, 500);
    let runs = [
        (
            "ok",
            json!({"count": 1, "successCondition": "result >= 0.95"}),
        ),
        (
            "retried",
            json!({"count": 1, "successCondition": "result >= 0.95"}),
        ),
        (
            "bad",
            json!({"count": 1, "successCondition": "result < 0.5"}),
        ),
        (
            "wrong",
            json!({"count": 1, "successCondition": "result >="}),
        ),
        (
            "long",
            json!({"count": 2, "interval": "1h", "successCondition": "result >= 0.95"}),
        ),
    ];
    for (name, metric) in runs {
        harness::create(client, &harness::run(name, prom, metric)).await;
    }
    for (name, phase) in [
        ("ok", AnalysisPhase::Successful),
        ("retried", AnalysisPhase::Successful),
        ("bad", AnalysisPhase::Failed),
        ("wrong", AnalysisPhase::Error),
        ("long", AnalysisPhase::Running),
    ] {
        until_run(server, name, phase).await;
    }
}

async fn argo_families_are_served_and_both_dashboards_resolve_and_deleted_objects_leave(
    crds: CrdSet,
) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(0.99)).await;
    let rsc = server.replica_set_controller(POD_START);
    let daemon = harness::spawn(client.clone(), config()).await;
    rollouts_in_every_phase(&server, &rsc, &client).await;
    runs_in_several_phases(&server, &client, &prom.uri()).await;

    let scrape = || async { daemon.scrape("/metrics").await.1 };
    // What one scrape must show. The families come from the daemon's caches and counters, which may be a
    // moment behind what the fake API server stores: scraped until they all show, then asserted.
    let missing = |text: &str| -> Vec<String> {
        let mut missing = Vec::new();
        for wanted in [
            "canaryd_reconcile_errors_total{reason=\"event\"}",
            "analysis_run_reconcile_error{namespace=\"default\",name=\"retried\"}",
            "rollout_events_total{namespace=\"default\",name=\"aborted\",type=\"Warning\",reason=\"RolloutAborted\"} 1",
            "rollout_reconcile_count{namespace=\"default\",name=\"done\"}",
            // The aborted attempt, counted once its end was written (Argo's EmitRolloutDuration).
            "rollout_duration_seconds_count{status=\"Aborted\"} 1\n",
        ] {
            if !text.contains(wanted) {
                missing.push(wanted.to_string());
            }
        }
        for phase in [
            "Completed",
            "Progressing",
            "Paused",
            "Timeout",
            "Error",
            "Abort",
            "InvalidSpec",
        ] {
            if !text.contains(&format!("traffic_router=\"\",phase=\"{phase}\"}} 1"))
                && !text.contains(&format!("traffic_router=\"Istio\",phase=\"{phase}\"}} 1"))
            {
                missing.push(format!("a Rollout {phase}"));
            }
        }
        for line in [
            "rollout_info{namespace=\"default\",name=\"paused\",strategy=\"canary\",traffic_router=\"Istio\",phase=\"Paused\"} 1",
            "rollout_info_replicas_desired{namespace=\"default\",name=\"done\"} 1",
            "canaryd_rollout_set_weight{namespace=\"default\",name=\"paused\"} 50",
            "canaryd_rollout_canary_weight{namespace=\"default\",name=\"paused\"} 50",
            "canaryd_rollout_set_weight{namespace=\"default\",name=\"done\"} 100",
            "analysis_run_info{namespace=\"default\",name=\"wrong\",phase=\"Error\"} 1",
            "analysis_run_metric_phase{namespace=\"default\",name=\"bad\",metric=\"rate\",type=\"Prometheus\",dry_run=\"false\",phase=\"Failed\"} 1",
            "canaryd_analysis_run_metric_value{namespace=\"default\",name=\"ok\",metric=\"rate\"} 0.99",
        ] {
            if !text.lines().any(|l| l == line) {
                missing.push(line.to_string());
            }
        }
        missing
    };
    let mut last = String::new();
    let shown = tokio::time::timeout(WAIT, async {
        loop {
            last = scrape().await;
            if missing(&last).is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(shown.is_ok(), "missing {:?} in\n{last}", missing(&last));
    let text = last;

    let reference = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/daemon.md"),
    )
    .expect("docs/daemon.md");
    let undocumented: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|family| !reference.contains(&format!("`{family}`")))
        .collect();
    assert_eq!(
        undocumented,
        Vec::<&str>::new(),
        "families docs/daemon.md does not list"
    );

    let served = samples(&text, &[("job", ARGO_JOB), ("instance", "canaryd:8080")]);
    for (file, dashboard) in [
        (
            "tests/fixtures/grafana/argo-rollouts-dashboard.json",
            argo_dashboard(),
        ),
        ("charts/canaryd/dashboards/canaryd.json", own_dashboard()),
    ] {
        assert_eq!(
            unserved(&dashboard, &served),
            Vec::<String>::new(),
            "{file}"
        );
    }
    let alerts = alert_exprs(ARGO_JOB);
    assert_eq!(alerts.len(), 5, "{alerts:?}");
    assert_eq!(
        unserved_exprs(&alerts, &served),
        Vec::<String>::new(),
        "the chart's alerts"
    );

    let rollouts: Api<Rollout> = Api::namespaced(client.clone(), "default");
    let runs: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
    rollouts
        .delete("aborted", &DeleteParams::default())
        .await
        .expect("deleted");
    runs.delete("retried", &DeleteParams::default())
        .await
        .expect("deleted");
    let text = eventually(WAIT, "the deleted objects' series gone", || async {
        let text = scrape().await;
        (!text.contains("name=\"aborted\"") && !text.contains("name=\"retried\"")).then_some(text)
    })
    .await;
    assert!(text.contains("name=\"paused\""), "the others stay:\n{text}");
    daemon.stop().await;
}

/// The `expr` of each alert of the chart's PrometheusRule template, as it renders with the series' job `job`.
fn alert_exprs(job: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("charts/canaryd/templates/prometheusrule.yaml");
    let template = std::fs::read_to_string(path).expect("the PrometheusRule template is there");
    template
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr: "))
        .map(|e| e.replace("{{ $job }}", job))
        .collect()
}

fn argo_dashboard() -> Value {
    read_json("tests/fixtures/grafana/argo-rollouts-dashboard.json")
}

fn own_dashboard() -> Value {
    read_json("charts/canaryd/dashboards/canaryd.json")
}

fn read_json(path: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&path).expect("the dashboard is there");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

with_each_crd_set!(argo_families_are_served_and_both_dashboards_resolve_and_deleted_objects_leave);
