//! What one reconcile reads of a Rollout ([`Snapshot`]), the plans made from it, and the same objects as a plan's
//! writes leave them, copied only where those writes change them.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};

use super::change::{Kind, Objects};
use super::reconcile_loop::{Templates, template_key};
use super::{Observed, Plan, Validated, Write, plan};
use crate::api::{AnalysisRun, AnalysisTemplateRef, Rollout};
use crate::routing::RouterObject;

/// What one reconcile reads of a Rollout, fresh, and when. The Rollout and what it controls are shared with
/// where they were read from (the daemon's caches) rather than copied for each reconcile; the plans after a
/// plan's writes copy what the writes change ([`Snapshot::after`]).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub rollout: Arc<Rollout>,
    /// Those the Rollout controls (ownerReference with controller: true and its uid).
    pub replica_sets: Arc<Vec<ReplicaSet>>,
    pub analysis_runs: Arc<Vec<AnalysisRun>>,
    /// The canary and stable Services it names that exist.
    pub services: Vec<Service>,
    /// The router objects its traffic routing names, as far as they were read.
    pub routers: Vec<RouterObject>,
    /// The analysis templates its steps and background analysis name, nested ones included.
    pub templates: Templates,
    /// Its pods, read only while a restart is due (`restart_due`); `None` when not read.
    pub pods: Option<Vec<Pod>>,
    /// When it was read, as a status stores it (whole seconds): the plans' `now`.
    pub now: Timestamp,
}

/// How the loop plans from a [`Snapshot`].
#[derive(Clone, Copy)]
pub(super) struct Planning<'a> {
    pub(super) instance_id: Option<&'a str>,
    /// Whether the pods read are handed to the planner (not after a PodDisruptionBudget refused every eviction:
    /// a due restart then waits).
    pub(super) restart: bool,
}

impl Snapshot {
    /// This snapshot as the API server holds it once `writes` are made: what a read right after them would
    /// show, were nothing else to change meanwhile; and whether they leave what the planner's checks read
    /// ([`Validated`]) as it was: no write of the Rollout or of a Service.
    pub(super) fn after(&self, writes: &[Write]) -> (Snapshot, bool) {
        let mut objects = Written {
            after: self.clone(),
            unread: Vec::new(),
        };
        let mut checked_alike = true;
        for write in writes {
            let change = write.change();
            checked_alike &= !matches!(change.kind(), Kind::Rollout | Kind::Service);
            change.apply(&mut objects, self.now);
        }
        (objects.after, checked_alike)
    }

    /// The plan for `rollout` (this snapshot's, or it with another status) among the rest of this snapshot,
    /// with the checks the plans before it from this snapshot made (`validated`).
    pub(super) fn plan_for(
        &self,
        rollout: &Rollout,
        how: Planning<'_>,
        validated: &Validated,
    ) -> Plan {
        let lookup = |r: &AnalysisTemplateRef| self.templates.get(&template_key(r));
        plan(&Observed {
            rollout,
            replica_sets: &self.replica_sets,
            analysis_runs: &self.analysis_runs,
            services: &self.services,
            routers: &self.routers,
            pods: self.pods.as_deref().filter(|_| how.restart),
            templates: &lookup,
            instance_id: how.instance_id,
            now: self.now,
            validated,
        })
    }
}

/// A snapshot the writes of a plan are made to ([`Snapshot::after`]): what they change is copied from where
/// it is shared; a write of pods that were not read changes a list no plan sees.
struct Written {
    after: Snapshot,
    unread: Vec<Pod>,
}

impl Objects for Written {
    fn rollout(&mut self) -> &mut Rollout {
        Arc::make_mut(&mut self.after.rollout)
    }
    fn replica_sets(&mut self) -> &mut Vec<ReplicaSet> {
        Arc::make_mut(&mut self.after.replica_sets)
    }
    fn analysis_runs(&mut self) -> &mut Vec<AnalysisRun> {
        Arc::make_mut(&mut self.after.analysis_runs)
    }
    fn services(&mut self) -> &mut Vec<Service> {
        &mut self.after.services
    }
    fn pods(&mut self) -> &mut Vec<Pod> {
        self.after.pods.as_mut().unwrap_or(&mut self.unread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Rollout `web` with `replica_sets`, as read at the epoch.
    fn snapshot(replica_sets: Vec<ReplicaSet>) -> Snapshot {
        let rollout: Rollout = serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": {},
        }))
        .expect("a rollout");
        Snapshot {
            rollout: Arc::new(rollout),
            replica_sets: Arc::new(replica_sets),
            analysis_runs: Arc::default(),
            services: Vec::new(),
            routers: Vec::new(),
            templates: Templates::new(),
            pods: None,
            now: Timestamp::UNIX_EPOCH,
        }
    }

    fn scale(name: &str) -> Write {
        Write::ScaleReplicaSet {
            name: name.into(),
            replicas: 2,
            desired: 2,
            clear_scale_down_deadline: false,
        }
    }

    #[test]
    fn writes_of_replica_sets_keep_the_checks_and_writes_of_a_service_or_the_rollout_do_not() {
        let seen = snapshot(Vec::new());
        let switch = Write::SwitchService {
            name: "web-stable".into(),
            hash: "1".into(),
            rollout: "web".into(),
        };
        let revision = Write::RolloutRevision {
            revision: "2".into(),
        };
        assert!(seen.after(&[scale("web-1")]).1);
        assert!(!seen.after(&[scale("web-1"), switch]).1);
        assert!(!seen.after(&[revision, scale("web-1")]).1);
    }

    #[test]
    fn the_objects_after_a_plans_writes_are_copied_only_where_the_writes_change_them() {
        let rs: ReplicaSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "shop"}, "spec": {},
        }))
        .expect("a ReplicaSet");
        let seen = snapshot(vec![rs]);
        let (after, _) = seen.after(&[scale("web-1")]);
        let replicas = |s: &Snapshot| s.replica_sets[0].spec.as_ref().and_then(|s| s.replicas);
        assert_eq!((replicas(&seen), replicas(&after)), (None, Some(2)));
        assert!(
            Arc::ptr_eq(&seen.rollout, &after.rollout),
            "the Rollout is shared"
        );
        assert!(Arc::ptr_eq(&seen.analysis_runs, &after.analysis_runs));
        let revision = Write::RolloutRevision {
            revision: "2".into(),
        };
        let (after, _) = seen.after(&[revision]);
        assert!(!Arc::ptr_eq(&seen.rollout, &after.rollout));
        assert_eq!(seen.rollout.metadata.annotations, None, "as read");
        assert!(Arc::ptr_eq(&seen.replica_sets, &after.replica_sets));
    }
}
