//! `canaryd run`: the wiring of the in-cluster daemon. A kube-rs watch and cache per watched namespace (or one
//! over all namespaces) and a [`Queue`] feed AnalysisRuns this process owns into [`reconcile`], which drives
//! the same engine functions the CLI uses one step at a time: restore from `status`, measure what is due at
//! `now`, record, assess, write the new status through the status subresource, requeue at the next wake-up.
//! Leader election decides whether this process reconciles at all; `/metrics`, `/healthz` and `/readyz` show
//! how it goes.
//!
//! Delivery semantics (restart safety). All state is in `status`; nothing is remembered across restarts. A
//! measurement is recorded only by a successful status patch guarded by the resourceVersion it was computed
//! from, so a recorded measurement is never lost and never recorded twice. If the process dies (or the patch
//! fails, or another writer got there first) between querying and patching, that answer is dropped and the
//! metric is still due by the status, so it is queried again: queries are at-least-once (Prometheus queries
//! are read-only), recorded measurements exactly-once, and the next measurement is due exactly when the
//! stored status says. Events are queued after the patch that makes the transition and published by a task of
//! their own, so a crash in between loses that one Event (at-most-once) rather than repeating it.
//!
//! This module owns no analysis rules (`engine/`), no HTTP details of providers (`providers/`) and no wire
//! shapes of Kubernetes calls (`k8s/`).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use tracing::{info, warn};

use crate::api::{AnalysisPhase, AnalysisRun, AnalysisRunStatus};
use crate::engine::analysis;
use crate::engine::compose::RunSpec;
use crate::k8s::events::{self, EventPublisher, EventQueue};
use crate::k8s::lease::{Elector, LeaseConfig};
use crate::k8s::owner_selector;
use crate::k8s::runs::{self, WriteError};
use crate::k8s::status::StatusWriter;
use crate::measure::Providers;
use crate::observe::{Metrics, Probe};
use crate::providers::gate::Gate;
use crate::queue::Queue;
use crate::runner::{self, PreparedRun};
use crate::time::{Clock, whole_second};

/// How the daemon runs; built from `canaryd run`'s flags.
#[derive(Debug, Clone)]
pub struct Config {
    /// Watched namespaces; empty watches all.
    pub namespaces: Vec<String>,
    pub instance_id: Option<String>,
    /// Prometheus address for metrics whose template names none.
    pub prometheus: Option<String>,
    pub prometheus_max_concurrency: u32,
    /// How long a successful answer serves later measurements of the same query (one second: the same
    /// second only).
    pub prometheus_share_window: Duration,
    pub metrics_addr: SocketAddr,
    /// `None`: no election, this process always reconciles.
    pub leader_election: Option<LeaseConfig>,
    /// Reported as the Events' reporting instance.
    pub identity: String,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot listen on {addr} for /metrics: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// What a reconcile asks for when it ends: to run again after a while, or only when the object changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    After(Duration),
    Change,
}

impl Next {
    /// When to reconcile again, counted from `now`; `None` for only on a change, or for a wait too long to
    /// count (it would overflow the clock rather than ever come).
    fn deadline(self, now: tokio::time::Instant) -> Option<tokio::time::Instant> {
        match self {
            Next::After(wait) => now.checked_add(wait),
            Next::Change => None,
        }
    }
}

/// Why one reconcile did not finish; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("reading the run's Secrets failed: {0}")]
    Secrets(kube::Error),
    #[error("{0}")]
    Write(WriteError),
    #[error("re-reading the run after a conflict failed: {0}")]
    Reread(kube::Error),
    #[error("deleting the expired run failed: {0}")]
    Delete(kube::Error),
    #[error("the reconcile task was cancelled")]
    Aborted,
}

impl ReconcileError {
    /// The `reason` label of `canaryd_reconcile_errors_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Secrets(_) => "secret_read",
            ReconcileError::Write(WriteError::Conflict) => "conflict",
            ReconcileError::Write(_) => "status_patch",
            ReconcileError::Reread(_) => "reread",
            ReconcileError::Delete(_) => "delete",
            ReconcileError::Aborted => "aborted",
        }
    }
}

