//! `cargo bench --bench daemon`: N AnalysisRuns of one Prometheus metric at a 10 s interval for M seconds,
//! executed by the real `canaryd run` binary in a child process against the fake API server and a fake
//! Prometheus (wiremock) served by this process, with 100 distinct queries shared across the runs. The daemon
//! being a process of its own, its CPU and memory are measured alone, and the fakes are scheduled by the OS
//! next to it as a real API server and Prometheus would be. Prints: lag between due time and measurement
//! start (p50/p99: the query's arrival at the fake Prometheus minus the second it was due; status timestamps
//! have one-second resolution, so every due time is a whole second), decision latency from a measurement that
//! trips a limit (the later of its due time and its query reaching Prometheus) to the status patch that fails
//! the run reaching the API server (p50/p99: half-way through, one of the 100 queries starts answering 0, so
//! its runs, one in a hundred, trip failureLimit while the rest go on), the same from the last measurement of
//! the runs that reach their count (completion latency: these all end in the last interval, a burst of
//! run-ending writes), and the part of each spent inside the daemon (from the same start to the daemon's JSON
//! log line for that measurement, which it writes before the patch), the daemon's peak resident memory (VmHWM)
//! and CPU, and queries sent vs measurements taken. To explain them: the lag p99 minute by minute, the daemon's
//! reconcile errors and mean query duration, the size of its /metrics, this process's own CPU (the fakes'
//! share of the machine) and the machine's load average. The last line printed is one JSON object for
//! scripts: `runs`, `completed`, `created_s`, `lag_p50_ms`, `lag_p99_ms`, `decision_latency_p50_ms` and `_p99_ms`,
//! `completion_latency_p50_ms` and `_p99_ms`, `queries_sent`, `queries_per_distinct_query_per_interval` (against
//! `count` intervals), `queries_per_interval_spanned` (against the intervals each query's sends span: the runs'
//! creation over the first interval and their lag stretch that span past `count`),
//! `queries_repeated_within_window` (sends an answer still within the share window could have served),
//! `measurements`, `reconcile_errors`, `daemon_rss_mb` (peak), `daemon_cpu_cores`, `fake_cpu_cores`,
//! `load_average` and `valid`: false when the fakes used more than half a core or the runs could not be created
//! within their first interval, so the figures would measure the bench rather than canaryd.
//!
//! The runs are created evenly over the first interval (up to 64 creates in flight). Completion is read from
//! the daemon's log once a second; /metrics is scraped as a Prometheus would. CANARYD_BENCH_RUNS (default 500),
//! CANARYD_BENCH_SECONDS (default 60), CANARYD_BENCH_INTERVAL (default 10), CANARYD_BENCH_SHARE_WINDOW (the
//! daemon's `--prometheus-share-window` in seconds, default 1), CANARYD_BENCH_MAX_CONCURRENCY (its
//! `--prometheus-max-concurrency`, default 10), CANARYD_BENCH_SCRAPE (seconds between scrapes of /metrics,
//! default 15). CANARYD_BENCH_WRAP runs the daemon under a profiler (`"heaptrack -o /tmp/ht"`, with
//! `--features system-allocator` so heaptrack sees its allocations; see `canaryd_testkit::child_daemon`).

#![allow(clippy::disallowed_methods)] // Not the Clock: a benchmark measures real time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use canaryd::api::{AnalysisPhase, AnalysisRun};
use canaryd_testkit::child_daemon::{
    self, FAKES_BOTTLENECK, env, hundredths, kilobytes, percentile,
};
use canaryd_testkit::cli::Canaryd;
use canaryd_testkit::fake_apiserver;
use canaryd_testkit::harness::{self, Scrape};
use futures::{StreamExt, stream};
use kube::api::{Api, PostParams};
use serde_json::json;

const CANARYD: Canaryd = canaryd_testkit::canaryd!();
/// Creates in flight at once while the runs are created.
const CREATING: usize = 64;

