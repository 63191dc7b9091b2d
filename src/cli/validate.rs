//! `canaryd validate PATH...`: placeholder until the validator lands.
use super::Exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or folders (searched recursively for *.yaml and *.yml).
    #[arg(required = true)]
    pub paths: Vec<std::path::PathBuf>,
}

pub fn run(_: Args) -> Exit {
    Exit::Ok
}
