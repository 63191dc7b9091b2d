//! The reconcile loop every driver shares (`engine::rollout::reconcile_loop`), on the in-memory cluster with faults a
//! real API server and router can give: a write that meets a change is planned again after a fresh read; one
//! that always does gives up after three reads; a router that cannot be written stops the plan at the route;
//! and the daemon's coalescing of status-only plans ends where one reconcile per plan ends, with fewer
//! status writes (joined by the plan with writes after them, but not one that evicts, and by those after a
//! plan's writes); a change of the counts alone waits for `COUNTS_EVERY` after the last status write, any
//! other change is written at once, and the counts always are in the end.

use std::collections::BTreeMap;
use std::convert::Infallible;

use canaryd::api::Rollout;
use canaryd::api::reasons::rollout::TRAFFIC_ROUTING_ERROR;
use canaryd::api::rollout::RolloutStatus;
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd::engine::rollout::reconcile_loop::{
    self, ATTEMPTS, Made, Reconciliation, Snapshot, Stored,
};
use canaryd::engine::rollout::status_write::COUNTS_EVERY;
use canaryd::engine::rollout::{Event, Route, Write};
use canaryd::engine::routing::RouteFailure;
use canaryd_testkit::rollout::memory::*;
use jiff::Timestamp;
use serde_json::json;

/// The in-memory cluster with scripted faults, counting what the loop asked of it. `COALESCE` as the daemon
/// (true) or a rehearsal (false) runs the loop.
struct Faulty<const COALESCE: bool> {
    sim: MemoryCluster,
    /// Writes still to be answered "changed since the read" (and not made).
    conflicts: usize,
    /// What the router answers, when it fails.
    router_down: Option<RouteFailure>,
    /// Which routes fail when it is down.
    down_for: fn(&Route) -> bool,
    /// Status stores still to be answered "changed since the read" (and not stored).
    status_conflicts: usize,
    observed: usize,
    made: usize,
    stored: usize,
    /// The `now` of the last status stored.
    written_at: Option<Timestamp>,
}

impl<const COALESCE: bool> Faulty<COALESCE> {
    fn new(sim: MemoryCluster) -> Self {
        Faulty {
            sim,
            conflicts: 0,
            router_down: None,
            down_for: |_| true,
            status_conflicts: 0,
            observed: 0,
            made: 0,
            stored: 0,
            written_at: None,
        }
    }

    /// One reconcile at `now`.
    fn reconcile(&mut self, now: Timestamp) -> Reconciliation {
        self.sim.set_now(now);
        match futures::executor::block_on(reconcile_loop::reconcile(self)) {
            Ok(reconciled) => reconciled,
            Err(never) => match never {},
        }
    }

    /// Reconciles at `now` until a plan writes nothing (pods available at once), as `rollout::memory::run`.
    fn settle(&mut self, now: Timestamp) {
        for _ in 0..30 {
            let became_available = self.sim.make_available();
            match self.reconcile(now) {
                Reconciliation::Planned { changed: false, .. } if !became_available => return,
                Reconciliation::Planned { .. } => {}
                other => panic!("the reconcile did not carry out its plan: {other:?}"),
            }
        }
        panic!("the planner did not settle: {:#?}", self.sim.status());
    }
}

impl<const COALESCE: bool> reconcile_loop::Cluster for Faulty<COALESCE> {
    type Error = Infallible;
    const COALESCE: bool = COALESCE;

    fn instance_id(&self) -> Option<&str> {
        reconcile_loop::Cluster::instance_id(&self.sim)
    }

    async fn observe(&mut self) -> Result<Option<Snapshot>, Infallible> {
        self.observed += 1;
        self.sim.observe().await
    }

    async fn make(&mut self, seen: &Snapshot, write: &Write) -> Result<Made, Infallible> {
        if self.conflicts > 0 {
            self.conflicts -= 1;
            return Ok(Made::Changed);
        }
        self.made += 1;
        self.sim.make(seen, write).await
    }

