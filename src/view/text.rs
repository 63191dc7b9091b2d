//! The view as text, laid out as kubectl-argo-rollouts lays it out (`cmd/get/get_rollout.go`, `cmd/list`):
//! the Rollout's summary, then the tree of revisions, ReplicaSets, pods and AnalysisRuns with each metric's
//! last measurements and a sparkline of its values; and the table of `get rollouts`. Ages are kubectl's.

use jiff::Timestamp;

use super::{AnalysisRunView, MetricView, ReplicaSetView, RevisionView, RolloutRow, RolloutView};

const ICON_ROLLOUT: &str = "⟳";
const ICON_REVISION: &str = "#";
const ICON_REPLICA_SET: &str = "⧉";
const ICON_POD: &str = "□";
const ICON_ANALYSIS: &str = "α";
const ICON_METRIC: &str = "∿";

/// How many of a metric's measurements the tree shows, newest last.
const SHOWN_MEASUREMENTS: usize = 3;
/// How many of a metric's numeric values its sparkline draws, newest last.
const SPARKLINE_VALUES: usize = 12;
const SPARKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// `get rollout`'s text at `now`, lines ending in `\n`.
pub fn rollout(view: &RolloutView, now: Timestamp) -> String {
    let mut out = String::new();
    let mut field = |label: &str, value: &str| {
        out.push_str(format!("{label:<17}{value}").trim_end());
        out.push('\n');
    };
    field("Name:", &view.name);
    field("Namespace:", &view.namespace);
    field("Status:", &format!("{} {}", view.icon, view.status));
    if !view.message.is_empty() {
        field("Message:", &view.message);
    }
    field("Strategy:", &view.strategy);
    if let Some(canary) = &view.canary {
        if let Some(step) = &canary.step {
            let text = step
                .text
                .as_ref()
                .map(|t| format!(" ({t})"))
                .unwrap_or_default();
            field("  Step:", &format!("{}/{}{text}", step.index, step.count));
        }
        field("  SetWeight:", &canary.set_weight.to_string());
        field("  ActualWeight:", &canary.actual_weight.to_string());
    }
    for (i, image) in view.images.iter().enumerate() {
        let tags = if image.tags.is_empty() {
            String::new()
        } else {
            format!(" ({})", image.tags.join(", "))
        };
        field(
            if i == 0 { "Images:" } else { "" },
            &format!("{}{tags}", image.image),
        );
    }
    field("Replicas:", "");
    let r = view.replicas;
    for (label, n) in [
        ("  Desired:", r.desired),
        ("  Current:", r.current),
        ("  Updated:", r.updated),
        ("  Ready:", r.ready),
        ("  Available:", r.available),
    ] {
        field(label, &n.to_string());
    }
    out.push('\n');
    out.push_str(&columns(&tree(view, now)));
    out
}

/// `get rollouts`' table; the NAMESPACE column only when `namespaces` (rows from more than one).
pub fn rollouts(rows: &[RolloutRow], namespaces: bool) -> String {
    let header = [
        "NAME",
        "STRATEGY",
        "STATUS",
        "STEP",
        "SET-WEIGHT",
        "READY",
        "DESIRED",
        "UP-TO-DATE",
        "AVAILABLE",
    ];
    let mut table = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
    for row in rows {
        table.push(vec![
            row.name.clone(),
            row.strategy.clone(),
            row.status.clone(),
            row.step.clone(),
            row.set_weight.clone(),
            format!("{}/{}", row.ready, row.current),
            row.desired.to_string(),
            row.updated.to_string(),
            row.available.to_string(),
        ]);
    }
    if namespaces {
        table[0].insert(0, "NAMESPACE".to_string());
        for (line, row) in table.iter_mut().skip(1).zip(rows) {
            line.insert(0, row.namespace.clone());
        }
    }
    columns(&table)
}

