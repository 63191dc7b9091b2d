//! Notifications as Argo Rollouts sends them (`utils/record/record.go`): an Event's reason names a trigger
//! ([`trigger_for_reason`]); the object's subscribers to that trigger ([`subscriptions`]) are sent the
//! templates of each of the trigger's conditions whose `when` holds ([`templates_to_send`]), rendered with the
//! object ([`render`]). The configuration they read is [`config`]'s. Pure: the daemon's `notify` module reads
//! the ConfigMap, the Secret and the object, and sends.

pub mod config;
pub mod render;
pub mod selector;
pub mod subscriptions;

use serde_json::Value;

use crate::value::MetricValue;
use config::Config;

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

/// The template lists `trigger` sends for `rollout`: one per condition whose `when` holds or that has none
/// (record.go's `sendNotifications`). A trigger that is not configured sends nothing; a `when` that cannot be
/// evaluated is an error naming the trigger.
pub fn templates_to_send(
    config: &Config,
    trigger: &str,
    rollout: &Value,
) -> Result<Vec<Vec<String>>, String> {
    let Some(conditions) = config.triggers.get(trigger) else {
        return Ok(Vec::new());
    };
    let object = MetricValue::Json(rollout.clone());
    let mut send = Vec::new();
    for condition in conditions {
        let holds = match &condition.when {
            None => true,
            Some(when) => when
                .evaluate(&object)
                .map_err(|e| format!("trigger '{trigger}' `when: {}`: {e}", when.source()))?,
        };
        if holds {
            send.push(condition.send.clone());
        }
    }
    Ok(send)
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
