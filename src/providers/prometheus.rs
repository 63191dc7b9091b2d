//! The Prometheus HTTP API provider: `/api/v1/query` (instant, optionally at a given time for backtests) and
//! `/api/v1/query_range`, with Argo's result conversion (scalar → number, vector → numbers, matrix →
//! every sample flattened, empty vector → `[]`, NaN and ±Inf kept). Owns building the request from a
//! template, the exchange, and parsing answers; it must not evaluate conditions or decide phases.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use reqwest::{StatusCode, Url};
use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::http::{self, Answer, Auth, ClientShape, Headers, HttpClients, Secret};
use super::{ProviderError, ProviderResult};
use crate::api::PrometheusMetric;
use crate::api::duration::parse_step;
use crate::engine::timeexpr::eval_time_expr;
use crate::engine::value::MetricValue;

/// Argo's default query timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Environment variables naming the default Prometheus, in the order they are read.
pub const ADDRESS_ENV_VARS: [&str; 2] = [
    "CANARYD_PROMETHEUS_ADDRESS",
    "ARGO_ROLLOUTS_PROMETHEUS_ADDRESS",
];

/// The default address from the environment: `CANARYD_PROMETHEUS_ADDRESS`, else
/// `ARGO_ROLLOUTS_PROMETHEUS_ADDRESS`; empty values count as unset.
pub fn default_address_from_env() -> Option<String> {
    default_address_from(|name| std::env::var(name).ok())
}

/// [`default_address_from_env`] over any variable lookup, so the precedence is testable without touching
/// the process environment.
fn default_address_from(lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    ADDRESS_ENV_VARS
        .iter()
        .filter_map(|name| lookup(name))
        .map(|v| v.trim().to_string())
        .find(|v| !v.is_empty())
}

/// Which endpoint to ask and with what times.
#[derive(Clone, Debug, PartialEq)]
pub enum QueryKind {
    /// `/api/v1/query`; `time` is set for backtests, otherwise Prometheus uses its own now.
    Instant { time: Option<Timestamp> },
    /// `/api/v1/query_range` with the window already evaluated.
    Range {
        start: Timestamp,
        end: Timestamp,
        step: Duration,
    },
}

/// One resolved Prometheus query. `Debug` hides passwords, client secrets, header values and any value
/// passed to [`PrometheusRequest::with_secret_values`].
#[derive(Clone, PartialEq)]
pub struct PrometheusRequest {
    /// Base URL without a trailing slash, e.g. `http://prometheus:9090` or `https://host/prometheus`.
    pub address: String,
    pub query: String,
    pub kind: QueryKind,
    pub timeout: Duration,
    pub insecure: bool,
    pub headers: Headers,
    pub auth: Auth,
    secrets: Vec<Secret>,
}