/// The tree's rows: NAME, KIND, STATUS, AGE, INFO.
fn tree(view: &RolloutView, now: Timestamp) -> Vec<Vec<String>> {
    let mut rows = vec![row("NAME", "KIND", "STATUS", "AGE".to_string(), "INFO")];
    rows.push(row(
        &format!("{ICON_ROLLOUT} {}", view.name),
        "Rollout",
        &format!("{} {}", view.icon, view.status),
        age(view.created_at, now),
        "",
    ));
    for (i, revision) in view.revisions.iter().enumerate() {
        let (prefix, sub) = branches(i + 1 == view.revisions.len(), "");
        revision_rows(&mut rows, revision, &prefix, &sub, now);
    }
    rows
}

fn revision_rows(
    rows: &mut Vec<Vec<String>>,
    revision: &RevisionView,
    prefix: &str,
    sub: &str,
    now: Timestamp,
) {
    let name = format!("{prefix}{ICON_REVISION} revision:{}", revision.revision);
    rows.push(row(&name, "", "", String::new(), ""));
    let total = revision.replica_sets.len() + revision.analysis_runs.len();
    for (i, rs) in revision.replica_sets.iter().enumerate() {
        let (prefix, child) = branches(i + 1 == total, sub);
        replica_set_rows(rows, rs, &prefix, &child, now);
    }
    for (i, run) in revision.analysis_runs.iter().enumerate() {
        let last = revision.replica_sets.len() + i + 1 == total;
        let (prefix, child) = branches(last, sub);
        analysis_run_rows(rows, run, &prefix, &child, now);
    }
}

fn replica_set_rows(
    rows: &mut Vec<Vec<String>>,
    rs: &ReplicaSetView,
    prefix: &str,
    sub: &str,
    now: Timestamp,
) {
    let mut info: Vec<String> = rs.tags().into_iter().map(str::to_string).collect();
    if let Some(deadline) = &rs.scale_down_deadline {
        info.push(format!("delay:{}", scale_down_delay(deadline, now)));
    }
    rows.push(row(
        &format!("{prefix}{ICON_REPLICA_SET} {}", rs.name),
        "ReplicaSet",
        &format!("{} {}", rs.icon, rs.status),
        age(rs.created_at, now),
        &info.join(","),
    ));
    for (i, pod) in rs.pods.iter().enumerate() {
        let (prefix, _) = branches(i + 1 == rs.pods.len(), sub);
        let mut info = format!("ready:{}", pod.ready);
        if pod.restarts > 0 {
            info.push_str(&format!(",restarts:{}", pod.restarts));
        }
        rows.push(row(
            &format!("{prefix}{ICON_POD} {}", pod.name),
            "Pod",
            &format!("{} {}", pod.icon, pod.status),
            age(pod.created_at, now),
            &info,
        ));
    }
}

fn analysis_run_rows(
    rows: &mut Vec<Vec<String>>,
    run: &AnalysisRunView,
    prefix: &str,
    sub: &str,
    now: Timestamp,
) {
    let counts = [
        ("✔", run.successful),
        ("✖", run.failed),
        ("?", run.inconclusive),
        ("⚠", run.error),
    ];
    let info: Vec<String> = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(icon, n)| format!("{icon} {n}"))
        .collect();
    rows.push(row(
        &format!("{prefix}{ICON_ANALYSIS} {}", run.name),
        "AnalysisRun",
        &format!("{} {}", run.icon, run.status),
        age(run.created_at, now),
        &info.join(","),
    ));
    for (i, metric) in run.metrics.iter().enumerate() {
        let (prefix, _) = branches(i + 1 == run.metrics.len(), sub);
        rows.push(row(
            &format!("{prefix}{ICON_METRIC} {}", metric.name),
            "Metric",
            &format!("{} {}", metric.icon, metric.phase),
            String::new(),
            &measurements(metric),
        ));
    }
}