/// The fakes stand in for an API server and a Prometheus that would run on machines of their own; here they
/// share two cores with the daemon, so they use the daemon's allocator too, to take as little of the
/// machine from it as they can.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let runs = env("CANARYD_BENCH_RUNS", 500) as usize;
    let seconds = env("CANARYD_BENCH_SECONDS", 60);
    let interval = env("CANARYD_BENCH_INTERVAL", 10).max(1);
    let count = (seconds / interval).max(1);
    let flags = DaemonFlags {
        share_window: env("CANARYD_BENCH_SHARE_WINDOW", 1).max(1),
        max_concurrency: env("CANARYD_BENCH_MAX_CONCURRENCY", 10).max(1),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(bench(runs, count, interval, flags));
}

/// The query of run `i`: one of 100 distinct texts, shared across the runs.
fn query_of(i: usize) -> String {
    format!(
        "sum(rate(http_requests_total{{service=\"svc-{}\"}}[1m]))",
        i % 100
    )
}

/// From the last measurement of each run to the status patch that ended it, and to the daemon's log line for
/// that measurement, in seconds.
#[derive(Default)]
struct Latencies {
    to_patch: Vec<f64>,
    to_logged: Vec<f64>,
}

/// The daemon's flags the bench varies.
#[derive(Clone, Copy)]
struct DaemonFlags {
    share_window: u64,
    max_concurrency: u64,
}

