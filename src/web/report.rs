//! The offline report `rehearse`, `analyze` and `demo` write with `--report`: one self-contained HTML
//! document (the style inline, the charts inline SVG, nothing fetched) with what ended the command, the
//! rehearsal's timeline as the command line tells it, and each AnalysisRun's section.

use std::collections::BTreeMap;

use super::analysis;
use super::page::{document, escape};
use crate::api::{AnalysisRun, Measurement};

/// What a report shows. The lines are the command's own telling (`rehearse_report::entry_line`).
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub title: String,
    /// How it ended, in one sentence.
    pub ending: String,
    pub timeline: Vec<TimelineLine>,
    pub runs: Vec<AnalysisRun>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TimelineLine {
    pub text: String,
    /// `step`, `warning`, `failed` or empty: how the line is marked.
    pub class: &'static str,
}

/// The whole document.
pub fn render(report: &Report) -> String {
    let mut body = format!(
        "<h1>{}</h1>\n<p class=\"ending\" id=\"ending\">{}</p>\n",
        escape(&report.title),
        escape(&report.ending)
    );
    if !report.timeline.is_empty() {
        body.push_str("<h2>Timeline</h2>\n<ol class=\"timeline\" id=\"timeline\">\n");
        for line in &report.timeline {
            body.push_str(&format!(
                "<li class=\"{}\">{}</li>\n",
                line.class,
                escape(&line.text)
            ));
        }
        body.push_str("</ol>\n");
    }
    for run in &report.runs {
        body.push_str(&analysis::section(run));
    }
    document(&report.title, &body)
}

/// What a command gathers for its report while it runs: each line it tells, and every measurement it saw
/// by run and metric.
#[derive(Debug, Default)]
pub struct Gathering {
    timeline: Vec<TimelineLine>,
    seen: BTreeMap<String, Vec<(String, Measurement)>>,
}

impl Gathering {
    pub fn line(&mut self, text: String, class: &'static str) {
        self.timeline.push(TimelineLine { text, class });
    }

    pub fn measured(&mut self, run: &str, metric: &str, measurement: &Measurement) {
        self.seen
            .entry(run.to_string())
            .or_default()
            .push((metric.to_string(), measurement.clone()));
    }

    /// The report, each run with every measurement seen of it.
    pub fn report(self, title: String, ending: String, runs: &[AnalysisRun]) -> Report {
        let runs = runs
            .iter()
            .map(|run| {
                let name = run.metadata.name.as_deref().unwrap_or("");
                let seen = self.seen.get(name).map_or(&[][..], Vec::as_slice);
                with_every_measurement(run.clone(), seen)
            })
            .collect();
        Report {
            title,
            ending,
            timeline: self.timeline,
            runs,
        }
    }
}

/// Puts back the measurements a run's retention dropped from its status (Argo keeps the last 10 by
/// default), from every measurement the command saw, by metric name in order, so a chart covers the whole
/// run. A metric the command saw nothing of keeps what its status holds.
fn with_every_measurement(mut run: AnalysisRun, seen: &[(String, Measurement)]) -> AnalysisRun {
    let mut by_metric: BTreeMap<&str, Vec<Measurement>> = BTreeMap::new();
    for (metric, m) in seen {
        by_metric.entry(metric).or_default().push(m.clone());
    }
    let results = run.status.as_mut().and_then(|s| s.metric_results.as_mut());
    for result in results.into_iter().flatten() {
        if let Some(all) = by_metric.remove(result.name.as_str()) {
            result.measurements = all;
        }
    }
    run
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run() -> AnalysisRun {
        let value = json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
            "metadata": {"name": "r"},
            "spec": {"metrics": [{"name": "m", "provider": {"prometheus": {"query": "q"}}}]},
            "status": {"phase": "Failed", "metricResults": [{"name": "m", "phase": "Failed",
                "measurements": [{"phase": "Failed", "value": "[3]"}]}]}
        });
        match serde_json::from_value(value) {
            Ok(run) => run,
            Err(e) => panic!("{e}"),
        }
    }

    fn measured(value: &str) -> Measurement {
        Measurement {
            phase: crate::api::AnalysisPhase::Successful,
            message: None,
            started_at: None,
            finished_at: None,
            value: Some(value.to_string()),
            metadata: None,
            resume_at: None,
        }
    }

    #[test]
    fn the_report_holds_the_ending_the_timeline_and_each_run_escaped_and_self_contained() {
        let html = render(&Report {
            title: "Rollout shop/<b>checkout</b>".into(),
            ending: "aborted at step 3/7".into(),
            timeline: vec![TimelineLine {
                text: "00:00 step 1/7 <setWeight: 20>".into(),
                class: "step",
            }],
            runs: vec![run()],
        });
        assert!(html.contains("<h1>Rollout shop/&lt;b&gt;checkout&lt;/b&gt;</h1>"));
        assert!(html.contains("<li class=\"step\">00:00 step 1/7 &lt;setWeight: 20&gt;</li>"));
        assert!(html.contains("<section class=\"analysis-run\" id=\"run-r\">"));
        for external in ["<script", "<link", "src=", "@import", "url("] {
            assert!(
                !html.contains(external),
                "{external} in a report that must open offline"
            );
        }
    }

    #[test]
    fn measurements_retention_dropped_are_put_back_in_order() {
        let mut gathering = Gathering::default();
        gathering.measured("r", "m", &measured("[1]"));
        gathering.measured("r", "other", &measured("[9]"));
        gathering.measured("another-run", "m", &measured("[8]"));
        gathering.measured("r", "m", &measured("[2]"));
        let report = gathering.report(String::new(), String::new(), &[run()]);
        let status = report.runs[0].status.clone();
        let values: Vec<Option<String>> = status.and_then(|s| s.metric_results).unwrap_or_default()
            [0]
        .measurements
        .iter()
        .map(|m| m.value.clone())
        .collect();
        assert_eq!(values, [Some("[1]".to_string()), Some("[2]".to_string())]);
    }
}
