//! The Rollout fixture: `web`, its canary and stable Services and its analysis, driven on the engine's
//! in-memory cluster ([`memory`], for the planner's tests) or by the daemon against the fake API server
//! ([`cluster`], for the daemon's tests and the rollouts bench), and readers of what came of it ([`writes`]: what the daemon wrote). What both
//! build or read the same way is here, once; [`checkout`] is another Rollout, mid-canary with its revisions and
//! runs, for what shows a Rollout (`get rollout`, the dashboard). TEST FIXTURE ONLY: no assertions about canaryd's behaviour.

pub mod checkout;
pub mod cluster;
pub mod memory;
pub mod writes;

use canaryd::api::Rollout;
use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

/// The Rollout `name` in `namespace`: `replicas` pods labelled `app: NAME`, each one container `web` running
/// `image`, and the canary strategy `canary`.
pub fn object(namespace: &str, name: &str, replicas: i32, image: &str, canary: Value) -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
            "strategy": {"canary": canary},
        },
    }))
    .expect("a Rollout")
}

/// The pod-template hash `service`'s selector pins (`rollouts-pod-template-hash`); empty when it pins none.
pub fn selector_hash(service: &Service) -> String {
    service
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| s.get("rollouts-pod-template-hash").cloned())
        .unwrap_or_default()
}
