//! `canaryd analyze` driven against the real Prometheus: the command line built up as a user types it, and
//! what came of it (exit code, the JSON status, stderr) with readers for the tests.

use canaryd::api::{AnalysisPhase, AnalysisRunStatus, Measurement, MetricResult};

use super::{Prometheus, at, minutes_after_t0};
use crate::cli::Canaryd;

/// `canaryd analyze` as a backtest, built up like its command line, run by the caller's launcher.
pub struct Analyze {
    canaryd: Canaryd,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
}

impl Analyze {
    /// `canaryd analyze -f FILE --output json`, FILE relative to the repository root.
    pub fn file(canaryd: Canaryd, path: &str) -> Self {
        Analyze {
            canaryd,
            args: ["analyze", "-f", path, "--output", "json"]
                .map(String::from)
                .to_vec(),
            env: Vec::new(),
        }
    }

    /// A template from `tests/fixtures/e2e/`.
    pub fn fixture(canaryd: Canaryd, name: &str) -> Self {
        Self::file(canaryd, &format!("tests/fixtures/e2e/{name}"))
    }

    /// A template from the shipped library in `analysis-templates/`.
    pub fn shipped(canaryd: Canaryd, name: &str) -> Self {
        Self::file(canaryd, &format!("analysis-templates/{name}"))
    }

    /// `--template NAME`: which template of the file(s) to run.
    pub fn template(mut self, name: &str) -> Self {
        self.args.push("--template".into());
        self.args.push(name.to_string());
        self
    }

    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.args.push("--arg".into());
        self.args.push(format!("{name}={value}"));
        self
    }

    pub fn prometheus(mut self, server: &Prometheus) -> Self {
        self.args.push("--prometheus".into());
        self.args.push(server.url().to_string());
        self
    }

    /// The server as the configured default (`CANARYD_PROMETHEUS_ADDRESS`, what the chart's
    /// `prometheus.address` sets), which applies to metrics whose template names no address.
    pub fn default_prometheus(mut self, server: &Prometheus) -> Self {
        self.env
            .push(("CANARYD_PROMETHEUS_ADDRESS", server.url().to_string()));
        self
    }

    /// Also write the offline HTML report to `path` (`--report`).
    pub fn report(mut self, path: &std::path::Path) -> Self {
        self.args.push("--report".into());
        self.args.push(path.display().to_string());
        self
    }

    /// Backtest from minute `from` to minute `to` after [`T0`].
    pub fn minutes(mut self, from: i64, to: i64) -> Self {
        self.args.push("--from".into());
        self.args.push(at(from).to_string());
        self.args.push("--to".into());
        self.args.push(at(to).to_string());
        self
    }

    /// Runs the binary; the process must print one AnalysisRun status as JSON on stdout.
    pub fn run(self) -> Run {
        let out = self
            .canaryd
            .command()
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("the canaryd binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let code = out.status.code().unwrap_or(-1);
        let status = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "canaryd {} (exit {code}) did not print an AnalysisRun status: {e}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                self.args.join(" ")
            )
        });
        Run {
            code,
            status,
            stderr,
        }
    }
}

/// What `canaryd analyze --output json` reported.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub status: AnalysisRunStatus,
    pub stderr: String,
}

impl Run {
    pub fn phase(&self) -> Option<AnalysisPhase> {
        self.status.phase
    }

    pub fn message(&self) -> Option<&str> {
        self.status.message.as_deref()
    }

    pub fn metric(&self, name: &str) -> &MetricResult {
        let results = self.status.metric_results.as_deref().unwrap_or_default();
        results
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no metric {name} in {:#?}", self.status))
    }

    /// The phases of a metric's (retained) measurements, oldest first.
    pub fn measurement_phases(&self, name: &str) -> Vec<AnalysisPhase> {
        self.metric(name)
            .measurements
            .iter()
            .map(|m| m.phase)
            .collect()
    }

    /// The values of a metric's (retained) measurements as Argo stores them, oldest first.
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.metric(name)
            .measurements
            .iter()
            .map(|m| m.value.as_deref().unwrap_or(""))
            .collect()
    }

    /// Asserts that every retained measurement of `name` stored one number within 1e-9 of `expected`
    /// (PromQL's float arithmetic gives 0.9400000000000001 for 0.94).
    pub fn assert_each_value_near(&self, name: &str, expected: f64) {
        for value in self.values(name) {
            let got = numbers(value);
            assert!(
                got.len() == 1 && (got[0] - expected).abs() < 1e-9,
                "{name}: stored {value}, expected [{expected}] in every measurement"
            );
        }
    }

    /// The first measurement of `name` in `phase`.
    pub fn first(&self, name: &str, phase: AnalysisPhase) -> &Measurement {
        self.metric(name)
            .measurements
            .iter()
            .find(|m| m.phase == phase)
            .unwrap_or_else(|| panic!("no {phase} measurement of {name} in {:#?}", self.status))
    }

    /// (count, successful, failed, inconclusive, error) of a metric.
    pub fn counters(&self, name: &str) -> (i32, i32, i32, i32, i32) {
        let r = self.metric(name);
        (r.count, r.successful, r.failed, r.inconclusive, r.error)
    }
}

/// The numbers in a stored vector or range value such as `[0.0995,NaN]` (`[]` is none).
pub fn numbers(value: &str) -> Vec<f64> {
    let inner = value.trim_matches(['[', ']']);
    if inner.is_empty() {
        return Vec::new();
    }
    inner
        .split(',')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("not a list of numbers: {value}"))
        })
        .collect()
}

/// When a measurement finished, as minutes after [`T0`].
pub fn finished_minute(m: &Measurement) -> f64 {
    let t = m
        .finished_at
        .as_ref()
        .expect("a finished measurement has finishedAt");
    minutes_after_t0(t.0)
}
