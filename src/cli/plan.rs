//! `canaryd plan APPSET.yaml --clusters PATH`: prints the rollout of each ApplicationSet in the file as
//! Argo CD's RollingSync will perform it (each step, its Applications in order, the batches `maxUpdate`
//! makes), then `validate`'s findings for it; `--max-batch N` adds a warning for every batch that syncs
//! more than N Applications at once. Exit 1 when validate would fail. The plan is `engine::progressive`'s.

use std::path::PathBuf;

use serde::Serialize;

use super::appset::{self, InventoryArgs};
use super::load;
use super::located::Located;
use super::{Exit, OutputFormat};
use crate::engine::progressive::SyncPlan;
use crate::engine::template::Finding;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file holding the ApplicationSet(s).
    pub appset: PathBuf,
    #[command(flatten)]
    pub inventory: InventoryArgs,
    /// Warn about every batch that syncs more than N Applications at once.
    #[arg(long, value_name = "N")]
    pub max_batch: Option<usize>,
    /// `text`: the steps and batches, then the findings; `json`: one JSON document.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Planned {
    name: String,
    plan: SyncPlan,
    findings: Vec<Located>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    valid: bool,
    application_sets: Vec<Planned>,
}

pub fn run(args: Args) -> Exit {
    let fail = |e: String| {
        eprintln!("canaryd plan: {e}");
        Exit::Usage
    };
    let inventory = match args.inventory.load() {
        Ok(i) => i,
        Err(e) => return fail(e),
    };
    let (docs, error) = load::load_file(&args.appset);
    if let Some(e) = error {
        return fail(e.to_string());
    }
    let mut report = Report {
        valid: true,
        application_sets: Vec::new(),
    };
    for doc in docs.iter().filter(|d| d.kind() == Some(appset::KIND)) {
        let checked = appset::check(doc, &inventory);
        let mut findings = checked.findings;
        let Some(analysis) = checked.analysis else {
            report.valid = false;
            report.application_sets.push(Planned {
                name: doc.name().unwrap_or_default().to_string(),
                plan: SyncPlan::default(),
                findings,
            });
            continue;
        };
        if let Some(max) = args.max_batch {
            findings.extend(
                batch_warnings(&analysis.plan, max)
                    .into_iter()
                    .map(|f| Located::at(doc, f)),
            );
        }
        report.valid &= !appset::failed(&findings);
        report.application_sets.push(Planned {
            name: doc.name().unwrap_or_default().to_string(),
            plan: analysis.plan,
            findings,
        });
    }
    if report.application_sets.is_empty() {
        return fail(format!(
            "{}: no ApplicationSet in the file",
            args.appset.display()
        ));
    }
    let written = super::write_report(args.output, &report, |out| {
        report
            .application_sets
            .iter()
            .try_for_each(|p| write!(out, "{}", text(p)))
    });
    match (written, report.valid) {
        (Err(_), _) => Exit::Error,
        (Ok(()), true) => Exit::Ok,
        (Ok(()), false) => Exit::Negative,
    }
}

/// A warning for each batch larger than `max`, on the step it belongs to.
fn batch_warnings(plan: &SyncPlan, max: usize) -> Vec<Finding> {
    let mut out = Vec::new();
    for step in &plan.steps {
        for (b, batch) in step.batches.iter().enumerate() {
            if batch.len() > max {
                out.push(Finding::warning(
                    format!("spec.strategy.rollingSync.steps[{}]", step.step - 1),
                    format!(
                        "batch {} of step {} syncs {} Applications at once (more than --max-batch {max}): {}",
                        b + 1,
                        step.step,
                        batch.len(),
                        batch.join(", ")
                    ),
                ));
            }
        }
    }
    if plan.strategy != "RollingSync" && plan.applications.len() > max {
        out.push(Finding::warning(
            "spec.strategy",
            format!(
                "every Application syncs at once: {} (more than --max-batch {max})",
                plan.applications.len()
            ),
        ));
    }
    out
}

fn text(p: &Planned) -> String {
    let plan = &p.plan;
    let mut s = format!(
        "ApplicationSet/{}: {}, {} Application(s){}\n",
        p.name,
        plan.strategy,
        plan.applications.len(),
        if plan.complete {
            ""
        } else {
            " (some generated from generators canaryd did not evaluate)"
        }
    );
    if let Some(note) = &plan.note {
        s += &format!("  {note}\n");
    }
    if plan.strategy != "RollingSync" {
        s += &format!("  all at once: {}\n", plan.applications.join(", "));
    }
    for step in &plan.steps {
        let expressions = if step.match_expressions.is_empty() {
            "every Application".to_string()
        } else {
            step.match_expressions.join(" and ")
        };
        s += &format!(
            "step {}: {expressions}; maxUpdate {}\n",
            step.step, step.max_update
        );
        if step.applications.is_empty() && !plan.undecided.is_empty() {
            s += "  no Application known: what this step syncs depends on values canaryd did not evaluate \
                  (see the warnings)\n";
        } else if step.applications.is_empty() {
            s += "  no Application: the step completes at once\n";
        } else if step.held {
            s += &format!(
                "  held: Argo CD never syncs {}; a person must sync them by hand\n",
                step.applications.join(", ")
            );
        }
        for (b, batch) in step.batches.iter().enumerate() {
            s += &format!("  batch {}: {}\n", b + 1, batch.join(", "));
        }
        if !step.also_waits_for.is_empty() {
            s += &format!(
                "  also waits for (synced in an earlier step): {}\n",
                step.also_waits_for.join(", ")
            );
        }
    }
    if !plan.unmatched.is_empty() {
        s += &format!(
            "never synced (no step selects them): {}\n",
            plan.unmatched.join(", ")
        );
    }
    if !plan.undecided.is_empty() {
        s += &format!(
            "step not known (it depends on values canaryd did not evaluate): {}\n",
            plan.undecided.join(", ")
        );
    }
    for f in &p.findings {
        s += &format!("{f}\n");
    }
    s
}
