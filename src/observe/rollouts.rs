//! The Rollout families of `/metrics`, computed at scrape time from the cached Rollouts: Argo Rollouts'
//! `rollout_info`, `rollout_info_replicas_*` and the deprecated `rollout_phase` (names, labels and label
//! values as Argo's `controller/metrics/rollouts.go` writes them, so Argo's dashboards and alerts keep working),
//! and canaryd's own step and weight gauges. A deleted Rollout leaves the cache, and with it every series.

use std::sync::Arc;

use crate::api::Rollout;
use crate::api::reasons::rollout as reasons;

use super::{Exposition, family, sample};

/// Argo's `RolloutPhase` of the metrics (not `status.phase`): what the Progressing and InvalidSpec conditions
/// say, in Argo's `calculatePhase` order.
pub const PHASES: [&str; 7] = [
    "Completed",
    "Progressing",
    "Paused",
    "Timeout",
    "Error",
    "Abort",
    "InvalidSpec",
];

/// Argo's `calculatePhase`: Progressing unless the Progressing condition's reason says otherwise; an
/// InvalidSpec condition overrides everything.
pub fn phase(rollout: &Rollout) -> &'static str {
    let conditions = rollout
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let reason_of = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.reason.as_str())
    };
    if reason_of(reasons::INVALID_SPEC).is_some() {
        return "InvalidSpec";
    }
    match reason_of(reasons::PROGRESSING) {
        Some(reasons::NEW_RS_AVAILABLE) => "Completed",
        Some(reasons::ROLLOUT_PAUSED) => "Paused",
        Some(reasons::FAILED_RS_CREATE) => "Error",
        Some(reasons::TIMED_OUT) => "Timeout",
        Some(reasons::ROLLOUT_ABORTED) => "Abort",
        _ => "Progressing",
    }
}

/// Argo's `getStrategyAndTrafficRouter`: `blueGreen`, `canary` or `none`, and for a canary the router Argo
/// names (the last of ALB, Ambassador, Istio, Nginx, SMI, AppMesh that is set; empty for none or any other).
pub fn strategy_and_router(rollout: &Rollout) -> (&'static str, &'static str) {
    let Some(strategy) = rollout.spec.strategy.as_ref() else {
        return ("none", "");
    };
    if strategy.blue_green.is_some() {
        return ("blueGreen", "");
    }
    let Some(canary) = strategy.canary.as_ref() else {
        return ("none", "");
    };
    let Some(routing) = canary.traffic_routing.as_ref() else {
        return ("canary", "");
    };
    let named = [
        (routing.alb.is_some(), "ALB"),
        (routing.ambassador.is_some(), "Ambassador"),
        (routing.istio.is_some(), "Istio"),
        (routing.nginx.is_some(), "Nginx"),
        (routing.smi.is_some(), "SMI"),
        (routing.app_mesh.is_some(), "AppMesh"),
    ];
    let router = named
        .iter()
        .rev()
        .find(|(set, _)| *set)
        .map_or("", |(_, name)| name);
    ("canary", router)
}

/// Every Rollout family, one sample per Rollout (six for `rollout_phase`).
pub fn write(out: &mut Exposition, rollouts: &[Arc<Rollout>]) {
    let described: Vec<Described<'_>> = rollouts.iter().map(|r| Described::of(r)).collect();
    family(out, "rollout_info", "gauge", "Information about rollout.");
    for d in &described {
        let labels = d.labels_with(&[
            ("strategy", d.strategy),
            ("traffic_router", d.router),
            ("phase", d.phase),
        ]);
        sample(out, "rollout_info", &labels, 1.0);
    }
    let replicas: [(&str, &str, Count); 4] = [
        (
            "rollout_info_replicas_available",
            "The number of available replicas per rollout.",
            |d| d.available,
        ),
        (
            "rollout_info_replicas_unavailable",
            "The number of unavailable replicas per rollout.",
            |d| d.replicas - d.available,
        ),
        (
            "rollout_info_replicas_desired",
            "The number of desired replicas per rollout.",
            |d| d.desired,
        ),
        (
            "rollout_info_replicas_updated",
            "The number of updated replicas per rollout.",
            |d| d.updated,
        ),
    ];
    for (name, help, value) in replicas {
        family(out, name, "gauge", help);
        for d in &described {
            sample(out, name, &d.labels_with(&[]), f64::from(value(d)));
        }
    }
    write_deprecated_phase(out, &described);
    write_steps(out, &described);
}

