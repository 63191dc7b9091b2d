//! The Rollout fixture: `web`, its canary and stable Services and its analysis, driven on the engine's
//! in-memory cluster ([`sim`], for the planner's tests) or by the daemon against the fake API server
//! ([`cluster`], for the daemon's tests and the rollouts bench), and readers of what came of it. TEST FIXTURE
//! ONLY: no assertions about canaryd's behaviour.

pub mod cluster;
pub mod sim;
