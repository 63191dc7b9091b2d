//! Decoding a watched ReplicaSet as the API server sends it, `metadata.managedFields` and all: decoded whole and
//! the managed fields dropped after (as before), against the text cut first (`canaryd::k8s::managed_fields`, as
//! the watches decode now); and a ReplicaSet without managed fields (as the bench's fake API server sends them),
//! which the cut leaves as it is. The managed fields are made as the API server makes them: one entry for the
//! Rollout controller's Update of the metadata and spec, one for the ReplicaSet controller's of the status,
//! each `fieldsV1` naming every field its manager set. Prints figures; asserts only that both decode the same.
//! Run: `cargo bench --bench watch_decode`.

#![allow(clippy::disallowed_methods)] // Not the Clock: a benchmark measures real time.

use std::hint::black_box;
use std::time::Instant;

use canaryd::k8s::managed_fields;
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{Map, Value, json};

/// A ReplicaSet of a Rollout as the Rollout controller makes it: one container with ports, env, resources and
/// probes.
fn replica_set(i: usize) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": format!("web-{i}-6f9c7d8b5"),
            "namespace": "shop",
            "uid": format!("0b8e9f0c-1d2e-4f3a-9b4c-{i:012}"),
            "resourceVersion": format!("{}", 100_000 + i),
            "generation": 3,
            "creationTimestamp": "2026-12-06T10:00:00Z",
            "labels": {"app": format!("web-{i}"), "rollouts-pod-template-hash": "6f9c7d8b5"},
            "annotations": {
                "rollout.argoproj.io/desired-replicas": "10",
                "rollout.argoproj.io/revision": "2",
                "rollout.argoproj.io/ephemeral-metadata": "{\"labels\":{\"role\":\"canary\"}}"
            },
            "ownerReferences": [{
                "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": format!("web-{i}"),
                "uid": format!("7c1d2e3f-4a5b-6c7d-8e9f-{i:012}"), "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "replicas": 10,
            "minReadySeconds": 5,
            "selector": {"matchLabels": {"app": format!("web-{i}"), "rollouts-pod-template-hash": "6f9c7d8b5"}},
            "template": {
                "metadata": {"labels": {"app": format!("web-{i}"), "rollouts-pod-template-hash": "6f9c7d8b5"}},
                "spec": {
                    "containers": [{
                        "name": "web",
                        "image": "registry.example.com/shop/web:2.14.1",
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                                  {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                        "env": [{"name": "LOG_LEVEL", "value": "info"},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
                        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"},
                                           "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                        "livenessProbe": {"httpGet": {"path": "/live", "port": "http", "scheme": "HTTP"},
                                          "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "imagePullPolicy": "IfNotPresent"
                    }],
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst",
                    "schedulerName": "default-scheduler",
                    "securityContext": {}
                }
            }
        },
        "status": {
            "replicas": 10, "fullyLabeledReplicas": 10, "readyReplicas": 10, "availableReplicas": 10,
            "observedGeneration": 3
        }
    })
}

/// The `fieldsV1` of `value` as the API server records it: `f:` and each key, `.` for a map's own entry, a
/// list of named maps by `k:{"name":...}`, each leaf `{}`.
fn fields_v1(value: &Value) -> Value {
    let mut out = Map::new();
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let inner = fields_v1(v);
                let mut entry = inner.as_object().cloned().unwrap_or_default();
                if v.is_object() {
                    entry.insert(".".to_string(), json!({}));
                }
                out.insert(format!("f:{key}"), Value::Object(entry));
            }
        }
        Value::Array(items) => {
            for item in items {
                if let Some(name) = item.get("name").and_then(Value::as_str) {
                    let mut entry = fields_v1(item).as_object().cloned().unwrap_or_default();
                    entry.insert(".".to_string(), json!({}));
                    out.insert(
                        format!("k:{}", json!({ "name": name })),
                        Value::Object(entry),
                    );
                }
            }
        }
        _ => {}
    }
    Value::Object(out)
}

/// `rs` with the managed fields the API server keeps of its two managers.
fn with_managed_fields(mut rs: Value) -> Value {
    let owned = json!({
        "metadata": {"labels": rs["metadata"]["labels"], "annotations": rs["metadata"]["annotations"],
                     "ownerReferences": rs["metadata"]["ownerReferences"]},
        "spec": rs["spec"],
    });
    let status = json!({ "status": rs["status"] });
    rs["metadata"]["managedFields"] = json!([
        {"manager": "canaryd", "operation": "Update", "apiVersion": "apps/v1",
         "time": "2026-12-06T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields_v1(&owned)},
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1",
         "time": "2026-12-06T10:00:07Z", "fieldsType": "FieldsV1", "fieldsV1": fields_v1(&status),
         "subresource": "status"}
    ]);
    rs
}

/// Decodes each text `rounds` times with `decode`; the mean µs per decode.
fn time(texts: &[String], rounds: usize, decode: impl Fn(&str) -> ReplicaSet) -> f64 {
    let start = Instant::now();
    for _ in 0..rounds {
        for text in texts {
            black_box(decode(black_box(text)));
        }
    }
    start.elapsed().as_secs_f64() * 1e6 / (rounds * texts.len()) as f64
}

fn whole(text: &str) -> ReplicaSet {
    let mut rs: ReplicaSet = serde_json::from_str(text).expect("a ReplicaSet");
    rs.metadata.managed_fields = None;
    rs
}

fn cut_first(text: &str) -> ReplicaSet {
    let mut rs: ReplicaSet =
        serde_json::from_str(&managed_fields::without(text)).expect("a ReplicaSet");
    rs.metadata.managed_fields = None;
    rs
}

fn main() {
    const OBJECTS: usize = 1_000;
    const ROUNDS: usize = 20;
    let plain: Vec<String> = (0..OBJECTS).map(|i| replica_set(i).to_string()).collect();
    let managed: Vec<String> = (0..OBJECTS)
        .map(|i| with_managed_fields(replica_set(i)).to_string())
        .collect();
    for (a, b) in managed.iter().zip(&plain) {
        assert_eq!(whole(a), cut_first(a));
        assert_eq!(whole(a), whole(b));
    }
    let size = |texts: &[String]| texts.iter().map(String::len).sum::<usize>() / texts.len();
    println!(
        "canaryd watch decode bench: {OBJECTS} ReplicaSets x {ROUNDS} rounds, {} bytes each with managed fields, {} without",
        size(&managed),
        size(&plain)
    );
    // Once each before timing, so neither runs on a cold allocator.
    time(&managed, 1, whole);
    time(&managed, 1, cut_first);
    let managed_whole = time(&managed, ROUNDS, whole);
    let managed_cut = time(&managed, ROUNDS, cut_first);
    let plain_whole = time(&plain, ROUNDS, whole);
    let plain_cut = time(&plain, ROUNDS, cut_first);
    println!("  with managed fields, decoded whole     {managed_whole:6.1} us per ReplicaSet");
    println!("  with managed fields, cut first         {managed_cut:6.1} us per ReplicaSet");
    println!("  without managed fields, decoded whole  {plain_whole:6.1} us per ReplicaSet");
    println!("  without managed fields, through the cut {plain_cut:6.1} us per ReplicaSet");
    println!(
        "{}",
        json!({
            "managed_whole_us": (managed_whole * 10.0).round() / 10.0,
            "managed_cut_us": (managed_cut * 10.0).round() / 10.0,
            "plain_whole_us": (plain_whole * 10.0).round() / 10.0,
            "plain_cut_us": (plain_cut * 10.0).round() / 10.0,
        })
    );
}
