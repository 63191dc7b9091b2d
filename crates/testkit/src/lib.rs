//! canaryd's test fixtures, shared by the test binaries in `tests/` and the benches in `tests/bench/`: a dev-only
//! library, so each fixture is compiled once and linked where it is used, and what no test uses is dead code
//! the compiler reports. TEST FIXTURES ONLY: nothing here asserts anything about canaryd's behaviour (that is
//! for the tests), and the product crate never depends on it.
//!
//! - [`fake_apiserver`]: a stateful fake Kubernetes API server over plain HTTP.
//! - [`harness`]: `canaryd run` in-process against it, on the wall clock or a manual one, with a scripted
//!   Prometheus.
//! - [`rollout`]: the Rollout fixture, on the in-memory cluster ([`rollout::memory`]) and on the fake API server
//!   ([`rollout::cluster`]); [`router_objects`]: the traffic routers' objects.
//! - [`cli`]: the one launcher of the `canaryd` binary ([`canaryd!`]); [`child_daemon`]: `canaryd run` as a
//!   child process, for the benches.
//! - [`browser`]: Debian's headless Chromium through chromedriver, for the dashboard's pages.
//! - [`prometheus`]: a real Prometheus loaded with synthetic series, and `canaryd analyze` against it.
//! - [`judge_sim`]: seeded simulations of the judges.
//! - [`offline_page`]: a page file in headless Chromium with the network cut off (the offline reports).

use std::path::Path;

pub mod browser;
pub mod child_daemon;
pub mod cli;
pub mod fake_apiserver;
pub mod harness;
pub mod judge_sim;
pub mod offline_page;
pub mod prometheus;
pub mod rollout;
pub mod router_objects;
pub mod smtp;

/// The repository root (canaryd's package directory), where `tests/fixtures/`, `charts/` and
/// `analysis-templates/` are.
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("crates/testkit lies two directories below the repository root")
}
