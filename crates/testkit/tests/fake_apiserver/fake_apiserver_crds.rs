//! Faithfulness tests for how the fake API server serves custom resources from their CRD files, through the real
//! kube client: the status subresource only where the CRD declares one (and discovery saying so), status written
//! with the object otherwise, pruning of undeclared fields, 422 on a wrong type or a missing required field, and
//! CRDs replaced while the server runs.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time.

use std::path::PathBuf;

use canaryd::api::{AnalysisRun, Rollout};
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn fixture(name: &str) -> PathBuf {
    canaryd_testkit::repo_root().join(format!("tests/fixtures/crds/{name}"))
}

fn run(name: &str) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"metrics": [{"name": "rate", "provider": {"prometheus": {"query": "x"}}}]},
    })
}

async fn create(client: &kube::Client, object: Value) -> Result<AnalysisRun, kube::Error> {
    let api: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
    let object: AnalysisRun = serde_json::from_value(object).expect("an AnalysisRun");
    api.create(&PostParams::default(), &object).await
}

/// Resource names under argoproj.io/v1alpha1 as discovery lists them.
async fn discovered(client: &kube::Client) -> Vec<String> {
    let list = client
        .list_api_group_resources("argoproj.io/v1alpha1")
        .await
        .expect("discovery of argoproj.io/v1alpha1");
    list.resources.into_iter().map(|r| r.name).collect()
}

fn invalid(result: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn with_argo_crds_only_the_rollout_has_a_status_subresource_and_discovery_says_so() {
    for set in [CrdSet::Argo, CrdSet::Canaryd] {
        let server = FakeApiServer::builder().crds(set).start().await;
        let client = server.client().await;
        let names = discovered(&client).await;
        assert!(
            names.contains(&"rollouts/status".to_owned()),
            "{set:?}: {names:?}"
        );
        assert!(
            names.contains(&"analysisruns".to_owned()),
            "{set:?}: {names:?}"
        );
        assert!(
            !names.contains(&"analysisruns/status".to_owned()),
            "{set:?}: {names:?}"
        );

        create(&client, run("r")).await.expect("created");
        let api: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
        let status = Patch::Merge(json!({"status": {"phase": "Running"}}));
        let (code, _) = invalid(
            api.patch_status("r", &PatchParams::default(), &status)
                .await,
        );
        assert_eq!(
            code, 404,
            "{set:?}: /status of a kind without the subresource"
        );
        let written = api.patch("r", &PatchParams::default(), &status).await;
        let phase = written
            .expect("status written with the object")
            .status
            .and_then(|s| s.phase);
        assert_eq!(
            phase.map(|p| p.to_string()).as_deref(),
            Some("Running"),
            "{set:?}"
        );
    }
}

#[tokio::test]
async fn a_wrong_type_is_refused_with_the_field_path_in_kube_apiservers_words() {
    let server = FakeApiServer::builder().crds(CrdSet::Argo).start().await;
    let client = server.client().await;
    create(&client, run("r")).await.expect("created");
    let api: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
    let patch = Patch::Merge(json!({"status": {"phase": "Running", "metricResults": [
        {"name": "rate", "phase": "Running", "count": "three"},
    ]}}));
    let (code, message) = invalid(api.patch("r", &PatchParams::default(), &patch).await);
    assert_eq!(code, 422);
    assert_eq!(
        message,
        "AnalysisRun.argoproj.io \"r\" is invalid: status.metricResults[0].count: Invalid value: \"string\": status.metricResults[0].count in body must be of type integer: \"string\""
    );
    let stored = server.get::<AnalysisRun>("default", "r").expect("stored");
    assert_eq!(stored.status, None, "a refused write changes nothing");
}

#[tokio::test]
async fn a_missing_required_field_is_refused() {
    let server = FakeApiServer::builder().crds(CrdSet::Argo).start().await;
    let client = server.client().await;
    let mut object = run("r");
    object["spec"] = json!({});
    let api: Api<DynamicObject> = Api::namespaced_with(
        client,
        "default",
        &kube::api::ApiResource::erase::<AnalysisRun>(&()),
    );
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    let (code, message) = invalid(api.create(&PostParams::default(), &object).await);
    assert_eq!(code, 422);
    assert!(
        message.ends_with("spec.metrics: Required value"),
        "{message}"
    );
}

#[tokio::test]
async fn undeclared_fields_are_pruned_and_preserved_ones_kept() {
    let server = FakeApiServer::builder().crds(CrdSet::Argo).start().await;
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client,
        "default",
        &kube::api::ApiResource::erase::<AnalysisRun>(&()),
    );
    let mut object = run("r");
    object["spec"]["invented"] = json!(1);
    object["spec"]["metrics"][0]["provider"] = json!({
        "plugin": {"canaryd/compare": {"anything": {"nested": true}}},
        "made-up": {"x": 1},
    });
    object["status"] = json!({"phase": "Pending", "extra": "dropped"});
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
    assert_eq!(created.data["spec"].get("invented"), None);
    assert_eq!(
        created.data["spec"]["metrics"][0]["provider"],
        json!({"plugin": {"canaryd/compare": {"anything": {"nested": true}}}})
    );
    // Without a status subresource, status is written with the object, and pruned as any other field.
    assert_eq!(created.data["status"], json!({"phase": "Pending"}));
    assert_eq!(
        server.pruned(),
        [
            "AnalysisRun/r: spec.invented",
            "AnalysisRun/r: spec.metrics[0].provider.made-up",
            "AnalysisRun/r: status.extra",
        ]
    );
}

