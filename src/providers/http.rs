//! The HTTP pieces both providers share: one `reqwest::Client` per (insecure, timeout) shape, headers, basic
//! auth, OAuth2 client credentials with a token cache, sending a request and turning transport failures into
//! [`ProviderError`]s, and keeping secrets out of everything printed. It must not know any provider's API.
//!
//! No lock is held across an `.await`: the maps are behind std mutexes taken only to look up or insert, so a
//! slow or dead server delays only the metric that asked it.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{RequestBuilder, StatusCode, Url};

use super::ProviderError;
use crate::api::{PrometheusAuth, WebMetricHeader};

/// What replaces a secret wherever text is shown, as Argo shows secret args.
pub use crate::scrub::REDACTED;

/// A value that must never be printed. `Debug` shows `*****`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Secret {
    fn as_ref(&self) -> &str {
        self.expose()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Adds values to hide (for the requests' `with_secret_values`).
pub(crate) fn add_secrets<S: Into<String>>(
    secrets: &mut Vec<Secret>,
    values: impl IntoIterator<Item = S>,
) {
    secrets.extend(values.into_iter().map(Secret::new));
}

/// Request headers from a template's `headers[]`. Values may come from secret args, so `Debug` shows names
/// only.
#[derive(Clone, Default, PartialEq)]
pub struct Headers(Vec<(HeaderName, HeaderValue)>);

impl Headers {
    /// Checks every name and value; an error names the header, never its value.
    pub fn from_api(headers: &[WebMetricHeader]) -> Result<Self, ProviderError> {
        let mut out = Vec::with_capacity(headers.len());
        for (i, h) in headers.iter().enumerate() {
            let name = HeaderName::from_bytes(h.key.trim().as_bytes()).map_err(|_| {
                ProviderError::Invalid(format!(
                    "headers[{i}]: {:?} is not a valid HTTP header name",
                    h.key
                ))
            })?;
            let mut value = HeaderValue::from_str(&h.value).map_err(|_| {
                ProviderError::Invalid(format!(
                    "headers[{i}] ({name}): the value is not a valid HTTP header value"
                ))
            })?;
            value.set_sensitive(true);
            out.push((name, value));
        }
        Ok(Headers(out))
    }

    /// Header values, for callers that scrub text with them.
    pub(crate) fn values_as_secrets(&self) -> impl Iterator<Item = Secret> + '_ {
        self.0
            .iter()
            .filter_map(|(_, v)| v.to_str().ok().map(Secret::new))
    }

    fn apply(&self, mut builder: RequestBuilder) -> RequestBuilder {
        for (name, value) in &self.0 {
            builder = builder.header(name.clone(), value.clone());
        }
        builder
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(n, _)| (n.as_str(), REDACTED)))
            .finish()
    }
}

/// How a request proves who it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Auth {
    #[default]
    None,
    Basic {
        username: String,
        password: Secret,
    },
    /// A bearer token fetched with the OAuth2 client-credentials grant.
    OAuth2(OAuth2ClientCredentials),
}

#[derive(Clone, Debug, PartialEq)]
pub struct OAuth2ClientCredentials {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: Secret,
    pub scopes: Vec<String>,
}

impl Auth {
    /// From a template's `authentication`. OAuth2 wins when `tokenUrl` is set, then basic auth. SigV4 is not
    /// supported and says so rather than sending unsigned requests.
    pub fn from_api(auth: Option<&PrometheusAuth>) -> Result<Self, ProviderError> {
        let Some(auth) = auth else {
            return Ok(Auth::None);
        };
        if auth.sigv4.is_some() {
            return Err(ProviderError::Invalid(
                "authentication.sigv4: sigv4 authentication is not supported by canaryd"
                    .to_string(),
            ));
        }
        if let Some(o) = auth.oauth2.as_ref().filter(|o| non_empty(&o.token_url)) {
            let required = |field: &Option<String>, name: &str| {
                field.clone().filter(|v| !v.is_empty()).ok_or_else(|| {
                    ProviderError::Invalid(format!(
                        "authentication.oauth2.{name} is required with tokenUrl"
                    ))
                })
            };
            let token_url = required(&o.token_url, "tokenUrl")?;
            Url::parse(&token_url).map_err(|e| {
                ProviderError::Invalid(format!(
                    "authentication.oauth2.tokenUrl {token_url:?} is not a URL: {e}"
                ))
            })?;
            return Ok(Auth::OAuth2(OAuth2ClientCredentials {
                token_url,
                client_id: required(&o.client_id, "clientId")?,
                client_secret: Secret::new(required(&o.client_secret, "clientSecret")?),
                scopes: o.scopes.clone().unwrap_or_default(),
            }));
        }
        if let Some(b) = &auth.basic_auth
            && (non_empty(&b.username) || non_empty(&b.password))
        {
            return Ok(Auth::Basic {
                username: b.username.clone().unwrap_or_default(),
                password: Secret::new(b.password.clone().unwrap_or_default()),
            });
        }
        Ok(Auth::None)
    }

