//! Argo's replica arithmetic for the canary strategy without a traffic router ("basic canary"): resolving
//! maxSurge/maxUnavailable against spec.replicas, approximating a traffic weight by pod counts, and bounding
//! each scaling step so the Rollout never exceeds replicas+maxSurge pods nor drops below
//! replicas−maxUnavailable available ones. Pure numbers: it knows nothing of steps, status or objects.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The weight that means "all traffic" (Argo's default maxTrafficWeight).
pub const MAX_WEIGHT: i32 = 100;

/// Argo's default maxSurge and maxUnavailable (`defaults.DefaultMaxSurge`, `DefaultMaxUnavailable`): the
/// string `"25"`, which [`int_or_percent`] reads as 25%.
pub const DEFAULT: &str = "25";

/// maxSurge rounded up and maxUnavailable rounded down against spec.replicas, as Kubernetes Deployments do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenceposts {
    pub surge: i32,
    pub unavailable: i32,
}

/// `value` as a count of `total`: an integer as is, a string as a percentage of `total` rounded up or down.
/// A string is a percentage with its `%` or without it, as Argo resolves these fields (apimachinery's
/// `GetValueFromIntOrPercent`, which drops every `%` and reads the rest as a percentage): so `"25"` is 25%,
/// which is also how Argo's own default, written `"25"`, comes to 25%.
pub fn int_or_percent(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .replace('%', "")
                .parse()
                .map_err(|_| format!("{s:?} is neither an integer nor a percentage"))?;
            let out_of_range = || format!("{s:?} is out of range");
            let scaled = percent
                .checked_mul(i64::from(total))
                .and_then(|n| if round_up { n.checked_add(99) } else { Some(n) })
                .ok_or_else(out_of_range)?;
            i32::try_from(scaled.div_euclid(100)).map_err(|_| out_of_range())
        }
    }
}

/// Argo's defaults for both, written `"25"` (a string, so 25%); when both come to 0 one pod may be
/// unavailable, or nothing could move.
pub fn fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    replicas: i32,
) -> Result<Fenceposts, String> {
    let default = IntOrString::String(DEFAULT.to_string());
    let surge = int_or_percent(max_surge.unwrap_or(&default), replicas, true)
        .map_err(|e| format!("maxSurge: {e}"))?;
    let mut unavailable = int_or_percent(max_unavailable.unwrap_or(&default), replicas, false)
        .map_err(|e| format!("maxUnavailable: {e}"))?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    if replicas == 0 {
        unavailable = 0;
    }
    Ok(Fenceposts {
        surge,
        unavailable: unavailable.min(replicas),
    })
}

/// The (canary, stable) pod counts whose ratio comes closest to `weight`, with a total of `replicas`, or one
/// more when a surge is allowed. Ties go to the first candidate (ceil before floor, exact total before
/// surge); between 0 and 100% neither side is emptied unless a single pod without surge forces it.
pub fn approximate_weight(replicas: i32, weight: i32, surge: i32) -> (i32, i32) {
    if replicas <= 0 {
        return (0, 0);
    }
    let exact = f64::from(replicas) * f64::from(weight) / f64::from(MAX_WEIGHT);
    let ceil = exact.ceil() as i32;
    let floor = exact.floor() as i32;
    let half = |total: i32| {
        let share = f64::from(total) * f64::from(weight) / f64::from(MAX_WEIGHT);
        share - share.floor() == 0.5
    };
    let may_empty_a_side = weight == MAX_WEIGHT || weight == 0 || (replicas == 1 && surge == 0);
    let mut candidates: Vec<(i32, i32)> = Vec::with_capacity(4);
    if ceil < replicas || may_empty_a_side {
        candidates.push((ceil, replicas));
    }
    if !half(replicas) && (floor != 0 || may_empty_a_side) {
        candidates.push((floor, replicas));
    }
    let surged = replicas.saturating_add(1);
    if surge > 0 {
        candidates.push((ceil, surged));
        if !half(surged) && (floor != 0 || may_empty_a_side) {
            candidates.push((floor, surged));
        }
    }
    let distance = |(canary, total): (i32, i32)| {
        (f64::from(canary) * f64::from(MAX_WEIGHT) / f64::from(total) - f64::from(weight)).abs()
    };
    let mut best = match candidates.first() {
        Some(first) => *first,
        None => return (0, replicas),
    };
    for candidate in candidates.into_iter().skip(1) {
        if distance(candidate) < distance(best) {
            best = candidate;
        }
    }
    (best.0, best.1 - best.0)
}

/// What the planner needs to know of one ReplicaSet: its desired, current and available pods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pods {
    pub spec: i32,
    pub current: i32,
    pub available: i32,
}

