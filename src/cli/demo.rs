//! `canaryd demo`: shows the main job on a machine with no cluster and no Prometheus. A built-in 30-minute
//! scenario (baseline steady at 1% errors; canary fine, then at 12% from minute 8) stands in for Prometheus
//! as a metric provider, and the shipped `success-rate.yaml` runs against it on a virtual clock, exactly as
//! `canaryd analyze --from/--to` would. `--write-openmetrics` writes the same
//! series for a real Prometheus (see the README).

use std::path::PathBuf;
use std::sync::Arc;

use super::demo_scenario::{SUCCESS_RATE, Scenario, ScenarioName, StandIn};
use super::{Exit, OutputFormat, load};
use crate::measure::Providers;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_enum, default_value_t = ScenarioName::Degrading)]
    pub scenario: ScenarioName,
    /// Run only the success-rate analysis over the scenario (as `canaryd analyze --from/--to` would), not
    /// the Rollout.
    #[arg(long)]
    pub analysis_only: bool,
    /// Write the scenario's series as OpenMetrics (for `promtool tsdb create-blocks-from openmetrics`) and exit.
    #[arg(long, value_name = "FILE")]
    pub write_openmetrics: Option<PathBuf>,
    /// `text`: the timeline and the outcome; `json`: one JSON object per line (with `--analysis-only`, one
    /// line: the run's final status).
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Also write the timeline and the analysis's charts to FILE as one self-contained HTML page.
    #[arg(long, value_name = "FILE", conflicts_with = "write_openmetrics")]
    pub report: Option<PathBuf>,
}

pub fn run(args: Args) -> Exit {
    let scenario = Scenario::new(args.scenario);
    if let Some(path) = &args.write_openmetrics {
        return match std::fs::write(path, scenario.openmetrics()) {
            Ok(()) => Exit::Ok,
            Err(e) => {
                eprintln!("canaryd demo: cannot write {}: {e}", path.display());
                Exit::Usage
            }
        };
    }
    let report = match super::report_file::open("demo", args.report.as_deref()) {
        Ok(report) => report,
        Err(exit) => return exit,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("canaryd demo: cannot start the runtime: {e}");
            return Exit::Error;
        }
    };
    if !args.analysis_only {
        return runtime.block_on(super::demo_rollout::run(scenario, args.output, report));
    }
    runtime.block_on(async {
        let (docs, error) = load::parse_documents(std::path::Path::new("analysis-templates/success-rate.yaml"), SUCCESS_RATE);
        if let Some(e) = error {
            eprintln!("canaryd demo: the built-in template does not parse: {e}");
            return Exit::Error;
        }
        let supplied = [
            ("service".to_string(), "checkout-canary".to_string()),
            ("namespace".to_string(), "shop".to_string()),
        ];
        let (name, prepared) = match super::analyze::prepare_docs(&docs, None, &supplied, None) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("canaryd demo: {}", e.0);
                return Exit::Error;
            }
        };
        let (from, to) = scenario.analysis_window();
        if args.output == OutputFormat::Text {
            let story = match args.scenario {
                ScenarioName::Degrading => "canary fine (0.8% errors) until 00:08, then at 12%",
                ScenarioName::Healthy => "canary steady at 0.8% errors",
            };
            say!(
                "canaryd demo: baseline steady at 1% errors; {story}.\n\
                 Running analysis-templates/success-rate.yaml (service=checkout-canary, threshold 0.99) on a virtual \
                 clock from {from} to {to},\nagainst the scenario standing in for Prometheus.\n"
            );
        }
        let providers = Providers::new(None).with_prometheus(Arc::new(StandIn(scenario)));
        super::analyze::execute(&name, &prepared, &providers, Some((from, to)), args.output, report)
            .await
    })
}
