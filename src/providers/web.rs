//! The web provider (`provider.web`): one HTTP request whose JSON answer, or the part `jsonPath` selects,
//! becomes the metric's `result`. Owns building the request from a template, the exchange and the selection,
//! with Argo's rules: GET by default, a body only with POST/PUT, `jsonBody` sent as `application/json`,
//! non-2xx is an error, a non-JSON answer without `jsonPath` is the text itself. It must not judge.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use reqwest::{Method, Url};
use serde_json::Value;

use super::http::{self, Auth, ClientShape, Headers, HttpClients, Secret};
use super::jsonpath::{JsonPath, JsonPathError};
use super::{ProviderError, ProviderResult};
use crate::api::WebMetric;
use crate::engine::value::MetricValue;

/// Argo's default for `timeoutSeconds`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebMethod {
    Get,
    Post,
    Put,
}

#[derive(Clone, PartialEq)]
pub enum WebBody {
    Text(String),
    Json(Value),
}

/// One resolved web request. `Debug` hides header values, the body, credentials and any value passed to
/// [`WebRequest::with_secret_values`] (also inside the URL).
#[derive(Clone, PartialEq)]
pub struct WebRequest {
    pub method: WebMethod,
    pub url: Url,
    pub headers: Headers,
    pub body: Option<WebBody>,
    pub timeout: Duration,
    pub insecure: bool,
    pub json_path: Option<JsonPath>,
    pub auth: Auth,
    secrets: Vec<Secret>,
}

impl WebRequest {
    /// Builds the request for a metric whose args are already substituted. `timeoutSeconds` unset or not
    /// positive means 10 s, as in Argo.
    pub fn from_metric(metric: &WebMetric) -> Result<Self, ProviderError> {
        let method = match metric.method.as_deref().map(str::trim) {
            None | Some("") => WebMethod::Get,
            Some(m) if m.eq_ignore_ascii_case("GET") => WebMethod::Get,
            Some(m) if m.eq_ignore_ascii_case("POST") => WebMethod::Post,
            Some(m) if m.eq_ignore_ascii_case("PUT") => WebMethod::Put,
            Some(m) => {
                return Err(ProviderError::Invalid(format!(
                    "web.method {m:?} is not supported: use GET, POST or PUT"
                )));
            }
        };
        let raw_url = metric.url.as_deref().map(str::trim).unwrap_or("");
        if raw_url.is_empty() {
            return Err(ProviderError::Invalid("web.url is empty".to_string()));
        }
        let url = match Url::parse(raw_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => u,
            _ => {
                return Err(ProviderError::Invalid(
                    "web.url is not an http:// or https:// URL".to_string(),
                ));
            }
        };
        let body = match (
            metric.body.as_deref().filter(|b| !b.is_empty()),
            &metric.json_body,
        ) {
            (Some(_), Some(_)) => {
                return Err(ProviderError::Invalid(
                    "web: use either body or jsonBody, not both".to_string(),
                ));
            }
            (Some(text), None) => Some(WebBody::Text(text.to_string())),
            (None, Some(json)) => Some(WebBody::Json(json.clone())),
            (None, None) => None,
        };
        if body.is_some() && method == WebMethod::Get {
            return Err(ProviderError::Invalid(
                "web: body and jsonBody can only be sent with method POST or PUT".to_string(),
            ));
        }
        let json_path = match metric.json_path.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(p) => Some(JsonPath::parse(p).map_err(|e| ProviderError::Invalid(e.to_string()))?),
        };
        let timeout = match metric.timeout_seconds {
            Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs()),
            _ => DEFAULT_TIMEOUT,
        };
        let headers = Headers::from_api(metric.headers.as_deref().unwrap_or(&[]))?;
        let auth = Auth::from_api(metric.authentication.as_ref())?;
        let mut secrets = auth.secrets();
        secrets.extend(headers.values_as_secrets());
        Ok(WebRequest {
            method,
            url,
            headers,
            body,
            timeout,
            insecure: metric.insecure.unwrap_or(false),
            json_path,
            auth,
            secrets,
        })
    }

    /// Marks values (typically those of `valueFrom.secretKeyRef` args) that must be hidden wherever the
    /// request or its errors are shown.
    pub fn with_secret_values<S: Into<String>>(
        mut self,
        values: impl IntoIterator<Item = S>,
    ) -> Self {
        http::add_secrets(&mut self.secrets, values);
        self
    }

    fn shown_url(&self) -> String {
        crate::scrub::text(http::display_url(self.url.as_str()), &self.secrets)
    }
}

impl fmt::Debug for WebRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let body = self.body.as_ref().map(|b| match b {
            WebBody::Text(t) => format!("<{} bytes of text>", t.len()),
            WebBody::Json(_) => "<JSON>".to_string(),
        });
        f.debug_struct("WebRequest")
            .field("method", &self.method)
            .field("url", &self.shown_url())
            .field("headers", &self.headers)
            .field("body", &body)
            .field("timeout", &self.timeout)
            .field("insecure", &self.insecure)
            .field("json_path", &self.json_path.as_ref().map(JsonPath::as_str))
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

/// The web provider. Construct it once (it may share [`HttpClients`] with Prometheus).
#[derive(Clone, Debug, Default)]
pub struct Web {
    http: HttpClients,
}

impl Web {
    pub fn new(http: HttpClients) -> Self {
        Web { http }
    }

    /// Sends the request and selects the value. Each call is bounded by the request's own timeout.
    pub async fn fetch(&self, req: &WebRequest) -> Result<ProviderResult, ProviderError> {
        self.fetch_unscrubbed(req)
            .await
            .map_err(|e| e.scrub(&req.secrets))
    }

