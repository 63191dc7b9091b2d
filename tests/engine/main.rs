//! The engine: canaryd's pure parts, no sockets and no clock (files read from `tests/fixtures/` and the
//! repository at most): the object model, the condition language, the judges, the analysis state machine,
//! the Rollout planner on the in-memory cluster, the traffic-router builders, the ApplicationSet engine and
//! the document loader. One test binary, a module per area.

mod analysis_machine;
mod api;
mod conditions;
mod conditions_props;
mod judge_distribution;
mod judge_error_rate;
mod judge_latency;
mod judge_mixture;
mod judge_planned;
mod judge_sparse;
mod load_truncated;
mod notifications;
mod notifications_when;
mod progressive_engine;
mod rollout_act;
mod rollout_actions;
mod rollout_analysis;
mod rollout_anti_affinity;
mod rollout_bluegreen;
mod rollout_managed_routes;
mod rollout_parity;
mod rollout_planner;
mod rollout_references;
mod rollout_scenarios;
mod rollout_spec_messages;
mod rollout_traffic;
mod routing_golden;
