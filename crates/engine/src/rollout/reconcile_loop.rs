//! One reconcile of one Rollout, whatever cluster it acts on: read, plan, make the plan's writes in
//! Argo's order with the traffic routers brought to the plan's weight between them, store the status when it
//! changed (a change of the counts alone when [`status_write`] says it is due), publish the Events. The daemon acts on the API server (`controller::rollout`), `rehearse`, `demo`
//! and the planner's tests on memory ([`super::memory`]): both are a [`Cluster`], and this loop is the only one,
//! so a rehearsal makes the daemon's moves by construction.
//!
//! A write or status store that meets a change made since the read (a 409, an object gone) reads and plans
//! again, at most [`ATTEMPTS`] times; a PodDisruptionBudget that refuses every eviction of a plan plans again
//! without the pods (Argo's pod restarter gives up the restart for that reconcile, not the rest of it). A plan
//! that stops short of its status still publishes the Events of the writes it made ([`Event::after_write`]):
//! the next plan will not make them again.
//!
//! Where the cluster coalesces ([`Cluster::COALESCE`], the daemon), plans that change only the status are run on
//! in memory and their status stored once: up to the first plan with writes, which joins them when its writes
//! may be made ahead of that status (`made_ahead`), and after a plan's writes, from the objects as they left
//! them (`Snapshot::after`).

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use super::snapshot::Planning;
pub use super::snapshot::Snapshot;
use super::status_write::{StatusWrite, status_write};
use super::{Event, Plan, Route, Validated, Write};
use crate::api::reasons::rollout as reasons;
use crate::api::rollout::RolloutStatus;
use crate::api::{AnalysisTemplateRef, AnalysisTemplateSpec, Rollout};
use crate::routing::{ManagedRouteChange, RouteFailure, managed_routes};

/// Reads and plans of one reconcile at most, when writes keep meeting changes.
pub const ATTEMPTS: usize = 3;

/// Status-only plans run on in memory before their one status write, at most (a guard: the planner reaches a
/// plan with writes or a status it keeps within a few).
const COALESCED: usize = 8;

/// Analysis templates by (cluster-scoped, name), as the planner looks them up.
pub type Templates = BTreeMap<(bool, String), AnalysisTemplateSpec>;

/// The key of a `templates[]` reference in [`Templates`].
pub fn template_key(r: &AnalysisTemplateRef) -> (bool, String) {
    (
        r.cluster_scope == Some(true),
        r.template_name.clone().unwrap_or_default(),
    )
}

/// The templates `wanted` names and those they nest, each looked up once in `known` (a cycle ends when its
/// templates are known). `known` says of a key `Some(Some(spec))` when it exists, `Some(None)` when it does
/// not, `None` when it is not known yet: those keys are returned instead, to be read and looked up again.
pub fn nested_templates(
    mut wanted: Vec<AnalysisTemplateRef>,
    known: impl Fn(&(bool, String)) -> Option<Option<AnalysisTemplateSpec>>,
) -> Result<Templates, Vec<(bool, String)>> {
    let (mut templates, mut looked, mut unknown) = (Templates::new(), BTreeSet::new(), Vec::new());
    while let Some(r) = wanted.pop() {
        let key = template_key(&r);
        if key.1.is_empty() || !looked.insert(key.clone()) {
            continue;
        }
        match known(&key) {
            None => unknown.push(key),
            Some(None) => {}
            Some(Some(spec)) => {
                wanted.extend(spec.templates.clone().unwrap_or_default());
                templates.insert(key, spec);
            }
        }
    }
    if unknown.is_empty() {
        Ok(templates)
    } else {
        Err(unknown)
    }
}

/// How one write of a plan went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    Done,
    /// A PodDisruptionBudget refused an eviction: the rest of the plan goes on.
    Refused,
    /// It met a change made since the read (a 409, an object gone): plan again.
    Changed,
}

/// How the status store went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    Written,
    /// The Rollout changed since the read: plan again.
    Changed,
    /// The Rollout is gone.
    Gone,
}

