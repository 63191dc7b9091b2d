//! An in-memory cluster for the planner: it holds one Rollout and what it owns, applies a [`Plan`]'s writes
//! the way the API server and the built-in controllers would (a created ReplicaSet starts with no pods, a
//! scale-down removes pods at once, pods become available only when told), and records the Events. It is an
//! [`reconcile_loop::Cluster`], so [`MemoryCluster::reconcile`] runs the daemon's own loop. Tests drive Argo's scenarios with
//! it; `rehearse` and `demo` run a Rollout on it with a virtual clock. Pure: time is whatever the caller
//! passes.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus, Service, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::reconcile_loop::{
    self, Made, Reconciliation, Snapshot, Stored, Templates, template_key,
};
use super::{Event, Observed, Plan, Route, Validated, Write, plan};
use crate::api::Controlled;
use crate::api::rollout::{RolloutSpec, RolloutStatus};
use crate::api::{AnalysisPhase, AnalysisRun, AnalysisRunStatus, AnalysisTemplateRef, Rollout};
use crate::routing::RouteFailure;
use crate::routing::memory::Routers;

use super::REVISION_ANNOTATION;
use super::change::{Change, Created, Kind, Objects};

/// Pod objects made per ReplicaSet; counts beyond it live in the ReplicaSet's status only (so a Rollout
/// of billions of replicas can be planned without making them).
const MAX_PODS_PER_REPLICA_SET: usize = 1000;

/// One Rollout and everything the planner reads about it.
#[derive(Debug, Clone)]
pub struct MemoryCluster {
    pub rollout: Rollout,
    pub replica_sets: Vec<ReplicaSet>,
    pub analysis_runs: Vec<AnalysisRun>,
    pub services: Vec<Service>,
    pub templates: Templates,
    pub events: Vec<Event>,
    pub instance_id: Option<String>,
    /// The ReplicaSets' pods, kept in step with them by `make_available` and the writes.
    pub pods: Vec<Pod>,
    /// The traffic routers, brought to each plan's route (by default none: nothing is routed).
    pub routers: Routers,
    /// The `now` of the next reconcile ([`MemoryCluster::set_now`]): when pods made since were created.
    clock: Timestamp,
    /// Numbers pods' names.
    pods_made: usize,
    /// The writes of the reconcile in progress, made when the loop gives back the state it was lent.
    pending: Vec<Write>,
}

impl MemoryCluster {
    /// A cluster holding `rollout` as just created (generation 1, a uid).
    pub fn new(mut rollout: Rollout) -> MemoryCluster {
        rollout.metadata.generation = Some(1);
        rollout
            .metadata
            .uid
            .get_or_insert_with(|| "rollout-uid".to_string());
        MemoryCluster {
            rollout,
            replica_sets: Vec::new(),
            analysis_runs: Vec::new(),
            services: Vec::new(),
            templates: BTreeMap::new(),
            events: Vec::new(),
            instance_id: None,
            pods: Vec::new(),
            routers: Routers::default(),
            clock: Timestamp::UNIX_EPOCH,
            pods_made: 0,
            pending: Vec::new(),
        }
    }

