//! The pure core: templates become validated plans, provider values become measurements, measurements become
//! phases and decisions. Everything here is synchronous and takes `now` as an argument: no clients, sockets,
//! tokio or wall clock (a test in `tests/` enforces it), so backtests and restarts are exact.

pub mod analysis;
pub mod args;
pub mod compare;
pub mod compose;
pub mod condition;
pub mod judge;
pub mod merge_patch;
pub mod progressive;
pub mod rollout;
pub mod routing;
pub mod template;
pub mod timeexpr;
pub mod value;
