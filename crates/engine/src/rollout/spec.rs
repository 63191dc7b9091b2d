//! The static checks of a Rollout that canaryd can run: Argo's own spec rules plus the parts canaryd does
//! not run yet, each named by its field. The planner turns the first error into the `InvalidSpec`
//! condition; `canaryd validate` reports them all with file and line. Template-dependent checks (missing
//! templates, args, finite counts) are `analysis`'s; this module sees the Rollout alone.

use super::basic_canary;
use super::steps::pause_seconds;
use crate::api::Rollout;
use crate::api::rollout::{CanaryStep, CanaryStrategy, RolloutAnalysis};
use crate::routing::RoutingError;
use crate::template::{Finding, Severity};

fn error(path: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding {
        severity: Severity::Error,
        path: path.into(),
        message: message.into(),
    }
}

/// The words that every finding of what canaryd's Rollout controller does not run carries (this module's and
/// `routing::routing`'s). Argo Rollouts progresses such a Rollout when canaryd only runs its analyses, so
/// `canaryd validate` reports these as errors only when told canaryd will progress it.
pub const UNSUPPORTED: &str = "not supported by canaryd";

/// Whether `finding` says that canaryd's Rollout controller does not run something ([`UNSUPPORTED`]).
pub fn is_unsupported(finding: &Finding) -> bool {
    finding.message.contains(UNSUPPORTED)
}

/// The one place that says what canaryd does not run. Traffic routing is planned (the desired weight) and
/// applied by the routers (`engine/routing` builds the objects; `rehearse` and `demo` show them).
fn unsupported(canary: &CanaryStrategy, out: &mut Vec<Finding>) {
    let path = "spec.strategy.canary";
    if canary.dynamic_stable_scale == Some(true) {
        out.push(error(
            format!("{path}.dynamicStableScale"),
            if canary.traffic_routing.is_some() {
                "not supported by canaryd: with a traffic router the stable ReplicaSet stays at full size"
            } else {
                "Canary dynamicStableScale can only be used with traffic routing"
            },
        ));
    }
    if canary.traffic_routing.is_none() && canary.scale_down_delay_seconds.is_some() {
        out.push(error(
            format!("{path}.scaleDownDelaySeconds"),
            "Canary scaleDownDelaySeconds can only be used with traffic routing",
        ));
    }
    if needs_both_services(canary) {
        for (set, field) in [
            (canary.canary_service.is_some(), "canaryService"),
            (canary.stable_service.is_some(), "stableService"),
        ] {
            if !set {
                out.push(error(
                    format!("{path}.{field}"),
                    "Canary service and Stable service must to be set to use Traffic Routing",
                ));
            }
        }
    }
    for (set, field) in [
        (canary.ping_pong.is_some(), "pingPong"),
        (canary.anti_affinity.is_some(), "antiAffinity"),
        (
            canary.replica_progress_threshold.is_some(),
            "replicaProgressThreshold",
        ),
    ] {
        if set {
            out.push(error(format!("{path}.{field}"), "not supported by canaryd"));
        }
    }
}

/// Argo's requireCanaryStableServices: the routers that split traffic between two Services.
fn needs_both_services(canary: &CanaryStrategy) -> bool {
    let Some(r) = &canary.traffic_routing else {
        return false;
    };
    let ping_pong = canary.ping_pong.is_some();
    let istio_by_host = r
        .istio
        .as_ref()
        .is_some_and(|i| i.destination_rule.is_none());
    ((r.alb.is_some() || istio_by_host) && !ping_pong)
        || r.smi.is_some()
        || r.apisix.is_some()
        || r.ambassador.is_some()
        || r.nginx.is_some()
        || r.app_mesh.is_some()
        || r.traefik.is_some()
}

