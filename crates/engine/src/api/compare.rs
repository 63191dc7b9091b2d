//! Wire types for canaryd's own provider `plugin: {"canaryd/compare": {...}}`: canary against baseline,
//! either by error rate (four cumulative-count queries) or by distribution (two range queries). It lives
//! under `plugin` so a template stays valid where Argo's CRDs are installed. Shapes only: the statistics are
//! `engine/judge`'s, the queries `providers/`'.

use serde::{Deserialize, Serialize};

/// The plugin's key under `provider.plugin`.
pub const COMPARE_PLUGIN: &str = "canaryd/compare";

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CompareSpec {
    /// Prometheus address, as for the prometheus provider (the same defaults apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Seconds, as for the prometheus provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<ErrorRateCompare>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<DistributionCompare>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CountQueries {
    /// Errors since the analysis started, e.g. `sum(increase(...{code=~"5.."}[{{window}}]))`.
    #[serde(default)]
    pub errors: String,
    /// Requests since the analysis started.
    #[serde(default)]
    pub requests: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ErrorRateCompare {
    #[serde(default)]
    pub canary: CountQueries,
    #[serde(default)]
    pub baseline: CountQueries,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_relative_increase: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_absolute_increase: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_requests: Option<u64>,
    /// `focused` (default) or `wide`: which regressions the `fail` test is fastest on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixture: Option<crate::judge::Mixture>,
    /// `planned` (default) or `sequential`: whether `fail` spends part of its α on a planned look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<crate::judge::Design>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DistributionCompare {
    /// Evaluated as a range query over the window: one sample per step.
    #[serde(default)]
    pub canary: String,
    #[serde(default)]
    pub baseline: String,
    /// A Go duration; default 30s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// `increase` (default), `decrease` or `either`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_relative_shift: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_samples: Option<usize>,
}
