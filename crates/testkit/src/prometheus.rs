//! The real Prometheus fixture of the end-to-end tests: a real Prometheus loaded with synthetic series, and the
//! `canaryd` binary run against it.
//!
//! It owns how test data gets into Prometheus and how `canaryd analyze` is driven; it must not contain
//! assertions about canaryd's behaviour (those live in the end-to-end tests that use it).
//!
//! How the data gets in (all of this was tried with Debian's prometheus 2.42):
//! - [`Scenario`] writes series as OpenMetrics text: one `# TYPE` block per metric family, samples every
//!   15 s with timestamps in seconds, `# EOF` at the end. Counter families are declared without `_total`
//!   and histograms as `_bucket{le=...}`, `_sum`, `_count`, as the exporters expose them.
//! - `promtool tsdb create-blocks-from openmetrics FILE DIR` turns that into TSDB blocks (2 h blocks; a
//!   window crossing a 2 h boundary simply gives two blocks).
//! - Every scenario lies in a fixed window starting at [`T0`] (2026-01-01T00:00:00Z) and queries address it
//!   only through `time=` (which is what `canaryd analyze --from/--to` does), so results do not depend on
//!   the wall clock. Recent data would load too: a block ending a minute ago was queryable at once (the
//!   server starts with an empty head block, so nothing overlaps); the fixed window is for determinism.
//! - Prometheus measures time retention from the newest block, not from the wall clock, so old data
//!   survives even with the default; `--storage.tsdb.retention.time=10y` is passed anyway so nothing ever
//!   deletes it. A minimal config with no scrape jobs keeps the TSDB to the imported data.
//! - Backfill plus start-up take well under a second; each test module starts one server for all its
//!   scenarios (distinct `service`/workload labels) through [`shared`] and a `static` cell of its own, i.e.
//!   once per module and process: once per module for `cargo test`, once per test under nextest.
//!
//! The server runs under a small `sh` supervisor whose stdin is a pipe from the test process: when the
//! pipe closes — [`Prometheus`] dropped, or the test process gone for any reason, including a `static`
//! that is never dropped — the supervisor stops Prometheus and removes its TSDB. No server or data outlives its tests.
//!
//! `canaryd analyze` against it is [`analyze`]'s.
//!
//! A missing `prometheus` or `promtool` fails the test with the command that installs them; nothing skips.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fixture waits for a real server on real time.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use jiff::{Timestamp, ToSpan as _};

mod analyze;

pub use analyze::*;

/// The start of every scenario's window.
pub const T0: &str = "2026-01-01T00:00:00Z";

/// Seconds between two samples of a series, like a 15 s scrape interval.
pub const STEP_SECONDS: i64 = 15;

const INSTALL_HINT: &str = "install Debian's prometheus package: apt-get update && apt-get install -y prometheus (tests/run.sh does this)";

/// `minutes` after [`T0`].
pub fn at(minutes: i64) -> Timestamp {
    t0() + minutes.minutes()
}

pub fn t0() -> Timestamp {
    T0.parse().expect("T0 is a valid timestamp")
}

/// Minutes from [`T0`] to `t`.
pub fn minutes_after_t0(t: Timestamp) -> f64 {
    (t.as_second() - t0().as_second()) as f64 / 60.0
}

/// Requests per second and the share of them that failed, at one point of a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    pub rps: f64,
    /// 0..1
    pub errors: f64,
}

/// `rps` requests per second, `errors` (0..1) of them failing, for the whole window.
pub fn steady(rps: f64, errors: f64) -> impl Fn(f64) -> Traffic {
    move |_| Traffic { rps, errors }
}

/// Requests per second that each took `value` (in the histogram's unit), at one point of a scenario.
///
/// Every request lands in the one bucket containing `value`, so `histogram_quantile(0.99, ...)` answers
/// `lower + 0.99 * (upper - lower)` of that bucket: 0.08 s in Prometheus' default buckets gives 0.0995.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    pub rps: f64,
    pub value: f64,
}

/// Prometheus client libraries' default buckets (seconds).
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Istio's default buckets for `istio_request_duration_milliseconds`.
pub const ISTIO_BUCKETS_MS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 30000.0,
    60000.0, 300000.0, 600000.0, 1800000.0, 3600000.0,
];

