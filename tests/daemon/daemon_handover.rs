//! Handing a cluster over from Argo Rollouts: the fake API server is seeded with what Argo Rollouts leaves
//! behind (a Rollout with Argo's status, ReplicaSets with Argo's names, labels, annotations, owner and a pod
//! template as the API server defaulted it, Services pinned to Argo's hashes, the running step AnalysisRun),
//! then canaryd starts. A Healthy Rollout is left as it is; a mid-canary one goes on from its analysis step. In
//! neither is a revision added, a ReplicaSet or AnalysisRun created, or an Event written that Argo would not
//! have written.

#![allow(clippy::disallowed_methods)] // Not the Clock: the tests wait on real time.

use std::time::Duration;

use canaryd::api::{AnalysisPhase, AnalysisRun, Rollout};
use canaryd::engine::rollout::hash::step_hash;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

/// Hashes as Argo Rollouts names its ReplicaSets: never what canaryd's own hash of the template gives, so only
/// comparing templates (Argo's `FindNewReplicaSet`) finds them.
/// The Event Argo's controller (and canaryd's) writes for each Rollout its informer first lists.
const ADDED_TO_INFORMER: [&str; 2] = [
    "RolloutAddedToInformer",
    "Rollout resource added to informer: default/web",
];

const STABLE: &str = "5d8f9c7b6";
const CANARY: &str = "7c9b5f4d8";

/// The Rollout's pod template, as its owner wrote it: a probe, a field reference and a ConfigMap volume, each
/// of which the API server fills defaults into on a ReplicaSet.
fn pod_template(image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "containers": [{
                "name": "web", "image": image,
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"port": 8080}},
                "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}],
            }],
            "volumes": [{"name": "config", "configMap": {"name": "web"}}],
        }
    })
}

/// `pod_template(image)` as Argo Rollouts created it in a ReplicaSet and the API server returns it: the hash
/// label added, every default filled in (written out here, not computed, as `kubectl get rs -o json` shows it).
fn defaulted_pod_template(image: &str, hash: &str) -> Value {
    json!({
        "metadata": {"creationTimestamp": null, "labels": {"app": "web", "rollouts-pod-template-hash": hash}},
        "spec": {
            "containers": [{
                "name": "web", "image": image, "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "readinessProbe": {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                    "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "env": [{"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}],
                "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            }],
            "volumes": [{"name": "config", "configMap": {"name": "web", "defaultMode": 420}}],
            "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "securityContext": {}, "terminationGracePeriodSeconds": 30,
        }
    })
}

fn steps() -> Value {
    json!([
        {"setWeight": 20},
        {"pause": {"duration": "2s"}},
        {"analysis": {"templates": [{"templateName": "success-rate"}]}},
        {"setWeight": 60},
    ])
}

/// The ownerReference Argo Rollouts puts on what a Rollout controls.
fn owned_by(rollout: &Rollout) -> Value {
    json!([{
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web",
        "uid": rollout.metadata.uid, "controller": true, "blockOwnerDeletion": true,
    }])
}

/// The Rollout `web` at `revision` running `image`, created as its owner would create it.
async fn seed_rollout(
    client: &kube::Client,
    server: &FakeApiServer,
    image: &str,
    revision: u32,
) -> Rollout {
    let mut rollout = with_steps(image, steps());
    let mut value = serde_json::to_value(&rollout).expect("a Rollout serialises");
    value["spec"]["template"] = pod_template(image);
    value["metadata"]["annotations"] =
        json!({"rollout.argoproj.io/revision": revision.to_string()});
    rollout = serde_json::from_value(value).expect("a Rollout");
    create_rollout(client, &rollout).await;
    server
        .get::<Rollout>("default", "web")
        .expect("the Rollout is stored")
}

/// The ReplicaSet Argo Rollouts made for `hash`, at `replicas`, with Argo's labels and annotations.
fn seed_replica_set(
    server: &FakeApiServer,
    rollout: &Rollout,
    image: &str,
    hash: &str,
    revision: u32,
    replicas: i32,
) {
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {
            "name": format!("web-{hash}"), "namespace": "default",
            "labels": {"app": "web", "rollouts-pod-template-hash": hash},
            "annotations": {"rollout.argoproj.io/revision": revision.to_string(),
                            "rollout.argoproj.io/desired-replicas": "5"},
            "ownerReferences": owned_by(rollout),
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web", "rollouts-pod-template-hash": hash}},
            "template": defaulted_pod_template(image, hash),
        },
    }))
    .expect("a ReplicaSet");
    server.put(&rs);
}

/// `NAME` selecting `hash`'s pods, managed by the Rollout, as Argo Rollouts leaves it.
fn seed_service(server: &FakeApiServer, name: &str, hash: &str) {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {"argo-rollouts.argoproj.io/managed-by-rollouts": "web"}},
        "spec": {"selector": {"app": "web", "rollouts-pod-template-hash": hash}},
    }))
    .expect("a Service");
    server.put(&service);
}

