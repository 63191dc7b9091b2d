//! Where canaryd writes an AnalysisRun's status, against the fake API server serving real CRD files: through
//! the object under Argo Rollouts' CRDs (and canaryd's, which match them), through `/status` under a CRD that
//! declares the subresource, and the switch when the installed CRD changes, found with one more discovery
//! request rather than by retrying forever.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time.

use std::path::PathBuf;
use std::time::Duration;

use canaryd::api::{AnalysisPhase, AnalysisRun, AnalysisRunStatus};
use canaryd::k8s::runs::{WriteError, patch_status};
use canaryd::k8s::status::StatusWriter;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use canaryd_testkit::harness::{self, Answer, create, run};
use serde_json::json;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/crds/{name}"))
}

/// The AnalysisRun CRD canaryd installed before it matched Argo's: it declares the status subresource.
fn with_subresource() -> PathBuf {
    fixture("canaryd-0.1-analysisrun-status-subresource.yaml")
}

fn argo_analysis_run() -> PathBuf {
    fixture("argo-rollouts-analysis-run-crd.yaml")
}

fn phase(phase: AnalysisPhase) -> AnalysisRunStatus {
    AnalysisRunStatus {
        phase: Some(phase),
        message: Some(format!("now {phase}")),
        ..Default::default()
    }
}

const OBJECT: &str = "/apis/argoproj.io/v1alpha1/namespaces/default/analysisruns/r";
const STATUS: &str = "/apis/argoproj.io/v1alpha1/namespaces/default/analysisruns/r/status";

