//! `canaryd analyze`: runs one analysis exactly as the daemon would, live or as a backtest over a past
//! window (`--from/--to`, virtual clock), printing each measurement as it lands and the verdict at the end.
//! Input problems (files, templates, args) are reported before anything is measured, with exit code 2.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use jiff::Timestamp;

use super::load::{self, SourceDoc};
use super::report_file::ReportFile;
use super::validate::validate_documents;
use super::{Exit, OutputFormat};
use crate::api::{
    self, AnalysisPhase, AnalysisRunStatus, AnalysisTemplateRef, AnalysisTemplateSpec,
};
use crate::engine::analysis::Assessment;
use crate::engine::compose::RunSpec;
use crate::engine::template::Severity;
use crate::measure::Providers;
use crate::providers::provider::RunRef;
use crate::runner::{self, Event, PreparedRun};
use crate::time::Clock;
use crate::web::report::Gathering;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or folders holding the template (and the templates it nests) or an AnalysisRun.
    #[arg(short = 'f', long = "file", required = true)]
    pub files: Vec<PathBuf>,
    /// The AnalysisTemplate, ClusterAnalysisTemplate or AnalysisRun to run, when the files hold several.
    #[arg(long)]
    pub template: Option<String>,
    /// An arg value, NAME=VALUE (repeatable); wins over the template's default.
    #[arg(long = "arg", value_parser = parse_arg)]
    pub args: Vec<(String, String)>,
    /// Prometheus address for every prometheus metric, overriding the template's.
    #[arg(long)]
    pub prometheus: Option<String>,
    /// Backtest start (RFC 3339): a virtual clock starts here and every query is evaluated at its time.
    #[arg(long, requires = "to")]
    pub from: Option<Timestamp>,
    /// Backtest end (RFC 3339): the run is terminated when the virtual clock passes it.
    #[arg(long, requires = "from")]
    pub to: Option<Timestamp>,
    /// `text`: a line per measurement and a verdict; `json`: only the final AnalysisRun status on stdout, as
    /// one line.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Also write the measurements and each metric's chart to FILE as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