impl PrometheusRequest {
    /// Builds the request for a metric whose args are already substituted.
    ///
    /// - `default_address` is used when the template has none (the caller resolves the `--prometheus` flag
    ///   and [`default_address_from_env`]); neither is an error saying where to set one.
    /// - `eval_time` is the virtual time of a backtest: instant queries get `time=`, and `now()` in
    ///   `rangeQuery.start`/`end` means it. Without it, `now()` means `now`.
    pub fn from_metric(
        metric: &PrometheusMetric,
        default_address: Option<&str>,
        now: Timestamp,
        eval_time: Option<Timestamp>,
    ) -> Result<Self, ProviderError> {
        let address = metric
            .address
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .or(default_address.map(str::trim).filter(|a| !a.is_empty()))
            .ok_or_else(|| {
                ProviderError::Invalid(
                    "no Prometheus address: set provider.prometheus.address in the template, pass \
                     --prometheus, or set CANARYD_PROMETHEUS_ADDRESS"
                        .to_string(),
                )
            })?;
        match Url::parse(address) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
            _ => {
                return Err(ProviderError::Invalid(format!(
                    "Prometheus address {:?} is not an http:// or https:// URL",
                    http::display_url(address)
                )));
            }
        }
        let query = metric
            .query
            .as_deref()
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .ok_or_else(|| ProviderError::Invalid("prometheus.query is empty".to_string()))?
            .to_string();
        let timeout = match metric.timeout {
            None => DEFAULT_TIMEOUT,
            Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs()),
            Some(s) => {
                return Err(ProviderError::Invalid(format!(
                    "prometheus.timeout is {s}: it must be a positive number of seconds"
                )));
            }
        };
        let kind = match &metric.range_query {
            None => QueryKind::Instant { time: eval_time },
            Some(range) => {
                let at = eval_time.unwrap_or(now);
                let time = |expr: &Option<String>, field: &str| {
                    let expr = expr.as_deref().filter(|e| !e.trim().is_empty()).ok_or_else(|| {
                        ProviderError::Invalid(format!(
                            "prometheus.rangeQuery.{field} is required (e.g. now() - duration(\"5m\"))"
                        ))
                    })?;
                    eval_time_expr(expr, at).map_err(|e| {
                        ProviderError::Invalid(format!("prometheus.rangeQuery.{field}: {e}"))
                    })
                };
                let start = time(&range.start, "start")?;
                let end = time(&range.end, "end")?;
                if start > end {
                    return Err(ProviderError::Invalid(format!(
                        "prometheus.rangeQuery: start {start} is after end {end}"
                    )));
                }
                let step_text = range.step.as_deref().unwrap_or("");
                let step = parse_step(step_text).map_err(|e| {
                    ProviderError::Invalid(format!("prometheus.rangeQuery.step: {e}"))
                })?;
                QueryKind::Range { start, end, step }
            }
        };
        let headers = Headers::from_api(metric.headers.as_deref().unwrap_or(&[]))?;
        let auth = Auth::from_api(metric.authentication.as_ref())?;
        let mut secrets = auth.secrets();
        secrets.extend(headers.values_as_secrets());
        Ok(PrometheusRequest {
            address: address.trim_end_matches('/').to_string(),
            query,
            kind,
            timeout,
            insecure: metric.insecure.unwrap_or(false),
            headers,
            auth,
            secrets,
        })
    }

    /// Marks values (typically those of `valueFrom.secretKeyRef` args) that must be hidden wherever the
    /// request or its errors are shown, even inside the query or the address.
    pub fn with_secret_values<S: Into<String>>(
        mut self,
        values: impl IntoIterator<Item = S>,
    ) -> Self {
        http::add_secrets(&mut self.secrets, values);
        self
    }

    fn scrubbed(&self, text: &str) -> String {
        crate::scrub::text(text.to_string(), &self.secrets)
    }

    fn form(&self) -> (&'static str, Vec<(&'static str, String)>) {
        let mut fields = vec![("query", self.query.clone())];
        match &self.kind {
            QueryKind::Instant { time } => {
                if let Some(t) = time {
                    fields.push(("time", t.to_string()));
                }
                ("/api/v1/query", fields)
            }
            QueryKind::Range { start, end, step } => {
                fields.push(("start", start.to_string()));
                fields.push(("end", end.to_string()));
                fields.push(("step", step.as_secs_f64().to_string()));
                ("/api/v1/query_range", fields)
            }
        }
    }
}

impl fmt::Debug for PrometheusRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusRequest")
            .field("address", &self.scrubbed(&http::display_url(&self.address)))
            .field("query", &self.scrubbed(&self.query))
            .field("kind", &self.kind)
            .field("timeout", &self.timeout)
            .field("insecure", &self.insecure)
            .field("headers", &self.headers)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

/// The Prometheus provider. Construct it once and share it: it keeps pooled clients and OAuth2 tokens.
#[derive(Clone, Debug, Default)]
pub struct Prometheus {
    http: HttpClients,
}

impl Prometheus {
    pub fn new(http: HttpClients) -> Self {
        Prometheus { http }
    }

    /// Runs the query. Each call is bounded by the request's own timeout.
    pub async fn query(&self, req: &PrometheusRequest) -> Result<ProviderResult, ProviderError> {
        self.query_unscrubbed(req)
            .await
            .map_err(|e| e.scrub(&req.secrets))
    }

    async fn query_unscrubbed(
        &self,
        req: &PrometheusRequest,
    ) -> Result<ProviderResult, ProviderError> {
        let (answer, target) = self.exchange(req).await?;
        let parsed = interpret(&answer, &target)?;
        let mut metadata = BTreeMap::new();
        metadata.insert("ResolvedPrometheusQuery".to_string(), req.query.clone());
        if !parsed.warnings.is_empty() {
            metadata.insert("warnings".to_string(), quoted_list(&parsed.warnings));
        }
        if !parsed.infos.is_empty() {
            metadata.insert("infos".to_string(), quoted_list(&parsed.infos));
        }
        for v in metadata.values_mut() {
            *v = req.scrubbed(v);
        }
        Ok(ProviderResult {
            value: parsed.value,
            metadata,
        })
    }