/// Series over a window, rendered as OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`.
///
/// The closures take the minute since the window's start (a float: samples are 15 s apart) and describe
/// the traffic from that moment to the next sample; counters accumulate it, so what happens from minute
/// 14 on shows first in the sample at 14:15.
pub struct Scenario {
    start: i64,
    samples: i64,
    /// Family name → (type, sample lines). A BTreeMap keeps families contiguous, as OpenMetrics requires.
    families: std::collections::BTreeMap<String, (&'static str, String)>,
}

impl Scenario {
    /// A window of `minutes` starting at [`T0`].
    pub fn new(minutes: i64) -> Self {
        Scenario {
            start: t0().as_second(),
            samples: minutes * 60 / STEP_SECONDS + 1,
            families: Default::default(),
        }
    }

    /// A request counter split by status: `status_label="200"` for the successes and `"500"` for the
    /// failures (each only if it ever counts something), like `http_requests_total{code}`, `istio_requests_total{response_code}` or
    /// `nginx_ingress_controller_requests{status}`. `metric` is the sample name as queried.
    pub fn requests(
        mut self,
        metric: &str,
        labels: &[(&str, &str)],
        status_label: &str,
        traffic: impl Fn(f64) -> Traffic,
    ) -> Self {
        let (mut ok, mut failed) = (0.0, 0.0);
        let ok_labels = with_label(labels, status_label, "200");
        let failed_labels = with_label(labels, status_label, "500");
        let mut ok_lines = String::new();
        let mut failed_lines = String::new();
        for i in 0..self.samples {
            let t = self.start + i * STEP_SECONDS;
            if i > 0 {
                let now = traffic(self.minute(i - 1));
                let n = now.rps * STEP_SECONDS as f64;
                ok += n * (1.0 - now.errors);
                failed += n * now.errors;
            }
            sample(&mut ok_lines, metric, &ok_labels, ok, t);
            sample(&mut failed_lines, metric, &failed_labels, failed, t);
        }
        let family = self.family(metric.strip_suffix("_total").unwrap_or(metric), "counter");
        // Client libraries create a label set on its first increment: a status that never happened has no
        // series at all (which is what `or vector(0)` in error-rate queries is for).
        if ok > 0.0 {
            family.push_str(&ok_lines);
        }
        if failed > 0.0 {
            family.push_str(&failed_lines);
        }
        self
    }

    /// A counter whose value at each minute `value` gives directly, e.g. a restart count.
    pub fn counter(
        mut self,
        metric: &str,
        labels: &[(&str, &str)],
        value: impl Fn(f64) -> f64,
    ) -> Self {
        let labels = render_labels(labels);
        let mut lines = String::new();
        for i in 0..self.samples {
            sample(
                &mut lines,
                metric,
                &labels,
                value(self.minute(i)),
                self.start + i * STEP_SECONDS,
            );
        }
        let family = self.family(metric.strip_suffix("_total").unwrap_or(metric), "counter");
        family.push_str(&lines);
        self
    }

    /// A histogram `base` (`base_bucket{le}`, `base_sum`, `base_count`) over `buckets` plus `+Inf`.
    pub fn histogram(
        mut self,
        base: &str,
        labels: &[(&str, &str)],
        buckets: &[f64],
        latency: impl Fn(f64) -> Latency,
    ) -> Self {
        let mut counts = vec![0.0; buckets.len() + 1];
        let (mut sum, mut count) = (0.0, 0.0);
        let bucket_labels: Vec<String> = buckets
            .iter()
            .map(|le| format!("{le}"))
            .chain(["+Inf".to_string()])
            .map(|le| with_label(labels, "le", &le))
            .collect();
        let plain = render_labels(labels);
        let mut per_bucket = vec![String::new(); counts.len()];
        let (mut sums, mut counts_lines) = (String::new(), String::new());
        for i in 0..self.samples {
            let t = self.start + i * STEP_SECONDS;
            if i > 0 {
                let now = latency(self.minute(i - 1));
                let n = now.rps * STEP_SECONDS as f64;
                for (c, le) in counts
                    .iter_mut()
                    .zip(buckets.iter().map(Some).chain([None]))
                {
                    if le.is_none_or(|le| now.value <= *le) {
                        *c += n;
                    }
                }
                sum += n * now.value;
                count += n;
            }
            for ((lines, labels), c) in per_bucket.iter_mut().zip(&bucket_labels).zip(&counts) {
                sample(lines, &format!("{base}_bucket"), labels, *c, t);
            }
            sample(&mut sums, &format!("{base}_sum"), &plain, sum, t);
            sample(
                &mut counts_lines,
                &format!("{base}_count"),
                &plain,
                count,
                t,
            );
        }
        let family = self.family(base, "histogram");
        // One series after another: the parser wants each series' samples in time order, nothing more.
        for lines in per_bucket {
            family.push_str(&lines);
        }
        family.push_str(&sums);
        family.push_str(&counts_lines);
        self
    }

