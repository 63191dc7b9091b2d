//! canaryd: canary analysis for Kubernetes with Argo Rollouts-compatible AnalysisTemplates.
//!
//! The library holds everything; `main.rs` only parses the command line and calls [`cli::run`].
#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod engine;
pub mod measure;
pub mod providers;
pub mod runner;
pub mod time;