    /// The 2xx body of a range query, for a reader that keeps each sample's time (`batch.rs`); errors are
    /// scrubbed as [`Prometheus::query`]'s are.
    pub(super) async fn range_body(
        &self,
        req: &PrometheusRequest,
    ) -> Result<Vec<u8>, ProviderError> {
        let answered = async {
            let (answer, target) = self.exchange(req).await?;
            interpret(&answer, &target)?;
            Ok(answer.body)
        };
        answered
            .await
            .map_err(|e: ProviderError| e.scrub(&req.secrets))
    }

    /// Sends the request (POST, or GET where a proxy refuses POST) and returns the answer and the target
    /// as shown in errors.
    async fn exchange(&self, req: &PrometheusRequest) -> Result<(Answer, String), ProviderError> {
        let shape = ClientShape {
            insecure: req.insecure,
            timeout: req.timeout,
        };
        let client = self.http.client(shape)?;
        let (path, fields) = req.form();
        let url = format!("{}{path}", req.address);
        let target = http::display_url(&req.address);
        let post = client.post(&url).form(&fields);
        let post = self
            .http
            .prepare(post, &req.headers, &req.auth, shape)
            .await?;
        let mut answer = self.http.send(post, &target, &req.auth, shape).await?;
        // Prometheus' own Go client falls back to GET when a proxy in front refuses POST.
        if matches!(
            answer.status,
            StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_IMPLEMENTED
        ) {
            let get = client.get(&url).query(&fields);
            let get = self
                .http
                .prepare(get, &req.headers, &req.auth, shape)
                .await?;
            answer = self.http.send(get, &target, &req.auth, shape).await?;
        }
        Ok((answer, target))
    }
}

/// Argo's form for warnings in metadata: `"first", "second"`.
fn quoted_list(items: &[String]) -> String {
    items
        .iter()
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A 2xx answer is parsed; any other status yields Prometheus' own error when the body carries one, else
/// the status and an excerpt.
fn interpret(answer: &Answer, target: &str) -> Result<ParsedResponse, ProviderError> {
    if answer.status.is_success() {
        return parse_query_response(&answer.body);
    }
    let status = answer.status.as_u16();
    match parse_query_response(&answer.body) {
        Err(ProviderError::Prometheus {
            error_type,
            message,
            ..
        }) => Err(ProviderError::Prometheus {
            http_status: Some(status),
            error_type,
            message,
        }),
        _ => Err(ProviderError::Status {
            target: target.to_string(),
            status,
            excerpt: http::excerpt(&answer.body),
        }),
    }
}

/// What kind of result Prometheus sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultType {
    Scalar,
    Vector,
    Matrix,
}

/// A successful answer, converted.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedResponse {
    pub result_type: ResultType,
    pub value: MetricValue,
    pub warnings: Vec<String>,
    pub infos: Vec<String>,
}

/// Parses a Prometheus `/api/v1/query` or `/api/v1/query_range` body. Pure: no I/O, no clock.
///
/// `"status":"error"` becomes [`ProviderError::Prometheus`] with Prometheus' `errorType` and `error`; a
/// `string` result, native histograms and malformed JSON become [`ProviderError::BadResponse`].
pub fn parse_query_response(body: &[u8]) -> Result<ParsedResponse, ProviderError> {
    let envelope: Envelope = serde_json::from_slice(body).map_err(|e| {
        ProviderError::BadResponse(match e.classify() {
            serde_json::error::Category::Data => {
                format!("the Prometheus answer is not a Prometheus API response: {e}")
            }
            _ => format!(
                "the Prometheus answer is not valid JSON ({e}): {}",
                http::excerpt(body)
            ),
        })
    })?;
    match envelope.status.as_deref() {
        Some("success") => {}
        Some("error") => {
            return Err(ProviderError::Prometheus {
                http_status: None,
                error_type: envelope.error_type.unwrap_or_else(|| "unknown".to_string()),
                message: envelope.error.unwrap_or_else(|| "(no message)".to_string()),
            });
        }
        other => {
            return Err(ProviderError::BadResponse(format!(
                "the Prometheus answer has status {:?}, expected \"success\" or \"error\"",
                other.unwrap_or("")
            )));
        }
    }
    let data = envelope.data.ok_or_else(|| {
        ProviderError::BadResponse("the Prometheus answer has no data".to_string())
    })?;
    let elements = data.result.unwrap_or_default();
    let (result_type, value) = match data.result_type.as_deref() {
        Some("scalar") => (ResultType::Scalar, MetricValue::Number(scalar(&elements)?)),
        Some("vector") => (
            ResultType::Vector,
            MetricValue::Numbers(samples(elements, false)?),
        ),
        Some("matrix") => (
            ResultType::Matrix,
            MetricValue::Numbers(samples(elements, true)?),
        ),
        Some("string") => {
            let text = match elements.get(1) {
                Some(Element::Text(t)) => t.clone(),
                _ => String::new(),
            };
            return Err(ProviderError::BadResponse(format!(
                "Prometheus returned a string result ({text:?}); conditions need a scalar, vector or matrix"
            )));
        }
        other => {
            return Err(ProviderError::BadResponse(format!(
                "the Prometheus answer has an unknown resultType {:?}",
                other.unwrap_or("")
            )));
        }
    };
    Ok(ParsedResponse {
        result_type,
        value,
        warnings: envelope.warnings.unwrap_or_default(),
        infos: envelope.infos.unwrap_or_default(),
    })
}