    async fn fetch_unscrubbed(&self, req: &WebRequest) -> Result<ProviderResult, ProviderError> {
        let shape = ClientShape {
            insecure: req.insecure,
            timeout: req.timeout,
        };
        let client = self.http.client(shape)?;
        let method = match req.method {
            WebMethod::Get => Method::GET,
            WebMethod::Post => Method::POST,
            WebMethod::Put => Method::PUT,
        };
        let mut builder = client.request(method, req.url.clone());
        builder = match &req.body {
            None => builder,
            Some(WebBody::Text(t)) => builder.body(t.clone()),
            // `json` sets Content-Type: application/json, as Argo does for jsonBody.
            Some(WebBody::Json(v)) => builder.json(v),
        };
        let builder = self
            .http
            .prepare(builder, &req.headers, &req.auth, shape)
            .await?;
        let target = http::display_url(req.url.as_str());
        let answer = self.http.send(builder, &target, &req.auth, shape).await?;
        if !answer.status.is_success() {
            return Err(ProviderError::Status {
                target,
                status: answer.status.as_u16(),
                excerpt: http::excerpt(&answer.body),
            });
        }
        Ok(ProviderResult {
            value: select_value(&answer.body, req.json_path.as_ref())?,
            metadata: BTreeMap::new(),
        })
    }
}

/// The whole JSON body, or the first value the path selects (Argo takes the first match of a wildcard).
/// A body that is not JSON is kept as text when there is no path, and is an error when there is one.
pub fn select_value(body: &[u8], path: Option<&JsonPath>) -> Result<MetricValue, ProviderError> {
    let parsed: Result<Value, _> = serde_json::from_slice(body);
    match (parsed, path) {
        (Ok(doc), None) => Ok(MetricValue::Json(doc)),
        (Err(_), None) => Ok(MetricValue::Json(Value::String(
            String::from_utf8_lossy(body).into_owned(),
        ))),
        (Err(e), Some(p)) => Err(ProviderError::JsonPath {
            path: p.as_str().to_string(),
            reason: format!("the response is not JSON ({e}): {}", http::excerpt(body)),
        }),
        (Ok(doc), Some(p)) => match p.select(&doc) {
            Ok(found) => Ok(MetricValue::Json(
                found.first().map(|v| (*v).clone()).unwrap_or(Value::Null),
            )),
            Err(JsonPathError::NoMatch { path, reason }) => Err(ProviderError::JsonPath {
                path,
                reason: format!("selects nothing in the response: {reason}"),
            }),
            Err(e @ JsonPathError::Syntax { .. }) => Err(ProviderError::Invalid(e.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn web(v: Value) -> WebMetric {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn get_is_the_default_and_a_body_needs_post_or_put() {
        let r = WebRequest::from_metric(&web(json!({"url": "http://x/"}))).unwrap();
        assert_eq!(r.method, WebMethod::Get);
        assert_eq!(r.timeout, Duration::from_secs(10));
        let err =
            WebRequest::from_metric(&web(json!({"url": "http://x/", "body": "{}"}))).unwrap_err();
        assert!(
            err.to_string()
                .contains("only be sent with method POST or PUT"),
            "{err}"
        );
        let err = WebRequest::from_metric(&web(
            json!({"url": "http://x/", "method": "POST", "body": "a", "jsonBody": {"a": 1}}),
        ))
        .unwrap_err();
        assert!(err.to_string().contains("either body or jsonBody"), "{err}");
        let err = WebRequest::from_metric(&web(json!({"url": "http://x/", "method": "DELETE"})))
            .unwrap_err();
        assert!(err.to_string().contains("GET, POST or PUT"), "{err}");
    }

    #[test]
    fn a_bad_json_path_is_reported_before_any_request() {
        let err = WebRequest::from_metric(&web(json!({"url": "http://x/", "jsonPath": "{$..a}"})))
            .unwrap_err();
        assert!(err.to_string().contains("recursive descent"), "{err}");
    }

    #[test]
    fn debug_output_hides_the_body_headers_credentials_and_marked_values() {
        let r = WebRequest::from_metric(&web(json!({
            "url": "http://x/api?key=url-secret",
            "method": "POST",
            "body": "body-secret",
            "headers": [{"key": "Authorization", "value": "Bearer hdr-secret"}],
            "authentication": {"oauth2": {"tokenUrl": "http://idp/t", "clientId": "c", "clientSecret": "cs-secret"}}
        })))
        .unwrap()
        .with_secret_values(["url-secret"]);
        let shown = format!("{r:?}");
        for s in ["url-secret", "body-secret", "hdr-secret", "cs-secret"] {
            assert!(!shown.contains(s), "{s} leaked: {shown}");
        }
        assert!(shown.contains("key=*****"), "{shown}");
    }

    #[test]
    fn values_are_the_whole_body_or_the_first_match() {
        let body = br#"{"items":[{"n":1},{"n":2}]}"#;
        assert_eq!(
            select_value(body, None).unwrap(),
            MetricValue::Json(json!({"items":[{"n":1},{"n":2}]}))
        );
        let p = JsonPath::parse("{$.items[*].n}").unwrap();
        assert_eq!(
            select_value(body, Some(&p)).unwrap(),
            MetricValue::Json(json!(1))
        );
        assert_eq!(
            select_value(b"It worked!", None).unwrap(),
            MetricValue::Json(json!("It worked!"))
        );
        let err = select_value(b"It worked!", Some(&p)).unwrap_err();
        assert!(
            err.to_string().contains("the response is not JSON"),
            "{err}"
        );
    }
}
