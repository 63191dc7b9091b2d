//! What is wrong with an ApplicationSet's Progressive Sync, as findings with the field path they are about:
//! the checks that need nothing but the object (operators, `maxUpdate`, steps, the controller's flag,
//! automated sync, deletion order) and the ones that need the generated Applications (a step that selects
//! nothing, an Application no step selects or several select, a label key no Application has). Wording
//! follows Argo CD's own messages where it has them. Owns the findings, not the rules they rest on
//! (`steps`).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Flag;
use super::steps::{self, App, Assignment, Match, Pace};
use crate::api::appset::{ApplicationSetSpec, RollingSyncStep};
use crate::template::Finding;

const STRATEGY: &str = "spec.strategy";
const STEPS: &str = "spec.strategy.rollingSync.steps";

/// The steps Argo CD acts on: `type: RollingSync` with at least one step; None otherwise.
pub fn rolling_steps(spec: &ApplicationSetSpec) -> Option<&[RollingSyncStep]> {
    let strategy = spec.strategy.as_ref()?;
    let steps = strategy.rolling_sync.as_ref()?.steps.as_deref()?;
    (strategy.type_.as_deref() == Some("RollingSync") && !steps.is_empty()).then_some(steps)
}

/// Findings that need nothing but the ApplicationSet and what is known of the controller's flag.
pub fn static_checks(spec: &ApplicationSetSpec, flag: &Flag) -> Vec<Finding> {
    let mut out = Vec::new();
    let Some(strategy) = &spec.strategy else {
        return out;
    };
    let reverse = strategy
        .deletion_order
        .as_deref()
        .map(|d| (d, d.eq_ignore_ascii_case("Reverse")));
    if let Some((d, false)) = reverse
        && !d.eq_ignore_ascii_case("AllAtOnce")
    {
        out.push(Finding::error(
            "spec.strategy.deletionOrder",
            format!("{d:?} is not a deletion order: expected AllAtOnce or Reverse"),
        ));
    }
    match strategy.type_.as_deref().unwrap_or("") {
        "" | "AllAtOnce" => {
            if strategy.rolling_sync.is_some() {
                out.push(Finding::warning(
                    "spec.strategy.rollingSync",
                    "ignored: the strategy type is AllAtOnce (set type: RollingSync to use these steps)",
                ));
            }
        }
        "RollingSync" => {}
        other => out.push(Finding::error(
            "spec.strategy.type",
            format!(
                "{other:?} is not a strategy: expected AllAtOnce or RollingSync (Argo CD applies no \
                 strategy and syncs every Application at once)"
            ),
        )),
    }
    let rolling = strategy.type_.as_deref() == Some("RollingSync");
    let steps = strategy.rolling_sync.as_ref().map(|r| r.steps.as_deref());
    match (rolling, steps) {
        (true, None) => out.push(Finding::error(
            "spec.strategy.rollingSync",
            "type RollingSync without rollingSync.steps: the strategy does nothing and every Application \
             syncs at once",
        )),
        (true, Some(None | Some([]))) => out.push(Finding::error(
            STEPS,
            "RollingSync without steps: Argo CD reports \"No steps defined for rollout\" and creates or \
             updates no Application (the ApplicationSet is frozen)",
        )),
        _ => {}
    }
    if matches!(reverse, Some((_, true))) && rolling_steps(spec).is_none() {
        out.push(Finding::error(
            "spec.strategy.deletionOrder",
            "Reverse deletion takes effect only with RollingSync and its steps: Argo CD deletes every \
             Application at once",
        ));
    }
    let Some(steps) = rolling_steps(spec) else {
        return out;
    };
    match flag {
        Flag::On => {}
        Flag::Unknown => out.push(Finding::warning(
            STRATEGY,
            "RollingSync takes effect only when the ApplicationSet controller runs with progressive syncs \
             on (applicationsetcontroller.enable.progressive.syncs: \"true\" in argocd-cmd-params-cm, or \
             --enable-progressive-syncs); with it off Argo CD ignores the strategy and syncs every \
             Application at once. Check it with --argocd-config",
        )),
        Flag::Off { source } => out.push(Finding::error(
            STRATEGY,
            format!(
                "progressive syncs are off in {source} (applicationsetcontroller.enable.progressive.syncs \
                 is not \"true\"): Argo CD ignores the strategy and syncs every Application at once"
            ),
        )),
    }
    let automated = spec
        .template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.pointer("/syncPolicy/automated"));
    // `automated: {prune: true}` alone is how a template makes RollingSync's own syncs prune (the
    // previous revision's gate, for one): only that is kept.
    if automated.is_some_and(|a| !a.is_null() && *a != serde_json::json!({"prune": true})) {
        out.push(Finding::warning(
            "spec.template.spec.syncPolicy.automated",
            "RollingSync turns automated sync off on every Application it generates and triggers the \
             syncs itself, step by step: nothing here syncs automatically (only automated.prune is kept, \
             for the syncs RollingSync triggers)",
        ));
    }
    for (s, step) in steps.iter().enumerate() {
        step_checks(step, &format!("{STEPS}[{s}]"), &mut out);
    }
    out
}

