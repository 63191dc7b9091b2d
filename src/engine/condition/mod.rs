//! Argo's condition language (expr-lang syntax): parsed here, evaluated with `evalexpr`.
//! PLACEHOLDER: the condition-engine issue replaces this file with the real parser and evaluator; until then
//! `compile` accepts any non-empty text so `validate` can be wired against the final interface.

use super::value::MetricValue;

/// A condition that failed to compile: the message names what and where (1-based column).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ConditionError {
    pub message: String,
}

/// A condition that compiled but could not be evaluated against this value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct EvalError {
    pub message: String,
}

/// A compiled condition, reused for every measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    source: String,
}

impl Condition {
    pub fn compile(source: &str) -> Result<Condition, ConditionError> {
        if source.trim().is_empty() {
            return Err(ConditionError {
                message: "empty condition".to_string(),
            });
        }
        Ok(Condition {
            source: source.to_string(),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn evaluate(&self, _result: &MetricValue) -> Result<bool, EvalError> {
        Err(EvalError {
            message: "condition evaluation is not implemented yet".to_string(),
        })
    }
}
