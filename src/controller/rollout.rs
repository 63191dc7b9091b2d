//! The Rollout controller (`canaryd run --rollouts`): each reconcile of a Rollout is
//! `engine::rollout::reconcile_loop`'s loop run on the API server (`rollout_cluster::ApiCluster`, which reads,
//! writes and queues the Events); this module then asks to be woken when the plan says, lets go of the ALB
//! Ingresses a Rollout no longer routes through, and of what a Rollout that is gone leaves. A write refused with 409 means something changed since the read: everything is
//! read afresh and planned again. All state is in the objects (the planner's names are derived from the
//! template hash, the revision and the step), so a process killed at any point and started again creates
//! nothing twice and repeats no step.
//!
//! A change to a ReplicaSet or AnalysisRun the Rollout controls reconciles the Rollout (the driver's
//! triggers), and so does another client's change to a Service it manages or a router object it read. The
//! AnalysisRuns a plan creates are executed by the AnalysisRun controller, like any other run this process
//! owns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::stream::BoxStream;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::Context;
use super::driver::{Key, KindState, Next, ReconcileError, Reconciled, requeue_at, shown};
use super::expect::Shown;
use super::rollout_cluster::ApiCluster;
use super::watch::Undecodable;
use crate::api::reasons::rollout as reasons;
use crate::api::rollout::RolloutStatus;
use crate::api::{AnalysisRun, INSTANCE_LABEL, Rollout};
use crate::engine::rollout;
use crate::engine::rollout::reconcile_loop;
use crate::engine::routing::alb_release;
use crate::k8s::events::{self, Happened};
use crate::k8s::rollout_writes;
use crate::k8s::status::WriteError;
use crate::routers::{ApiRouter, RouterError};

/// How soon a reconcile that changed something looks again, unless its plans settled (`Reconciliation::Planned`):
/// the planner moves one small step at a time (Argo lets the status write's own watch event start the next),
/// so a step the plans run on in memory did not reach is planned at once. A settled reconcile has nothing more
/// to do until an object changes or its plan's wake-up (in the rollouts bench at 2,000 Rollouts, a quarter of
/// the reconciles planned nothing when every changed one looked again).
const AGAIN: Duration = Duration::from_millis(50);

/// How long a reconcile waits for the watch caches to show this process's own last writes (polling them every
/// [`CACHE_POLL`]) before it reads afresh from the API server.
const CACHE_PATIENCE: Duration = Duration::from_secs(1);
const CACHE_POLL: Duration = Duration::from_millis(25);

/// How long a reconcile whose every attempt met a change waits before trying again.
const CONTENDED: Duration = Duration::from_secs(1);

/// When this process last wrote each Rollout's status (the `now` of the plan it stored), so that a change of
/// the counts alone waits until it is due (`engine::rollout::status_write`). Forgotten when the Rollout is
/// gone; after a restart every Rollout's first change is written at once.
#[derive(Default)]
pub struct StatusWrites(Mutex<HashMap<Key, jiff::Timestamp>>);

impl StatusWrites {
    pub(super) fn last(&self, key: &Key) -> Option<jiff::Timestamp> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(key).copied()
    }

    pub(super) fn record(&self, key: Key, at: Option<jiff::Timestamp>) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match at {
            Some(at) => map.insert(key, at),
            None => map.remove(&key),
        };
    }
}

impl Reconciled for Rollout {
    type Status = RolloutStatus;
    const COUNTED_AS: crate::observe::Kind = crate::observe::Kind::Rollout;

    fn status(&self) -> Option<&RolloutStatus> {
        self.status.as_ref()
    }

    /// Every Rollout reconcile asks for its next one itself (at once after a change, else at the plan's
    /// wake-up), so the watch's echo of its own status write never needs one.
    fn is_completed(_: &RolloutStatus) -> bool {
        true
    }

    fn state(ctx: &Context) -> &KindState<Rollout> {
        &ctx.rollouts
    }

    fn reconcile(
        obj: Arc<Self>,
        ctx: Arc<Context>,
    ) -> impl Future<Output = Result<Next, ReconcileError>> + Send {
        reconcile(obj, ctx)
    }

