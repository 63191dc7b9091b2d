//! A rehearsal: a Rollout's canary steps played on the in-memory cluster (`engine::rollout::memory`) on a
//! virtual clock, by the daemon's planner, with its step and background analyses measured by the daemon's
//! measuring loop at the virtual time (against Prometheus history for `canaryd rehearse`, against a scenario
//! for `canaryd demo`). It reports a timeline ([`Entry`]) and how the rollout ended ([`Ending`]).
//!
//! Owns only what stands in for the world around the planner: pods that become available `ready_after`
//! after they are asked for, a person who promotes an indefinite pause after `promote_after`, and the clock.
//! Every rule about steps, weights, pauses, aborts and analysis is the planner's or the analysis engine's;
//! nothing here decides one.

pub mod runs;
mod timeline;

pub(crate) use timeline::shown;
pub use timeline::{Ending, Entry, Outcome};

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Service;

use crate::api::Rollout;
use crate::api::reasons::rollout::{CANARY_PAUSE_STEP, INCONCLUSIVE_ANALYSIS};
use crate::api::rollout::RolloutStatus;
use crate::engine::rollout::memory::MemoryCluster;
use crate::engine::rollout::reconcile_loop::{Reconciliation, Templates};
use crate::engine::rollout::{Plan, steps};
use crate::engine::routing::memory::Routers;
use crate::measure::Providers;
use crate::time::Clock;

/// The annotation on the pod template that makes the rehearsed revision differ from the one running.
pub const REVISION_MARK: &str = "canaryd.io/rehearsal";

/// What a rehearsal plays: the Rollout and what it refers to, read from the user's files.
#[derive(Debug, Clone)]
pub struct Setup {
    pub rollout: Rollout,
    /// By (cluster-scoped, name).
    pub templates: Templates,
    /// The Services the Rollout names (made up with the Rollout's selector when the files hold none).
    pub services: Vec<Service>,
    pub routers: Routers,
    /// `--arg NAME=VALUE`: wins over the value the Rollout or template gives.
    pub args: Vec<(String, String)>,
    /// `--prometheus`: every Prometheus metric's address.
    pub prometheus: Option<String>,
}

/// The world around the planner.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub from: Timestamp,
    /// The rehearsal stops here if it has not ended (as waiting).
    pub to: Option<Timestamp>,
    /// How long new pods take to become available.
    pub ready_after: SignedDuration,
    /// A person promotes an indefinite pause or an Inconclusive analysis this long after it began; `None`:
    /// nobody does, and the rehearsal ends there, waiting.
    pub promote_after: Option<SignedDuration>,
}

/// Why a rehearsal could not be played; the message is for the Rollout's author.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct RehearsalError(pub String);

/// Promotions at one step after which a pause that keeps coming back is left to a person.
const PROMOTE_LIMIT: usize = 3;
/// Reconciles per instant at most; the planner settles in a handful.
const SETTLE_LIMIT: usize = 50;
/// Instants a rehearsal may visit: far beyond any real Rollout, it stops a loop that would never end.
const ROUND_LIMIT: usize = 1_000_000;