pub fn parse_arg(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

/// A bad-input problem, already phrased for the user.
#[derive(Debug)]
pub struct BadInput(pub String);

/// Loads the files, checks them as `validate` would, and prepares the run.
fn prepare(args: &Args) -> Result<(String, PreparedRun), BadInput> {
    let files = load::collect_files(&args.files).map_err(|e| BadInput(e.to_string()))?;
    let mut docs: Vec<SourceDoc> = Vec::new();
    for file in &files {
        let (file_docs, error) = load::load_file(file);
        if let Some(e) = error {
            return Err(BadInput(e.to_string()));
        }
        docs.extend(file_docs);
    }
    let (findings, _, _) = validate_documents(&docs, false);
    let errors: Vec<String> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(ToString::to_string)
        .collect();
    if !errors.is_empty() {
        return Err(BadInput(errors.join("\n")));
    }
    prepare_docs(
        &docs,
        args.template.as_deref(),
        &args.args,
        args.prometheus.as_deref(),
    )
}

/// Builds the run from validated documents: picks the object, composes nested templates, resolves args.
pub fn prepare_docs(
    docs: &[SourceDoc],
    wanted: Option<&str>,
    supplied: &[(String, String)],
    prometheus: Option<&str>,
) -> Result<(String, PreparedRun), BadInput> {
    let mut templates: Vec<(bool, String, AnalysisTemplateSpec)> = Vec::new();
    let mut runs: Vec<(String, api::AnalysisRunSpec)> = Vec::new();
    for doc in docs {
        let name = doc.name().unwrap_or_default().to_string();
        let decoded = match doc.kind() {
            Some("AnalysisTemplate") => {
                crate::api::decode::decode::<api::AnalysisTemplate>(&doc.value)
                    .map(|(t, _)| templates.push((false, name, t.spec)))
            }
            Some("ClusterAnalysisTemplate") => {
                crate::api::decode::decode::<api::ClusterAnalysisTemplate>(&doc.value)
                    .map(|(t, _)| templates.push((true, name, t.spec.0)))
            }
            Some("AnalysisRun") => crate::api::decode::decode::<api::AnalysisRun>(&doc.value)
                .map(|(r, _)| runs.push((name, r.spec))),
            _ => Ok(()),
        };
        decoded
            .map_err(|e| BadInput(format!("{}: {}: {}", doc.file.display(), e.path, e.message)))?;
    }
    let lookup = |r: &AnalysisTemplateRef| {
        let name = r.template_name.as_deref().unwrap_or_default();
        templates
            .iter()
            .find(|(c, n, _)| *c == (r.cluster_scope == Some(true)) && n == name)
            .map(|(_, _, s)| s)
    };
    let names: Vec<&str> = templates
        .iter()
        .map(|(_, n, _)| n.as_str())
        .chain(runs.iter().map(|(n, _)| n.as_str()))
        .collect();
    let (name, spec) = match wanted {
        Some(w) => {
            if let Some((_, n, spec)) = templates.iter().find(|(_, n, _)| n == w) {
                (n.clone(), RunSpec::from_template(spec, &lookup))
            } else if let Some((n, spec)) = runs.iter().find(|(n, _)| n == w) {
                (n.clone(), Ok(RunSpec::from_run(spec)))
            } else {
                return Err(BadInput(format!(
                    "--template {w}: not found; the files hold {}",
                    names.join(", ")
                )));
            }
        }
        None => match (runs.as_slice(), templates.as_slice()) {
            ([(n, spec)], _) => (n.clone(), Ok(RunSpec::from_run(spec))),
            ([], [(_, n, spec)]) => (n.clone(), RunSpec::from_template(spec, &lookup)),
            ([], []) => {
                return Err(BadInput(
                    "the files hold no AnalysisTemplate or AnalysisRun".to_string(),
                ));
            }
            _ => {
                return Err(BadInput(format!(
                    "the files hold several analyses ({}): choose one with --template NAME",
                    names.join(", ")
                )));
            }
        },
    };
    let spec = spec.map_err(|e| BadInput(format!("{name}: {e}")))?;
    let supplied: BTreeMap<String, String> = supplied.iter().cloned().collect();
    unset_args(&spec, &supplied).map_err(|e| BadInput(format!("{name}: {e}")))?;
    let secret_help = |s: &api::SecretKeyRef| {
        Err(format!(
            "canaryd analyze reads no Secrets (key {}): pass --arg NAME=VALUE",
            s.key
        ))
    };
    let rules = Providers::new(None);
    let prepared = PreparedRun::prepare(&spec, &supplied, &secret_help, prometheus, &rules)
        .map_err(|e| BadInput(format!("{name}: {e}")))?;
    Ok((name, prepared))
}

/// Every arg that would have no value, named at once with the flag that gives it: on the command line
/// nothing else can supply one (Argo resolves an arg without value or `valueFrom` to an error).
fn unset_args(spec: &RunSpec, supplied: &BTreeMap<String, String>) -> Result<(), String> {
    let unset: Vec<&str> = spec
        .args
        .iter()
        .filter(|a| a.value.is_none() && a.value_from.is_none())
        .filter(|a| !supplied.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if unset.is_empty() {
        return Ok(());
    }
    let quoted: Vec<String> = unset.iter().map(|n| format!("{n:?}")).collect();
    let flags: Vec<String> = unset.iter().map(|n| format!("--arg {n}=VALUE")).collect();
    let (noun, verb, pronoun) = match unset.len() {
        1 => ("arg", "has", "it"),
        _ => ("args", "have", "them"),
    };
    Err(format!(
        "{noun} {} {verb} no value: give {pronoun} with {}",
        quoted.join(", "),
        flags.join(" ")
    ))
}

/// What an Argo Rollout does with a run that ended in `phase`.
pub fn decision(phase: AnalysisPhase) -> &'static str {
    match phase {
        AnalysisPhase::Successful => "promote: the canary may take the next step",
        AnalysisPhase::Failed | AnalysisPhase::Error => "roll back: abort the rollout",
        AnalysisPhase::Inconclusive => "pause: the rollout waits for a person to promote or abort",
        AnalysisPhase::Pending | AnalysisPhase::Running => "wait: the analysis has not finished",
    }
}

pub fn exit_for(phase: AnalysisPhase) -> Exit {
    match phase {
        AnalysisPhase::Successful => Exit::Ok,
        AnalysisPhase::Failed => Exit::Negative,
        AnalysisPhase::Inconclusive => Exit::Inconclusive,
        AnalysisPhase::Error | AnalysisPhase::Pending | AnalysisPhase::Running => Exit::Error,
    }
}

/// How a report marks a measurement's line: `failed` for a Failed or Error measurement.
pub fn measurement_class(phase: AnalysisPhase) -> &'static str {
    match phase {
        AnalysisPhase::Failed | AnalysisPhase::Error => "failed",
        _ => "",
    }
}