    fn report_undecodable(
        obj: Box<Undecodable>,
        ctx: Arc<Context>,
    ) -> impl Future<Output = Result<Next, ReconcileError>> + Send {
        report_undecodable(obj, ctx)
    }

    fn gone(
        key: Key,
        ctx: Arc<Context>,
    ) -> impl Future<Output = Result<Next, ReconcileError>> + Send {
        gone(key, ctx)
    }

    /// Argo's Rollout informer `AddFunc` tells each Rollout it is added to the cache (at every start, and
    /// for each Rollout created since).
    fn added(rollout: &Rollout, ctx: &Context) {
        let added = rollout::Event {
            reason: reasons::ROLLOUT_ADDED_TO_INFORMER.to_string(),
            message: reasons::added_to_informer(&namespace_of(rollout), &rollout.name_any()),
            warning: false,
            after_write: None,
        };
        publish(ctx, rollout, &[added]);
    }

    /// As Argo's `--rollout-threads` workers: a few at a time, the earliest due first.
    fn workers(ctx: &Context) -> usize {
        ctx.config.rollout_threads
    }

    /// Changes to the Rollout's ReplicaSets, and to what the planner reads of its AnalysisRuns: not each
    /// measurement a run records, only its phase and message, labels, deletion and `terminate`; and other
    /// clients' changes to the Services it manages and the router objects it read. Their watches and that of
    /// templates keep the caches its reconciles read (`rollout_caches`, `router_caches`).
    fn triggers(ctx: &Context, namespace: Option<&str>) -> Vec<BoxStream<'static, Key>> {
        let triggers =
            ctx.rollout_caches
                .watch(&ctx.client, &ctx.metrics, namespace, run_as_planned);
        if ctx.config.watch_alb_ingresses {
            let routers = &ctx.rollout_caches.routers;
            routers.watch_ingresses(&ctx.client, &ctx.metrics, namespace);
        }
        triggers
    }

    fn forget_triggers(ctx: &Context) {
        ctx.rollout_caches.clear();
    }
}

/// What the Rollout planner reads of one of its AnalysisRuns (`engine::rollout::runs`, `history`).
fn run_as_planned(run: &AnalysisRun) -> serde_json::Value {
    let status = run.status.as_ref();
    serde_json::json!([
        status.map(|s| &s.phase),
        status.and_then(|s| s.message.as_ref()),
        run.metadata.labels,
        run.metadata.deletion_timestamp,
        run.spec.terminate,
    ])
}

/// Whether this process owns `rollout` (`--instance-id`), checked again on the fresh copy: its label may have
/// changed since the watch delivered it.
pub(super) fn owned(rollout: &Rollout, instance_id: Option<&str>) -> bool {
    rollout.labels().get(INSTANCE_LABEL).map(String::as_str) == instance_id
}

/// One reconcile of one Rollout (`engine::rollout::reconcile_loop`'s loop on the API server). Public so tests and benches
/// can drive it.
pub async fn reconcile(obj: Arc<Rollout>, ctx: Arc<Context>) -> Result<Next, ReconcileError> {
    let mut cluster = ApiCluster::new(&ctx, &obj);
    // While the caches lag this process's own last writes, wait for them rather than read everything afresh
    // (that costs the API server more), for at most CACHE_PATIENCE.
    match cluster.shown() {
        Some((rollout, Shown::All)) => cluster.cached = Some(rollout),
        Some((_, Shown::Lagging { since })) => {
            let waited = ctx.clock.now().duration_since(since);
            if CACHE_PATIENCE
                .try_into()
                .is_ok_and(|patience| waited < patience)
            {
                return Ok(Next::After(CACHE_POLL));
            }
        }
        None => {}
    }
    let reconciled = reconcile_loop::reconcile(&mut cluster).await?;
    if !matches!(reconciled, reconcile_loop::Reconciliation::Gone) {
        release_left_behind(&ctx, &obj)
            .await
            .map_err(ReconcileError::TrafficRouting)?;
    }
    Ok(match reconciled {
        reconcile_loop::Reconciliation::Gone => return gone(cluster.key(), ctx.clone()).await,
        reconcile_loop::Reconciliation::Planned {
            changed: true,
            settled: false,
            ..
        } => Next::After(AGAIN),
        reconcile_loop::Reconciliation::Planned { plan, .. } => {
            requeue_at(plan.wake_at, ctx.clock.now())
        }
        // A failed reconcile, as Argo's `reconcileTrafficRouting` error is: retried after the Rollout's backoff.
        reconcile_loop::Reconciliation::Unrouted { failure, .. } => {
            return Err(ReconcileError::TrafficRouting(failure.message));
        }
        // Something keeps changing under the plans: let it settle rather than spin.
        reconcile_loop::Reconciliation::Contended => Next::After(CONTENDED),
    })
}

