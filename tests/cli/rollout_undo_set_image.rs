//! `canaryd undo` and `canaryd set image` against the fake API server through `KUBECONFIG`: `undo` lists the
//! ReplicaSets by the Rollout's selector, picks the revision as undo.go's `rolloutRevision` does among those the
//! Rollout controls, and puts its template back with the JSON patch of `getRolloutPatch`; `set image` reads the
//! Rollout and replaces it whole (set_image.go `SetImage`), reading again on a conflict. Both refuse what they
//! cannot do with the exit code of docs/architecture.md.

#![allow(clippy::disallowed_methods)] // Not the Clock: the child process runs on real time.

use canaryd::api::Rollout;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{Value, json};

use crate::rollout_actions::{Sent, WEB, canaryd, get, patch, rollout_with, sent};

const REPLICA_SETS: &str = "/apis/apps/v1/namespaces/default/replicasets?labelSelector=app=web";

/// The Rollout at revision 2 (`web:2`), with the ReplicaSets of revisions 1 and 2 it controls, one of a
/// revision 5 another object controls, and one it does not select.
async fn with_history(set: CrdSet) -> FakeApiServer {
    let server = FakeApiServer::builder().crds(set).start().await;
    let rollout = server.put(&rollout_with(
        json!({"currentPodHash": "bbb", "stableRS": "bbb"}),
    ));
    let uid = rollout.metadata.uid.clone().expect("a uid");
    for (hash, revision, image, owner, app) in [
        ("aaa", "1", "web:1", uid.as_str(), "web"),
        ("bbb", "2", "web:2", uid.as_str(), "web"),
        ("ccc", "5", "web:5", "someone-else", "web"),
        ("ddd", "4", "web:4", uid.as_str(), "other"),
    ] {
        let labels = json!({"app": app, "rollouts-pod-template-hash": hash});
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {
                "name": format!("web-{hash}"), "namespace": "default", "labels": labels,
                "annotations": {"rollout.argoproj.io/revision": revision},
                "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web",
                                     "uid": owner, "controller": true}],
            },
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}},
        }))
        .expect("a ReplicaSet");
        server.put(&rs);
    }
    server
}

/// The template of ReplicaSet `web-HASH` as the API server serves it, without its pod-template-hash label.
fn template_of(server: &FakeApiServer, hash: &str) -> Value {
    let rs = server
        .get_json::<ReplicaSet>("default", &format!("web-{hash}"))
        .expect("the ReplicaSet");
    let mut template = rs["spec"]["template"].clone();
    if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
        labels.remove("rollouts-pod-template-hash");
    }
    template
}

fn stored(server: &FakeApiServer) -> Value {
    server
        .get_json::<Rollout>("default", "web")
        .expect("the Rollout is stored")
}

