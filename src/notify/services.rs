//! Sending one rendered notification through one configured service, as the notifications engine's services
//! send it: `webhook` (`pkg/services/webhook.go`: the service's URL, headers and basic auth; the template's
//! `webhook.<service>` method, path and body, else a GET with the message; retried on a connection error, a
//! 429 or a 5xx with exponential backoff between `retryWaitMin` and `retryWaitMax`, `retryMax` times),
//! `slack` (`slack.rs`), `teams` (a MessageCard to the recipient's incoming webhook from `recipientUrls`) and `email`
//! (SMTP, `email.rs`). Any other
//! service type is an error naming it. Errors may hold secrets: the caller scrubs them.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{email, slack, webhook};
use crate::engine::notify::config::Service;
use crate::engine::notify::subscriptions::Destination;

/// How long one HTTP request to a service may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP client every service shares.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .unwrap_or_default()
}

/// Sends `notification` to `destination` through `service`.
pub async fn send(
    http: &reqwest::Client,
    service: &Service,
    notification: &Map<String, Value>,
    destination: &Destination,
) -> Result<(), String> {
    match service.kind.as_str() {
        "webhook" => {
            webhook::send(http, &service.options, notification, &destination.service).await
        }
        "slack" => slack::send(http, &service.options, notification, &destination.recipient).await,
        "teams" => teams(http, &service.options, notification, &destination.recipient).await,
        "email" => email::send(&service.options, notification, &destination.recipient).await,
        other => Err(format!(
            "service type '{other}' is not supported by canaryd (webhook, slack, teams and email are)"
        )),
    }
}

pub(super) fn options<T: serde::de::DeserializeOwned>(
    kind: &str,
    value: &Value,
) -> Result<T, String> {
    serde_json::from_value(value.clone()).map_err(|e| format!("{kind} service options: {e}"))
}

pub(super) fn field<'a>(notification: &'a Map<String, Value>, path: &[&str]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter()
        .try_fold(notification.get(*first)?, |v, k| v.get(k))
}

pub(super) fn text(notification: &Map<String, Value>, path: &[&str]) -> String {
    field(notification, path)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A JSON string field of a template (`slack.attachments`, `slack.blocks`) as the JSON it holds.
pub(super) fn embedded_json(
    notification: &Map<String, Value>,
    path: &[&str],
) -> Result<Option<Value>, String> {
    match field(notification, path) {
        Some(Value::String(s)) if !s.trim().is_empty() => serde_json::from_str(s)
            .map(Some)
            .map_err(|e| format!("template field `{}` is not JSON: {e}", path.join("."))),
        _ => Ok(None),
    }
}

#[derive(Deserialize)]
struct TeamsOptions {
    #[serde(default, rename = "recipientUrls")]
    recipient_urls: std::collections::BTreeMap<String, String>,
}

async fn teams(
    http: &reqwest::Client,
    options: &Value,
    notification: &Map<String, Value>,
    recipient: &str,
) -> Result<(), String> {
    let opts: TeamsOptions = self::options("teams", options)?;
    let Some(url) = opts.recipient_urls.get(recipient) else {
        return Err(format!(
            "teams: no webhook configured for recipient '{recipient}' (recipientUrls)"
        ));
    };
    let template = text(notification, &["teams", "template"]);
    let body = if template.is_empty() {
        teams_card(notification)?.to_string()
    } else {
        template
    };
    let answer = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("teams: {}", e.without_url()))?;
    let status = answer.status();
    let said = answer.text().await.unwrap_or_default();
    if said != "1" {
        return Err(format!(
            "teams: the incoming webhook answered {status}: {said}"
        ));
    }
    Ok(())
}

/// The MessageCard of `teamsNotificationToMessage`: the message as its text unless `teams.text` says
/// otherwise; `facts` become a section of their own after `sections`.
fn teams_card(notification: &Map<String, Value>) -> Result<Value, String> {
    let mut card = json!({
        "@type": "MessageCard",
        "@context": "https://schema.org/extensions",
        "text": text(notification, &["message"]),
    });
    for key in ["title", "summary", "text", "themeColor"] {
        let value = text(notification, &["teams", key]);
        if !value.is_empty() {
            card[key] = json!(value);
        }
    }
    let mut sections = match embedded_json(notification, &["teams", "sections"])? {
        Some(Value::Array(sections)) => sections,
        Some(other) => vec![other],
        None => Vec::new(),
    };
    if let Some(facts) = embedded_json(notification, &["teams", "facts"])? {
        sections.push(json!({"facts": facts}));
    }
    if !sections.is_empty() {
        card["sections"] = Value::Array(sections);
    }
    if let Some(actions) = embedded_json(notification, &["teams", "potentialAction"])? {
        card["potentialAction"] = actions;
    }
    Ok(card)
}