/// A status this process computed that the watch cache may not show yet: after a successful patch the
/// cached object lags until its watch event arrives; after a failed one the measurements are kept to write
/// again rather than queried again.
#[derive(Debug, Clone)]
struct Ahead {
    /// The resourceVersion of the cached object the status was computed from.
    base_rv: String,
    status: AnalysisRunStatus,
    /// The resourceVersion the patch produced; `None` when the patch did not land.
    written_rv: Option<String>,
    /// Measurements (phase, provider) not yet counted in `canaryd_measurements_total`.
    uncounted: Vec<(AnalysisPhase, &'static str)>,
    /// When the written status next needs a reconcile; `None` when it is complete or was not written.
    wakeup: Option<jiff::Timestamp>,
}

/// Everything reconciles share. One per process.
pub struct Context {
    client: kube::Client,
    statuses: StatusWriter,
    config: Config,
    providers: Providers,
    gate: Arc<Gate>,
    pub metrics: Arc<Metrics>,
    reporter: Reporter,
    events: EventQueue,
    /// Slots for status writes that do not end a run; see [`ROUTINE_WRITES`].
    routine_writes: tokio::sync::Semaphore,
    ahead: Mutex<HashMap<(String, String), Ahead>>,
    stores: Mutex<Vec<Store<AnalysisRun>>>,
    /// One flag per watch: its first list is in the cache.
    synced: Mutex<Vec<Arc<AtomicBool>>>,
    leadership_known: AtomicBool,
}

impl Context {
    /// Whether `rv` is the version this process's last status write of `key` produced, either completing
    /// the run or with a measurement planned after it: then the watch is only echoing that write and there
    /// is nothing new to do. Returns the planned wake-up, `None` for a completed run (what the writing
    /// reconcile returned, its TTL or nothing, stands). The write is forgotten, since the cache now shows it.
    fn echo_of_own_write(&self, key: &Key, rv: &str) -> Option<Option<jiff::Timestamp>> {
        let mut map = self.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        let a = map
            .get(key)
            .filter(|a| a.written_rv.as_deref() == Some(rv))?;
        let planned = if a.status.phase.is_some_and(|p| p.is_completed()) {
            None
        } else {
            Some(a.wakeup.filter(|w| *w > Clock::Wall.now())?)
        };
        map.remove(key);
        Some(planned)
    }

    fn remember(&self, key: (String, String), ahead: Option<Ahead>) {
        let mut map = self.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        match ahead {
            Some(a) => map.insert(key, a),
            None => map.remove(&key),
        };
    }

    /// Waits for `at` when it is at most [`PREWAKE`] away (a reconcile started early on purpose). Returns
    /// false when the watch delivered a version of `run` other than the one read (or the one this process
    /// wrote, `write_rv`) meanwhile, so the caller would work on a stale copy.
    async fn wait_until_due(&self, run: &AnalysisRun, write_rv: &str, at: jiff::Timestamp) -> bool {
        let Ok(wait) = Duration::try_from(at.duration_since(Clock::Wall.now())) else {
            return true; // Due already.
        };
        if wait.is_zero() || wait > PREWAKE {
            return true;
        }
        tokio::time::sleep(wait).await;
        let reference = reflector::ObjectRef::from_obj(run);
        let stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        stores
            .iter()
            .filter_map(|store| store.get(&reference))
            .filter_map(|seen| seen.resource_version())
            .all(|seen| Some(&seen) == run.metadata.resource_version.as_ref() || seen == write_rv)
    }
}

impl Probe for Context {
    fn metrics(&self) -> String {
        let mut runs: BTreeMap<String, u64> = BTreeMap::new();
        let stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        for store in stores.iter() {
            for run in store.state() {
                let phase = run
                    .status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .unwrap_or(AnalysisPhase::Pending);
                *runs.entry(phase.as_str().to_string()).or_default() += 1;
            }
        }
        let durations = self
            .gate
            .durations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.metrics.render(&runs, &durations.into_iter().collect())
    }

