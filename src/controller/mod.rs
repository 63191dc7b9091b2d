//! `canaryd run`: the in-cluster daemon. This module wires it: leader election decides whether this process
//! reconciles at all; the [`Context`] every reconcile shares (the API client, providers, the Event queue,
//! metrics, each kind's state); `/metrics`, `/healthz` and `/readyz` show how it goes. The [`driver`] watches
//! and reconciles any kind; one module per kind holds its reconcile ([`analysis_run`], and [`rollout`] when
//! `--rollouts` enables it).
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

pub mod analysis_run;
mod backoff;
mod cache;
pub mod driver;
mod echo;
mod expect;
mod heard;
mod queue;
pub mod rollout;
mod rollout_caches;
mod rollout_cluster;
mod router_caches;
mod router_known;
mod watch;

use std::collections::BTreeSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::events::Reporter;
use tracing::{info, warn};

use crate::api::{AnalysisRun, Rollout};
use crate::k8s::events::{self, EventPublisher, EventQueue};
use crate::k8s::jobs::Jobs;
use crate::k8s::lease::{Elector, LeaseConfig};
use crate::k8s::status::StatusWriter;
use crate::measure::Providers;
use crate::notify::Notifier;
use crate::observe::{Exposition, Kind, Metrics, Probe, Scraped};
use crate::providers::gate::Gate;
use crate::time::Clock;
use driver::{Controllers, KindState, shown};

pub use driver::{Next, ReconcileError};

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
    /// Also progress the Rollouts this process owns (`--rollouts`); off, every Rollout is left alone.
    pub rollouts: bool,
    /// Where `argo-rollouts-notification-configmap` and its Secret are read (`--notifications-namespace`);
    /// `None` sends no notifications.
    pub notifications_namespace: Option<String>,
    /// Where the routers find the TrafficSplit and the TraefikService (`--traffic-split-api-version`,
    /// `--traefik-api-group`, `--traefik-api-version`).
    pub routers: crate::routers::RouterApis,
    /// Also read them in the namespace of the object an Event is about
    /// (`--self-service-notification-enabled`).
    pub self_service_notifications: bool,
    /// Most Rollout reconciles in flight at once (`--rollout-threads`).
    pub rollout_threads: usize,
    /// Ingresses watched from the start (`--watch-alb-ingresses`).
    pub watch_alb_ingresses: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot listen on {addr} for /metrics: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The daemon's API clients, built from one configuration.
pub struct Clients {
    /// Every request but evictions: kube's default client, which retries a 429, 503 or 504 itself, with
    /// backoff (and the server's Retry-After), up to 15 times: minutes.
    pub api: kube::Client,
    /// Evictions for a Rollout's `restartAt`: a client that does not retry, so a PodDisruptionBudget's 429
    /// comes back at once and the reconcile goes on without the restart (the planner looks again in 30 s)
    /// rather than holding that Rollout's reconcile for minutes.
    pub evictions: kube::Client,
}

impl Clients {
    /// Both clients from `config` (the in-cluster service account or a kubeconfig).
    pub fn new(config: kube::Config) -> Result<Clients, kube::Error> {
        let mut once = config.clone();
        once.default_retry = false;
        Ok(Clients {
            api: kube::Client::try_from(config)?,
            evictions: kube::Client::try_from(once)?,
        })
    }
}

/// One client for every request, evictions too (retried then as that client retries them): for callers that
/// have only a client.
impl From<kube::Client> for Clients {
    fn from(client: kube::Client) -> Clients {
        Clients {
            evictions: client.clone(),
            api: client,
        }
    }
}

/// Everything reconciles share. One per process.
pub struct Context {
    client: kube::Client,
    /// See [`Clients::evictions`].
    evictions: kube::Client,
    statuses: StatusWriter,
    config: Config,
    providers: Providers,
    gate: Arc<Gate>,
    pub metrics: Arc<Metrics>,
    reporter: Reporter,
    events: EventQueue,
    /// Slots for status writes that do not end a run; see [`ROUTINE_WRITES`].
    routine_writes: tokio::sync::Semaphore,
    /// Slots for status writes that end a run; see [`VERDICT_WRITES`].
    verdict_writes: tokio::sync::Semaphore,
    runs: KindState<AnalysisRun>,
    rollouts: KindState<Rollout>,
    status_writes: rollout::StatusWrites,
    rollout_caches: rollout_caches::RolloutCaches,
    leadership_known: AtomicBool,
    /// Sends the notifications of the Events created; see [`crate::notify`].
    notifier: Option<Arc<Notifier>>,
    /// What every reconcile reads the time from and sleeps on.
    pub clock: Arc<Clock>,
}

