//! The canary with a traffic router, as Argo Rollouts runs it: the weight the routers are to show this
//! reconcile (Argo's reconcileTrafficRouting: the previous step's weight until the canary is at its count,
//! none to a canary without an available pod, none once promoted or aborted), `status.canary.weights` and
//! its `TrafficWeightUpdated` Event, the replica counts (canary = ceil(weight × replicas / max) or
//! `setCanaryScale`, stable at full size), and the old ReplicaSets' `scale-down-deadline` after a
//! promotion or an abort. The routers' objects are the edge's (`routers/`); this module only decides.

use jiff::{SignedDuration, Timestamp};

use super::conditions as cond;
use super::context::Reconcile;
use super::steps::CanaryScale;
use super::{Route, SCALE_DOWN_DEADLINE_ANNOTATION, Write, steps};
use crate::api::rollout::{CanaryStep, RolloutStatus, TrafficWeights, WeightDestination};
use crate::routing::managed_routes;

/// Argo's default `scaleDownDelaySeconds` and `abortScaleDownDelaySeconds` with a traffic router.
pub const DEFAULT_SCALE_DOWN_DELAY_SECONDS: i32 = 30;

/// Argo's trafficWeightToReplicas: ceil(weight × replicas / max).
pub fn weight_to_replicas(replicas: i32, weight: i32, max_weight: i32) -> i32 {
    if max_weight <= 0 {
        return replicas;
    }
    let scaled = i64::from(weight.max(0)) * i64::from(replicas.max(0));
    let max = i64::from(max_weight);
    i32::try_from((scaled + max - 1).div_euclid(max)).unwrap_or(i32::MAX)
}

/// Argo's CheckMinPodsPerReplicaSet: a non-empty side has at least `min_pods` (never above `replicas`).
pub fn with_min_pods(count: i32, min_pods: Option<i32>, replicas: i32) -> i32 {
    match min_pods {
        Some(min) if count != 0 => count.max(min.min(replicas)),
        _ => count,
    }
}

/// Argo's UseSetCanaryScale: the last `setCanaryScale` at or before the current step, unless a later one
/// says `matchTrafficWeight`; ignored once aborted unless the canary is to stay up (`abort_keeps_canary`).
pub fn current_canary_scale(
    steps: &[CanaryStep],
    status: &RolloutStatus,
    abort_keeps_canary: bool,
) -> Option<CanaryScale> {
    if status.abort && !abort_keeps_canary {
        return None;
    }
    let (Some(index), _) = steps::current(steps, status) else {
        return None;
    };
    let scale = steps[..=index]
        .iter()
        .rev()
        .find_map(|s| s.set_canary_scale.as_ref())?;
    CanaryScale::read(scale)
        .ok()
        .filter(|s| !s.match_traffic_weight)
}

/// The message of Argo's `TrafficWeightUpdated` Event (trafficWeightUpdatedMessage).
pub fn weight_updated_message(prev: Option<&TrafficWeights>, new: &TrafficWeights) -> String {
    let details = match prev {
        None => format!("to {}", new.canary.weight),
        Some(p) if p.canary.weight != new.canary.weight => {
            format!("from {} to {}", p.canary.weight, new.canary.weight)
        }
        Some(_) => String::new(),
    };
    format!("Traffic weight updated {details}")
}

fn parse_deadline(annotation: &str) -> Option<Timestamp> {
    annotation.parse::<Timestamp>().ok()
}

impl Reconcile<'_, '_> {
    pub(super) fn routed(&self) -> bool {
        self.canary.is_some_and(|c| c.traffic_routing.is_some())
    }

    fn max_weight(&self) -> i32 {
        self.canary
            .and_then(|c| c.traffic_routing.as_ref())
            .and_then(|t| t.max_traffic_weight)
            .unwrap_or(super::basic_canary::MAX_WEIGHT)
    }

    /// `abortScaleDownDelaySeconds` as Argo reads it: `None` for 0 (the canary is never scaled down).
    fn abort_delay(&self) -> Option<i64> {
        let written = (self.canary.and_then(|c| c.abort_scale_down_delay_seconds)).or(self
            .blue_green
            .and_then(|b| b.abort_scale_down_delay_seconds));
        match written {
            Some(0) => None,
            Some(s) => Some(i64::from(s)),
            None => Some(i64::from(DEFAULT_SCALE_DOWN_DELAY_SECONDS)),
        }
    }

