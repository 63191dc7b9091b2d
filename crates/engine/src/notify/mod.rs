//! Notifications as Argo Rollouts sends them (`utils/record/record.go`): an Event's reason names a trigger
//! ([`trigger_for_reason`]); the object's subscribers to that trigger ([`subscriptions`]) are sent the
//! templates of each of the trigger's conditions whose `when` holds ([`templates_to_send`]), rendered with the
//! object ([`render`]). The configuration they read is [`config`]'s. Pure: the daemon's `notify` module reads
//! the ConfigMap, the Secret and the object, and sends.

pub mod config;
pub mod render;
pub mod selector;
pub mod subscriptions;

use serde_json::{Value, json};

use crate::value::MetricValue;
use config::Config;

/// The variables a trigger's `when` reads (record.go's `InitGetVars`): the object, and the AnalysisRuns of
/// its current revision ([`analysis_runs_of`]).
pub const TRIGGER_VARIABLES: &[&str] = &["rollout", "analysisRuns"];

/// The label that ties an AnalysisRun to the pods of a Rollout's revision.
const POD_TEMPLATE_HASH: &str = "rollouts-pod-template-hash";

/// The annotation holding a Rollout's and its AnalysisRuns' revision.
const REVISION: &str = "rollout.argoproj.io/revision";

/// The label selector of the AnalysisRuns [`analysis_runs_of`] chooses from, listed in the object's
/// namespace (record.go's `getAnalysisRunsFilterWithLabels`: the pod-template hash of the current pods).
pub fn analysis_run_selector(rollout: &Value) -> String {
    let hash = rollout["status"]["currentPodHash"].as_str().unwrap_or("");
    format!("{POD_TEMPLATE_HASH}={hash}")
}

/// `analysisRuns` as a trigger sees them (record.go's `getAnalysisRunsFilterWithLabels`): of the runs
/// listed by [`analysis_run_selector`], those of the object's revision, newest first; nil when none was
/// listed, an empty array when none is of the revision.
pub fn analysis_runs_of(rollout: &Value, listed: Vec<Value>) -> Value {
    if listed.is_empty() {
        return Value::Null;
    }
    let revision = |o: &Value| {
        o["metadata"]["annotations"][REVISION]
            .as_str()
            .map(str::to_owned)
    };
    let current = revision(rollout);
    let created = |o: &Value| {
        o["metadata"]["creationTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    };
    let mut runs: Vec<Value> = listed
        .into_iter()
        .filter(|run| revision(run) == current)
        .collect();
    runs.sort_by_key(|run| std::cmp::Reverse(created(run)));
    Value::Array(runs)
}

/// The trigger an Event's reason fires: `RolloutAborted` → `on-rollout-aborted` (`translateReasonToTrigger`:
/// a dash before each capital that starts a word, and before a capital after a lower-case letter or digit).
pub fn trigger_for_reason(reason: &str) -> String {
    let chars: Vec<char> = reason.chars().collect();
    let mut out = String::from("on-");
    for (i, &c) in chars.iter().enumerate() {
        let previous = i.checked_sub(1).and_then(|p| chars.get(p));
        let next = chars.get(i + 1);
        let starts_word = c.is_ascii_uppercase() && next.is_some_and(char::is_ascii_lowercase);
        let after_lower = c.is_ascii_uppercase()
            && previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit());
        if i > 0 && (starts_word || after_lower) && !out.ends_with('-') {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Whether each of `trigger`'s conditions fires for `rollout` at `now`, its `analysis_runs` as
/// [`analysis_runs_of`] chose them (the notifications engine's `RunTrigger`): a condition fires when its
/// `when` holds or it has none (record.go sends a condition without `when`). `None`: the trigger is not
/// configured; an error: a `when` that cannot be evaluated, naming the trigger.
pub fn run_trigger<'c>(
    config: &'c Config,
    trigger: &str,
    rollout: &Value,
    analysis_runs: &Value,
    now: jiff::Timestamp,
) -> Result<Option<Vec<(&'c config::TriggerCondition, bool)>>, String> {
    let Some(conditions) = config.triggers.get(trigger) else {
        return Ok(None);
    };
    let variables = MetricValue::Json(json!({"rollout": rollout, "analysisRuns": analysis_runs}));
    let mut results = Vec::new();
    for condition in conditions {
        let fires = match &condition.when {
            None => true,
            Some(when) => when
                .evaluate_at(&variables, now)
                .map_err(|e| format!("trigger '{trigger}' `when: {}`: {e}", when.source()))?,
        };
        results.push((condition, fires));
    }
    Ok(Some(results))
}

/// The template lists `trigger` sends for `rollout` (record.go's `sendNotifications`): those of the
/// conditions [`run_trigger`] fires; nothing for a trigger that is not configured.
pub fn templates_to_send(
    config: &Config,
    trigger: &str,
    rollout: &Value,
    analysis_runs: &Value,
    now: jiff::Timestamp,
) -> Result<Vec<Vec<String>>, String> {
    let results = run_trigger(config, trigger, rollout, analysis_runs, now)?.unwrap_or_default();
    Ok(results
        .into_iter()
        .filter(|(_, fires)| *fires)
        .map(|(condition, _)| condition.send.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_reasons_name_triggers_as_record_go_translates_them() {
        for (reason, trigger) in [
            ("RolloutAborted", "on-rollout-aborted"),
            ("AnalysisRunFailed", "on-analysis-run-failed"),
            ("RolloutStepCompleted", "on-rollout-step-completed"),
            ("ScalingReplicaSet", "on-scaling-replica-set"),
            ("RolloutAddedToInformer", "on-rollout-added-to-informer"),
            ("V2Ready", "on-v2-ready"),
            ("ABCReason", "on-abc-reason"),
        ] {
            assert_eq!(trigger_for_reason(reason), trigger, "{reason}");
        }
    }
}
