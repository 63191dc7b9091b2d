//! RollingSync's selection and pacing rules, exactly as Argo CD's ApplicationSet controller applies them:
//! which step an Application belongs to (`matchExpressions` ANDed, only `In`/`NotIn`, a missing key passing
//! every operator but `In`, the first matching step winning) and how many Applications of a step sync at
//! once (`maxUpdate`: floor of a percentage, at least 1 unless exactly "0%", an invalid value acting as 1).
//! Owns the rules only; what is wrong with a configuration is `checks`'s business.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::render::Rendered;
use crate::api::appset::{MatchExpression, RollingSyncStep};

/// One Application the ApplicationSet generates.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    pub name: Rendered,
    pub labels: BTreeMap<String, Rendered>,
    /// Generated from a generator canaryd did not evaluate: it stands for any number of Applications.
    pub partial: bool,
}

/// Whether a step selects an Application; Maybe when it depends on a value canaryd did not evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    Yes,
    No,
    Maybe,
}

pub fn is_supported(operator: &str) -> bool {
    matches!(operator, "In" | "NotIn")
}

pub fn expression_matches(app: &App, e: &MatchExpression) -> Match {
    let values = e.values.as_deref().unwrap_or_default();
    match app.labels.get(&e.key) {
        // Argo CD skips an Application whose label is checked with an operator it does not support.
        Some(_) if !is_supported(&e.operator) => Match::No,
        Some(Rendered::Known(v)) => {
            let listed = values.contains(v);
            if listed == (e.operator == "In") {
                Match::Yes
            } else {
                Match::No
            }
        }
        Some(Rendered::Unknown(_)) => Match::Maybe,
        // Only `In` needs the key; every other operator passes an Application without it.
        None if e.operator == "In" => Match::No,
        None => Match::Yes,
    }
}

pub fn step_matches(app: &App, step: &RollingSyncStep) -> Match {
    let mut result = Match::Yes;
    for e in step.match_expressions.iter().flatten() {
        match expression_matches(app, e) {
            Match::No => return Match::No,
            Match::Maybe => result = Match::Maybe,
            Match::Yes => {}
        }
    }
    result
}

/// Which steps select which Applications.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    /// Per step, the indices of the Applications it selects (it waits for all of them), in app order.
    pub members: Vec<Vec<usize>>,
    /// Per Application, the first step that selects it (the one that syncs it).
    pub first: Vec<Option<usize>>,
    /// Per Application, whether a step might select it depending on values canaryd did not evaluate.
    pub uncertain: Vec<bool>,
}

pub fn assign(apps: &[App], steps: &[RollingSyncStep]) -> Assignment {
    let mut members = vec![Vec::new(); steps.len()];
    let mut first = vec![None; apps.len()];
    let mut uncertain = vec![false; apps.len()];
    for (a, app) in apps.iter().enumerate() {
        for (s, step) in steps.iter().enumerate() {
            match step_matches(app, step) {
                Match::Yes => {
                    members[s].push(a);
                    first[a].get_or_insert(s);
                }
                Match::Maybe => uncertain[a] = true,
                Match::No => {}
            }
        }
    }
    Assignment {
        members,
        first,
        uncertain,
    }
}

/// How many Applications of a step the controller syncs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    Unlimited,
    /// `0` or `"0%"`: the controller never syncs the step; a person must.
    Hold,
    AtOnce(usize),
}

/// The pace of a step of `total` Applications, and why the value is invalid when it is.
pub fn pace(max_update: Option<&IntOrString>, total: usize) -> (Pace, Option<String>) {
    match max_update {
        None => (Pace::Unlimited, None),
        Some(IntOrString::Int(n)) if *n <= 0 => (Pace::Hold, None),
        Some(IntOrString::Int(n)) => (Pace::AtOnce(*n as usize), None),
        Some(IntOrString::String(s)) if s == "0%" => (Pace::Hold, None),
        Some(IntOrString::String(s)) => {
            let percent = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok());
            let invalid = percent
                .is_none()
                .then(|| format!("{s:?} is neither an integer nor a percentage such as \"25%\""));
            let scaled = percent.map_or(0, |p| (p * total as i64).div_euclid(100));
            (Pace::AtOnce(scaled.max(1) as usize), invalid)
        }
    }
}

/// The Applications `apps` split into the groups that sync together at `pace`.
pub fn batches<T: Clone>(apps: &[T], pace: Pace) -> Vec<Vec<T>> {
    match pace {
        Pace::Hold => Vec::new(),
        Pace::Unlimited if apps.is_empty() => Vec::new(),
        Pace::Unlimited => vec![apps.to_vec()],
        Pace::AtOnce(n) => apps.chunks(n.max(1)).map(<[T]>::to_vec).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(labels: &[(&str, &str)]) -> App {
        App {
            name: Rendered::Known("a".into()),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), Rendered::Known(v.to_string())))
                .collect(),
            partial: false,
        }
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> MatchExpression {
        MatchExpression {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn matching_follows_argo_cds_table() {
        let with = app(&[("env", "prod")]);
        let without = app(&[]);
        let cases = [
            (&with, "In", Match::Yes),
            (&with, "NotIn", Match::No),
            (&with, "Exists", Match::No),
            (&without, "In", Match::No),
            (&without, "NotIn", Match::Yes),
            (&without, "Exists", Match::Yes),
            (&without, "DoesNotExist", Match::Yes),
        ];
        for (a, op, want) in cases {
            assert_eq!(
                expression_matches(a, &expr("env", op, &["prod"])),
                want,
                "{op}"
            );
        }
    }

    #[test]
    fn max_update_rounds_down_with_a_floor_of_one_and_zero_holds() {
        let s = |v: &str| IntOrString::String(v.into());
        assert_eq!(pace(Some(&s("50%")), 3).0, Pace::AtOnce(1));
        assert_eq!(pace(Some(&s("50%")), 5).0, Pace::AtOnce(2));
        assert_eq!(pace(Some(&s("10%")), 4).0, Pace::AtOnce(1));
        assert_eq!(pace(Some(&s("0%")), 4).0, Pace::Hold);
        assert_eq!(pace(Some(&IntOrString::Int(0)), 4).0, Pace::Hold);
        assert_eq!(pace(Some(&IntOrString::Int(2)), 4).0, Pace::AtOnce(2));
        assert_eq!(pace(None, 4).0, Pace::Unlimited);
        let (p, invalid) = pace(Some(&s("two")), 4);
        assert_eq!(p, Pace::AtOnce(1));
        assert!(invalid.is_some());
        // A quoted "0" is not a percentage: invalid, so it acts as 1, not as a hold.
        assert_eq!(pace(Some(&s("0")), 4).0, Pace::AtOnce(1));
    }

    #[test]
    fn batches_take_at_most_the_pace_in_order() {
        assert_eq!(
            batches(&[1, 2, 3], Pace::AtOnce(2)),
            vec![vec![1, 2], vec![3]]
        );
        assert_eq!(batches(&[1, 2, 3], Pace::Unlimited), vec![vec![1, 2, 3]]);
        assert!(batches(&[1, 2, 3], Pace::Hold).is_empty());
    }
}