    async fn route(&mut self, seen: &Snapshot, route: &Route) -> Result<Vec<Event>, RouteFailure> {
        match &self.router_down {
            Some(message) if (self.down_for)(route) => Err(message.clone()),
            _ => self.sim.route(seen, route).await,
        }
    }

    async fn store_status(
        &mut self,
        seen: &Snapshot,
        status: &RolloutStatus,
    ) -> Result<Stored, Infallible> {
        if self.status_conflicts > 0 {
            self.status_conflicts -= 1;
            return Ok(Stored::Changed);
        }
        self.stored += 1;
        self.written_at = Some(seen.now);
        self.sim.store_status(seen, status).await
    }

    /// As the daemon: it remembers its last status write; a rehearsal writes every change.
    fn status_written_at(&self) -> Option<Timestamp> {
        self.written_at.filter(|_| COALESCE)
    }

    fn publish(&mut self, rollout: &Rollout, events: &[Event]) {
        self.sim.publish(rollout, events);
    }

    fn release(&mut self, seen: Snapshot) {
        self.sim.release(seen);
    }
}

fn routed() -> MemoryCluster {
    let canary = json!({
        "canaryService": "web-canary", "stableService": "web-stable",
        "trafficRouting": {"istio": {"virtualService": {"name": "web-vsvc"}}},
        "steps": [{"setWeight": 50}, {"pause": {"duration": "30s"}}, {"setWeight": 100}],
        "scaleDownDelaySeconds": 0,
    });
    let mut c = MemoryCluster::new(rollout(4, canary));
    let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    c.add_service("web-canary", selector.clone());
    c.add_service("web-stable", selector);
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    c
}

fn vsvc_missing() -> RouteFailure {
    RouteFailure::new(
        Some("VirtualService"),
        false,
        "VirtualService prod/web-vsvc not found".to_string(),
    )
}

/// Argo's reconcileTrafficRouting records a TrafficRoutingError Event when SetWeight fails, and only returns
/// the error when UpdateHash (the DestinationRule) does, e.g. while it delays the switch.
#[test]
fn a_destination_rule_that_cannot_move_fails_the_reconcile_without_an_event() {
    let mut c: Faulty<true> = Faulty::new(routed());
    let message = "DestinationRule prod/web-dr: delaying destination rule switch: ReplicaSet web-2 not \
                   fully available";
    c.router_down = Some(RouteFailure::new(
        Some("DestinationRule"),
        true,
        message.to_string(),
    ));
    let before = c.sim.events.len();
    let failure = loop {
        c.sim.make_available();
        match c.reconcile(at(10)) {
            Reconciliation::Unrouted { failure, .. } => break failure,
            Reconciliation::Planned { changed: true, .. } => {}
            other => panic!("the routers were never asked to move: {other:?}"),
        }
    };
    assert!(failure.held && !failure.announced, "{failure:?}");
    assert!(
        !reasons(&c)[before..].contains(&TRAFFIC_ROUTING_ERROR),
        "{:?}",
        &reasons(&c)[before..]
    );
}

#[test]
fn a_write_that_meets_a_change_is_planned_again_after_a_fresh_read() {
    let mut c: Faulty<true> = Faulty::new(routed());
    c.conflicts = 1;
    let Reconciliation::Planned { plan, changed, .. } = c.reconcile(at(10)) else {
        panic!("not carried out");
    };
    assert!(changed);
    assert_eq!(c.observed, 2, "read again after the change");
    assert_eq!(
        c.made,
        plan.writes.len(),
        "the second plan's writes, all made"
    );
    assert_eq!(replicas(&c.sim).len(), 2, "the new ReplicaSet was created");
}

#[test]
fn writes_that_always_meet_a_change_give_up_after_three_reads_having_made_nothing() {
    let mut c: Faulty<true> = Faulty::new(routed());
    c.conflicts = usize::MAX;
    let before = c.sim.status();
    assert!(matches!(c.reconcile(at(10)), Reconciliation::Contended));
    assert_eq!(c.observed, ATTEMPTS);
    assert_eq!((c.made, c.stored), (0, 0));
    assert_eq!(replicas(&c.sim).len(), 1);
    assert_eq!(c.sim.status(), before);
}

