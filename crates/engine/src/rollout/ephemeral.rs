//! Argo's ephemeral metadata (`canaryMetadata`, `stableMetadata`; a blue-green Rollout's `previewMetadata`,
//! `activeMetadata`): labels and annotations the pods of the new ReplicaSet, or of the stable one, carry only
//! while it is that. They are written into the
//! ReplicaSet's pod template, and what was injected is remembered in the ReplicaSet's
//! `rollout.argoproj.io/ephemeral-metadata` annotation so it can be taken out again without touching
//! metadata others put there. The pods that already run are relabelled the same way (when the Rollout has
//! either metadata, as in Argo, and its pods were read). Owns that injection.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::Write;
use super::context::Reconcile;
use crate::api::rollout::PodTemplateMetadata;
use crate::api::{Controlled, Rollout};

pub const EPHEMERAL_METADATA_ANNOTATION: &str = "rollout.argoproj.io/ephemeral-metadata";

/// The keys to set (`Some`) or remove (`None`) in a pod template's labels and annotations (as a JSON
/// merge patch would, with `null` for `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataPatch {
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
}

impl MetadataPatch {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }

    pub fn apply(
        &self,
        labels: &mut BTreeMap<String, String>,
        annotations: &mut BTreeMap<String, String>,
    ) {
        for (patch, map) in [(&self.labels, labels), (&self.annotations, annotations)] {
            for (k, v) in patch {
                match v {
                    Some(v) => map.insert(k.clone(), v.clone()),
                    None => map.remove(k),
                };
            }
        }
    }
}

/// Argo's SyncEphemeralPodMetadata: inject `desired`, and remove what was injected before (`existing`)
/// and is no longer desired.
fn patch(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    existing: Option<&PodTemplateMetadata>,
    desired: Option<&PodTemplateMetadata>,
) -> MetadataPatch {
    let mut out = MetadataPatch::default();
    let sides = |m: Option<&PodTemplateMetadata>| {
        (
            m.and_then(|m| m.labels.clone()).unwrap_or_default(),
            m.and_then(|m| m.annotations.clone()).unwrap_or_default(),
        )
    };
    let (want_labels, want_annotations) = sides(desired);
    let (had_labels, had_annotations) = sides(existing);
    for (current, want, had, patch) in [
        (labels, &want_labels, &had_labels, &mut out.labels),
        (
            annotations,
            &want_annotations,
            &had_annotations,
            &mut out.annotations,
        ),
    ] {
        for (k, v) in want {
            if current.get(k) != Some(v) {
                patch.insert(k.clone(), Some(v.clone()));
            }
        }
        for k in had.keys() {
            if !want.contains_key(k) && current.contains_key(k) {
                patch.insert(k.clone(), None);
            }
        }
    }
    out
}

/// The metadata of the new ReplicaSet's pods while it is not yet stable, and the stable one's: a canary's
/// `canaryMetadata` and `stableMetadata`, a blue-green Rollout's `previewMetadata` and `activeMetadata`.
type Sides<'a> = (
    Option<&'a PodTemplateMetadata>,
    Option<&'a PodTemplateMetadata>,
);

fn strategy_metadata(rollout: &Rollout) -> Option<Sides<'_>> {
    if let Some(c) = rollout.spec.canary() {
        return Some((c.canary_metadata.as_ref(), c.stable_metadata.as_ref()));
    }
    (rollout.spec.blue_green()).map(|b| (b.preview_metadata.as_ref(), b.active_metadata.as_ref()))
}

/// Argo's hasEphemeralMetadataConfigured: only then are running pods relabelled (and so read).
pub fn ephemeral_metadata_configured(rollout: &Rollout) -> bool {
    strategy_metadata(rollout).is_some_and(|(new, stable)| new.is_some() || stable.is_some())
}

/// The annotation recording `desired` (Argo writes it only when something was injected).
pub(super) fn record(desired: Option<&PodTemplateMetadata>) -> Option<String> {
    desired.and_then(|d| serde_json::to_string(d).ok())
}

/// What the new ReplicaSet's pod template gets: the canary's (or preview's) metadata when a stable
/// ReplicaSet exists, else the stable's (or active's: it is to become the stable one).
pub(super) fn for_new_replica_set(
    has_stable: bool,
    rollout: &Rollout,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> (MetadataPatch, Option<String>) {
    let desired =
        strategy_metadata(rollout).and_then(|(new, stable)| if has_stable { new } else { stable });
    let p = patch(labels, annotations, None, desired);
    let recorded = if p.is_empty() { None } else { record(desired) };
    (p, recorded)
}

fn template_metadata(rs: &ReplicaSet) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let meta = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref());
    (
        meta.and_then(|m| m.labels.clone()).unwrap_or_default(),
        meta.and_then(|m| m.annotations.clone()).unwrap_or_default(),
    )
}

