//! `canaryd validate`'s rules for a Rollout: the planner's own spec checks (one action per step, weights,
//! durations, unsupported strategies and steps, Services), then what needs the analysis templates given
//! alongside it: templates not among the files (a warning: they may be in the cluster), args a template
//! requires that the Rollout does not supply, and step-analysis metrics that would never end. The rules
//! are `engine::rollout`'s, so validate and the daemon refuse the same Rollouts.

use crate::api::Rollout;
use crate::engine::compose::Lookup;
use crate::engine::rollout::{analysis, spec, steps};
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
    out.extend(spec::check(rollout));
    for (i, step) in steps::steps(rollout).iter().enumerate() {
        if let Some(a) = &step.analysis {
            let path = format!("spec.strategy.canary.steps[{i}].analysis");
            out.extend(analysis::check_templates(
                a,
                &path,
                true,
                Severity::Warning,
                lookup,
            ));
        }
    }
    let background = rollout
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.analysis.as_ref());
    if let Some(b) = background {
        let path = "spec.strategy.canary.analysis";
        out.extend(analysis::check_templates(
            &b.analysis,
            path,
            false,
            Severity::Warning,
            lookup,
        ));
    }
    out
}