/// What a Rollout's reconcile acts on: the API server, or a cluster in memory. Each method does one thing the
/// loop asks for and decides nothing.
pub trait Cluster {
    /// A failure that ends the reconcile (it is retried later): an unreachable server, a refused write.
    type Error;
    /// Whether plans that change only the status are run on in memory, up to the first plan with writes, and
    /// their status stored once (an API server is spared the writes; a rehearsal shows every step).
    const COALESCE: bool;

    /// `--instance-id`, which labels the AnalysisRuns the plans create.
    fn instance_id(&self) -> Option<&str>;

    /// Reads the Rollout and what it controls (afresh when the loop reads again after a change); `None` when it
    /// is gone or not this instance's.
    fn observe(&mut self) -> impl Future<Output = Result<Option<Snapshot>, Self::Error>> + Send;

    /// Makes one write of a plan made from `seen`, conditional on what `seen` holds.
    fn make(
        &mut self,
        seen: &Snapshot,
        write: &Write,
    ) -> impl Future<Output = Result<Made, Self::Error>> + Send;

    /// Brings the traffic routers to `route`: the Events of the objects it wrote, in order
    /// ([`Target::written`](crate::routing::Target::written)), or why they could not be.
    fn route(
        &mut self,
        seen: &Snapshot,
        route: &Route,
    ) -> impl Future<Output = Result<Vec<Event>, RouteFailure>> + Send;

    /// Stores `status` over the one `seen` holds (the Rollout's own writes of this reconcile included).
    fn store_status(
        &mut self,
        seen: &Snapshot,
        status: &RolloutStatus,
    ) -> impl Future<Output = Result<Stored, Self::Error>> + Send;

    /// Publishes Events about the Rollout, in order.
    fn publish(&mut self, rollout: &Rollout, events: &[Event]);

    /// The `now` of the snapshot whose plan's status this cluster last stored for the Rollout, when it keeps
    /// it: then a change of the counts alone waits until [`status_write`] says it is due. `None` (a
    /// rehearsal, which shows every status) stores each change at once.
    fn status_written_at(&self) -> Option<Timestamp> {
        None
    }

    /// Takes back what [`Cluster::observe`] read, once the loop is done with it (after each attempt, whatever
    /// its end). The in-memory cluster lends its own state to the loop rather than copying it on every
    /// reconcile, and gets it back here; other clusters drop it.
    fn release(&mut self, seen: Snapshot) {
        drop(seen);
    }
}

/// How a reconcile ended.
#[derive(Debug, Clone)]
pub enum Reconciliation {
    /// The Rollout is gone, or not this instance's.
    Gone,
    /// The plan was carried out; `changed` when it wrote anything (look again at once, as the status write's
    /// own watch event makes Argo's controller do), else look again at `plan.wake_at` (which includes when
    /// counts held back are due). `settled` where the cluster coalesces: the plans were run on in memory, from
    /// the objects as the plan's writes left them, to one that changes nothing, so a reconcile of the same
    /// objects would find nothing to do; the next one is due at `plan.wake_at` or when an object changes (its
    /// watch event), not at once.
    Planned {
        plan: Plan,
        changed: bool,
        settled: bool,
    },
    /// The routers could not be brought to the plan's route: nothing after it was made (the status would say
    /// the weight is applied), and, where Argo records one, a `TrafficRoutingError` Event says why.
    Unrouted { plan: Plan, failure: RouteFailure },
    /// Every attempt met a change: something keeps changing under the plans.
    Contended,
}

/// One reconcile of the Rollout `cluster` holds.
pub async fn reconcile<C: Cluster + Send>(cluster: &mut C) -> Result<Reconciliation, C::Error> {
    let mut restart = true;
    for _ in 0..ATTEMPTS {
        let Some(seen) = cluster.observe().await? else {
            return Ok(Reconciliation::Gone);
        };
        let stepped = step(cluster, &seen, restart).await;
        cluster.release(seen);
        match stepped? {
            Stepped::Done(reconciled) => return Ok(*reconciled),
            Stepped::Changed => {}
            // Argo's pod restarter: having restarted nothing, the reconcile goes on without the restart (the
            // planner looks again in 30 s).
            Stepped::Refused => restart = false,
        }
    }
    Ok(Reconciliation::Contended)
}

