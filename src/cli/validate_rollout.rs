//! `canaryd validate`'s rules for a Rollout: the planner's own spec checks (one action per step, weights,
//! durations, unsupported strategies and steps, Services), then what needs the analysis templates given
//! alongside it: templates not among the files (a warning: they may be in the cluster), args a template
//! requires that the Rollout does not supply, and step-analysis metrics that would never end. The rules
//! are `engine::rollout`'s, so validate and the daemon refuse the same Rollouts.

use crate::api::Rollout;
use crate::api::rollout::{CANARY_FIELDS, SPEC_FIELDS, STRATEGY_FIELDS};
use crate::engine::compose::Lookup;
use crate::engine::rollout::{analysis, spec};
use crate::engine::suggest::closest;
use crate::engine::template::{Finding, Severity};

/// Every finding for one Rollout.
pub fn check(rollout: &Rollout, lookup: &Lookup<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if rollout.metadata.name.as_deref().is_none_or(str::is_empty) {
        out.push(Finding {
            severity: Severity::Error,
            path: "metadata.name".to_string(),
            message: "required".to_string(),
        });
    }
    out.extend(unknown_fields(rollout));
    out.extend(spec::check(rollout));
    out.extend(analysis::template_findings(
        rollout,
        lookup,
        Severity::Warning,
    ));
    out
}

/// Fields of the spec, strategy and canary strategy that Argo's Rollout does not have (a misspelling is
/// otherwise kept silently, as the API server would prune it), with the nearest field of that level.
fn unknown_fields(rollout: &Rollout) -> Vec<Finding> {
    let spec = &rollout.spec;
    let strategy = spec.strategy.as_ref();
    let canary = spec.canary();
    let places = [
        ("spec", Some(&spec.rest), SPEC_FIELDS),
        ("spec.strategy", strategy.map(|s| &s.rest), STRATEGY_FIELDS),
        (
            "spec.strategy.canary",
            canary.map(|c| &c.rest),
            CANARY_FIELDS,
        ),
    ];
    let mut out = Vec::new();
    for (path, rest, known) in places {
        for key in rest.into_iter().flat_map(|r| r.keys()) {
            let hint = closest(key, known.iter().copied())
                .map(|k| format!(", did you mean {k:?}?"))
                .unwrap_or_default();
            out.push(Finding {
                severity: Severity::Error,
                path: format!("{path}.{key}"),
                message: format!("unknown field {key:?}{hint}"),
            });
        }
    }
    out
}