    /// The secret values this auth carries, for scrubbing.
    pub(crate) fn secrets(&self) -> Vec<Secret> {
        match self {
            Auth::None => vec![],
            Auth::Basic { password, .. } => vec![password.clone()],
            Auth::OAuth2(o) => vec![o.client_secret.clone()],
        }
    }
}

fn non_empty(v: &Option<String>) -> bool {
    v.as_deref().is_some_and(|s| !s.is_empty())
}

/// The parts of a client that differ between metrics. A client per shape keeps connections pooled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientShape {
    pub insecure: bool,
    pub timeout: Duration,
}

/// Clients and OAuth2 tokens, shared by every provider. Cheap to clone; construct it once.
#[derive(Clone, Default)]
pub struct HttpClients {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    clients: Mutex<HashMap<ClientShape, reqwest::Client>>,
    tokens: Mutex<HashMap<OAuth2ClientCredentials, CachedToken>>,
}

// Hash on the whole credential set, secret included, so a rotated secret fetches a new token.
impl std::hash::Hash for OAuth2ClientCredentials {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.token_url.hash(state);
        self.client_id.hash(state);
        self.client_secret.hash(state);
        self.scopes.hash(state);
    }
}
impl Eq for OAuth2ClientCredentials {}

#[derive(Clone)]
struct CachedToken {
    token: Secret,
    /// `None`: the server gave no lifetime, so the token is kept until it is refused.
    refresh_at: Option<Instant>,
}

/// A completed exchange: status and the whole body.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Vec<u8>,
}

impl fmt::Debug for HttpClients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClients").finish_non_exhaustive()
    }
}

impl HttpClients {
    pub fn new() -> Self {
        Self::default()
    }

    /// The pooled client for `shape`, built on first use.
    pub(crate) fn client(&self, shape: ClientShape) -> Result<reqwest::Client, ProviderError> {
        let mut clients = self
            .inner
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = clients.get(&shape) {
            return Ok(c.clone());
        }
        let client = reqwest::Client::builder()
            .timeout(shape.timeout)
            .connect_timeout(shape.timeout)
            .danger_accept_invalid_certs(shape.insecure)
            .user_agent(concat!("canaryd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Invalid(format!("cannot build an HTTP client: {e}")))?;
        clients.insert(shape, client.clone());
        Ok(client)
    }

    /// Adds headers and credentials to a request; may fetch an OAuth2 token first.
    pub(crate) async fn prepare(
        &self,
        builder: RequestBuilder,
        headers: &Headers,
        auth: &Auth,
        shape: ClientShape,
    ) -> Result<RequestBuilder, ProviderError> {
        let builder = headers.apply(builder);
        Ok(match auth {
            Auth::None => builder,
            Auth::Basic { username, password } => {
                builder.basic_auth(username, Some(password.expose()))
            }
            Auth::OAuth2(o) => builder.bearer_auth(self.token(o, shape).await?.expose()),
        })
    }

    /// Sends the request and reads the body. A 401 drops a cached OAuth2 token so the next call fetches a
    /// fresh one.
    pub(crate) async fn send(
        &self,
        builder: RequestBuilder,
        target: &str,
        auth: &Auth,
        shape: ClientShape,
    ) -> Result<Answer, ProviderError> {
        let response = builder
            .send()
            .await
            .map_err(|e| transport_error(e, target, shape.timeout))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| transport_error(e, target, shape.timeout))?;
        if status == StatusCode::UNAUTHORIZED
            && let Auth::OAuth2(o) = auth
        {
            self.tokens().remove(o);
        }
        Ok(Answer {
            status,
            body: body.to_vec(),
        })
    }

    fn tokens(&self) -> std::sync::MutexGuard<'_, HashMap<OAuth2ClientCredentials, CachedToken>> {
        self.inner
            .tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    async fn token(
        &self,
        creds: &OAuth2ClientCredentials,
        shape: ClientShape,
    ) -> Result<Secret, ProviderError> {
        let cached = self.tokens().get(creds).cloned();
        if let Some(c) = cached
            && c.refresh_at.is_none_or(|at| crate::time::monotonic() < at)
        {
            return Ok(c.token);
        }
        // Two metrics sharing credentials may both fetch here; the later insert wins, which is harmless and
        // avoids holding a lock across the request.
        let fresh = self.fetch_token(creds, shape).await?;
        self.tokens().insert(creds.clone(), fresh.clone());
        Ok(fresh.token)
    }

    /// The client-credentials grant (RFC 6749 §4.4). Client credentials go in a Basic header first, then,
    /// if the server refuses that with 400/401, in the form body: the two styles servers accept.
    async fn fetch_token(
        &self,
        creds: &OAuth2ClientCredentials,
        shape: ClientShape,
    ) -> Result<CachedToken, ProviderError> {
        let client = self.client(shape)?;
        let target = display_url(&creds.token_url);
        let token_error = |reason: String, transient: bool| ProviderError::Token {
            token_url: target.clone(),
            reason,
            transient,
        };
        let mut form = vec![("grant_type", "client_credentials".to_string())];
        if !creds.scopes.is_empty() {
            form.push(("scope", creds.scopes.join(" ")));
        }
        let mut answer = None;
        for in_header in [true, false] {
            let mut fields = form.clone();
            let mut request = client.post(&creds.token_url);
            if in_header {
                request = request.basic_auth(&creds.client_id, Some(creds.client_secret.expose()));
            } else {
                fields.push(("client_id", creds.client_id.clone()));
                fields.push(("client_secret", creds.client_secret.expose().to_string()));
            }
            let a = self
                .send(request.form(&fields), &target, &Auth::None, shape)
                .await
                .map_err(|e| token_error(e.to_string(), e.is_transient()))?;
            let refused = matches!(a.status.as_u16(), 400 | 401);
            answer = Some(a);
            if !refused {
                break;
            }
        }
        let Some(answer) = answer else {
            return Err(token_error("no answer".to_string(), true));
        };
        if !answer.status.is_success() {
            let status = answer.status.as_u16();
            return Err(token_error(
                format!("HTTP {}: {}", answer.status, excerpt(&answer.body)),
                status >= 500 || status == 429,
            ));
        }
        let json: serde_json::Value = serde_json::from_slice(&answer.body).map_err(|_| {
            token_error(
                format!("the answer is not JSON: {}", excerpt(&answer.body)),
                false,
            )
        })?;
        let token = json
            .get("access_token")
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| token_error("the answer has no access_token".to_string(), false))?;
        let lifetime = match json.get("expires_in") {
            Some(serde_json::Value::Number(n)) => n.as_f64(),
            Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().ok(),
            _ => None,
        }
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64);
        // Refresh a little early so a token does not expire between the check and Prometheus reading it.
        let refresh_at =
            lifetime.map(|l| crate::time::monotonic() + l - (l / 10).min(Duration::from_secs(30)));
        Ok(CachedToken {
            token: Secret::new(token),
            refresh_at,
        })
    }
}

