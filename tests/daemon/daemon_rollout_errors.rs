//! One reconcile of a Rollout (`controller::rollout::reconcile`) against the fake API server when a write of
//! its plan fails: the error names the write and its object with the API server's words, and a create that
//! meets an object of the same name the Rollout does not control is such a failure, not a write made before.
//! A new ReplicaSet the server refuses to create is reported where Argo Rollouts reports it (a Warning Event
//! and the Progressing condition), until it is created.

#![allow(clippy::disallowed_methods)] // Not the Clock: the reconcile runs against real sockets.

use std::sync::Arc;

use canaryd::api::Rollout;
use canaryd::controller::Daemon;
use canaryd::controller::rollout::reconcile;
use canaryd::engine::rollout::hash::pod_template_hash;
use canaryd_testkit::fake_apiserver::{CrdSet, RequestPattern};
use canaryd_testkit::harness::{self, Answer};
use canaryd_testkit::rollout::cluster::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
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

#[test]
fn a_replica_set_the_server_refuses_to_create_is_reported_as_argo_reports_it_until_it_is_created() {
    harness::run_test(refused_create());
}

/// The Rollout's Warning Events as (reason, note).
async fn warnings(client: &kube::Client) -> Vec<(String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let events = api.list(&ListParams::default()).await.expect("events list");
    events
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Rollout"))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

async fn refused_create() {
    let (server, client, _prom, _rsc) = deployed(CrdSet::Argo, Answer::Scalar(1.0), "1s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the first deploy to be Healthy", |s| {
        healthy_at(s, None)
    })
    .await;
    // A quota (or an admission webhook, or RBAC) refuses the update's ReplicaSet twelve times over: with the
    // Rollout's backoff (1 ms, doubling) the refusal stands for about four seconds, long enough to be seen on a
    // loaded machine.
    server.fail_next(RequestPattern::new("POST", "/replicasets"), 12, 403);
    set_image(&client, "web:2").await;
    let rollouts: Api<Rollout> = Api::namespaced(client.clone(), "default");
    let web = rollouts.get("web").await.expect("the Rollout");
    let hash = pod_template_hash(web.spec.template.as_ref().expect("a template"), None);
    // Argo's FailedRSCreateMessage, with the API server's message.
    let message =
        format!("Failed to create new replica set \"web-{hash}\": injected by the test: Forbidden");

    let s = until(&server, "the Progressing condition to say why", |s| {
        condition(s, "Progressing").1 == "ReplicaSetCreateError"
    })
    .await;
    assert_eq!(
        condition(&s, "Progressing"),
        (
            "False".into(),
            "ReplicaSetCreateError".into(),
            message.clone()
        )
    );
    harness::eventually(WAIT, "the Warning Event", || async {
        warnings(&client)
            .await
            .contains(&("ReplicaSetCreateError".to_string(), message.clone()))
            .then_some(())
    })
    .await;

    // The server lets it be created: the update goes on to the end, and Progressing is Argo's again.
    let s = until(&server, "the update to be Healthy", |s| {
        healthy_at(s, Some(&hash))
    })
    .await;
    assert_eq!(
        condition(&s, "Progressing"),
        (
            "True".into(),
            "NewReplicaSetAvailable".into(),
            format!("ReplicaSet \"web-{hash}\" has successfully progressed.")
        )
    );
    let reasons: Vec<String> = events(&client).await.into_iter().map(|e| e.0).collect();
    let refused = reasons.iter().position(|r| r == "ReplicaSetCreateError");
    let created = reasons.iter().rposition(|r| r == "NewReplicaSetCreated");
    assert!(refused < created, "{reasons:?}");
    daemon.stop().await;
}
