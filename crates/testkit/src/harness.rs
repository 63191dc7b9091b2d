//! The daemon harness for `canaryd run` (the daemon tests and the daemon bench): the daemon run in-process as
//! a task that can be stopped gracefully or aborted (a crash), on the wall clock or on a manual clock moved
//! from one of its wake-ups to the next ([`run_clock_until`]), a scripted Prometheus on wiremock, AnalysisRun
//! builders and polling helpers. TEST FIXTURE ONLY.

#![allow(clippy::disallowed_methods)] // Not the Clock: the harness waits for the daemon on real time.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use canaryd::api::AnalysisRun;
use canaryd::controller::{Clients, Config, Context, Daemon};
use canaryd::k8s::lease::LeaseConfig;
use canaryd::time::Clock;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// A daemon running as a task of this test.
pub struct Running {
    pub ctx: Arc<Context>,
    pub metrics_addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// SIGTERM: finish in-flight patches, release the lease, return.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), &mut self.task).await;
    }

    /// A crash: the task is dropped wherever it is; nothing is released.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    pub async fn scrape(&self, path: &str) -> (u16, String) {
        let url = format!("http://{}{path}", self.metrics_addr);
        match reqwest::get(&url).await {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(_) => (0, String::new()),
        }
    }

    /// The value of one sample of `/metrics`, 0 when absent (see [`metric_at`]).
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_at(self.metrics_addr, name, labels).await
    }
}

/// The sum of the samples of `name` carrying `labels`, from the `/metrics` of a daemon serving on `addr`
/// (parsed with prometheus-parse, as Prometheus would read it); 0 when absent.
pub async fn metric_at(addr: std::net::SocketAddr, name: &str, labels: &[(&str, &str)]) -> f64 {
    Scrape::of(addr).await.sum(name, labels)
}

/// One scrape of a daemon's `/metrics`, parsed once for as many look-ups as the caller needs.
pub struct Scrape(prometheus_parse::Scrape);

impl Scrape {
    /// `/metrics` of the daemon serving on `addr`; empty when it cannot be read.
    pub async fn of(addr: std::net::SocketAddr) -> Scrape {
        Scrape::parse(&scrape_text(addr).await, |_| true)
    }

    /// Only the samples named `names` (their TYPE and HELP lines left out: every value reads as untyped), for
    /// a caller that polls a daemon watching tens of thousands of runs, whose per-run series would cost more
    /// to parse than the daemon spends serving them.
    pub async fn samples_of(addr: std::net::SocketAddr, names: &[&str]) -> Scrape {
        Scrape::parse(&scrape_text(addr).await, |line| {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            names.contains(&name)
        })
    }

    fn parse(text: &str, keep: impl Fn(&str) -> bool) -> Scrape {
        let lines = text.lines().filter(|l| keep(l)).map(|l| Ok(l.to_string()));
        Scrape(prometheus_parse::Scrape::parse(lines).expect("/metrics parses"))
    }

    /// The sums of the samples of `name` by the value of their `label`.
    pub fn by_label(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let mut sums = BTreeMap::new();
        for s in self.0.samples.iter().filter(|s| s.metric == name) {
            if let Some(value) = s.labels.get(label) {
                *sums.entry(value.to_string()).or_default() += value_of(s);
            }
        }
        sums
    }

    /// The sum of the samples of `name` carrying `labels`; 0 when absent.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(value_of)
            .sum()
    }
}

/// A counter's, gauge's or untyped sample's value; 0 for the others.
fn value_of(sample: &prometheus_parse::Sample) -> f64 {
    match sample.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => v,
        _ => 0.0,
    }
}

