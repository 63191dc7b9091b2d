//! `canaryd get rollout` and `canaryd get rollouts` against fixed objects served by the fake API server,
//! reached through the kubeconfig it writes (as kubectl would reach it), under both CRD sets: the text as a
//! golden file, `--output json` against the schema shipped in docs/schemas/, and the errors' exit codes.

#![allow(clippy::disallowed_methods)] // Not the Clock: the child process runs on real time.

use canaryd::api::{AnalysisRun, Rollout};
use canaryd_testkit::cli::Ran;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern};
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::CANARYD;
use crate::golden_text::assert_golden;

pub const NAMESPACE: &str = "shop";
pub const NAME: &str = "checkout";
const STABLE: &str = "6d4f8b9c7";
const CANARY: &str = "7c9d5f6b8";

/// `canaryd ARGS` against `server`'s cluster (its kubeconfig, no in-cluster settings, a home without one).
pub async fn get(server: &FakeApiServer, args: &[&str]) -> Ran {
    CANARYD.on_cluster(server.kubeconfig_path(), args).await
}

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

fn owner(kind: &str, name: &str, uid: &str) -> Value {
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

/// The output with every age the objects just created can have (`0s` to `9s`) said as `0s`, so the golden
/// text does not depend on how long the test took.
pub fn ages_zeroed(text: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        let age = c.is_ascii_digit()
            && i > 0
            && chars[i - 1] == ' '
            && chars.get(i + 1) == Some(&'s')
            && chars.get(i + 2).is_none_or(|n| *n == ' ' || *n == '\n');
        out.push(if age { '0' } else { *c });
    }
    out
}

async fn text_view_is_the_golden_one(crds: CrdSet) {
    let server = serve_fixture(crds).await;
    let ran = get(&server, &["get", "rollout", NAME, "-n", NAMESPACE]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_golden("get-rollout.txt", &ages_zeroed(&ran.stdout));
}

async fn table_is_the_golden_one(crds: CrdSet) {
    let server = serve_fixture(crds).await;
    let mut other = rollout_object();
    other["metadata"] = json!({"name": "search", "namespace": "default"});
    other["status"] = json!({"phase": "Healthy", "observedGeneration": "1", "currentStepIndex": 4,
        "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3});
    server.put::<Rollout>(&from(other));
    let ran = get(&server, &["get", "rollouts", "-n", NAMESPACE]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_golden("get-rollouts.txt", &ran.stdout);
    let ran = get(&server, &["get", "rollouts", "-A"]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_golden("get-rollouts-all.txt", &ran.stdout);
}

with_each_crd_set!(text_view_is_the_golden_one, table_is_the_golden_one);

/// Without `-n`, the namespace is the kubeconfig context's, as kubectl takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_namespace_the_kubeconfig_contexts_is_read() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    let dir = tempfile::tempdir().expect("a folder");
    let kubeconfig = dir.path().join("config");
    let text = std::fs::read_to_string(server.kubeconfig_path()).expect("the fake's kubeconfig");
    let in_shop = text.replace("namespace: default", &format!("namespace: {NAMESPACE}"));
    assert_ne!(text, in_shop, "the fake's kubeconfig names a namespace");
    std::fs::write(&kubeconfig, in_shop).expect("written");
    for args in [["get", "rollout", NAME].as_slice(), &["get", "rollouts"]] {
        let mut command = CANARYD.command();
        command
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", dir.path());
        let ran: Ran = tokio::task::spawn_blocking(move || command.output())
            .await
            .expect("joined")
            .expect("runs")
            .into();
        assert_eq!(ran.code, Some(0), "{ran:?}");
        assert!(ran.stdout.contains("checkout"), "{ran:?}");
    }
}

/// The view README.md shows is the golden one, so it cannot drift from what the command prints.
#[test]
fn the_readme_shows_the_golden_view() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let golden = std::fs::read_to_string(format!("{root}/tests/cli/golden/get-rollout.txt"))
        .expect("golden");
    assert!(
        readme.contains(&format!("```text\n{golden}```\n")),
        "README.md lacks:\n{golden}"
    );
}

/// The JSON view validates against the shipped schema, and says what the text says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_view_follows_the_shipped_schema() {
    let server = serve_fixture(CrdSet::Argo).await;
    let ran = get(
        &server,
        &["get", "rollout", NAME, "-n", NAMESPACE, "--output", "json"],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let view: Value = serde_json::from_str(&ran.stdout).expect("the view as JSON");
    let schema = crate::get_rollout::schema();
    let errors: Vec<String> = schema
        .iter_errors(&view)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{view:#}");
    assert_eq!(view["canary"]["actualWeight"], 20);
    assert_eq!(view["canary"]["step"]["text"], "pause");
    assert_eq!(
        view["revisions"][0]["analysisRuns"][0]["metrics"][1]["measurements"][1]["value"],
        "[0.412]"
    );
}

/// The schema in docs/schemas/, compiled; it refuses what the view never holds.
pub fn schema() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/schemas/get-rollout.schema.json"
    );
    let text = std::fs::read_to_string(path).expect("the schema file");
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

#[test]
fn the_schema_refuses_a_view_missing_its_tree() {
    let view = json!({"name": NAME, "namespace": NAMESPACE, "status": "Healthy"});
    assert!(!schema().is_valid(&view));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_rollout_is_named_and_exits_2() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    let ran = get(&server, &["get", "rollout", "cart", "-n", NAMESPACE]).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stdout.is_empty(), "{ran:?}");
    assert_eq!(
        ran.stderr,
        "canaryd get: rollout \"cart\" in namespace \"shop\" not found\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_read_is_named_and_exits_4() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    server.fail_next(RequestPattern::new("GET", "/replicasets"), 1, 403);
    let ran = get(&server, &["get", "rollout", NAME, "-n", NAMESPACE]).await;
    assert_eq!(ran.code, Some(4), "{ran:?}");
    assert!(
        ran.stderr
            .starts_with("canaryd get: not allowed to read replicasets in namespace \"shop\""),
        "{ran:?}"
    );
}

#[test]
fn no_cluster_exits_4() {
    let mut command = CANARYD.command();
    let home = tempfile::tempdir().expect("a home");
    command
        .args(["get", "rollouts"])
        .env("KUBECONFIG", home.path().join("none"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", home.path());
    let ran: Ran = command.output().expect("runs").into();
    assert_eq!(ran.code, Some(4), "{ran:?}");
    assert!(ran.stderr.contains("no cluster configured"), "{ran:?}");
}
