//! The command line: one module per subcommand. Each subcommand parses its own flags, calls the library and
//! maps the outcome onto the exit codes of docs/architecture.md, "Exit codes". Nothing here decides an analysis outcome.

use std::io::Write;

use clap::{Parser, Subcommand, ValueEnum};

/// `say!` for a command's output: see [`say`].
macro_rules! say {
    () => {
        $crate::cli::say(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::cli::say(format_args!($($arg)*))
    };
}

pub mod analyze;
pub mod appset;
pub mod cluster;
pub mod crds;
pub mod dashboard;
pub mod demo;
pub mod demo_rollout;
pub mod demo_scenario;
pub mod eval;
pub mod get;
pub mod get_watch;
pub mod helm_template;
pub mod judge;
pub mod load;
pub mod located;
pub mod notifications;
pub mod plan;
pub mod rehearse;
pub mod rehearse_many;
pub mod rehearse_report;
pub mod report_file;
pub mod rollout_actions;
pub mod run;
pub mod validate;
pub mod validate_rollout;

/// Writes one line of a command's output to stdout. `println!` would panic when the reader has gone
/// (`canaryd demo | head`); here that ends the command at once with [`Exit::Error`], quietly, as
/// [`write_report`]'s callers do, and any other failure to write is said on stderr first. Nothing left to say
/// matters once stdout is gone.
pub fn say(line: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(e) = written {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("canaryd: cannot write the output: {e}");
        }
        std::process::exit(Exit::Error as i32)
    }
}

/// Exit codes shared by every subcommand (docs/architecture.md, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success, a positive verdict, or a valid input.
    Ok = 0,
    /// A negative verdict: invalid template, failed analysis, condition false.
    Negative = 1,
    /// Bad input or usage.
    Usage = 2,
    /// The analysis could not decide.
    Inconclusive = 3,
    /// Something failed while running (provider down, evaluation error).
    Error = 4,
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e as u8)
    }
}

/// Human output by default; `json` puts only JSON on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

/// Writes a command's report to stdout: the whole report as one JSON document, or the lines `text` writes.
/// An error means stdout is gone (a closed pipe), which the caller reports as [`Exit::Error`].
pub fn write_report<T: serde::Serialize>(
    format: OutputFormat,
    report: &T,
    text: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match format {
        OutputFormat::Json => serde_json::to_string_pretty(report)
            .map_err(std::io::Error::other)
            .and_then(|s| writeln!(out, "{s}")),
        OutputFormat::Text => text(&mut out),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Parser)]
#[command(
    name = "canaryd",
    version,
    about = "Canary analysis and Rollouts for Kubernetes, compatible with Argo Rollouts' objects",
    long_about = "canaryd reads Argo Rollouts AnalysisTemplate, ClusterAnalysisTemplate, AnalysisRun and Rollout objects, \
measures them against Prometheus or web endpoints with Argo's exact semantics, compares canary against \
baseline, and (with `canaryd run --rollouts`) progresses Rollouts step by step through Istio, NGINX or Gateway \
API. The same engine runs in the cluster (`canaryd run`) and from the command line, so a template or a Rollout \
can be validated, tried and rehearsed before a rollout depends on it.\n\n\
Exit codes: 0 success, 1 negative verdict, 2 bad input or usage, 3 inconclusive, 4 error."
)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log filter (tracing's EnvFilter syntax, e.g. `info` or `canaryd=debug`); RUST_LOG also works.
    #[arg(long, global = true, default_value = "warn")]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check AnalysisTemplate, ClusterAnalysisTemplate, AnalysisRun, Rollout and ApplicationSet files before a
    /// rollout depends on them.
    Validate(validate::Args),
    /// Show the order in which Argo CD's RollingSync will sync an ApplicationSet's Applications, step by step
    /// and batch by batch (exit 1 when validate would fail).
    Plan(plan::Args),
    /// Run one analysis as the daemon would: live, or as a backtest over a past window (--from/--to).
    Analyze(analyze::Args),
    /// Play a Rollout's steps against Prometheus history on a virtual clock, with the daemon's planner: what
    /// it would have done had it shipped at --from (exit 0 promoted, 1 aborted, 3 waiting for a person).
    Rehearse(rehearse::Args),
    /// See canaryd work with no cluster and no Prometheus: a built-in Rollout whose canary degrades, played
    /// step by step and rolled back in seconds (--scenario healthy promotes; --analysis-only runs the analysis alone).
    Demo(demo::Args),
    /// The in-cluster daemon: executes AnalysisRuns and writes their status; with --rollouts it also progresses
    /// Rollouts (ReplicaSets, traffic weights, steps, analyses, aborts).
    Run(run::Args),
    /// Print the CustomResourceDefinitions canaryd generates from its types.
    Crds(crds::Args),
    /// Show a Rollout as kubectl-argo-rollouts does (`get rollout NAME [--watch]`), or a table of Rollouts
    /// (`get rollouts`), read through the kubeconfig.
    Get(get::Args),
    /// Serve the dashboard on a workstation (http://127.0.0.1:3100/): Rollouts, their steps, revisions,
    /// Events and AnalysisRuns, live, read through the kubeconfig; --actions adds promote/abort/retry/pause.
    Dashboard(dashboard::Args),
    /// Evaluate a condition (or a success/failure pair) against a value: debug a condition before a rollout.
    Eval(eval::Args),
    /// Judge canary against baseline: sequential error-rate test or distribution test (exit 0 pass, 1 fail,
    /// 3 inconclusive, 2 bad input).
    Judge(judge::Args),
    /// Try a notification template or trigger against a live Rollout, as `kubectl argo rollouts
    /// notifications` does (`template notify`, `trigger run`).
    Notifications(notifications::Args),
    /// The Rollout actions of `kubectl argo rollouts`: promote, abort, retry, pause, resume, restart, undo, set image.
    #[command(flatten)]
    RolloutAction(rollout_actions::Action),
}

/// Runs the parsed command and returns its exit code.
pub fn run(cli: Cli) -> Exit {
    match cli.command {
        Command::Validate(args) => validate::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Rehearse(args) => rehearse::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Run(args) => run::run(args),
        Command::Crds(args) => crds::run(args),
        Command::Get(args) => get::run(args),
        Command::Dashboard(args) => dashboard::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Judge(args) => judge::run(args),
        Command::Notifications(args) => notifications::run(args),
        Command::RolloutAction(action) => rollout_actions::run(action),
    }
}
