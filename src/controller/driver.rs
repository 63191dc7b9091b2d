//! The driver every reconciled kind shares: per watched scope, a watch of the objects this process owns
//! ([`watch`](super::watch)), a [`Queue`] that starts one reconcile per object at a time on a task of its own,
//! the echo cache ([`EchoCache`]: a status this process wrote that the watch has not shown yet), the status
//! write guarded by the resourceVersion it was computed from (re-read once on 409), and the retry of a failed
//! reconcile (after the object's [`Backoff`]). A kind implements [`Reconciled`]: its status type, where its
//! state lives in the [`Context`], and its reconcile.
//!
//! This module owns no rule of any kind: what a reconcile does, and what is written, is the kind's module's.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use tracing::warn;

use super::Context;
use super::backoff::Backoff;
pub use super::echo::Ahead;
use super::echo::EchoCache;
use super::queue::Queue;
pub use super::watch::Key;
use super::watch::{self, Seen, Undecodable};
use crate::k8s::owner_selector;
use crate::k8s::runs::WriteError;
use crate::observe::Kind;
use crate::time::Clock;

/// A kind the daemon reconciles.
pub trait Reconciled: watch::Watched {
    type Status: Clone + PartialEq + Send + Sync + 'static;
    /// Whose reconcile families (`rollout_reconcile`, `analysis_run_reconcile`, ...) count this kind's.
    const COUNTED_AS: Kind;

    fn status(&self) -> Option<&Self::Status>;
    /// A completed object needs no reconcile for its own sake any more (only, say, its expiry).
    fn is_completed(status: &Self::Status) -> bool;
    /// This kind's share of the process's state.
    fn state(ctx: &Context) -> &KindState<Self>;
    /// One step of one object.
    fn reconcile(
        obj: Arc<Self>,
        ctx: Arc<Context>,
    ) -> impl Future<Output = Result<Next, ReconcileError>> + Send;
    /// Reports on the object itself that it cannot be decoded.
    fn report_undecodable(
        obj: Box<Undecodable>,
        ctx: Arc<Context>,
    ) -> impl Future<Output = Result<Next, ReconcileError>> + Send;
    /// What is left to do once the object `key` is gone (deleted, or no longer this process's): started when the
    /// watch sees it deleted, and for a key queued whose object the cache no longer holds. Nothing by default.
    fn gone(
        _key: Key,
        _ctx: Arc<Context>,
    ) -> impl Future<Output = Result<Next, ReconcileError>> + Send {
        async { Ok(Next::Change) }
    }
    /// The watch shows `obj` for the first time since this process's controllers started (client-go's
    /// informer `AddFunc`). Nothing by default.
    fn added(_obj: &Self, _ctx: &Context) {}
    /// Watches of other kinds whose changes concern objects of this kind, in one scope (a namespace, or all):
    /// each yields the key of the object to reconcile. They may keep caches in `ctx` for the reconciles. None
    /// by default.
    fn triggers(_ctx: &Context, _namespace: Option<&str>) -> Vec<BoxStream<'static, Key>> {
        Vec::new()
    }
    /// Forgets what the triggers cached, once the controllers stopped. Nothing by default.
    fn forget_triggers(_ctx: &Context) {}
    /// Most reconciles of this kind in flight at once (per watch scope); no bound by default.
    fn workers(_ctx: &Context) -> usize {
        usize::MAX
    }
}

/// What a reconcile asks for when it ends: to run again after a while, or only when the object changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    After(Duration),
    Change,
}

