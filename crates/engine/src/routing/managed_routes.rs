//! Header and mirror routes (`setHeaderRoute`, `setMirrorRoute` steps and `trafficRouting.managedRoutes`), as
//! Argo Rollouts runs them: reading the steps and the list, Argo's checks of them (ValidateRolloutStrategyCanary,
//! with its messages), and what one reconcile does to them ([`ManagedRouteChange`], Argo's
//! reconcileTrafficRouting: every route removed once promoted, aborted or without an available canary; the
//! current step's route set, or removed when it has no `match`). What a router object then says is each
//! router's (`istio_managed`).

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::managed_routes::{ManagedRoute, SetHeaderRoute, SetMirrorRoute, StringMatch};
use crate::api::rollout::CanaryStep;
use crate::api::traffic_routing::TrafficRouting;
use crate::template::Finding;

/// A step's header or mirror route, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepRoute {
    Header(SetHeaderRoute),
    Mirror(SetMirrorRoute),
}

impl StepRoute {
    pub fn name(&self) -> &str {
        match self {
            StepRoute::Header(h) => &h.name,
            StepRoute::Mirror(m) => &m.name,
        }
    }
}

/// What one reconcile does to the managed routes, in Argo's order: remove the routes named in `remove`, then
/// set (or, without `match`, remove) `set`. Nothing for a Rollout without them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedRouteChange {
    /// Argo's RemoveManagedRoutes: every route a step names and every one in `managedRoutes`.
    pub remove: Vec<String>,
    /// Argo's SetHeaderRoute / SetMirrorRoute of the current step.
    pub set: Option<StepRoute>,
}

impl ManagedRouteChange {
    /// Whether anything is to be removed or set: not in any plan but a managed route step's, whose builders
    /// then copy no routes to compare (most of a VirtualService's build at 10,000 Rollouts, by perf).
    pub fn changes(&self) -> bool {
        !self.remove.is_empty() || self.set.is_some()
    }
}

/// No change: the routes stay as the router objects have them.
pub static NO_CHANGE: ManagedRouteChange = ManagedRouteChange {
    remove: Vec::new(),
    set: None,
};

fn read<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| match e.path().to_string().as_str() {
        "." => e.inner().to_string(),
        path => format!("{path}: {}", e.inner()),
    })
}

/// The header or mirror route `step` sets, if any; an error when it does not read.
pub fn step_route(step: &CanaryStep) -> Result<Option<StepRoute>, String> {
    if let Some(h) = &step.set_header_route {
        return read(h).map(|h| Some(StepRoute::Header(h)));
    }
    match &step.set_mirror_route {
        Some(m) => read(m).map(|m| Some(StepRoute::Mirror(m))),
        None => Ok(None),
    }
}

/// The names in `trafficRouting.managedRoutes`, in order; empty when unset or unreadable (the planner
/// reports the latter as InvalidSpec through `routing::routing`).
pub fn names(routing: Option<&TrafficRouting>) -> Vec<String> {
    read_list(routing).unwrap_or_default()
}

/// `trafficRouting.managedRoutes` read: `Ok(None)` when unset.
pub fn read_list(routing: Option<&TrafficRouting>) -> Result<Vec<String>, String> {
    match routing.and_then(|r| r.managed_routes.as_ref()) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(list) => {
            read::<Vec<ManagedRoute>>(list).map(|l| l.into_iter().map(|r| r.name).collect())
        }
    }
}

/// Argo's reconcileTrafficRouting for the managed routes: `remove_all` when the Rollout is promoted, aborted,
/// fully promoted by a person or its canary has no available pod (each removes them); the step at `step`
/// sets its route when the Rollout is past its first revision (`revision`).
pub fn change(
    steps: &[CanaryStep],
    routing: Option<&TrafficRouting>,
    step: Option<usize>,
    remove_all: bool,
    revision: i64,
) -> ManagedRouteChange {
    let mut out = ManagedRouteChange::default();
    if remove_all {
        // Argo removes the routes the steps name, then those managedRoutes lists.
        for name in steps
            .iter()
            .filter_map(|s| step_route(s).ok().flatten())
            .map(|r| r.name().to_string())
            .chain(names(routing))
        {
            if !out.remove.contains(&name) {
                out.remove.push(name);
            }
        }
    }
    if revision > 1
        && let Some(s) = step.and_then(|i| steps.get(i))
    {
        out.set = step_route(s).ok().flatten();
    }
    out
}

const HEADER_ROUTERS: &str =
    "SetHeaderRoute requires TrafficRouting, supports Istio and ALB and Apisix";