#[test]
fn a_router_that_cannot_be_written_stops_the_plan_at_the_route_and_says_why() {
    let mut c: Faulty<true> = Faulty::new(routed());
    c.router_down = Some(vsvc_missing());
    // The first plan with a route: it points the routers at the new pods, still at weight 0.
    let (plan, error) = loop {
        c.sim.make_available();
        let (status, events, made) = (c.sim.status(), c.sim.events.len(), c.made);
        match c.reconcile(at(10)) {
            Reconciliation::Unrouted { plan, failure } => {
                assert_eq!(c.made - made, plan.route_after, "nothing after the route");
                assert_eq!(
                    c.sim.status(),
                    status,
                    "a status saying the weight is applied"
                );
                // The Events of the writes made before the route (Argo records each as it makes it), then
                // the failure's; none of the status's.
                let landed: Vec<&Event> = plan
                    .events
                    .iter()
                    .filter(|e| e.after_write.is_some_and(|w| w < plan.route_after))
                    .collect();
                let published: Vec<&Event> = c.sim.events[events..].iter().collect();
                assert_eq!(published.len(), landed.len() + 1, "{published:#?}");
                assert_eq!(published[..landed.len()], landed[..]);
                break (plan, failure.message);
            }
            Reconciliation::Planned { changed: true, .. } => {}
            other => panic!("the weight was never moved: {other:?}"),
        }
    };
    assert_eq!(plan.route.as_ref().map(|r| r.weight), Some(0));
    assert!(
        plan.route_after < plan.writes.len(),
        "writes were held back: {plan:#?}"
    );
    let told = c.sim.events.last().expect("an Event");
    assert_eq!(
        (told.reason.as_str(), told.message.as_str(), told.warning),
        (TRAFFIC_ROUTING_ERROR, error.as_str(), true)
    );
    assert_eq!(error, "VirtualService prod/web-vsvc not found");

    // Once the router can be written, the same plan is carried out.
    c.router_down = None;
    c.settle(at(11));
    assert_eq!(
        c.sim.status().canary.weights.map(|w| w.canary.weight),
        Some(50)
    );
}

/// The reasons of the Events published so far.
fn reasons(c: &Faulty<true>) -> Vec<&str> {
    c.sim.events.iter().map(|e| e.reason.as_str()).collect()
}

#[test]
fn a_status_that_meets_a_change_after_the_writes_still_publishes_the_writes_events_once() {
    let mut c: Faulty<true> = Faulty::new(routed());
    let before = c.sim.events.len();
    c.status_conflicts = 1;
    let Reconciliation::Planned { changed, .. } = c.reconcile(at(10)) else {
        panic!("not carried out");
    };
    assert!(changed);
    assert_eq!(
        (c.observed, c.stored),
        (2, 1),
        "read again after the change"
    );
    let published = &reasons(&c)[before..];
    // Argo's reconcileNewReplicaSet records these as it creates the ReplicaSet; the plan after the fresh read
    // finds it made, so they are told once, ahead of that plan's own Events.
    assert_eq!(
        published[..2],
        ["RolloutUpdated", "NewReplicaSetCreated"][..],
        "{published:?}"
    );
    for told in ["NewReplicaSetCreated", "RolloutUpdated"] {
        let times = published.iter().filter(|r| **r == told).count();
        assert_eq!(times, 1, "{told} in {published:?}");
    }
}

#[test]
fn a_router_that_fails_after_a_service_switch_still_tells_the_switch() {
    let mut c: Faulty<true> = Faulty::new(routed());
    c.settle(at(10));
    // The promotion's route, which gives all the traffic back to the stable side (now the new pods), fails.
    c.router_down = Some(vsvc_missing());
    c.down_for = |route| route.stable_hash == route.canary_hash;
    let before = c.sim.events.len();
    let mut unrouted = false;
    for _ in 0..30 {
        c.sim.make_available();
        if let Reconciliation::Unrouted { .. } = c.reconcile(at(41)) {
            unrouted = true;
            break;
        }
    }
    assert!(unrouted, "the routers were never asked to move");
    let published = &reasons(&c)[before..];
    // Argo's promotion switches the stable Service to the new pods before it moves the traffic back to it.
    assert_eq!(
        published[published.len().saturating_sub(2)..],
        ["SwitchService", TRAFFIC_ROUTING_ERROR][..],
        "{published:?}"
    );
}