    fn scale_down_delay(&self) -> i64 {
        let written = (self.canary.and_then(|c| c.scale_down_delay_seconds))
            .or(self.blue_green.and_then(|b| b.scale_down_delay_seconds));
        i64::from(written.unwrap_or(DEFAULT_SCALE_DOWN_DELAY_SECONDS))
    }

    /// Argo's CalculateReplicaCountsForTrafficRoutedCanary without dynamicStableScale: (canary, stable).
    pub(super) fn routed_counts(&self) -> (i32, i32) {
        let p = &self.prev;
        let max = self.max_weight();
        let min_pods = self.canary.and_then(|c| c.min_pods_per_replica_set);
        let weight =
            if p.promote_full || p.stable_rs.is_empty() || p.current_pod_hash == p.stable_rs {
                max
            } else {
                match current_canary_scale(self.steps, p, self.abort_delay().is_none()) {
                    Some(CanaryScale {
                        replicas: Some(n), ..
                    }) => return (n, self.replicas),
                    Some(CanaryScale {
                        weight: Some(w), ..
                    }) => w,
                    _ => {
                        // Argo's GetCurrentSetWeight: without a current step (none, or past the last one)
                        // all of maxTrafficWeight, not 100.
                        let (step, index) = steps::current(self.steps, p);
                        if step.is_none() && !p.abort {
                            max
                        } else {
                            steps::set_weight(self.steps, index, p.abort)
                        }
                    }
                }
            };
        let canary = with_min_pods(
            weight_to_replicas(self.replicas, weight, max),
            min_pods,
            self.replicas,
        );
        (canary, self.replicas)
    }

    /// Argo's reconcileTrafficRouting, less the I/O: the weight to apply, the new `status.canary.weights`
    /// and the `TrafficWeightUpdated` Event when they change. Nothing is applied while the stable
    /// ReplicaSet lacks the pods for the traffic it is to take (or there is none yet).
    pub(super) fn traffic_routing(&mut self) {
        if !self.routed() {
            self.weights = None;
            return;
        }
        let max = self.max_weight();
        let p = &self.prev;
        let new_rs = self.new_rs.map(|i| &self.rss[i]);
        let (step, index) = self.current_step();
        // Promoted, aborted, or a canary without an available pod: no traffic to the canary.
        let no_canary = p.stable_rs == p.current_pod_hash
            || self.pause.aborted(p)
            || new_rs.is_none_or(|r| r.pods.available == 0);
        let managed = managed_routes::change(
            self.steps,
            self.canary.and_then(|c| c.traffic_routing.as_ref()),
            step,
            no_canary || p.promote_full,
            self.revision_number(),
        );
        let weight = if no_canary {
            0
        } else if p.promote_full {
            // The weight the status says was applied, kept within 0..=max (the status is anyone's to write).
            p.canary
                .weights
                .as_ref()
                .map_or(0, |w| w.canary.weight.max(0).min(max))
        } else if let Some(i) = index {
            if !self.at_desired_counts() {
                // The previous setWeight until the canary has its pods.
                i.checked_sub(1)
                    .map_or(0, |j| steps::set_weight(self.steps, Some(j), false))
            } else if i != self.steps.len() {
                steps::set_weight(self.steps, Some(i), false)
            } else {
                max
            }
        } else {
            0
        };
        let Some(stable) = self.stable_rs.map(|i| &self.rss[i]) else {
            return;
        };
        let needed = i64::from(max - weight) * i64::from(self.replicas) / i64::from(max.max(1));
        // Argo's checkReplicasAvailable, the threshold applied to the stable ReplicaSet as Argo does.
        let needed_pods = i32::try_from(needed).unwrap_or(i32::MAX);
        if i64::from(stable.pods.available) < needed && !self.progress_met(stable.pods, needed_pods)
        {
            return;
        }
        let canary = self.canary.cloned().unwrap_or_default();
        let weights = TrafficWeights {
            canary: WeightDestination {
                weight,
                service_name: canary.canary_service.unwrap_or_default(),
                pod_template_hash: new_rs.map(|r| r.hash.clone()).unwrap_or_default(),
            },
            stable: WeightDestination {
                weight: max - weight,
                service_name: canary.stable_service.unwrap_or_default(),
                pod_template_hash: stable.hash.clone(),
            },
            ..TrafficWeights::default()
        };
        self.route_after = self.writes.len();
        self.route = Some(Route {
            weight,
            canary_hash: weights.canary.pod_template_hash.clone(),
            stable_hash: weights.stable.pod_template_hash.clone(),
            managed,
        });
        let prev = self.prev.canary.weights.as_ref();
        let modified = prev.is_none_or(|w| {
            w.canary != weights.canary || w.stable != weights.stable || w.additional.is_some()
        });
        if modified {
            let message = weight_updated_message(prev, &weights);
            self.event(cond::TRAFFIC_WEIGHT_UPDATED, message);
            self.weights = Some(weights);
        }
    }

