//! canaryd: canary analysis for Kubernetes with Argo Rollouts-compatible AnalysisTemplates.
//!
//! The library holds everything; `main.rs` only parses the command line and calls [`cli::run`].
#![forbid(unsafe_code)]

pub use canaryd_engine::api;
pub mod cli;
pub mod controller;
pub mod dashboard;
pub use canaryd_engine as engine;
pub mod k8s;
pub mod measure;
pub mod notify;
pub mod observe;
pub mod providers;
pub mod rehearsal;
pub mod routers;
pub mod runner;
pub use canaryd_engine::scrub;
pub mod time;
pub mod view;
pub mod web;