fn scalar(elements: &[Element]) -> Result<f64, ProviderError> {
    match elements {
        [Element::Time, Element::Text(v)] => parse_sample(v).ok_or_else(|| {
            ProviderError::BadResponse(format!("the scalar value {v:?} is not a number"))
        }),
        _ => Err(ProviderError::BadResponse(
            "the scalar result is not [time, \"value\"]".to_string(),
        )),
    }
}

fn samples(elements: Vec<Element>, matrix: bool) -> Result<Vec<f64>, ProviderError> {
    let mut out = Vec::with_capacity(elements.len());
    for (i, e) in elements.into_iter().enumerate() {
        let Element::Series(s) = e else {
            return Err(ProviderError::BadResponse(format!(
                "result[{i}] is not a series object"
            )));
        };
        if s.histogram {
            return Err(ProviderError::BadResponse(format!(
                "series {i} is a native histogram, not a number: wrap the query in histogram_quantile(), \
                 histogram_count() or histogram_sum()"
            )));
        }
        match (matrix, s.value, s.values) {
            (false, Some(v), _) => out.push(v.0),
            (true, _, Some(vs)) => out.extend(vs.into_iter().map(|s| s.0)),
            // A matrix series may carry only histograms (caught above) or nothing at all.
            (true, _, None) => {}
            (false, None, _) => {
                return Err(ProviderError::BadResponse(format!(
                    "series {i} of the vector has no value"
                )));
            }
        }
    }
    Ok(out)
}

/// Prometheus writes sample values as strings: decimals, exponents, `NaN`, `+Inf`, `-Inf`.
pub(super) fn parse_sample(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => text.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

// The wire shapes. Labels are skipped without being built, which keeps 10,000-series answers cheap.

#[derive(Deserialize)]
struct Envelope {
    status: Option<String>,
    data: Option<Data>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
    warnings: Option<Vec<String>>,
    infos: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: Option<String>,
    result: Option<Vec<Element>>,
}

/// One item of `result`: a timestamp or value of a scalar/string result, or a series of a vector/matrix.
enum Element {
    Time,
    Text(String),
    Series(Series),
}

#[derive(Deserialize)]
struct Series {
    value: Option<Sample>,
    values: Option<Vec<Sample>>,
    #[serde(default, deserialize_with = "present", alias = "histograms")]
    histogram: bool,
}

fn present<'de, D: de::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(d).map(|_| true)
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Element;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a timestamp, a value string or a series object")
            }
            fn visit_f64<E>(self, _: f64) -> Result<Element, E> {
                Ok(Element::Time)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Element, E> {
                Ok(Element::Time)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Element, E> {
                Ok(Element::Time)
            }
            fn visit_str<E>(self, v: &str) -> Result<Element, E> {
                Ok(Element::Text(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Element, A::Error> {
                Series::deserialize(de::value::MapAccessDeserializer::new(map)).map(Element::Series)
            }
        }
        d.deserialize_any(V)
    }
}

/// A `[time, "value"]` pair, read straight into its number.
struct Sample(f64);

impl<'de> Deserialize<'de> for Sample {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Sample;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a [time, \"value\"] sample")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Sample, A::Error> {
                seq.next_element::<IgnoredAny>()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let text: Cow<'de, str> = seq
                    .next_element::<CowStr>()?
                    .ok_or_else(|| de::Error::invalid_length(1, &self))?
                    .0;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                parse_sample(&text).map(Sample).ok_or_else(|| {
                    de::Error::custom(format!("sample value {text:?} is not a number"))
                })
            }
        }
        d.deserialize_seq(V)
    }
}

/// A string borrowed from the input when it has no escapes, so sample values cost no allocation.
struct CowStr<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for CowStr<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CowStr<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<CowStr<'de>, E> {
                Ok(CowStr(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<CowStr<'de>, E> {
                Ok(CowStr(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests;
