//! The static checks of a Rollout that canaryd can run: Argo's own spec rules (`ValidateRollout`, in its order
//! and with its `field.Error` text: `<path>: Invalid value: <value>: <detail>`, `Required value`, ...) plus the
//! parts canaryd does not run, each named by its field. The planner turns the first error into the
//! `InvalidSpec` condition; `canaryd validate` reports them all with file and line. Template-dependent checks
//! (missing templates, args, finite counts) are `analysis`'s; this module sees the Rollout alone.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::steps::pause_seconds;
use super::{basic_canary, pod_template};
use crate::api::Rollout;
use crate::api::rollout::{
    AntiAffinity, BlueGreenStrategy, CanaryStep, CanaryStrategy, RolloutAnalysis,
};
use crate::api::traffic_routing::TrafficRouting;
use crate::routing::{RoutingError, managed_routes};
use crate::template::Finding;

/// The words that every finding of what canaryd's Rollout controller does not run carries (this module's and
/// `routing::routing`'s). Argo Rollouts progresses such a Rollout when canaryd only runs its analyses, so
/// `canaryd validate` reports these as errors only when told canaryd will progress it.
pub const UNSUPPORTED: &str = "not supported by canaryd";

/// Whether `finding` says that canaryd's Rollout controller does not run something ([`UNSUPPORTED`]).
pub fn is_unsupported(finding: &Finding) -> bool {
    finding.message.contains(UNSUPPORTED)
}

/// Where canaryd's own findings on the canary strategy are (they name the field where it is written).
const CANARY: &str = "spec.strategy.canary";
/// And those on the blue-green strategy.
const BLUE_GREEN: &str = "spec.strategy.blueGreen";

/// The path Argo reports for the canary strategy's `field`: ValidateRolloutStrategy hands
/// ValidateRolloutStrategyCanary the path `spec.strategy`, so Argo names canary fields one level up
/// (its validation_test expects `spec.strategy.scaleDownDelaySeconds`).
fn argo_canary(field: &str) -> String {
    format!("spec.strategy.{field}")
}

/// Where the field a finding on `rollout` names is written: Argo's `spec.strategy.<field>` ([`argo_canary`];
/// a blue-green field is named one level up too) is `spec.strategy.canary.<field>`, or
/// `spec.strategy.blueGreen.<field>` for a blue-green Rollout, in the object. `canaryd validate` places findings
/// on lines by it.
pub fn written_at<'p>(path: &'p str, rollout: &Rollout) -> Cow<'p, str> {
    let Some(rest) = path.strip_prefix("spec.strategy.") else {
        return Cow::Borrowed(path);
    };
    let first = rest.split(['.', '[']).next().unwrap_or_default();
    if matches!(first, "canary" | "blueGreen") {
        Cow::Borrowed(path)
    } else if rollout.spec.blue_green().is_some() {
        Cow::Owned(format!("{BLUE_GREEN}.{rest}"))
    } else {
        Cow::Owned(format!("{CANARY}.{rest}"))
    }
}

/// Something canaryd's controller does not run, in `field.Forbidden`'s form (Argo has no such check; the
/// words are canaryd's).
fn unsupported(path: impl Into<String>, what: &str) -> Finding {
    let detail = if what.is_empty() {
        UNSUPPORTED.to_string()
    } else {
        format!("{UNSUPPORTED}: {what}")
    };
    Finding::forbidden(path, &detail)
}

