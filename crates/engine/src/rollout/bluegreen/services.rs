//! The blue-green Services (Argo's rollout/service.go): reading what the active and preview Services select,
//! pointing the preview Service at the new pods at once, and the active one at them when they are ready and
//! the pause (and pre-promotion analysis) is over, back at the stable pods on an abort. Each switch is
//! Argo's: the `rollouts-pod-template-hash` selector and the managed-by annotation, told with `SwitchService`.

use k8s_openapi::api::core::v1::Service;

use super::super::conditions as cond;
use super::super::context::Reconcile;
use super::super::hash::HASH_LABEL;
use super::super::{MANAGED_BY_ANNOTATION, Write};
use super::Sides;
use crate::api::rollout::BlueGreenStrategy;

/// The pod-template hash a Service selects (Argo's GetRolloutSelectorLabel); empty when none.
fn selected_hash(service: &Service) -> String {
    service
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| s.get(HASH_LABEL))
        .cloned()
        .unwrap_or_default()
}

impl Reconcile<'_, '_> {
    fn service(&self, name: &str) -> Option<&Service> {
        self.o
            .services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))
    }

    fn preview_name(strategy: &BlueGreenStrategy) -> Option<&str> {
        strategy
            .preview_service
            .as_deref()
            .filter(|n| !n.is_empty())
    }

    pub(super) fn read_sides(&self, strategy: &BlueGreenStrategy) -> Sides {
        let hash_of = |name: Option<&str>| {
            name.and_then(|n| self.service(n))
                .map(selected_hash)
                .unwrap_or_default()
        };
        let new_within_delay = self.new_rs.is_some_and(|i| {
            self.rss[i]
                .scale_down_deadline
                .as_deref()
                .and_then(|d| d.parse::<jiff::Timestamp>().ok())
                .is_some_and(|at| at > self.o.now)
        });
        Sides {
            active: hash_of(Some(strategy.active_service.as_str())),
            preview: hash_of(Self::preview_name(strategy)),
            new_within_delay,
        }
    }

    /// Argo's switchServiceSelector: `name` selects `hash` and is marked managed by this Rollout; nothing
    /// when it already is, or when the Service was not read.
    fn switch_selector(&mut self, name: &str, selected: &mut String, hash: &str) {
        let Some(service) = self.service(name) else {
            return;
        };
        let managed = service
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MANAGED_BY_ANNOTATION));
        if hash.is_empty() || (selected == hash && managed) {
            return;
        }
        let message =
            format!("Switched selector for service '{name}' from '{selected}' to '{hash}'");
        self.writes.push(Write::SwitchService {
            name: name.to_string(),
            hash: hash.to_string(),
            rollout: self.name.clone(),
        });
        self.told_write(cond::SWITCH_SERVICE, message);
        *selected = hash.to_string();
    }

    /// Argo's reconcilePreviewService: the preview Service follows the new ReplicaSet from its creation.
    pub(super) fn switch_preview(&mut self, strategy: &BlueGreenStrategy, sides: &mut Sides) {
        let Some(name) = Self::preview_name(strategy) else {
            return;
        };
        if self.halt_progress() {
            return;
        }
        let hash = self.new_hash();
        self.switch_selector(name, &mut sides.preview, &hash);
    }

    /// Argo's reconcileActiveService: once the new ReplicaSet is ready at full size, the active Service
    /// moves to it when fast-tracked or when the pause and the pre-promotion analysis are over; an aborted
    /// Rollout's goes back to the stable ReplicaSet.
    pub(super) fn switch_active(&mut self, strategy: &BlueGreenStrategy, sides: &mut Sides) {
        if self.halt_progress() || !self.ready_for_pause(strategy) || !self.saturated() {
            return;
        }
        let mut target = sides.active.clone();
        if self.fast_tracked(sides) {
            target = self.new_hash();
        }
        if self.completed_blue_green_pause(strategy) && self.completed_pre_promotion(strategy) {
            target = self.new_hash();
        }
        if self.prev.abort {
            target = self.prev.stable_rs.clone();
        }
        let mut active = std::mem::take(&mut sides.active);
        self.switch_selector(&strategy.active_service, &mut active, &target);
        sides.active = active;
    }
}