const MIRROR_ROUTERS: &str = "SetMirrorRoute requires TrafficRouting, supports Istio and Plugins";
const MULTIPLE_VALUES: &str =
    "StringMatch match value must have exactly one of the following: exact, regex, prefix";
const MISSED_VALUE: &str =
    "StringMatch value missed, match value must have one of the following: exact, regex, prefix";
const ALB_VALUE: &str = "SetHeaderRoute match value invalid. ALB supports 'exact' value only";
const NOT_MANAGED: &str =
    "Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes";

/// A value as apimachinery prints a `field.Invalid` struct value: its JSON, `null` for none.
fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// Argo's hasMultipleMatchValues: exactly one of exact, regex, prefix.
fn check_match(value: Option<&StringMatch>, at: &str, out: &mut Vec<Finding>) {
    let Some(m) = value else {
        out.push(Finding::invalid(at, "null", MISSED_VALUE));
        return;
    };
    let set = [&m.exact, &m.regex, &m.prefix]
        .iter()
        .filter(|s| !s.is_empty())
        .count();
    match set {
        0 => out.push(Finding::invalid(at, &json(m), MISSED_VALUE)),
        1 => {}
        _ => out.push(Finding::invalid(at, &json(m), MULTIPLE_VALUES)),
    }
}

/// Argo's hasALBInvalidValues: ALB matches a header's exact value only.
fn check_alb_match(value: Option<&StringMatch>, at: &str, out: &mut Vec<Finding>) {
    match value {
        None => out.push(Finding::invalid(at, "null", MISSED_VALUE)),
        Some(m) if m.exact.is_empty() || !m.regex.is_empty() || !m.prefix.is_empty() => {
            out.push(Finding::invalid(at, &json(m), ALB_VALUE));
        }
        Some(_) => {}
    }
}

/// Argo's checks of the step `i`'s header or mirror route (`at`: Argo's path of the step), in its order:
/// a router that supports it, each match's value, `managedRoutes` set and naming the route. A step that
/// does not read is reported as the API server would refuse it.
pub fn check_step(
    step: &CanaryStep,
    at: &str,
    routing: Option<&TrafficRouting>,
    out: &mut Vec<Finding>,
) {
    let route = match step_route(step) {
        Ok(Some(route)) => route,
        Ok(None) => return,
        Err(e) => {
            let key = if step.set_header_route.is_some() {
                "setHeaderRoute"
            } else {
                "setMirrorRoute"
            };
            out.push(Finding::error(format!("{at}.{key}"), e));
            return;
        }
    };
    let plugins = routing.is_some_and(|r| r.plugins.as_ref().is_some_and(|p| !p.is_empty()));
    let istio = routing.is_some_and(|r| r.istio.is_some());
    let key = match &route {
        StepRoute::Header(h) => {
            let alb = routing.is_some_and(|r| r.alb.is_some());
            let apisix = routing.is_some_and(|r| r.apisix.is_some());
            if !(istio || alb || apisix || plugins) {
                out.push(Finding::invalid(
                    format!("{at}.setHeaderRoute"),
                    &json(h),
                    HEADER_ROUTERS,
                ));
            } else {
                for (j, m) in h.matches.iter().flatten().enumerate() {
                    let field = format!("{at}.setHeaderRoute.match[{j}]");
                    if alb {
                        check_alb_match(m.header_value.as_ref(), &field, out);
                    } else {
                        check_match(m.header_value.as_ref(), &field, out);
                    }
                }
            }
            "setHeaderRoute"
        }
        StepRoute::Mirror(m) => {
            if !(istio || plugins) {
                out.push(Finding::invalid(
                    format!("{at}.setMirrorRoute"),
                    &json(m),
                    MIRROR_ROUTERS,
                ));
            }
            for (j, rm) in m.matches.iter().flatten().enumerate() {
                let field = format!("{at}.setMirrorRoute.match[{j}]");
                // Argo checks the method twice; canaryd reports it once.
                for value in [&rm.method, &rm.path].into_iter().flatten() {
                    check_match(Some(value), &field, out);
                }
            }
            "setMirrorRoute"
        }
    };
    let Some(routing) = routing else {
        return;
    };
    if routing.managed_routes.is_none() {
        out.push(Finding::required(
            "spec.strategy.trafficRouting.managedRoutes",
            "Rollout has missing field 'spec.strategy.canary.trafficRouting.managedRoutes'",
        ));
    } else if !names(Some(routing)).iter().any(|n| n == route.name()) {
        out.push(Finding::invalid(
            format!("{at}.{key}"),
            &format!("{:?}", route.name()),
            NOT_MANAGED,
        ));
    }
}