fn argo_condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    let at = "2026-01-01T00:00:00Z";
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": at, "lastUpdateTime": at})
}

/// The status Argo Rollouts writes, from `fields` and the parts every status has.
async fn seed_status(client: &kube::Client, rollout: &Rollout, fields: Value) {
    let mut status = json!({
        "observedGeneration": rollout.metadata.generation.unwrap_or(1).to_string(),
        "currentStepHash": step_hash(Some(&serde_json::from_value(steps()).expect("steps"))),
        "selector": "app=web", "replicas": 5, "updatedReplicas": 5, "readyReplicas": 5,
        "availableReplicas": 5, "HPAReplicas": 5, "blueGreen": {}, "canary": {},
    });
    if let (Some(status), Value::Object(fields)) = (status.as_object_mut(), fields) {
        status.extend(fields);
    }
    patch_status(client, json!({ "status": status })).await;
}

/// Waits until every seeded ReplicaSet's pods are ready, as they were under Argo Rollouts.
async fn until_pods_ready(server: &FakeApiServer, ready: &[(&str, i32)]) {
    eventually(WAIT, "the seeded ReplicaSets' pods", || async {
        ready
            .iter()
            .all(|(hash, replicas)| {
                server
                    .get::<ReplicaSet>("default", &format!("web-{hash}"))
                    .and_then(|rs| rs.status)
                    .and_then(|s| s.available_replicas)
                    .unwrap_or(0)
                    == *replicas
            })
            .then_some(())
    })
    .await;
}

/// Nothing canaryd made anew: no ReplicaSet or AnalysisRun created, no revision added.
fn assert_nothing_new(server: &FakeApiServer, rollout_revision: &str) {
    assert_eq!(
        creates(server),
        (0, 0),
        "(ReplicaSets, AnalysisRuns) created"
    );
    let rollout = server
        .get::<Rollout>("default", "web")
        .expect("the Rollout");
    let revision = rollout
        .metadata
        .annotations
        .and_then(|a| a.get("rollout.argoproj.io/revision").cloned());
    assert_eq!(revision.as_deref(), Some(rollout_revision));
    let names: Vec<Option<String>> = replica_sets(server)
        .into_iter()
        .map(|rs| rs.metadata.name)
        .collect();
    assert!(
        names.iter().all(|n| [STABLE, CANARY]
            .iter()
            .any(|h| *n == Some(format!("web-{h}")))),
        "{names:?}"
    );
}

