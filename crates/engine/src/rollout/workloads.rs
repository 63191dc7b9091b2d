//! The Rollout's ReplicaSets and Services in one reconcile: which ReplicaSet is new, stable or old, creating
//! the new one (Argo's name, labels, annotations and ownerReference), bumping the revision of a re-used
//! one, scaling stable, new and old in Argo's order, pruning past revisionHistoryLimit, and pointing the
//! canary and stable Services at their hashes. Counts come from `basic_canary` and `traffic`; this module owns the objects.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::Value;

use super::anti_affinity;
use super::basic_canary::{self, Pods};
use super::conditions::{self as cond};
use super::context::{Reconcile, Rs};
use super::ephemeral::{self, EPHEMERAL_METADATA_ANNOTATION};
use super::hash::{self, HASH_LABEL};
use super::{
    DESIRED_REPLICAS_ANNOTATION, MANAGED_BY_ANNOTATION, REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION, Write, steps,
};
use crate::merge_patch;

/// Rollout annotations Argo does not copy onto its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    "notified.notifications.argoproj.io",
];

impl Reconcile<'_, '_> {
    fn template(&self) -> Value {
        self.o.rollout.spec.template.clone().unwrap_or(Value::Null)
    }

    fn pod_hash(&self) -> String {
        let template = self.o.rollout.spec.template.as_ref();
        (self.o.validated).pod_hash(template.unwrap_or(&Value::Null), self.prev.collision_count)
    }

    /// The pod template the new ReplicaSet is to run: the Rollout's, with the anti-affinity term against
    /// the stable pods when the strategy asks for one (the hash stays the Rollout template's).
    fn replica_set_template(&self) -> Value {
        let mut template = self.template();
        let (stable, hash) = (&self.prev.stable_rs, self.pod_hash());
        anti_affinity::inject(&mut template, self.o.rollout, stable, &hash);
        template
    }

    /// The merge patch of the existing new ReplicaSet's `spec.template.spec.affinity` a revision of it
    /// carries (Argo's syncReplicaSetRevision writes GenerateReplicaSetAffinity's each time it updates the
    /// ReplicaSet), and whether its injected term is stale enough to revise it for that alone. `None`
    /// without anti-affinity, whose affinity is the template's already.
    fn revised_affinity(&self, i: usize) -> Option<(Value, bool)> {
        if !anti_affinity::configured(self.o.rollout) {
            return None;
        }
        let current = self
            .o
            .replica_sets
            .get(i)
            .and_then(|r| {
                r.spec
                    .as_ref()?
                    .template
                    .as_ref()?
                    .spec
                    .as_ref()?
                    .affinity
                    .as_ref()
            })
            .and_then(|a| serde_json::to_value(a).ok())
            .unwrap_or(Value::Null);
        let desired = self
            .replica_set_template()
            .pointer("/spec/affinity")
            .cloned()
            .unwrap_or(Value::Null);
        if current == desired {
            return None;
        }
        let (stable, hash) = (&self.prev.stable_rs, self.pod_hash());
        let stale = anti_affinity::needs_update(&current, self.o.rollout, stable, &hash);
        Some((merge_patch::diff(&current, &desired), stale))
    }

    /// Sorts the owned ReplicaSets into new (runs the template: by canaryd's hash, else by comparing
    /// templates without the ephemeral metadata injected in them, as Argo's `FindNewReplicaSet` does, which
    /// adopts one Argo Rollouts created), stable (`status.stableRS`) and the others.
    pub(super) fn find_replica_sets(&mut self) -> Result<(), String> {
        self.rss = self.o.replica_sets.iter().map(Rs::read).collect();
        let wanted = self.pod_hash();
        let template = self.template();
        let rollout = self.o.rollout;
        self.new_rs = self.rss.iter().position(|r| r.hash == wanted).or_else(|| {
            self.o.replica_sets.iter().position(|rs| {
                ephemeral::template_without_injected(rs).is_some_and(|mut t| {
                    anti_affinity::remove_injected(&mut t, rollout);
                    hash::same_template(&template, &t)
                })
            })
        });
        self.stable_rs = (!self.prev.stable_rs.is_empty())
            .then(|| self.rss.iter().position(|r| r.hash == self.prev.stable_rs))
            .flatten();
        Ok(())
    }