    /// The OpenMetrics text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, (kind, lines)) in &self.families {
            let _ = writeln!(out, "# TYPE {name} {kind}");
            out.push_str(lines);
        }
        out.push_str("# EOF\n");
        out
    }

    fn minute(&self, i: i64) -> f64 {
        (i * STEP_SECONDS) as f64 / 60.0
    }

    fn family(&mut self, name: &str, kind: &'static str) -> &mut String {
        let entry = self
            .families
            .entry(name.to_string())
            .or_insert_with(|| (kind, String::new()));
        assert_eq!(
            entry.0, kind,
            "metric family {name} declared with two types"
        );
        &mut entry.1
    }
}

fn render_labels(labels: &[(&str, &str)]) -> String {
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    parts.join(",")
}

fn with_label(labels: &[(&str, &str)], name: &str, value: &str) -> String {
    let mut all = labels.to_vec();
    all.push((name, value));
    render_labels(&all)
}

fn sample(out: &mut String, metric: &str, labels: &str, value: f64, t: i64) {
    let _ = writeln!(out, "{metric}{{{labels}}} {value} {t}");
}

/// A Prometheus server on 127.0.0.1 serving only the data it was started with; stopped on drop.
pub struct Prometheus {
    url: String,
    addr: String,
    supervisor: Child,
    /// Closing this pipe is what stops the server (see the module header).
    lifeline: Option<ChildStdin>,
    /// Holds the TSDB and the log until the server is gone.
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Backfills `scenario` into a fresh TSDB and starts a server on it.
    pub fn start(scenario: &Scenario) -> Prometheus {
        Self::start_openmetrics(&scenario.render())
    }

    /// Backfills OpenMetrics text (e.g. a file from `tests/fixtures/e2e/`) and starts a server on it.
    pub fn start_openmetrics(openmetrics: &str) -> Prometheus {
        let prometheus = tool("prometheus");
        let promtool = tool("promtool");
        let dir = tempfile::tempdir().expect("a temp dir for the TSDB");
        let input = dir.path().join("series.om");
        std::fs::write(&input, openmetrics).expect("write the OpenMetrics file");
        let data = dir.path().join("data");
        let out = Command::new(&promtool)
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&input)
            .arg(&data)
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool tsdb create-blocks-from openmetrics failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            "# No scrape jobs: the TSDB holds only the backfilled data.\nglobal: {}\n",
        )
        .expect("write the config");

        // The port is free when read, but another process may take it before Prometheus binds it: retry.
        let mut last_log = String::new();
        for _ in 0..3 {
            let port = free_port();
            let addr = format!("127.0.0.1:{port}");
            let log = dir.path().join(format!("prometheus-{port}.log"));
            let mut supervisor = supervise(&prometheus, dir.path(), &data, &config, port, &log);
            let lifeline = supervisor.stdin.take();
            if wait_ready(&mut supervisor, &addr) {
                return Prometheus {
                    url: format!("http://{addr}"),
                    addr,
                    supervisor,
                    lifeline,
                    _dir: dir,
                };
            }
            // Read before the lifeline closes: closing it also removes the directory (see `supervise`).
            last_log = std::fs::read_to_string(&log).unwrap_or_default();
            drop(lifeline);
            let _ = supervisor.wait();
        }
        panic!("prometheus did not become ready; its log:\n{last_log}");
    }

    /// The base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// An instant query evaluated at `time`: each series' value, in the server's order.
    pub fn instant(&self, promql: &str, time: Timestamp) -> Vec<f64> {
        let query: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("query", promql)
            .append_pair("time", &time.to_string())
            .finish();
        let (code, body) = http_get(&self.addr, &format!("/api/v1/query?{query}"))
            .unwrap_or_else(|e| panic!("query {promql}: {e}"));
        assert_eq!(code, 200, "query {promql}: {body}");
        let answer: serde_json::Value =
            serde_json::from_str(&body).expect("Prometheus answers JSON");
        let result = &answer["data"]["result"];
        match answer["data"]["resultType"].as_str() {
            Some("vector") => result
                .as_array()
                .map(|series| series.iter().map(|s| number(&s["value"][1])).collect())
                .unwrap_or_default(),
            Some("scalar") => vec![number(&result[1])],
            other => panic!("query {promql}: unexpected result type {other:?}"),
        }
    }
}

