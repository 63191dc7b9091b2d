//! End to end against a real Prometheus (`canaryd_testkit::prometheus`): synthetic series backfilled into
//! Debian's prometheus, and the `canaryd` binary (through [`CANARYD`], the one launcher) or the library's
//! providers querying it. Each module starts one server for its scenarios on first use in a process: once per
//! test under nextest. One test binary, a module per area.

use canaryd_testkit::cli::Canaryd;

/// The binary under test, named once for every module of this test binary.
const CANARYD: Canaryd = canaryd_testkit::canaryd!();

mod e2e_analysis;
mod e2e_batch;
mod e2e_compare;
mod e2e_gate;
mod e2e_rehearse;
mod e2e_templates;