fn step_checks(step: &RollingSyncStep, path: &str, out: &mut Vec<Finding>) {
    let expressions = step.match_expressions.as_deref().unwrap_or_default();
    if expressions.is_empty() {
        out.push(Finding::warning(
            path,
            "no matchExpressions: this step selects every Application",
        ));
    }
    for (j, e) in expressions.iter().enumerate() {
        if !steps::is_supported(&e.operator) {
            out.push(Finding::error(
                format!("{path}.matchExpressions[{j}].operator"),
                format!(
                    "{:?} is not supported by RollingSync (Supported Operators are 'In' and 'NotIn'): \
                     Argo CD never selects an Application that has the label {:?} in this step, and \
                     every Application without it passes",
                    e.operator, e.key
                ),
            ));
        }
    }
    let max_path = format!("{path}.maxUpdate");
    match &step.max_update {
        Some(IntOrString::Int(n)) if *n < 0 => out.push(Finding::error(
            max_path,
            format!("{n} is negative: Argo CD never syncs this step"),
        )),
        value => match steps::pace(value.as_ref(), 0) {
            (_, Some(invalid)) => out.push(Finding::error(
                max_path,
                format!("{invalid}: Argo CD ignores it and syncs one Application of this step at a time"),
            )),
            (Pace::Hold, None) => out.push(Finding::warning(
                max_path,
                "0 holds this step: Argo CD never syncs it, a person must sync its Applications by hand \
                 (which releases the later steps)",
            )),
            _ => {}
        },
    }
}

/// Findings that need the generated Applications.
pub fn inventory_checks(
    steps: &[RollingSyncStep],
    apps: &[App],
    assignment: &Assignment,
) -> Vec<Finding> {
    let mut out = Vec::new();
    if apps.is_empty() {
        out.push(Finding::warning(
            "spec.generators",
            "the generators give no Application: nothing to roll out",
        ));
        return out;
    }
    selection_checks(steps, apps, assignment, &mut out);
    coverage_checks(steps, apps, assignment, &mut out);
    name_checks(apps, &mut out);
    out
}

/// Each step's selection against the Applications: a label key no Application has, a step that selects
/// none.
fn selection_checks(
    steps: &[RollingSyncStep],
    apps: &[App],
    assignment: &Assignment,
    out: &mut Vec<Finding>,
) {
    let keys: BTreeSet<&str> = apps
        .iter()
        .flat_map(|a| a.labels.keys().map(String::as_str))
        .collect();
    for (s, step) in steps.iter().enumerate() {
        let path = format!("{STEPS}[{s}]");
        let mut reported = false;
        for (j, e) in step.match_expressions.iter().flatten().enumerate() {
            if keys.contains(e.key.as_str()) {
                continue;
            }
            let effect = if e.operator == "In" {
                format!(
                    "step {} matches no Application and completes at once",
                    s + 1
                )
            } else {
                format!(
                    "{} is true for every Application without it, so this expression selects all of them",
                    e.operator
                )
            };
            out.push(Finding::error(
                format!("{path}.matchExpressions[{j}].key"),
                format!(
                    "no Application has the label {:?}{}: {effect}",
                    e.key,
                    did_you_mean(&e.key, &keys)
                ),
            ));
            reported = true;
        }
        let maybe = apps
            .iter()
            .any(|a| steps::step_matches(a, step) == Match::Maybe);
        if assignment.members[s].is_empty() && !maybe && !reported {
            out.push(Finding::error(
                &path,
                format!(
                    "step {} matches no Application: Argo CD counts it as complete at once and goes on{}",
                    s + 1,
                    if s + 1 < steps.len() {
                        format!(" to step {}", s + 2)
                    } else {
                        String::new()
                    }
                ),
            ));
        }
    }
}