#[test]
fn coalesced_status_plans_end_where_one_reconcile_per_plan_ends_with_fewer_status_writes() {
    let mut daemon: Faulty<true> = Faulty::new(routed());
    let mut rehearsal: Faulty<false> = Faulty::new(routed());
    for now in [at(10), at(40), at(41)] {
        daemon.settle(now);
        rehearsal.settle(now);
    }
    // The counts the daemon held back, written once they are due.
    daemon.settle(at(41) + COUNTS_EVERY);
    assert_eq!(phase(&rehearsal.sim).0, "Healthy", "promoted");
    assert_eq!(daemon.sim.status(), rehearsal.sim.status());
    assert_eq!(daemon.sim.events, rehearsal.sim.events);
    assert_eq!(daemon.sim.replica_sets, rehearsal.sim.replica_sets);
    assert!(
        daemon.stored < rehearsal.stored,
        "{} status writes coalesced, {} one per plan",
        daemon.stored,
        rehearsal.stored
    );
}

/// The daemon looks again at once only after a reconcile whose plans did not settle; otherwise when an object
/// changes (here pods becoming available) or at the plan's wake-up. A settled reconcile leaves nothing for one
/// at once to do, and those triggers alone take the update to where a reconcile after every change takes it.
#[test]
fn a_settled_reconcile_leaves_nothing_to_do_at_once_and_the_other_triggers_finish_the_update() {
    let mut daemon: Faulty<true> = Faulty::new(routed());
    let (mut settled, mut unsettled) = (0, 0);
    let (mut now, end) = (at(10), at(41) + COUNTS_EVERY);
    for _ in 0..100 {
        let Reconciliation::Planned {
            plan,
            changed,
            settled: done,
        } = daemon.reconcile(now)
        else {
            panic!("not carried out");
        };
        if changed && !done {
            unsettled += 1;
            continue;
        }
        if done {
            settled += 1;
            let again = daemon.reconcile(now);
            assert!(
                matches!(again, Reconciliation::Planned { changed: false, .. }),
                "a reconcile at once after a settled one: {again:#?}"
            );
        }
        if daemon.sim.make_available() {
            continue;
        }
        match plan.wake_at.filter(|wake| *wake <= end) {
            Some(wake) => now = now.max(wake),
            None => break,
        }
    }
    let mut always: Faulty<true> = Faulty::new(routed());
    for now in [at(10), at(40), at(41), end] {
        always.settle(now);
    }
    assert_eq!(phase(&always.sim).0, "Healthy", "promoted");
    assert_eq!(daemon.sim.status(), always.sim.status());
    assert_eq!(daemon.sim.events, always.sim.events);
    assert_eq!(daemon.sim.replica_sets, always.sim.replica_sets);
    assert!(
        settled > 0 && unsettled > 0,
        "{settled} settled, {unsettled} not"
    );
}

/// One pod of the stable ReplicaSet stops being ready and available (the canary's would move the weight).
fn one_stable_pod_unavailable(c: &mut MemoryCluster) {
    let name = format!("web-{}", c.status().stable_rs);
    let stable = c
        .replica_sets
        .iter_mut()
        .find(|rs| rs.metadata.name.as_ref() == Some(&name))
        .and_then(|rs| rs.status.as_mut())
        .expect("the stable ReplicaSet's status");
    stable.ready_replicas = stable.ready_replicas.map(|n| n - 1);
    stable.available_replicas = stable.available_replicas.map(|n| n - 1);
}

