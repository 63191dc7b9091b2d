//! The notification configuration as Argo Rollouts reads it (the notifications engine's `ParseConfig`): the
//! keys of `argo-rollouts-notification-configmap` (`service.<type>[.<name>]`, `template.<name>`,
//! `trigger.<name>`, `defaultTriggers`, `defaultTriggers.<service>`, `subscriptions`, `context`) with `$key`
//! references replaced from `argo-rollouts-notification-secret`. Pure: it is handed the keys' text and a YAML
//! reader; a key that cannot be read is an error naming it, and the other keys still apply.

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::condition::Condition;

/// The ConfigMap Argo Rollouts reads its notification configuration from.
pub const CONFIG_MAP: &str = "argo-rollouts-notification-configmap";
/// The Secret its `$key` references read from.
pub const SECRET: &str = "argo-rollouts-notification-secret";

/// A key of the ConfigMap that cannot be read; the message never holds a secret's value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{CONFIG_MAP} key `{key}`: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

/// One configured service: its type (`webhook`, `slack`, ...) and its options, secrets filled in. Its
/// `Debug` shows no option, since they hold secrets.
#[derive(Clone, PartialEq)]
pub struct Service {
    pub kind: String,
    pub options: Value,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Service({})", self.kind)
    }
}

/// One condition of a trigger (`triggers.Condition`): the templates it sends when `when` holds (always,
/// without one).
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerCondition {
    pub when: Option<Condition>,
    pub send: Vec<String>,
    /// Read and kept; Argo Rollouts sends from its Event recorder, which never consults it (see
    /// docs/notifications.md), and neither does canaryd.
    pub once_per: Option<String>,
}

/// A subscription of the `subscriptions` key: recipients (`service:recipient`) of the triggers named (the
/// default triggers when none) for objects whose labels match the selector.
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalSubscription {
    pub recipients: Vec<String>,
    pub triggers: Vec<String>,
    pub selector: super::selector::Selector,
}

/// Everything the ConfigMap and Secret configure.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    pub services: BTreeMap<String, Service>,
    /// Each template as written: every string in it is a Go template.
    pub templates: BTreeMap<String, Value>,
    pub triggers: BTreeMap<String, Vec<TriggerCondition>>,
    pub default_triggers: Vec<String>,
    pub service_default_triggers: BTreeMap<String, Vec<String>>,
    pub subscriptions: Vec<GlobalSubscription>,
    pub context: BTreeMap<String, String>,
    /// The Secret's values, so whatever shows a service's error can hide them.
    pub secrets: SecretValues,
}

/// The Secret's values; their `Debug` shows only how many there are.
#[derive(Clone, Default, PartialEq)]
pub struct SecretValues(pub Vec<String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValues({})", self.0.len())
    }
}

/// Reads one key's YAML into JSON, or says why it cannot.
pub type YamlReader<'a> = &'a dyn Fn(&str) -> Result<Value, String>;

/// Fields the notifications engine knows but does not use here (`description`) are ignored, as its YAML
/// reader ignores unknown fields.
#[derive(Deserialize)]
struct RawCondition {
    #[serde(default)]
    when: String,
    #[serde(default)]
    send: Vec<String>,
    #[serde(default, rename = "oncePer")]
    once_per: Option<String>,
}

#[derive(Deserialize)]
struct RawSubscription {
    #[serde(default)]
    recipients: Vec<String>,
    #[serde(default)]
    triggers: Vec<String>,
    #[serde(default)]
    selector: String,
}

impl Config {
    /// The configuration in `data` (the ConfigMap's keys) with `secret`'s values for `$key` references. A key
    /// that cannot be read is left out and reported; unknown keys are ignored, as Argo ignores them.
    pub fn parse(
        data: &BTreeMap<String, String>,
        secret: &BTreeMap<String, String>,
        yaml: YamlReader<'_>,
    ) -> (Config, Vec<ConfigError>) {
        let mut config = Config {
            secrets: SecretValues(secret.values().filter(|v| !v.is_empty()).cloned().collect()),
            ..Config::default()
        };
        let mut errors = Vec::new();
        for (key, text) in data {
            if let Err(message) = config.read_key(key, text, secret, yaml) {
                let message = crate::scrub::text(message, &config.secrets.0);
                errors.push(ConfigError {
                    key: key.clone(),
                    message,
                });
            }
        }
        (config, errors)
    }