    /// A setWeight step is done only once the routers show its weight (always, without a router).
    pub(super) fn weight_applied(&self, step: usize) -> bool {
        !self.routed()
            || self.weights.as_ref().is_some_and(|w| {
                w.canary.weight == steps::set_weight(self.steps, Some(step), false)
            })
    }

    /// Argo's shouldDelayScaleDownOnAbort: an aborted, routed canary (or blue-green preview) waits for its
    /// deadline, unless `abortScaleDownDelaySeconds: 0` leaves it up for good.
    pub(super) fn delays_scale_down_on_abort(&self) -> bool {
        (self.routed() || self.blue_green.is_some())
            && self.pause.aborted(&self.prev)
            && self.stable_rs.is_some()
            && self.abort_delay().is_some()
    }

    /// Argo's removeScaleDownDeadlines: the new (unless its abort delay runs) and the stable ReplicaSet
    /// lose a `scale-down-deadline` left from before, so a Rollout moving back to them keeps them.
    pub(super) fn remove_scale_down_deadlines(&mut self) {
        let mut keep = Vec::new();
        if let Some(n) = self.new_rs
            && !self.delays_scale_down_on_abort()
        {
            keep.push(n);
        }
        if let Some(s) = self.stable_rs
            && !keep.contains(&s)
        {
            keep.push(s);
        }
        for i in keep {
            if self.rss[i].scale_down_deadline.take().is_some() {
                self.writes.push(Write::AnnotateReplicaSet {
                    name: self.rss[i].name.clone(),
                    key: SCALE_DOWN_DEADLINE_ANNOTATION.to_string(),
                    value: None,
                });
            }
        }
    }

    /// Whether a ReplicaSet still takes traffic or may again (Argo's isReplicaSetReferenced, without the
    /// DestinationRule lookup the planner cannot make).
    fn referenced(&self, i: usize) -> bool {
        let hash = &self.rss[i].hash;
        if hash.is_empty() {
            return false;
        }
        let p = &self.prev;
        let mut refs = vec![&p.stable_rs, &p.current_pod_hash];
        if let Some(b) = &p.blue_green {
            refs.extend([&b.active_selector, &b.preview_selector]);
        }
        if let Some(w) = &p.canary.weights {
            refs.extend([&w.canary.pod_template_hash, &w.stable.pod_template_hash]);
        }
        if refs.contains(&hash) {
            return true;
        }
        let names = super::references::named_services(self.o.rollout);
        self.o.services.iter().any(|s| {
            names
                .iter()
                .filter_map(|(_, n)| *n)
                .any(|n| s.metadata.name.as_deref() == Some(n))
                && s.spec
                    .as_ref()
                    .and_then(|s| s.selector.as_ref())
                    .and_then(|s| s.get(super::hash::HASH_LABEL))
                    == Some(hash)
        })
    }

    fn add_deadline(&mut self, i: usize, seconds: i64) {
        let Ok(at) = self.o.now.checked_add(SignedDuration::from_secs(seconds)) else {
            return;
        };
        let deadline = at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        self.writes.push(Write::AnnotateReplicaSet {
            name: self.rss[i].name.clone(),
            key: SCALE_DOWN_DEADLINE_ANNOTATION.to_string(),
            value: Some(deadline.clone()),
        });
        self.rss[i].scale_down_deadline = Some(deadline);
        self.wake_at(at);
    }