/// A deliberate difference from Argo, which writes each status it computes: the daemon holds back a change
/// of the counts alone until `COUNTS_EVERY` after its last status write, wakes then, and writes them.
#[test]
fn a_change_of_the_counts_alone_waits_for_the_bound_and_is_written_then() {
    let mut c: Faulty<true> = Faulty::new(routed());
    c.settle(at(10));
    let paused = c.sim.status();
    assert_eq!(paused.current_step_index, Some(1), "at the pause");
    let stored = c.stored;
    // During the pause a stable pod stops being available: only the counts change.
    one_stable_pod_unavailable(&mut c.sim);
    let Reconciliation::Planned { plan, changed, .. } = c.reconcile(at(12)) else {
        panic!("not carried out");
    };
    assert!(!changed, "{plan:#?}");
    assert!(
        plan.status.available_replicas < paused.available_replicas,
        "the counts changed: {plan:#?}"
    );
    assert_eq!(
        (c.stored, c.sim.status()),
        (stored, paused.clone()),
        "held back"
    );
    let due = at(10) + COUNTS_EVERY;
    assert_eq!(plan.wake_at, Some(due), "woken when the counts are due");
    c.reconcile(due - jiff::SignedDuration::from_secs(1));
    assert_eq!(c.stored, stored, "still held back before the bound");
    let Reconciliation::Planned { plan, .. } = c.reconcile(due) else {
        panic!("not carried out");
    };
    assert_eq!(c.stored, stored + 1, "written at the bound");
    assert_eq!(c.sim.status(), plan.status, "with the last counts");
    assert_eq!(c.sim.status().phase, paused.phase);
}

/// Anything but the counts (here the step, once the canary's pods are available) is written at once, however
/// recent the last write, and the counts seen by then go with it.
#[test]
fn a_change_beyond_the_counts_is_written_at_once_with_the_counts() {
    let mut c: Faulty<true> = Faulty::new(routed());
    // The update is planned up to the canary's pods, which are not available yet.
    for _ in 0..30 {
        if let Reconciliation::Planned { changed: false, .. } = c.reconcile(at(10)) {
            break;
        }
    }
    let waiting = c.sim.status();
    assert_eq!(waiting.current_step_index, Some(0), "{waiting:#?}");
    let stored = c.stored;
    c.sim.make_available();
    c.reconcile(at(11));
    let moved = c.sim.status();
    assert_eq!(c.stored, stored + 1, "written at once");
    assert_eq!(moved.current_step_index, Some(1));
    assert!(
        moved.available_replicas > waiting.available_replicas,
        "{moved:#?}"
    );
}

/// `analysis_rollout` with a timed pause before its analysis: the pause's end changes only the status, and
/// the plan after it creates the step's run.
fn paused_before_analysis() -> MemoryCluster {
    let mut c = analysis_rollout();
    if let Some(canary) = c
        .rollout
        .spec
        .strategy
        .as_mut()
        .and_then(|s| s.canary.as_mut())
    {
        canary.steps = serde_json::from_value(json!([
            {"setWeight": 25},
            {"pause": {"duration": "10s"}},
            {"analysis": {"templates": [{"templateName": "success-rate"}],
                          "args": [{"name": "service", "value": "web"},
                                   {"name": "hash", "valueFrom": {"podTemplateHashValue": "Latest"}}]}},
        ]))
        .expect("steps");
    }
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    c
}