/// The report of an analysis that ended: its measurements' lines, and the run as it ended with every
/// measurement seen.
fn write_report(
    file: ReportFile,
    gathering: Gathering,
    name: &str,
    run: &PreparedRun,
    status: &AnalysisRunStatus,
    ending: String,
) -> Result<(), Exit> {
    let spec = api::AnalysisRunSpec {
        metrics: run.metrics.iter().map(|m| m.metric.clone()).collect(),
        ..Default::default()
    };
    let mut shown = api::AnalysisRun::new(name, spec);
    shown.status = Some(status.clone());
    file.write(&gathering.report(format!("canaryd analysis {name}"), ending, &[shown]))
}

/// One measurement as a line: time, metric, value, phase, running counts.
pub fn measurement_line(at: Timestamp, m: &api::Measurement, r: &api::MetricResult) -> String {
    let value = m.value.as_deref().filter(|v| !v.is_empty()).unwrap_or("-");
    let message = m
        .message
        .as_deref()
        .map(|msg| format!("  ({msg})"))
        .unwrap_or_default();
    format!(
        "{}  {:<20} {:<14} {:<12} count={} successful={} failed={} inconclusive={} error={}{}{message}",
        at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        r.name,
        value,
        m.phase.as_str(),
        r.count,
        r.successful,
        r.failed,
        r.inconclusive,
        r.error,
        if r.dry_run { " [dry-run]" } else { "" },
    )
}

/// Prints the verdict: the run phase, why, and what a Rollout would do.
pub fn summary(name: &str, status: &AnalysisRunStatus, assessment: &Assessment) -> String {
    let mut out = format!("\nAnalysis {name}: {}", assessment.phase);
    if let Some(message) = assessment.message.as_deref().or(status.message.as_deref()) {
        out.push_str(&format!(" — {message}"));
    }
    for r in status.metric_results.iter().flatten() {
        out.push_str(&format!(
            "\n  {:<20} {:<12} {} measurement(s): {} successful, {} failed, {} inconclusive, {} error{}",
            r.name,
            r.phase.as_str(),
            r.count + r.error,
            r.successful,
            r.failed,
            r.inconclusive,
            r.error,
            if r.dry_run { " (dry-run: does not decide)" } else { "" },
        ));
    }
    out.push_str(&format!("\nDecision: {}", decision(assessment.phase)));
    out
}