    fn ready(&self) -> bool {
        self.leadership_known.load(Ordering::Relaxed)
            && (!self.metrics.is_leader()
                || self
                    .synced
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .all(|s| s.load(Ordering::Relaxed)))
    }
}

/// A daemon bound to its metrics address, not yet running.
pub struct Daemon {
    ctx: Arc<Context>,
    listener: tokio::net::TcpListener,
    publisher: EventPublisher,
}

impl Daemon {
    /// Binds `config.metrics_addr` and builds the shared context (one `Providers` for the process, so
    /// connections are pooled across runs).
    pub async fn bind(client: kube::Client, config: Config) -> Result<Daemon, DaemonError> {
        let listener = tokio::net::TcpListener::bind(config.metrics_addr)
            .await
            .map_err(|source| DaemonError::Listen {
                addr: config.metrics_addr,
                source,
            })?;
        let gate = Arc::new(Gate::new(
            config.prometheus_max_concurrency,
            config.prometheus_share_window,
        ));
        let providers = Providers::new(config.prometheus.clone()).with_gate(gate.clone());
        let reporter = Reporter {
            controller: "canaryd".to_string(),
            instance: Some(config.identity.clone()),
        };
        let metrics = Arc::new(Metrics::default());
        let counted = metrics.clone();
        let (events, publisher) = events::queue(
            client.clone(),
            Arc::new(move |event, error| {
                counted.reconcile_error("event");
                let run = event.regarding.as_ref().map_or_else(String::new, |r| {
                    shown(
                        r.namespace.as_deref().unwrap_or_default(),
                        r.name.as_deref().unwrap_or_default(),
                    )
                });
                warn!(run = %run, reason = event.reason.as_deref().unwrap_or_default(), error = %error, "Cannot publish the Event");
            }),
        );
        let ctx = Arc::new(Context {
            statuses: StatusWriter::new(client.clone()),
            client,
            events,
            routine_writes: tokio::sync::Semaphore::new(ROUTINE_WRITES),
            providers,
            gate,
            metrics,
            reporter,
            ahead: Mutex::new(HashMap::new()),
            stores: Mutex::new(Vec::new()),
            synced: Mutex::new(Vec::new()),
            leadership_known: AtomicBool::new(config.leader_election.is_none()),
            config,
        });
        Ok(Daemon {
            ctx,
            listener,
            publisher,
        })
    }

    /// Where `/metrics` is served (useful with port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    pub fn context(&self) -> Arc<Context> {
        self.ctx.clone()
    }

    /// Runs until `shutdown` resolves: then in-flight reconciles (and their patches) finish, the Lease is
    /// released, the Events still queued are published (for at most [`EVENT_DRAIN`]), and this returns.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let ctx = self.ctx;
        let server = tokio::spawn(crate::observe::serve(self.listener, ctx.clone()));
        let (stop_publishing, stopped) = tokio::sync::oneshot::channel::<()>();
        // Polled by this task rather than spawned, so a daemon dropped mid-way (a crash, in tests) publishes
        // nothing more.
        let publishing = self.publisher.run(
            async {
                let _ = stopped.await;
            },
            EVENT_DRAIN,
        );
        let leading = async {
            let mut shutdown = std::pin::pin!(shutdown);
            match ctx.config.leader_election.clone() {
                None => {
                    ctx.metrics.set_leader(true);
                    let controllers = Controllers::start(&ctx);
                    shutdown.as_mut().await;
                    controllers.stop().await;
                }
                Some(lease) => elect_and_lead(&ctx, lease, shutdown).await,
            }
            ctx.metrics.set_leader(false);
            let _ = stop_publishing.send(());
        };
        tokio::join!(publishing, leading);
        server.abort();
    }
}