/// A value as apimachinery prints a `field.Invalid` value that is neither a number, a bool nor a string:
/// its JSON (`{}`, `{"app":"web"}`, `"25%"`).
fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// A string value as apimachinery prints it (Go's `%q`).
fn quoted(value: &str) -> String {
    format!("{value:?}")
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

/// Every problem canaryd finds in the Rollout on its own, in the order Argo's ValidateRollout finds them,
/// then what canaryd's routers cannot drive.
pub fn check(rollout: &Rollout) -> Vec<Finding> {
    let mut out = Vec::new();
    check_spec(rollout, &mut out);
    let strategy = rollout.spec.strategy.as_ref();
    let blue_green = strategy.and_then(|s| s.blue_green.as_ref());
    // Argo's ValidateRolloutStrategy, which names the strategy `spec.strategy.strategy`.
    match (blue_green, strategy.and_then(|s| s.canary.as_ref())) {
        (None, None) => out.push(Finding::required(
            "spec.strategy.strategy",
            "Rollout has missing field '.spec.strategy.canary or .spec.strategy.blueGreen'",
        )),
        (Some(_), Some(_)) => out.push(Finding::invalid(
            "spec.strategy.strategy",
            &quoted("blueGreen: true canary: true"),
            "Multiple Strategies can not be listed",
        )),
        (Some(blue_green), None) => check_blue_green(rollout, blue_green, &mut out),
        (None, Some(canary)) => {
            check_canary(canary, rollout.spec.replicas.unwrap_or(1), &mut out);
            check_routing(rollout, &mut out);
        }
    }
    out
}

/// Argo's ValidateRolloutSpec before the strategy: replicas, selector, pod template, then the durations
/// (each with Argo's default when absent).
fn check_spec(rollout: &Rollout, out: &mut Vec<Finding>) {
    let spec = &rollout.spec;
    non_negative("spec.replicas", spec.replicas.unwrap_or(1), out);
    if spec.workload_ref.is_some() {
        out.push(unsupported(
            "spec.workloadRef",
            "write the pod template in spec.template",
        ));
    } else {
        check_selector_and_template(rollout, out);
    }
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    non_negative("spec.minReadySeconds", min_ready, out);
    non_negative(
        "spec.revisionHistoryLimit",
        spec.revision_history_limit.unwrap_or(10),
        out,
    );
    let deadline = spec.progress_deadline_seconds.unwrap_or(600);
    non_negative("spec.progressDeadlineSeconds", deadline, out);
    if deadline <= min_ready {
        out.push(Finding::invalid(
            "spec.progressDeadlineSeconds",
            &deadline.to_string(),
            "must be greater than minReadySeconds",
        ));
    }
}

/// apimachinery's ValidateNonnegativeField.
fn non_negative(path: &str, value: i32, out: &mut Vec<Finding>) {
    if value < 0 {
        out.push(Finding::invalid(
            path,
            &value.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

/// Argo's checks of `spec.selector` itself, then the selector and the template as Kubernetes checks them
/// ([`pod_template`]).
fn check_selector_and_template(rollout: &Rollout, out: &mut Vec<Finding>) {
    let spec = &rollout.spec;
    match &spec.selector {
        None => out.push(Finding::required(
            "spec.selector",
            "Rollout has missing field '.spec.selector'",
        )),
        Some(selector)
            if selector.match_labels.as_ref().is_none_or(|l| l.is_empty())
                && selector
                    .match_expressions
                    .as_ref()
                    .is_none_or(|e| e.is_empty()) =>
        {
            // Argo's value is the selector, whose empty fields its JSON leaves out.
            out.push(Finding::invalid(
                "spec.selector",
                "{}",
                "empty selector is invalid for deployment",
            ));
        }
        Some(_) => {}
    }
    pod_template::check(spec.selector.as_ref(), spec.template.as_ref(), out);
}

/// Argo's ValidateRolloutStrategyCanary, in its order, with what canaryd does not run where Argo checks it.
fn check_canary(canary: &CanaryStrategy, replicas: i32, out: &mut Vec<Finding>) {
    check_surge(canary, replicas, out);
    if let (Some(c), Some(s)) = (&canary.canary_service, &canary.stable_service)
        && !s.is_empty()
        && c == s
    {
        out.push(Finding::invalid(
            argo_canary("stableService"),
            &quoted(s),
            "This rollout uses the same service for the stable and canary services, but two different services are required.",
        ));
    }
    if canary.ping_pong.is_some() {
        out.push(unsupported(format!("{CANARY}.pingPong"), ""));
    }
    if needs_both_services(canary) {
        for (name, field) in [
            (&canary.stable_service, "stableService"),
            (&canary.canary_service, "canaryService"),
        ] {
            let name = name.as_deref().unwrap_or_default();
            if name.is_empty() {
                out.push(Finding::invalid(
                    argo_canary(field),
                    &quoted(name),
                    "Canary service and Stable service must to be set to use Traffic Routing",
                ));
            }
        }
    }
    check_scale_down(canary, out);
    let steps = canary.steps.as_deref().unwrap_or_default();
    // Argo's weightutil.MaxTrafficWeight: a setWeight is out of maxTrafficWeight with a router.
    let max_weight = canary
        .traffic_routing
        .as_ref()
        .and_then(|t| t.max_traffic_weight)
        .unwrap_or(basic_canary::MAX_WEIGHT);
    for (i, step) in steps.iter().enumerate() {
        check_step_actions(step, i, out);
        check_step(step, i, canary.traffic_routing.as_ref(), max_weight, out);
    }
    check_anti_affinity(canary.anti_affinity.as_ref(), out);
    if let Some(background) = &canary.analysis {
        check_analysis(&background.analysis, &format!("{CANARY}.analysis"), out);
        if let Some(start) = background.starting_step
            && (start < 0 || start as usize > steps.len())
        {
            // canaryd's own check: Argo starts a background analysis past the steps never.
            out.push(Finding::invalid(
                format!("{CANARY}.analysis.startingStep"),
                &start.to_string(),
                format!(
                    "StartingStep {start} is outside the steps (0 to {})",
                    steps.len()
                ),
            ));
        }
    }
}

/// Argo's ValidateRolloutStrategyBlueGreen (which, like the canary's, names its fields one level up:
/// `spec.strategy.activeService`), then what canaryd does not run and its own checks of the analyses.
fn check_blue_green(rollout: &Rollout, blue_green: &BlueGreenStrategy, out: &mut Vec<Finding>) {
    let preview = blue_green.preview_service.as_deref().unwrap_or_default();
    if blue_green.active_service == preview {
        out.push(Finding::invalid(
            "spec.strategy.activeService",
            &quoted(&blue_green.active_service),
            "This rollout uses the same service for the active and preview services, but two different services are required.",
        ));
    }
    let history = rollout.spec.revision_history_limit.unwrap_or(10);
    if let Some(limit) = blue_green.scale_down_delay_revision_limit
        && history < limit
    {
        out.push(Finding::invalid(
            "spec.strategy.scaleDownDelayRevisionLimit",
            &limit.to_string(),
            "This rollout's revision history limit can not be smaller than the rollout's scale down limit",
        ));
    }
    check_anti_affinity(blue_green.anti_affinity.as_ref(), out);
    for (field, analysis) in [
        ("prePromotionAnalysis", &blue_green.pre_promotion_analysis),
        ("postPromotionAnalysis", &blue_green.post_promotion_analysis),
    ] {
        if let Some(analysis) = analysis {
            check_analysis(analysis, &format!("{BLUE_GREEN}.{field}"), out);
        }
    }
}

/// Argo's ValidateRolloutStrategyAntiAffinity (at `spec.strategy.antiAffinity` for either strategy, as Argo
/// names it): exactly one rule, and the preferred one's weight from 1 to 100.
fn check_anti_affinity(anti_affinity: Option<&AntiAffinity>, out: &mut Vec<Finding>) {
    let Some(anti_affinity) = anti_affinity else {
        return;
    };
    let preferred = &anti_affinity.preferred_during_scheduling_ignored_during_execution;
    let required = &anti_affinity.required_during_scheduling_ignored_during_execution;
    if preferred.is_some() == required.is_some() {
        let value = format!(
            "antiAffinity.PreferredDuringSchedulingIgnoredDuringExecution: {} antiAffinity.RequiredDuringSchedulingIgnoredDuringExecution: {}",
            preferred.is_some(),
            required.is_some()
        );
        out.push(Finding::invalid(
            argo_canary("antiAffinity"),
            &quoted(&value),
            "AntiAffinity must have exactly one strategy listed",
        ));
    }
    if let Some(p) = preferred
        && !(1..=100).contains(&p.weight)
    {
        out.push(Finding::invalid(
            argo_canary("antiAffinity.weight"),
            &p.weight.to_string(),
            "AntiAffinity weight must be between 1-100",
        ));
    }
}

/// Argo's checks of scaleDownDelaySeconds, dynamicStableScale (which canaryd does not run with a router)
/// and maxTrafficWeight (only NGINX and the plugins scale to another total).
fn check_scale_down(canary: &CanaryStrategy, out: &mut Vec<Finding>) {
    let dynamic = canary.dynamic_stable_scale == Some(true);
    let Some(routing) = &canary.traffic_routing else {
        if let Some(delay) = canary.scale_down_delay_seconds {
            out.push(Finding::invalid(
                argo_canary("scaleDownDelaySeconds"),
                &delay.to_string(),
                "Canary scaleDownDelaySeconds can only be used with traffic routing",
            ));
        }
        if dynamic {
            out.push(Finding::invalid(
                argo_canary("dynamicStableScale"),
                "true",
                "Canary dynamicStableScale can only be used with traffic routing",
            ));
        }
        return;
    };
    if dynamic && canary.scale_down_delay_seconds.is_some() {
        out.push(Finding::invalid(
            argo_canary("dynamicStableScale"),
            "true",
            "Canary dynamicStableScale cannot be used with scaleDownDelaySeconds",
        ));
    } else if dynamic {
        out.push(unsupported(
            format!("{CANARY}.dynamicStableScale"),
            "with a traffic router the stable ReplicaSet stays at full size",
        ));
    }
    if let Some(max) = routing.max_traffic_weight
        && routing.nginx.is_none()
        && routing.plugins.as_ref().is_none_or(|p| p.is_empty())
    {
        out.push(Finding::invalid(
            argo_canary("trafficRouting.maxTrafficWeight"),
            &max.to_string(),
            "Canary maxTrafficWeight in traffic routing only supported in Nginx and Plugins",
        ));
    }
}

/// What canaryd's routers cannot drive or find contradictory (`routing::routing`): Argo reads the router
/// configuration only once the spec passed, so this comes last.
fn check_routing(rollout: &Rollout, out: &mut Vec<Finding>) {
    let Err(e) = crate::routing::routing(rollout) else {
        return;
    };
    out.push(match e {
        RoutingError::Config { field, message } if message.contains(UNSUPPORTED) => {
            Finding::forbidden(field, &message)
        }
        RoutingError::Config { field, message } => Finding::error(field, message),
        other => Finding::error(format!("{CANARY}.trafficRouting"), other.to_string()),
    });
}

/// Argo's invalidMaxSurgeMaxUnavailable (reported on maxSurge, with its value), after canaryd's own check
/// that each is a count or a percentage it can use (`basic_canary::fenceposts`).
fn check_surge(canary: &CanaryStrategy, replicas: i32, out: &mut Vec<Finding>) {
    let written = [
        ("maxSurge", &canary.max_surge),
        ("maxUnavailable", &canary.max_unavailable),
    ];
    if let Err(e) = basic_canary::fenceposts(
        canary.max_surge.as_ref(),
        canary.max_unavailable.as_ref(),
        replicas,
    ) {
        let (field, value) = written
            .iter()
            .find(|(field, _)| e.starts_with(field))
            .map_or(("maxSurge", &None), |(f, v)| (*f, *v));
        let detail = e.split_once(": ").map_or(e.as_str(), |(_, d)| d);
        out.push(Finding::invalid(
            format!("{CANARY}.{field}"),
            &json(value),
            detail,
        ));
        return;
    }
    // Argo's getIntOrPercentValue: "0", "0%" and 0 are all zero.
    let zero = |v: &Option<IntOrString>| match v {
        Some(IntOrString::Int(n)) => *n == 0,
        Some(IntOrString::String(s)) => s.trim_end_matches('%').parse() == Ok(0),
        None => false,
    };
    if zero(&canary.max_surge) && zero(&canary.max_unavailable) {
        out.push(Finding::invalid(
            argo_canary("maxSurge"),
            &json(&canary.max_surge),
            "MaxSurge and MaxUnavailable both can not be zero",
        ));
    }
}

/// Argo's message for a step with too many or no actions.
const INVALID_STEP: &str = "Step must have one of the following set: experiment, setWeight, setCanaryScale, plugin or pause";

/// Which actions the step `i` sets: at most one of the exclusive ones (Argo's hasMultipleStepsType), at least
/// one (Argo's check for none, then canaryd's name for a key it does not know), and none that canaryd does
/// not run yet.
fn check_step_actions(step: &CanaryStep, i: usize, out: &mut Vec<Finding>) {
    let at = argo_canary(&format!("steps[{i}]"));
    let (weight, pause) = (step.set_weight.is_some(), step.pause.is_some());
    let (experiment, analysis) = (step.experiment.is_some(), step.analysis.is_some());
    if [weight, pause, experiment, analysis]
        .iter()
        .filter(|s| **s)
        .count()
        > 1
    {
        let value = format!(
            "step.Experiment: {experiment} step.Pause: {pause} step.SetWeight: {weight} step.Analysis: {analysis}"
        );
        out.push(Finding::invalid(&at, &quoted(&value), INVALID_STEP));
    }
    let others = [
        (step.set_canary_scale.is_some(), "setCanaryScale"),
        (step.set_header_route.is_some(), "setHeaderRoute"),
        (step.set_mirror_route.is_some(), "setMirrorRoute"),
        (step.plugin.is_some(), "plugin"),
    ];
    if !(weight || pause || experiment || analysis || others.iter().any(|(set, _)| *set)) {
        // Argo prints whether each action is unset.
        let value = "step.Experiment: true step.Pause: true step.SetWeight: true step.Analysis: true \
                     step.SetCanaryScale: true step.SetHeaderRoute: true step.SetMirrorRoute: true step.Plugin: true";
        out.push(Finding::invalid(&at, &quoted(value), INVALID_STEP));
        if let Some(key) = step.rest.keys().next() {
            // canaryd's own: the API server prunes a key the CRD does not know, so Argo never sees it.
            out.push(Finding::error(
                format!("{CANARY}.steps[{i}].{key}"),
                format!("unknown step {key:?}"),
            ));
        }
    }
    let unrun = [(experiment, "experiment")].into_iter().chain(others);
    let run = ["setCanaryScale", "setHeaderRoute", "setMirrorRoute"];
    for (_, name) in unrun.filter(|(set, name)| *set && !run.contains(name)) {
        out.push(Finding::forbidden(
            format!("{CANARY}.steps[{i}].{name}"),
            "this step is not supported by canaryd yet",
        ));
    }
}

/// The values of the step `i`, in Argo's order: setWeight (up to `max_weight`), the pause's duration,
/// setCanaryScale (which needs a router, `routing`), the header and mirror routes
/// (`managed_routes::check_step`); then canaryd's own checks of the canary scale and the step analysis.
fn check_step(
    step: &CanaryStep,
    i: usize,
    routing: Option<&TrafficRouting>,
    max_weight: i32,
    out: &mut Vec<Finding>,
) {
    let routed = routing.is_some();
    let at = argo_canary(&format!("steps[{i}]"));
    if let Some(w) = step.set_weight
        && !(0..=max_weight).contains(&w)
    {
        out.push(Finding::invalid(
            format!("{at}.setWeight"),
            &w.to_string(),
            format!("SetWeight needs to be between 0 and {max_weight}"),
        ));
    }
    if let Some(pause) = &step.pause {
        // Argo's RolloutPause.DurationSeconds: a duration it cannot read is -1.
        let seconds = pause_seconds(pause.duration.as_ref()).unwrap_or(Some(-1));
        if let Some(s) = seconds.filter(|s| *s < 0) {
            out.push(Finding::invalid(
                format!("{at}.pause.duration"),
                &s.to_string(),
                "Duration needs to be greater than 0",
            ));
        }
    }
    if let Some(scale) = &step.set_canary_scale {
        if !routed {
            out.push(Finding::required(
                argo_canary("trafficRouting"),
                "SetCanaryScale requires TrafficRouting to be set",
            ));
        }
        if let Err(e) = super::steps::CanaryScale::read(scale) {
            out.push(Finding::invalid(
                format!("{CANARY}.steps[{i}].setCanaryScale"),
                &json(scale),
                e,
            ));
        }
    }
    managed_routes::check_step(step, &at, routing, out);
    if let Some(analysis) = &step.analysis {
        check_analysis(analysis, &format!("{CANARY}.steps[{i}].analysis"), out);
    }
}

/// canaryd's own checks of an analysis as written (the CRD's schema's, which Argo leaves to the API server):
/// templates named, args named, and each arg's `valueFrom` one canaryd can resolve.
fn check_analysis(analysis: &RolloutAnalysis, path: &str, out: &mut Vec<Finding>) {
    let templates = analysis.templates.as_deref().unwrap_or_default();
    if templates.is_empty() {
        out.push(Finding::required(
            format!("{path}.templates"),
            "at least one template is required",
        ));
    }
    for (i, t) in templates.iter().enumerate() {
        if t.template_name.as_deref().is_none_or(str::is_empty) {
            out.push(Finding::required(
                format!("{path}.templates[{i}].templateName"),
                "",
            ));
        }
    }
    for (i, arg) in analysis.args.iter().flatten().enumerate() {
        let at = format!("{path}.args[{i}]");
        if arg.name.is_empty() {
            out.push(Finding::required(format!("{at}.name"), ""));
        }
        let Some(from) = &arg.value_from else {
            continue;
        };
        match (&from.pod_template_hash_value, &from.field_ref) {
            (Some(h), _) if h != "Stable" && h != "Latest" => out.push(Finding::error(
                format!("{at}.valueFrom.podTemplateHashValue"),
                format!(
                    "Unsupported value: {}: supported values: \"Stable\", \"Latest\"",
                    quoted(h)
                ),
            )),
            (None, None) => out.push(Finding::required(
                format!("{at}.valueFrom"),
                "expected podTemplateHashValue or fieldRef",
            )),
            _ => {}
        }
    }
}
