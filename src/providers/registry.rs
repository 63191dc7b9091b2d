//! The providers canaryd runs, built once and shared (one connection pool for the process), found by the
//! name a metric gives: [`Providers`]. Also the Prometheus and web providers' [`MetricProvider`] faces:
//! their checks of a metric's provider configuration and their measurement through the daemon's [`Gate`].

use std::sync::Arc;

use futures::future::BoxFuture;

use super::compare::Compare;
use super::gate::Gate;
use super::provider::{Answer, MeasureAt, MetricProvider, Progress};
use super::{
    HttpClients, Prometheus, PrometheusRequest, ProviderError, ProviderResult, Web, WebRequest,
};
use crate::api::compare::COMPARE_PLUGIN;
use crate::api::duration::parse_step;
use crate::api::{Metric, PrometheusMetric};
use crate::engine::args;
use crate::engine::template::{Finding, ProviderRules, check_url};

/// The Prometheus HTTP API as a metric provider.
#[derive(Debug, Clone)]
pub struct PrometheusProvider {
    prometheus: Prometheus,
    /// For metrics whose template names no address.
    default_address: Option<String>,
    /// The daemon's singleflight and per-address limits; `None` sends every query as asked.
    gate: Option<Arc<Gate>>,
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
        if prom.query.as_deref().is_none_or(|q| q.trim().is_empty()) {
            findings.push(Finding::error(format!("{p}.query"), "required"));
        }
        if let Some(address) = &prom.address {
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
    web: Web,
    gate: Option<Arc<Gate>>,
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

/// The providers canaryd runs. Build once, share.
#[derive(Debug, Clone)]
pub struct Providers {
    prometheus: Arc<PrometheusProvider>,
    /// Answers `prometheus` metrics in place of the Prometheus HTTP API (`canaryd demo`'s scenario).
    prometheus_stand_in: Option<Arc<dyn MetricProvider>>,
    web: WebProvider,
    compare: Compare,
}

impl Providers {
    /// `default_prometheus` is used for metrics whose template names no address.
    pub fn new(default_prometheus: Option<String>) -> Providers {
        Providers::build(default_prometheus, None)
    }

    /// The same providers with Prometheus queries shared and limited through `gate` (the daemon: many runs
    /// asking the same question). `now` rounded down to the second is the sharing window.
    pub fn with_gate(self, gate: Arc<Gate>) -> Providers {
        Providers {
            prometheus_stand_in: self.prometheus_stand_in,
            ..Providers::build(self.prometheus.default_address.clone(), Some(gate))
        }
    }

    fn build(default_address: Option<String>, gate: Option<Arc<Gate>>) -> Providers {
        let http = HttpClients::new();
        let prometheus = Arc::new(PrometheusProvider {
            prometheus: Prometheus::new(http.clone()),
            default_address,
            gate: gate.clone(),
        });
        Providers {
            compare: Compare::new(prometheus.clone()),
            prometheus,
            prometheus_stand_in: None,
            web: WebProvider {
                web: Web::new(http),
                gate,
            },
        }
    }

    /// The same providers with `stand_in` answering the metrics that name `prometheus` (`canaryd/compare`'s
    /// queries still go to Prometheus).
    pub fn with_prometheus(mut self, stand_in: Arc<dyn MetricProvider>) -> Providers {
        self.prometheus_stand_in = Some(stand_in);
        self
    }

    /// The provider `metric` names, or why there is none.
    pub fn of(&self, metric: &Metric) -> Result<&dyn MetricProvider, ProviderError> {
        let provider = &metric.provider;
        if provider.prometheus.is_some() {
            Ok(match &self.prometheus_stand_in {
                Some(stand_in) => &**stand_in,
                None => &*self.prometheus,
            })
        } else if provider.web.is_some() {
            Ok(&self.web)
        } else if provider
            .plugin
            .as_ref()
            .is_some_and(|p| p.len() == 1 && p.contains_key(COMPARE_PLUGIN))
        {
            Ok(&self.compare)
        } else {
            let names = provider.configured();
            Err(ProviderError::Invalid(format!(
                "provider {} is not supported by canaryd",
                names.first().copied().unwrap_or("(none)")
            )))
        }
    }
}

impl ProviderRules for Providers {
    fn check(&self, metric: &Metric, path: &str, findings: &mut Vec<Finding>) {
        let provider = &metric.provider;
        if let Some(plugins) = &provider.plugin
            && provider.prometheus.is_none()
            && provider.web.is_none()
        {
            if plugins.len() != 1 {
                findings.push(Finding::error(
                    format!("{path}.plugin"),
                    format!("exactly one plugin is allowed, found {}", plugins.len()),
                ));
            }
            for name in plugins.keys().filter(|name| *name != COMPARE_PLUGIN) {
                findings.push(Finding::error(
                    format!("{path}.plugin.{name}"),
                    format!(
                        "plugin {name} is not supported by canaryd (canaryd runs prometheus, web and its own \
                         plugin {COMPARE_PLUGIN})"
                    ),
                ));
            }
            if plugins.contains_key(COMPARE_PLUGIN) {
                self.compare.validate(metric, path, findings);
            }
            return;
        }
        match self.of(metric) {
            Ok(p) => p.validate(metric, path, findings),
            Err(_) => {
                if let Some(name) = provider.configured().first() {
                    findings.push(Finding::error(
                        format!("{path}.{name}"),
                        format!(
                            "provider {name} is not supported by canaryd (supported: prometheus, web, plugin \"canaryd/...\")"
                        ),
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn metric(provider: serde_json::Value) -> Metric {
        serde_json::from_value(json!({"name": "m", "provider": provider})).expect("a metric")
    }

    #[test]
    fn each_metric_finds_the_provider_it_names_and_an_unknown_one_is_refused() {
        let providers = Providers::new(None);
        let name = |p: serde_json::Value| providers.of(&metric(p)).map(|p| p.name());
        assert_eq!(
            name(json!({"prometheus": {"query": "up"}})).ok(),
            Some("prometheus")
        );
        assert_eq!(name(json!({"web": {"url": "http://x"}})).ok(), Some("web"));
        assert_eq!(
            name(json!({"plugin": {"canaryd/compare": {}}})).ok(),
            Some("canaryd/compare")
        );
        let refused = name(json!({"datadog": {"query": "x"}})).expect_err("datadog is not run");
        assert!(
            refused
                .to_string()
                .contains("provider datadog is not supported"),
            "{refused}"
        );
    }
}