/// Each Application selected by one step: one that no step selects (never synced), one that several do.
fn coverage_checks(
    steps: &[RollingSyncStep],
    apps: &[App],
    assignment: &Assignment,
    out: &mut Vec<Finding>,
) {
    let name = |i: usize| format!("{:?}", apps[i].name.shown());
    let unmatched: Vec<String> = (0..apps.len())
        .filter(|i| assignment.first[*i].is_none() && !assignment.uncertain[*i])
        .map(name)
        .collect();
    if !unmatched.is_empty() {
        out.push(Finding::error(
            STEPS,
            format!(
                "no step selects {} Application(s): {}: RollingSync never syncs them (their step is -1) \
                 until someone syncs them by hand",
                unmatched.len(),
                unmatched.join(", ")
            ),
        ));
    }
    for (i, _) in apps.iter().enumerate() {
        let selecting: Vec<usize> = (0..steps.len())
            .filter(|s| assignment.members[*s].contains(&i))
            .collect();
        if let [first, .., last] = selecting.as_slice() {
            let listed: Vec<String> = selecting.iter().map(|s| (s + 1).to_string()).collect();
            out.push(Finding::error(
                format!("{STEPS}[{last}]"),
                format!(
                    "Application {} is selected by steps {}: step {} syncs it and the later steps wait for \
                     it too (Argo CD reports the rollout config as invalid)",
                    name(i),
                    listed.join(", "),
                    first + 1
                ),
            ));
        }
    }
}

/// An Application name the template generates twice (among the Applications whose name is known).
fn name_checks(apps: &[App], out: &mut Vec<Finding>) {
    let mut seen = BTreeSet::new();
    for app in apps.iter().filter(|a| !a.partial) {
        if let Some(n) = app.name.known()
            && !seen.insert(n)
        {
            out.push(Finding::error(
                "spec.template.metadata.name",
                format!(
                    "generates the Application {n:?} twice: Argo CD refuses to generate this \
                     ApplicationSet's Applications"
                ),
            ));
        }
    }
}

/// Fields written where Argo CD has none (a misspelt `maxUpdate` silently means "unlimited"), at the levels
/// whose other fields canaryd keeps as written.
pub fn misspelled(spec: &ApplicationSetSpec) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut level = |rest: &std::collections::BTreeMap<String, serde_json::Value>,
                     path: &str,
                     known: &[&str],
                     kept: &[&str]| {
        for key in rest.keys().filter(|k| !kept.contains(&k.as_str())) {
            let candidates: BTreeSet<&str> = known.iter().chain(kept).copied().collect();
            out.push(Finding::error(
                format!("{path}.{key}"),
                format!("unknown field {key:?}{}", did_you_mean(key, &candidates)),
            ));
        }
    };
    level(
        &spec.rest,
        "spec",
        &[
            "generators",
            "template",
            "goTemplate",
            "goTemplateOptions",
            "templatePatch",
            "strategy",
        ],
        &[
            "syncPolicy",
            "preservedFields",
            "ignoreApplicationDifferences",
            "applyNestedSelectors",
        ],
    );
    let Some(strategy) = &spec.strategy else {
        return out;
    };
    level(
        &strategy.rest,
        STRATEGY,
        &["type", "rollingSync", "deletionOrder"],
        &[],
    );
    if let Some(rolling) = &strategy.rolling_sync {
        level(&rolling.rest, "spec.strategy.rollingSync", &["steps"], &[]);
        for (s, step) in rolling.steps.iter().flatten().enumerate() {
            level(
                &step.rest,
                &format!("{STEPS}[{s}]"),
                &["matchExpressions", "maxUpdate"],
                &[],
            );
        }
    }
    out
}

/// ` (did you mean "environment"?)` from the label keys that exist: an abbreviation or near-miss.
fn did_you_mean(key: &str, keys: &BTreeSet<&str>) -> String {
    crate::suggest::closest(key, keys.iter().copied())
        .map(|k| format!(" (did you mean {k:?}?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_finds_the_longer_key_and_near_misses() {
        let keys: BTreeSet<&str> = ["environment", "region"].into_iter().collect();
        assert_eq!(
            did_you_mean("env", &keys),
            " (did you mean \"environment\"?)"
        );
        assert_eq!(did_you_mean("regoin", &keys), " (did you mean \"region\"?)");
        assert_eq!(did_you_mean("team", &keys), "");
    }
}