/// What the ReplicaSet's annotation says was injected; unreadable counts as nothing, as in Argo.
fn injected(rs: &ReplicaSet) -> Option<PodTemplateMetadata> {
    let text = rs
        .metadata
        .annotations
        .as_ref()?
        .get(EPHEMERAL_METADATA_ANNOTATION)?;
    serde_json::from_str(text).ok()
}

/// A ReplicaSet's pod template without the ephemeral metadata its annotation says was injected, as Argo's
/// `FindNewReplicaSet` takes it out (`SyncReplicaSetEphemeralPodMetadata(rs, nil)`) before comparing templates.
pub(super) fn template_without_injected(rs: &ReplicaSet) -> Option<Value> {
    let mut template = serde_json::to_value(rs.spec.as_ref()?.template.as_ref()?).ok()?;
    let (labels, annotations) = template_metadata(rs);
    let removal = patch(&labels, &annotations, injected(rs).as_ref(), None);
    for (field, keys) in [
        ("labels", &removal.labels),
        ("annotations", &removal.annotations),
    ] {
        let map = template
            .pointer_mut(&format!("/metadata/{field}"))
            .and_then(Value::as_object_mut);
        if let Some(map) = map {
            for key in keys.keys() {
                map.remove(key);
            }
        }
    }
    Some(template)
}

impl Reconcile<'_, '_> {
    /// Argo's reconcileEphemeralMetadata: fully promoted, the new (stable) ReplicaSet carries the stable
    /// (active) metadata; mid-update the new one carries the canary's (preview's) and the stable one the
    /// stable's; every other ReplicaSet carries none.
    pub(super) fn ephemeral_metadata(&mut self) {
        // Even with neither in the spec: what was put in before comes out (a ReplicaSet without the
        // annotation gets no write).
        let Some((new_metadata, stable_metadata)) = strategy_metadata(self.o.rollout) else {
            return;
        };
        let promoted = self.prev.stable_rs.is_empty() || self.prev.stable_rs == self.new_hash();
        let mut wanted: Vec<(Option<usize>, Option<&PodTemplateMetadata>)> = if promoted {
            vec![(self.new_rs, stable_metadata)]
        } else {
            vec![
                (self.new_rs, new_metadata),
                (self.stable_rs, stable_metadata),
            ]
        };
        for i in 0..self.rss.len() {
            if self.is_other(i) {
                wanted.push((Some(i), None));
            }
        }
        for (i, desired) in wanted {
            // A ReplicaSet created in this reconcile was created with its metadata.
            let Some(rs) = i.and_then(|i| self.o.replica_sets.get(i)) else {
                continue;
            };
            let (labels, annotations) = template_metadata(rs);
            let existing = injected(rs);
            let p = patch(&labels, &annotations, existing.as_ref(), desired);
            if !p.is_empty() {
                self.writes.push(Write::SyncPodMetadata {
                    name: rs.metadata.name.clone().unwrap_or_default(),
                    patch: p,
                    ephemeral: record(desired),
                });
            }
            self.relabel_pods(rs, existing.as_ref(), desired);
        }
    }

    /// Argo's syncEphemeralMetadata, its second half: every running pod of `rs` gets `desired` and loses what
    /// was injected before (`existing`) and is no longer desired, whether or not the ReplicaSet changed (a
    /// pod missed last time is caught up). A ReplicaSet scaled to 0 is left alone.
    fn relabel_pods(
        &mut self,
        rs: &ReplicaSet,
        existing: Option<&PodTemplateMetadata>,
        desired: Option<&PodTemplateMetadata>,
    ) {
        let scaled_to_zero = rs.spec.as_ref().and_then(|s| s.replicas) == Some(0);
        let Some(pods) = self.o.pods else { return };
        if scaled_to_zero || !ephemeral_metadata_configured(self.o.rollout) {
            return;
        }
        let of_rs = |pod: &&Pod| {
            pod.metadata
                .controller()
                .is_some_and(|o| Some(&o.name) == rs.metadata.name.as_ref())
        };
        for pod in pods.iter().filter(of_rs) {
            let meta = &pod.metadata;
            let labels = meta.labels.clone().unwrap_or_default();
            let annotations = meta.annotations.clone().unwrap_or_default();
            let p = patch(&labels, &annotations, existing, desired);
            if let (false, Some(name)) = (p.is_empty(), meta.name.clone()) {
                self.writes.push(Write::RelabelPod { name, patch: p });
            }
        }
    }
}