    fn read_key(
        &mut self,
        key: &str,
        text: &str,
        secret: &BTreeMap<String, String>,
        yaml: YamlReader<'_>,
    ) -> Result<(), String> {
        if let Some(name) = key.strip_prefix("template.") {
            let template = yaml(text)?;
            if !template.is_object() {
                return Err("a template is a mapping (message, slack, webhook, ...)".to_string());
            }
            self.templates.insert(name.to_string(), template);
        } else if let Some(rest) = key.strip_prefix("service.") {
            let (kind, name) = match rest.split('.').collect::<Vec<_>>()[..] {
                [kind] => (kind, kind),
                [kind, name] => (kind, name),
                _ => return Err("expected `service.<type>` or `service.<type>.<name>`".to_string()),
            };
            let mut options = yaml(text)?;
            fill_secrets(&mut options, secret);
            let kind = kind.to_string();
            self.services
                .insert(name.to_string(), Service { kind, options });
        } else if let Some(name) = key.strip_prefix("trigger.") {
            let raw: Vec<RawCondition> = decode(yaml(text)?)?;
            let conditions = raw
                .into_iter()
                .map(|c| {
                    let when = match c.when.trim() {
                        "" => None,
                        when => Some(
                            Condition::compile_environment(when, super::TRIGGER_VARIABLES)
                                .map_err(|e| format!("`when: {when}`: {e}"))?,
                        ),
                    };
                    Ok(TriggerCondition {
                        when,
                        send: c.send,
                        once_per: c.once_per.filter(|o| !o.is_empty()),
                    })
                })
                .collect::<Result<_, String>>()?;
            self.triggers.insert(name.to_string(), conditions);
        } else if key == "defaultTriggers" {
            self.default_triggers = decode(yaml(text)?)?;
        } else if let Some(service) = key.strip_prefix("defaultTriggers.") {
            let triggers = decode(yaml(text)?)?;
            self.service_default_triggers
                .insert(service.to_string(), triggers);
        } else if key == "subscriptions" {
            let raw: Vec<RawSubscription> = decode(yaml(text)?)?;
            self.subscriptions = raw
                .into_iter()
                .map(|s| {
                    Ok(GlobalSubscription {
                        selector: super::selector::Selector::parse(&s.selector)?,
                        recipients: s.recipients,
                        triggers: s.triggers,
                    })
                })
                .collect::<Result<_, String>>()?;
        } else if key == "context" {
            self.context = decode(yaml(text)?)?;
        }
        Ok(())
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| match e.path().to_string().as_str() {
        "." => e.inner().to_string(),
        path => format!("{path}: {}", e.inner()),
    })
}

/// Replaces every `$key` in the strings of `options` with the Secret's value for `key`; a reference to a key
/// the Secret lacks is left as written (`replaceStringSecret`).
fn fill_secrets(options: &mut Value, secret: &BTreeMap<String, String>) {
    static REFERENCE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    let Some(reference) = REFERENCE
        .get_or_init(|| Regex::new(r"\$[\w-]+").ok())
        .as_ref()
    else {
        return;
    };
    match options {
        Value::String(s) if s.contains('$') => {
            let filled = reference.replace_all(s, |c: &regex::Captures<'_>| {
                let whole = c.get(0).map_or("", |m| m.as_str());
                secret
                    .get(&whole[1..])
                    .cloned()
                    .unwrap_or_else(|| whole.to_string())
            });
            *s = filled.into_owned();
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill_secrets(v, secret)),
        Value::Object(fields) => fields.values_mut().for_each(|v| fill_secrets(v, secret)),
        _ => {}
    }
}