async fn scrape_text(addr: std::net::SocketAddr) -> String {
    match reqwest::get(format!("http://{addr}/metrics")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// What most daemon tests start from: a fake API server serving Argo's kinds as `crds` define them, a client of
/// it, and a scripted Prometheus answering `answer`.
pub async fn cluster(
    crds: crate::fake_apiserver::CrdSet,
    answer: Answer,
) -> (
    crate::fake_apiserver::FakeApiServer,
    kube::Client,
    FakePrometheus,
) {
    let server = crate::fake_apiserver::FakeApiServer::builder()
        .crds(crds)
        .start()
        .await;
    let client = server.client().await;
    let prom = FakePrometheus::start(answer).await;
    (server, client, prom)
}

/// Runs each daemon test once with each set of CRDs canaryd must work with, since a cluster has either canaryd's
/// or Argo Rollouts' installed: for every `async fn NAME(crds: CrdSet)` listed, the tests `NAME::with_canaryd_crds`
/// and `NAME::with_argo_crds`. A test left out of the list is an unused function, which the lint refuses.
#[macro_export]
macro_rules! with_each_crd_set {
    ($($test:ident),+ $(,)?) => {
        $(
            mod $test {
                #[test]
                fn with_canaryd_crds() {
                    $crate::harness::run_test(super::$test($crate::fake_apiserver::CrdSet::Canaryd));
                }

                #[test]
                fn with_argo_crds() {
                    $crate::harness::run_test(super::$test($crate::fake_apiserver::CrdSet::Argo));
                }
            }
        )+
    };
}

/// How long a finished or failed test waits for its runtime's tasks (daemons, fake servers) to wind down.
const WIND_DOWN: Duration = Duration::from_secs(5);

/// Runs a daemon test on a two-worker runtime, as `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`
/// would, but never waits more than [`WIND_DOWN`] for the runtime to stop: a runtime dropped after a panic waits
/// without limit for every worker to finish the poll it is in and for every blocking task, so one stuck task
/// (a daemon or fake server left running by the failed test) would keep the process alive long after the
/// failure was reported.
pub fn run_test(test: impl Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a test runtime");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runtime.block_on(test)));
    runtime.shutdown_timeout(WIND_DOWN);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

pub fn config() -> Config {
    Config {
        namespaces: vec![],
        instance_id: None,
        prometheus: None,
        prometheus_max_concurrency: 10,
        prometheus_share_window: Duration::from_secs(1),
        metrics_addr: "127.0.0.1:0".parse().expect("an address"),
        leader_election: None,
        identity: "test".to_string(),
        rollouts: false,
        notifications_namespace: None,
        routers: Default::default(),
        self_service_notifications: false,
        rollout_threads: 100,
        watch_alb_ingresses: false,
    }
}

/// Short lease timings so fail-over tests take seconds.
pub fn elected(identity: &str) -> Config {
    Config {
        leader_election: Some(LeaseConfig {
            name: "canaryd".into(),
            namespace: "default".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(300),
        }),
        identity: identity.into(),
        ..config()
    }
}

pub async fn spawn(clients: impl Into<Clients>, config: Config) -> Running {
    spawn_on(clients, config, Arc::new(Clock::Wall)).await
}

/// A daemon reading time and sleeping on `clock` (a manual one: see [`run_clock_until`]).
pub async fn spawn_on(clients: impl Into<Clients>, config: Config, clock: Arc<Clock>) -> Running {
    let daemon = Daemon::bind_on(clients, config, clock)
        .await
        .expect("the daemon binds");
    let ctx = daemon.context();
    let metrics_addr = daemon.metrics_addr().expect("a bound address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(daemon.run(async move {
        let _ = stopped.await;
    }));
    Running {
        ctx,
        metrics_addr,
        stop: Some(stop),
        task,
    }
}

/// What the scripted Prometheus answers.
#[derive(Clone, Debug)]
pub enum Answer {
    Scalar(f64),
    /// A one-sample vector, as `sum(...)` answers.
    Vector(f64),
    Down,
}

/// What the scripted Prometheus answers: one [`Answer`] for every query but those given one of their own.
#[derive(Debug)]
struct Answers {
    all: Answer,
    by_query: HashMap<String, Answer>,
}

/// A Prometheus that answers every instant query with the current [`Answer`] and counts queries.
#[derive(Clone)]
pub struct FakePrometheus {
    pub server: Arc<MockServer>,
    answer: Arc<Mutex<Answers>>,
    queries: Arc<AtomicUsize>,
    pub seen: Arc<Mutex<Vec<Request>>>,
    /// Every query and when it arrived.
    pub arrivals: Arc<Mutex<Vec<(String, jiff::Timestamp)>>>,
}

struct Scripted {
    answer: Arc<Mutex<Answers>>,
    queries: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Request>>>,
    arrivals: Arc<Mutex<Vec<(String, jiff::Timestamp)>>>,
}

impl Respond for Scripted {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.queries.fetch_add(1, Ordering::SeqCst);
        let query = url::form_urlencoded::parse(&request.body)
            .find(|(k, _)| k == "query")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        if let Ok(mut arrivals) = self.arrivals.lock() {
            arrivals.push((query.clone(), jiff::Timestamp::now()));
        }
        if let Ok(mut seen) = self.seen.lock()
            && seen.len() < 1000
        {
            seen.push(request.clone());
        }
        let answer = self
            .answer
            .lock()
            .map(|a| a.by_query.get(&query).unwrap_or(&a.all).clone())
            .unwrap_or(Answer::Down);
        match answer {
            Answer::Scalar(v) => ResponseTemplate::new(200).set_body_json(json!({
                "status": "success",
                "data": {"resultType": "scalar", "result": [1.0, v.to_string()]}
            })),
            Answer::Vector(v) => ResponseTemplate::new(200).set_body_json(json!({
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, v.to_string()]}]}
            })),
            Answer::Down => ResponseTemplate::new(503).set_body_string("down for maintenance"),
        }
    }
}