/// A Rollout gone from this process (deleted, or handed to another instance by its `--instance-id` label):
/// what this process kept for it is forgotten, and one that no longer exists lets go of the ALB Ingresses it
/// read or a watched Ingress's managed annotation names (one deleted while the daemon was down, which that
/// Ingress's watch names: `router_caches`), as Argo's ingress controller resets the actions of a Rollout an
/// Ingress's managed annotation names and no Rollout of that name points at (`routers::ApiRouter::release_alb`);
/// one that is only another instance's, which a fresh read tells, keeps them. A failed write fails this, and
/// the Rollout's backoff retries it; an Ingress Argo would give up on is left with a warning.
async fn gone(key: Key, ctx: Arc<Context>) -> Result<Next, ReconcileError> {
    let ingresses = ctx.rollout_caches.routers.alb_ingresses(&key);
    let (namespace, name) = (&key.0, &key.1);
    let api: Api<Rollout> = Api::namespaced(ctx.client.clone(), namespace);
    if !ingresses.is_empty()
        && api
            .get_opt(name)
            .await
            .map_err(ReconcileError::Read)?
            .is_none()
    {
        let ingresses = ingresses.iter().map(|(n, i)| (n.as_str(), i.as_str()));
        release_albs(&ctx, ingresses, name, "deleted")
            .await
            .map_err(ReconcileError::TrafficRouting)?;
    }
    ctx.status_writes.record(key.clone(), None);
    ctx.rollout_caches.expected.forget(&key);
    ctx.rollout_caches.routers.forget(&key);
    Ok(Next::Change)
}

/// Lets the ALB Ingresses `ingresses` (namespace, name) go of the Rollout `rollout`, which is `why` (deleted,
/// moved) (`routers::ApiRouter::release_alb`): each release logged; an Ingress Argo would give up on is left with
/// a warning, and a failed write ends this with its message.
async fn release_albs(
    ctx: &Context,
    ingresses: impl Iterator<Item = (&str, &str)>,
    rollout: &str,
    why: &str,
) -> Result<(), String> {
    let router = ApiRouter::new(ctx.client.clone());
    for (namespace, ingress) in ingresses {
        match router.release_alb(namespace, ingress, rollout).await {
            Ok(true) => info!(
                %rollout, %namespace, %ingress,
                "released the {why} Rollout's ALB actions: all traffic to the Services they are named for"
            ),
            Ok(false) => {}
            Err(e @ RouterError::Unfit { .. }) => {
                warn!(%rollout, "the {why} Rollout's ALB actions left as they are: {e}");
            }
            Err(e) => return Err(format!("releasing the {why} Rollout's ALB Ingress: {e}")),
        }
    }
    Ok(())
}

/// Lets go of the ALB Ingresses whose managed annotation names `rollout` (as their watch shows them) but which
/// its traffic routing no longer names (`engine::routing::alb_release::left_behind`: it moved to other Ingresses
/// or off ALB), as Argo's ingress controller does at each Ingress event. Run after the reconcile's plans: a
/// failed write fails the reconcile once its own writes are made, and the Rollout's backoff retries it, as
/// Argo's queue retries the Ingress.
async fn release_left_behind(ctx: &Context, rollout: &Rollout) -> Result<(), String> {
    let key = (namespace_of(rollout), rollout.name_any());
    let naming = ctx.rollout_caches.routers.alb_naming(&key);
    if naming.is_empty() {
        return Ok(());
    }
    let left = alb_release::left_behind(rollout, &naming);
    let ingresses = left.into_iter().map(|ingress| (key.0.as_str(), ingress));
    release_albs(ctx, ingresses, &key.1, "moved").await
}

