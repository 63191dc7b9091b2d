//! Seeded simulations of the judges (`canaryd::engine::judge`), shared by their tests, which assert bounds on
//! the false-alarm rate and power, and by `tests/bench/judge.rs`, which prints the figures with more runs,
//! beside the peers' rules (`peers`) on the same simulated traffic.

pub mod distribution;
pub mod error_rate;
pub mod latency;
pub mod peers;
pub mod rng;