impl Probe for Context {
    fn write_metrics(&self, out: &mut Exposition) {
        let runs = self.runs.cached();
        let rollouts = self.rollouts.cached();
        self.forget_deleted(Kind::AnalysisRun, &self.runs, &runs);
        self.forget_deleted(Kind::Rollout, &self.rollouts, &rollouts);
        let durations = self
            .gate
            .durations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let scraped = Scraped {
            runs: &runs,
            rollouts: &rollouts,
            durations: &durations.into_iter().collect(),
        };
        self.metrics.render(&scraped, out);
    }

    fn ready(&self) -> bool {
        self.leadership_known.load(Ordering::Relaxed)
            && (!self.metrics.is_leader()
                || (self.runs.synced() && (!self.config.rollouts || self.rollouts.synced())))
    }
}

impl Context {
    /// Forgets the per-object series of the objects of `kind` that are gone: those not in its synced cache
    /// (`cached`). A standby's caches are empty, as its series are.
    fn forget_deleted<K: driver::Reconciled>(
        &self,
        kind: Kind,
        state: &KindState<K>,
        cached: &[Arc<K>],
    ) {
        if !state.synced() {
            return;
        }
        let live: BTreeSet<(String, String)> = cached
            .iter()
            .map(|o| (o.namespace().unwrap_or_default(), o.name_any()))
            .collect();
        self.metrics.reconciles.forget_all_but(kind, &live);
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
    pub async fn bind(clients: impl Into<Clients>, config: Config) -> Result<Daemon, DaemonError> {
        Daemon::bind_on(clients, config, Arc::new(Clock::Wall)).await
    }

    /// [`Daemon::bind`] on `clock`.
    pub async fn bind_on(
        clients: impl Into<Clients>,
        config: Config,
        clock: Arc<Clock>,
    ) -> Result<Daemon, DaemonError> {
        let Clients {
            api: client,
            evictions,
        } = clients.into();
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
        let jobs = Arc::new(Jobs::new(client.clone()));
        let providers = Providers::new(config.prometheus.clone())
            .with_gate(gate.clone())
            .with_jobs(jobs);
        let reporter = Reporter {
            controller: "canaryd".to_string(),
            instance: Some(config.identity.clone()),
        };
        let metrics = Arc::new(Metrics::starting_at(clock.now()));
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
        let notifier = config.notifications_namespace.as_deref().map(|namespace| {
            let (events, reporter) = (events.clone(), reporter.clone());
            let scope = crate::notify::settings::Scope {
                namespace: namespace.to_string(),
                self_service: config.self_service_notifications,
            };
            Notifier::new(
                client.clone(),
                scope,
                config.namespaces.clone(),
                events,
                reporter,
                clock.clone(),
                metrics.clone(),
            )
        });
        let publisher = match &notifier {
            Some(notifier) => publisher.on_created(notifier.hook()),
            None => publisher,
        };
        let ctx = Arc::new(Context {
            notifier,
            statuses: StatusWriter::new(client.clone()),
            client,
            evictions,
            events,
            routine_writes: tokio::sync::Semaphore::new(ROUTINE_WRITES),
            verdict_writes: tokio::sync::Semaphore::new(VERDICT_WRITES),
            providers,
            gate,
            metrics,
            reporter,
            runs: KindState::default(),
            rollouts: KindState::default(),
            status_writes: rollout::StatusWrites::default(),
            rollout_caches: rollout_caches::RolloutCaches::default(),
            clock,
            leadership_known: AtomicBool::new(config.leader_election.is_none()),
            config,
        });
        if let Some(notifier) = &ctx.notifier {
            notifier.know(held_objects(&ctx));
        }
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
                    let controllers = start_controllers(&ctx);
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
/// routine writes wait here rather than at the API server, so the write of a verdict (which takes none of these
/// slots, see [`VERDICT_WRITES`]) reaches it behind at most this many. It also keeps one client's burst small for the API server, whose
/// Priority and Fairness serves only so many requests of a priority level at once.
const ROUTINE_WRITES: usize = 64;

/// Status writes that end a run in flight at once. They never wait behind routine writes, only behind each
/// other, and only in a burst: when tens of thousands of runs end in the same interval, each write in flight
/// is a connection to the API server with its buffers (the client opens one per concurrent request), and
/// unbounded they took hundreds of megabytes at 50,000 runs.
const VERDICT_WRITES: usize = 256;

/// How long a stopping daemon goes on publishing the Events still queued.
const EVENT_DRAIN: Duration = Duration::from_secs(5);

/// Candidate → leader → (lost → candidate again | shutdown → release). client-go's timing: try every
/// retry period; a leader that cannot renew for the renew deadline stops reconciling before its lease can
/// expire for the others. The retry ticker and the renew deadline are real time, not the daemon's clock, as the
/// other candidates' are: they time requests to the API server.
async fn elect_and_lead(
    ctx: &Arc<Context>,
    lease: LeaseConfig,
    mut shutdown: std::pin::Pin<&mut (impl Future<Output = ()> + Send)>,
) {
    let (retry, deadline) = (lease.retry_period, lease.renew_deadline);
    let mut elector = Elector::new(ctx.client.clone(), lease);
    let mut ticker = crate::time::real_ticker(retry);
    loop {
        loop {
            tokio::select! {
                _ = shutdown.as_mut() => return,
                _ = ticker.tick() => {}
            }
            match crate::time::real_timeout(deadline, elector.try_acquire_or_renew(ctx.clock.now()))
                .await
            {
                Some(Ok(true)) => break,
                Some(Ok(false)) => ctx.leadership_known.store(true, Ordering::Relaxed),
                Some(Err(e)) => {
                    ctx.metrics.reconcile_error("lease");
                    warn!(lease = %elector.config().name, error = %e, "Cannot read or take the Lease");
                }
                None => ctx.metrics.reconcile_error("lease"),
            }
        }
        info!(identity = %elector.config().identity, lease = %elector.config().name, "Became the leader");
        ctx.leadership_known.store(true, Ordering::Relaxed);
        ctx.metrics.set_leader(true);
        let controllers = start_controllers(ctx);
        let mut renewed = crate::time::monotonic();
        let lost = loop {
            tokio::select! {
                _ = shutdown.as_mut() => break false,
                _ = ticker.tick() => {}
            }
            match crate::time::real_timeout(deadline, elector.try_acquire_or_renew(ctx.clock.now()))
                .await
            {
                Some(Ok(true)) => renewed = crate::time::monotonic(),
                Some(Ok(false)) => break true,
                Some(Err(_)) | None => {
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
            if let Err(e) = elector.release(ctx.clock.now()).await {
                warn!(error = %e, "Cannot release the Lease; the standby takes over when it expires");
            } else {
                info!(identity = %elector.config().identity, "Released the Lease");
            }
            return;
        }
        warn!(identity = %elector.config().identity, "Lost the Lease; standing by");
    }
}

/// The controllers of one leadership term: one driver per reconciled kind.
fn start_controllers(ctx: &Arc<Context>) -> Controllers {
    let mut controllers = Controllers::new(ctx);
    controllers.start::<AnalysisRun>();
    if ctx.config.rollouts {
        controllers.start::<Rollout>();
    }
    if let Some(notifier) = ctx.notifier.clone() {
        tokio::spawn(async move { notifier.recover().await });
    }
    controllers
}

/// The labels and annotations of the Rollouts and AnalysisRuns in the daemon's watch caches, for the notifier to
/// tell which Events no one subscribes to without reading their object afresh. Holds the context weakly: the
/// context holds the notifier.
fn held_objects(ctx: &Arc<Context>) -> crate::notify::Known {
    fn labelled<K: driver::Reconciled>(
        state: &KindState<K>,
        key: &watch::Key,
    ) -> Option<crate::notify::Labelled> {
        let held = state.get(key)?;
        Some((held.labels().clone(), held.annotations().clone()))
    }
    let ctx = Arc::downgrade(ctx);
    Arc::new(move |regarding| {
        let ctx = ctx.upgrade()?;
        let key = (
            regarding.namespace.clone().unwrap_or_default(),
            regarding.name.clone()?,
        );
        match regarding.kind.as_deref()? {
            "Rollout" => labelled(&ctx.rollouts, &key),
            "AnalysisRun" => labelled(&ctx.runs, &key),
            _ => None,
        }
    })
}