/// `t + d`, or the last instant a timestamp holds when that is past it (`--from` near the year 9999).
fn later(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// Plays one rehearsal from `opts.from`, reporting the timeline to `on`; the ending carries the
/// AnalysisRuns as they stood at the end.
pub async fn play(
    setup: &Setup,
    providers: &Providers,
    opts: &Options,
    on: &mut dyn FnMut(&Entry),
) -> Result<Ending, RehearsalError> {
    let mut cluster = rehearsed_cluster(setup, opts.from)?;
    let mut ending = play_on(&mut cluster, setup, providers, opts, on).await?;
    ending.analysis_runs = std::mem::take(&mut cluster.analysis_runs);
    Ok(ending)
}

async fn play_on(
    cluster: &mut MemoryCluster,
    setup: &Setup,
    providers: &Providers,
    opts: &Options,
    on: &mut dyn FnMut(&Entry),
) -> Result<Ending, RehearsalError> {
    let clock = Clock::virtual_at(opts.from);
    let steps = steps::steps(&cluster.rollout).len();
    let mut runs = runs::Runs::new(&setup.args, setup.prometheus.as_deref());
    let mut available_at: Option<Timestamp> = None;
    let mut shown = Shown::default();
    let mut progressing_step = 1;
    let mut promoted_at: BTreeMap<usize, usize> = BTreeMap::new();
    for _ in 0..ROUND_LIMIT {
        let now = clock.stamp();
        if available_at.is_some_and(|t| t <= now) {
            cluster.make_available();
            available_at = None;
        }
        runs.measure_due(cluster, providers, &clock, on).await;
        let wake = settle(
            cluster,
            now,
            opts.ready_after,
            &mut available_at,
            &mut shown,
            steps,
            on,
        )?;
        let status = cluster.status();
        if !status.abort {
            progressing_step = status.current_step_index.unwrap_or(0).max(0) as usize + 1;
        }
        let end = |outcome, reason: String, metric| {
            Ok(ending(
                opts,
                now,
                progressing_step,
                &status,
                outcome,
                reason,
                metric,
            ))
        };
        if let Some((outcome, reason, metric)) = finished(cluster, &status) {
            return end(outcome, reason, metric);
        }
        let promotions = promoted_at.get(&progressing_step).copied().unwrap_or(0);
        let promote_at = match person(cluster, &status, opts.promote_after, promotions, now) {
            Person::Away(promote_at) => promote_at,
            Person::Leaves(reason, metric) => return end(Outcome::Waiting, reason, metric),
            Person::Promotes(reason) => {
                *promoted_at.entry(progressing_step).or_default() += 1;
                cluster.patch_status(|s| promote(s, steps));
                on(&Entry::Promote { time: now, reason });
                continue;
            }
        };
        let due = [wake, available_at, promote_at, runs.next_due(cluster, now)]
            .into_iter()
            .flatten()
            .min();
        match next_instant(due, now, opts.to, &status) {
            Err(reason) => return end(Outcome::Waiting, reason, None),
            // A run created just now is measured at once, as the daemon's controller picks it up.
            Ok(next) if next == now => continue,
            Ok(next) => clock.sleep_until(next).await,
        }
    }
    Err(RehearsalError(format!(
        "the rehearsal did not end within {ROUND_LIMIT} reconciles"
    )))
}

/// The in-memory cluster a rehearsal starts from: the user's Rollout, templates, Services and routers, its
/// running version deployed at `from`, and its pod template marked as the revision to rehearse.
fn rehearsed_cluster(setup: &Setup, from: Timestamp) -> Result<MemoryCluster, RehearsalError> {
    let mut cluster = MemoryCluster::new(setup.rollout.clone());
    cluster.templates = setup.templates.clone();
    cluster.services = setup.services.clone();
    cluster.routers = setup.routers.clone();
    deploy_running_version(&mut cluster, from)?;
    cluster.edit_spec(|spec| {
        if let Some(template) = spec.template.as_mut() {
            mark_revision(template);
        }
    });
    Ok(cluster)
}

/// What the timeline last said of the Rollout, so it says each change once.
#[derive(Debug, Default)]
struct Shown {
    /// The step (index) and weight last reported.
    step: Option<(usize, i32)>,
    /// Why the routers were held back at the last reconcile, if they were.
    held: Option<String>,
}

/// Reconciles at `now` until the planner settles (at most `SETTLE_LIMIT` times), reporting its Events and
/// new steps and asking for pods (available at once, or `ready_after` later); returns when it wakes next.
/// Routers held back end the instant: nothing more moves until the pods become available.
fn settle(
    cluster: &mut MemoryCluster,
    now: Timestamp,
    ready_after: SignedDuration,
    available_at: &mut Option<Timestamp>,
    shown: &mut Shown,
    steps: usize,
    on: &mut dyn FnMut(&Entry),
) -> Result<Option<Timestamp>, RehearsalError> {
    let mut wake = None;
    for _ in 0..SETTLE_LIMIT {
        let before = cluster.rollout.status.clone();
        let recorded = cluster.events.len();
        let (plan, held) = reconcile(cluster, now)?;
        // What the reconcile recorded, as the daemon publishes it: the plan's Events for the writes made, the
        // routers' for the objects written, a TrafficRoutingError where Argo records one.
        for e in &cluster.events[recorded..] {
            on(&Entry::Event {
                time: now,
                reason: e.reason.clone(),
                message: e.message.clone(),
                warning: e.warning,
            });
        }
        let mut became_available = false;
        if needs_pods(cluster) && available_at.is_none() {
            if ready_after.is_zero() {
                became_available = cluster.make_available();
            } else {
                *available_at = Some(later(now, ready_after));
            }
        }
        if let Some(message) = held {
            if shown.held.as_ref() != Some(&message) {
                on(&Entry::Held {
                    time: now,
                    message: message.clone(),
                });
            }
            shown.held = Some(message);
            if became_available {
                continue;
            }
            return Ok(None);
        }
        shown.held = None;
        show_step(cluster, &plan, &mut shown.step, steps, now, on);
        wake = plan.wake_at;
        if plan.writes.is_empty() && cluster.rollout.status == before && !became_available {
            break;
        }
    }
    Ok(wake)
}

/// How a rehearsal that ended at `now` ended: its outcome, reason and deciding metric with the times, the
/// step it was at (`step`, unless it was promoted) and the Rollout's `status`.
fn ending(
    opts: &Options,
    now: Timestamp,
    step: usize,
    status: &RolloutStatus,
    outcome: Outcome,
    reason: String,
    metric: Option<String>,
) -> Ending {
    Ending {
        outcome,
        started: shown(opts.from),
        ended: shown(now),
        seconds: now.duration_since(opts.from).as_secs(),
        step: (outcome != Outcome::Promoted).then_some(step),
        metric,
        reason,
        status: status.clone(),
        analysis_runs: Vec::new(),
    }
}

/// Whether the rollout is over on its own: aborted (with the metric that decided it) or promoted.
fn finished(
    cluster: &MemoryCluster,
    status: &RolloutStatus,
) -> Option<(Outcome, String, Option<String>)> {
    if status.abort {
        return Some((
            Outcome::Aborted,
            status.message.clone(),
            runs::deciding_metric(cluster),
        ));
    }
    if status.phase == "Healthy" && status.stable_rs == status.current_pod_hash {
        return Some((Outcome::Promoted, "the new revision is stable".into(), None));
    }
    None
}

/// What the person `--promote-after` stands for does at an instant.
enum Person {
    /// Nothing yet: no pause waits for them, or they promote the one that does at this time.
    Away(Option<Timestamp>),
    /// They promote the pause now, for this reason.
    Promotes(String),
    /// Nobody promotes the pause: the rehearsal ends waiting, for this reason (and metric).
    Leaves(String, Option<String>),
}

/// What the person does at `now` about a pause only a person ends, given `promotions` already made at this
/// step: nobody promotes it without `promote_after`, nor one that keeps coming back after `PROMOTE_LIMIT`.
fn person(
    cluster: &MemoryCluster,
    status: &RolloutStatus,
    promote_after: Option<SignedDuration>,
    promotions: usize,
    now: Timestamp,
) -> Person {
    let Some((since, reason)) = waiting_for_a_person(&cluster.rollout, status) else {
        return Person::Away(None);
    };
    let metric = (reason == INCONCLUSIVE_ANALYSIS)
        .then(|| runs::deciding_metric(cluster))
        .flatten();
    match promote_after {
        None => Person::Leaves(
            format!("paused ({reason}): waiting for a person to promote or abort"),
            metric,
        ),
        Some(_) if promotions >= PROMOTE_LIMIT => Person::Leaves(
            format!(
                "paused ({reason}) again after {PROMOTE_LIMIT} promotions at this step: waiting for a \
                 person to abort"
            ),
            metric,
        ),
        Some(after) if later(since, after) <= now => Person::Promotes(format!(
            "promoted {after:#} after the pause ({reason}) began"
        )),
        Some(after) => Person::Away(Some(later(since, after))),
    }
}

/// The next instant to play after `now`, given the earliest one anything is `due` at (`now` itself: at
/// once; otherwise at least a second on); or why the rehearsal ends waiting: nothing is due (stuck), or
/// not before `to`.
fn next_instant(
    due: Option<Timestamp>,
    now: Timestamp,
    to: Option<Timestamp>,
    status: &RolloutStatus,
) -> Result<Timestamp, String> {
    if due == Some(now) {
        return Ok(now);
    }
    let Some(next) = due else {
        return Err(format!("stuck: {} ({})", status.phase, status.message));
    };
    let next = next.max(later(now, SignedDuration::from_secs(1)));
    // Nothing is played at the last instant a timestamp holds: what falls there (or past it) never comes.
    let horizon = to.unwrap_or(Timestamp::MAX);
    if next > horizon || next == Timestamp::MAX {
        return Err(format!(
            "not finished by {} ({}: {})",
            shown(horizon),
            status.phase,
            status.message
        ));
    }
    Ok(next)
}

/// The revision running before the rehearsal: deployed and fully available at `at` (a first deploy goes
/// straight to full, as Argo's does).
fn deploy_running_version(
    cluster: &mut MemoryCluster,
    at: Timestamp,
) -> Result<(), RehearsalError> {
    for _ in 0..SETTLE_LIMIT {
        let became_available = cluster.make_available();
        let before = cluster.rollout.status.clone();
        let (plan, _) = reconcile(cluster, at)?;
        if plan.writes.is_empty() && cluster.rollout.status == before && !became_available {
            break;
        }
    }
    let status = cluster.status();
    if status.phase != "Healthy" {
        return Err(RehearsalError(format!(
            "the Rollout's running version does not become Healthy on its own ({}: {})",
            status.phase, status.message
        )));
    }
    cluster.events.clear();
    Ok(())
}

/// One reconcile of the rehearsed Rollout at `now`: its plan and why the routers were held back from its
/// route, if they were, or why they could not be brought to it (a router object among the files that does not
/// fit the Rollout).
fn reconcile(
    cluster: &mut MemoryCluster,
    now: Timestamp,
) -> Result<(Plan, Option<String>), RehearsalError> {
    match cluster.reconciled(now) {
        Reconciliation::Planned { plan, .. } => Ok((plan, None)),
        Reconciliation::Unrouted { plan, failure } if failure.held => {
            Ok((plan, Some(failure.message)))
        }
        Reconciliation::Unrouted { failure, .. } => Err(RehearsalError(format!(
            "traffic routing: {}",
            failure.message
        ))),
        // Memory holds its Rollout and refuses no write.
        Reconciliation::Gone | Reconciliation::Contended => Ok((cluster.plan(now), None)),
    }
}

/// Marks the pod template so it hashes differently from the running version's.
fn mark_revision(template: &mut serde_json::Value) {
    let Some(template) = template.as_object_mut() else {
        return;
    };
    let metadata = template
        .entry("metadata")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(metadata) = metadata.as_object_mut() {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(REVISION_MARK.to_string(), "canary".into());
        }
    }
}