async fn bench(runs: usize, count: u64, interval: u64, flags: DaemonFlags) {
    // kube-apiserver's watch cache keeps up to 100 x 1024 changes (fewer only when older than 75 s); the fake's
    // default, 10,000, is two seconds of this bench's writes at 50,000 runs, after which a watch that fell
    // behind gets 410 Expired and relists every run.
    let server = fake_apiserver::FakeApiServer::builder()
        .history_limit(100 * 1024)
        // Requests are read for when each status patch arrived, not for what it said: 600,000 bodies of
        // several kB each, kept to the end, grew this process by gigabytes.
        .request_bodies(false)
        .start()
        .await;
    let client = server.client().await;
    let prom = harness::FakePrometheus::start(harness::Answer::Scalar(1.0)).await;
    let api: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");

    let log = tempfile::NamedTempFile::new().expect("a file for the daemon's log");
    let args = [
        format!("--prometheus-share-window={}s", flags.share_window),
        format!("--prometheus-max-concurrency={}", flags.max_concurrency),
    ];
    let (daemon, metrics_addr) = child_daemon::spawn(CANARYD, &server, &args, &log);
    let load_at_start = load_average();
    let cpu_before = daemon.cpu_seconds();
    let fakes_cpu_before = child_daemon::cpu_seconds(std::process::id());
    let wall = Instant::now();
    // Created evenly over one interval, as runs that start independently are: every second of the interval
    // then has its share of due measurements (all of them due in the same few seconds is another test).
    let spacing = Duration::from_secs(interval) / u32::try_from(runs.max(1)).unwrap_or(u32::MAX);
    let start = tokio::time::Instant::now();
    // Each create is sent at its time, up to CREATING at once: one after the other, tens of thousands of
    // creates would not fit in one interval.
    stream::iter(0..runs)
        .map(|i| {
            let (api, prom) = (&api, &prom);
            async move {
                tokio::time::sleep_until(start + spacing * u32::try_from(i).unwrap_or(u32::MAX))
                    .await;
                let r = harness::run(
                    &format!("bench-{i}"),
                    &prom.uri(),
                    json!({
                        "interval": format!("{interval}s"),
                        "count": count,
                        "successCondition": "result >= 0.5",
                        "provider": {"prometheus": {"query": query_of(i)}}
                    }),
                );
                api.create(&PostParams::default(), &r)
                    .await
                    .expect("a run is created");
            }
        })
        .buffer_unordered(CREATING)
        .collect::<()>()
        .await;
    let created = wall.elapsed();
    // First measurements happen on creation, not at a whole second: leave them out of the lag.
    let scheduled_from = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1);
    // Completion as the daemon's log tells it, read once a second where the last read ended: a watch of every
    // run from here would load this process (the fakes' home) with decoding every status, and reading
    // /metrics every second would load the daemon with rendering every run's series. /metrics is scraped as
    // a Prometheus would, every CANARYD_BENCH_SCRAPE seconds.
    let limit = Duration::from_secs(count * interval + 120);
    // Half-way through, one of the 100 queries starts answering 0: its runs (one in a hundred) fail their
    // next measurement, which trips failureLimit (Argo's default, 0) while the other runs go on.
    let trip_at = start + Duration::from_secs(count / 2 * interval);
    let mut tripped = false;
    let mut completed = 0;
    let scrape_every = Duration::from_secs(env("CANARYD_BENCH_SCRAPE", 15).max(1));
    let mut ended = LogTail::of(&log);
    let mut scrapes = Scrapes::default();
    let mut next_scrape = tokio::time::Instant::now();
    while completed < runs && wall.elapsed() < limit {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = tokio::time::Instant::now();
        if !tripped && now >= trip_at {
            prom.set_for(&query_of(0), harness::Answer::Scalar(0.0));
            tripped = true;
        }
        if now >= next_scrape {
            scrapes.scrape(metrics_addr).await;
            next_scrape = now + scrape_every;
        }
        completed += ended.count(COMPLETED);
    }
    let elapsed = wall.elapsed();
    let cpu = daemon.cpu_seconds() - cpu_before;
    let fakes_cpu = child_daemon::cpu_seconds(std::process::id()) - fakes_cpu_before;
    let peak_rss = daemon.peak_rss();
    let queries = prom.queries();
    let scrape = Scrape::samples_of(
        metrics_addr,
        &[
            "canaryd_measurements_total",
            "canaryd_reconcile_errors_total",
            "canaryd_provider_query_duration_seconds_sum",
            "canaryd_provider_query_duration_seconds_count",
        ],
    )
    .await;
    let measurements = scrape.sum("canaryd_measurements_total", &[]);
    let errors = scrape.sum("canaryd_reconcile_errors_total", &[]);
    let by_reason = scrape.by_label("canaryd_reconcile_errors_total", "reason");
    let query_mean = scrape.sum("canaryd_provider_query_duration_seconds_sum", &[])
        / scrape.sum("canaryd_provider_query_duration_seconds_count", &[]);
    daemon.stop();
    let logged = last_measured(&std::fs::read_to_string(log.path()).unwrap_or_default());

    let arrivals = prom.arrivals.lock().map(|a| a.clone()).unwrap_or_default();
    // The lag of every scheduled query, and the same lags minute by minute: whether it drifts as the
    // statuses grow and the run goes on.
    let mut lags: Vec<f64> = Vec::new();
    let mut by_minute: Vec<Vec<f64>> = Vec::new();
    for (_, at) in arrivals.iter().filter(|(_, at)| *at > scheduled_from) {
        let lag = f64::from(at.subsec_nanosecond()) / 1e9;
        let minute = usize::try_from(at.duration_since(scheduled_from).as_secs() / 60).unwrap_or(0);
        if by_minute.len() <= minute {
            by_minute.resize_with(minute + 1, Vec::new);
        }
        by_minute[minute].push(lag);
        lags.push(lag);
    }
    // The last status patch of each run: the one that completed it. canaryd's CRDs, like Argo's, keep status in
    // the object, so the patch goes to the run itself (`/status` where an older CRD declares the subresource).
    let mut completing_patch: HashMap<String, jiff::Timestamp> = HashMap::new();
    server.each_request(|r| {
        let path = r.path.strip_suffix("/status").unwrap_or(&r.path);
        if r.method == "PATCH"
            && let Some(name) = path
                .strip_prefix("/apis/argoproj.io/v1alpha1/namespaces/")
                .and_then(|p| p.split_once("/analysisruns/"))
                .map(|(_, name)| name)
        {
            let at = completing_patch.entry(name.to_string()).or_insert(r.at);
            *at = (*at).max(r.at);
        }
    });
    // When each query text reached Prometheus, in order.
    let mut asked_at: HashMap<&str, Vec<jiff::Timestamp>> = HashMap::new();
    for (query, at) in &arrivals {
        asked_at.entry(query.as_str()).or_default().push(*at);
    }
    for times in asked_at.values_mut() {
        times.sort();
    }
    // Per query text, by the unix second each send reached Prometheus (the gate shares by whole seconds): the
    // sends made while an answer to it could still have served (less than the share window after its last
    // send), and how many intervals its sends span (runs created over one interval, each measuring `count`
    // times from its own start and drifting by its lag, span `count` intervals and part of one more).
    let (mut repeated, mut spanned) = (0usize, 0i64);
    let window = i64::try_from(flags.share_window).unwrap_or(i64::MAX);
    let step = i64::try_from(interval).unwrap_or(i64::MAX);
    for times in asked_at.values() {
        let seconds: Vec<i64> = times.iter().map(|t| t.as_second()).collect();
        repeated += seconds.windows(2).filter(|p| p[1] - p[0] < window).count();
        if let (Some(first), Some(last)) = (seconds.first(), seconds.last()) {
            spanned += (last - first) / step + 1;
        }
    }
    let mut taken = 0usize;
    // By how the run ended: tripped a limit (Failed), or reached its count (Successful).
    let mut latencies: HashMap<AnalysisPhase, Latencies> = HashMap::new();
    for i in 0..runs {
        let name = format!("bench-{i}");
        // How the run ended, and when its last measurement started.
        let (mut phase, mut last_started) = (None, None);
        if let Some(run) = server.get::<AnalysisRun>("default", &name) {
            phase = run.status.as_ref().and_then(|s| s.phase);
            let measurements: Vec<_> = run
                .status
                .iter()
                .flat_map(|s| s.metric_results.iter().flatten())
                .flat_map(|r| r.measurements.iter())
                .collect();
            taken += measurements.len();
            last_started = measurements
                .last()
                .and_then(|m| m.started_at.as_ref())
                .map(|at| at.0);
        }
        let query = query_of(i);
        // The completing measurement started at its due time (its startedAt) and had its answer once its
        // query reached Prometheus: the last one of its text before the patch, unless an answer shared from
        // an earlier second (--prometheus-share-window) served it at once.
        let (Some(patched), Some(due), Some(phase)) =
            (completing_patch.get(&name), last_started, phase)
        else {
            continue;
        };
        let latency = latencies.entry(phase).or_default();
        let Some(asked) = asked_at
            .get(query.as_str())
            .and_then(|times| times[..times.partition_point(|at| at <= patched)].last())
            .map(|at| (*at).max(due))
        else {
            continue;
        };
        latency
            .to_patch
            .push(patched.duration_since(asked).as_secs_f64());
        if let Some(logged) = logged.get(&name) {
            latency
                .to_logged
                .push(logged.duration_since(asked).as_secs_f64());
        }
    }
    lags.sort_by(f64::total_cmp);
    println!(
        "canaryd daemon bench: {runs} runs x {count} measurements at {interval}s, 100 distinct queries (one answering 0 from {}s on), --prometheus-share-window={}s --prometheus-max-concurrency={}",
        count / 2 * interval,
        flags.share_window,
        flags.max_concurrency
    );
    println!("  runs created in         {:.1} s", created.as_secs_f64());
    println!(
        "  runs completed          {completed} / {runs} in {:.1} s (the daemon's log read once a second)",
        elapsed.as_secs_f64()
    );
    println!(
        "  lag due -> query sent   p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms  ({} scheduled queries)",
        percentile(&lags, 0.5) * 1e3,
        percentile(&lags, 0.99) * 1e3,
        lags.last().copied().unwrap_or(f64::NAN) * 1e3,
        lags.len()
    );
    let minutes: Vec<String> = by_minute
        .iter_mut()
        .map(|lags| {
            lags.sort_by(f64::total_cmp);
            format!("{:.0}", percentile(lags, 0.99) * 1e3)
        })
        .collect();
    println!("  lag p99 minute by minute {} ms", minutes.join(" / "));
    // p50 and p99 in ms by how the runs ended, for the JSON line.
    let mut ended = serde_json::Map::new();
    for (phase, what, key) in [
        (AnalysisPhase::Failed, "decision latency  ", "decision"),
        (
            AnalysisPhase::Successful,
            "completion latency",
            "completion",
        ),
    ] {
        let mut latency = latencies.remove(&phase).unwrap_or_default();
        latency.to_patch.sort_by(f64::total_cmp);
        latency.to_logged.sort_by(f64::total_cmp);
        for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
            let ms = (percentile(&latency.to_patch, p) * 1e3).round();
            ended.insert(format!("{key}_latency_{name}_ms"), json!(ms));
        }
        println!(
            "  {what}      p50 {:.1} ms  p99 {:.1} ms  ({} runs ended {phase}: their last measurement due and its query at Prometheus -> its status patch at the API server)",
            percentile(&latency.to_patch, 0.5) * 1e3,
            percentile(&latency.to_patch, 0.99) * 1e3,
            latency.to_patch.len()
        );
        println!(
            "    of which in the daemon  p50 {:.1} ms  p99 {:.1} ms  (the same start -> the daemon's log line for that measurement, written before its patch)",
            percentile(&latency.to_logged, 0.5) * 1e3,
            percentile(&latency.to_logged, 0.99) * 1e3,
        );
    }
    println!(
        "  queries sent            {queries} for {measurements} measurements recorded ({taken} in status), {:.1}x shared; one per distinct query per interval would be {}",
        measurements / queries.max(1) as f64,
        100 * count
    );
    println!(
        "    per interval spanned  {spanned} intervals spanned by each query's sends, summed ({:.2}x); {repeated} sent again less than the share window after the last",
        queries as f64 / spanned.max(1) as f64,
    );
    let reasons: Vec<String> = by_reason
        .iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    println!(
        "  reconcile errors        {}{}",
        errors as u64,
        if reasons.is_empty() {
            String::new()
        } else {
            format!(" ({})", reasons.join(", "))
        }
    );
    println!(
        "  query duration          mean {:.1} ms  (the daemon's canaryd_provider_query_duration_seconds)",
        query_mean * 1e3
    );
    println!(
        "  daemon CPU              {cpu:.1} s over {:.1} s wall ({:.0}% of one core on average)",
        elapsed.as_secs_f64(),
        100.0 * cpu / elapsed.as_secs_f64().max(1e-9)
    );
    println!("  daemon peak RSS (VmHWM) {peak_rss}");
    println!(
        "  /metrics scraped        {} times, every {} s as a Prometheus would: up to {:.1} MB, the slowest in {:.0} ms",
        scrapes.count,
        scrape_every.as_secs(),
        scrapes.largest_bytes as f64 / 1e6,
        scrapes.slowest.as_secs_f64() * 1e3
    );
    let fake_cores = child_daemon::print_fakes_cpu(fakes_cpu, elapsed);
    // Creation that overran the interval bunches the runs' due times: another load than the one meant.
    let created_on_time = created <= Duration::from_secs(interval + 1);
    if !created_on_time {
        println!(
            "  runs created in {:.1} s, over the {interval} s interval they were meant to spread over: not valid",
            created.as_secs_f64()
        );
    }
    let load = load_average();
    println!(
        "  machine load average   {load_at_start} at the start, {load} at the end (1, 5, 15 min; 2 cores shared with other work)"
    );
    let mut summary = json!({
        "runs": runs,
        "completed": completed,
        "created_s": hundredths(created.as_secs_f64()),
        "lag_p50_ms": (percentile(&lags, 0.5) * 1e3).round(),
        "lag_p99_ms": (percentile(&lags, 0.99) * 1e3).round(),
        "queries_sent": queries,
        "queries_per_distinct_query_per_interval": hundredths(queries as f64 / (100 * count) as f64),
        "queries_per_interval_spanned": hundredths(queries as f64 / spanned.max(1) as f64),
        "queries_repeated_within_window": repeated,
        "measurements": measurements as u64,
        "reconcile_errors": errors as u64,
        "daemon_rss_mb": kilobytes(&peak_rss).map(|kb| (kb / 1024.0).round()),
        "daemon_cpu_cores": hundredths(cpu / elapsed.as_secs_f64().max(1e-9)),
        "fake_cpu_cores": hundredths(fake_cores),
        "load_average": load,
        "valid": fake_cores <= FAKES_BOTTLENECK && created_on_time,
    });
    if let Some(summary) = summary.as_object_mut() {
        summary.extend(ended);
    }
    println!("{summary}");
}

