//! The command line: the `canaryd` binary cargo built, run as a user runs it (through [`CANARYD`], the one
//! launcher), its exit codes and the exact lines it prints, against files, the fake API server or nothing.
//! One test binary, a module per command.

use canaryd_testkit::cli::Canaryd;

/// The binary under test, named once for every module of this test binary.
const CANARYD: Canaryd = canaryd_testkit::canaryd!();

mod analyze_jobs;
mod conditions_cli;
mod demo;
mod doc_blocks;
mod flags_and_help;
mod get_rollout;
mod get_watch;
mod golden_text;
mod judge_cli;
mod notifications_cli;
mod progressive_cli;
mod rehearse_routers;
mod report;
mod rollout_actions;
mod rollout_undo_set_image;
mod run_cli;
mod unreachable_prometheus;
mod validate;
mod validate_rollout;
