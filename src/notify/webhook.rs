//! The `webhook` service (`pkg/services/webhook.go`): a request to the service's `url` (with the template's
//! `webhook.<service>.path` appended) carrying the template's body, else a GET carrying the message; the
//! service's `headers` and `basicAuth` on it. Retried as go-retryablehttp retries it: on a connection error,
//! a 429 or a 5xx other than 501, `retryMax` times (default 3), waiting `retryWaitMin` (default 1s) doubled on
//! each retry up to `retryWaitMax` (default 5s). The waits are real time: they space requests to a server.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Deserialize)]
struct Header {
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize)]
struct BasicAuth {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Options {
    url: String,
    #[serde(default)]
    headers: Vec<Header>,
    #[serde(default)]
    basic_auth: Option<BasicAuth>,
    #[serde(default)]
    retry_wait_min: Option<GoDuration>,
    #[serde(default)]
    retry_wait_max: Option<GoDuration>,
    #[serde(default)]
    retry_max: Option<u32>,
}

/// A Go `time.Duration` as YAML gives it: a number of nanoseconds, or a duration string such as `500ms`.
#[derive(Deserialize)]
#[serde(untagged)]
enum GoDuration {
    Nanoseconds(u64),
    Text(String),
}

impl GoDuration {
    fn get(&self) -> Result<Duration, String> {
        match self {
            GoDuration::Nanoseconds(n) => Ok(Duration::from_nanos(*n)),
            GoDuration::Text(t) => crate::engine::api::duration::parse_duration(t)
                .map_err(|e| format!("duration `{t}`: {e}")),
        }
    }
}

/// What go-retryablehttp's default policy retries.
fn retried(status: reqwest::StatusCode) -> bool {
    status == reqwest::StatusCode::TOO_MANY_REQUESTS
        || (status.is_server_error() && status != reqwest::StatusCode::NOT_IMPLEMENTED)
}

/// The wait before retry `attempt` (0 for the first): min × 2^attempt, at most max.
fn wait(min: Duration, max: Duration, attempt: u32) -> Duration {
    min.saturating_mul(2u32.saturating_pow(attempt)).min(max)
}

/// Sends `notification` through the webhook service `service` configured with `options`.
pub async fn send(
    http: &reqwest::Client,
    options: &Value,
    notification: &Map<String, Value>,
    service: &str,
) -> Result<(), String> {
    let opts: Options = serde_json::from_value(options.clone())
        .map_err(|e| format!("webhook service options: {e}"))?;
    let zero_is_default = |d: &Option<GoDuration>, default: Duration| -> Result<Duration, String> {
        Ok(match d.as_ref().map(GoDuration::get).transpose()? {
            Some(d) if !d.is_zero() => d,
            _ => default,
        })
    };
    let min = zero_is_default(&opts.retry_wait_min, Duration::from_secs(1))?;
    let max = zero_is_default(&opts.retry_wait_max, Duration::from_secs(5))?;
    let retries = opts.retry_max.filter(|r| *r > 0).unwrap_or(3);
    let overrides = notification.get("webhook").and_then(|w| w.get(service));
    let text = |v: Option<&Value>, key: &str| {
        v.and_then(|v| v.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (method, body, url) = match overrides {
        Some(o) => {
            let method = Some(text(Some(o), "method")).filter(|m| !m.is_empty());
            let path = text(Some(o), "path");
            let url = if path.is_empty() {
                opts.url.clone()
            } else {
                format!(
                    "{}/{}",
                    opts.url.trim_end_matches('/'),
                    path.trim_start_matches('/')
                )
            };
            (
                method.unwrap_or_else(|| "GET".to_string()),
                text(Some(o), "body"),
                url,
            )
        }
        None => (
            "GET".to_string(),
            text(Some(&Value::Object(notification.clone())), "message"),
            opts.url.clone(),
        ),
    };
    let method = reqwest::Method::from_bytes(method.as_bytes())
        .map_err(|_| format!("webhook: `{method}` is not an HTTP method"))?;
    let mut attempt = 0;
    loop {
        let mut request = http.request(method.clone(), &url).body(body.clone());
        for header in &opts.headers {
            request = request.header(&header.name, &header.value);
        }
        if let Some(auth) = &opts.basic_auth {
            request = request.basic_auth(&auth.username, Some(&auth.password));
        }
        let outcome = match request.send().await {
            Ok(answer) if answer.status().is_success() => return Ok(()),
            Ok(answer) => {
                let status = answer.status();
                let said = answer.text().await.unwrap_or_default();
                let error = format!(
                    "request to {method} {url} has failed with error code {status}: {said}"
                );
                if retried(status) {
                    Err(error)
                } else {
                    return Err(error);
                }
            }
            Err(e) => Err(format!(
                "request to {method} {url} failed: {}",
                e.without_url()
            )),
        };
        if attempt >= retries {
            return outcome.map_err(|e| format!("{e} (after {} retries)", retries));
        }
        let pause = wait(min, max, attempt);
        crate::time::real_sleep_until(crate::time::monotonic() + pause).await;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_doubling_from_the_minimum_up_to_the_maximum() {
        let (min, max) = (Duration::from_millis(100), Duration::from_millis(350));
        let waits: Vec<_> = (0..4).map(|a| wait(min, max, a).as_millis()).collect();
        assert_eq!(waits, [100, 200, 350, 350]);
    }

    #[test]
    fn a_429_and_5xx_but_501_are_retried() {
        let retried_codes: Vec<u16> = [200, 400, 404, 429, 500, 501, 502, 503]
            .into_iter()
            .filter(|c| retried(reqwest::StatusCode::from_u16(*c).expect("a status")))
            .collect();
        assert_eq!(retried_codes, [429, 500, 502, 503]);
    }
}
