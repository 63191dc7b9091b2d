//! `canaryd judge error-rate|distribution`: runs the canary-vs-baseline judge on files, for trying margins
//! and back-testing before a rollout depends on them. Owns file parsing (with FILE:LINE:COLUMN errors) and
//! output; the statistics live in `engine::judge` and nothing here decides a verdict.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::{Exit, OutputFormat};
use crate::engine::judge::{
    Design, Direction, DistributionParams, ErrorRateParams, ErrorRateResult, Look, Mixture,
    Verdict, judge_distribution, judge_error_rate,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub test: Test,
}

#[derive(Debug, Subcommand)]
pub enum Test {
    /// Sequential error-rate test on cumulative counts, one verdict per look; exit code of the last look.
    ErrorRate(ErrorRateArgs),
    /// Mann-Whitney U and Hodges-Lehmann shift of canary against baseline samples (e.g. latencies).
    Distribution(DistributionArgs),
}

#[derive(Debug, clap::Args)]
pub struct ErrorRateArgs {
    /// CSV with header `canary_errors,canary_requests,baseline_errors,baseline_requests`, one row per look,
    /// cumulative counts.
    #[arg(long)]
    pub csv: PathBuf,
    /// Probability of no false `fail` (and no false `pass`) over all looks together.
    #[arg(long, default_value_t = ErrorRateParams::default().confidence)]
    pub confidence: f64,
    /// Allowed relative increase r: fail only if canary rate > baseline rate × (1 + r) + a.
    #[arg(long, default_value_t = ErrorRateParams::default().max_relative_increase)]
    pub max_relative_increase: f64,
    /// Allowed absolute increase a, in rate units (0.001 = 0.1 percentage points).
    #[arg(long, default_value_t = ErrorRateParams::default().max_absolute_increase)]
    pub max_absolute_increase: f64,
    /// Requests each side must have served before a verdict other than inconclusive.
    #[arg(long, default_value_t = ErrorRateParams::default().min_requests)]
    pub min_requests: u64,
    /// Which regressions `fail` is fastest on: focused (1.5-2×, as the shipped templates) or wide.
    #[arg(long, default_value_t = ErrorRateParams::default().mixture)]
    pub mixture: Mixture,
    /// How `fail` spends its α: planned (part on a planned look, as the shipped templates) or sequential.
    #[arg(long, default_value_t = ErrorRateParams::default().design)]
    pub design: Design,
    /// `text`: a verdict line per look; `json`: one JSON object per line.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, clap::Args)]
pub struct DistributionArgs {
    /// Canary samples, one number per line (blank lines and `#` comments ignored).
    #[arg(long)]
    pub canary: PathBuf,
    /// Baseline samples, same format.
    #[arg(long)]
    pub baseline: PathBuf,
    /// Which difference is bad: increase (latency), decrease, either.
    #[arg(long, default_value = "increase")]
    pub direction: Direction,
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Allowed shift as a fraction of |baseline median|.
    #[arg(long, default_value_t = 0.10)]
    pub max_relative_shift: f64,
    /// Samples each side needs before a verdict other than inconclusive.
    #[arg(long, default_value_t = 20)]
    pub min_samples: usize,
    /// `text`: the verdict and the estimates; `json`: the same as one JSON object.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

pub fn run(args: Args) -> Exit {
    let outcome = match args.test {
        Test::ErrorRate(a) => error_rate(&a),
        Test::Distribution(a) => distribution(&a),
    };
    match outcome {
        Ok(exit) => exit,
        Err(message) => {
            eprintln!("canaryd judge: {message}");
            Exit::Usage
        }
    }
}

fn exit_for(verdict: Verdict) -> Exit {
    match verdict {
        Verdict::Pass => Exit::Ok,
        Verdict::Fail => Exit::Negative,
        Verdict::Inconclusive => Exit::Inconclusive,
    }
}

const HEADER: [&str; 4] = [
    "canary_errors",
    "canary_requests",
    "baseline_errors",
    "baseline_requests",
];

fn error_rate(args: &ErrorRateArgs) -> Result<Exit, String> {
    let params = ErrorRateParams {
        max_relative_increase: args.max_relative_increase,
        max_absolute_increase: args.max_absolute_increase,
        confidence: args.confidence,
        min_requests: args.min_requests,
        mixture: args.mixture,
        design: args.design,
    };
    let (looks, lines) = read_looks(&args.csv)?;
    let results = judge_error_rate(&params, &looks).map_err(|e| {
        // The judge numbers looks from 1; point at the CSV line that holds the look.
        let line = match &e {
            crate::engine::judge::JudgeError::CountDecreased { look, .. }
            | crate::engine::judge::JudgeError::ErrorsExceedRequests { look, .. }
            | crate::engine::judge::JudgeError::IncrementInconsistent { look, .. } => {
                lines.get(look.saturating_sub(1)).copied()
            }
            crate::engine::judge::JudgeError::BadParameter { .. } => None,
        };
        match line {
            Some(line) => format!("{}:{line}: {e}", args.csv.display()),
            None => e.to_string(),
        }
    })?;
    let Some(last) = results.last() else {
        return Err(format!("{}: no looks after the header", args.csv.display()));
    };
    let mut out = std::io::stdout().lock();
    let written = match args.output {
        OutputFormat::Json => results.iter().enumerate().try_for_each(|(i, r)| {
            let mut json = r.to_json();
            if let Some(o) = json.as_object_mut() {
                o.insert("look".to_string(), (i + 1).into());
            }
            writeln!(out, "{json}")
        }),
        OutputFormat::Text => write_error_rate_table(&mut out, &results),
    };
    if written.is_err() {
        return Ok(Exit::Error);
    }
    Ok(exit_for(last.verdict))
}

fn write_error_rate_table(
    out: &mut impl Write,
    results: &[ErrorRateResult],
) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>5}  {:<12}  {:>17}  {:>8}  {:>17}  {:>8}  ratio canary/baseline",
        "look", "verdict", "canary err/req", "rate", "baseline err/req", "rate"
    )?;
    for (i, r) in results.iter().enumerate() {
        let bound = |b: Option<f64>| b.map_or("-".to_string(), |v| format!("{v:.3}"));
        writeln!(
            out,
            "{:>5}  {:<12}  {:>17}  {:>8}  {:>17}  {:>8}  [{}, {}]",
            i + 1,
            r.verdict.to_string(),
            format!("{}/{}", r.canary_errors, r.canary_requests),
            percent(r.canary_rate),
            format!("{}/{}", r.baseline_errors, r.baseline_requests),
            percent(r.baseline_rate),
            bound(r.ratio_lower),
            bound(r.ratio_upper),
        )?;
    }
    match results.last().and_then(ErrorRateResult::sparse_message) {
        Some(message) => writeln!(out, "{message}"),
        None => Ok(()),
    }
}

