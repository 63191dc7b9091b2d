//! The providers canaryd runs, built once and shared (one connection pool for the process), found by the
//! name a metric gives: [`Providers`], which also answers `validate`'s provider checks.

use std::sync::Arc;

use super::batch::Batched;
use super::compare::Compare;
use super::gate::Gate;
use super::job::JobProvider;
use super::provider::MetricProvider;
use super::sources::{PrometheusProvider, WebProvider};
use super::{HttpClients, Prometheus, ProviderError, Web};
use crate::api::Metric;
use crate::api::compare::COMPARE_PLUGIN;
use crate::engine::template::{Finding, ProviderRules};

/// The providers canaryd runs. Build once, share.
#[derive(Debug, Clone)]
pub struct Providers {
    prometheus: Arc<PrometheusProvider>,
    /// Answers `prometheus` metrics in place of the plain Prometheus provider (`canaryd demo`'s scenario, the
    /// range batching of backtests).
    prometheus_stand_in: Option<Arc<dyn MetricProvider>>,
    web: WebProvider,
    compare: Compare,
    job: JobProvider,
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
            job: self.job,
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
            job: JobProvider::default(),
        }
    }

    /// The same providers with job metrics run as Jobs through `jobs` (without it they are Errors saying no
    /// cluster is configured).
    pub fn with_jobs(mut self, jobs: Arc<crate::k8s::jobs::Jobs>) -> Providers {
        self.job = JobProvider { jobs: Some(jobs) };
        self
    }

    /// Where job metrics run their Jobs when the run has no namespace of its own (the cluster
    /// configuration's namespace); `None` without a cluster.
    pub fn jobs_namespace(&self) -> Option<&str> {
        self.job.jobs.as_deref().map(|j| j.default_namespace())
    }

    /// The same providers with `stand_in` answering the metrics that name `prometheus` (`canaryd/compare`'s
    /// queries still go to Prometheus).
    pub fn with_prometheus(mut self, stand_in: Arc<dyn MetricProvider>) -> Providers {
        self.prometheus_stand_in = Some(stand_in);
        self
    }

    /// The same providers with Prometheus queries of a backtest range-batched (`batch.rs`), no batch
    /// reaching past `horizon`: `analyze --from/--to` and `rehearse`.
    pub fn with_batched_prometheus(self, horizon: Option<jiff::Timestamp>) -> Providers {
        let batched = Arc::new(Batched::new(self.prometheus.clone(), horizon));
        self.with_prometheus(batched)
    }

    /// The address for Prometheus metrics whose template names none.
    pub fn default_prometheus(&self) -> Option<&str> {
        self.prometheus.default_address.as_deref()
    }

    /// The Prometheus client itself, without a stand-in, gate or batching (for the preflight's probe).
    pub(super) fn plain_prometheus(&self) -> &Prometheus {
        &self.prometheus.prometheus
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
        } else if provider.job.is_some() {
            Ok(&self.job)
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
                        "plugin {name} is not supported by canaryd (canaryd runs prometheus, web, job and its \
                         own plugin {COMPARE_PLUGIN})"
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
                            "provider {name} is not supported by canaryd (supported: prometheus, web, job, plugin \"canaryd/...\")"
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
        assert_eq!(name(json!({"job": {"spec": {}}})).ok(), Some("job"));
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
