//! The AnalysisRun families of `/metrics`, computed at scrape time from the cached runs: Argo Rollouts'
//! `analysis_run_info`, `analysis_run_metric_type`, `analysis_run_metric_phase` and the deprecated
//! `analysis_run_phase` (as Argo's `controller/metrics/analysis.go` writes them), canaryd's count of runs per
//! phase, and each metric's last measured value. A deleted run leaves the cache, and with it every series.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::api::{AnalysisPhase, AnalysisRun, MetricProvider};
use crate::engine::analysis::dry_run_flags;

use super::{Exposition, family, sample};

/// The phases Argo's per-phase families list, in its order.
const PHASES: [AnalysisPhase; 6] = [
    AnalysisPhase::Pending,
    AnalysisPhase::Error,
    AnalysisPhase::Failed,
    AnalysisPhase::Successful,
    AnalysisPhase::Running,
    AnalysisPhase::Inconclusive,
];

/// Argo's `metricproviders.Type`: the provider's type name, the first set in Argo's order.
pub fn provider_type(provider: &MetricProvider) -> &'static str {
    let types = [
        (provider.prometheus.is_some(), "Prometheus"),
        (provider.job.is_some(), "Job"),
        (provider.kayenta.is_some(), "Kayenta"),
        (provider.web.is_some(), "Web"),
        (provider.datadog.is_some(), "Datadog"),
        (provider.wavefront.is_some(), "Wavefront"),
        (provider.new_relic.is_some(), "NewRelic"),
        (provider.cloud_watch.is_some(), "CloudWatch"),
        (provider.graphite.is_some(), "Graphite"),
        (provider.influxdb.is_some(), "Influxdb"),
        (provider.skywalking.is_some(), "skywalking"),
        (provider.plugin.is_some(), "RPCPlugin"),
    ];
    types
        .iter()
        .find(|(set, _)| *set)
        .map_or("Unknown Provider", |(_, name)| name)
}

/// Every AnalysisRun family.
pub fn write(out: &mut Exposition, runs: &[Arc<AnalysisRun>]) {
    write_counts(out, runs);
    family(
        out,
        "analysis_run_info",
        "gauge",
        "Information about analysis run.",
    );
    for run in runs {
        let (namespace, name) = names(run);
        // Argo writes the phase as stored, empty before the first reconcile.
        let phase = stored_phase(run).map_or("", AnalysisPhase::as_str);
        let labels = [("namespace", namespace), ("name", name), ("phase", phase)];
        sample(out, "analysis_run_info", &labels, 1.0);
    }
    let name = "analysis_run_phase";
    family(
        out,
        name,
        "gauge",
        "Information on the state of the Analysis Run (DEPRECATED - use analysis_run_info)",
    );
    for run in runs {
        let (namespace, run_name) = names(run);
        let current = stored_phase(run).unwrap_or(AnalysisPhase::Pending);
        for phase in PHASES {
            let labels = [
                ("namespace", namespace),
                ("name", run_name),
                ("phase", phase.as_str()),
            ];
            sample(out, name, &labels, one_if(current == phase));
        }
    }
    write_metrics(out, runs);
}

/// canaryd's own: the number of runs per phase (a run not yet reconciled counts as Pending).
fn write_counts(out: &mut Exposition, runs: &[Arc<AnalysisRun>]) {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for run in runs {
        let phase = stored_phase(run).unwrap_or(AnalysisPhase::Pending);
        *counts.entry(phase.as_str()).or_default() += 1;
    }
    family(
        out,
        "canaryd_analysis_runs",
        "gauge",
        "AnalysisRuns this process watches, by phase.",
    );
    for (phase, n) in counts {
        sample(out, "canaryd_analysis_runs", &[("phase", phase)], n as f64);
    }
}

