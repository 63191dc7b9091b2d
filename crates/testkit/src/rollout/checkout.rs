//! The Rollout `checkout` mid-canary on the fake API server, with everything `canaryd get rollout` and the
//! dashboard show about it: paused at its second step (20% through an NGINX router), its three revisions, their
//! pods and two AnalysisRuns. TEST FIXTURE ONLY: no assertions about canaryd's behaviour.

use canaryd::api::{AnalysisRun, Rollout};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::fake_apiserver::{CrdSet, FakeApiServer};

pub const NAMESPACE: &str = "shop";
pub const NAME: &str = "checkout";
const STABLE: &str = "6d4f8b9c7";
const CANARY: &str = "7c9d5f6b8";

/// The Rollout `checkout` paused at its second step (20% through an NGINX router), its three revisions
/// (one scaled down past its deadline, the stable one, the canary), their pods, and two AnalysisRuns. Returns
/// the server.
pub async fn serve_fixture(crds: CrdSet) -> FakeApiServer {
    let server = FakeApiServer::builder().crds(crds).start().await;
    let rollout = server.put::<Rollout>(&from(rollout_object()));
    let uid = rollout.metadata.uid.clone().expect("a uid");
    for (revision, hash, image, replicas, extra) in [
        (
            "1",
            "5b8c7d6e4",
            "shop/checkout:1.3.2",
            0,
            json!({"scale-down-deadline": "2020-01-01T00:00:00Z"}),
        ),
        ("2", STABLE, "shop/checkout:1.4.0", 3, json!({})),
        ("3", CANARY, "shop/checkout:1.5.0", 1, json!({})),
    ] {
        let rs = server.put::<ReplicaSet>(&from(replica_set(
            &uid, revision, hash, image, replicas, extra,
        )));
        let rs_uid = rs.metadata.uid.clone().expect("a uid");
        for i in 0..replicas {
            let restarts = if hash == CANARY { 2 } else { 0 };
            server.put::<Pod>(&from(pod(&rs_uid, hash, i, image, restarts)));
        }
    }
    let ok = "Successful";
    server.put::<AnalysisRun>(&from(run(
        &uid,
        "checkout-6d4f8b9c7-2",
        "2",
        ok,
        &[(
            "success-rate",
            ok,
            &[("0.995", ok), ("0.993", ok), ("0.996", ok)],
        )],
    )));
    server.put::<AnalysisRun>(&from(run(
        &uid,
        "checkout-7c9d5f6b8-3-1",
        "3",
        "Running",
        &[
            (
                "success-rate",
                ok,
                &[
                    ("0.991", ok),
                    ("0.987", ok),
                    ("0.995", ok),
                    ("0.962", ok),
                    ("0.978", ok),
                ],
            ),
            (
                "latency-p99",
                "Running",
                &[("[0.231]", ok), ("[0.412]", "Failed"), ("[0.245]", ok)],
            ),
        ],
    )));
    server
}

pub fn from<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a fixture object of its kind")
}

pub fn rollout_object() -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": "web", "image": "shop/checkout:1.5.0"}]},
            },
            "strategy": {"canary": {
                "canaryService": "checkout-canary", "stableService": "checkout-stable",
                "trafficRouting": {"nginx": {"stableIngress": "checkout"}},
                "steps": [{"setWeight": 20}, {"pause": {}}, {"setWeight": 50}, {"pause": {"duration": "30s"}}],
            }},
        },
        "status": {
            "phase": "Paused", "message": "CanaryPauseStep",
            "observedGeneration": "1",
            "currentStepIndex": 1, "currentPodHash": CANARY, "stableRS": STABLE,
            "replicas": 4, "updatedReplicas": 1, "readyReplicas": 4, "availableReplicas": 4,
            "controllerPause": true,
            "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-12-05T00:00:00Z"}],
            "canary": {"weights": {
                "canary": {"weight": 20, "serviceName": "checkout-canary", "podTemplateHash": CANARY},
                "stable": {"weight": 80, "serviceName": "checkout-stable", "podTemplateHash": STABLE},
            }},
        },
    })
}

