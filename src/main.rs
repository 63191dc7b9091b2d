//! The `canaryd` binary: parse the command line, set up logging, hand over to the library.

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::filter::{EnvFilter, FilterExt, Targets};
use tracing_subscriber::layer::{Filter, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Registry, fmt};

/// mimalloc rather than glibc's allocator: the daemon allocates and frees a status's worth of small objects
/// per measurement, and under glibc's malloc that bookkeeping (consolidating and unlinking chunks) was a
/// third of its CPU at 10,000 runs. The `system-allocator` feature leaves it out, for heap profilers.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = canaryd::cli::Cli::parse();
    let from_env = std::env::var("RUST_LOG").ok().and_then(|d| filter(&d));
    let filter = from_env
        .or_else(|| filter(&cli.log_level))
        .unwrap_or_else(|| FilterExt::boxed(Targets::new().with_default(tracing::Level::WARN)));
    let layer = match cli.log_format {
        canaryd::cli::LogFormat::Json => fmt::layer().json().with_writer(std::io::stderr).boxed(),
        canaryd::cli::LogFormat::Text => fmt::layer().with_writer(std::io::stderr).boxed(),
    };
    tracing_subscriber::registry()
        .with(layer.with_filter(filter))
        .init();
    canaryd::cli::run(cli).into()
}

/// The filter `directives` ask for; `None` when they do not parse. A plain `target=level` list (`info`,
/// `canaryd=debug,info`) is filtered statically; only directives on spans or fields need `EnvFilter`, which
/// tracks every span it sees (a tenth of the daemon's CPU at 10,000 runs, for kube's span per reconcile).
fn filter(directives: &str) -> Option<Box<dyn Filter<Registry> + Send + Sync>> {
    if directives.trim().is_empty() {
        return None;
    }
    match directives.parse::<Targets>() {
        Ok(targets) => Some(FilterExt::boxed(targets)),
        Err(_) => EnvFilter::try_new(directives).ok().map(FilterExt::boxed),
    }
}
