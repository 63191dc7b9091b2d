//! Reading the canary steps: which step is current, what weight the steps ask for, how long a pause lasts,
//! and how a step is named in Events. Owns the step list's meaning; what the planner does at a step is
//! `plan`'s business.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::basic_canary::MAX_WEIGHT;
use crate::api::duration::parse_duration;
use serde_json::Value;

use crate::api::rollout::{CanaryStep, RolloutStatus};

/// The step list (empty without a canary strategy or steps).
pub fn steps(rollout: &crate::api::Rollout) -> &[CanaryStep] {
    rollout
        .spec
        .canary()
        .and_then(|c| c.steps.as_deref())
        .unwrap_or_default()
}

/// The current step and its index. No steps: `(None, None)`; past the last one: `(None, Some(len))`.
pub fn current(steps: &[CanaryStep], status: &RolloutStatus) -> (Option<usize>, Option<usize>) {
    if steps.is_empty() {
        return (None, None);
    }
    let index = status.current_step_index.unwrap_or(0).max(0) as usize;
    let step = (index < steps.len()).then_some(index);
    (step, Some(index))
}

/// The weight the steps ask for at `index`: the last `setWeight` at or before it (0 when none), all of it
/// past the last step, none when aborted.
pub fn set_weight(steps: &[CanaryStep], index: Option<usize>, aborted: bool) -> i32 {
    if aborted {
        return 0;
    }
    match index {
        Some(i) if i < steps.len() => steps[..=i]
            .iter()
            .rev()
            .find_map(|s| s.set_weight)
            .unwrap_or(0),
        _ => MAX_WEIGHT,
    }
}

/// A pause's length in seconds as Argo reads it: an integer, a string of digits, or a Go duration; `None`
/// for a pause without duration (until promoted) and `Err` for one that does not parse.
pub fn pause_seconds(duration: Option<&IntOrString>) -> Result<Option<i64>, String> {
    match duration {
        None => Ok(None),
        Some(IntOrString::Int(n)) => Ok(Some(i64::from(*n))),
        Some(IntOrString::String(s)) => match s.parse::<i64>() {
            Ok(n) => Ok(Some(n)),
            Err(_) => parse_duration(s)
                .map(|d| Some(d.as_secs() as i64))
                .map_err(|e| e.to_string()),
        },
    }
}

/// The step as Argo names it in `RolloutStepCompleted` ("setWeight: 50", "pause: 3s", "analysis",
/// "setHeaderRoute: <name>").
pub fn describe(step: &CanaryStep) -> String {
    if let Some(w) = step.set_weight {
        return format!("setWeight: {w}");
    }
    if let Some(p) = &step.pause {
        return match &p.duration {
            None => "pause".to_string(),
            Some(IntOrString::Int(n)) => format!("pause: {n}"),
            Some(IntOrString::String(s)) => format!("pause: {s}"),
        };
    }
    if step.experiment.is_some() {
        return "experiment".to_string();
    }
    if step.analysis.is_some() {
        return "analysis".to_string();
    }
    if let Some(scale) = step
        .set_canary_scale
        .as_ref()
        .and_then(|s| CanaryScale::read(s).ok())
    {
        return match (scale.weight, scale.replicas) {
            (Some(w), _) => format!("setCanaryScale{{weight: {w}}}"),
            (None, Some(r)) if !scale.match_traffic_weight => {
                format!("setCanaryScale{{replicas: {r}}}")
            }
            _ => "setCanaryScale{matchTrafficWeight: true}".to_string(),
        };
    }
    let route_name = |route: &Value| {
        route
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    if let Some(route) = &step.set_header_route {
        return format!("setHeaderRoute: {}", route_name(route).unwrap_or_default());
    }
    if let Some(route) = &step.set_mirror_route {
        return format!("setMirrorRoute: {}", route_name(route).unwrap_or_default());
    }
    "invalid".to_string()
}

/// A `setCanaryScale` step: a replica count, a weight, or back to following the traffic weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanaryScale {
    pub replicas: Option<i32>,
    pub weight: Option<i32>,
    pub match_traffic_weight: bool,
}

impl CanaryScale {
    /// Reads the step as Argo's Go struct does: `replicas` wins over `weight`, and a step setting neither
    /// follows the traffic weight, as in Argo.
    pub fn read(value: &Value) -> Result<CanaryScale, String> {
        let int = |key: &str| match value.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| format!("{key}: expected an integer, got {v}")),
        };
        let scale = CanaryScale {
            replicas: int("replicas")?,
            weight: int("weight")?,
            match_traffic_weight: match value.get("matchTrafficWeight") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(v) => return Err(format!("matchTrafficWeight: expected a boolean, got {v}")),
            },
        };
        if scale.replicas.is_some_and(|r| r < 0) {
            return Err("replicas must be >= 0".to_string());
        }
        if scale.weight.is_some_and(|w| !(0..=100).contains(&w)) {
            return Err("weight must be between 0 and 100".to_string());
        }
        Ok(scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::rollout::RolloutPause;

    fn weight(w: i32) -> CanaryStep {
        CanaryStep {
            set_weight: Some(w),
            ..Default::default()
        }
    }

    fn pause(d: Option<IntOrString>) -> CanaryStep {
        CanaryStep {
            pause: Some(RolloutPause { duration: d }),
            ..Default::default()
        }
    }

    #[test]
    fn the_weight_is_the_last_set_weight_so_far_all_at_the_end_and_none_when_aborted() {
        let s = [pause(None), weight(20), pause(None), weight(60)];
        assert_eq!(set_weight(&s, Some(0), false), 0);
        assert_eq!(set_weight(&s, Some(2), false), 20);
        assert_eq!(set_weight(&s, Some(3), false), 60);
        assert_eq!(set_weight(&s, Some(4), false), 100);
        assert_eq!(set_weight(&s, Some(3), true), 0);
    }

    #[test]
    fn pause_durations_read_as_argo_reads_them() {
        let s = |t: &str| Some(IntOrString::String(t.to_string()));
        assert_eq!(pause_seconds(None), Ok(None));
        assert_eq!(pause_seconds(Some(&IntOrString::Int(10))), Ok(Some(10)));
        assert_eq!(pause_seconds(s("10").as_ref()), Ok(Some(10)));
        assert_eq!(pause_seconds(s("1h").as_ref()), Ok(Some(3600)));
        assert!(pause_seconds(s("soon").as_ref()).is_err());
        assert_eq!(describe(&pause(s("3s"))), "pause: 3s");
        assert_eq!(describe(&weight(50)), "setWeight: 50");
    }

    /// Argo's CanaryStepString names a route step by its route.
    #[test]
    fn route_steps_are_named_by_their_route() {
        let header = CanaryStep {
            set_header_route: Some(serde_json::json!({"name": "set-header-1"})),
            ..Default::default()
        };
        let mirror = CanaryStep {
            set_mirror_route: Some(serde_json::json!({"name": "mirror-route", "percentage": 35})),
            ..Default::default()
        };
        assert_eq!(describe(&header), "setHeaderRoute: set-header-1");
        assert_eq!(describe(&mirror), "setMirrorRoute: mirror-route");
    }
}
