//! The Rollout on the engine's in-memory cluster, for the planner's tests: `web` in `prod`, the reconcile loop
//! that makes pods available as a ReplicaSet controller would, and readers of the result.

use std::collections::BTreeMap;

use canaryd::api::rollout::RolloutStatus;
use canaryd::api::{AnalysisTemplateSpec, Rollout};
use canaryd::engine::rollout::conditions;
use canaryd::engine::rollout::memory::MemoryCluster;
use jiff::Timestamp;
use serde_json::{Value, json};

pub fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

/// `web` in `prod`: `replicas` pods of `web:1` and the canary strategy `canary`.
pub fn rollout(replicas: i32, canary: Value) -> Rollout {
    super::object("prod", "web", replicas, "web:1", canary)
}

/// Reconciles at `now`, every pod becoming available at once, until nothing changes.
pub fn run(c: &mut MemoryCluster, now: Timestamp) {
    for _ in 0..30 {
        let became_available = c.make_available();
        let before = c.rollout.status.clone();
        let plan = c.reconcile(now);
        if plan.writes.is_empty() && c.rollout.status == before && !became_available {
            return;
        }
    }
    panic!("the planner did not settle: {:#?}", c.status());
}

pub fn set_image(c: &mut MemoryCluster, image: &str) {
    c.edit_spec(|s| {
        if let Some(t) = s.template.as_mut() {
            t["spec"]["containers"][0]["image"] = json!(image);
        }
    });
}

/// The reasons of the Events recorded since `from`.
pub fn reasons_since(c: &MemoryCluster, from: usize) -> Vec<String> {
    c.events[from..].iter().map(|e| e.reason.clone()).collect()
}

pub fn replicas(c: &MemoryCluster) -> Vec<i32> {
    c.replicas_by_revision()
        .into_iter()
        .map(|(_, n)| n)
        .collect()
}

pub fn phase(c: &MemoryCluster) -> (String, String) {
    let s = c.status();
    (s.phase, s.message)
}

pub fn condition<'a>(s: &'a RolloutStatus, type_: &str) -> (&'a str, &'a str) {
    let c = conditions::get(s, type_).unwrap_or_else(|| panic!("no {type_} condition: {s:#?}"));
    (c.status.as_str(), c.reason.as_str())
}

pub fn template(metrics: Value) -> AnalysisTemplateSpec {
    serde_json::from_value(json!({"args": [{"name": "service"}], "metrics": metrics})).unwrap()
}

pub fn with_analysis_template(c: &mut MemoryCluster, name: &str, metrics: Value) {
    c.templates
        .insert((false, name.to_string()), template(metrics));
}

pub fn analysis_rollout() -> MemoryCluster {
    let mut c = MemoryCluster::new(rollout(
        4,
        json!({
            "canaryService": "web-canary", "stableService": "web-stable",
            "steps": [
                {"setWeight": 25},
                {"analysis": {"templates": [{"templateName": "success-rate"}],
                              "args": [{"name": "service", "value": "web"},
                                       {"name": "hash", "valueFrom": {"podTemplateHashValue": "Latest"}}]}},
                {"pause": {}}
            ]
        }),
    ));
    with_analysis_template(
        &mut c,
        "success-rate",
        json!([{"name": "rate", "count": 3, "interval": "1m", "provider": {"prometheus": {"query": "up{svc=\"{{args.service}}\"}"}}}]),
    );
    c.templates
        .get_mut(&(false, "success-rate".to_string()))
        .unwrap()
        .args =
        Some(serde_json::from_value(json!([{"name": "service"}, {"name": "hash"}])).unwrap());
    let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    c.add_service("web-canary", selector.clone());
    c.add_service("web-stable", selector);
    c
}

/// The pod-template hash the Service `name` selects; empty when it selects none.
pub fn service_hash(c: &MemoryCluster, name: &str) -> String {
    let svc = c
        .services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))
        .unwrap();
    super::selector_hash(svc)
}

/// Runs the Rollout second by second from `from` (pods available at once) until its phase is `phase`;
/// returns the second it got there.
pub fn run_until(c: &mut MemoryCluster, from: i64, phase: &str) -> i64 {
    for second in from..from + 120 {
        run(c, at(second));
        if c.status().phase == phase {
            return second;
        }
    }
    panic!("never {phase}: {:#?}", c.status());
}

/// The counts `kubectl argo rollouts get` shows: desired, current, updated, ready, available.
pub fn counts(c: &MemoryCluster) -> (i32, i32, i32, i32, i32) {
    let s = c.status();
    (
        c.rollout.spec.replicas.unwrap_or(1),
        s.replicas,
        s.updated_replicas,
        s.ready_replicas,
        s.available_replicas,
    )
}

/// `web` with `replicas` pods and the blue-green strategy `blue_green`, beside the Services `web-active`
/// and `web-preview` selecting `app: web`, as Argo's blue-green example creates them.
pub fn blue_green_rollout(replicas: i32, blue_green: Value) -> MemoryCluster {
    let mut r = rollout(replicas, json!({}));
    r.spec.strategy = serde_json::from_value(json!({"blueGreen": blue_green})).ok();
    let mut c = MemoryCluster::new(r);
    let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    c.add_service("web-active", selector.clone());
    c.add_service("web-preview", selector);
    c
}

/// `status.blueGreen`'s (activeSelector, previewSelector).
pub fn blue_green_selectors(c: &MemoryCluster) -> (String, String) {
    let s = c.status().blue_green.unwrap_or_default();
    (s.active_selector, s.preview_selector)
}