impl Pods {
    /// Pods that may be removed from this ReplicaSet without lowering availability, unless its
    /// availability is to be ignored (the side being grown, so a crash-looping one can still be drained).
    fn removable(self, ignore_availability: bool) -> i32 {
        if self.spec < self.available || ignore_availability {
            self.spec
        } else {
            self.available
        }
    }
}

/// The next (canary, stable) replica counts of a basic canary heading for `weight`. `stable` is `None`
/// when there is no stable ReplicaSet apart from the new one; `others` is the sum of the desired pods of
/// every other ReplicaSet, which must reach 0 before the canary or stable side may shrink.
pub fn basic_canary_counts(
    replicas: i32,
    weight: i32,
    limits: Fenceposts,
    new: Option<Pods>,
    stable: Option<Pods>,
    others: i32,
) -> (i32, i32) {
    let (mut want_new, mut want_stable) = approximate_weight(replicas, weight, limits.surge);
    if stable.is_none() {
        want_new = replicas;
        want_stable = 0;
    }
    let mut new_n = new.map_or(0, |p| p.spec);
    let mut stable_n = stable.map_or(0, |p| p.spec);
    // Saturating: spec.replicas is the user's, and no count may overflow into a panic.
    let ceiling = replicas.saturating_add(limits.surge);
    let mut room = ceiling
        .saturating_sub(others)
        .saturating_sub(new_n)
        .saturating_sub(stable_n);

    // Growing: stable first (it takes traffic back), then the canary, within the surge budget.
    if let Some(s) = stable
        && s.spec < want_stable
        && room > 0
    {
        let grow = room.min(want_stable.saturating_sub(s.spec));
        stable_n = s.spec.saturating_add(grow);
        room -= grow;
    }
    if let Some(n) = new
        && n.spec < want_new
        && room > 0
    {
        new_n = want_new.min(n.spec.saturating_add(room));
    }
    if others > 0 {
        return (new_n, stable_n);
    }

    // Shrinking: only as far as keeps replicas−maxUnavailable pods available.
    let floor = replicas.saturating_sub(limits.unavailable);
    let growing_new = new.is_none_or(|n| want_new >= n.spec);
    let removable = new
        .map_or(0, |n| n.removable(!growing_new))
        .saturating_add(stable.map_or(0, |s| s.removable(growing_new)));
    if removable <= floor {
        return (new_n, stable_n);
    }
    let excess = removable.saturating_sub(floor);
    let shrink = |rs: Option<Pods>, want: i32, current: i32| match rs {
        Some(p) if p.spec > want => want.max(p.spec.saturating_sub(excess)),
        _ => current,
    };
    if !growing_new {
        new_n = shrink(new, want_new, new_n);
        rebalance(new, stable, &mut new_n, &mut stable_n, ceiling, floor);
    } else if stable.is_some() {
        stable_n = shrink(stable, want_stable, stable_n);
        rebalance(stable, new, &mut stable_n, &mut new_n, ceiling, floor);
    }
    (new_n, stable_n)
}