/// How one read, plan and write ended.
enum Stepped {
    Done(Box<Reconciliation>),
    Changed,
    /// A PodDisruptionBudget refused every eviction of the plan.
    Refused,
}

/// Evictions a plan asked for, and how many were refused.
#[derive(Default)]
struct Tally {
    evictions: usize,
    refused: usize,
}

async fn step<C: Cluster + Send>(
    cluster: &mut C,
    seen: &Snapshot,
    restart: bool,
) -> Result<Stepped, C::Error> {
    // Owned: the plans after this plan's writes are made once the cluster has made them.
    let instance_id = cluster.instance_id().map(str::to_string);
    let how = Planning {
        instance_id: instance_id.as_deref(),
        restart,
    };
    let validated = Validated::default();
    let (mut plan, mut settled) = if C::COALESCE {
        coalesced(seen, how, &validated)
    } else {
        (seen.plan_for(&seen.rollout, how, &validated), false)
    };
    let (before, after) = plan
        .writes
        .split_at(plan.route_after.min(plan.writes.len()));
    let mut tally = Tally::default();
    let (landed, made) = make(cluster, seen, before, &mut tally).await;
    if !matches!(made, Ok(true)) {
        publish_landed(cluster, seen, &plan, landed);
        return made.map(|_| Stepped::Changed);
    }
    // Traffic after the ReplicaSets' creation and the Services' selectors, before analysis and scaling, in
    // Argo's order.
    // The routers' Events are published once their writes are made, as Argo's routers record them.
    if let Some(route) = &plan.route {
        match cluster.route(seen, route).await {
            Ok(written) if written.is_empty() => {}
            Ok(written) => cluster.publish(&seen.rollout, &written),
            Err(failure) => {
                publish_landed(cluster, seen, &plan, before.len());
                if failure.announced {
                    let warning = |(reason, message): (&str, String)| Event {
                        reason: reason.to_string(),
                        message,
                        warning: true,
                        after_write: None,
                    };
                    let failed = (reasons::TRAFFIC_ROUTING_ERROR, failure.message.clone());
                    let told: Vec<Event> = (failure.router_warning.clone().into_iter())
                        .chain([failed])
                        .map(warning)
                        .collect();
                    cluster.publish(&seen.rollout, &told);
                }
                return Ok(Stepped::Done(Box::new(Reconciliation::Unrouted {
                    plan,
                    failure,
                })));
            }
        }
    }
    let (landed, made) = make(cluster, seen, after, &mut tally).await;
    if !matches!(made, Ok(true)) {
        publish_landed(cluster, seen, &plan, before.len() + landed);
        return made.map(|_| Stepped::Changed);
    }
    if tally.evictions > 0 && tally.refused == tally.evictions {
        return Ok(Stepped::Refused);
    }
    if C::COALESCE && !plan.writes.is_empty() {
        let (after, checked_alike) = seen.after(&plan.writes);
        let fresh = Validated::default();
        let validated = if checked_alike { &validated } else { &fresh };
        // Its status is not the one the objects were planned from: plan on at least once.
        (plan, settled) = run_on(&after, validated, None, plan, how, false);
    }
    let when = status_write(
        seen.rollout.status.as_ref(),
        &plan.status,
        cluster.status_written_at(),
        seen.now,
    );
    if let StatusWrite::At(due) = when {
        plan.wake_at = Some(plan.wake_at.map_or(due, |at| at.min(due)));
    }
    let changed = when == StatusWrite::Now;
    if changed {
        let stored = cluster.store_status(seen, &plan.status).await;
        if !matches!(stored, Ok(Stored::Written)) {
            publish_landed(cluster, seen, &plan, plan.writes.len());
        }
        match stored? {
            Stored::Written => {}
            Stored::Changed => return Ok(Stepped::Changed),
            Stored::Gone => return Ok(Stepped::Done(Box::new(Reconciliation::Gone))),
        }
    }
    cluster.publish(&seen.rollout, &plan.events);
    Ok(Stepped::Done(Box::new(Reconciliation::Planned {
        changed: changed || !plan.writes.is_empty(),
        plan,
        settled,
    })))
}