    fn max_revision(&self, except: Option<usize>) -> i64 {
        self.rss
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != except)
            .map(|(_, r)| r.revision)
            .max()
            .unwrap_or(0)
    }

    fn set_rollout_revision(&mut self, revision: String) {
        if self.revision != revision {
            self.writes.push(Write::RolloutRevision {
                revision: revision.clone(),
            });
            self.told_write(
                cond::ROLLOUT_UPDATED,
                format!("Rollout updated to revision {revision}"),
            );
            self.revision = revision;
        }
    }

    /// Creates `<rollout>-<hash>` with 0 replicas. Ok(false) when the name is taken by a ReplicaSet with
    /// another template: the collision count goes up and the next reconcile tries another hash.
    pub(super) fn create_new_replica_set(&mut self) -> Result<bool, String> {
        let hash = self.pod_hash();
        let name = format!("{}-{hash}", self.name);
        if self.rss.iter().any(|r| r.name == name) {
            let count = self.prev.collision_count.unwrap_or(0).saturating_add(1);
            self.prev.to_mut().collision_count = Some(count);
            return Ok(false);
        }
        let revision = self.max_revision(None).saturating_add(1).to_string();
        let mut pod_template: PodTemplateSpec = serde_json::from_value(self.replica_set_template())
            .map_err(|e| format!("spec.template: {e}"))?;
        let meta = pod_template.metadata.get_or_insert_with(Default::default);
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(HASH_LABEL.into(), hash.clone());
        let labels = labels.clone();
        let mut pod_labels = labels.clone();
        let mut pod_annotations = meta.annotations.clone().unwrap_or_default();
        let (inject, recorded) = ephemeral::for_new_replica_set(
            self.stable_rs.is_some(),
            self.o.rollout,
            &pod_labels,
            &pod_annotations,
        );
        inject.apply(&mut pod_labels, &mut pod_annotations);
        meta.labels = Some(pod_labels);
        meta.annotations = (!pod_annotations.is_empty()).then_some(pod_annotations);
        let mut annotations = self.copied_annotations();
        annotations.insert(REVISION_ANNOTATION.into(), revision.clone());
        if let Some(recorded) = recorded {
            annotations.insert(EPHEMERAL_METADATA_ANNOTATION.into(), recorded);
        }
        annotations.insert(
            DESIRED_REPLICAS_ANNOTATION.into(),
            self.replicas.to_string(),
        );
        let mut selector = self.o.rollout.spec.selector.clone().unwrap_or_default();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HASH_LABEL.into(), hash.clone());
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: self.o.rollout.metadata.namespace.clone(),
                labels: Some(labels),
                annotations: Some(annotations),
                owner_references: Some(vec![super::analysis::owner_reference(self.o.rollout)]),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: self.o.rollout.spec.min_ready_seconds,
                selector: LabelSelector { ..selector },
                template: Some(pod_template),
            }),
            status: None,
        };
        self.writes.push(Write::CreateReplicaSet(Box::new(rs)));
        self.set_rollout_revision(revision.clone());
        self.told_write(
            cond::NEW_RS_CREATED,
            format!("Created ReplicaSet {name} (revision {revision})"),
        );
        let message = format!("Created new replica set {name:?}");
        let c = cond::condition(
            cond::PROGRESSING,
            "True",
            cond::NEW_RS_CREATED,
            &message,
            self.o.now,
        );
        cond::set(self.prev.to_mut(), c);
        self.rss.push(Rs {
            name,
            hash,
            revision: revision.parse().unwrap_or(0),
            pods: Pods::default(),
            ready: 0,
            created: Some(self.o.now),
            scale_down_deadline: None,
            desired_annotation: Some(self.replicas),
            deleting: false,
            observed: true,
        });
        self.new_rs = Some(self.rss.len() - 1);
        Ok(true)
    }

    /// The Rollout's annotations its new ReplicaSet carries (Argo's copyRolloutAnnotationsToReplicaSet).
    fn copied_annotations(&self) -> BTreeMap<String, String> {
        let annotations = self.o.rollout.metadata.annotations.iter().flatten();
        annotations
            .filter(|(k, _)| !NOT_COPIED.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Argo's syncReplicaSetRevision: the existing new ReplicaSet gets the Rollout's annotations and
    /// minReadySeconds as they are now, and becomes the newest revision when it is re-used; the Rollout's
    /// revision annotation follows its new ReplicaSet.
    pub(super) fn sync_revision(&mut self) {
        let Some(i) = self.new_rs else { return };
        let existing = self
            .o
            .replica_sets
            .get(i)
            .and_then(|r| r.metadata.annotations.clone())
            .unwrap_or_default();
        let mut annotations: BTreeMap<String, String> = self
            .copied_annotations()
            .into_iter()
            .filter(|(k, v)| existing.get(k) != Some(v))
            .collect();
        let next = self.max_revision(Some(i)).saturating_add(1);
        let old = self.rss[i].revision;
        if old < next {
            annotations.insert(REVISION_ANNOTATION.into(), next.to_string());
            self.rss[i].revision = next;
        }
        // SetNewReplicaSetAnnotations: any change to a ReplicaSet that had a revision records that revision
        // in its history.
        if !annotations.is_empty() && old != 0 {
            let history = match existing.get(REVISION_HISTORY_ANNOTATION) {
                Some(h) if !h.is_empty() => format!("{h},{old}"),
                _ => old.to_string(),
            };
            annotations.insert(REVISION_HISTORY_ANNOTATION.into(), history);
        }
        let wanted_min_ready = self.o.rollout.spec.min_ready_seconds.unwrap_or(0);
        let min_ready = self
            .o
            .replica_sets
            .get(i)
            .and_then(|r| r.spec.as_ref())
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0);
        let min_ready_seconds = (min_ready != wanted_min_ready).then_some(wanted_min_ready);
        let revised = self.revised_affinity(i);
        let stale_affinity = revised.as_ref().is_some_and(|(_, stale)| *stale);
        if !annotations.is_empty() || min_ready_seconds.is_some() || stale_affinity {
            self.writes.push(Write::ReviseReplicaSet {
                name: self.rss[i].name.clone(),
                annotations,
                min_ready_seconds,
                affinity: revised.map(|(patch, _)| patch),
            });
        }
        self.set_rollout_revision(self.rss[i].revision.to_string());
        if cond::get(&self.prev, cond::PROGRESSING).is_none() {
            let message = format!("Found new replica set {:?}", self.rss[i].name);
            let c = cond::condition(
                cond::PROGRESSING,
                "True",
                cond::FOUND_NEW_RS,
                &message,
                self.o.now,
            );
            cond::set(self.prev.to_mut(), c);
        }
    }

    pub(super) fn is_other(&self, i: usize) -> bool {
        Some(i) != self.new_rs && Some(i) != self.stable_rs
    }

    /// The stable side, when it is a ReplicaSet apart from the new one.
    fn separate_stable(&self) -> Option<usize> {
        self.stable_rs.filter(|s| Some(*s) != self.new_rs)
    }

    /// The (new, stable) counts the current weight asks for: by the traffic router's rule, or the basic
    /// canary's bounded by maxSurge/maxUnavailable.
    pub(super) fn desired_counts(&self) -> (i32, i32) {
        if self.routed() {
            self.routed_counts()
        } else {
            self.basic_counts()
        }
    }

    fn basic_counts(&self) -> (i32, i32) {
        let canary = self.canary.cloned().unwrap_or_default();
        let limits = basic_canary::fenceposts(
            canary.max_surge.as_ref(),
            canary.max_unavailable.as_ref(),
            self.replicas,
        )
        .unwrap_or(basic_canary::Fenceposts {
            surge: 0,
            unavailable: 1,
        });
        let weight = self.basic_weight();
        let others = (0..self.rss.len())
            .filter(|i| self.is_other(*i))
            .map(|i| self.rss[i].pods.spec)
            .fold(0, i32::saturating_add);
        basic_canary::basic_canary_counts(
            self.replicas,
            weight,
            limits,
            self.new_rs.map(|i| self.rss[i].pods),
            self.separate_stable().map(|i| self.rss[i].pods),
            others,
        )
    }

    fn basic_weight(&self) -> i32 {
        let p = &self.prev;
        if p.promote_full || p.stable_rs.is_empty() || p.current_pod_hash == p.stable_rs {
            return basic_canary::MAX_WEIGHT;
        }
        let (_, index) = steps::current(self.steps, p);
        steps::set_weight(self.steps, index, p.abort)
    }

    /// Argo's AtDesiredReplicaCountsForCanary; with a router, old ReplicaSets may keep their pods.
    pub(super) fn at_desired_counts(&self) -> bool {
        let (want_new, want_stable) = self.desired_counts();
        let new_ok = self
            .new_rs
            .is_some_and(|i| self.progress_met(self.rss[i].pods, want_new));
        let stable_ok = self.separate_stable().is_none_or(|i| {
            self.rss[i].pods.spec == want_stable && self.rss[i].pods.current == want_stable
        });
        let old_gone = self.routed()
            || (0..self.rss.len())
                .filter(|i| self.is_other(*i))
                .all(|i| self.rss[i].pods.available == 0);
        new_ok && stable_ok && old_gone
    }

    /// Argo's ReplicaProgressThresholdMet: whether a ReplicaSet's `pods` are enough of `desired` to go on, by the
    /// canary's `replicaProgressThreshold` (a percentage of `desired` available, or a number of available pods
    /// whatever `desired` is); without one, or with a negative value, all of them: the ReplicaSet sized to
    /// `desired` and every pod available.
    pub(super) fn progress_met(&self, pods: Pods, desired: i32) -> bool {
        let threshold = self
            .canary
            .and_then(|c| c.replica_progress_threshold.as_ref());
        match threshold.filter(|t| t.value >= 0) {
            None => pods.spec == desired && pods.available == desired,
            Some(t) if t.kind == "Percent" => {
                desired == 0
                    || i64::from(pods.available) * 100 >= i64::from(t.value) * i64::from(desired)
            }
            Some(t) => pods.available >= t.value,
        }
    }

    /// Scales a ReplicaSet (true when its size changed). A ReplicaSet of the right size whose
    /// desired-replicas annotation is stale gets the annotation alone, as Argo keeps it current. Either write
    /// to 0 also drops the ReplicaSet's `scale-down-deadline` (Argo's scaleReplicaSet), unless an aborted
    /// canary's own deadline is running, so a ReplicaSet that has gone is no longer waited for.
    pub(super) fn scale_to(&mut self, i: usize, replicas: i32) -> bool {
        let resized = self.rss[i].pods.spec != replicas;
        if !resized && self.rss[i].desired_annotation == Some(self.replicas) {
            return false;
        }
        let clear_scale_down_deadline = replicas == 0
            && !self.delays_scale_down_on_abort()
            && self.rss[i].scale_down_deadline.take().is_some();
        let rs = &self.rss[i];
        let direction = if replicas > rs.pods.spec {
            "up"
        } else {
            "down"
        };
        let message = format!(
            "Scaled {direction} ReplicaSet {} (revision {}) from {} to {replicas}",
            rs.name, rs.revision, rs.pods.spec
        );
        let write = Write::ScaleReplicaSet {
            name: rs.name.clone(),
            replicas,
            desired: self.replicas,
            clear_scale_down_deadline,
        };
        self.writes.push(write);
        if resized {
            self.told_write(cond::SCALING_REPLICA_SET, message);
        } else {
            self.rss[i].desired_annotation = Some(self.replicas);
        }
        resized
    }

    /// Argo's reconcileCanaryReplicaSets: stable first, then new, then the old ones; true when something
    /// was scaled (the reconcile then ends). A blue-green Rollout's are `bluegreen`'s (false: it goes on). Nothing moves while spec.paused or an inconclusive run pauses.
    pub(super) fn scale(&mut self) -> bool {
        if let Some(strategy) = self.blue_green {
            self.blue_green_replica_sets(strategy);
            return false;
        }
        let inconclusive = self
            .prev
            .pause_conditions
            .iter()
            .any(|p| p.reason == cond::INCONCLUSIVE_ANALYSIS);
        if self.spec_paused() || inconclusive {
            return false;
        }
        self.remove_scale_down_deadlines();
        let (want_new, want_stable) = self.desired_counts();
        if let Some(s) = self.separate_stable()
            && self.scale_to(s, want_stable)
        {
            return true;
        }
        if let Some(n) = self.new_rs
            && let Some(want_new) = self.abort_scale_down(n, want_new)
            && self.scale_to(n, want_new)
        {
            return true;
        }
        self.scale_down_old()
    }

    /// Old ReplicaSets: unavailable pods go first, then as many as keep replicas−maxUnavailable available.
    fn scale_down_old(&mut self) -> bool {
        let mut old: Vec<usize> = (0..self.rss.len())
            .filter(|i| self.is_other(*i) && self.rss[*i].pods.spec > 0)
            .collect();
        if old.is_empty() {
            return false;
        }
        let mut scaled = false;
        old.sort_by_key(|i| self.rss[*i].created);
        for &i in &old {
            let p = self.rss[i].pods;
            if p.spec > p.available {
                scaled |= self.scale_to(i, p.available);
                self.rss[i].pods.spec = p.available;
            }
        }
        let canary = self.canary.cloned().unwrap_or_default();
        let unavailable = basic_canary::fenceposts(
            canary.max_surge.as_ref(),
            canary.max_unavailable.as_ref(),
            self.replicas,
        )
        .map_or(1, |f| f.unavailable);
        let available = self
            .rss
            .iter()
            .map(|r| r.pods.available)
            .fold(0, i32::saturating_add);
        let mut budget = available.saturating_sub(self.replicas.saturating_sub(unavailable));
        old.sort_by_key(|i| std::cmp::Reverse(self.rss[*i].revision));
        if self.routed() {
            return self.scale_down_old_routed(&old, budget) || scaled;
        }
        for &i in &old {
            let spec = self.rss[i].pods.spec;
            if budget <= 0 {
                break;
            }
            if spec == 0 {
                continue;
            }
            let target = spec.saturating_sub(budget).max(0);
            scaled |= self.scale_to(i, target);
            budget = budget.saturating_sub(spec - target);
        }
        scaled
    }

    /// Argo's reconcileStableAndCanaryService without a router: stable Service → stable hash; canary
    /// Service → new hash (→ stable hash when aborted). A Service is switched only to a ReplicaSet with an
    /// available pod, and adopted (first switch) only once that ReplicaSet is fully available.
    pub(super) fn services(&mut self) {
        let Some(canary) = self.canary else { return };
        if let (Some(name), Some(s)) = (canary.stable_service.clone(), self.stable_rs) {
            self.point_service(&name, s);
        }
        let target = if self.pause.aborted(&self.prev) {
            self.stable_rs
        } else {
            self.new_rs
        };
        if let (Some(name), Some(t)) = (canary.canary_service.clone(), target) {
            self.point_service(&name, t);
        }
    }

    fn point_service(&mut self, name: &str, rs: usize) {
        let Some(svc) = self
            .o
            .services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))
        else {
            return;
        };
        let current = svc
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| s.get(HASH_LABEL))
            .cloned()
            .unwrap_or_default();
        let target = &self.rss[rs];
        if current == target.hash {
            return;
        }
        let managed = svc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MANAGED_BY_ANNOTATION));
        if !managed && target.pods.spec > target.pods.available {
            return;
        }
        if target.pods.available == 0 {
            return;
        }
        let message = format!(
            "Switched selector for service '{name}' from '{current}' to '{}'",
            target.hash
        );
        self.writes.push(Write::SwitchService {
            name: name.to_string(),
            hash: target.hash.clone(),
            rollout: self.name.clone(),
        });
        self.told_write(cond::SWITCH_SERVICE, message);
    }
}