    /// Adds a Service selecting `selector`, as a user would create it before the Rollout.
    pub fn add_service(&mut self, name: &str, selector: BTreeMap<String, String>) {
        self.services.push(Service {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                selector: Some(selector),
                ..Default::default()
            }),
            status: None,
        });
    }

    /// One reconcile at `now`, through the loop the daemon runs ([`reconcile_loop::reconcile`]): how it ended.
    pub fn reconciled(&mut self, now: Timestamp) -> Reconciliation {
        self.set_now(now);
        // Memory answers at once, so the loop's future is ready when first polled.
        match futures_executor::block_on(reconcile_loop::reconcile(self)) {
            Ok(reconciled) => reconciled,
            Err(never) => match never {},
        }
    }

    /// One reconcile at `now`; returns its plan. This cluster holds its Rollout and refuses no write, so the
    /// loop ends with a plan carried out, or stopped at routers whose objects do not fit them.
    pub fn reconcile(&mut self, now: Timestamp) -> Plan {
        match self.reconciled(now) {
            Reconciliation::Planned { plan, .. } | Reconciliation::Unrouted { plan, .. } => plan,
            Reconciliation::Gone | Reconciliation::Contended => self.plan(now),
        }
    }

    /// The time the next reconcile reads (and pods made from then on are created at).
    pub fn set_now(&mut self, now: Timestamp) {
        self.clock = now;
    }

    /// Plans one reconcile at `now` without applying it.
    pub fn plan(&self, now: Timestamp) -> Plan {
        self.plan_checked(now, &Validated::default())
    }

    /// The same, with the checks of the spec and what it names kept in `validated` for the next plan made
    /// from the same objects, as the reconcile loop keeps them for the plans it runs on in memory.
    pub fn plan_checked(&self, now: Timestamp, validated: &Validated) -> Plan {
        let lookup = |r: &AnalysisTemplateRef| self.templates.get(&template_key(r));
        let routers = self.routers.read(&self.rollout);
        plan(&Observed {
            rollout: &self.rollout,
            replica_sets: &self.replica_sets,
            analysis_runs: &self.analysis_runs,
            services: &self.services,
            routers: &routers,
            pods: Some(&self.pods),
            templates: &lookup,
            instance_id: self.instance_id.as_deref(),
            now,
            validated,
        })
    }

    /// Reconciles until a plan changes nothing (at most `limit` times); returns how many plans ran.
    pub fn settle(&mut self, now: Timestamp, limit: usize) -> usize {
        for n in 0..limit {
            let before = self.rollout.status.clone();
            let planned = self.reconcile(now);
            if planned.writes.is_empty() && self.rollout.status == before {
                return n + 1;
            }
        }
        limit
    }

    /// Every ReplicaSet's pods are created, ready and available; true when that changed anything.
    pub fn make_available(&mut self) -> bool {
        let mut changed = false;
        for i in 0..self.replica_sets.len() {
            let n = self.sync_pods(i, true);
            let ready = Some(ReplicaSetStatus {
                replicas: n,
                ready_replicas: Some(n),
                available_replicas: Some(n),
                ..Default::default()
            });
            let rs = &mut self.replica_sets[i];
            changed |= rs.status != ready;
            rs.status = ready;
        }
        changed
    }

    /// Pods are created for the ReplicaSet but none becomes available (a crash loop).
    pub fn make_unavailable(&mut self, name: &str) {
        for i in 0..self.replica_sets.len() {
            if self.replica_sets[i].metadata.name.as_deref() == Some(name) {
                let n = self.sync_pods(i, false);
                self.replica_sets[i].status = Some(ReplicaSetStatus {
                    replicas: n,
                    ..Default::default()
                });
            }
        }
    }

    /// The pods of the ReplicaSet at `i` made as many as its spec asks (new ones created now), every one
    /// Ready or none; returns how many there are.
    fn sync_pods(&mut self, i: usize, ready: bool) -> i32 {
        let rs = &self.replica_sets[i];
        let name = rs.metadata.name.clone().unwrap_or_default();
        let want = rs
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1)
            .max(0);
        self.trim_pods(&name, want);
        let have = self.pods.iter().filter(|p| owner(p) == Some(&name)).count();
        let made = usize::try_from(want)
            .unwrap_or(0)
            .min(MAX_PODS_PER_REPLICA_SET);
        for _ in have..made {
            self.add_pod(&name);
        }
        let status = if ready { "True" } else { "False" };
        for pod in self.pods.iter_mut().filter(|p| owner(p) == Some(&name)) {
            pod.status = Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: status.into(),
                    last_transition_time: Some(Time(self.clock)),
                    ..Default::default()
                }]),
                ..Default::default()
            });
        }
        want
    }

    /// A pod of the ReplicaSet `rs` with its pod template's labels and annotations, as its controller makes it.
    fn add_pod(&mut self, rs: &str) {
        self.pods_made += 1;
        let template = self
            .replica_set(rs)
            .and_then(|r| r.spec.as_ref())
            .and_then(|s| s.template.as_ref())
            .and_then(|t| t.metadata.clone())
            .unwrap_or_default();
        self.pods.push(Pod {
            metadata: ObjectMeta {
                name: Some(format!("{rs}-{}", self.pods_made)),
                labels: template.labels,
                annotations: template.annotations,
                creation_timestamp: Some(Time(self.clock)),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: rs.to_string(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        });
    }

    /// The ReplicaSet `rs` keeps its `keep` oldest pods.
    fn trim_pods(&mut self, rs: &str, keep: i32) {
        let mut kept = 0;
        self.pods.retain(|p| {
            if owner(p).map(String::as_str) != Some(rs) {
                return true;
            }
            kept += 1;
            kept <= keep
        });
    }

    /// Ends a run the way canaryd's AnalysisRun controller would.
    pub fn finish_run(&mut self, name: &str, phase: AnalysisPhase, message: &str) {
        for run in self
            .analysis_runs
            .iter_mut()
            .filter(|r| r.metadata.name.as_deref() == Some(name))
        {
            run.status = Some(AnalysisRunStatus {
                phase: Some(phase),
                message: (!message.is_empty()).then(|| message.to_string()),
                ..Default::default()
            });
        }
    }

    /// A user's edit of the spec: the generation goes up, as the API server does.
    pub fn edit_spec(&mut self, edit: impl FnOnce(&mut RolloutSpec)) {
        edit(&mut self.rollout.spec);
        self.rollout.metadata.generation = Some(self.rollout.metadata.generation.unwrap_or(0) + 1);
    }

    /// A status patch from kubectl-argo-rollouts (abort, retry, promote).
    pub fn patch_status(&mut self, patch: impl FnOnce(&mut RolloutStatus)) {
        patch(self.rollout.status.get_or_insert_with(Default::default));
    }

    pub fn replica_set(&self, name: &str) -> Option<&ReplicaSet> {
        self.replica_sets
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
    }

    /// (spec.replicas) of each ReplicaSet by revision, oldest first.
    pub fn replicas_by_revision(&self) -> Vec<(String, i32)> {
        let mut out: Vec<(String, i32)> = self
            .replica_sets
            .iter()
            .map(|rs| {
                let revision = rs
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(REVISION_ANNOTATION))
                    .cloned()
                    .unwrap_or_default();
                (
                    revision,
                    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                )
            })
            .collect();
        out.sort_by_key(|(r, _)| r.parse::<i64>().unwrap_or(0));
        out
    }

    pub fn status(&self) -> RolloutStatus {
        self.rollout.status.clone().unwrap_or_default()
    }

    /// Applies a plan's writes only: what is left when the process dies before its status write.
    pub fn apply_writes(&mut self, plan: &Plan, now: Timestamp) {
        for write in &plan.writes {
            self.write(write, now);
        }
    }

    /// An evicted pod (`was`: its ReplicaSet, and whether it was ready) is replaced by its ReplicaSet at once,
    /// not ready yet.
    fn replace_evicted(&mut self, was: Option<(String, bool)>) {
        let Some((rs, was_ready)) = was else {
            return;
        };
        self.add_pod(&rs);
        if let Some(status) = self.rs_mut(&rs).and_then(|r| r.status.as_mut())
            && was_ready
        {
            status.ready_replicas = status.ready_replicas.map(|n| n - 1);
            status.available_replicas = status.available_replicas.map(|n| n - 1);
        }
    }

    fn rs_mut(&mut self, name: &str) -> Option<&mut ReplicaSet> {
        self.replica_sets
            .iter_mut()
            .find(|r| r.metadata.name.as_deref() == Some(name))
    }

    /// Makes `write` as the API server would ([`Write::change`], the daemon's request, applied by
    /// [`Change::apply`]), then what the built-in controllers do in answer: a created ReplicaSet has a status
    /// and no pods yet, a scaled one's pods follow it at once when it shrinks, a deleted one's go, an evicted
    /// pod is replaced. A created run is running: runs are the analysis loop's, and a rehearsal steps them as
    /// the daemon does (`runner::step`), terminated ones included; the planner's tests end them by hand
    /// (`finish_run`).
    fn write(&mut self, write: &Write, now: Timestamp) {
        let change = write.change();
        let evicted = match change {
            Change::Evict { name } => self
                .pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .and_then(|pod| Some((owner(pod)?.clone(), ready(pod)))),
            _ => None,
        };
        change.apply(self, now);
        match change {
            Change::Create(Created::ReplicaSet(rs)) => {
                let name = rs.metadata.name.as_deref().unwrap_or_default();
                if let Some(rs) = self.rs_mut(name) {
                    rs.status.get_or_insert_with(ReplicaSetStatus::default);
                }
            }
            Change::Create(Created::AnalysisRun(run)) => {
                let name = run.metadata.name.as_deref();
                for run in self
                    .analysis_runs
                    .iter_mut()
                    .filter(|r| r.metadata.name.as_deref() == name && r.status.is_none())
                {
                    run.status = Some(AnalysisRunStatus {
                        phase: Some(AnalysisPhase::Running),
                        ..Default::default()
                    });
                }
            }
            // The ReplicaSet controller: pods beyond the count are gone at once; new ones wait for
            // make_available.
            Change::Patch {
                kind: Kind::ReplicaSet,
                name,
                ..
            } => {
                let Some(rs) = self.rs_mut(name) else { return };
                let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let status = rs.status.get_or_insert_with(Default::default);
                status.replicas = status.replicas.min(replicas);
                status.ready_replicas = status.ready_replicas.map(|n| n.min(replicas));
                status.available_replicas = status.available_replicas.map(|n| n.min(replicas));
                self.trim_pods(name, replicas);
            }
            Change::Delete {
                kind: Kind::ReplicaSet,
                name,
                ..
            } => self.trim_pods(name, 0),
            Change::Evict { .. } => self.replace_evicted(evicted),
            Change::Patch { .. } | Change::Delete { .. } => {}
        }
    }
}