/// A metric's sparkline, then its last measurements as `value icon` (the Job's name for a job metric).
fn measurements(metric: &MetricView) -> String {
    let values: Vec<f64> = metric
        .measurements
        .iter()
        .filter_map(|m| m.value.as_deref().and_then(number))
        .collect();
    let spark = sparkline(&values[values.len().saturating_sub(SPARKLINE_VALUES)..]);
    let start = metric.measurements.len().saturating_sub(SHOWN_MEASUREMENTS);
    let last: Vec<String> = metric.measurements[start..]
        .iter()
        .map(|m| {
            let shown = m.value.clone().or_else(|| m.job.clone());
            format!("{} {}", shown.unwrap_or_else(|| "-".to_string()), m.icon)
        })
        .collect();
    [spark, last.join(", ")]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The number a measurement's value holds: a scalar (`0.99`) or the first element of a vector (`[0.99]`).
pub fn number(value: &str) -> Option<f64> {
    let inner = value.trim().trim_start_matches('[').trim_end_matches(']');
    let first = inner.split([',', ' ']).find(|s| !s.is_empty())?;
    first.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// `values` as bars from ▁ (the lowest) to █ (the highest); a flat series sits at ▄.
pub fn sparkline(values: &[f64]) -> String {
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    values
        .iter()
        .map(|v| {
            if high - low <= f64::EPSILON * high.abs().max(1.0) {
                return SPARKS[3];
            }
            let level = ((v - low) / (high - low) * 7.0).round() as usize;
            SPARKS[level.min(7)]
        })
        .collect()
}

/// The time left before a ReplicaSet scales down (Argo's `ScaleDownDelay`): `passed` once it has.
fn scale_down_delay(deadline: &str, now: Timestamp) -> String {
    match deadline.parse::<Timestamp>() {
        Ok(at) if at < now => "passed".to_string(),
        Ok(at) => human_duration(at.as_second() - now.as_second()),
        Err(_) => String::new(),
    }
}

fn age(created: Option<Timestamp>, now: Timestamp) -> String {
    created.map_or_else(String::new, |c| {
        human_duration(now.as_second() - c.as_second())
    })
}

/// kubectl's age (apimachinery's `HumanDuration`): exact seconds up to two minutes, then coarser.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    let seconds = seconds.max(0);
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    let (days, years) = (hours / 24, hours / (24 * 365));
    let pair = |big: i64, unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{small_unit}")
        }
    };
    match () {
        () if seconds < 120 => format!("{seconds}s"),
        () if minutes < 10 => pair(minutes, "m", seconds % 60, "s"),
        () if minutes < 180 => format!("{minutes}m"),
        () if hours < 8 => pair(hours, "h", minutes % 60, "m"),
        () if hours < 48 => format!("{hours}h"),
        () if hours < 24 * 8 => pair(days, "d", hours % 24, "h"),
        () if hours < 24 * 365 * 2 => format!("{days}d"),
        () if hours < 24 * 365 * 8 => pair(years, "y", days % 365, "d"),
        () => format!("{years}y"),
    }
}

fn row(name: &str, kind: &str, status: &str, age: String, info: &str) -> Vec<String> {
    vec![
        name.to_string(),
        kind.to_string(),
        status.to_string(),
        age,
        info.to_string(),
    ]
}

/// The tree's prefixes for an entry and for its children (Argo's `getPrefixes`).
fn branches(last: bool, sub: &str) -> (String, String) {
    if last {
        (format!("{sub}└──"), format!("{sub}   "))
    } else {
        (format!("{sub}├──"), format!("{sub}│  "))
    }
}

/// `rows` as aligned columns two spaces apart, as Go's tabwriter lays them out (the last column unpadded);
/// widths count characters, as the tree's icons are one column wide. No line ends in spaces.
fn columns(rows: &[Vec<String>]) -> String {
    let count = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..count)
        .map(|c| {
            let width = rows
                .iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count());
            width.max().unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < row.len() {
                let pad = widths[c] + 2 - cell.chars().count();
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
