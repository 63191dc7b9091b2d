//! The `canaryd` binary: parse the command line, set up logging, hand over to the library.

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = canaryd::cli::Cli::parse();
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cli.log_level))
        .unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        canaryd::cli::LogFormat::Json => builder.json().init(),
        canaryd::cli::LogFormat::Text => builder.init(),
    }
    canaryd::cli::run(cli).into()
}
