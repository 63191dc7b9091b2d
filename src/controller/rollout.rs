//! The Rollout controller (`canaryd run --rollouts`): one reconcile of one Rollout reads it afresh with what it
//! controls (ReplicaSets, AnalysisRuns, and its pods while a `restartAt` is due) and names (Services, analysis
//! templates), asks `engine::rollout::plan` for the next step, makes the plan's writes in order, writes the
//! status through the status subresource when it changed, queues the plan's Events and asks to be woken when
//! the plan says. A write refused with 409 means something changed since the read: everything is read and
//! planned again. All state is in the objects (the planner's names are derived from the template hash, the
//! revision and the step), so a process killed at any point and started again creates nothing twice and
//! repeats no step.
//!
//! A change to a ReplicaSet or AnalysisRun the Rollout controls reconciles the Rollout (the driver's
//! triggers). The AnalysisRuns a plan creates are executed by the AnalysisRun controller, like any other run
//! this process owns. Rules are the planner's; calls are `k8s::rollout_writes`'.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{Api, ApiResource};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::Context;
use super::driver::{Ahead, Key, KindState, Next, ReconcileError, Reconciled, requeue_at, shown};
use super::watch::{self, Undecodable};
use crate::api::reasons::rollout as reasons;
use crate::api::rollout::RolloutStatus;
use crate::api::{AnalysisRun, AnalysisTemplateRef, INSTANCE_LABEL, Rollout};
use crate::engine::rollout::hash::HASH_LABEL;
use crate::engine::rollout::{self, Observed, Plan};
use crate::k8s::events::{self, Happened};
use crate::k8s::rollout_writes::{self, Read};
use crate::k8s::status::WriteError;
use crate::routers::ApiRouter;

/// Reads and plans of one reconcile at most, when writes keep meeting 409s.
const ATTEMPTS: usize = 3;

/// How soon a reconcile that changed something looks again: the planner moves one small step at a time (Argo
/// lets the status write's own watch event start the next), so the next step is planned at once.
const AGAIN: Duration = Duration::from_millis(50);

/// How long a Rollout whose traffic router could not be written waits before trying again.
const ROUTER_RETRY: Duration = Duration::from_secs(10);

/// Status-only plans run on in memory before their one status write, at most (a guard: the planner reaches a
/// plan with writes or a status it keeps within a few).
const COALESCED: usize = 8;

/// How long a reconcile whose every attempt met a change waits before trying again.
const CONTENDED: Duration = Duration::from_secs(1);

impl Reconciled for Rollout {
    type Status = RolloutStatus;

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
        // Nothing is written to a Rollout that does not decode: its status could not be read back either.
        // The driver has logged the field; a fixed Rollout is reconciled on its next change.
        drop((obj, ctx));
        std::future::ready(Ok(Next::Change))
    }

    fn triggers(client: &kube::Client, namespace: Option<&str>) -> Vec<BoxStream<'static, Key>> {
        // Both kinds carry the pod-template hash label when a Rollout made them.
        [
            ApiResource::erase::<ReplicaSet>(&()),
            ApiResource::erase::<AnalysisRun>(&()),
        ]
        .iter()
        .map(|r| watch::owners(client.clone(), namespace, HASH_LABEL, r, "Rollout"))
        .collect()
    }
}

/// Whether this process owns `rollout` (`--instance-id`), checked again on the fresh copy: its label may have
/// changed since the watch delivered it.
fn owned(rollout: &Rollout, instance_id: Option<&str>) -> bool {
    rollout.labels().get(INSTANCE_LABEL).map(String::as_str) == instance_id
}

/// One reconcile of one Rollout. Public so tests and benches can drive it.
pub async fn reconcile(obj: Arc<Rollout>, ctx: Arc<Context>) -> Result<Next, ReconcileError> {
    let namespace = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let api: Api<Rollout> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut restart = true;
    for _ in 0..ATTEMPTS {
        // Read afresh: the cache may not show this process's last status write yet, and a plan made from an
        // older status would scale back to an earlier step.
        let rollout = api.get_opt(&name).await.map_err(ReconcileError::Read)?;
        let Some(rollout) = rollout.filter(|r| owned(r, ctx.config.instance_id.as_deref())) else {
            return Ok(Next::Change);
        };
        match step(&ctx, &rollout, restart).await? {
            Stepped::Done(next) => return Ok(next),
            Stepped::Changed => {}
            // Argo's pod restarter: having restarted nothing, the reconcile goes on without the restart.
            Stepped::Refused => restart = false,
        }
    }
    // Something keeps changing under the plans: let it settle rather than spin.
    Ok(Next::After(CONTENDED))
}