impl Next {
    /// When to reconcile again, counted from `now` on the daemon's steady clock; `None` for only on a change, or for
    /// a wait too long to count (it would overflow the clock rather than ever come).
    pub(super) fn deadline(self, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        match self {
            Next::After(wait) => now.checked_add(wait).ok(),
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
    #[error("reading the Rollout or its objects failed: {0}")]
    Read(kube::Error),
    /// One write of a Rollout's plan (`write` says which, naming its object).
    #[error("{write}: {}", refusal(.error))]
    RolloutWrite { write: String, error: WriteError },
    /// The traffic routers could not be brought to the plan's weight (the message of the Rollout's
    /// `TrafficRoutingError` Event), or a deleted Rollout's ALB Ingress could not be released.
    #[error("{0}")]
    TrafficRouting(String),
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
            ReconcileError::Read(_) => "read",
            ReconcileError::RolloutWrite { .. } => "rollout_write",
            ReconcileError::TrafficRouting(_) => "traffic_routing",
            ReconcileError::Aborted => "aborted",
        }
    }
}

/// Why a write other than a status patch failed (the API error alone: [`WriteError::Api`] says status).
fn refusal(error: &WriteError) -> String {
    match error {
        WriteError::Api(e) => e.to_string(),
        other => other.to_string(),
    }
}

/// One kind's state in the process: its echo cache, and the caches and sync flags of its watches.
pub struct KindState<K: Reconciled> {
    pub echo: EchoCache<K>,
    pub(super) stores: Mutex<Vec<Store<K>>>,
    /// One flag per watch: its first list is in the cache.
    pub(super) synced: Mutex<Vec<Arc<AtomicBool>>>,
}

impl<K: Reconciled> Default for KindState<K> {
    fn default() -> Self {
        KindState {
            echo: EchoCache::default(),
            stores: Mutex::new(Vec::new()),
            synced: Mutex::new(Vec::new()),
        }
    }
}

impl<K: Reconciled> KindState<K> {
    /// Waits for `at` when it is at most [`PREWAKE`] away (a reconcile started early on purpose). Returns
    /// false when the watch delivered a version of `obj` other than the one read (or the one this process
    /// wrote, `write_rv`) meanwhile, so the caller would work on a stale copy.
    pub async fn wait_until_due(
        &self,
        obj: &K,
        write_rv: &str,
        at: jiff::Timestamp,
        clock: &Clock,
    ) -> bool {
        let Ok(wait) = Duration::try_from(at.duration_since(clock.now())) else {
            return true; // Due already.
        };
        if wait.is_zero() || wait > PREWAKE {
            return true;
        }
        clock.sleep_until(at).await;
        let reference = ObjectRef::from_obj(obj);
        let stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        stores
            .iter()
            .filter_map(|store| store.get(&reference))
            .filter_map(|seen| seen.resource_version())
            .all(|seen| Some(&seen) == obj.meta().resource_version.as_ref() || seen == write_rv)
    }

    /// The object `key` as cached.
    pub fn get(&self, key: &Key) -> Option<Arc<K>> {
        let reference = ObjectRef::new(&key.1).within(&key.0);
        let stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        stores.iter().find_map(|store| store.get(&reference))
    }

    /// Every cached object of this kind.
    pub fn cached(&self) -> Vec<Arc<K>> {
        let stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        stores.iter().flat_map(|s| s.state()).collect()
    }

