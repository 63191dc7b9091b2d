//! One reconcile of a Rollout (`controller::rollout::reconcile`) against the fake API server when a write of
//! its plan fails: the error names the write and its object with the API server's words, and a create that
//! meets an object of the same name the Rollout does not control is such a failure, not a write made before.

#![allow(clippy::disallowed_methods)] // Not the Clock: the reconcile runs against real sockets.

#[path = "support/fake_apiserver.rs"]
mod fake_apiserver;
#[path = "support/daemon.rs"]
mod harness;
#[path = "support/rollout_cluster.rs"]
mod rollout_cluster;

use std::sync::Arc;

use canaryd::api::Rollout;
use canaryd::controller::Daemon;
use canaryd::controller::rollout::reconcile;
use canaryd::engine::rollout::hash::pod_template_hash;
use fake_apiserver::{CrdSet, RequestPattern};
use harness::Answer;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{Api, DeleteParams, PostParams};
use rollout_cluster::*;
use serde_json::json;

#[test]
fn a_failed_write_names_its_object_and_a_name_taken_by_an_orphan_is_not_taken_as_created() {
    harness::run_test(failed_writes());
}

async fn failed_writes() {
    let (server, client, prom) = harness::cluster(CrdSet::Argo, Answer::Scalar(1.0)).await;
    create_service(&client, "web-canary").await;
    create_service(&client, "web-stable").await;
    create_template(&client, &prom).await;
    create_rollout(&client, &rollout("web:1", "1s")).await;
    let rollouts: Api<Rollout> = Api::namespaced(client.clone(), "default");
    let web = rollouts.get("web").await.expect("the Rollout");
    let hash = pod_template_hash(web.spec.template.as_ref().expect("a template"), None);
    let name = format!("web-{hash}");
    // What a Rollout deleted with --cascade=orphan leaves: the ReplicaSet of the same template, owned by none.
    let orphan: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"app": "web", "rollouts-pod-template-hash": hash}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "web:1"}]}}}
    }))
    .expect("a ReplicaSet");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    replica_sets
        .create(&PostParams::default(), &orphan)
        .await
        .expect("the orphan is created");
    let daemon = Daemon::bind(client.clone(), config()).await.expect("bound");
    let ctx = daemon.context();

    let error = reconcile(Arc::new(web.clone()), ctx.clone())
        .await
        .expect_err("the Rollout does not control the ReplicaSet of that name");
    assert_eq!(
        error.to_string(),
        format!(
            "creating ReplicaSet default/{name}: the name is taken by an object the Rollout does not control"
        )
    );
    assert_eq!(error.reason(), "rollout_write");

    replica_sets
        .delete(&name, &DeleteParams::default())
        .await
        .expect("the orphan is deleted");
    server.fail_next(RequestPattern::new("POST", "/replicasets"), 1, 403);
    let message = reconcile(Arc::new(web), ctx)
        .await
        .expect_err("the create is refused")
        .to_string();
    assert!(
        message.starts_with(&format!("creating ReplicaSet default/{name}: ")),
        "{message}"
    );
    assert!(!message.contains("status patch"), "{message}");
}