/// Runs a prepared analysis and prints it; shared with `canaryd demo`.
pub async fn execute(
    name: &str,
    run: &PreparedRun,
    providers: &Providers,
    window: Option<(Timestamp, Timestamp)>,
    output: OutputFormat,
    report: Option<ReportFile>,
) -> Exit {
    let mut gathering = Gathering::default();
    let clock = match window {
        Some((from, _)) => Clock::virtual_at(from),
        None => Clock::Wall,
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop_tx.send(true);
        }
    });
    let progress = window.filter(|_| std::io::stderr().is_terminal());
    let mut on_event = |event: Event<'_>| match event {
        Event::Measured {
            at,
            measurement,
            result,
        } => {
            let line = measurement_line(at, measurement, result);
            if report.is_some() {
                gathering.line(line.clone(), measurement_class(measurement.phase));
                gathering.measured(name, &result.name, measurement);
            }
            if progress.is_some() {
                eprint!("\r\x1b[2K");
            }
            match output {
                OutputFormat::Text => say!("{line}"),
                OutputFormat::Json => eprintln!("{line}"),
            }
        }
        Event::Clock(now) => {
            if let Some((from, to)) = progress {
                let total = to.duration_since(from).as_secs_f64().max(1.0);
                let done = now.duration_since(from).as_secs_f64().clamp(0.0, total);
                eprint!(
                    "\rbacktest {} ({:.0}%)",
                    now.strftime("%H:%M:%S"),
                    100.0 * done / total
                );
                let _ = std::io::stderr().flush();
            }
        }
    };
    let who = RunRef::local(
        name,
        providers.jobs_namespace().unwrap_or("default"),
        Clock::Wall.now(),
    );
    let (status, assessment) = runner::run(
        run,
        &who,
        providers,
        &clock,
        window.map(|(_, to)| to),
        stop_rx,
        &mut on_event,
    )
    .await;
    if progress.is_some() {
        eprint!("\r\x1b[2K");
    }
    let told = summary(name, &status, &assessment);
    if let Some(file) = report
        && let Err(exit) = write_report(
            file,
            gathering,
            name,
            run,
            &status,
            told.trim().lines().next().unwrap_or("").to_string(),
        )
    {
        return exit;
    }
    match output {
        OutputFormat::Text => say!("{told}"),
        OutputFormat::Json => match serde_json::to_string(&status) {
            Ok(json) => say!("{json}"),
            Err(e) => {
                eprintln!("canaryd: cannot encode the status: {e}");
                return Exit::Error;
            }
        },
    }
    exit_for(assessment.phase)
}

pub fn run(args: Args) -> Exit {
    let (name, prepared) = match prepare(&args) {
        Ok(p) => p,
        Err(BadInput(message)) => {
            eprintln!("canaryd analyze: {message}");
            return Exit::Usage;
        }
    };
    if let (Some(from), Some(to)) = (args.from, args.to)
        && from >= to
    {
        eprintln!("canaryd analyze: --from {from} must be before --to {to}");
        return Exit::Usage;
    }
    let window = args.from.zip(args.to);
    let report = match super::report_file::open("analyze", args.report.as_deref()) {
        Ok(report) => report,
        Err(exit) => return exit,
    };
    let jobs: Vec<&str> = prepared
        .metrics
        .iter()
        .filter(|m| m.metric.provider.job.is_some())
        .map(|m| m.metric.name.as_str())
        .collect();
    if window.is_some() && !jobs.is_empty() {
        eprintln!(
            "canaryd analyze: metric {:?} runs a Kubernetes Job, which cannot be backtested: drop --from/--to",
            jobs[0]
        );
        return Exit::Usage;
    }
    let mut providers = Providers::new(crate::providers::default_address_from_env());
    if let Some((_, to)) = window {
        providers = providers.with_batched_prometheus(Some(to));
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("canaryd analyze: cannot start the runtime: {e}");
            return Exit::Error;
        }
    };
    runtime.block_on(async {
        let providers = match jobs.first() {
            None => providers,
            Some(metric) => match super::cluster::connect().await {
                Ok(client) => providers.with_jobs(std::sync::Arc::new(
                    crate::k8s::jobs::Jobs::new(client),
                )),
                Err(reason) => {
                    eprintln!(
                        "canaryd analyze: metric {metric:?} runs a Kubernetes Job, and no cluster is reachable \
                         (nothing was measured): {reason}"
                    );
                    return Exit::Error;
                }
            },
        };
        if window.is_some() {
            let metrics = prepared.metrics.iter().map(|m| &m.metric);
            if let Err(message) = providers.check_prometheus(metrics, None).await {
                eprintln!("canaryd analyze: {message} (nothing was measured)");
                return Exit::Usage;
            }
        }
        execute(&name, &prepared, &providers, window, args.output, report).await
    })
}
