//! Who is subscribed to a trigger for one object: the ConfigMap's `subscriptions` whose selector matches the
//! object's labels (`Config.GetGlobalDestinations`), then the object's annotations (`subscriptions.Annotations`):
//! `notifications.argoproj.io/subscribe.<trigger>.<service>: a;b`, `…/subscribe.<service>` (the service's
//! default triggers, else the default triggers) and `…/subscriptions` (a YAML list of `trigger` and
//! `destinations`), in Argo's order.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::config::{Config, YamlReader};

const SUBSCRIBE: &str = "notifications.argoproj.io/subscribe.";
const SUBSCRIPTIONS: &str = "notifications.argoproj.io/subscriptions";

/// One recipient at one service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Destination {
    pub service: String,
    pub recipient: String,
}

#[derive(Deserialize)]
struct AnnotatedSubscription {
    #[serde(default)]
    trigger: Vec<String>,
    #[serde(default)]
    destinations: Vec<AnnotatedDestination>,
}

#[derive(Deserialize)]
struct AnnotatedDestination {
    #[serde(default)]
    service: String,
    #[serde(default)]
    recipients: Vec<String>,
}

/// The destinations of `trigger` for an object with these labels and annotations. A malformed
/// `…/subscriptions` annotation is reported in the second value and the rest still apply.
pub fn destinations(
    config: &Config,
    trigger: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    yaml: YamlReader<'_>,
) -> (Vec<Destination>, Vec<String>) {
    let mut found = Vec::new();
    for subscription in &config.subscriptions {
        let triggers = if subscription.triggers.is_empty() {
            &config.default_triggers
        } else {
            &subscription.triggers
        };
        if triggers.iter().any(|t| t == trigger) && subscription.selector.matches(labels) {
            found.extend(subscription.recipients.iter().map(|r| {
                let (service, recipient) = r.split_once(':').unwrap_or((r, ""));
                Destination {
                    service: service.to_string(),
                    recipient: recipient.to_string(),
                }
            }));
        }
    }
    let mut problems = Vec::new();
    for (key, value) in annotations {
        let entries = if let Some(rest) = key.strip_prefix(SUBSCRIBE) {
            vec![subscribe_annotation(rest, value)]
        } else if key.starts_with(SUBSCRIPTIONS) {
            match subscriptions_annotation(value, yaml) {
                Ok(entries) => entries,
                Err(e) => {
                    problems.push(format!("annotation {key}: {e}"));
                    continue;
                }
            }
        } else {
            continue;
        };
        for (named_trigger, service, recipients) in entries {
            let triggers: &[String] = if let Some(t) = &named_trigger {
                std::slice::from_ref(t)
            } else if let Some(t) = config.service_default_triggers.get(&service) {
                t
            } else {
                &config.default_triggers
            };
            if triggers.iter().any(|t| t == trigger) {
                found.extend(recipients.iter().map(|recipient| Destination {
                    service: service.clone(),
                    recipient: recipient.clone(),
                }));
            }
        }
    }
    (found, problems)
}

/// (trigger, service, recipients) of one annotated subscription.
type Entry = (Option<String>, String, Vec<String>);

/// `subscribe.<trigger>.<service>` or `subscribe.<service>`; recipients split on `;`, an empty value one empty
/// recipient (`Annotations.iterate`).
fn subscribe_annotation(rest: &str, value: &str) -> Entry {
    let parts: Vec<&str> = rest.split('.').collect();
    let (trigger, service) = match parts[..] {
        [service] => (None, service),
        [trigger, service, ..] => (Some(trigger.to_string()), service),
        [] => (None, ""),
    };
    let recipients = if value.is_empty() {
        vec![String::new()]
    } else {
        value
            .split(';')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_string)
            .collect()
    };
    (trigger, service.to_string(), recipients)
}

fn subscriptions_annotation(value: &str, yaml: YamlReader<'_>) -> Result<Vec<Entry>, String> {
    let parsed: Value = yaml(value)?;
    let list: Vec<AnnotatedSubscription> =
        serde_json::from_value(parsed).map_err(|e| e.to_string())?;
    let mut entries = Vec::new();
    for subscription in list {
        let triggers: Vec<Option<String>> = if subscription.trigger.is_empty() {
            vec![None]
        } else {
            subscription.trigger.into_iter().map(Some).collect()
        };
        for trigger in triggers {
            for d in &subscription.destinations {
                entries.push((trigger.clone(), d.service.clone(), d.recipients.clone()));
            }
        }
    }
    Ok(entries)
}
