//! The `slack` notification service as the notifications engine sends it (`pkg/services/slack.go` and
//! `pkg/util/slack/client.go`): `chat.postMessage` at `apiURL` (Slack's by default) with the `token`, the
//! recipient as the channel, the message as text, the template's `attachments` and `blocks` passed through,
//! `username` and `icon` (the template's, else the service's), no link or media previews with `disableUnfurl`. With a template's `slack.groupingKey` the first message of a channel and key starts a
//! thread the later ones reply in (`notifyBroadcast` also shows a reply in the channel), and its
//! `deliveryPolicy` says what a later one does: `Post` (the default) replies, `Update` edits the first message
//! (`chat.update`) instead, `PostAndUpdate` does both. A rate limit is waited out. As in the notifications engine the threads are kept in
//! the process: a restarted daemon starts new ones.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::services::{embedded_json, field, options, text};

#[derive(Deserialize)]
struct SlackOptions {
    #[serde(default)]
    token: String,
    #[serde(default, rename = "apiURL")]
    api_url: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    icon: String,
    #[serde(default, rename = "disableUnfurl")]
    disable_unfurl: bool,
}

/// The first message of a thread: where it was posted and its timestamp.
#[derive(Clone)]
struct Thread {
    channel: String,
    ts: String,
}

/// How many times a call Slack rate-limits is made before its 429 is the error.
const RATE_LIMITED_TRIES: u32 = 5;

/// The longest `Retry-After` waited, in seconds.
const MAX_RETRY_AFTER_SECS: u64 = 60;

/// The threads started, by recipient and grouping key: the notifications engine's process-wide `slackState`.
static THREADS: Mutex<BTreeMap<(String, String), Thread>> = Mutex::new(BTreeMap::new());

pub async fn send(
    http: &reqwest::Client,
    options_value: &Value,
    notification: &Map<String, Value>,
    channel: &str,
) -> Result<(), String> {
    let opts: SlackOptions = options("slack", options_value)?;
    let base = if opts.api_url.is_empty() {
        "https://slack.com/api/".to_string()
    } else {
        format!("{}/", opts.api_url.trim_end_matches('/'))
    };
    let mut message = json!({"channel": channel, "text": text(notification, &["message"])});
    for (key, path) in [
        ("attachments", ["slack", "attachments"]),
        ("blocks", ["slack", "blocks"]),
    ] {
        if let Some(value) = embedded_json(notification, &path)? {
            message[key] = value;
        }
    }
    // The template's username and icon, else the service's.
    let or_option = |key: &str, option: &str| {
        Some(text(notification, &["slack", key]))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| option.to_string())
    };
    let (username, icon) = (
        or_option("username", &opts.username),
        or_option("icon", &opts.icon),
    );
    if !username.is_empty() {
        message["username"] = json!(username);
    }
    if icon.starts_with("http") {
        message["icon_url"] = json!(icon);
    } else if !icon.is_empty() {
        message["icon_emoji"] = json!(icon);
    }
    if opts.disable_unfurl {
        message["unfurl_links"] = json!(false);
        message["unfurl_media"] = json!(false);
    }
    let slack = Slack {
        http,
        base: &base,
        token: &opts.token,
    };
    let grouping = text(notification, &["slack", "groupingKey"]);
    let key = (channel.to_string(), grouping.clone());
    let threads = || THREADS.lock().unwrap_or_else(PoisonError::into_inner);
    let thread = (!grouping.is_empty())
        .then(|| threads().get(&key).cloned())
        .flatten();
    if let Some(thread) = &thread {
        message["thread_ts"] = json!(thread.ts);
    }
    // Go's DeliveryPolicy: any other word is Post.
    let policy = text(notification, &["slack", "deliveryPolicy"]);
    let (post, update) = match (&thread, policy.as_str()) {
        (None, _) => (true, false),
        (Some(_), "Update") => (false, true),
        (Some(_), "PostAndUpdate") => (true, true),
        (Some(_), _) => (true, false),
    };
    if post {
        let mut posted = message.clone();
        if truthy(field(notification, &["slack", "notifyBroadcast"])) {
            posted["reply_broadcast"] = json!(true);
        }
        let answer = slack.call("chat.postMessage", &posted).await?;
        if thread.is_none() && !grouping.is_empty() {
            let said = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_string);
            if let (Some(channel), Some(ts)) = (said("channel"), said("ts")) {
                threads().insert(key, Thread { channel, ts });
            }
        }
    }
    if let (Some(thread), true) = (&thread, update) {
        message["channel"] = json!(thread.channel);
        message["ts"] = json!(thread.ts);
        message["as_user"] = json!(true);
        slack.call("chat.update", &message).await?;
    }
    Ok(())
}

/// `notifyBroadcast` as Go's JSON reads a bool, rendered (a string) or not.
fn truthy(value: Option<&Value>) -> bool {
    matches!(value, Some(Value::Bool(true))) || value.and_then(Value::as_str) == Some("true")
}

/// Slack's Web API at `base`, with the token.
struct Slack<'a> {
    http: &'a reqwest::Client,
    base: &'a str,
    token: &'a str,
}

impl Slack<'_> {
    /// Calls `method` with `body`; its answer when Slack says `ok`, else an error with Slack's reason. A rate
    /// limit (429) is waited out for its `Retry-After` seconds and tried again, [`RATE_LIMITED_TRIES`] times in
    /// all, where slack-go tries for as long as it is limited.
    async fn call(&self, method: &str, body: &Value) -> Result<Value, String> {
        let mut tries = 1;
        let answer = loop {
            let answer = self
                .http
                .post(format!("{}{method}", self.base))
                .bearer_auth(self.token)
                .json(body)
                .send()
                .await
                .map_err(|e| format!("slack: {}", e.without_url()))?;
            if answer.status() != reqwest::StatusCode::TOO_MANY_REQUESTS
                || tries == RATE_LIMITED_TRIES
            {
                break answer;
            }
            let wait = answer
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(1)
                .min(MAX_RETRY_AFTER_SECS);
            let pause = std::time::Duration::from_secs(wait);
            crate::time::real_sleep_until(crate::time::monotonic() + pause).await;
            tries += 1;
        };
        let status = answer.status();
        let said: Value = answer.json().await.unwrap_or(Value::Null);
        if !status.is_success() || said.get("ok") != Some(&Value::Bool(true)) {
            let error = said
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no error given");
            return Err(format!("slack: {method} answered {status}: {error}"));
        }
        Ok(said)
    }
}
