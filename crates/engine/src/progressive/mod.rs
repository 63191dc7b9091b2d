//! Argo CD ApplicationSet Progressive Sync (RollingSync), checked before it ships: the Applications an
//! ApplicationSet generates (from the inventory canaryd can see), the step that syncs each, the batches
//! `maxUpdate` makes, and every finding `canaryd validate` and `canaryd plan` report. Pure and synchronous:
//! Secrets and the controller's flag come in as values; nothing is read from disk or a cluster here.

pub mod checks;
pub mod param_set;
pub mod params;
pub mod render;
pub mod steps;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use crate::api::ClusterSecret;
use crate::api::appset::ApplicationSetSpec;
use crate::template::Finding;
use render::Engine;
use steps::{App, Assignment, Pace};

/// What is known about the controller's `applicationsetcontroller.enable.progressive.syncs` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flag {
    /// No `--argocd-config` was given.
    Unknown,
    On,
    /// Off, as the given file says (named in the finding).
    Off {
        source: String,
    },
}

pub struct Options<'a> {
    pub clusters: Option<&'a [ClusterSecret]>,
    pub flag: Flag,
}

/// Everything canaryd can say about one ApplicationSet.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub findings: Vec<Finding>,
    pub plan: SyncPlan,
}

/// The rollout as Argo CD will perform it.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncPlan {
    /// `RollingSync`, or `AllAtOnce` (also when RollingSync is written but ignored; see `note`).
    pub strategy: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub applications: Vec<String>,
    pub steps: Vec<PlannedStep>,
    /// Applications no step selects: RollingSync never syncs them.
    pub unmatched: Vec<String>,
    /// Applications whose step depends on label values canaryd did not evaluate.
    pub undecided: Vec<String>,
    /// False when a generator was not evaluated: the real list has more (or other) Applications.
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedStep {
    pub step: usize,
    pub match_expressions: Vec<String>,
    pub max_update: String,
    /// The Applications this step syncs (those it selects first), in order.
    pub applications: Vec<String>,
    /// Applications an earlier step syncs that this step also waits for.
    pub also_waits_for: Vec<String>,
    /// Groups that sync together; empty when the step is held (`maxUpdate` 0) or has no Application.
    pub batches: Vec<Vec<String>>,
    pub held: bool,
}

/// Generates the Applications, assigns them to steps and collects every finding.
pub fn analyze(spec: &ApplicationSetSpec, options: &Options<'_>) -> Analysis {
    let mut findings = checks::static_checks(spec, &options.flag);
    let apps = applications(spec, options, &mut findings);
    let rolling = checks::rolling_steps(spec);
    let assignment = steps::assign(&apps, rolling.unwrap_or_default());
    if let Some(steps) = rolling
        && spec.template_patch.is_none()
    {
        findings.extend(checks::inventory_checks(steps, &apps, &assignment));
    }
    let plan = plan(spec, options, &apps, &assignment);
    Analysis { findings, plan }
}

fn engine(spec: &ApplicationSetSpec) -> Engine {
    if spec.go_template == Some(true) {
        let missing_key_error = spec
            .go_template_options
            .iter()
            .flatten()
            .any(|o| o.replace(' ', "") == "missingkey=error");
        Engine::Go { missing_key_error }
    } else {
        Engine::Fasttemplate
    }
}