/// Status writes that do not end a run in flight at once. In a second when a thousand runs are due, their
/// routine writes wait here rather than at the API server, so the write of a verdict (which takes no slot)
/// reaches it behind at most this many. It also keeps one client's burst small for the API server, whose
/// Priority and Fairness serves only so many requests of a priority level at once.
const ROUTINE_WRITES: usize = 64;

/// How long a stopping daemon goes on publishing the Events still queued.
const EVENT_DRAIN: Duration = Duration::from_secs(5);

/// Candidate → leader → (lost → candidate again | shutdown → release). client-go's timing: try every
/// retry period; a leader that cannot renew for the renew deadline stops reconciling before its lease can
/// expire for the others.
async fn elect_and_lead(
    ctx: &Arc<Context>,
    lease: LeaseConfig,
    mut shutdown: std::pin::Pin<&mut (impl Future<Output = ()> + Send)>,
) {
    let (retry, deadline) = (lease.retry_period, lease.renew_deadline);
    let mut elector = Elector::new(ctx.client.clone(), lease);
    let mut ticker = tokio::time::interval(retry);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        loop {
            tokio::select! {
                _ = shutdown.as_mut() => return,
                _ = ticker.tick() => {}
            }
            match tokio::time::timeout(deadline, elector.try_acquire_or_renew(Clock::Wall.now()))
                .await
            {
                Ok(Ok(true)) => break,
                Ok(Ok(false)) => ctx.leadership_known.store(true, Ordering::Relaxed),
                Ok(Err(e)) => {
                    ctx.metrics.reconcile_error("lease");
                    warn!(lease = %elector.config().name, error = %e, "Cannot read or take the Lease");
                }
                Err(_) => ctx.metrics.reconcile_error("lease"),
            }
        }
        info!(identity = %elector.config().identity, lease = %elector.config().name, "Became the leader");
        ctx.leadership_known.store(true, Ordering::Relaxed);
        ctx.metrics.set_leader(true);
        let controllers = Controllers::start(ctx);
        let mut renewed = Instant::now();
        let lost = loop {
            tokio::select! {
                _ = shutdown.as_mut() => break false,
                _ = ticker.tick() => {}
            }
            match tokio::time::timeout(deadline, elector.try_acquire_or_renew(Clock::Wall.now()))
                .await
            {
                Ok(Ok(true)) => renewed = Instant::now(),
                Ok(Ok(false)) => break true,
                Ok(Err(_)) | Err(_) => {
                    ctx.metrics.reconcile_error("lease");
                    if renewed.elapsed() >= deadline {
                        break true;
                    }
                }
            }
        };
        // Stop taking new work and let in-flight patches land before giving the lease up.
        controllers.stop().await;
        ctx.metrics.set_leader(false);
        if !lost {
            if let Err(e) = elector.release(Clock::Wall.now()).await {
                warn!(error = %e, "Cannot release the Lease; the standby takes over when it expires");
            } else {
                info!(identity = %elector.config().identity, "Released the Lease");
            }
            return;
        }
        warn!(identity = %elector.config().identity, "Lost the Lease; standing by");
    }
}

/// Watch events decoded ahead of the queue, per watch.
const WATCH_BUFFER: usize = 1024;

/// The running controllers of one leadership term.
struct Controllers {
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    tasks: tokio::task::JoinSet<()>,
    watches: tokio::task::JoinSet<()>,
    ctx: Arc<Context>,
}