/// A plan that changes only the status (the pause's end) and the plan with writes that follows it (the
/// analysis step's run created) are one reconcile and one status write, which names the run and the step
/// together; a rehearsal stores each plan's status. Both end at the same step with the same run and Events
/// (the counts, which the daemon may hold back, aside).
#[test]
fn a_step_ended_in_memory_and_the_next_steps_writes_are_one_reconcile_and_one_status_write() {
    let mut daemon: Faulty<true> = Faulty::new(paused_before_analysis());
    let mut rehearsal: Faulty<false> = Faulty::new(paused_before_analysis());
    for c in [&mut daemon.sim, &mut rehearsal.sim] {
        c.set_now(at(10));
    }
    daemon.settle(at(10));
    rehearsal.settle(at(10));
    assert_eq!(daemon.sim.status().current_step_index, Some(1), "paused");
    let (observed, stored) = (daemon.observed, daemon.stored);
    let Reconciliation::Planned { plan, .. } = daemon.reconcile(at(21)) else {
        panic!("not carried out");
    };
    assert!(
        plan.writes
            .iter()
            .any(|w| matches!(w, Write::CreateAnalysisRun(_))),
        "{plan:#?}"
    );
    let status = daemon.sim.status();
    assert_eq!(status.current_step_index, Some(2));
    let run = status.canary.current_step_analysis_run_status.as_ref();
    assert!(run.is_some_and(|r| !r.name.is_empty()), "{status:#?}");
    assert_eq!(
        (daemon.observed - observed, daemon.stored - stored),
        (1, 1),
        "one read, one status write"
    );
    daemon.settle(at(21));
    let stored = rehearsal.stored;
    rehearsal.settle(at(21));
    assert!(
        rehearsal.stored - stored >= 2,
        "a rehearsal shows each plan"
    );
    let (done, rehearsed) = (daemon.sim.status(), rehearsal.sim.status());
    assert_eq!(done.current_step_index, rehearsed.current_step_index);
    let run_name = |s: &RolloutStatus| {
        let run = s.canary.current_step_analysis_run_status.as_ref();
        run.map(|r| r.name.clone())
    };
    assert_eq!(run_name(&done), run_name(&rehearsed));
    assert_eq!(daemon.sim.events, rehearsal.sim.events);
    let names = |c: &MemoryCluster| -> Vec<Option<String>> {
        c.analysis_runs
            .iter()
            .map(|r| r.metadata.name.clone())
            .collect()
    };
    assert_eq!(names(&daemon.sim), names(&rehearsal.sim));
}

/// The plans after a plan's writes that change only the status join its status write, made from the objects
/// as those writes left them: the setWeight step's end, in the plan that moves the traffic to it, and the
/// pause's start after it are one status write, so no stored status shows the pause step without its pause.
#[test]
fn the_status_only_plans_after_a_plans_writes_join_its_status_write() {
    let mut c: Faulty<true> = Faulty::new(routed());
    for _ in 0..30 {
        c.sim.make_available();
        let (made, stored) = (c.made, c.stored);
        let Reconciliation::Planned { plan, .. } = c.reconcile(at(10)) else {
            panic!("not carried out");
        };
        let status = c.sim.status();
        if status.current_step_index == Some(1) {
            assert!(c.made > made, "the step ended with writes: {plan:#?}");
            assert_eq!(c.stored, stored + 1, "one status write");
            assert_eq!(status.phase, "Paused", "{status:#?}");
            assert!(!status.pause_conditions.is_empty(), "{status:#?}");
            return;
        }
    }
    panic!("the setWeight step never ended: {:#?}", c.sim.status());
}

/// A plan that evicts pods does not join the status-only plans before it: were their status lost, making it
/// again would evict other pods. Here the pause is ended by hand (the plugin's `promote`, a status patch) just as
/// a restart falls due: the resumed status is one reconcile, the evictions the next, after a fresh read.
#[test]
fn evictions_wait_for_the_status_before_them_to_be_stored() {
    let mut c: Faulty<true> = Faulty::new(routed());
    c.settle(at(10));
    c.sim.edit_spec(|s| {
        s.restart_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(25)))
    });
    c.settle(at(20));
    assert_eq!(c.sim.status().phase, "Paused");
    c.sim.patch_status(|s| s.pause_conditions.clear());
    let evicted = |plan: &canaryd::engine::rollout::Plan| {
        plan.writes
            .iter()
            .filter(|w| matches!(w, Write::EvictPod { .. }))
            .count()
    };
    let stored = c.stored;
    let Reconciliation::Planned { plan, .. } = c.reconcile(at(25)) else {
        panic!("not carried out");
    };
    assert_eq!(evicted(&plan), 0, "{plan:#?}");
    assert_eq!(c.stored, stored + 1, "the resumed status stored");
    let Reconciliation::Planned { plan, .. } = c.reconcile(at(25)) else {
        panic!("not carried out");
    };
    assert!(evicted(&plan) > 0, "{plan:#?}");
}