/// After the draining side was cut, keeps the other side within the surge ceiling while holding on to
/// enough of its already-available pods to stay above the availability floor.
fn rebalance(
    drain: Option<Pods>,
    keep: Option<Pods>,
    drain_n: &mut i32,
    keep_n: &mut i32,
    ceiling: i32,
    floor: i32,
) {
    let Some(k) = keep else { return };
    let over = |keep_n: i32, drain_n: i32| {
        keep_n
            .saturating_add(drain_n)
            .saturating_sub(ceiling)
            .max(0)
    };
    let mut available = drain.map_or(0, |d| d.available.min(*drain_n));
    *keep_n = keep_n.saturating_sub(over(*keep_n, *drain_n));
    available = available.saturating_add(k.available.min(*keep_n));
    let spare = k.available.saturating_sub(*keep_n).max(0);
    let missing = floor.saturating_sub(available).max(0);
    *keep_n = keep_n.saturating_add(spare.min(missing));
    *drain_n = drain_n.saturating_sub(over(*keep_n, *drain_n));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_approximated_as_argos_table_says() {
        // (replicas, surge, weight) → (canary, stable), from Argo's TestApproximateWeightedNewStableReplicaCounts.
        let table = [
            (1, 0, 49, (0, 1)),
            (1, 0, 50, (1, 0)),
            (1, 1, 1, (1, 1)),
            (1, 1, 99, (1, 1)),
            (2, 1, 1, (1, 2)),
            (2, 1, 99, (2, 1)),
            (3, 0, 10, (1, 2)),
            (3, 0, 50, (2, 1)),
            (3, 1, 10, (1, 3)),
            (3, 1, 49, (2, 2)),
            (10, 0, 14, (1, 9)),
            (10, 0, 15, (2, 8)),
            (10, 1, 1, (1, 10)),
            (10, 1, 19, (2, 9)),
            (10, 1, 24, (3, 8)),
            (10, 1, 99, (10, 1)),
            (10, 1, 0, (0, 10)),
            (10, 1, 100, (10, 0)),
        ];
        for (replicas, surge, weight, expected) in table {
            assert_eq!(
                approximate_weight(replicas, weight, surge),
                expected,
                "replicas {replicas}, surge {surge}, weight {weight}"
            );
        }
    }

    #[test]
    fn surge_rounds_up_unavailable_rounds_down_and_both_zero_allows_one() {
        let pct = |s: &str| IntOrString::String(s.to_string());
        assert_eq!(
            fenceposts(None, None, 10).unwrap(),
            Fenceposts {
                surge: 3,
                unavailable: 2
            }
        );
        assert_eq!(
            fenceposts(None, None, 1).unwrap(),
            Fenceposts {
                surge: 1,
                unavailable: 0
            }
        );
        assert_eq!(
            fenceposts(Some(&IntOrString::Int(0)), Some(&pct("0%")), 4).unwrap(),
            Fenceposts {
                surge: 0,
                unavailable: 1
            }
        );
        assert!(fenceposts(Some(&pct("lots")), None, 4).is_err());
    }

    /// apimachinery's GetValueFromIntOrPercent, which Argo resolves both with, reads any string as a
    /// percentage: `"25"` is 25% (Argo's own default is written so), `"2"` 2%, not 2 pods.
    #[test]
    fn a_string_without_its_percent_sign_is_a_percentage_as_in_argo() {
        let s = |v: &str| IntOrString::String(v.to_string());
        assert_eq!(int_or_percent(&s("25"), 10, true), Ok(3));
        assert_eq!(int_or_percent(&s("25"), 10, false), Ok(2));
        assert_eq!(int_or_percent(&s("2"), 10, false), Ok(0));
        assert_eq!(int_or_percent(&IntOrString::Int(2), 10, false), Ok(2));
        assert_eq!(
            fenceposts(Some(&s("25")), Some(&s("25")), 10),
            fenceposts(None, None, 10)
        );
        assert_eq!(
            fenceposts(Some(&s("50")), Some(&s("0")), 3).unwrap(),
            Fenceposts {
                surge: 2,
                unavailable: 0
            }
        );
    }

    fn ready(n: i32) -> Pods {
        Pods {
            spec: n,
            current: n,
            available: n,
        }
    }

    #[test]
    fn a_percentage_too_large_to_count_is_an_error_rather_than_an_overflow() {
        let huge = IntOrString::String("9000000000000000000%".to_string());
        assert_eq!(
            fenceposts(Some(&huge), None, 2),
            Err("maxSurge: \"9000000000000000000%\" is out of range".to_string())
        );
        assert!(fenceposts(None, Some(&huge), 2).is_err());
    }

    #[test]
    fn a_canary_at_50_percent_of_one_replica_surges_to_one_plus_one() {
        let limits = fenceposts(None, None, 1).unwrap();
        assert_eq!(
            basic_canary_counts(1, 50, limits, Some(ready(0)), Some(ready(1)), 0),
            (1, 1)
        );
    }

    #[test]
    fn stable_grows_back_before_the_canary_shrinks_on_abort() {
        // Argo's TestHandleCanaryAbort: 10 replicas, surge 1, unavailable 0, stable 9/9, canary 1/1.
        let limits =
            fenceposts(Some(&IntOrString::Int(1)), Some(&IntOrString::Int(0)), 10).unwrap();
        assert_eq!(
            basic_canary_counts(10, 0, limits, Some(ready(1)), Some(ready(9)), 0),
            (1, 10),
            "stable takes the surge pod; the canary keeps its pod until stable is available"
        );
        let stable_ready = basic_canary_counts(10, 0, limits, Some(ready(1)), Some(ready(10)), 0);
        assert_eq!(stable_ready, (0, 10));
    }

    #[test]
    fn without_a_stable_replica_set_the_new_one_gets_every_replica() {
        let limits = fenceposts(None, None, 5).unwrap();
        assert_eq!(
            basic_canary_counts(5, 20, limits, Some(ready(0)), None, 0),
            (5, 0)
        );
    }

    #[test]
    fn old_replica_sets_must_drain_before_canary_or_stable_shrink() {
        let limits = fenceposts(None, None, 4).unwrap();
        // Stable at 4, canary wants 1 at 25%: no room while an old RS still holds 1 pod.
        assert_eq!(
            basic_canary_counts(4, 25, limits, Some(ready(0)), Some(ready(4)), 1),
            (0, 4)
        );
    }
}
