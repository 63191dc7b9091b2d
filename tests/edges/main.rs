//! The edges: canaryd's providers and Kubernetes clients against stand-ins for what they talk to (wiremock for
//! Prometheus and web endpoints, the fake API server for the cluster), and what it writes against the published
//! CRDs. One test binary, a module per edge.

mod crds;
mod notify_email;
mod notify_services;
mod providers_parse;
mod providers_prometheus;
mod providers_web;
mod rollout_crd;
mod rollout_writes_parity;
mod routers_api;
mod status_writes;