impl Prometheus {
    /// Queries this server has answered (`/api/v1/query` and `/api/v1/query_range`), from its own
    /// `prometheus_http_requests_total`.
    pub fn queries_served(&self) -> u64 {
        let (code, body) = http_get(&self.addr, "/metrics").expect("Prometheus serves /metrics");
        assert_eq!(code, 200, "{body}");
        body.lines()
            .filter(|l| l.starts_with("prometheus_http_requests_total{"))
            .filter(|l| {
                l.contains("handler=\"/api/v1/query\"")
                    || l.contains("handler=\"/api/v1/query_range\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        drop(self.lifeline.take());
        let _ = self.supervisor.wait();
    }
}

/// Polls `/-/ready` until it answers 200, the server exits, or 30 s pass.
fn wait_ready(supervisor: &mut Child, addr: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if matches!(supervisor.try_wait(), Ok(Some(_))) {
            return false;
        }
        if matches!(http_get(addr, "/-/ready"), Ok((200, _))) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// One server per `cell` and test process, started on first use with the data `scenario` builds.
pub fn shared(
    cell: &'static OnceLock<Prometheus>,
    scenario: fn() -> Scenario,
) -> &'static Prometheus {
    cell.get_or_init(|| Prometheus::start(&scenario()))
}

/// Starts Prometheus under `sh`: the server runs in the background while a reader waits on the pipe from
/// the test process (fd 3); end of file there stops the server and then removes `dir` (the TSDB and the log),
/// which a server in a `static` cell would otherwise leave behind in the temp folder: its `TempDir` is never
/// dropped. The supervisor exits with the server, so a server that failed to start is seen as an exited child.
fn supervise(
    prometheus: &Path,
    dir: &Path,
    data: &Path,
    config: &Path,
    port: u16,
    log: &Path,
) -> Child {
    const SCRIPT: &str = r#"exec 3<&0
"$0" "$@" 3<&- >"$LOG" 2>&1 &
server=$!
(read -r _ <&3; kill "$server" 2>/dev/null; while kill -0 "$server" 2>/dev/null; do sleep 0.05; done; rm -rf "$DIR") &
wait "$server""#;
    Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg(prometheus)
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--storage.tsdb.retention.time=10y")
        .arg("--log.level=warn")
        .env("LOG", log)
        .env("DIR", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh runs")
}

/// The full path of `name` on PATH, or a failed test saying how to install it.
fn tool(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` is not on PATH; {INSTALL_HINT}"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}

/// A URL on 127.0.0.1 where nothing listens (the port was free a moment ago), for provider errors.
pub fn closed_port_url() -> String {
    format!("http://127.0.0.1:{}/status", free_port())
}

fn number(v: &serde_json::Value) -> f64 {
    // Prometheus sends sample values as strings, including "NaN" and "+Inf", which Rust parses.
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a Prometheus sample value: {v}"))
}

/// A plain HTTP/1.0 GET (the server closes the connection after answering): (status, body).
fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let code = response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}