async fn a_healthy_rollout_handed_over_from_argo_is_left_as_it_is(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let _rsc = server.replica_set_controller(POD_START);
    create_template(&client, &prom).await;
    let rollout = seed_rollout(&client, &server, "web:1", 1).await;
    seed_replica_set(&server, &rollout, "web:1", STABLE, 1, 5);
    seed_service(&server, "web-canary", STABLE);
    seed_service(&server, "web-stable", STABLE);
    let progressed = format!("ReplicaSet \"web-{STABLE}\" has successfully progressed.");
    seed_status(
        &client,
        &rollout,
        json!({
            "phase": "Healthy", "stableRS": STABLE, "currentPodHash": STABLE, "currentStepIndex": 4,
            "conditions": [
                argo_condition("Available", "True", "AvailableReason", "Rollout has minimum availability"),
                argo_condition("Completed", "True", "RolloutCompleted", "RolloutCompleted"),
                argo_condition("Healthy", "True", "RolloutHealthy", "Rollout is healthy"),
                argo_condition("Progressing", "True", "NewReplicaSetAvailable", &progressed),
            ],
        }),
    )
    .await;
    until_pods_ready(&server, &[(STABLE, 5)]).await;
    let template_before = server
        .get_json::<ReplicaSet>("default", &format!("web-{STABLE}"))
        .map(|rs| rs["spec"]["template"].clone());

    let daemon = harness::spawn(client.clone(), config()).await;
    // Reconciled: the Rollout's status was read and is current (canaryd writes none when nothing changed).
    eventually(WAIT, "a reconcile of the Rollout", || async {
        let stored = server.get::<Rollout>("default", "web")?;
        let s = stored.status?;
        (s.observed_generation == stored.metadata.generation.unwrap_or(0).to_string()
            && server
                .requests()
                .iter()
                .any(|r| r.path.contains("/replicasets")))
        .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    daemon.stop().await;

    assert_nothing_new(&server, "1");
    let s = status(&server);
    assert_eq!(
        (
            s.phase.as_str(),
            s.stable_rs.as_str(),
            s.current_pod_hash.as_str(),
            s.current_step_index
        ),
        ("Healthy", STABLE, STABLE, Some(4))
    );
    assert_eq!(replicas_of(&server, STABLE), Some(5));
    assert_eq!(
        server
            .get_json::<ReplicaSet>("default", &format!("web-{STABLE}"))
            .map(|rs| rs["spec"]["template"].clone()),
        template_before,
        "the ReplicaSet's template is not rewritten"
    );
    // Argo's controller, started afresh, also tells every Rollout its informer lists: that and nothing else.
    assert_eq!(
        events(&client).await,
        [(
            ADDED_TO_INFORMER[0].to_string(),
            ADDED_TO_INFORMER[1].to_string()
        )],
        "Events about a Rollout Argo left Healthy"
    );
}

with_each_crd_set!(a_healthy_rollout_handed_over_from_argo_is_left_as_it_is);

async fn a_rollout_handed_over_mid_canary_goes_on_from_its_analysis_step(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let _rsc = server.replica_set_controller(POD_START);
    create_template(&client, &prom).await;
    let rollout = seed_rollout(&client, &server, "web:2", 2).await;
    seed_replica_set(&server, &rollout, "web:1", STABLE, 1, 4);
    seed_replica_set(&server, &rollout, "web:2", CANARY, 2, 1);
    seed_service(&server, "web-canary", CANARY);
    seed_service(&server, "web-stable", STABLE);
    // Argo Rollouts' step run, started and not yet measured.
    let run_name = format!("web-{CANARY}-2-2");
    let template = template(&prom.uri());
    let run: AnalysisRun = serde_json::from_value(json!({
        "metadata": {
            "name": run_name, "namespace": "default",
            // Argo's `newAnalysisRunFromRollout`: the Rollout's selector labels too.
            "labels": {"app": "web", "rollout-type": "Step", "rollouts-pod-template-hash": CANARY,
                       "step-index": "2"},
            "annotations": {"rollout.argoproj.io/revision": "2"},
            "ownerReferences": owned_by(&rollout),
        },
        "spec": {"metrics": serde_json::to_value(&template.spec.metrics).expect("metrics serialise")},
        "status": {"phase": "Running", "startedAt": "2026-01-01T00:00:00Z"},
    }))
    .expect("an AnalysisRun");
    server.put(&run);
    seed_status(
        &client,
        &rollout,
        json!({
            "phase": "Progressing", "message": "more replicas need to be updated",
            "stableRS": STABLE, "currentPodHash": CANARY, "currentStepIndex": 2,
            "updatedReplicas": 1,
            "canary": {"currentStepAnalysisRunStatus": {"name": run_name, "status": "Running"}},
            "conditions": [
                argo_condition("Available", "True", "AvailableReason", "Rollout has minimum availability"),
                argo_condition("Completed", "False", "RolloutCompleted", "RolloutCompleted"),
                argo_condition("Healthy", "False", "RolloutHealthy", "Rollout is not healthy"),
                argo_condition("Paused", "False", "RolloutResumed", "Rollout is resumed"),
                argo_condition("Progressing", "True", "ReplicaSetUpdated",
                    &format!("ReplicaSet \"web-{CANARY}\" is progressing.")),
            ],
        }),
    )
    .await;
    until_pods_ready(&server, &[(STABLE, 4), (CANARY, 1)]).await;

    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the promotion", |s| {
        healthy_at(s, Some(CANARY)) && condition(s, "Healthy").0 == "True"
    })
    .await;
    eventually(WAIT, "the stable Service switched", || async {
        (service_hash(&server, "web-stable") == CANARY).then_some(())
    })
    .await;
    daemon.stop().await;

    assert_nothing_new(&server, "2");
    let runs = server.list::<AnalysisRun>("default");
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(
        runs[0].status.as_ref().and_then(|s| s.phase),
        Some(AnalysisPhase::Successful),
        "Argo's run is measured to its end"
    );
    assert_eq!(prom.queries(), 2);
    assert_eq!(
        (replicas_of(&server, CANARY), replicas_of(&server, STABLE)),
        (Some(5), Some(0))
    );
    // The informer's Event a starting Argo controller writes too, then from Argo's step analysis on, the
    // Events Argo Rollouts writes for the rest of the update (as in
    // `a_healthy_update_is_promoted_step_by_step_with_argos_status_and_events`), and none before it.
    let (old, new) = (STABLE, CANARY);
    let informer = (
        ADDED_TO_INFORMER[0].to_string(),
        ADDED_TO_INFORMER[1].to_string(),
    );
    let expected: Vec<_> = std::iter::once(informer)
        .chain(events_after_step_analysis(old, new, &run_name))
        .collect();
    assert_eq!(events(&client).await, expected);
}

with_each_crd_set!(a_rollout_handed_over_mid_canary_goes_on_from_its_analysis_step);