/// Whether a pod is Ready.
fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The cluster in memory answers at once and refuses nothing: a write is made as the API server and the
/// built-in controllers would make it ([`MemoryCluster::apply_writes`]'s rules), a route is applied to the router
/// objects in memory ([`Routers`]). Its objects are lent to the loop rather than copied (a rehearsal runs
/// thousands of reconciles over runs whose measurements keep growing): the writes are made, in order, when the
/// loop gives them back.
impl reconcile_loop::Cluster for MemoryCluster {
    type Error = std::convert::Infallible;
    /// A rehearsal shows every step the planner passes through, each plan's own.
    const COALESCE: bool = false;

    fn instance_id(&self) -> Option<&str> {
        self.instance_id.as_deref()
    }

    async fn observe(&mut self) -> Result<Option<Snapshot>, Self::Error> {
        Ok(Some(Snapshot {
            rollout: Arc::new(self.rollout.clone()),
            replica_sets: Arc::new(std::mem::take(&mut self.replica_sets)),
            analysis_runs: Arc::new(std::mem::take(&mut self.analysis_runs)),
            services: std::mem::take(&mut self.services),
            routers: self.routers.read(&self.rollout),
            templates: std::mem::take(&mut self.templates),
            pods: Some(std::mem::take(&mut self.pods)),
            now: self.clock,
        }))
    }