fn requests_to(server: &FakeApiServer, method: &str, path: &str) -> usize {
    let requests = server.requests();
    requests
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

fn patches_to(server: &FakeApiServer, path: &str) -> usize {
    requests_to(server, "PATCH", path)
}

/// Discovery requests for Argo's group and version.
fn discoveries(server: &FakeApiServer) -> usize {
    requests_to(server, "GET", "/apis/argoproj.io/v1alpha1")
}

/// A run `r` in `server`, a status writer, and the run's resourceVersion.
async fn one_run(server: &FakeApiServer) -> (StatusWriter, String) {
    let client = server.client().await;
    let created = create(&client, &run("r", "http://127.0.0.1:1", json!({}))).await;
    let rv = created
        .metadata
        .resource_version
        .expect("a resourceVersion");
    (StatusWriter::new(client), rv)
}

async fn write(
    writer: &StatusWriter,
    rv: &str,
    status: &AnalysisRunStatus,
) -> Result<String, WriteError> {
    let meta = patch_status(writer, "default", "r", rv, status, &[]).await?;
    Ok(meta.resource_version.unwrap_or_default())
}

#[tokio::test]
async fn without_a_status_subresource_status_is_merged_into_the_object_and_spec_is_untouched() {
    for set in [CrdSet::Argo, CrdSet::Canaryd] {
        let server = FakeApiServer::builder().crds(set).start().await;
        let (writer, rv) = one_run(&server).await;
        let spec_before = server
            .get_json::<AnalysisRun>("default", "r")
            .expect("stored")["spec"]
            .clone();
        let running = phase(AnalysisPhase::Running);
        let written = write(&writer, &rv, &running).await.expect("written");
        let stored = server.get::<AnalysisRun>("default", "r").expect("stored");
        assert_eq!(stored.status, Some(running), "{set:?}");
        assert_eq!(stored.metadata.resource_version, Some(written.clone()));
        let after = server
            .get_json::<AnalysisRun>("default", "r")
            .expect("stored");
        assert_eq!(after["spec"], spec_before, "{set:?}");
        assert_eq!(
            (patches_to(&server, OBJECT), patches_to(&server, STATUS)),
            (1, 0),
            "{set:?}"
        );
        // The resourceVersion is a precondition there too.
        let stale = write(&writer, &rv, &phase(AnalysisPhase::Successful)).await;
        assert!(
            matches!(stale, Err(WriteError::Conflict)),
            "{set:?}: {stale:?}"
        );
        assert_eq!(discoveries(&server), 1, "{set:?}: discovery is asked once");
    }
}

#[tokio::test]
async fn with_a_status_subresource_status_goes_through_it() {
    let server = FakeApiServer::builder()
        .crd_file(&with_subresource())
        .start()
        .await;
    let (writer, rv) = one_run(&server).await;
    let running = phase(AnalysisPhase::Running);
    write(&writer, &rv, &running).await.expect("written");
    assert_eq!(
        server
            .get::<AnalysisRun>("default", "r")
            .expect("stored")
            .status,
        Some(running)
    );
    assert_eq!(
        (patches_to(&server, OBJECT), patches_to(&server, STATUS)),
        (0, 1)
    );
}

#[tokio::test]
async fn a_crd_that_drops_the_subresource_costs_one_404_and_one_discovery() {
    let server = FakeApiServer::builder()
        .crd_file(&with_subresource())
        .start()
        .await;
    let (writer, rv) = one_run(&server).await;
    let rv = write(&writer, &rv, &phase(AnalysisPhase::Running))
        .await
        .expect("written");
    server.install_crds(&argo_analysis_run());
    let done = phase(AnalysisPhase::Successful);
    let rv = write(&writer, &rv, &done)
        .await
        .expect("written after the CRD changed");
    assert_eq!(
        server
            .get::<AnalysisRun>("default", "r")
            .expect("stored")
            .status,
        Some(done)
    );
    assert_eq!(
        (patches_to(&server, STATUS), patches_to(&server, OBJECT)),
        (2, 1)
    );
    assert_eq!(discoveries(&server), 2);
    // From then on, straight to the object.
    write(&writer, &rv, &phase(AnalysisPhase::Failed))
        .await
        .expect("written");
    assert_eq!(
        (patches_to(&server, STATUS), patches_to(&server, OBJECT)),
        (2, 2)
    );
    assert_eq!(discoveries(&server), 2);
}

#[tokio::test]
async fn a_crd_that_gains_the_subresource_is_noticed_by_the_write_it_ignored() {
    let server = FakeApiServer::builder().crds(CrdSet::Argo).start().await;
    let (writer, rv) = one_run(&server).await;
    let rv = write(&writer, &rv, &phase(AnalysisPhase::Running))
        .await
        .expect("written");
    server.install_crds(&with_subresource());
    let done = phase(AnalysisPhase::Successful);
    write(&writer, &rv, &done)
        .await
        .expect("written after the CRD changed");
    assert_eq!(
        server
            .get::<AnalysisRun>("default", "r")
            .expect("stored")
            .status,
        Some(done)
    );
    assert_eq!(
        (patches_to(&server, OBJECT), patches_to(&server, STATUS)),
        (2, 1)
    );
    assert_eq!(discoveries(&server), 2);
}

#[tokio::test]
async fn a_deleted_run_under_the_status_subresource_is_gone_after_one_discovery() {
    let server = FakeApiServer::builder()
        .crd_file(&with_subresource())
        .start()
        .await;
    let (writer, rv) = one_run(&server).await;
    let api: kube::Api<AnalysisRun> = kube::Api::namespaced(server.client().await, "default");
    api.delete("r", &Default::default()).await.expect("deleted");
    let gone = write(&writer, &rv, &phase(AnalysisPhase::Running)).await;
    assert!(matches!(gone, Err(WriteError::Gone)), "{gone:?}");
    assert_eq!(
        (patches_to(&server, STATUS), patches_to(&server, OBJECT)),
        (1, 0)
    );
    assert_eq!(discoveries(&server), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_goes_on_to_its_verdict_when_argo_rollouts_crd_replaces_canaryds_former_one() {
    let server = FakeApiServer::builder()
        .crd_file(&with_subresource())
        .start()
        .await;
    let client = server.client().await;
    let prom = harness::FakePrometheus::start(Answer::Scalar(1.0)).await;
    let daemon = harness::spawn(client.clone(), harness::config()).await;
    let metric = json!({"interval": "1s", "count": 4, "successCondition": "result == 1"});
    create(&client, &run("r", &prom.uri(), metric)).await;
    harness::eventually(Duration::from_secs(20), "a first measurement", || async {
        harness::first_result(&server.get::<AnalysisRun>("default", "r")?).filter(|r| r.count >= 1)
    })
    .await;
    server.install_crds(&argo_analysis_run());
    let done = harness::finished(&server, "r", Duration::from_secs(20)).await;
    let result = harness::first_result(&done).expect("a metric result");
    assert_eq!(
        done.status.and_then(|s| s.phase),
        Some(AnalysisPhase::Successful)
    );
    assert_eq!(
        result.count, 4,
        "no measurement lost or repeated across the change"
    );
    assert!(
        patches_to(&server, OBJECT) >= 1,
        "written through the object after the change"
    );
    daemon.stop().await;
}
