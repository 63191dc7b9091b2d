//! `cargo bench --bench rollouts`: N Rollouts of 10 replicas (CANARYD_BENCH_ROLLOUTS, default 2000; the daemon's
//! `--rollout-threads` from CANARYD_BENCH_ROLLOUT_THREADS, its default when unset), each
//! behind an Istio VirtualService of its own (or, with CANARYD_BENCH_ROUTER=alb, an AWS ALB Ingress of its own,
//! the canary's weight in the action canaryd writes into its annotation), updated all at once and taken through
//! `setWeight: 20, pause: {duration: 10s}, analysis, setWeight: 60, pause: {duration: 10s}` to promotion by the
//! real `canaryd run --rollouts` binary in a child process, against the fake API server (with its simulated
//! ReplicaSet controller: new pods available 200 ms after they are asked for, counted but not stored as Pod
//! objects, which nothing in this scenario reads) and a fake Prometheus (wiremock) served by this process. The analysis is `rollout::cluster::template`: one query a second, twice.
//!
//! **Step latency** is the time from the moment a step is due to complete, as the cluster shows it, to the
//! commit at the fake API server of the first Rollout status whose `currentStepIndex` is past that step. Due:
//! - `setWeight: W`: the later of the commit of the router object's version giving the canary W, and of the
//!   canary ReplicaSet's status with at least ceil(W% of 10) available pods (the step's two conditions);
//! - `pause: {duration: 10s}`: the pause condition's `startTime` as stored, plus 10 s (the planner, as Argo's,
//!   ends the pause once now is after it);
//! - `analysis`: the commit of the step's AnalysisRun status with a completed phase.
//!
//! Every time is when the fake API server committed a version, read as it commits it (`on_commit`; the bench
//! keeps a few fields of each, not the versions, so 10,000 Rollouts fit in memory). **API
//! writes per step per Rollout** are the Rollout controller's requests recorded by the fake API server from
//! the update on (everything but GETs, the AnalysisRun controller's run writes and Events), divided by the N
//! Rollouts and the 5 steps; promotion's writes after the last step count too, until every old ReplicaSet is
//! scaled to 0 (after Argo's 30 s scale-down delay). They are broken down by kind:
//! Rollout status, Rollout spec/metadata, ReplicaSet create, scale (a version whose `spec.replicas` changed,
//! its annotations with it or not), annotate (only its metadata changed) and unchanged (a patch that made no
//! new version), Service, router and AnalysisRun create. Also printed: the
//! daemon's peak resident memory (VmHWM) and its average CPU over the update, this process's CPU (the fakes'),
//! and how many Rollouts were promoted.
//! Targets (issues 18, 19 and 34), printed next to the figures, not asserted: step latency p99 < 1 s, API
//! writes per step per Rollout <= 3, router writes per weight change 1, RSS < 400 MB, CPU < 1 core.
//!
//! The last line printed is one JSON object for scripts: `rollouts`, `router`, `promoted`, `step_latency_p50_ms`,
//! `step_latency_p99_ms`, `api_writes_per_step`, `writes_per_step_by_kind`, `events_lost` (the daemon's
//! `canaryd_reconcile_errors_total{reason="event"}`), `daemon_rss_mb` (peak), `daemon_cpu_cores`,
//! `fake_cpu_cores` (this process: fake API server, simulated ReplicaSet controller, fake Prometheus) and
//! `valid`, false when the fakes used more than half a core, so the figures measure them rather than canaryd.
//!
//! Every wait is bounded: what did not finish is printed, and the figures are made from what did.
//! CANARYD_BENCH_WRAP runs the daemon under a profiler, as for the daemon bench (`canaryd_testkit::child_daemon`).

