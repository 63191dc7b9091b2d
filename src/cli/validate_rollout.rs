//! `canaryd validate`'s rules for a Rollout: the planner's own spec checks (one action per step, weights,
//! durations, unsupported strategies and steps, Services), then what needs the objects given alongside it,
//! checked by the planner's own rules on what the files hold: analysis templates not among the files (a
//! warning: they may be in the cluster; a near name is suggested), args a template requires that the Rollout
//! does not supply, step-analysis metrics that would never end, the stable and canary Services and the
//! router objects it names. The rules are `engine::rollout`'s, so validate and the daemon refuse the same
//! Rollouts.

use k8s_openapi::api::core::v1::Service;
use serde_json::Value;

use crate::api::Rollout;
use crate::api::rollout::{CANARY_FIELDS, SPEC_FIELDS, STRATEGY_FIELDS};
use crate::engine::compose::Lookup;
use crate::engine::rollout::analysis::{self, Missing};
use crate::engine::rollout::{references, spec};
use crate::engine::routing::memory::Routers;
use crate::engine::suggest::closest;
use crate::engine::template::{Finding, Severity};

/// What the files hold besides the Rollout that a reconcile of it reads, and how canaryd is run.
pub struct Given<'a> {
    /// (cluster-scoped, name) of the analysis templates among the files.
    pub templates: &'a [(bool, &'a str)],
    pub services: &'a [Service],
    /// The router objects among the files, each with where it was read (`FILE:LINE`).
    pub router_objects: &'a [(String, Value)],
    /// Whether canaryd progresses the Rollouts (`--rollouts`): what its controller does not run is then an
    /// error; otherwise Argo Rollouts progresses them and canaryd runs their analyses, and it is a warning.
    pub progressed: bool,
}

/// Every finding for one Rollout.
pub fn check(rollout: &Rollout, lookup: &Lookup<'_>, given: &Given<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    if rollout.metadata.name.as_deref().is_none_or(str::is_empty) {
        out.push(Finding {
            severity: Severity::Error,
            path: "metadata.name".to_string(),
            message: "required".to_string(),
        });
    }
    out.extend(unknown_fields(rollout));
    out.extend(
        spec::check(rollout)
            .into_iter()
            .map(|f| unsupported_as_warning(f, given.progressed)),
    );
    let templates = analysis::template_findings(
        rollout,
        lookup,
        Missing::Warning {
            given: given.templates,
        },
    );
    // A routing canaryd does not drive is spec::check's finding; there is nothing to read then.
    let routers = Routers::new(rollout, given.router_objects.to_vec())
        .map(|routers| references::routers(rollout, &routers.read(rollout)))
        .unwrap_or_default();
    out.extend(references::in_argo_order(
        services(rollout, given.services),
        templates,
        routers,
    ));
    out
}

/// Without `--rollouts`, what canaryd's controller does not run is Argo Rollouts' to run: a warning.
fn unsupported_as_warning(finding: Finding, progressed: bool) -> Finding {
    if progressed || !spec::is_unsupported(&finding) {
        return finding;
    }
    Finding::warning(
        finding.path,
        format!(
            "{}; Argo Rollouts progresses this Rollout (canaryd runs its analyses; with --rollouts, an error)",
            finding.message
        ),
    )
}

/// The Services the Rollout names (stable and canary, or active and preview), by the planner's rule when the
/// files hold Services; when they hold none, a warning for each: it must exist in the cluster.
fn services(rollout: &Rollout, given: &[Service]) -> Vec<Finding> {
    if !given.is_empty() {
        return references::services(rollout, given);
    }
    references::named_services(rollout)
        .into_iter()
        .filter_map(|(path, name)| Some((path, name.filter(|n| !n.is_empty())?)))
        .map(|(path, name)| {
            Finding::warning(
                path,
                format!(
                    "Service {name:?} is not among the given files; it must exist in the cluster"
                ),
            )
        })
        .collect()
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
            let hint = match home(key) {
                Some(home) => format!(", did you mean to indent it under {home}?"),
                None => closest(key, known.iter().copied())
                    .map(|k| format!(", did you mean {k:?}?"))
                    .unwrap_or_default(),
            };
            out.push(Finding {
                severity: Severity::Error,
                path: format!("{path}.{key}"),
                message: format!("unknown field {key:?}{hint}"),
            });
        }
    }
    out
}

/// Where a field written at the wrong level of a Rollout belongs, by Argo's CRD: a canary strategy's field one
/// level off, an analysis's `templates` or `args` outside it, a step's action outside `steps`.
fn home(key: &str) -> Option<&'static str> {
    if CANARY_FIELDS.contains(&key) {
        Some("spec.strategy.canary")
    } else if STRATEGY_FIELDS.contains(&key) {
        Some("spec.strategy")
    } else if SPEC_FIELDS.contains(&key) {
        Some("spec")
    } else if matches!(
        key,
        "templates" | "args" | "dryRun" | "measurementRetention"
    ) {
        Some("an analysis (spec.strategy.canary.steps[].analysis or spec.strategy.canary.analysis)")
    } else if matches!(key, "setWeight" | "pause" | "setCanaryScale") {
        Some("spec.strategy.canary.steps[]")
    } else {
        None
    }
}