/// `kubectl argo rollouts promote`'s status patch: an Inconclusive step analysis that paused the controller
/// is stepped past (else it would pause again); any other pause is just lifted.
fn promote(status: &mut RolloutStatus, steps: usize) {
    let inconclusive_step = status
        .canary
        .current_step_analysis_run_status
        .as_ref()
        .is_some_and(|r| r.status == "Inconclusive");
    if inconclusive_step && !status.pause_conditions.is_empty() && status.controller_pause {
        if let Some(i) = status
            .current_step_index
            .filter(|&i| (i.max(0) as usize) < steps)
        {
            status.current_step_index = Some(i + 1);
        }
        status.controller_pause = false;
    }
    status.pause_conditions.clear();
}

/// Pods were asked for that are not available yet.
fn needs_pods(cluster: &MemoryCluster) -> bool {
    cluster.replica_sets.iter().any(|rs| {
        let wanted = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let available = rs
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        available < wanted
    })
}

/// The pause only a person ends (one without a duration, or an Inconclusive analysis's): since when, why.
fn waiting_for_a_person(
    rollout: &Rollout,
    status: &RolloutStatus,
) -> Option<(Timestamp, &'static str)> {
    let steps = steps::steps(rollout);
    let indefinite_step = match steps::current(steps, status).0 {
        Some(i) => steps[i]
            .pause
            .as_ref()
            .is_some_and(|p| matches!(steps::pause_seconds(p.duration.as_ref()), Ok(None))),
        None => false,
    };
    status.pause_conditions.iter().find_map(|p| {
        let reason = match p.reason.as_str() {
            INCONCLUSIVE_ANALYSIS => INCONCLUSIVE_ANALYSIS,
            CANARY_PAUSE_STEP if indefinite_step => CANARY_PAUSE_STEP,
            _ => return None,
        };
        Some((p.start_time.0, reason))
    })
}