/// Per metric of each run: its type, its phase (one sample per phase) and its last measured value. One pass
/// over the runs per family, each written as it goes (no family is held whole to be written after another).
fn write_metrics(out: &mut Exposition, runs: &[Arc<AnalysisRun>]) {
    let types = "analysis_run_metric_type";
    family(
        out,
        types,
        "gauge",
        "Information on the type of a specific metric in the Analysis Runs",
    );
    for run in runs {
        let (namespace, name) = names(run);
        for metric in &run.spec.metrics {
            let kind = provider_type(&metric.provider);
            let labels = [
                ("namespace", namespace),
                ("name", name),
                ("metric", metric.name.as_str()),
                ("type", kind),
            ];
            sample(out, types, &labels, 1.0);
        }
    }
    let phases = "analysis_run_metric_phase";
    family(
        out,
        phases,
        "gauge",
        "Information on the duration of a specific metric in the Analysis Run",
    );
    for run in runs {
        let (namespace, name) = names(run);
        let metrics = &run.spec.metrics;
        // Argo: a dryRun rule that does not compile leaves every metric not dry-run.
        let dry = dry_run_flags(metrics, run.spec.dry_run.as_deref().unwrap_or_default())
            .unwrap_or_else(|_| vec![false; metrics.len()]);
        for (metric, dry) in metrics.iter().zip(dry) {
            let kind = provider_type(&metric.provider);
            let result = run.status.as_ref().and_then(|s| s.result(&metric.name));
            let current = result.map_or(AnalysisPhase::Pending, |r| r.phase);
            let dry_run = if dry { "true" } else { "false" };
            for phase in PHASES {
                let labels = [
                    ("namespace", namespace),
                    ("name", name),
                    ("metric", metric.name.as_str()),
                    ("type", kind),
                    ("dry_run", dry_run),
                    ("phase", phase.as_str()),
                ];
                sample(out, phases, &labels, one_if(current == phase));
            }
        }
    }
    let values = "canaryd_analysis_run_metric_value";
    family(
        out,
        values,
        "gauge",
        "The value of a metric's last measurement, when it is a number (or a vector of one).",
    );
    for run in runs {
        let (namespace, name) = names(run);
        for metric in &run.spec.metrics {
            let result = run.status.as_ref().and_then(|s| s.result(&metric.name));
            let last = result.and_then(|r| r.measurements.last());
            if let Some(value) = last.and_then(|m| m.value.as_deref()).and_then(number) {
                let labels = [
                    ("namespace", namespace),
                    ("name", name),
                    ("metric", metric.name.as_str()),
                ];
                sample(out, values, &labels, value);
            }
        }
    }
}

/// A measured value as a number: a scalar, or the one element of a vector (`[0.99]`).
fn number(value: &str) -> Option<f64> {
    let inner = value
        .trim()
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .unwrap_or(value);
    inner.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

fn names(run: &AnalysisRun) -> (&str, &str) {
    (
        run.metadata.namespace.as_deref().unwrap_or_default(),
        run.metadata.name.as_deref().unwrap_or_default(),
    )
}

fn stored_phase(run: &AnalysisRun) -> Option<AnalysisPhase> {
    run.status.as_ref().and_then(|s| s.phase)
}

fn one_if(yes: bool) -> f64 {
    if yes { 1.0 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run() -> AnalysisRun {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
            "metadata": {"name": "web-1", "namespace": "shop"},
            "spec": {
                "metrics": [
                    {"name": "success-rate", "provider": {"prometheus": {"query": "q"}}},
                    {"name": "smoke", "provider": {"job": {"spec": {}}}},
                    {"name": "judge", "provider": {"plugin": {"canaryd/compare": {}}}},
                ],
                "dryRun": [{"metricName": "smo.*"}],
            },
            "status": {"phase": "Running", "metricResults": [
                {"name": "success-rate", "phase": "Failed", "measurements": [
                    {"phase": "Successful", "value": "0.99"}, {"phase": "Failed", "value": "[0.5]"}]},
            ]},
        }))
        .expect("a run")
    }

    fn written() -> String {
        let mut out = Exposition::collect();
        write(&mut out, &[Arc::new(run())]);
        out.finish()
    }

    #[test]
    fn each_metric_has_argos_type_and_dry_run_and_one_phase_sample_per_phase() {
        let out = written();
        for line in [
            "analysis_run_info{namespace=\"shop\",name=\"web-1\",phase=\"Running\"} 1",
            "analysis_run_phase{namespace=\"shop\",name=\"web-1\",phase=\"Running\"} 1",
            "analysis_run_phase{namespace=\"shop\",name=\"web-1\",phase=\"Pending\"} 0",
            "analysis_run_metric_type{namespace=\"shop\",name=\"web-1\",metric=\"success-rate\",type=\"Prometheus\"} 1",
            "analysis_run_metric_type{namespace=\"shop\",name=\"web-1\",metric=\"smoke\",type=\"Job\"} 1",
            "analysis_run_metric_type{namespace=\"shop\",name=\"web-1\",metric=\"judge\",type=\"RPCPlugin\"} 1",
            "analysis_run_metric_phase{namespace=\"shop\",name=\"web-1\",metric=\"success-rate\",type=\"Prometheus\",dry_run=\"false\",phase=\"Failed\"} 1",
            // No result yet: Pending, as Argo counts it.
            "analysis_run_metric_phase{namespace=\"shop\",name=\"web-1\",metric=\"smoke\",type=\"Job\",dry_run=\"true\",phase=\"Pending\"} 1",
            "canaryd_analysis_run_metric_value{namespace=\"shop\",name=\"web-1\",metric=\"success-rate\"} 0.5",
            "canaryd_analysis_runs{phase=\"Running\"} 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
        }
        let phase_samples = out
            .lines()
            .filter(|l| l.starts_with("analysis_run_metric_phase{"))
            .count();
        assert_eq!(phase_samples, 3 * 6);
        assert_eq!(out.matches("canaryd_analysis_run_metric_value{").count(), 1);
    }

    #[test]
    fn a_value_is_a_number_or_a_vector_of_one() {
        assert_eq!(number("0.25"), Some(0.25));
        assert_eq!(number("[3]"), Some(3.0));
        assert_eq!(number("[1,2]"), None);
        assert_eq!(number("NaN"), None);
        assert_eq!(number("up"), None);
    }
}
