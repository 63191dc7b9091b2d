//! How a rehearsal is told: each timeline entry as a line (or a JSON object), the outcome in one sentence,
//! and the exit code it maps onto (0 promoted, 1 aborted, 3 waiting for a person). `rehearse`, its
//! `--every` form and `demo` print through it; `--report` writes the same lines with the runs' charts.

use std::io::{IsTerminal, Write};

use jiff::SignedDuration;

use super::report_file::ReportFile;
use super::{Exit, OutputFormat};
use crate::api::reasons::rollout::TRAFFIC_WEIGHT_UPDATED;
use crate::measure::Providers;
use crate::rehearsal::{self, Ending, Entry, Options, Outcome, Setup};
use crate::web::report::{Gathering, Report};

/// A duration of virtual time as people read it: `1h 5m`, `45s`.
pub fn human(seconds: i64) -> String {
    if seconds == 0 {
        return "0s".to_string();
    }
    format!("{:#}", SignedDuration::from_secs(seconds))
}

/// One timeline entry as a line.
pub fn entry_line(entry: &Entry) -> String {
    let time = rehearsal::shown(entry.time());
    match entry {
        Entry::Step {
            step,
            steps,
            name,
            weight,
            routers,
            ..
        } => {
            let at = if step > steps {
                format!("all {steps} steps {name}")
            } else {
                format!("step {step}/{steps}  {name}")
            };
            let mut line = format!("{time}  {at:<26} canary weight {weight}");
            for r in routers {
                line.push_str(&format!("  {r}"));
            }
            line
        }
        Entry::Measurement {
            result,
            measurement,
            time,
            ..
        } => super::analyze::measurement_line(*time, measurement, result),
        Entry::Event {
            reason,
            message,
            warning,
            ..
        } => format!(
            "{time}  {}{reason}: {message}{}",
            if *warning { "warning " } else { "" },
            event_note(reason, message)
        ),
        Entry::Held { message, .. } => format!("{time}  routers held back: {message}"),
        Entry::Promote { reason, .. } => format!("{time}  promote: {reason}"),
    }
}

/// What an Event's own words leave unsaid, after it. Argo's TrafficWeightUpdated names no weight when only
/// the pod-template hashes behind the weights changed (its trafficWeightUpdatedMessage: no "from A to B"
/// when the canary weight is the same): the Event is kept as Argo writes it and explained here.
fn event_note(reason: &str, message: &str) -> &'static str {
    let nothing_named = message
        .strip_prefix("Traffic weight updated")
        .is_some_and(|rest| rest.trim().is_empty());
    if reason == TRAFFIC_WEIGHT_UPDATED && nothing_named {
        "[the weight is unchanged: the weights now name the new ReplicaSet's pod-template hash]"
    } else {
        ""
    }
}

/// The outcome in one sentence.
pub fn outcome_line(e: &Ending, steps: usize) -> String {
    let step = e
        .step
        .map(|s| format!(" at step {s}/{steps}"))
        .unwrap_or_default();
    let metric = e
        .metric
        .as_deref()
        .map(|m| format!(" (metric {m})"))
        .unwrap_or_default();
    let what = match e.outcome {
        Outcome::Promoted => "promoted",
        Outcome::Aborted => "aborted",
        Outcome::Waiting => "waiting",
    };
    format!(
        "{what}{step} after {}{metric}: {}",
        human(e.seconds),
        e.reason
    )
}

pub fn exit_for(outcome: Outcome) -> Exit {
    match outcome {
        Outcome::Promoted => Exit::Ok,
        Outcome::Aborted => Exit::Negative,
        Outcome::Waiting => Exit::Inconclusive,
    }
}

/// The JSON line of an outcome: the ending, tagged.
pub fn outcome_json(e: &Ending) -> String {
    let mut value = serde_json::to_value(e).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.insert("type".to_string(), "outcome".into());
    }
    value.to_string()
}

/// How the report marks an entry's line: a step, a warning, a failed measurement.
fn entry_class(entry: &Entry) -> &'static str {
    match entry {
        Entry::Step { .. } => "step",
        Entry::Event { warning: true, .. } => "warning",
        Entry::Measurement { measurement, .. } => {
            super::analyze::measurement_class(measurement.phase)
        }
        _ => "",
    }
}

/// Gathers an entry for the report: its line, and the measurement it tells.
fn gather(gathering: &mut Gathering, entry: &Entry) {
    gathering.line(entry_line(entry), entry_class(entry));
    if let Entry::Measurement {
        analysis_run,
        result,
        measurement,
        ..
    } = entry
    {
        gathering.measured(analysis_run, &result.name, measurement);
    }
}

/// The report of a rehearsal that ended.
fn rehearsal_report(gathering: Gathering, setup: &Setup, ending: &Ending, steps: usize) -> Report {
    let meta = &setup.rollout.metadata;
    let title = format!(
        "canaryd rehearsal of Rollout {}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or("")
    );
    gathering.report(title, outcome_line(ending, steps), &ending.analysis_runs)
}

/// Plays one rehearsal and prints it, and writes its report when `report` is given; shared with
/// `canaryd demo`.
pub async fn show(
    setup: &Setup,
    providers: &Providers,
    opts: &Options,
    output: OutputFormat,
    report: Option<ReportFile>,
) -> Exit {
    let steps = crate::engine::rollout::steps::steps(&setup.rollout).len();
    let progress = std::io::stderr().is_terminal();
    let mut gathering = Gathering::default();
    let mut on = |entry: &Entry| {
        if report.is_some() {
            gather(&mut gathering, entry);
        }
        if progress {
            eprint!("\r\x1b[2K");
        }
        match output {
            OutputFormat::Text => say!("{}", entry_line(entry)),
            OutputFormat::Json => match serde_json::to_string(entry) {
                Ok(line) => say!("{line}"),
                Err(e) => eprintln!("canaryd: cannot encode a timeline entry: {e}"),
            },
        }
        if progress {
            eprint!("rehearsing: {}", rehearsal::shown(entry.time()));
            let _ = std::io::stderr().flush();
        }
    };
    let ended = rehearsal::play(setup, providers, opts, &mut on).await;
    if progress {
        eprint!("\r\x1b[2K");
    }
    match ended {
        Err(e) => {
            eprintln!("canaryd: {e}");
            Exit::Usage
        }
        Ok(ending) => {
            match output {
                OutputFormat::Text => say!("\nOutcome: {}", outcome_line(&ending, steps)),
                OutputFormat::Json => say!("{}", outcome_json(&ending)),
            }
            if let Some(file) = report
                && let Err(exit) = file.write(&rehearsal_report(gathering, setup, &ending, steps))
            {
                return exit;
            }
            exit_for(ending.outcome)
        }
    }
}