#![allow(clippy::disallowed_methods)] // Not the Clock: a benchmark measures real time.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use canaryd::api::rollout::RolloutStatus;
use canaryd::api::{AnalysisRun, Rollout};
use canaryd::routers::objects::VirtualService;
use canaryd_testkit::child_daemon::{
    self, FAKES_BOTTLENECK, env, hundredths, kilobytes, percentile,
};
use canaryd_testkit::cli::Canaryd;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern, Stored};
use canaryd_testkit::harness::{Answer, FakePrometheus, Scrape};
use canaryd_testkit::rollout::cluster::{
    POD_START, create_rollout, create_service_of, create_template, healthy_at, named,
    routed_through, set_image_of,
};
use canaryd_testkit::rollout::writes::{Tally, rollout_write};
use canaryd_testkit::router_objects;
use futures::{StreamExt, stream};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::PatchParams;
use serde::Deserialize;
use serde_json::{Value, json};

const CANARYD: Canaryd = canaryd_testkit::canaryd!();

/// The resource a read's path names: `rollouts` of `/apis/argoproj.io/v1alpha1/namespaces/b/rollouts/r-1`,
/// `replicasets` of a list.
fn read_resource(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    let at = parts
        .iter()
        .position(|p| *p == "namespaces")
        .map_or(parts.len().saturating_sub(2), |i| i + 2);
    parts.get(at).unwrap_or(&"?").to_string()
}

/// The fakes stand in for an API server and a Prometheus on machines of their own; here they share two cores
/// with the daemon, so they use the daemon's allocator too, to take as little of the machine from it as they can.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const REPLICAS: i32 = 10;
const PAUSE_SECONDS: i64 = 10;
/// Who the bench's own writes (the image updates) are from, so they are not counted as the daemon's.
const FIELD_MANAGER: &str = "canaryd-bench";

/// What each step waits for.
#[derive(Clone, Copy)]
enum Step {
    SetWeight(i64),
    Pause,
    Analysis,
}

const STEPS: [Step; 5] = [
    Step::SetWeight(20),
    Step::Pause,
    Step::Analysis,
    Step::SetWeight(60),
    Step::Pause,
];

fn steps() -> Value {
    json!([
        {"setWeight": 20},
        {"pause": {"duration": format!("{PAUSE_SECONDS}s")}},
        {"analysis": {"templates": [{"templateName": "success-rate"}]}},
        {"setWeight": 60},
        {"pause": {"duration": format!("{PAUSE_SECONDS}s")}},
    ])
}

fn main() {
    let rollouts = env("CANARYD_BENCH_ROLLOUTS", 2000).max(1) as usize;
    let router = match std::env::var("CANARYD_BENCH_ROUTER") {
        Err(_) => Router::Istio,
        Ok(name) => match [Router::Istio, Router::Alb]
            .into_iter()
            .find(|r| r.name() == name)
        {
            Some(router) => router,
            None => {
                eprintln!(
                    "CANARYD_BENCH_ROUTER: {name:?} is not a router the bench knows (istio, alb)"
                );
                std::process::exit(2);
            }
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(bench(rollouts, router));
}

fn name_of(i: usize) -> String {
    format!("web-{i}")
}

/// What routes each Rollout's traffic (CANARYD_BENCH_ROUTER): an Istio VirtualService (`istio`, the default) or
/// an AWS ALB Ingress (`alb`), one per Rollout.
#[derive(Clone, Copy)]
enum Router {
    Istio,
    Alb,
}

impl Router {
    /// As CANARYD_BENCH_ROUTER and the JSON line name it.
    fn name(self) -> &'static str {
        match self {
            Router::Istio => "istio",
            Router::Alb => "alb",
        }
    }

    fn object(self) -> &'static str {
        match self {
            Router::Istio => "VirtualService",
            Router::Alb => "ALB Ingress",
        }
    }

    fn objects(self) -> &'static str {
        match self {
            Router::Istio => "Istio VirtualServices",
            Router::Alb => "ALB Ingresses",
        }
    }

    /// Stores the Rollout `name`'s router object; returns its `trafficRouting`.
    fn install(self, server: &FakeApiServer, name: &str) -> Value {
        match self {
            Router::Istio => {
                let vsvc = format!("{name}-vsvc");
                server.put(&router_objects::virtual_service("default", &vsvc, name));
                json!({"istio": {"virtualService": {"name": vsvc}}})
            }
            Router::Alb => {
                server.put(&router_objects::alb_ingress("default", name));
                json!({"alb": {"ingress": name, "servicePort": 80}})
            }
        }
    }
}