#[tokio::test]
async fn a_crd_replaced_while_running_changes_discovery_and_the_status_subresource_at_once() {
    let server = FakeApiServer::builder()
        .crd_file(&fixture("canaryd-0.1-analysisrun-status-subresource.yaml"))
        .start()
        .await;
    let client = server.client().await;
    assert!(
        discovered(&client)
            .await
            .contains(&"analysisruns/status".to_owned())
    );
    create(&client, run("r")).await.expect("created");
    let api: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
    let status = Patch::Merge(json!({"status": {"phase": "Running"}}));
    api.patch_status("r", &PatchParams::default(), &status)
        .await
        .expect("/status while the CRD declares it");

    server.install_crds(&fixture("argo-rollouts-analysis-run-crd.yaml"));
    assert!(
        !discovered(&client)
            .await
            .contains(&"analysisruns/status".to_owned())
    );
    let (code, _) = invalid(
        api.patch_status("r", &PatchParams::default(), &status)
            .await,
    );
    assert_eq!(code, 404);
    let kept = api.get("r").await.expect("the run is still there");
    assert!(kept.status.is_some(), "stored objects keep their status");
}

#[tokio::test]
async fn rollout_writes_to_the_object_ignore_status_under_both_crd_sets() {
    for set in [CrdSet::Argo, CrdSet::Canaryd] {
        let server = FakeApiServer::builder().crds(set).start().await;
        let api: Api<Rollout> = Api::namespaced(server.client().await, "default");
        let rollout: Rollout = serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "web"}, "spec": {"replicas": 2},
            "status": {"phase": "Healthy"},
        }))
        .expect("a Rollout");
        let created = api
            .create(&PostParams::default(), &rollout)
            .await
            .expect("created");
        assert_eq!(created.status, None, "{set:?}: create drops status");
        let status = Patch::Merge(json!({"status": {"HPAReplicas": 2, "selector": "app=web"}}));
        let written = api
            .patch_status("web", &PatchParams::default(), &status)
            .await
            .expect("written through /status");
        let status = written.status.expect("a status");
        assert_eq!(
            (status.hpa_replicas, status.selector.as_str()),
            (2, "app=web"),
            "{set:?}"
        );
    }
}