impl Controllers {
    fn start(ctx: &Arc<Context>) -> Controllers {
        let selector = owner_selector(ctx.config.instance_id.as_deref());
        let apis: Vec<Api<AnalysisRun>> = if ctx.config.namespaces.is_empty() {
            vec![Api::all(ctx.client.clone())]
        } else {
            ctx.config
                .namespaces
                .iter()
                .map(|ns| Api::namespaced(ctx.client.clone(), ns))
                .collect()
        };
        let mut tasks = tokio::task::JoinSet::new();
        let mut watches = tokio::task::JoinSet::new();
        let mut stops = Vec::new();
        let mut stores = Vec::new();
        let mut synced = Vec::new();
        for api in apis {
            let (reader, writer) = reflector::store();
            let flag = Arc::new(AtomicBool::new(false));
            synced.push(flag.clone());
            let watch =
                watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
            // The watch (decoding every event, updating the cache) runs on a task of its own, so a burst
            // of status events never holds up the reconciles the queue is about to start.
            let (sender, events) = futures::channel::mpsc::channel(WATCH_BUFFER);
            let decoded = reflector(writer, watch)
                .inspect_ok(move |event| {
                    if matches!(event, watcher::Event::InitDone) {
                        flag.store(true, Ordering::Relaxed);
                    }
                })
                .applied_objects();
            watches.spawn(async move {
                // Ends when the queue's task (the receiver) is gone.
                let _ = decoded.map(Ok).forward(sender).await;
            });
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            stops.push(stop);
            tasks.spawn(drive(ctx.clone(), reader.clone(), events, stopped));
            stores.push(reader);
        }
        *ctx.synced.lock().unwrap_or_else(PoisonError::into_inner) = synced;
        *ctx.stores.lock().unwrap_or_else(PoisonError::into_inner) = stores;
        Controllers {
            stops,
            tasks,
            watches,
            ctx: ctx.clone(),
        }
    }