/// Every problem canaryd finds in the Rollout on its own, in field order.
pub fn check(rollout: &Rollout) -> Vec<Finding> {
    let mut out = Vec::new();
    let spec = &rollout.spec;
    if spec.workload_ref.is_some() {
        out.push(error(
            "spec.workloadRef",
            "not supported by canaryd: write the pod template in spec.template",
        ));
    }
    let selector_labels = spec.selector.as_ref().and_then(|s| s.match_labels.as_ref());
    let has_expressions = spec
        .selector
        .as_ref()
        .is_some_and(|s| s.match_expressions.as_ref().is_some_and(|e| !e.is_empty()));
    if spec.selector.is_none() && spec.workload_ref.is_none() {
        // Argo's ValidateRolloutSpec: field.Required.
        out.push(error(
            "spec.selector",
            "Required value: Rollout has missing field '.spec.selector'",
        ));
    } else if selector_labels.is_none_or(|l| l.is_empty())
        && !has_expressions
        && spec.workload_ref.is_none()
    {
        out.push(error(
            "spec.selector",
            "This rollout is selecting all pods. A non-empty selector is required.",
        ));
    }
    match &spec.template {
        None if spec.workload_ref.is_none() => out.push(error(
            "spec.template",
            "Rollout has missing field 'spec.template'",
        )),
        Some(template) => {
            for (key, value) in selector_labels.into_iter().flatten() {
                let label = template
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(key))
                    .and_then(|v| v.as_str());
                if label != Some(value.as_str()) {
                    out.push(error(
                        "spec.selector",
                        format!("`selector` does not match template `labels`: label {key}={value} is missing from spec.template.metadata.labels"),
                    ));
                }
            }
        }
        None => {}
    }
    if spec.replicas.is_some_and(|r| r < 0) {
        out.push(error("spec.replicas", "must be >= 0"));
    }
    if let (Some(deadline), Some(ready)) = (spec.progress_deadline_seconds, spec.min_ready_seconds)
        && deadline <= ready
    {
        out.push(error(
            "spec.progressDeadlineSeconds",
            "progressDeadlineSeconds must be greater than minReadySeconds",
        ));
    }
    let Some(strategy) = &spec.strategy else {
        out.push(error(
            "spec.strategy.canary",
            "required: canaryd runs the canary strategy",
        ));
        return out;
    };
    if strategy.blue_green.is_some() {
        out.push(error(
            "spec.strategy.blueGreen",
            "not supported by canaryd: it runs the canary strategy only",
        ));
    }
    let Some(canary) = &strategy.canary else {
        if strategy.blue_green.is_none() {
            out.push(error(
                "spec.strategy.canary",
                "required: canaryd runs the canary strategy",
            ));
        }
        return out;
    };
    check_canary(canary, spec.replicas.unwrap_or(1), &mut out);
    if let Err(e) = crate::routing::routing(rollout) {
        let (path, message) = match e {
            RoutingError::Config { field, message } => (field, message),
            other => (
                "spec.strategy.canary.trafficRouting".to_string(),
                other.to_string(),
            ),
        };
        out.push(error(path, message));
    }
    out
}

/// The canary strategy's checks: what canaryd does not run, the surge and unavailability bounds, distinct
/// Services, each step and the background analysis.
fn check_canary(canary: &CanaryStrategy, replicas: i32, out: &mut Vec<Finding>) {
    let path = "spec.strategy.canary";
    unsupported(canary, out);
    check_surge(canary, replicas, out);
    if let (Some(c), Some(s)) = (&canary.canary_service, &canary.stable_service)
        && c == s
    {
        out.push(error(
            format!("{path}.stableService"),
            "This rollout uses the same service for the stable and canary services, but two different services are required.",
        ));
    }
    // Argo's ValidateRolloutStrategyCanary: only NGINX and the plugins scale to another total.
    if let Some(routing) = &canary.traffic_routing
        && let Some(max) = routing.max_traffic_weight
        && routing.nginx.is_none()
        && routing.plugins.as_ref().is_none_or(|p| p.is_empty())
    {
        out.push(Finding::invalid(
            format!("{path}.trafficRouting.maxTrafficWeight"),
            &max.to_string(),
            "Canary maxTrafficWeight in traffic routing only supported in Nginx and Plugins",
        ));
    }
    let steps = canary.steps.as_deref().unwrap_or_default();
    // Argo's weightutil.MaxTrafficWeight: a setWeight is out of maxTrafficWeight with a router.
    let max_weight = canary
        .traffic_routing
        .as_ref()
        .and_then(|t| t.max_traffic_weight)
        .unwrap_or(basic_canary::MAX_WEIGHT);
    for (i, step) in steps.iter().enumerate() {
        let at = format!("{path}.steps[{i}]");
        check_step_actions(step, &at, out);
        check_step(step, &at, canary.traffic_routing.is_some(), max_weight, out);
    }
    if let Some(background) = &canary.analysis {
        check_analysis(&background.analysis, &format!("{path}.analysis"), out);
        if let Some(start) = background.starting_step
            && (start < 0 || start as usize > steps.len())
        {
            out.push(error(
                format!("{path}.analysis.startingStep"),
                format!(
                    "StartingStep {start} is outside the steps (0 to {})",
                    steps.len()
                ),
            ));
        }
    }
}

