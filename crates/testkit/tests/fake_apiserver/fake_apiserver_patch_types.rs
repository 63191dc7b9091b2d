//! Which patch types the fake API server takes on a custom resource and on its status subresource, as
//! kube-apiserver takes them: JSON merge and JSON patches on both, each result schema-checked (422 naming the
//! field); a strategic merge patch refused with 415, since a custom resource has no patch strategy. The
//! Rollout actions (`canaryd promote`, `undo`, ...) send merge patches to both and a JSON patch to the object.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time.

use canaryd::api::Rollout;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

async fn rollouts(set: CrdSet) -> (FakeApiServer, Api<Rollout>) {
    let server = FakeApiServer::builder().crds(set).start().await;
    let api: Api<Rollout> = Api::namespaced(server.client().await, "default");
    let rollout: Rollout = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "web:1"}]}},
                 "strategy": {"canary": {"steps": [{"pause": {}}]}}},
    }))
    .expect("a Rollout");
    api.create(&PostParams::default(), &rollout)
        .await
        .expect("created");
    (server, api)
}

fn code(result: Result<Rollout, kube::Error>) -> Result<Rollout, (u16, String)> {
    result.map_err(|e| match e {
        kube::Error::Api(status) => (status.code, status.message),
        other => panic!("expected an API answer, got {other:?}"),
    })
}

async fn patch(
    api: &Api<Rollout>,
    status: bool,
    patch: Patch<Value>,
) -> Result<Rollout, (u16, String)> {
    let params = PatchParams::default();
    code(if status {
        api.patch_status("web", &params, &patch).await
    } else {
        api.patch("web", &params, &patch).await
    })
}

fn json_patch(ops: Value) -> Patch<Value> {
    Patch::Json(serde_json::from_value(ops).expect("a JSON patch"))
}

#[tokio::test]
async fn merge_and_json_patches_are_taken_on_the_object_and_its_status_under_both_crd_sets() {
    for set in [CrdSet::Canaryd, CrdSet::Argo] {
        let (_server, api) = rollouts(set).await;
        let paused = patch(&api, false, Patch::Merge(json!({"spec": {"paused": true}}))).await;
        assert_eq!(
            paused.expect("merge on the object").spec.paused,
            Some(true),
            "{set:?}"
        );
        let aborted = patch(&api, true, Patch::Merge(json!({"status": {"abort": true}}))).await;
        assert!(
            aborted
                .expect("merge on /status")
                .status
                .expect("a status")
                .abort,
            "{set:?}"
        );
        let image = json_patch(
            json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "web:2"}]),
        );
        let replaced = patch(&api, false, image)
            .await
            .expect("JSON patch on the object");
        let template = replaced.spec.template.expect("a template");
        assert_eq!(
            template["spec"]["containers"][0]["image"], "web:2",
            "{set:?}"
        );
        let step =
            json_patch(json!([{"op": "add", "path": "/status/currentStepIndex", "value": 1}]));
        let stepped = patch(&api, true, step)
            .await
            .expect("JSON patch on /status");
        assert_eq!(
            stepped.status.expect("a status").current_step_index,
            Some(1),
            "{set:?}"
        );
    }
}

#[tokio::test]
async fn every_patch_type_is_schema_checked_on_the_object_and_its_status() {
    for set in [CrdSet::Canaryd, CrdSet::Argo] {
        let (_server, api) = rollouts(set).await;
        let status = Patch::Merge(json!({"status": {"replicas": 1}}));
        patch(&api, true, status).await.expect("a status to patch");
        // Fields both CRD sets type (canaryd's keeps the rest of a Rollout as unknown fields).
        let wrong = [
            (
                false,
                Patch::Merge(json!({"spec": {"replicas": "two"}})),
                "spec.replicas",
            ),
            (
                true,
                Patch::Merge(json!({"status": {"replicas": "two"}})),
                "status.replicas",
            ),
            (
                false,
                json_patch(json!([{"op": "replace", "path": "/spec/replicas", "value": "two"}])),
                "spec.replicas",
            ),
            (
                true,
                json_patch(json!([{"op": "add", "path": "/status/replicas", "value": "two"}])),
                "status.replicas",
            ),
        ];
        for (status, body, field) in wrong {
            let (code, message) = patch(&api, status, body).await.expect_err("refused");
            assert_eq!(code, 422, "{set:?} {field}: {message}");
            assert!(message.contains(field), "{set:?}: {message}");
        }
    }
}

#[tokio::test]
async fn a_strategic_merge_patch_of_a_custom_resource_is_415_on_the_object_and_its_status() {
    for set in [CrdSet::Canaryd, CrdSet::Argo] {
        let (_server, api) = rollouts(set).await;
        for status in [false, true] {
            let body = Patch::Strategic(json!({"spec": {"paused": true}}));
            let (code, message) = patch(&api, status, body).await.expect_err("refused");
            assert_eq!(code, 415, "{set:?} status={status}");
            assert!(
                message.starts_with("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"),
                "{message}"
            );
        }
    }
}