/// `rollout_phase`: one sample per phase Argo lists there (not InvalidSpec), 1 for the Rollout's.
fn write_deprecated_phase(out: &mut Exposition, described: &[Described<'_>]) {
    let name = "rollout_phase";
    family(
        out,
        name,
        "gauge",
        "Information on the state of the rollout (DEPRECATED - use rollout_info)",
    );
    for d in described {
        for phase in PHASES.iter().filter(|p| **p != "InvalidSpec") {
            let labels = d.labels_with(&[("strategy", d.strategy), ("phase", phase)]);
            sample(
                out,
                name,
                &labels,
                if d.phase == *phase { 1.0 } else { 0.0 },
            );
        }
    }
}

/// canaryd's own: where each canary Rollout is in its steps, and the canary's weight as its status records it.
fn write_steps(out: &mut Exposition, described: &[Described<'_>]) {
    let step = "canaryd_rollout_step";
    family(
        out,
        step,
        "gauge",
        "A canary Rollout's status.currentStepIndex (the number of steps when complete).",
    );
    for d in described {
        if let Some(index) = d.step {
            sample(out, step, &d.labels_with(&[]), f64::from(index));
        }
    }
    let set_weight = "canaryd_rollout_set_weight";
    family(
        out,
        set_weight,
        "gauge",
        "The canary weight (percent) a canary Rollout's steps ask for at its current step (100 when complete, 0 when aborted).",
    );
    for d in described {
        if let Some(w) = d.set_weight {
            sample(out, set_weight, &d.labels_with(&[]), f64::from(w));
        }
    }
    let weight = "canaryd_rollout_canary_weight";
    family(
        out,
        weight,
        "gauge",
        "The canary's traffic weight (percent) as status.canary.weights records it (Rollouts with a traffic router).",
    );
    for d in described {
        if let Some(w) = d.canary_weight {
            sample(out, weight, &d.labels_with(&[]), f64::from(w));
        }
    }
}

/// The weight the steps of a canary Rollout with steps ask for where its status says it is.
fn set_weight_of(rollout: &Rollout) -> Option<i32> {
    let canary = rollout.spec.strategy.as_ref()?.canary.as_ref()?;
    let status = rollout.status.as_ref()?;
    let steps = canary.steps.as_deref().filter(|s| !s.is_empty())?;
    let (_, index) = crate::engine::rollout::steps::current(steps, status);
    Some(crate::engine::rollout::steps::set_weight(
        steps,
        index,
        status.abort,
    ))
}

/// One of the replica counts of a Rollout.
type Count = fn(&Described<'_>) -> i32;

/// What the families say of one Rollout.
struct Described<'a> {
    namespace: &'a str,
    name: &'a str,
    strategy: &'static str,
    router: &'static str,
    phase: &'static str,
    replicas: i32,
    available: i32,
    updated: i32,
    desired: i32,
    step: Option<i32>,
    set_weight: Option<i32>,
    canary_weight: Option<i32>,
}

impl<'a> Described<'a> {
    fn of(rollout: &'a Rollout) -> Described<'a> {
        let (strategy, router) = strategy_and_router(rollout);
        let status = rollout.status.as_ref();
        let meta = &rollout.metadata;
        Described {
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            name: meta.name.as_deref().unwrap_or_default(),
            strategy,
            router,
            phase: phase(rollout),
            replicas: status.map_or(0, |s| s.replicas),
            available: status.map_or(0, |s| s.available_replicas),
            updated: status.map_or(0, |s| s.updated_replicas),
            // Argo's GetReplicasOrDefault.
            desired: rollout.spec.replicas.unwrap_or(1),
            step: status.and_then(|s| s.current_step_index),
            set_weight: set_weight_of(rollout),
            canary_weight: status
                .and_then(|s| s.canary.weights.as_ref())
                .map(|w| w.canary.weight),
        }
    }

    /// `namespace` and `name`, then `more`.
    fn labels_with<'b>(&'b self, more: &[(&'b str, &'b str)]) -> Vec<(&'b str, &'b str)> {
        let mut labels = vec![("namespace", self.namespace), ("name", self.name)];
        labels.extend_from_slice(more);
        labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout(spec: serde_json::Value, conditions: serde_json::Value) -> Rollout {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": spec,
            "status": {"conditions": conditions},
        }))
        .expect("a Rollout")
    }

    fn progressing(reason: &str) -> serde_json::Value {
        json!([{"type": "Progressing", "status": "True", "reason": reason, "message": "",
                "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    }

    #[test]
    fn the_phase_is_argos_calculate_phase_from_the_conditions() {
        let cases = [
            ("NewReplicaSetAvailable", "Completed"),
            ("RolloutPaused", "Paused"),
            ("ReplicaSetCreateError", "Error"),
            ("ProgressDeadlineExceeded", "Timeout"),
            ("RolloutAborted", "Abort"),
            ("ReplicaSetUpdated", "Progressing"),
        ];
        for (reason, expected) in cases {
            assert_eq!(
                phase(&rollout(json!({}), progressing(reason))),
                expected,
                "{reason}"
            );
        }
        assert_eq!(phase(&rollout(json!({}), json!([]))), "Progressing");
        let mut invalid = progressing("NewReplicaSetAvailable");
        if let Some(list) = invalid.as_array_mut() {
            list.push(json!({"type": "InvalidSpec", "status": "True", "reason": "InvalidSpec", "message": "",
                "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
        }
        assert_eq!(phase(&rollout(json!({}), invalid)), "InvalidSpec");
    }

    #[test]
    fn strategy_and_router_are_named_as_argo_names_them() {
        let of = |strategy| strategy_and_router(&rollout(json!({"strategy": strategy}), json!([])));
        assert_eq!(of(json!({"canary": {}})), ("canary", ""));
        assert_eq!(of(json!({"blueGreen": {}})), ("blueGreen", ""));
        assert_eq!(of(json!({})), ("none", ""));
        assert_eq!(
            of(json!({"canary": {"trafficRouting": {"nginx": {"stableIngress": "web"}}}})),
            ("canary", "Nginx")
        );
        // Argo checks each router in turn, the later overriding: SMI after Istio.
        assert_eq!(
            of(json!({"canary": {"trafficRouting": {"istio": {}, "smi": {}}}})),
            ("canary", "SMI")
        );
        // Routers Argo's metrics do not name.
        assert_eq!(
            of(json!({"canary": {"trafficRouting": {"plugins": {"x/y": {}}}}})),
            ("canary", "")
        );
    }

    #[test]
    fn every_family_has_one_sample_per_rollout_and_the_deprecated_phase_six() {
        let mut r = rollout(
            json!({"replicas": 5, "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}}}),
            progressing("RolloutPaused"),
        );
        if let Some(s) = r.status.as_mut() {
            s.replicas = 6;
            s.available_replicas = 4;
            s.updated_replicas = 1;
            s.current_step_index = Some(1);
        }
        let mut out = Exposition::collect();
        write(&mut out, &[Arc::new(r)]);
        let out = out.finish();
        for line in [
            "rollout_info{namespace=\"shop\",name=\"web\",strategy=\"canary\",traffic_router=\"\",phase=\"Paused\"} 1",
            "rollout_info_replicas_available{namespace=\"shop\",name=\"web\"} 4",
            "rollout_info_replicas_unavailable{namespace=\"shop\",name=\"web\"} 2",
            "rollout_info_replicas_desired{namespace=\"shop\",name=\"web\"} 5",
            "rollout_info_replicas_updated{namespace=\"shop\",name=\"web\"} 1",
            "rollout_phase{namespace=\"shop\",name=\"web\",strategy=\"canary\",phase=\"Paused\"} 1",
            "rollout_phase{namespace=\"shop\",name=\"web\",strategy=\"canary\",phase=\"Completed\"} 0",
            "canaryd_rollout_step{namespace=\"shop\",name=\"web\"} 1",
            "canaryd_rollout_set_weight{namespace=\"shop\",name=\"web\"} 20",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
        }
        assert_eq!(
            out.lines()
                .filter(|l| l.starts_with("rollout_phase{"))
                .count(),
            6
        );
        assert!(
            !out.contains("canaryd_rollout_canary_weight{"),
            "no weights recorded"
        );
    }
}