/// The Rollout moved on to its third step (setWeight: 50), as its controller would write it before the weight
/// moves (the routers' weights are still the second step's).
pub fn advanced_rollout_object() -> Value {
    let mut rollout = rollout_object();
    rollout["status"]["currentStepIndex"] = json!(2);
    rollout["status"]["phase"] = json!("Progressing");
    rollout["status"]["message"] = json!("more replicas need to be updated");
    rollout["status"]["pauseConditions"] = json!([]);
    rollout["status"]["controllerPause"] = json!(false);
    rollout
}

/// The ownerReferences naming `kind` `name` (`uid`) as the controller.
pub fn owner(kind: &str, name: &str, uid: &str) -> Value {
    json!([{
        "apiVersion": if kind == "Rollout" { "argoproj.io/v1alpha1" } else { "apps/v1" },
        "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true,
    }])
}

fn replica_set(
    uid: &str,
    revision: &str,
    hash: &str,
    image: &str,
    replicas: i32,
    extra: Value,
) -> Value {
    let mut annotations = json!({"rollout.argoproj.io/revision": revision});
    if let (Some(a), Some(e)) = (annotations.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    let labels = json!({"app": NAME, "rollouts-pod-template-hash": hash});
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{NAME}-{hash}"), "namespace": NAMESPACE, "labels": labels,
            "annotations": annotations, "ownerReferences": owner("Rollout", NAME, uid),
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": image}]}},
        },
        "status": {
            "replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
            "fullyLabeledReplicas": replicas, "observedGeneration": 1,
        },
    })
}

fn pod(rs_uid: &str, hash: &str, i: i32, image: &str, restarts: i32) -> Value {
    let suffix = ["x7k2p", "m4q9z", "b8n3r"][i as usize % 3];
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("{NAME}-{hash}-{suffix}"), "namespace": NAMESPACE,
            "labels": {"app": NAME, "rollouts-pod-template-hash": hash},
            "ownerReferences": owner("ReplicaSet", &format!("{NAME}-{hash}"), rs_uid),
        },
        "spec": {"containers": [{"name": "web", "image": image}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [{
                "name": "web", "image": image, "imageID": "", "ready": true, "restartCount": restarts,
                "state": {"running": {"startedAt": "2026-12-05T00:00:00Z"}},
            }],
        },
    })
}

/// A metric of a run's status: its name, its phase and its measurements' values and phases.
type MetricResult<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

fn run(uid: &str, name: &str, revision: &str, phase: &str, metrics: &[MetricResult]) -> Value {
    let spec: Vec<Value> = metrics
        .iter()
        .map(|(metric, _, _)| {
            json!({
                "name": metric, "interval": "1m", "successCondition": "result[0] >= 0.95",
                "provider": {"prometheus": {"address": "http://prometheus:9090", "query": "up"}},
            })
        })
        .collect();
    let results: Vec<Value> =
        metrics
            .iter()
            .map(|(metric, metric_phase, values)| {
                let measurements: Vec<Value> = values
                .iter()
                .map(|(value, phase)| json!({
                    "phase": phase, "value": value,
                    "startedAt": "2026-12-05T00:00:00Z", "finishedAt": "2026-12-05T00:00:01Z",
                }))
                .collect();
                let failed = values
                    .iter()
                    .filter(|(_, phase)| *phase == "Failed")
                    .count();
                json!({"name": metric, "phase": metric_phase, "measurements": measurements,
                   "count": values.len(), "successful": values.len() - failed, "failed": failed})
            })
            .collect();
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {
            "name": name, "namespace": NAMESPACE,
            "labels": {"app": NAME},
            "annotations": {"rollout.argoproj.io/revision": revision},
            "ownerReferences": owner("Rollout", NAME, uid),
        },
        "spec": {"metrics": spec},
        "status": {"phase": phase, "metricResults": results, "startedAt": "2026-12-05T00:00:00Z"},
    })
}