    async fn make(&mut self, _: &Snapshot, write: &Write) -> Result<Made, Self::Error> {
        self.pending.push(write.clone());
        Ok(Made::Done)
    }

    async fn route(&mut self, seen: &Snapshot, route: &Route) -> Result<Vec<Event>, RouteFailure> {
        self.routers.apply(&seen.rollout, route, &seen.replica_sets)
    }

    async fn store_status(
        &mut self,
        _: &Snapshot,
        status: &RolloutStatus,
    ) -> Result<Stored, Self::Error> {
        self.rollout.status = Some(status.clone());
        Ok(Stored::Written)
    }

    fn publish(&mut self, _: &Rollout, events: &[Event]) {
        self.events.extend(events.iter().cloned());
    }

    fn release(&mut self, seen: Snapshot) {
        self.replica_sets = Arc::unwrap_or_clone(seen.replica_sets);
        self.analysis_runs = Arc::unwrap_or_clone(seen.analysis_runs);
        self.services = seen.services;
        self.templates = seen.templates;
        self.pods = seen.pods.unwrap_or_default();
        for write in std::mem::take(&mut self.pending) {
            self.write(&write, self.clock);
        }
    }
}

impl Objects for MemoryCluster {
    fn rollout(&mut self) -> &mut Rollout {
        &mut self.rollout
    }
    fn replica_sets(&mut self) -> &mut Vec<ReplicaSet> {
        &mut self.replica_sets
    }
    fn analysis_runs(&mut self) -> &mut Vec<AnalysisRun> {
        &mut self.analysis_runs
    }
    fn services(&mut self) -> &mut Vec<Service> {
        &mut self.services
    }
    fn pods(&mut self) -> &mut Vec<Pod> {
        &mut self.pods
    }
}

/// The ReplicaSet controlling a pod.
fn owner(pod: &Pod) -> Option<&String> {
    pod.metadata.controller().map(|o| &o.name)
}