impl FakePrometheus {
    pub async fn start(answer: Answer) -> FakePrometheus {
        let server = MockServer::start().await;
        let answer = Arc::new(Mutex::new(Answers {
            all: answer,
            by_query: HashMap::new(),
        }));
        let queries = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        Mock::given(wiremock::matchers::path("/api/v1/query"))
            .respond_with(Scripted {
                answer: answer.clone(),
                queries: queries.clone(),
                seen: seen.clone(),
                arrivals: arrivals.clone(),
            })
            .mount(&server)
            .await;
        FakePrometheus {
            server: Arc::new(server),
            answer,
            queries,
            seen,
            arrivals,
        }
    }

    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// From now on, every query without an answer of its own gets `answer`.
    pub fn set(&self, answer: Answer) {
        if let Ok(mut a) = self.answer.lock() {
            a.all = answer;
        }
    }

    /// From now on, `query` (the exact text) gets `answer`.
    pub fn set_for(&self, query: &str, answer: Answer) {
        if let Ok(mut a) = self.answer.lock() {
            a.by_query.insert(query.to_string(), answer);
        }
    }

    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

/// An AnalysisRun with one Prometheus metric.
pub fn run(name: &str, address: &str, metric: Value) -> AnalysisRun {
    let mut m = json!({
        "name": "rate",
        "provider": {"prometheus": {"address": address, "query": "sum(rate(x[1m]))"}},
    });
    merge(&mut m, metric);
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"metrics": [m]},
    }))
    .expect("a valid AnalysisRun")
}

pub fn merge(into: &mut Value, patch: Value) {
    match (into, patch) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

pub async fn create(client: &kube::Client, run: &AnalysisRun) -> AnalysisRun {
    let api: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), run)
        .await
        .expect("the run is created")
}

/// Polls `check` every 50 ms until it returns `Some`, or panics after `within` with `what`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_explained(within, what, check, String::new).await
}

