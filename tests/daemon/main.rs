//! The daemon: `canaryd run` in-process against the fake API server and a scripted Prometheus
//! (`canaryd_testkit::harness`), on real time or on a manual clock, most tests under both canaryd's and Argo's
//! CRDs. One test binary, a module per area.

mod daemon_alb_header_routes;
mod daemon_bluegreen;
mod daemon_clock;
mod daemon_decode;
mod daemon_event_load;
mod daemon_gate;
mod daemon_ha;
mod daemon_handover;
mod daemon_header_routes;
mod daemon_jobs;
mod daemon_metrics;
mod daemon_notifications;
mod daemon_restart;
mod daemon_retries;
mod daemon_rollout_actions;
mod daemon_rollout_caches;
mod daemon_rollout_errors;
mod daemon_rollout_events;
mod daemon_rollout_invalid;
mod daemon_rollout_parity;
mod daemon_rollout_threads;
mod daemon_rollout_writes;
mod daemon_rollouts;
mod daemon_rollouts_kubectl;
mod daemon_routing;
mod daemon_run_events;
mod daemon_runs;
mod dashboard_queries;
mod run_parity;