/// Runs `requests` (futures of the bench's own API calls) 32 at a time, for `within` at most; returns how
/// many finished.
async fn all_of(
    within: Duration,
    requests: impl Iterator<Item = impl Future<Output = ()>>,
) -> usize {
    let mut done = 0;
    let mut calls = stream::iter(requests).buffer_unordered(32);
    let _ = tokio::time::timeout(within, async {
        while calls.next().await.is_some() {
            done += 1;
        }
    })
    .await;
    done
}

/// Polls `count` once a second until it reaches `target` or `within` has passed; returns the last count.
async fn until_all(within: Duration, target: usize, mut count: impl FnMut() -> usize) -> usize {
    let start = Instant::now();
    loop {
        let n = count();
        if n >= target || start.elapsed() >= within {
            return n;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn bench(n: usize, router: Router) {
    let server = FakeApiServer::builder()
        .crds(CrdSet::Argo)
        // Only counted, and at 10,000 Rollouts their bodies would take GBs.
        .request_bodies(false)
        .start()
        .await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    watch_versions(&server, &seen);
    let client = server.client().await;
    let prom = FakePrometheus::start(Answer::Scalar(1.0)).await;
    // No Pod objects: canaryd reads pods only for restarts and ephemeral metadata, which these Rollouts lack.
    let _replica_sets = server.replica_set_controller_without_pods(POD_START);
    create_template(&client, &prom).await;
    let wall = Instant::now();
    let limit = Duration::from_secs(60 + n as u64 / 20);
    let created = all_of(
        limit,
        (0..n).map(|i| {
            let (server, client) = (&server, &client);
            async move {
                let name = name_of(i);
                create_service_of(client, &format!("{name}-canary"), &name).await;
                create_service_of(client, &format!("{name}-stable"), &name).await;
                let rollout = named(&name, REPLICAS, "web:1", steps());
                let routing = router.install(server, &name);
                create_rollout(client, &routed_through(rollout, routing)).await;
            }
        }),
    )
    .await;
    println!(
        "canaryd rollouts bench: {n} Rollouts x {REPLICAS} replicas behind {}, steps setWeight 20, pause 10s, analysis, setWeight 60, pause 10s",
        router.objects()
    );
    println!(
        "  created                 {created} / {n} (Services, {}, Rollout) in {:.1} s",
        router.object(),
        wall.elapsed().as_secs_f64()
    );

    let log = tempfile::NamedTempFile::new().expect("a file for the daemon's log");
    let (daemon, metrics_addr) = child_daemon::spawn(CANARYD, &server, &daemon_args(), &log);
    let deployed = Instant::now();
    let healthy = until_all(limit, created, || {
        server.count::<Rollout>("default", |r| {
            status_of(r).is_some_and(|s| healthy_at(&s, None) && s.available_replicas == REPLICAS)
        })
    })
    .await;
    println!(
        "  first deploy Healthy    {healthy} / {created} in {:.1} s",
        deployed.elapsed().as_secs_f64()
    );
    let stable: HashMap<String, String> = server
        .list::<Rollout>("default")
        .into_iter()
        .filter_map(|r| Some((r.metadata.name?, r.status?.stable_rs)))
        .collect();

    // The update: every Rollout's image changed at once.
    let reconciles_before = Scrape::samples_of(metrics_addr, &[RECONCILES])
        .await
        .sum(RECONCILES, &[]);
    lock(&seen).stable = stable.clone();
    UPDATE_FROM.store(server.resource_version(), Ordering::Relaxed);
    let from_request = server.request_count(&RequestPattern::new("*", ""));
    let cpu_before = daemon.cpu_seconds();
    let fakes_cpu_before = child_daemon::cpu_seconds(std::process::id());
    let update = Instant::now();
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let updated = all_of(
        limit,
        (0..created).map(|i| {
            let (client, params) = (&client, &params);
            async move { set_image_of(client, &name_of(i), "web:2", params).await }
        }),
    )
    .await;
    let sent_in = update.elapsed();
    let promoted_within = Duration::from_secs(120) + limit;
    let promoted = until_all(promoted_within, updated, || {
        let seen = lock(&seen);
        seen.progress.values().filter(|p| p.promoted).count()
    })
    .await;
    let elapsed = update.elapsed();
    let cpu = daemon.cpu_seconds() - cpu_before;
    let fakes_cpu = child_daemon::cpu_seconds(std::process::id()) - fakes_cpu_before;
    // Promotion's last writes (the route back to the stable Service, the old ReplicaSet's scale-down deadline,
    // its scale-down 30 s later) land after the status says promoted: they are counted once the old ReplicaSets
    // are at 0.
    let scaled_down = until_all(Duration::from_secs(90), promoted, || {
        server.count::<ReplicaSet>("default", |rs| {
            stable
                .get(owner(rs))
                .is_some_and(|old| old == text(rs, "/metadata/labels/rollouts-pod-template-hash"))
                && rs.pointer("/spec/replicas").and_then(Value::as_i64) == Some(0)
        })
    })
    .await;
    let peak_rss = daemon.peak_rss();
    let scraped = Scrape::samples_of(metrics_addr, &[RECONCILES, ERRORS]).await;
    let reconciles = scraped.sum(RECONCILES, &[]) - reconciles_before;
    let errors = scraped.by_label(ERRORS, "reason");
    let events_lost = errors.get("event").copied().unwrap_or(0.0);
    daemon.stop();

    println!(
        "  update sent             {updated} / {created} image patches in {:.1} s",
        sent_in.as_secs_f64()
    );
    println!(
        "  promoted                {promoted} / {updated} in {:.1} s from the first patch (polled once a second; the steps take 20 s of pauses and ~2 s of analysis)",
        elapsed.as_secs_f64()
    );
    if promoted < updated {
        not_promoted(&server, &stable);
    }
    println!(
        "  old ReplicaSets at 0    {scaled_down} / {promoted} (promotion's writes are counted until then)"
    );
    let seen = std::mem::take(&mut *lock(&seen));
    let measured = step_latencies(&seen.progress);
    let (p50, p99) = print_latencies(measured.latencies);
    let mut writes = BTreeMap::new();
    let (mut index, mut reads) = (0, BTreeMap::<String, u32>::new());
    server.each_request(|r| {
        index += 1;
        if index > from_request && r.method == "GET" && !r.query.contains("watch=") {
            *reads.entry(read_resource(&r.path)).or_default() += 1;
        }
        if index > from_request
            && !r.query.contains(&format!("fieldManager={FIELD_MANAGER}"))
            && let Some(what) = rollout_write(r)
        {
            *writes.entry(what).or_default() += 1;
        }
    });
    let by_kind = print_writes(&seen.tally, &writes, updated, &measured.weight_changes);
    let per_reconcile = |n: u32| f64::from(n) / reconciles.max(1.0);
    println!(
        "  Rollout reconciles      {:.1} per Rollout, the daemon's GETs and LISTs {:.1} per Rollout reconcile (rollout_reconcile_count; watches aside)",
        reconciles / updated.max(1) as f64,
        per_reconcile(reads.values().sum())
    );
    let by_resource: Vec<String> = reads
        .iter()
        .map(|(resource, n)| format!("{resource} {:.2}", per_reconcile(*n)))
        .collect();
    println!("    by resource: {}", by_resource.join(", "));
    let by_reason: Vec<String> = errors.iter().map(|(r, n)| format!("{r} {n}")).collect();
    println!(
        "  reconcile errors        {}",
        if by_reason.is_empty() {
            "none".to_string()
        } else {
            by_reason.join(", ")
        }
    );
    for (count, line) in warnings(&std::fs::read_to_string(log.path()).unwrap_or_default()) {
        println!("    {count} x {line}");
    }
    println!(
        "  daemon CPU              {cpu:.1} s over {:.1} s of update: {:.2} core on average  (target < 1 core)",
        elapsed.as_secs_f64(),
        cpu / elapsed.as_secs_f64().max(1e-9)
    );
    println!("  daemon peak RSS (VmHWM) {peak_rss}  (target < 400 MB)");
    let fake_cores = child_daemon::print_fakes_cpu(fakes_cpu, elapsed);
    let total: f64 = by_kind.values().sum();
    let summary = json!({
        "rollouts": n,
        "router": router.name(),
        "promoted": promoted,
        "step_latency_p50_ms": (p50 * 1e3).round(),
        "step_latency_p99_ms": (p99 * 1e3).round(),
        "api_writes_per_step": hundredths(total),
        "writes_per_step_by_kind": by_kind
            .iter()
            .map(|(kind, per_step)| (*kind, hundredths(*per_step)))
            .collect::<BTreeMap<_, _>>(),
        "events_lost": events_lost as u64,
        "daemon_rss_mb": kilobytes(&peak_rss).map(|kb| (kb / 1024.0).round()),
        "daemon_cpu_cores": hundredths(cpu / elapsed.as_secs_f64().max(1e-9)),
        "fake_cpu_cores": hundredths(fake_cores),
        "valid": fake_cores <= FAKES_BOTTLENECK,
    });
    println!("{summary}");
}

/// `canaryd run`'s flags: Rollouts on, and `--rollout-threads` from CANARYD_BENCH_ROLLOUT_THREADS when set.
fn daemon_args() -> Vec<String> {
    let mut args = vec!["--rollouts=true".to_string()];
    if let Ok(threads) = std::env::var("CANARYD_BENCH_ROLLOUT_THREADS") {
        args.push(format!("--rollout-threads={threads}"));
    }
    args
}

/// The daemon's Rollout reconciles (its `rollout_reconcile` histograms' counts, one per Rollout) and its failed
/// reconciles by reason (`event`: an Event not created).
const RECONCILES: &str = "rollout_reconcile_count";
const ERRORS: &str = "canaryd_reconcile_errors_total";

/// The daemon's five most frequent warnings and errors (JSON log lines), as (count, message: error).
fn warnings(log: &str) -> Vec<(usize, String)> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for line in log.lines() {
        let Ok(line) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if !matches!(text(&line, "/level"), "WARN" | "ERROR") {
            continue;
        }
        let what = format!(
            "{} {}: {}",
            text(&line, "/level"),
            text(&line, "/fields/message"),
            text(&line, "/fields/error")
        );
        *counts.entry(what.chars().take(200).collect()).or_default() += 1;
    }
    let mut counts: Vec<(usize, String)> = counts.into_iter().map(|(w, c)| (c, w)).collect();
    counts.sort_by(|a, b| b.cmp(a));
    counts.truncate(5);
    counts
}

/// A stored Rollout's status, read without the rest (the bench polls thousands of them once a second).
fn status_of(rollout: &Value) -> Option<RolloutStatus> {
    RolloutStatus::deserialize(rollout.get("status")?).ok()
}

/// Whether a version of a Rollout shows it promoted: `healthy_at(status, Some(currentPodHash))` with the
/// stable hash changed from its hash before the update (`stable`), read by pointer, as it is for every version
/// of every Rollout committed.
fn is_promoted(stable: &HashMap<String, String>, r: &Value) -> bool {
    let stable_rs = text(r, "/status/stableRS");
    text(r, "/status/phase") == "Healthy"
        && !stable_rs.is_empty()
        && stable_rs == text(r, "/status/currentPodHash")
        && stable
            .get(text(r, "/metadata/name"))
            .is_some_and(|old| old != stable_rs)
}

/// How many Rollouts were left at each step index and phase.
fn not_promoted(server: &FakeApiServer, stable: &HashMap<String, String>) {
    let mut left: BTreeMap<(Option<i32>, String), usize> = BTreeMap::new();
    for r in server.list::<Rollout>("default") {
        let r = serde_json::to_value(r).unwrap_or_default();
        if !is_promoted(stable, &r) {
            let s = status_of(&r).unwrap_or_default();
            *left.entry((s.current_step_index, s.phase)).or_default() += 1;
        }
    }
    for ((step, phase), count) in left {
        println!("    not promoted: {count} at step {step:?}, phase {phase:?}");
    }
}

/// When each Rollout's new revision was ready for each step to complete, and when the step completed.
#[derive(Default)]
struct Progress {
    /// The first commit of a status past step k.
    completed: [Option<Timestamp>; STEPS.len()],
    /// The stored `startTime` of the pause at step k.
    paused: [Option<Timestamp>; STEPS.len()],
    /// The first commit of the VirtualService giving the canary each weight.
    weighted: HashMap<i64, Timestamp>,
    /// The canary's weights in the VirtualService's versions, each change once (0 before the update).
    weights: Vec<i64>,
    /// The canary ReplicaSet's available pods as committed, in order.
    available: Vec<(Timestamp, i64)>,
    /// The first commit of the step's AnalysisRun with a completed phase.
    analysed: Option<Timestamp>,
    /// Whether a version has shown it promoted ([`is_promoted`]): marked as versions are committed, rather
    /// than by looking over every stored Rollout once a second (5% of this process's CPU at 2,000, by perf).
    promoted: bool,
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn owner(value: &Value) -> &str {
    text(value, "/metadata/ownerReferences/0/name")
}

fn resource_version(value: &Value) -> u64 {
    text(value, "/metadata/resourceVersion")
        .parse()
        .unwrap_or(0)
}

/// What the bench reads of the versions the fake API server commits, as they are committed: at 10,000
/// Rollouts their change history could not keep them all.
#[derive(Default)]
struct Seen {
    /// Each Rollout's stable ReplicaSet hash before the update.
    stable: HashMap<String, String>,
    progress: HashMap<String, Progress>,
    /// What the Rollouts' status versions and the ReplicaSets' versions changed.
    tally: Tally,
}

fn lock(seen: &Mutex<Seen>) -> MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Versions committed after this resourceVersion are the update's (`u64::MAX` until it begins).
static UPDATE_FROM: AtomicU64 = AtomicU64::new(u64::MAX);

impl Seen {
    fn rollout(&mut self, at: Timestamp, r: &Arc<Stored>) {
        let counted = resource_version(r) > UPDATE_FROM.load(Ordering::Relaxed);
        self.tally.rollout(r, counted);
        let name = text(r, "/metadata/name");
        let hash = text(r, "/status/currentPodHash");
        if !counted || self.stable.get(name).is_none_or(|old| old == hash) {
            return;
        }
        let p = self.progress.entry(name.to_string()).or_default();
        let index = r
            .pointer("/status/currentStepIndex")
            .and_then(Value::as_u64)
            .unwrap_or(0) as usize;
        for done in p.completed.iter_mut().take(index) {
            done.get_or_insert(at);
        }
        let pause = r
            .pointer("/status/pauseConditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["reason"] == "CanaryPauseStep"));
        if let (Some(slot), Some(start)) = (
            p.paused.get_mut(index),
            pause.and_then(|c| c["startTime"].as_str()?.parse().ok()),
        ) {
            slot.get_or_insert(start);
        }
        p.promoted |= is_promoted(&self.stable, r);
    }

    fn virtual_service(&mut self, at: Timestamp, vs: &Arc<Stored>) {
        let rollout = text(vs, "/metadata/name").trim_end_matches("-vsvc");
        let canary = format!("{rollout}-canary");
        let weight = vs
            .pointer("/spec/http/0/route")
            .and_then(Value::as_array)
            .and_then(|r| {
                r.iter()
                    .find(|d| d["destination"]["host"] == canary.as_str())
            })
            .and_then(|d| d["weight"].as_i64())
            .unwrap_or(0);
        self.weighted(at, rollout, weight);
    }

    /// The canary's weight in the action canaryd writes into the Ingress named for its Rollout.
    fn alb_ingress(&mut self, at: Timestamp, ingress: &Arc<Stored>) {
        let rollout = text(ingress, "/metadata/name");
        let action = format!("alb.ingress.kubernetes.io/actions.{rollout}-stable");
        let canary = format!("{rollout}-canary");
        let weight = ingress["metadata"]["annotations"][action.as_str()]
            .as_str()
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
            .and_then(|a| {
                a.pointer("/ForwardConfig/TargetGroups")?
                    .as_array()?
                    .iter()
                    .find(|g| g["ServiceName"] == canary.as_str())?["Weight"]
                    .as_i64()
            })
            .unwrap_or(0);
        self.weighted(at, rollout, weight);
    }

    fn weighted(&mut self, at: Timestamp, rollout: &str, weight: i64) {
        if let Some(p) = self.progress.get_mut(rollout) {
            p.weighted.entry(weight).or_insert(at);
            if p.weights.last().copied().unwrap_or(0) != weight {
                p.weights.push(weight);
            }
        }
    }

    fn replica_set(&mut self, at: Timestamp, rs: &Arc<Stored>) {
        let counted = resource_version(rs) > UPDATE_FROM.load(Ordering::Relaxed);
        self.tally.replica_set(rs, counted);
        let hash = text(rs, "/metadata/labels/rollouts-pod-template-hash");
        let rollout = owner(rs);
        if self.stable.get(rollout).is_none_or(|old| old == hash) {
            return;
        }
        let available = rs
            .pointer("/status/availableReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if let Some(p) = self.progress.get_mut(rollout) {
            p.available.push((at, available));
        }
    }

    fn analysis_run(&mut self, at: Timestamp, run: &Arc<Stored>) {
        let phase = text(run, "/status/phase");
        if ["Successful", "Failed", "Error", "Inconclusive"].contains(&phase)
            && let Some(p) = self.progress.get_mut(owner(run))
        {
            p.analysed.get_or_insert(at);
        }
    }
}

/// Has `seen` hear of every version of the kinds the step latencies and the write tally read.
fn watch_versions(server: &FakeApiServer, seen: &Arc<Mutex<Seen>>) {
    fn tap<K: kube::Resource<DynamicType = ()>>(
        server: &FakeApiServer,
        seen: &Arc<Mutex<Seen>>,
        each: fn(&mut Seen, Timestamp, &Arc<Stored>),
    ) {
        let seen = seen.clone();
        server.on_commit::<K>(move |at, object| {
            each(&mut lock(&seen), at, object);
        });
    }
    tap::<Rollout>(server, seen, Seen::rollout);
    tap::<VirtualService>(server, seen, Seen::virtual_service);
    tap::<Ingress>(server, seen, Seen::alb_ingress);
    tap::<ReplicaSet>(server, seen, Seen::replica_set);
    tap::<AnalysisRun>(server, seen, Seen::analysis_run);
}

/// Step latencies in seconds, by step kind, from what each Rollout's versions showed (see the module doc).
fn step_latencies(progress: &HashMap<String, Progress>) -> Measured {
    let mut latencies: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut weight_changes: BTreeMap<Vec<i64>, usize> = BTreeMap::new();
    for p in progress.values() {
        *weight_changes.entry(p.weights.clone()).or_default() += 1;
        for (k, step) in STEPS.iter().enumerate() {
            let (what, due) = match *step {
                Step::SetWeight(w) => {
                    let pods = (i64::from(REPLICAS) * w + 99) / 100;
                    let ready = p
                        .available
                        .iter()
                        .find(|(_, a)| *a >= pods)
                        .map(|(at, _)| *at);
                    let routed = p.weighted.get(&w).copied();
                    ("setWeight", routed.zip(ready).map(|(a, b)| a.max(b)))
                }
                Step::Pause => (
                    "pause",
                    p.paused[k].map(|start| start + jiff::SignedDuration::from_secs(PAUSE_SECONDS)),
                ),
                Step::Analysis => ("analysis", p.analysed),
            };
            if let (Some(due), Some(done)) = (due, p.completed[k]) {
                latencies
                    .entry(what)
                    .or_default()
                    .push(done.duration_since(due).as_secs_f64());
            }
        }
    }
    Measured {
        latencies,
        weight_changes,
    }
}

/// Step latencies in seconds by step kind, and how many Rollouts' canary weights went through each sequence.
struct Measured {
    latencies: BTreeMap<&'static str, Vec<f64>>,
    weight_changes: BTreeMap<Vec<i64>, usize>,
}

/// Prints the step latencies; returns the p50 and p99 of all steps, in seconds.
fn print_latencies(mut latencies: BTreeMap<&'static str, Vec<f64>>) -> (f64, f64) {
    let mut all: Vec<f64> = latencies.values().flatten().copied().collect();
    let line = |what: &str, sorted: &mut Vec<f64>| {
        sorted.sort_by(f64::total_cmp);
        let early = sorted.iter().filter(|l| **l < 0.0).count();
        println!(
            "  step latency {what:<10} p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms  ({} steps{})",
            percentile(sorted, 0.5) * 1e3,
            percentile(sorted, 0.99) * 1e3,
            sorted.last().copied().unwrap_or(f64::NAN) * 1e3,
            sorted.len(),
            if early > 0 {
                format!(", {early} completed before due")
            } else {
                String::new()
            }
        );
    };
    line("(all)", &mut all);
    println!(
        "    target p99 < 1 s; due -> the status write past the step, as defined in tests/bench/rollouts.rs"
    );
    for (what, sorted) in &mut latencies {
        line(what, sorted);
    }
    (percentile(&all, 0.5), percentile(&all, 0.99))
}

/// The Rollout controller's `writes` (`rollout::writes::rollout_writes`) by kind (`Tally::writes_by_kind`),
/// per step per Rollout: prints them and returns them.
fn print_writes(
    tally: &Tally,
    writes: &BTreeMap<String, usize>,
    rollouts: usize,
    weight_changes: &BTreeMap<Vec<i64>, usize>,
) -> BTreeMap<&'static str, f64> {
    let by_kind = tally.writes_by_kind(writes);
    let total: usize = by_kind.values().sum();
    let per_step = |count: usize| count as f64 / (rollouts.max(1) * STEPS.len()) as f64;
    println!(
        "  API writes per step per Rollout {:.2}  (target <= 3; {total} writes for {rollouts} Rollouts x {} steps, promotion included)",
        per_step(total),
        STEPS.len()
    );
    let kinds: Vec<String> = by_kind
        .iter()
        .map(|(kind, count)| format!("{kind} {:.2}", per_step(*count)))
        .collect();
    println!("    by kind: {}", kinds.join(", "));
    println!("    by request: {writes:?}");
    let mut status = Vec::from_iter(tally.status_changes());
    status.sort_by_key(|(_, count)| std::cmp::Reverse(**count));
    println!("    status writes per Rollout by the fields they changed:");
    for (fields, count) in status {
        println!(
            "      {:.2}  {fields}",
            *count as f64 / rollouts.max(1) as f64
        );
    }
    let router = by_kind.get("router").copied().unwrap_or(0);
    let changes: usize = weight_changes
        .iter()
        .map(|(weights, count)| weights.len() * count)
        .sum();
    let sequences: Vec<String> = weight_changes
        .iter()
        .map(|(weights, count)| format!("{weights:?} x {count}"))
        .collect();
    println!(
        "  router writes           {:.2} per Rollout, {:.2} per weight change  (target 1; the canary's weights in the router objects' versions: {})",
        router as f64 / rollouts.max(1) as f64,
        router as f64 / changes.max(1) as f64,
        sequences.join(", ")
    );
    by_kind
        .into_iter()
        .map(|(kind, count)| (kind, per_step(count)))
        .collect()
}