/// How one read, plan and write ended.
enum Stepped {
    Done(Next),
    /// A write met a change made since the read: plan again.
    Changed,
    /// A PodDisruptionBudget refused every eviction of the plan: plan again without restarting pods.
    Refused,
}

/// Reads, plans and writes once; with `restart` false the pods are not handed to the planner, so a due
/// restart waits (it looks again in 30 s).
async fn step(ctx: &Context, rollout: &Rollout, restart: bool) -> Result<Stepped, ReconcileError> {
    // One `now` for the read and the plans, so pods are read exactly when a plan restarts them.
    let now = ctx.clock.stamp();
    let mut read = rollout_writes::read(&ctx.client, rollout, now)
        .await
        .map_err(ReconcileError::Read)?;
    if !restart {
        read.pods = None;
    }
    let plan = coalesced(ctx, rollout, &read, now);
    let mut rv = rollout.resource_version().unwrap_or_default();
    let (before, after) = plan
        .writes
        .split_at(plan.route_after.min(plan.writes.len()));
    let mut made = Made::default();
    if let Some(stepped) = make(ctx, rollout, &mut rv, &read, before, &mut made).await? {
        return Ok(stepped);
    }
    // Traffic after the ReplicaSets' creation and the Services' selectors, before analysis and scaling, in
    // Argo's order: the plan's status already says the weight is applied, so a router that cannot be
    // brought to it stops the rest of the plan, to be tried again.
    if let Some(route) = &plan.route {
        let router = ApiRouter::new(ctx.client.clone());
        match router.apply(rollout, route, &read.replica_sets).await {
            Ok(changes) => {
                for change in changes {
                    info!(rollout = %shown(&namespace_of(rollout), &rollout.name_any()), %change, "traffic");
                }
            }
            Err(e) => {
                ctx.metrics.reconcile_error("traffic_routing");
                let failed = rollout::Event {
                    reason: reasons::TRAFFIC_ROUTING_ERROR.to_string(),
                    message: e.to_string(),
                    warning: true,
                };
                publish(ctx, rollout, &[failed]);
                return Ok(Stepped::Done(Next::After(ROUTER_RETRY)));
            }
        }
    }
    if let Some(stepped) = make(ctx, rollout, &mut rv, &read, after, &mut made).await? {
        return Ok(stepped);
    }
    if made.evictions > 0 && made.refused == made.evictions {
        return Ok(Stepped::Refused);
    }
    let key = (namespace_of(rollout), rollout.name_any());
    let old = rollout.status.clone().unwrap_or_default();
    let changed = plan.status != old;
    if changed {
        let written =
            rollout_writes::patch_status(&ctx.statuses, rollout, &rv, &old, &plan.status).await;
        match written {
            Ok(meta) => ctx.rollouts.remember(
                key.clone(),
                Some(Ahead {
                    base_rv: rv,
                    status: plan.status.clone(),
                    written_rv: meta.resource_version,
                    uncounted: Vec::new(),
                    wakeup: None,
                }),
            ),
            Err(WriteError::Conflict) => {
                ctx.metrics.reconcile_error("conflict");
                return Ok(Stepped::Changed);
            }
            Err(WriteError::Gone) => return Ok(Stepped::Done(Next::Change)),
            Err(e) => return Err(ReconcileError::Write(e)),
        }
    }
    publish(ctx, rollout, &plan.events);
    Ok(Stepped::Done(if changed || !plan.writes.is_empty() {
        Next::After(AGAIN)
    } else {
        requeue_at(plan.wake_at, ctx.clock.now())
    }))
}

/// Evictions a plan asked for, and how many a PodDisruptionBudget refused.
#[derive(Default)]
struct Made {
    evictions: usize,
    refused: usize,
}

/// Makes `writes` in order, each conditional on what was read; `Some` ends the step (a write met a change
/// made since the read: plan again).
async fn make(
    ctx: &Context,
    rollout: &Rollout,
    rv: &mut String,
    read: &Read,
    writes: &[rollout::Write],
    made: &mut Made,
) -> Result<Option<Stepped>, ReconcileError> {
    for write in writes {
        made.evictions += usize::from(matches!(write, rollout::Write::EvictPod { .. }));
        match rollout_writes::apply(&ctx.client, &ctx.evictions, rollout, rv, read, write).await {
            Ok(()) => {}
            Err(WriteError::Refused) => made.refused += 1,
            Err(WriteError::Conflict | WriteError::Gone) => {
                ctx.metrics.reconcile_error("conflict");
                return Ok(Some(Stepped::Changed));
            }
            Err(error) => {
                if let (rollout::Write::CreateReplicaSet(rs), WriteError::Api(e)) = (write, &error)
                {
                    report_refused_create(ctx, rollout, rv, rs, e).await;
                }
                return Err(ReconcileError::RolloutWrite {
                    write: rollout_writes::describe(rollout, write),
                    error,
                });
            }
        }
    }
    Ok(None)
}