/// A Rollout that does not decode (a field of the wrong type, a required one missing) can never be planned:
/// its status says so where Argo's tools look, the InvalidSpec condition with the field's path and what was
/// expected (phase Degraded), with one Warning Event when that is written. Nothing else of it moves; once it
/// is fixed it decodes, and its first reconcile clears the condition.
async fn report_undecodable(
    obj: Box<Undecodable>,
    ctx: Arc<Context>,
) -> Result<Next, ReconcileError> {
    let old: RolloutStatus = obj
        .status
        .as_ref()
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .unwrap_or_default();
    let rollout = Rollout {
        metadata: obj.metadata,
        spec: Default::default(),
        status: None,
    };
    let error = format!("cannot decode the Rollout: {}", obj.error);
    let status =
        rollout::conditions::invalid_spec(&rollout, old.clone(), &error, ctx.clock.stamp());
    if status == old {
        return Ok(Next::Change);
    }
    let rv = rollout.resource_version().unwrap_or_default();
    match rollout_writes::patch_status(&ctx.statuses, &rollout, &rv, &old, &status).await {
        Ok(_) => {}
        // Changed or gone since the watch saw it: the watch brings the newer copy.
        Err(WriteError::Conflict | WriteError::Gone) => return Ok(Next::Change),
        Err(e) => return Err(ReconcileError::Write(e)),
    }
    let reported = rollout::Event {
        reason: reasons::INVALID_SPEC.to_string(),
        message: rollout::conditions::get(&status, reasons::INVALID_SPEC)
            .map(|c| c.message.clone())
            .unwrap_or(error),
        warning: true,
        after_write: None,
    };
    publish(&ctx, &rollout, &[reported]);
    Ok(Next::Change)
}

pub(super) fn namespace_of(rollout: &Rollout) -> String {
    rollout.namespace().unwrap_or_default()
}

/// Queues a plan's Events, once its writes have landed, in the plan's order (their names sort in it).
pub(super) fn publish(ctx: &Context, rollout: &Rollout, events: &[rollout::Event]) {
    if events.is_empty() {
        return;
    }
    let now = ctx.clock.now();
    let shown_key = shown(&namespace_of(rollout), &rollout.name_any());
    let mut recorded = Vec::with_capacity(events.len());
    for (serial, event) in (0u32..).zip(events) {
        if event.warning {
            warn!(rollout = %shown_key, reason = %event.reason, message = %event.message, "Rollout");
        } else {
            info!(rollout = %shown_key, reason = %event.reason, message = %event.message, "Rollout");
        }
        let what = Happened {
            action: "Reconcile",
            reason: &event.reason,
            note: event.message.clone(),
            warning: event.warning,
        };
        recorded.push(events::about(
            &ctx.reporter,
            rollout.object_ref(&()),
            what,
            now,
            serial,
        ));
    }
    ctx.metrics.reconciles.rollout_events(
        &(namespace_of(rollout), rollout.name_any()),
        events.iter().map(|e| (e.warning, e.reason.as_str())),
    );
    ctx.events.push(recorded);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(status: serde_json::Value, mut spec: serde_json::Value) -> AnalysisRun {
        spec["metrics"] = json!([]);
        serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
            "metadata": {"name": "web-1", "namespace": "shop"},
            "spec": spec, "status": status,
        }))
        .expect("a run")
    }

    #[test]
    fn a_runs_measurements_are_not_what_the_planner_reads_of_it_but_its_phase_message_and_terminate_are()
     {
        let running = run(json!({"phase": "Running", "metricResults": []}), json!({}));
        let measured = run(
            json!({"phase": "Running", "metricResults": [{"name": "m", "phase": "Running", "count": 1}]}),
            json!({}),
        );
        assert_eq!(run_as_planned(&running), run_as_planned(&measured));
        for changed in [
            run(json!({"phase": "Successful"}), json!({})),
            run(json!({"phase": "Running", "message": "slow"}), json!({})),
            run(json!({"phase": "Running"}), json!({"terminate": true})),
        ] {
            assert_ne!(run_as_planned(&running), run_as_planned(&changed));
        }
    }
}