/// The machine's load averages over 1, 5 and 15 minutes, as /proc/loadavg prints them.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// When the daemon logged each run's last measurement (`Measured`, at info, JSON), by run name: the time the
/// answer was in hand inside the daemon, before the status patch that records it.
fn last_measured(log: &str) -> HashMap<String, jiff::Timestamp> {
    #[derive(serde::Deserialize)]
    struct Line {
        timestamp: jiff::Timestamp,
        fields: Fields,
    }
    #[derive(serde::Deserialize)]
    struct Fields {
        message: String,
        run: Option<String>,
    }
    let mut last: HashMap<String, jiff::Timestamp> = HashMap::new();
    for line in log.lines() {
        let Ok(Line { timestamp, fields }) = serde_json::from_str(line) else {
            continue;
        };
        let Some(run) = fields.run.filter(|_| fields.message == "Measured") else {
            continue;
        };
        let name = run.rsplit('/').next().unwrap_or_default().to_string();
        let at = last.entry(name).or_insert(timestamp);
        *at = (*at).max(timestamp);
    }
    last
}

/// The message of the daemon's log line for a run it completed.
const COMPLETED: &str = "\"message\":\"AnalysisRun completed\"";

/// The daemon's log, read from where the last read ended.
struct LogTail {
    file: Option<std::fs::File>,
    /// The start of a line not yet complete.
    partial: Vec<u8>,
}