fn json_patch_of(template: Value) -> Sent {
    let body = json!([{"op": "replace", "path": "/spec/template", "value": template}]);
    patch(WEB, "application/json-patch+json", body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_puts_the_previous_revisions_template_back_as_rundorollout_does() {
    for set in [CrdSet::Canaryd, CrdSet::Argo] {
        let server = with_history(set).await;
        let ran = canaryd(&server, &["undo", "web"]).await;
        assert_eq!(
            (ran.code, ran.stdout.as_str()),
            (Some(0), "rollout 'web' undo\n"),
            "{}",
            ran.stderr
        );
        let template = template_of(&server, "aaa");
        let list = get(REPLICA_SETS);
        assert_eq!(
            sent(&server),
            [get(WEB), list, json_patch_of(template.clone())],
            "{set:?}"
        );
        let now = &stored(&server)["spec"]["template"];
        assert_eq!(now["spec"], template["spec"], "{set:?}");
        assert_eq!(
            now["metadata"]["labels"], template["metadata"]["labels"],
            "{set:?}"
        );
        // The plugin's patch carries the template's `creationTimestamp: null` (Go marshals it); Argo's CRD does
        // not declare it, so it is pruned there, as on a real cluster, and nothing else is.
        let pruned = server.pruned();
        let expected: &[&str] = match set {
            CrdSet::Argo => &["Rollout/web: spec.template.metadata.creationTimestamp"],
            CrdSet::Canaryd => &[],
        };
        assert_eq!(pruned, expected, "{set:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_to_a_revision_takes_that_one_and_skips_a_template_already_there() {
    let server = with_history(CrdSet::Argo).await;
    let ran = canaryd(&server, &["undo", "web", "--to-revision", "1"]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let template = template_of(&server, "aaa");
    assert_eq!(sent(&server)[2], json_patch_of(template));
    // Now at revision 1's template: going to revision 1 again writes nothing.
    let ran = canaryd(&server, &["undo", "web", "--to-revision", "1"]).await;
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (
            Some(0),
            "skipped rollback (current template already matches revision 1)\n"
        )
    );
    assert_eq!(sent(&server).len(), 5, "read and listed, not written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_refuses_a_revision_it_does_not_control_or_a_rollout_without_history() {
    let server = with_history(CrdSet::Argo).await;
    for revision in ["5", "4", "9"] {
        let ran = canaryd(&server, &["undo", "web", "--to-revision", revision]).await;
        assert_eq!(ran.code, Some(2), "{}", ran.stderr);
        assert_eq!(
            ran.stderr,
            format!("canaryd: rollout default/web has no revision {revision}\n")
        );
    }
    let server = FakeApiServer::builder().crds(CrdSet::Argo).start().await;
    server.put(&rollout_with(json!({})));
    let ran = canaryd(&server, &["undo", "web"]).await;
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    assert!(ran.stderr.contains("no earlier revision"), "{}", ran.stderr);
    let ran = canaryd(&server, &["undo", "web", "--to-revision", "-1"]).await;
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_image_replaces_the_rollout_with_the_new_image_as_setimage_does() {
    for set in [CrdSet::Canaryd, CrdSet::Argo] {
        let server = FakeApiServer::builder().crds(set).start().await;
        server.put(&rollout_with(
            json!({"currentPodHash": "bbb", "stableRS": "bbb"}),
        ));
        let mut expected = stored(&server);
        let ran = canaryd(&server, &["set", "image", "web", "web=web:3"]).await;
        assert_eq!(
            (ran.code, ran.stdout.as_str()),
            (Some(0), "rollout \"web\" image updated\n"),
            "{}",
            ran.stderr
        );
        expected["spec"]["template"]["spec"]["containers"][0]["image"] = json!("web:3");
        let put = (
            "PUT".into(),
            WEB.into(),
            "application/json".into(),
            expected,
        );
        assert_eq!(sent(&server), [get(WEB), put], "{set:?}");
        let image = &stored(&server)["spec"]["template"]["spec"]["containers"][0]["image"];
        assert_eq!(image, "web:3", "{set:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_image_reads_again_after_a_conflict_and_refuses_an_unknown_container() {
    let server = FakeApiServer::builder().crds(CrdSet::Argo).start().await;
    server.put(&rollout_with(json!({})));
    server.conflict_next_write::<Rollout>("default", "web");
    let ran = canaryd(&server, &["set", "image", "web", "*=web:4"]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let methods: Vec<String> = sent(&server).into_iter().map(|s| s.0).collect();
    assert_eq!(methods, ["GET", "PUT", "GET", "PUT"]);
    assert_eq!(
        stored(&server)["spec"]["template"]["spec"]["containers"][0]["image"],
        "web:4"
    );

    let ran = canaryd(&server, &["set", "image", "web", "sidecar=envoy:2"]).await;
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert_eq!(
        ran.stderr,
        "canaryd: rollout default/web has no container named \"sidecar\"\n"
    );
    let ran = canaryd(&server, &["set", "image", "web", "web"]).await;
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert_eq!(sent(&server).len(), 5, "one more read, no write");
}