/// Argo's report of a new ReplicaSet the API server refused (a quota, an admission webhook, RBAC), so that
/// `kubectl describe rollout` and `kubectl argo rollouts get` say why the Rollout does not progress: a Warning
/// Event `ReplicaSetCreateError` and the Progressing condition False with the server's message, written over
/// the status read at `rv` (nothing else of it changes). Like Argo's, a status write that fails is logged and
/// the reconcile's error stands; the reconcile retried after it creates the ReplicaSet once the server lets
/// it, and its plan sets Progressing to `NewReplicaSetCreated`.
async fn report_refused_create(
    ctx: &Context,
    rollout: &Rollout,
    rv: &str,
    rs: &ReplicaSet,
    error: &kube::Error,
) {
    // The server's words alone, as Argo's `%v` of a StatusError shows them.
    let said = match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    };
    let name = rs.metadata.name.as_deref().unwrap_or_default();
    let (status, message) =
        rollout::status::create_refused(rollout, name, &said, ctx.clock.stamp());
    let old = rollout.status.clone().unwrap_or_default();
    if status != old {
        let written = rollout_writes::patch_status(&ctx.statuses, rollout, rv, &old, &status).await;
        if let Err(e) = written {
            warn!(rollout = %shown(&namespace_of(rollout), &rollout.name_any()), error = %e, "Cannot write the Progressing condition");
        }
    }
    let refused = rollout::Event {
        reason: reasons::FAILED_RS_CREATE.to_string(),
        message,
        warning: true,
    };
    publish(ctx, rollout, &[refused]);
}

/// The plan for `rollout`, run on through the plans that follow it while they change only the status: nothing
/// in the cluster changes between them, so each is made from the status the one before left and the status is
/// written once, with their Events in order. A plan with writes stops the run and is made again after a fresh
/// read, so every write is planned from a status that was stored (a crash repeats nothing).
fn coalesced(ctx: &Context, rollout: &Rollout, read: &Read, now: jiff::Timestamp) -> Plan {
    let mut current = plan(ctx, rollout, read, now);
    if !current.writes.is_empty() {
        return current;
    }
    let mut planned = rollout.clone();
    let mut events = Vec::new();
    for _ in 0..COALESCED {
        if planned.status.as_ref() == Some(&current.status) {
            break;
        }
        planned.status = Some(current.status.clone());
        let next = plan(ctx, &planned, read, now);
        if !next.writes.is_empty() {
            break;
        }
        events.append(&mut current.events);
        // The status run on in memory says the last route was applied: keep it if this plan has none.
        let route = current.route.take();
        current = next;
        current.route = current.route.take().or(route);
    }
    events.append(&mut current.events);
    current.events = events;
    current
}

/// The plan for `rollout` at `now` (stamped as the status stores it, so the status planned now equals the one
/// read back).
fn plan(ctx: &Context, rollout: &Rollout, read: &Read, now: jiff::Timestamp) -> Plan {
    let lookup = |r: &AnalysisTemplateRef| {
        let key = (
            r.cluster_scope == Some(true),
            r.template_name.clone().unwrap_or_default(),
        );
        read.templates.get(&key)
    };
    rollout::plan(&Observed {
        rollout,
        replica_sets: &read.replica_sets,
        analysis_runs: &read.analysis_runs,
        services: &read.services,
        pods: read.pods.as_deref(),
        templates: &lookup,
        instance_id: ctx.config.instance_id.as_deref(),
        now,
    })
}

fn namespace_of(rollout: &Rollout) -> String {
    rollout.namespace().unwrap_or_default()
}

/// Queues a plan's Events, once its writes have landed, in the plan's order (their names sort in it).
fn publish(ctx: &Context, rollout: &Rollout, events: &[rollout::Event]) {
    let now = ctx.clock.now();
    let shown_key = shown(&namespace_of(rollout), &rollout.name_any());
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
        ctx.events.push(events::about(
            &ctx.reporter,
            rollout.object_ref(&()),
            what,
            now,
            serial,
        ));
    }
}