/// The Applications the ApplicationSet generates: name and labels rendered per parameter set.
fn applications(
    spec: &ApplicationSetSpec,
    options: &Options<'_>,
    findings: &mut Vec<Finding>,
) -> Vec<App> {
    let engine = engine(spec);
    let inputs = params::Inputs {
        engine,
        clusters: options.clusters,
    };
    let sets = params::generate(
        spec.generators.as_deref().unwrap_or_default(),
        "spec.generators",
        &inputs,
        findings,
    );
    if spec.template_patch.is_some() {
        findings.push(Finding::warning(
            "spec.templatePatch",
            "templatePatch is not evaluated by canaryd: names and labels it sets are not seen, so the \
             steps are not checked against the Applications",
        ));
    }
    let metadata = spec.template.as_ref().and_then(|t| t.metadata.clone());
    let name = metadata
        .as_ref()
        .and_then(|m| m.name.clone())
        .unwrap_or_default();
    let labels = metadata.and_then(|m| m.labels).unwrap_or_default();
    let mut problems: BTreeMap<(String, String), ()> = BTreeMap::new();
    let mut apps = Vec::new();
    for set in &sets {
        let mut render = |path: String, text: &str| {
            let mut found = Vec::new();
            let r = render::render(text, engine, set, &mut found);
            for message in found {
                problems.insert((path.clone(), message), ());
            }
            r
        };
        apps.push(App {
            name: render("spec.template.metadata.name".to_string(), &name),
            labels: labels
                .iter()
                .map(|(k, v)| {
                    let r = render(format!("spec.template.metadata.labels.{k}"), v);
                    (k.clone(), r)
                })
                .collect(),
            partial: set.has_unevaluated(),
        });
    }
    findings.extend(
        problems
            .into_keys()
            .map(|(path, message)| Finding::warning(path, message)),
    );
    apps
}

fn shown(app: &App) -> String {
    let name = app.name.shown().to_string();
    if app.partial {
        format!("{name} (from a generator canaryd did not evaluate)")
    } else {
        name
    }
}

fn plan(
    spec: &ApplicationSetSpec,
    options: &Options<'_>,
    apps: &[App],
    a: &Assignment,
) -> SyncPlan {
    let names: Vec<String> = apps.iter().map(shown).collect();
    let complete = !apps
        .iter()
        .any(|app| app.partial || app.name.known().is_none());
    let all_at_once = |note: Option<String>| SyncPlan {
        strategy: "AllAtOnce".to_string(),
        note,
        applications: names.clone(),
        steps: Vec::new(),
        unmatched: Vec::new(),
        undecided: Vec::new(),
        complete,
    };
    let Some(rolling) = checks::rolling_steps(spec) else {
        return all_at_once(None);
    };
    if let Flag::Off { source } = &options.flag {
        return all_at_once(Some(format!(
            "progressive syncs are off in {source}: the strategy is ignored and every Application syncs \
             at once"
        )));
    }
    let unmatched: Vec<usize> = (0..apps.len()).filter(|i| a.first[*i].is_none()).collect();
    let undecided = |i: &usize| a.uncertain[*i] && a.first[*i].is_none();
    let steps = rolling
        .iter()
        .enumerate()
        .map(|(s, step)| {
            let own: Vec<usize> = (0..apps.len()).filter(|i| a.first[*i] == Some(s)).collect();
            // Argo CD counts Applications no step selects into step 1's total (their step index
            // defaults to 0), so they inflate its percentage.
            let total = own.len() + if s == 0 { unmatched.len() } else { 0 };
            let (pace, _) = steps::pace(step.max_update.as_ref(), total);
            let own_names: Vec<String> = own.iter().map(|i| names[*i].clone()).collect();
            PlannedStep {
                step: s + 1,
                match_expressions: step
                    .match_expressions
                    .iter()
                    .flatten()
                    .map(|e| {
                        format!(
                            "{} {} [{}]",
                            e.key,
                            e.operator,
                            e.values.as_deref().unwrap_or_default().join(", ")
                        )
                    })
                    .collect(),
                max_update: match (&step.max_update, pace) {
                    (None, _) => "unlimited".to_string(),
                    (Some(v), Pace::AtOnce(n)) => format!("{} ({n} at a time)", written(v)),
                    (Some(v), _) => written(v),
                },
                batches: steps::batches(&own_names, pace),
                held: pace == Pace::Hold,
                also_waits_for: a.members[s]
                    .iter()
                    .filter(|i| a.first[**i] != Some(s))
                    .map(|i| names[*i].clone())
                    .collect(),
                applications: own_names,
            }
        })
        .collect();
    SyncPlan {
        strategy: "RollingSync".to_string(),
        note: None,
        applications: names.clone(),
        steps,
        unmatched: unmatched
            .iter()
            .filter(|i| !undecided(i))
            .map(|i| names[*i].clone())
            .collect(),
        undecided: unmatched
            .iter()
            .filter(|i| undecided(i))
            .map(|i| names[*i].clone())
            .collect(),
        complete,
    }
}

fn written(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}