    pub fn synced(&self) -> bool {
        let synced = self.synced.lock().unwrap_or_else(PoisonError::into_inner);
        synced
            .iter()
            .all(|s| s.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn clear(&self) {
        self.synced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// How a status write ended, when it did not fail.
pub enum Wrote {
    /// The object's metadata after the write.
    Written(Box<ObjectMeta>),
    /// The object is gone.
    Gone,
    /// Someone else wrote status meanwhile (a former leader): the caller builds on theirs.
    Overtaken,
}

/// Writes a status computed from `server` (the status the object held) against `write_rv` with `write`.
/// On a 409 the object is read again: if its status is still `server`, only the version moved (a spec or
/// metadata change) and the write is tried again against the new one, twice at most.
pub async fn write_status<K, W, F>(
    ctx: &Context,
    obj: &K,
    server: Option<&K::Status>,
    write_rv: &mut String,
    write: W,
) -> Result<Wrote, ReconcileError>
where
    K: Reconciled,
    W: Fn(String) -> F,
    F: Future<Output = Result<ObjectMeta, WriteError>>,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let mut attempts = 0;
    loop {
        attempts += 1;
        match write(write_rv.clone()).await {
            Ok(metadata) => return Ok(Wrote::Written(Box::new(metadata))),
            Err(WriteError::Gone) => return Ok(Wrote::Gone),
            Err(WriteError::Conflict) if attempts < 3 => {
                ctx.metrics.reconcile_error("conflict");
                let fresh = api
                    .get(&obj.name_any())
                    .await
                    .map_err(ReconcileError::Reread)?;
                if fresh.status() != server {
                    return Ok(Wrote::Overtaken);
                }
                *write_rv = fresh.resource_version().unwrap_or_default();
            }
            Err(e) => return Err(ReconcileError::Write(e)),
        }
    }
}

/// How long before a due instant its reconcile starts: reading Secrets, preparing the run and being
/// scheduled behind other runs' patches happen ahead of time, and the reconcile then waits for the due
/// instant itself, so the query starts on time even when thousands of runs are due in the same second (status
/// timestamps have one-second resolution, so due times bunch on whole seconds). Half a second, not a whole
/// one: a whole-second head start lands these reconciles on the previous whole second, in the middle of the
/// burst of measurements due then, whose queries they delayed.
pub const PREWAKE: Duration = Duration::from_millis(500);

/// Reconcile [`PREWAKE`] before `at`, or on the next change. `at` comes from a stored status, so it may lie
/// at the very start of time; then there is nothing earlier to wake at.
pub fn requeue_before(at: Option<jiff::Timestamp>, now: jiff::Timestamp) -> Next {
    requeue_at(at.map(|at| at.checked_sub(PREWAKE).unwrap_or(at)), now)
}

/// Reconcile again at `at` (at least 50 ms after `now`, so an overdue plan never spins), or on the next
/// change.
pub fn requeue_at(at: Option<jiff::Timestamp>, now: jiff::Timestamp) -> Next {
    match at {
        None => Next::Change,
        Some(at) => {
            let wait = at.duration_since(now);
            Next::After(
                Duration::try_from(wait)
                    .unwrap_or(Duration::ZERO)
                    .max(Duration::from_millis(50)),
            )
        }
    }
}

/// An object as logs name it: `namespace/name`.
pub fn shown(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The running controllers of one leadership term.
pub struct Controllers {
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    tasks: tokio::task::JoinSet<()>,
    watches: tokio::task::JoinSet<()>,
    clears: Vec<fn(&Context)>,
    ctx: Arc<Context>,
}

impl Controllers {
    pub fn new(ctx: &Arc<Context>) -> Controllers {
        Controllers {
            stops: Vec::new(),
            tasks: tokio::task::JoinSet::new(),
            watches: tokio::task::JoinSet::new(),
            clears: Vec::new(),
            ctx: ctx.clone(),
        }
    }

    /// Starts watching and reconciling `K` in every watched namespace (or all of them).
    pub fn start<K: Reconciled>(&mut self) {
        let ctx = &self.ctx;
        let selector = owner_selector(ctx.config.instance_id.as_deref());
        let scopes: Vec<Option<&str>> = if ctx.config.namespaces.is_empty() {
            vec![None]
        } else {
            ctx.config
                .namespaces
                .iter()
                .map(|ns| Some(ns.as_str()))
                .collect()
        };
        let (mut stores, mut synced) = (Vec::new(), Vec::new());
        for scope in scopes {
            // The watch (decoding every event, updating the cache) runs on a task of its own, so a burst of
            // status events never holds up the reconciles the queue is about to start.
            let (store, flag, seen, watching) =
                watch::start::<K>(ctx.client.clone(), scope, &selector);
            self.watches.spawn(watching);
            // Each watch of other kinds decodes its events on a task of its own too, and hands on only the keys
            // they name: a burst of thousands of runs' status writes is not decoded on the queue's task.
            let (named, triggers) = tokio::sync::mpsc::channel(watch::WATCH_BUFFER);
            for mut trigger in K::triggers(ctx, scope) {
                let named = named.clone();
                self.watches.spawn(async move {
                    while let Some(key) = trigger.next().await {
                        if named.send(key).await.is_err() {
                            break;
                        }
                    }
                });
            }
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            self.stops.push(stop);
            self.tasks.spawn(drive::<K>(
                ctx.clone(),
                store.clone(),
                seen,
                triggers,
                stopped,
            ));
            stores.push(store);
            synced.push(flag);
        }
        let state = K::state(ctx);
        *state.synced.lock().unwrap_or_else(PoisonError::into_inner) = synced;
        *state.stores.lock().unwrap_or_else(PoisonError::into_inner) = stores;
        self.clears.push(|ctx| {
            K::state(ctx).clear();
            K::forget_triggers(ctx);
        });
    }

    /// Graceful: no new reconciles start, running ones finish.
    pub async fn stop(mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        while self.tasks.join_next().await.is_some() {}
        // Watches only read; nothing is lost by dropping them where they are.
        self.watches.shutdown().await;
        for clear in &self.clears {
            clear(&self.ctx);
        }
    }
}

/// One watch's reconciles. An object is reconciled when its watch event arrives and when its last reconcile
/// asked to be, or when one of its `triggers` names it, never twice at once, each reconcile on a task of its
/// own so objects are handled on every core. After `stopped` fires (or the watch ends) no reconcile starts and
/// the ones in flight finish: a graceful stop. Due times are counted and waited for on the context's clock
/// ([`Clock::steady`](crate::time::Clock::steady)).
async fn drive<K: Reconciled>(
    ctx: Arc<Context>,
    store: Store<K>,
    mut seen: tokio::sync::mpsc::Receiver<Seen<K>>,
    mut triggers: tokio::sync::mpsc::Receiver<Key>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let state = K::state(&ctx);
    let mut queue: Queue<Key> = Queue::default();
    let mut running = tokio::task::JoinSet::new();
    let mut keys: HashMap<tokio::task::Id, Key> = HashMap::new();
    let mut backoff: Backoff<Key> = Backoff::default();
    // Objects the watch could not decode, still to be reported; they are in no cache.
    let mut undecodable: HashMap<Key, Box<Undecodable>> = HashMap::new();
    let workers = K::workers(&ctx);
    loop {
        let now = ctx.clock.steady();
        while running.len() < workers
            && let Some(key) = queue.start_due(now)
        {
            let reference = ObjectRef::new(&key.1).within(&key.0);
            let task = if let Some(obj) = store.get(&reference) {
                // The object as the cache holds it when the task begins, not when it was spawned: on a loaded
                // machine a task can wait for a thread long enough for the echo of this process's last write
                // to reach the cache and be told (and forgotten) meanwhile, and a reconcile of the version
                // before it, were the write's echo bookkeeping to miss it, would measure again and be refused
                // with 409 Conflict.
                let (store, ctx) = (store.clone(), ctx.clone());
                running.spawn(timed(async move {
                    let obj = store.get(&reference).unwrap_or(obj);
                    K::reconcile(obj, ctx).await
                }))
            } else if let Some(obj) = undecodable.get(&key) {
                running.spawn(timed(K::report_undecodable(obj.clone(), ctx.clone())))
            } else {
                // Not a reconcile (Argo's sync of a deleted object returns before its reconcile metrics).
                let gone = K::gone(key.clone(), ctx.clone());
                running.spawn(async { (gone.await, None) })
            };
            keys.insert(task.id(), key);
        }
        // With every worker busy, the next start waits for one to finish, not for a due time.
        let wake = queue.next_due().filter(|_| running.len() < workers);
        tokio::select! {
            _ = &mut stopped => break,
            event = seen.recv() => match event {
                None => break,
                Some(Seen::Object(obj, added)) => {
                    if added {
                        K::added(&obj, &ctx);
                    }
                    let key = (obj.namespace().unwrap_or_default(), obj.name_any());
                    undecodable.remove(&key);
                    let (wall, now) = (ctx.clock.now(), ctx.clock.steady());
                    // The echo of this process's own write changes nothing: the writing reconcile already
                    // asked for the planned wake-up (or, for an object it completed, what follows), so no
                    // reconcile starts for it.
                    let at = match obj
                        .resource_version()
                        .and_then(|rv| state.echo.of_own_write(&key, &rv, wall))
                    {
                        Some(Some(wakeup)) => requeue_before(Some(wakeup), wall).deadline(now),
                        Some(None) => None,
                        None => Some(now),
                    };
                    if let Some(at) = at {
                        queue.schedule(key, at);
                    }
                }
                Some(Seen::Undecodable(obj)) => {
                    let m = &obj.metadata;
                    let key = (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default());
                    ctx.metrics.reconcile_error("decode");
                    warn!(kind = %K::kind(&()), object = %shown(&key.0, &key.1), error = %obj.error, "Cannot decode the object");
                    undecodable.insert(key.clone(), obj);
                    queue.schedule(key, ctx.clock.steady());
                }
                Some(Seen::Deleted(key)) => {
                    undecodable.remove(&key);
                    queue.schedule(key, ctx.clock.steady());
                }
                Some(Seen::Failed(e)) => {
                    ctx.metrics.reconcile_error("watch");
                    warn!(error = %e, "Watch failed; retrying");
                }
            },
            Some(key) = triggers.recv() => queue.schedule(key, ctx.clock.steady()),
            Some(done) = running.join_next_with_id() => {
                let (id, result) = match done {
                    Ok((id, (result, took))) => {
                        if let (Some(key), Some(took)) = (keys.get(&id), took) {
                            ctx.metrics.reconciles.reconciled(K::COUNTED_AS, key, took.as_secs_f64());
                        }
                        (id, result)
                    }
                    Err(e) => (e.id(), Err(ReconcileError::Aborted)),
                };
                let Some(key) = keys.remove(&id) else { continue };
                let next = match result {
                    Ok(next) => {
                        // Reported: nothing more to do until the object changes.
                        undecodable.remove(&key);
                        backoff.forget(&key);
                        next
                    }
                    Err(e) => {
                        report_failure::<K>(&key, &e, &ctx);
                        Next::After(backoff.failed(key.clone()))
                    }
                };
                let now = ctx.clock.steady();
                queue.finish(&key, now, next.deadline(now));
            }
            () = ctx.clock.sleep_until_steady(wake.unwrap_or(now)), if wake.is_some() => {}
        }
    }
    while running.join_next().await.is_some() {}
}

/// `reconcile`, and how long it took in real time (Argo's reconcile histograms).
async fn timed<T>(reconcile: impl Future<Output = T>) -> (T, Option<Duration>) {
    let started = crate::time::monotonic();
    let outcome = reconcile.await;
    (outcome, Some(started.elapsed()))
}

/// Counts and logs a failed reconcile; it is retried after the object's [`Backoff`].
fn report_failure<K: Reconciled>(key: &Key, error: &ReconcileError, ctx: &Context) {
    let (namespace, name) = key;
    ctx.metrics.reconcile_error(error.reason());
    ctx.metrics.reconciles.failed(K::COUNTED_AS, key);
    warn!(object = %shown(namespace, name), reason = error.reason(), error = %error, "Reconcile failed; retrying");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_due_time_at_the_start_of_time_is_requeued_without_overflow() {
        let soon = Next::After(Duration::from_millis(50));
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("a timestamp");
        assert_eq!(requeue_before(Some(jiff::Timestamp::MIN), now), soon);
        assert_eq!(requeue_before(None, now), Next::Change);
    }

    #[test]
    fn a_wait_too_long_for_the_clock_is_no_deadline_rather_than_a_panic() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("a timestamp");
        assert_eq!(Next::After(Duration::MAX).deadline(now), None);
        assert_eq!(
            Next::After(Duration::from_secs(5)).deadline(now),
            "2026-01-01T00:00:05Z".parse().ok()
        );
        assert_eq!(Next::Change.deadline(now), None);
    }
}
