//! The Prometheus and web providers' [`MetricProvider`] faces: their checks of a metric's provider
//! configuration, and their measurements (through the daemon's [`Gate`] when there is one). The HTTP work is
//! `prometheus.rs`'s and `web.rs`'s.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::gate::Gate;
use super::promql;
use super::provider::{Answer, MeasureAt, MetricProvider, Progress};
use super::{Prometheus, PrometheusRequest, ProviderError, ProviderResult, Web, WebRequest};
use crate::api::duration::parse_step;
use crate::api::{Metric, PrometheusMetric};
use crate::engine::args;
use crate::engine::template::{Finding, check_url};

/// The Prometheus HTTP API as a metric provider.
#[derive(Debug, Clone)]
pub struct PrometheusProvider {
    pub(super) prometheus: Prometheus,
    /// For metrics whose template names no address.
    pub(super) default_address: Option<String>,
    /// The daemon's singleflight and per-address limits; `None` sends every query as asked.
    pub(super) gate: Option<Arc<Gate>>,
}

impl PrometheusProvider {
    /// Sends one query (`compare` sends several through here).
    pub async fn query(
        &self,
        prom: &PrometheusMetric,
        at: MeasureAt<'_>,
    ) -> Result<ProviderResult, ProviderError> {
        let req = PrometheusRequest::from_metric(
            prom,
            self.default_address.as_deref(),
            at.now,
            at.eval_time,
        )?
        .with_secret_values(at.secrets.iter().cloned());
        match &self.gate {
            Some(gate) => gate.query(&self.prometheus, &req, at.now.as_second()).await,
            None => self.prometheus.query(&req).await,
        }
    }
}

impl MetricProvider for PrometheusProvider {
    fn name(&self) -> &'static str {
        "prometheus"
    }

    fn validate(&self, metric: &Metric, path: &str, findings: &mut Vec<Finding>) {
        let Some(prom) = &metric.provider.prometheus else {
            return;
        };
        let p = format!("{path}.prometheus");
        match prom.query.as_deref().filter(|q| !q.trim().is_empty()) {
            None => findings.push(Finding::error(format!("{p}.query"), "required")),
            Some(query) => check_promql(query, &format!("{p}.query"), findings),
        }
        // An empty address names none: the configured default applies, as in Argo's provider.
        if let Some(address) = prom.address.as_deref().filter(|a| !a.trim().is_empty()) {
            check_url(address, &format!("{p}.address"), findings);
        }
        if let Some(t) = prom.timeout
            && t <= 0
        {
            findings.push(Finding::error(
                format!("{p}.timeout"),
                format!("must be a positive number of seconds, got {t}"),
            ));
        }
        if let Some(range) = &prom.range_query {
            let r = format!("{p}.rangeQuery");
            for (field, value) in [
                ("start", &range.start),
                ("end", &range.end),
                ("step", &range.step),
            ] {
                if value.as_deref().is_none_or(|v| v.trim().is_empty()) {
                    findings.push(Finding::error(format!("{r}.{field}"), "required"));
                }
            }
            if let Some(step) = &range.step
                && !args::is_templated(step)
                && let Err(e) = parse_step(step)
            {
                findings.push(Finding::error(format!("{r}.step"), e.to_string()));
            }
        }
        if prom
            .authentication
            .as_ref()
            .is_some_and(|a| a.sigv4.is_some())
        {
            findings.push(Finding::error(
                format!("{p}.authentication.sigv4"),
                "sigv4 authentication is not supported by canaryd",
            ));
        }
    }

    fn measure<'a>(&'a self, metric: &'a Metric, at: MeasureAt<'a>) -> BoxFuture<'a, Progress> {
        Box::pin(async move {
            let Some(prom) = &metric.provider.prometheus else {
                return Progress::Finished(Err(ProviderError::Invalid(
                    "the metric has no prometheus provider".to_string(),
                )));
            };
            let answer = self.query(prom, at).await;
            Progress::Finished(answer.map(|result| Answer {
                result,
                verdict: None,
            }))
        })
    }
}

/// Argo's web provider: an HTTP endpoint answering JSON.
#[derive(Debug, Clone)]
pub struct WebProvider {
    pub(super) web: Web,
    pub(super) gate: Option<Arc<Gate>>,
}

impl MetricProvider for WebProvider {
    fn name(&self) -> &'static str {
        "web"
    }

    fn validate(&self, metric: &Metric, path: &str, findings: &mut Vec<Finding>) {
        let Some(web) = &metric.provider.web else {
            return;
        };
        let p = format!("{path}.web");
        match &web.url {
            Some(url) if !url.trim().is_empty() => check_url(url, &format!("{p}.url"), findings),
            _ => findings.push(Finding::error(format!("{p}.url"), "required")),
        }
        let method = web.method.as_deref().unwrap_or("GET");
        if !matches!(method, "GET" | "POST" | "PUT") {
            findings.push(Finding::error(
                format!("{p}.method"),
                format!("{method:?} is not one of GET, POST, PUT"),
            ));
        }
        if web.body.is_some() && web.json_body.is_some() {
            findings.push(Finding::error(
                format!("{p}.jsonBody"),
                "body and jsonBody are mutually exclusive",
            ));
        }
        if (web.body.is_some() || web.json_body.is_some()) && method == "GET" {
            findings.push(Finding::error(
                format!("{p}.method"),
                "a request body needs method POST or PUT",
            ));
        }
        if let Some(t) = web.timeout_seconds
            && t <= 0
        {
            findings.push(Finding::error(
                format!("{p}.timeoutSeconds"),
                format!("must be a positive number of seconds, got {t}"),
            ));
        }
        if let Some(jp) = &web.json_path
            && !(jp.trim_start().starts_with('{') && jp.trim_end().ends_with('}'))
        {
            findings.push(Finding::error(
                format!("{p}.jsonPath"),
                format!("{jp:?} is not a JSONPath template such as {{$.data.ok}}"),
            ));
        }
    }

    fn measure<'a>(&'a self, metric: &'a Metric, at: MeasureAt<'a>) -> BoxFuture<'a, Progress> {
        Box::pin(async move {
            let Some(web) = &metric.provider.web else {
                return Progress::Finished(Err(ProviderError::Invalid(
                    "the metric has no web provider".to_string(),
                )));
            };
            let req = match WebRequest::from_metric(web) {
                Ok(req) => req.with_secret_values(at.secrets.iter().cloned()),
                Err(e) => return Progress::Finished(Err(e)),
            };
            let started = crate::time::monotonic();
            let answer = self.web.fetch(&req).await;
            if let Some(gate) = &self.gate {
                gate.observe("web", started.elapsed());
            }
            Progress::Finished(answer.map(|result| Answer {
                result,
                verdict: None,
            }))
        })
    }
}

/// A query Prometheus would refuse to parse is an error at `path`, with the parser's reason.
pub fn check_promql(query: &str, path: &str, findings: &mut Vec<Finding>) {
    if let Some(e) = promql::syntax_error(query) {
        findings.push(Finding::error(path, format!("not valid PromQL: {e}")));
    }
}
