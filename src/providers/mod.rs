//! Metric sources behind one seam ([`provider::MetricProvider`], found by name in [`registry::Providers`]):
//! the Prometheus HTTP API, the web provider and `canaryd/compare`. A provider takes a fully resolved request
//! (args substituted, secret values already read by the caller), does the I/O and returns a typed
//! [`MetricValue`] with some metadata, or a [`ProviderError`] the caller records as an Error measurement.
//! Providers never judge: conditions, phases and counters belong to `engine/`.
//!
//! Secrets (passwords, OAuth2 client secrets, header values, and any value the caller marks as secret) never
//! appear in error messages, metadata or `Debug` output.

pub mod batch;
pub mod compare;
pub mod gate;
pub mod http;
pub mod job;
pub mod jsonpath;
pub mod preflight;
pub mod prometheus;
pub mod promql;
pub mod provider;
pub mod registry;
pub mod sources;
pub mod web;

use std::collections::BTreeMap;

use crate::engine::value::MetricValue;

pub use http::{Auth, Headers, HttpClients, OAuth2ClientCredentials, Secret};
pub use prometheus::{
    ParsedResponse, Prometheus, PrometheusRequest, QueryKind, ResultType, default_address_from_env,
    parse_query_response,
};
pub use web::{Web, WebBody, WebMethod, WebRequest};

/// What a provider measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderResult {
    pub value: MetricValue,
    /// Extra facts for the measurement or metric result, e.g. `warnings` (Prometheus' own, in Argo's
    /// `"w1", "w2"` form) and `ResolvedPrometheusQuery`.
    pub metadata: BTreeMap<String, String>,
}

/// Why a provider could not produce a value. Messages are in the user's terms and free of secrets.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The metric cannot be turned into a request (missing address, bad step, unsupported auth, ...).
    #[error("{0}")]
    Invalid(String),
    #[error("cannot connect to {target}: {reason}")]
    Connect { target: String, reason: String },
    #[error("no answer from {target} within {seconds} s (the metric's timeout)")]
    Timeout { target: String, seconds: u64 },
    #[error("request to {target} failed: {reason}")]
    Transport { target: String, reason: String },
    /// A non-2xx answer without a Prometheus error body.
    #[error("{target} answered HTTP {status}: {excerpt}")]
    Status {
        target: String,
        status: u16,
        excerpt: String,
    },
    /// Prometheus' own error (`"status":"error"`), with its `errorType` and message.
    #[error("Prometheus rejected the query ({error_type}): {message}")]
    Prometheus {
        http_status: Option<u16>,
        error_type: String,
        message: String,
    },
    /// A 2xx answer that is not what the API promises (bad JSON, unknown result type, a string result).
    #[error("{0}")]
    BadResponse(String),
    #[error("OAuth2 token request to {token_url} failed: {reason}")]
    Token {
        token_url: String,
        reason: String,
        transient: bool,
    },
    #[error("jsonPath {path}: {reason}")]
    JsonPath { path: String, reason: String },
}

impl ProviderError {
    /// Whether trying again later may succeed: network trouble, timeouts, 5xx, 429 and Prometheus' own
    /// timeout/unavailable answers. Bad queries, 4xx and malformed answers are not.
    pub fn is_transient(&self) -> bool {
        match self {
            ProviderError::Connect { .. }
            | ProviderError::Timeout { .. }
            | ProviderError::Transport { .. } => true,
            ProviderError::Status { status, .. } => transient_status(*status),
            ProviderError::Prometheus {
                http_status,
                error_type,
                ..
            } => {
                http_status.is_some_and(transient_status)
                    || matches!(error_type.as_str(), "timeout" | "canceled" | "unavailable")
            }
            ProviderError::Token { transient, .. } => *transient,
            ProviderError::Invalid(_)
            | ProviderError::BadResponse(_)
            | ProviderError::JsonPath { .. } => false,
        }
    }

    /// The same error with every occurrence of a secret value replaced by `*****`.
    pub(crate) fn scrub(self, secrets: &[Secret]) -> Self {
        let s = |text: String| crate::scrub::text(text, secrets);
        match self {
            ProviderError::Invalid(m) => ProviderError::Invalid(s(m)),
            ProviderError::Connect { target, reason } => ProviderError::Connect {
                target: s(target),
                reason: s(reason),
            },
            ProviderError::Timeout { target, seconds } => ProviderError::Timeout {
                target: s(target),
                seconds,
            },
            ProviderError::Transport { target, reason } => ProviderError::Transport {
                target: s(target),
                reason: s(reason),
            },
            ProviderError::Status {
                target,
                status,
                excerpt,
            } => ProviderError::Status {
                target: s(target),
                status,
                excerpt: s(excerpt),
            },
            ProviderError::Prometheus {
                http_status,
                error_type,
                message,
            } => ProviderError::Prometheus {
                http_status,
                error_type: s(error_type),
                message: s(message),
            },
            ProviderError::BadResponse(m) => ProviderError::BadResponse(s(m)),
            ProviderError::Token {
                token_url,
                reason,
                transient,
            } => ProviderError::Token {
                token_url: s(token_url),
                reason: s(reason),
                transient,
            },
            ProviderError::JsonPath { path, reason } => ProviderError::JsonPath {
                path: s(path),
                reason: s(reason),
            },
        }
    }
}

fn transient_status(status: u16) -> bool {
    status >= 500 || status == 429
}