fn percent(rate: f64) -> String {
    if rate.is_finite() {
        format!("{:.3}%", 100.0 * rate)
    } else {
        "-".to_string()
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))
}

/// The looks of an error-rate CSV and the 1-based line each came from.
fn read_looks(path: &Path) -> Result<(Vec<Look>, Vec<usize>), String> {
    let text = read(path)?;
    let mut rows = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let (header_line, header) = rows.next().unwrap_or((1, ""));
    if !header.split(',').map(str::trim).eq(HEADER.iter().copied()) {
        return Err(format!(
            "{}:{header_line}: expected the header `{}`, found `{header}`",
            path.display(),
            HEADER.join(",")
        ));
    }
    let mut looks = Vec::new();
    let mut lines = Vec::new();
    for (line, row) in rows {
        let cells: Vec<&str> = row.split(',').map(str::trim).collect();
        if cells.len() != HEADER.len() {
            return Err(format!(
                "{}:{line}: expected {} columns, found {}",
                path.display(),
                HEADER.len(),
                cells.len()
            ));
        }
        let mut counts = [0u64; 4];
        for (column, ((count, cell), name)) in counts.iter_mut().zip(&cells).zip(HEADER).enumerate()
        {
            *count = cell.parse().map_err(|_| {
                format!(
                    "{}:{line}:{}: {name}: expected a whole number of requests or errors, found `{cell}`",
                    path.display(),
                    column + 1
                )
            })?;
        }
        let [
            canary_errors,
            canary_requests,
            baseline_errors,
            baseline_requests,
        ] = counts;
        looks.push(Look {
            canary_errors,
            canary_requests,
            baseline_errors,
            baseline_requests,
        });
        lines.push(line);
    }
    Ok((looks, lines))
}

fn distribution(args: &DistributionArgs) -> Result<Exit, String> {
    let params = DistributionParams {
        direction: args.direction,
        confidence: args.confidence,
        max_relative_shift: args.max_relative_shift,
        min_samples: args.min_samples,
    };
    let canary = read_samples(&args.canary)?;
    let baseline = read_samples(&args.baseline)?;
    let r = judge_distribution(&canary, &baseline, &params).map_err(|e| e.to_string())?;
    if let Some(note) = r.note() {
        eprintln!("canaryd judge: {note}");
    }
    let mut out = std::io::stdout().lock();
    let written = match args.output {
        OutputFormat::Json => writeln!(out, "{}", r.to_json()),
        OutputFormat::Text => {
            let bound = |v: Option<f64>| v.map_or("-".to_string(), number);
            writeln!(
                out,
                "verdict:          {}\ncanary median:    {}\nbaseline median:  {}\nshift:            {} [{}, {}]\n\
                 p-value:          {}\nU:                {}\nsamples:          {} canary, {} baseline",
                r.verdict,
                number(r.canary_median),
                number(r.baseline_median),
                number(r.shift),
                bound(r.shift_lower),
                bound(r.shift_upper),
                number(r.p_value),
                number(r.u),
                r.canary_samples,
                r.baseline_samples
            )
        }
    };
    if written.is_err() {
        return Ok(Exit::Error);
    }
    Ok(exit_for(r.verdict))
}

/// Plain decimals, scientific notation for tiny magnitudes (p-values), `-` for undefined.
fn number(v: f64) -> String {
    if !v.is_finite() {
        "-".to_string()
    } else if v != 0.0 && v.abs() < 1e-4 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// One number per line; blank lines and `#` comments (whole-line or trailing) are ignored. `NaN` parses
/// (the judge drops it and says so).
fn read_samples(path: &Path) -> Result<Vec<f64>, String> {
    let text = read(path)?;
    let mut samples = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let value = raw.split('#').next().unwrap_or("").trim();
        if value.is_empty() {
            continue;
        }
        let number = value.parse::<f64>().map_err(|_| {
            format!(
                "{}:{}: expected a number, found `{value}`",
                path.display(),
                i + 1
            )
        })?;
        samples.push(number);
    }
    Ok(samples)
}