/// [`eventually`], whose panic on a timeout also carries `explain()`: what was seen instead.
pub async fn eventually_explained<T, F, Fut>(
    within: Duration,
    what: &str,
    mut check: F,
    explain: impl Fn() -> String,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        // One check that never answers (a request to a stuck server) must not outlast the wait either.
        let left = within.saturating_sub(start.elapsed());
        if let Ok(Some(v)) = tokio::time::timeout(left, check()).await {
            return v;
        }
        assert!(
            start.elapsed() < within,
            "timed out after {within:?} waiting for {what}{}",
            explain()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How long the fake API server must be still for the daemon to count as quiet (see [`run_clock_until`]).
const QUIET: Duration = Duration::from_millis(100);

/// Real time [`run_clock_until`] waits at most.
const CLOCK_RUN_LIMIT: Duration = Duration::from_secs(40);

/// A manual clock starting at the real time's whole second (statuses store whole seconds, so times the daemon
/// writes can be compared with it exactly).
pub fn manual_clock() -> Arc<Clock> {
    Arc::new(Clock::manual_at(canaryd::time::whole_second(
        jiff::Timestamp::now(),
    )))
}

/// Runs a daemon on the manual `clock` until `check` returns `Some`: whenever the fake API server has seen no
/// request and no write, and has had no pod on its way to Ready, for [`QUIET`] (the daemon has done what the
/// clock's time asks of it, and the cluster has answered), the clock jumps to the
/// earliest deadline one of the daemon's sleepers waits for. Panics after [`CLOCK_RUN_LIMIT`] of real time,
/// naming `what` and the clock's time.
pub async fn run_clock_until<T>(
    server: &crate::fake_apiserver::FakeApiServer,
    clock: &Clock,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let manual = clock
        .manual()
        .expect("run_clock_until moves a manual clock");
    let all = crate::fake_apiserver::RequestPattern::new("*", "");
    let start = Instant::now();
    // Requests, writes, and pods on their way to Ready (the simulated ReplicaSet controller's real-time work).
    let activity = || {
        (
            server.request_count(&all),
            server.resource_version(),
            server.pods_starting(),
        )
    };
    let mut seen = activity();
    let mut quiet_since = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            start.elapsed() < CLOCK_RUN_LIMIT,
            "timed out after {CLOCK_RUN_LIMIT:?} of real time waiting for {what}; the clock is at {}, its next \
             wake-up at {:?}",
            manual.now(),
            manual.next_wakeup()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
        let now = activity();
        if now != seen || now.2 > 0 {
            seen = now;
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= QUIET {
            manual.advance_to_next();
            quiet_since = Instant::now();
        }
    }
}

/// The run's first metric result, once it has one.
pub fn first_result(run: &canaryd::api::AnalysisRun) -> Option<canaryd::api::MetricResult> {
    run.status
        .as_ref()
        .and_then(|st| st.metric_results.as_ref())
        .and_then(|r| r.first())
        .cloned()
}

/// The run `name` in `default`, once its phase is a completed one.
fn completed(
    server: &crate::fake_apiserver::FakeApiServer,
    name: &str,
) -> Option<canaryd::api::AnalysisRun> {
    server
        .get::<canaryd::api::AnalysisRun>("default", name)
        .filter(|r| {
            r.status
                .as_ref()
                .and_then(|st| st.phase)
                .is_some_and(|p| p.is_completed())
        })
}

/// Waits until the run in `default` has a completed phase and returns it.
pub async fn finished(
    server: &crate::fake_apiserver::FakeApiServer,
    name: &str,
    within: Duration,
) -> canaryd::api::AnalysisRun {
    eventually(within, &format!("{name} to complete"), || async {
        completed(server, name)
    })
    .await
}

/// [`finished`] for a daemon on the manual `clock`, moved meanwhile ([`run_clock_until`]).
pub async fn finished_on(
    server: &crate::fake_apiserver::FakeApiServer,
    clock: &Clock,
    name: &str,
) -> canaryd::api::AnalysisRun {
    run_clock_until(server, clock, &format!("{name} to complete"), || {
        completed(server, name)
    })
    .await
}
