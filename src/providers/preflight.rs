//! Before a backtest or a rehearsal looks at history: does every Prometheus it will ask answer at all? A
//! command-line run against a Prometheus that refuses connections would otherwise measure Error five times
//! and print a verdict ("roll back") about the network, not the canary. The daemon does not ask: there a
//! Prometheus that is down for a moment is Argo's consecutive errors, counted by the analysis.
//!
//! Only the absence of any HTTP answer counts (refused, unresolvable, timed out): an answer of any status,
//! a 401 from a Prometheus that wants the metric's credentials included, means the server is there and the
//! run's own measurements will say the rest.

use std::collections::BTreeSet;

use super::{PrometheusRequest, ProviderError, registry::Providers};
use crate::api::{Metric, PrometheusMetric};
use crate::engine::args;

/// How long the one trivial query may take.
const TIMEOUT_SECONDS: i64 = 5;

impl Providers {
    /// Checks that every Prometheus `metrics` will ask is known and answers (see [`Self::prometheus_addresses`]
    /// for which); the error names the metric or the address and says why.
    pub async fn check_prometheus<'a>(
        &self,
        metrics: impl IntoIterator<Item = &'a Metric>,
        over: Option<&str>,
    ) -> Result<(), String> {
        let addresses = self.prometheus_addresses(metrics, over)?;
        self.check_answering(&addresses).await
    }

    /// The Prometheus addresses `metrics` will ask, as far as they are known before a run: `over`
    /// (`--prometheus`) for every Prometheus metric, else the metric's own address, else the configured
    /// default. A metric with none of those is an error naming it; an address that still holds
    /// `{{args...}}` is left to the run.
    fn prometheus_addresses<'a>(
        &self,
        metrics: impl IntoIterator<Item = &'a Metric>,
        over: Option<&str>,
    ) -> Result<BTreeSet<String>, String> {
        let mut addresses = BTreeSet::new();
        for metric in metrics {
            let Some(prometheus) = &metric.provider.prometheus else {
                continue;
            };
            let own = prometheus
                .address
                .as_deref()
                .map(str::trim)
                .filter(|a| !a.is_empty());
            let address = over.or(own).or(self.default_prometheus());
            match address {
                Some(a) if args::is_templated(a) => {}
                Some(a) => {
                    addresses.insert(a.trim_end_matches('/').to_string());
                }
                None => {
                    return Err(format!(
                        "metric {:?} names no Prometheus address and none is configured: pass \
                         --prometheus URL (or set CANARYD_PROMETHEUS_ADDRESS)",
                        metric.name
                    ));
                }
            }
        }
        Ok(addresses)
    }

    /// Asks each address `vector(1)`; the first that gives no HTTP answer at all is named with why.
    async fn check_answering(&self, addresses: &BTreeSet<String>) -> Result<(), String> {
        for address in addresses {
            let probe = PrometheusMetric {
                address: Some(address.clone()),
                query: Some("vector(1)".to_string()),
                timeout: Some(TIMEOUT_SECONDS),
                ..Default::default()
            };
            let request =
                PrometheusRequest::from_metric(&probe, None, crate::time::Clock::Wall.now(), None)
                    .map_err(|e| e.to_string())?;
            if let Err(
                e @ (ProviderError::Connect { .. }
                | ProviderError::Timeout { .. }
                | ProviderError::Transport { .. }),
            ) = self.plain_prometheus().query(&request).await
            {
                return Err(format!("Prometheus at {address} does not answer: {e}"));
            }
        }
        Ok(())
    }
}