impl LogTail {
    fn of(log: &tempfile::NamedTempFile) -> LogTail {
        LogTail {
            file: log.reopen().ok(),
            partial: Vec::new(),
        }
    }

    /// How many of the lines logged since the last call contain `text`.
    fn count(&mut self, text: &str) -> usize {
        let mut read = std::mem::take(&mut self.partial);
        if let Some(file) = &mut self.file {
            let _ = std::io::Read::read_to_end(file, &mut read);
        }
        let lines = read.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.partial = read.split_off(lines);
        String::from_utf8_lossy(&read).matches(text).count()
    }
}

/// `/metrics` scraped as a Prometheus would scrape the daemon: how large it was and how long it took.
#[derive(Default)]
struct Scrapes {
    count: usize,
    largest_bytes: usize,
    slowest: Duration,
}

impl Scrapes {
    async fn scrape(&mut self, addr: std::net::SocketAddr) {
        let started = Instant::now();
        // Counted as it arrives, not kept: at 50,000 runs each scrape is over 100 MB, and a buffer of that size
        // made afresh each time was about 3% of this process's CPU, which is the fakes' budget.
        let mut body = 0;
        if let Ok(mut response) = reqwest::get(format!("http://{addr}/metrics")).await {
            while let Ok(Some(chunk)) = response.chunk().await {
                body += chunk.len();
            }
        }
        self.count += 1;
        self.largest_bytes = self.largest_bytes.max(body);
        self.slowest = self.slowest.max(started.elapsed());
    }
}
