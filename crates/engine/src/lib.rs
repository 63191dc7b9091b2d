//! canaryd's pure core: Argo's wire types (`api`), templates become validated plans, provider values become
//! measurements, measurements become phases and decisions, a Rollout's state becomes a plan of writes. Every
//! rule takes `now` as an argument and is handed what it reads: no clients, sockets, files, runtime or wall
//! clock, so backtests, rehearsals and restarts are exact. One part is async: the Rollout reconcile loop
//! (`rollout::reconcile_loop`) awaits the cluster it is given, so the daemon's API-server cluster and the in-memory one
//! share it; it needs no runtime (the in-memory cluster drives it with a plain executor).
//!
//! Enforced by the compiler rather than by review: this crate's Cargo.toml admits no runtime, client or socket
//! crate (`tests/purity.rs` asks Cargo for the resolved tree), and its clippy.toml denies the standard
//! library's clock, files, environment, processes, threads, sockets and terminal.
#![forbid(unsafe_code)]

pub mod analysis;
pub mod api;
pub mod args;
pub mod compare;
pub mod compose;
pub mod condition;
pub mod json_fields;
pub mod judge;
pub mod merge_patch;
pub mod notify;
pub mod pod_defaults;
pub mod progressive;
pub mod rollout;
pub mod routing;
pub mod scrub;
pub mod suggest;
pub mod template;
pub mod timeexpr;
pub mod value;