/// Makes `writes` in order: how many landed, and false when one met a change (plan again).
async fn make<C: Cluster + Send>(
    cluster: &mut C,
    seen: &Snapshot,
    writes: &[Write],
    tally: &mut Tally,
) -> (usize, Result<bool, C::Error>) {
    for (landed, write) in writes.iter().enumerate() {
        tally.evictions += usize::from(matches!(write, Write::EvictPod { .. }));
        match cluster.make(seen, write).await {
            Ok(Made::Done) => {}
            Ok(Made::Refused) => tally.refused += 1,
            Ok(Made::Changed) => return (landed, Ok(false)),
            Err(e) => return (landed, Err(e)),
        }
    }
    (writes.len(), Ok(true))
}

/// When a plan stops short of its status (a write or the routers failed, or the status met a change), the
/// Events of its first `landed` writes, which the next plan will not make again: Argo records each as it makes
/// the write, so they stand whatever fails after it. The plan's other Events go with its status.
fn publish_landed<C: Cluster>(cluster: &mut C, seen: &Snapshot, plan: &Plan, landed: usize) {
    let told: Vec<Event> = plan
        .events
        .iter()
        .filter(|e| e.after_write.is_some_and(|w| w < landed))
        .cloned()
        .collect();
    if !told.is_empty() {
        cluster.publish(&seen.rollout, &told);
    }
}

/// What `plan`'s route does to the managed header and mirror routes.
fn managed(plan: &Plan) -> &ManagedRouteChange {
    plan.route
        .as_ref()
        .map_or(&managed_routes::NO_CHANGE, |r| &r.managed)
}

/// The plan for `seen`, run on through the plans that follow it while they change only the status
/// ([`run_on`]), up to the first plan with writes, which joins the run when [`made_ahead`] says so. A plan
/// with writes of its own is returned as it is (not settled).
fn coalesced(seen: &Snapshot, how: Planning<'_>, validated: &Validated) -> (Plan, bool) {
    let first = seen.plan_for(&seen.rollout, how, validated);
    if !first.writes.is_empty() {
        return (first, false);
    }
    run_on(
        seen,
        validated,
        seen.rollout.status.as_ref(),
        first,
        how,
        true,
    )
}

/// `current`, made from `objects` with the status `from` (`None`: another status), run on through the plans that
/// follow it while they change only the status: nothing in the cluster changes between them, so each is made from
/// the status the one before left and the status is stored once, with their Events in order. Its writes, when it
/// has them, are made and `objects` shows them (the plans after a plan's writes, [`Snapshot::after`]); a plan
/// after them joins only if it would leave the routers where that plan brought them. The first plan with writes
/// ends the run: it joins it (`ahead`, and [`made_ahead`]: its writes made from the status run on in memory, the
/// whole stored once after them) or is left for the next reconcile, made after a fresh read from the status
/// stored. Nothing after a plan with writes is planned from objects that do not show them. `validated` keeps the
/// checks of the plans made from `objects`. Also whether the run settled: it ended because a plan made from the
/// status the run left changed nothing, not at a plan with writes left for a fresh read, a change of the managed
/// routes or the guard.
fn run_on(
    objects: &Snapshot,
    validated: &Validated,
    from: Option<&RolloutStatus>,
    mut current: Plan,
    how: Planning<'_>,
    ahead: bool,
) -> (Plan, bool) {
    if from == Some(&current.status) {
        return (current, true);
    }
    // The objects' Rollout, its status each plan's in turn: copied once, and without the status it replaces.
    let mut planned = Rollout {
        metadata: objects.rollout.metadata.clone(),
        spec: objects.rollout.spec.clone(),
        status: None,
    };
    for _ in 0..COALESCED {
        if planned.status.as_ref() == Some(&current.status) {
            return (current, true);
        }
        planned.status = Some(current.status.clone());
        let next = objects.plan_for(&planned, how, validated);
        let writes = !next.writes.is_empty();
        let joins = if writes {
            ahead && made_ahead(&next, &current)
        } else {
            current.writes.is_empty() || next.route.is_none() || next.route == current.route
        };
        // A header or mirror route step's route is set by its own plan's route, so a change to the managed
        // routes stops the run as a write does.
        if !joins || managed(&next) != managed(&current) {
            break;
        }
        absorb(&mut current, next);
        if writes {
            break;
        }
    }
    (current, false)
}