/// Turns a reqwest failure into the user's terms; the URL is left out because `target` names it already.
fn transport_error(e: reqwest::Error, target: &str, timeout: Duration) -> ProviderError {
    let target = target.to_string();
    if e.is_timeout() {
        return ProviderError::Timeout {
            target,
            seconds: timeout.as_secs(),
        };
    }
    let connect = e.is_connect();
    let reason = error_chain(&e.without_url());
    if connect {
        ProviderError::Connect { target, reason }
    } else {
        ProviderError::Transport { target, reason }
    }
}

/// `a: b: c` from an error and its sources, skipping repeats and empty wrappers.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        // reqwest and hyper wrap the cause in words that say nothing to a user.
        let generic = matches!(
            text.as_str(),
            "error sending request" | "client error (Connect)"
        );
        if !generic && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = err.source();
    }
    if parts.is_empty() {
        return e.to_string();
    }
    parts.join(": ")
}

/// The first 200 characters of a body on one line, for error messages.
pub(crate) fn excerpt(body: &[u8]) -> String {
    const LIMIT: usize = 200;
    let text = String::from_utf8_lossy(body);
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return "(empty body)".to_string();
    }
    match flat.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// A URL as error messages show it: without user:password.
pub(crate) fn display_url(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_one_short_line() {
        assert_eq!(
            excerpt(b"  <html>\n  oops \n</html>"),
            "<html> oops </html>"
        );
        assert_eq!(excerpt(b""), "(empty body)");
        let long = "é".repeat(500);
        assert_eq!(excerpt(long.as_bytes()).chars().count(), 201);
    }

    #[test]
    fn displayed_urls_drop_user_and_password() {
        assert_eq!(
            display_url("http://me:pw@prom:9090/x"),
            "http://prom:9090/x"
        );
    }

    #[test]
    fn sigv4_is_refused_with_a_clear_message() {
        let auth = PrometheusAuth {
            sigv4: Some(Default::default()),
            ..Default::default()
        };
        let err = Auth::from_api(Some(&auth)).unwrap_err();
        assert!(
            err.to_string()
                .contains("sigv4 authentication is not supported by canaryd")
        );
        assert!(!err.is_transient());
    }

    #[test]
    fn oauth2_needs_client_id_and_secret() {
        let auth = PrometheusAuth {
            oauth2: Some(crate::api::OAuth2Config {
                token_url: Some("http://idp/token".into()),
                client_id: Some("me".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let err = Auth::from_api(Some(&auth)).unwrap_err();
        assert!(
            err.to_string().contains("oauth2.clientSecret is required"),
            "{err}"
        );
    }

    #[test]
    fn header_errors_name_the_header_but_not_the_value() {
        let err = Headers::from_api(&[WebMetricHeader {
            key: "X-Token".into(),
            value: "s3cret\n".into(),
        }])
        .unwrap_err()
        .to_string();
        assert!(err.contains("x-token"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
}