/// Reports the step and weight when either changed, with what the routers show.
fn show_step(
    cluster: &MemoryCluster,
    plan: &Plan,
    at_step: &mut Option<(usize, i32)>,
    steps: usize,
    now: Timestamp,
    on: &mut dyn FnMut(&Entry),
) {
    let status = cluster.status();
    // An abort sets currentStepIndex back to 0 (Argo's syncRolloutStatusCanary): the timeline keeps naming
    // the step the rollout was aborted at, as the outcome does.
    let index = match *at_step {
        Some((shown, _)) if status.abort => shown,
        _ => status.current_step_index.unwrap_or(0).max(0) as usize,
    };
    // With a router, the weight the routers were brought to (none this reconcile: as they were); without
    // one, the weight the replica counts approximate.
    let routed = cluster
        .rollout
        .spec
        .canary()
        .is_some_and(|c| c.traffic_routing.is_some());
    let weight = match &plan.route {
        Some(route) => route.weight,
        None if routed => at_step.map_or(0, |(_, w)| w),
        None => plan.desired_weight,
    };
    if *at_step == Some((index, weight)) {
        return;
    }
    let all = steps::steps(&cluster.rollout);
    let line = |index: usize, name: String| Entry::Step {
        time: now,
        step: index + 1,
        steps,
        name,
        weight,
        routers: cluster.routers.shown().to_vec(),
    };
    // A setWeight step reached its weight and completed in one reconcile: its line with the weight it set
    // comes before the next step's, so no setWeight line shows only the weight from before it.
    if let Some((left, before)) = *at_step
        && left != index
        && before != weight
        && let Some(set) = all.get(left).filter(|s| s.set_weight.is_some())
    {
        on(&line(left, steps::describe(set)));
    }
    *at_step = Some((index, weight));
    let name = match all.get(index) {
        _ if status.abort => "aborted".to_string(),
        Some(step) => steps::describe(step),
        None => "done".to_string(),
    };
    on(&line(index, name));
}