/// `next`, planned after `current`, joined to it: its status, wake-up and Events after `current`'s; its
/// writes and route, when it has them (the writes only when `current` has none). The status run on in memory
/// says the last route was applied, so `current`'s route stays when `next` names none.
fn absorb(current: &mut Plan, next: Plan) {
    current.events.extend(next.events);
    current.status = next.status;
    current.wake_at = next.wake_at;
    current.desired_weight = next.desired_weight;
    if !next.writes.is_empty() {
        current.writes = next.writes;
        current.route_after = next.route_after;
    }
    if next.route.is_some() {
        current.route = next.route;
    }
}

/// Whether `next`'s writes may be made from the status the plans before it (ending with `current`) left in
/// memory, before that status is stored. Its writes act on the objects as read, each conditional on them as
/// the writes of any plan are, and each says what it leaves rather than what it adds (a create by the name
/// the status and the step decide, which finds itself made already; a patch of values; a delete of what may
/// be gone), so a status lost to a crash or a conflict leaves writes that the next plan, made from the status
/// stored, makes again as no change or undoes (a run no longer current is terminated, a count scaled back).
/// Not an eviction, which would evict another pod when made again; and not a plan whose route differs from
/// the one the plans before it leave to be applied: theirs comes first in Argo's order (the promotion's weight
/// of 100 before the stable Service switches and the weight goes back), so it needs a reconcile of its own.
fn made_ahead(next: &Plan, current: &Plan) -> bool {
    !next
        .writes
        .iter()
        .any(|w| matches!(w, Write::EvictPod { .. }))
        && (current.route.is_none() || next.route == current.route)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(names: &[(&str, bool)]) -> Vec<AnalysisTemplateRef> {
        let refs: Vec<_> = names
            .iter()
            .map(|(name, cluster)| serde_json::json!({"templateName": name, "clusterScope": cluster}))
            .collect();
        serde_json::from_value(serde_json::Value::Array(refs)).expect("template references")
    }

    fn spec(nests: &[(&str, bool)]) -> AnalysisTemplateSpec {
        serde_json::from_value(serde_json::json!({"metrics": [], "templates": refs(nests)}))
            .expect("a template spec")
    }

    #[test]
    fn nested_templates_are_each_looked_up_once_and_the_unknown_ones_named() {
        // a nests the cluster template b, which nests a again and the missing c.
        let known = |key: &(bool, String)| match (key.0, key.1.as_str()) {
            (false, "a") => Some(Some(spec(&[("b", true)]))),
            (true, "b") => Some(Some(spec(&[("a", false), ("c", false)]))),
            (false, "c") => Some(None),
            _ => None,
        };
        let found = nested_templates(refs(&[("a", false)]), known).expect("all known");
        let keys: Vec<_> = found.keys().cloned().collect();
        assert_eq!(
            keys,
            vec![(false, "a".to_string()), (true, "b".to_string())]
        );
        let unknown = nested_templates(refs(&[("a", false), ("d", true), ("", false)]), known);
        assert_eq!(unknown.err(), Some(vec![(true, "d".to_string())]));
    }
}