    /// Graceful: no new reconciles start, running ones finish.
    async fn stop(mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        while self.tasks.join_next().await.is_some() {}
        // Watches only read; nothing is lost by dropping them where they are.
        self.watches.shutdown().await;
        self.ctx
            .synced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.ctx
            .stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

type Key = (String, String);

/// One watch's reconciles. A run is reconciled when its watch event arrives and when its last reconcile
/// asked to be, never twice at once, each reconcile on a task of its own so runs are measured on every core.
/// After `stopped` fires (or the watch ends) no reconcile starts and the ones in flight finish: a graceful
/// stop.
async fn drive(
    ctx: Arc<Context>,
    store: Store<AnalysisRun>,
    mut events: futures::channel::mpsc::Receiver<Result<AnalysisRun, watcher::Error>>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let mut queue: Queue<Key> = Queue::default();
    let mut running = tokio::task::JoinSet::new();
    let mut keys: HashMap<tokio::task::Id, Key> = HashMap::new();
    loop {
        let now = tokio::time::Instant::now();
        while let Some(key) = queue.start_due(now) {
            match store.get(&ObjectRef::new(&key.1).within(&key.0)) {
                Some(run) => {
                    let task = running.spawn(reconcile(run, ctx.clone()));
                    keys.insert(task.id(), key);
                }
                // Deleted since it was queued.
                None => queue.finish(&key, now, None),
            }
        }
        let wake = queue.next_due();
        tokio::select! {
            _ = &mut stopped => break,
            event = events.next() => match event {
                None => break,
                Some(Ok(run)) => {
                    let key = (run.namespace().unwrap_or_default(), run.name_any());
                    let now = tokio::time::Instant::now();
                    // The echo of this process's own write changes nothing: the writing reconcile already
                    // asked for the planned wake-up (or, for a run it completed, its TTL), so no reconcile
                    // starts for it (one per measurement).
                    let at = match run
                        .resource_version()
                        .and_then(|rv| ctx.echo_of_own_write(&key, &rv))
                    {
                        Some(Some(wakeup)) => requeue_before(Some(wakeup)).deadline(now),
                        Some(None) => None,
                        None => Some(now),
                    };
                    if let Some(at) = at {
                        queue.schedule(key, at);
                    }
                }
                Some(Err(e)) => {
                    // The watcher re-lists by itself (410 Gone, dropped connections); count it.
                    ctx.metrics.reconcile_error("watch");
                    warn!(error = %e, "Watch failed; retrying");
                }
            },
            Some(done) = running.join_next_with_id() => {
                let (id, result) = match done {
                    Ok((id, result)) => (id, result),
                    Err(e) => (e.id(), Err(ReconcileError::Aborted)),
                };
                let Some(key) = keys.remove(&id) else { continue };
                let next = result.unwrap_or_else(|e| error_policy(&key, &e, &ctx));
                let now = tokio::time::Instant::now();
                queue.finish(&key, now, next.deadline(now));
            }
            () = tokio::time::sleep_until(wake.unwrap_or(now)), if wake.is_some() => {}
        }
    }
    while running.join_next().await.is_some() {}
}

fn error_policy((namespace, name): &Key, error: &ReconcileError, ctx: &Context) -> Next {
    ctx.metrics.reconcile_error(error.reason());
    warn!(run = %shown(namespace, name), reason = error.reason(), error = %error, "Reconcile failed; retrying");
    Next::After(Duration::from_secs(1))
}

/// A run as logs name it: `namespace/name`.
fn shown(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn provider_name(run: &PreparedRun, index: usize) -> &'static str {
    run.metrics
        .get(index)
        .and_then(|m| m.metric.provider.configured().first().copied())
        .unwrap_or("unknown")
}

/// One step of one run. Public so tests and benches can drive it; the daemon calls it from its
/// controllers.
pub async fn reconcile(obj: Arc<AnalysisRun>, ctx: Arc<Context>) -> Result<Next, ReconcileError> {
    let namespace = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let key = (namespace.clone(), name.clone());
    let run_key = shown(&namespace, &name);
    let api: Api<AnalysisRun> = Api::namespaced(ctx.client.clone(), &namespace);
    let rv = obj.resource_version().unwrap_or_default();
    // Usually the drive loop has already recognised the echo of our own write; this catches the echo that
    // arrived while the writing reconcile was still running. A run that write completed goes on below, to
    // its TTL.
    if let Some(Some(wakeup)) = ctx.echo_of_own_write(&key, &rv) {
        return Ok(requeue_before(Some(wakeup)));
    }
    // What this process computed from exactly this version and the cache does not show yet. Anything it
    // computed from another version is out of date: dropped.
    let ahead = {
        let mut map = ctx.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(&key) {
            Some(a) if a.base_rv == rv => Some(a.clone()),
            _ => {
                map.remove(&key);
                None
            }
        }
    };
    // The status our write put on the server when the cache lags behind it; what is still to be written;
    // the resourceVersion to write against.
    let (written, pending, mut write_rv, mut uncounted) = match ahead {
        Some(a) => match a.written_rv {
            Some(w) => (Some(a.status), None, w, a.uncounted),
            None => (None, Some(a.status), rv.clone(), a.uncounted),
        },
        None => (None, None, rv.clone(), Vec::new()),
    };
    // What the server holds.
    let server = written.as_ref().or(obj.status.as_ref());

    if let Some(done) = server.and_then(|s| s.phase).filter(|p| p.is_completed()) {
        return match &written {
            None => expire(&api, &obj, &run_key, done).await,
            Some(status) => {
                let judged = AnalysisRun {
                    status: Some(status.clone()),
                    ..(*obj).clone()
                };
                expire(&api, &judged, &run_key, done).await
            }
        };
    }
    // What to build on.
    let mut working = pending.or_else(|| server.cloned());

    let spec = RunSpec::from_run(&obj.spec);
    let secrets = runs::read_secrets(&ctx.client, &namespace, &spec.args)
        .await
        .map_err(ReconcileError::Secrets)?;
    let prepared = PreparedRun::prepare(
        &spec,
        &BTreeMap::new(),
        &|r| runs::lookup(&secrets, r),
        None,
    );
    let (new_status, assessment_wakeup, secret_values) = match prepared {
        Err(e) => {
            let now = whole_second(Clock::Wall.now());
            // A spec that cannot run ends Error now, with the reason, rather than retrying forever.
            let mut status = working.unwrap_or_default();
            status.phase = Some(AnalysisPhase::Error);
            status.message = Some(e.to_string());
            status
                .started_at
                .get_or_insert(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
            status.completed_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
            warn!(run = %run_key, phase = "Error", reason = %e, "AnalysisRun cannot run");
            let values: Vec<String> = secrets.values().filter_map(|v| v.clone().ok()).collect();
            (status, None, values)
        }
        Ok(run) => {
            if let Some(at) = working
                .as_ref()
                .and_then(|st| analysis::next_wakeup(&run.plan, st, Clock::Wall.now()))
                && !ctx.wait_until_due(&obj, &write_rv, at).await
            {
                // The object changed while this reconcile waited; the reconcile its watch event queued
                // (held until this one returns) starts from the new version.
                return Ok(Next::Change);
            }
            // Stamped as the API server will store it, so the next due time is the same before and after
            // the patch.
            let now = whole_second(Clock::Wall.now());
            let terminate = obj.spec.terminate == Some(true);
            let mut status = working
                .take()
                .unwrap_or_else(|| analysis::start(&run.plan, now));
            let due = analysis::due(&run.plan, &status, now, terminate);
            let recorded =
                runner::measure_due(&run, &ctx.providers, &mut status, &due, now, None, &|| {
                    whole_second(Clock::Wall.now())
                })
                .await;
            for index in &recorded {
                let Some(plan) = run.plan.metrics.get(*index) else {
                    continue;
                };
                let measurement = status
                    .metric_results
                    .iter()
                    .flatten()
                    .find(|r| r.name == plan.name)
                    .and_then(|r| r.measurements.last());
                if let Some(m) = measurement {
                    uncounted.push((m.phase, provider_name(&run, *index)));
                    let mut shown = serde_json::json!([m.value, m.message]);
                    runs::scrub(&mut shown, &run.secrets);
                    info!(
                        run = %run_key,
                        metric = %plan.name,
                        value = %shown[0].as_str().unwrap_or("-"),
                        phase = %m.phase,
                        reason = %shown[1].as_str().unwrap_or(""),
                        "Measured"
                    );
                }
            }
            let assessment = analysis::assess(
                &run.plan,
                &mut status,
                whole_second(Clock::Wall.now()),
                terminate,
            );
            (status, assessment.next_wakeup, run.secrets.clone())
        }
    };

    let phase_before = server.and_then(|s| s.phase);
    if server != Some(&new_status) {
        let completed = new_status.phase.filter(|p| p.is_completed());
        // A write that ends the run goes at once; one that records a measurement of a run that goes on waits
        // for a slot. The semaphore is never closed, so `acquire` cannot fail.
        let slot = match completed {
            Some(_) => None,
            None => ctx.routine_writes.acquire().await.ok(),
        };
        let mut attempts = 0;
        let written = loop {
            attempts += 1;
            match runs::patch_status(
                &ctx.statuses,
                &namespace,
                &name,
                &write_rv,
                &new_status,
                &secret_values,
            )
            .await
            {
                Ok(metadata) => {
                    break AnalysisRun {
                        metadata,
                        spec: obj.spec.clone(),
                        status: None,
                    };
                }
                Err(WriteError::Gone) => {
                    ctx.remember(key, None);
                    return Ok(Next::Change);
                }
                Err(WriteError::Conflict) if attempts < 3 => {
                    ctx.metrics.reconcile_error("conflict");
                    let fresh = api.get(&name).await.map_err(ReconcileError::Reread)?;
                    if fresh.status.as_ref() != server {
                        // Someone else wrote status (a former leader): build on theirs, drop our answers.
                        ctx.remember(key, None);
                        return Ok(Next::After(Duration::from_millis(100)));
                    }
                    write_rv = fresh.resource_version().unwrap_or_default();
                }
                Err(e) => {
                    // Keep the measurements to write again instead of querying again.
                    if matches!(e, WriteError::Api(_)) && write_rv == rv {
                        ctx.remember(
                            key,
                            Some(Ahead {
                                base_rv: rv,
                                status: new_status,
                                written_rv: None,
                                uncounted,
                                wakeup: None,
                            }),
                        );
                    }
                    return Err(ReconcileError::Write(e));
                }
            }
        };
        drop(slot);
        for (phase, provider) in uncounted.drain(..) {
            ctx.metrics.measured(phase.as_str(), provider);
        }
        let transition = new_status.phase.filter(|p| phase_before != Some(*p));
        let message = transition.and(new_status.message.clone());
        // A completed run's status is still needed to expire it; any other moves into `Ahead` uncopied.
        let judged = completed.map(|_| new_status.clone());
        ctx.remember(
            key,
            Some(Ahead {
                base_rv: rv,
                status: new_status,
                written_rv: written.resource_version(),
                uncounted: Vec::new(),
                wakeup: assessment_wakeup,
            }),
        );
        if let Some(phase) = transition {
            if phase.is_completed() {
                info!(run = %run_key, phase = %phase, reason = message.as_deref().unwrap_or(""), "AnalysisRun completed");
            }
            if let Some(event) = runs::transition_event(
                &ctx.reporter,
                &written,
                phase,
                message.as_deref(),
                &secret_values,
                Clock::Wall.now(),
            ) {
                ctx.events.push(event);
            }
        }
        if let (Some(phase), Some(status)) = (completed, judged) {
            return expire(
                &api,
                &AnalysisRun {
                    status: Some(status),
                    ..written
                },
                &run_key,
                phase,
            )
            .await;
        }
    }
    Ok(requeue_before(assessment_wakeup))
}

/// How long before a measurement is due its reconcile starts: reading Secrets, preparing the run and being
/// scheduled behind other runs' patches happen ahead of time, and the reconcile then waits for the due
/// instant itself, so the query starts on time even when thousands of runs are due in the same second (status
/// timestamps have one-second resolution, so due times bunch on whole seconds). Half a second, not a whole
/// one: a whole-second head start lands these reconciles on the previous whole second, in the middle of the
/// burst of measurements due then, whose queries they delayed.
const PREWAKE: Duration = Duration::from_millis(500);

/// Reconcile [`PREWAKE`] before the measurement due at `at`, or on the next change. `at` comes from a stored
/// status, so it may lie at the very start of time; then there is nothing earlier to wake at.
fn requeue_before(at: Option<jiff::Timestamp>) -> Next {
    requeue_at(at.map(|at| at.checked_sub(PREWAKE).unwrap_or(at)))
}

/// Reconcile again at `at` (at least 50 ms from now, so an overdue plan never spins), or on the next change.
fn requeue_at(at: Option<jiff::Timestamp>) -> Next {
    match at {
        None => Next::Change,
        Some(at) => {
            let wait = at.duration_since(Clock::Wall.now());
            Next::After(
                Duration::try_from(wait)
                    .unwrap_or(Duration::ZERO)
                    .max(Duration::from_millis(50)),
            )
        }
    }
}

/// A completed run: delete it when its TTL has run out, else look again then.
async fn expire(
    api: &Api<AnalysisRun>,
    run: &AnalysisRun,
    run_key: &str,
    phase: AnalysisPhase,
) -> Result<Next, ReconcileError> {
    let Some(at) = runs::ttl_expiry(run) else {
        return Ok(Next::Change);
    };
    if at <= Clock::Wall.now() {
        runs::delete_run(api, run)
            .await
            .map_err(ReconcileError::Delete)?;
        info!(run = %run_key, phase = %phase, "Deleted the AnalysisRun: its ttlStrategy expired");
        return Ok(Next::Change);
    }
    Ok(requeue_at(Some(at)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_due_time_at_the_start_of_time_is_requeued_without_overflow() {
        let soon = Next::After(Duration::from_millis(50));
        assert_eq!(requeue_before(Some(jiff::Timestamp::MIN)), soon);
        assert_eq!(requeue_before(None), Next::Change);
    }

    #[test]
    fn a_wait_too_long_for_the_clock_is_no_deadline_rather_than_a_panic() {
        let now = tokio::time::Instant::now();
        assert_eq!(Next::After(Duration::MAX).deadline(now), None);
        assert_eq!(
            Next::After(Duration::from_secs(5)).deadline(now),
            Some(now + Duration::from_secs(5))
        );
        assert_eq!(Next::Change.deadline(now), None);
    }
}