/// maxSurge and maxUnavailable: valid for `replicas`, and not both zero.
fn check_surge(canary: &CanaryStrategy, replicas: i32, out: &mut Vec<Finding>) {
    let path = "spec.strategy.canary";
    match basic_canary::fenceposts(
        canary.max_surge.as_ref(),
        canary.max_unavailable.as_ref(),
        replicas,
    ) {
        Err(e) => out.push(error(path, e)),
        Ok(_) => {
            let zero = |v: &Option<_>| {
                matches!(
                    v,
                    Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0))
                ) || matches!(v, Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s)) if s == "0%")
            };
            if zero(&canary.max_surge) && zero(&canary.max_unavailable) {
                out.push(error(
                    format!("{path}.maxUnavailable"),
                    "MaxSurge and MaxUnavailable both can not be zero",
                ));
            }
        }
    }
}

/// Which actions the step at `at` sets: at most one of the exclusive ones, at least one known one, and none
/// that canaryd does not run yet.
fn check_step_actions(step: &CanaryStep, at: &str, out: &mut Vec<Finding>) {
    // Argo allows one of setWeight, pause, experiment and analysis per step; the others may combine.
    let exclusive: Vec<&str> = [
        (step.set_weight.is_some(), "setWeight"),
        (step.pause.is_some(), "pause"),
        (step.experiment.is_some(), "experiment"),
        (step.analysis.is_some(), "analysis"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect();
    let others: Vec<&str> = [
        (step.set_canary_scale.is_some(), "setCanaryScale"),
        (step.set_header_route.is_some(), "setHeaderRoute"),
        (step.set_mirror_route.is_some(), "setMirrorRoute"),
        (step.plugin.is_some(), "plugin"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect();
    let unknown: Vec<&String> = step.rest.keys().collect();
    if exclusive.len() > 1 {
        out.push(error(
            at,
            format!(
                "Step must have only one action set, found {}",
                exclusive.join(", ")
            ),
        ));
    } else if exclusive.is_empty() && others.is_empty() {
        match unknown.first() {
            Some(key) => out.push(error(format!("{at}.{key}"), format!("unknown step {key:?}"))),
            None => out.push(error(
                at,
                "Step must have one of the following set: experiment, setWeight, setCanaryScale, plugin or pause",
            )),
        }
    }
    for name in exclusive.iter().chain(&others) {
        if matches!(
            *name,
            "experiment" | "setHeaderRoute" | "setMirrorRoute" | "plugin"
        ) {
            out.push(error(
                format!("{at}.{name}"),
                "this step is not supported by canaryd yet",
            ));
        }
    }
}

/// The values of the step at `at`: setCanaryScale (which needs a router, `routed`), setWeight (up to
/// `max_weight`), the pause's duration and the step analysis.
fn check_step(step: &CanaryStep, at: &str, routed: bool, max_weight: i32, out: &mut Vec<Finding>) {
    if let Some(scale) = &step.set_canary_scale {
        if !routed {
            out.push(error(
                format!("{at}.setCanaryScale"),
                "SetCanaryScale requires TrafficRouting to be set",
            ));
        }
        if let Err(e) = super::steps::CanaryScale::read(scale) {
            out.push(error(format!("{at}.setCanaryScale"), e));
        }
    }
    if let Some(w) = step.set_weight
        && !(0..=max_weight).contains(&w)
    {
        out.push(Finding::invalid(
            format!("{at}.setWeight"),
            &w.to_string(),
            format!("SetWeight must be between 0 and {max_weight}"),
        ));
    }
    if let Some(pause) = &step.pause {
        match pause_seconds(pause.duration.as_ref()) {
            Err(e) => out.push(error(format!("{at}.pause.duration"), e)),
            Ok(Some(s)) if s < 0 => out.push(Finding::invalid(
                format!("{at}.pause.duration"),
                &s.to_string(),
                "Pause duration must be >= 0",
            )),
            Ok(_) => {}
        }
    }
    if let Some(analysis) = &step.analysis {
        check_analysis(analysis, &format!("{at}.analysis"), out);
    }
}

fn check_analysis(analysis: &RolloutAnalysis, path: &str, out: &mut Vec<Finding>) {
    let templates = analysis.templates.as_deref().unwrap_or_default();
    if templates.is_empty() {
        out.push(error(
            format!("{path}.templates"),
            "at least one template is required",
        ));
    }
    for (i, t) in templates.iter().enumerate() {
        if t.template_name.as_deref().is_none_or(str::is_empty) {
            out.push(error(
                format!("{path}.templates[{i}].templateName"),
                "required",
            ));
        }
    }
    for (i, arg) in analysis.args.iter().flatten().enumerate() {
        let at = format!("{path}.args[{i}]");
        if arg.name.is_empty() {
            out.push(error(format!("{at}.name"), "required"));
        }
        if let Some(from) = &arg.value_from {
            if let Some(h) = &from.pod_template_hash_value
                && h != "Stable"
                && h != "Latest"
            {
                out.push(error(
                    format!("{at}.valueFrom.podTemplateHashValue"),
                    format!("{h:?} is neither \"Stable\" nor \"Latest\""),
                ));
            }
            if from.pod_template_hash_value.is_none() && from.field_ref.is_none() {
                out.push(error(
                    format!("{at}.valueFrom"),
                    "expected podTemplateHashValue or fieldRef",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout(spec: serde_json::Value) -> Rollout {
        serde_json::from_value(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "web"}, "spec": spec}),
        )
        .unwrap()
    }

    fn paths(r: &Rollout) -> Vec<String> {
        check(r)
            .into_iter()
            .map(|f| format!("{}: {}", f.path, f.message))
            .collect()
    }

    #[test]
    fn a_plain_canary_has_no_findings() {
        let r = rollout(json!({"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}},
            "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {"duration": "1m"}}, {"pause": {}}]}}}));
        assert_eq!(paths(&r), Vec::<String>::new());
    }

    #[test]
    fn unsupported_parts_and_malformed_steps_are_named_by_field() {
        let r = rollout(json!({"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "other"}}},
            "strategy": {"blueGreen": {"activeService": "a"}, "canary": {
                "trafficRouting": {"smi": {}},
                "steps": [{"setWeight": 120}, {"setWeight": 10, "pause": {}}, {"experiment": {}},
                          {"pause": {"duration": "soon"}}, {"setWieght": 5}, {}]}}}));
        let found = paths(&r);
        let has = |p: &str| found.iter().any(|f| f.starts_with(p));
        assert!(
            has("spec.selector: `selector` does not match"),
            "{found:#?}"
        );
        assert!(has("spec.strategy.blueGreen: not supported"), "{found:#?}");
        assert!(
            has("spec.strategy.canary.canaryService: Canary service and Stable service must"),
            "{found:#?}"
        );
        assert!(
            has("spec.strategy.canary.trafficRouting.smi: not supported by canaryd"),
            "{found:#?}"
        );
        assert!(has(
            "spec.strategy.canary.steps[0].setWeight: Invalid value: 120: SetWeight must be between 0 and 100"
        ));
        assert!(has(
            "spec.strategy.canary.steps[1]: Step must have only one action set, found setWeight, pause"
        ));
        assert!(has(
            "spec.strategy.canary.steps[2].experiment: this step is not supported"
        ));
        assert!(has(
            "spec.strategy.canary.steps[3].pause.duration: invalid duration"
        ));
        assert!(has("spec.strategy.canary.steps[4].setWieght: unknown step"));
        assert!(has("spec.strategy.canary.steps[5]: Step must have one of"));
        let unsupported: Vec<String> = check(&r)
            .into_iter()
            .filter(is_unsupported)
            .map(|f| f.path)
            .collect();
        assert_eq!(
            unsupported,
            [
                "spec.strategy.blueGreen",
                "spec.strategy.canary.steps[2].experiment",
                "spec.strategy.canary.trafficRouting.smi",
            ]
        );
    }
}