    /// The new ReplicaSet of an aborted, traffic-routed Rollout (Argo's shouldDelayScaleDownOnAbort and
    /// reconcileNewReplicaSet): it keeps its pods until `abortScaleDownDelaySeconds` after the stable
    /// ReplicaSet is back at full size. `Some(count)` when it is to be scaled to count now, `None` to
    /// leave it.
    pub(super) fn abort_scale_down(&mut self, n: usize, count: i32) -> Option<i32> {
        if !self.delays_scale_down_on_abort() {
            return Some(count);
        }
        let delay = self.abort_delay()?;
        match self.rss[n]
            .scale_down_deadline
            .as_deref()
            .map(parse_deadline)
        {
            Some(Some(at)) if at > self.o.now => {
                self.wake_at(at);
                None
            }
            Some(Some(_)) => Some(0),
            Some(None) => Some(count),
            None => {
                let stable_ready = self
                    .stable_rs
                    .is_some_and(|s| self.rss[s].pods.available >= self.replicas);
                if stable_ready {
                    self.add_deadline(n, delay);
                }
                None
            }
        }
    }

    /// Argo's scaleDownOldReplicaSetsForCanary with a router, from the ReplicaSets in `old` (newest
    /// revision first) within `budget` pods: referenced ones are kept; after a promotion the previous
    /// stable waits `scaleDownDelaySeconds` (`scaleDownDelayRevisionLimit` of them at most); an
    /// intermediate canary goes at once. True when something was scaled.
    pub(super) fn scale_down_old_routed(&mut self, old: &[usize], mut budget: i32) -> bool {
        // A blue-green Rollout's old ReplicaSets all wait their delay (scaleDownOldReplicaSetsForBlueGreen).
        let promoted =
            self.blue_green.is_some() || self.prev.stable_rs == self.prev.current_pod_hash;
        let limit = (self.canary.and_then(|c| c.scale_down_delay_revision_limit))
            .or(self
                .blue_green
                .and_then(|b| b.scale_down_delay_revision_limit))
            .unwrap_or(i32::MAX);
        let mut annotated = 0;
        let mut scaled = false;
        for &i in old {
            if self.referenced(i) {
                continue;
            }
            if budget <= 0 {
                break;
            }
            let spec = self.rss[i].pods.spec;
            if spec == 0 {
                continue;
            }
            let mut desired = 0;
            let deadline = self.rss[i].scale_down_deadline.clone();
            if promoted || deadline.is_some() {
                match deadline {
                    None => {
                        if annotated < limit {
                            annotated += 1;
                            desired = spec;
                            let delay = self.scale_down_delay();
                            if delay > 0 {
                                self.add_deadline(i, delay);
                            }
                        }
                    }
                    Some(at) => {
                        annotated += 1;
                        if annotated <= limit
                            && let Some(at) = parse_deadline(&at).filter(|at| *at > self.o.now)
                        {
                            self.wake_at(at);
                            desired = spec;
                        }
                    }
                }
            }
            if desired == spec {
                continue;
            }
            scaled |= self.scale_to(i, desired);
            budget = budget.saturating_sub(spec - desired);
        }
        scaled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canary_replicas_round_up_and_respect_min_pods_per_replica_set() {
        assert_eq!(weight_to_replicas(10, 5, 100), 1);
        assert_eq!(weight_to_replicas(4, 25, 100), 1);
        assert_eq!(weight_to_replicas(4, 26, 100), 2);
        assert_eq!(weight_to_replicas(3, 10, 1000), 1);
        assert_eq!(weight_to_replicas(5, 0, 100), 0);
        assert_eq!(with_min_pods(1, Some(2), 5), 2);
        assert_eq!(with_min_pods(0, Some(2), 5), 0);
        assert_eq!(with_min_pods(1, Some(9), 5), 5);
    }

    #[test]
    fn a_set_canary_scale_step_is_read_as_argos_struct_and_bad_values_are_refused() {
        assert_eq!(
            CanaryScale::read(&json!({"weight": 25})).map(|s| s.weight),
            Ok(Some(25))
        );
        assert!(CanaryScale::read(&json!({"replicas": "three"})).is_err());
        assert!(CanaryScale::read(&json!({"replicas": -1})).is_err());
        assert!(CanaryScale::read(&json!({"weight": 101})).is_err());
    }

    #[test]
    fn the_weight_event_says_from_and_to_as_argo_does() {
        let w = |n| TrafficWeights {
            canary: WeightDestination {
                weight: n,
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            weight_updated_message(None, &w(0)),
            "Traffic weight updated to 0"
        );
        assert_eq!(
            weight_updated_message(Some(&w(0)), &w(10)),
            "Traffic weight updated from 0 to 10"
        );
    }
}
