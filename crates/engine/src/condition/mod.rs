//! Argo's condition language (expr-lang syntax): compiled once, evaluated for every measurement.
//! `parser.rs` turns text into a syntax tree, `lower.rs` checks names and lowers it onto `evalexpr` operator
//! nodes (with the array/JSON constructs evalexpr lacks kept as our own nodes), `eval.rs` runs the lowered form
//! against a [`MetricValue`], with `equality.rs` (`==`, `!=`, `in`), `functions.rs` (`len`, `asFloat`, ...), `predicates.rs`
//! (`all`, `map`, ...) and `values.rs` (indexing).
//! This module owns the public interface and Argo's measurement-phase truth table.
//! It must not do I/O or read the clock; errors are reported, never turned into a silent `false`.

mod clock;
mod equality;
mod eval;
mod expr;
mod functions;
mod lexer;
mod lower;
mod parser;
mod predicates;
pub mod thresholds;
mod val;
mod values;

use super::value::MetricValue;
use crate::api::AnalysisPhase;

/// A condition that failed to compile: the message names what and where (1-based column).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ConditionError {
    pub message: String,
}

impl ConditionError {
    fn new(message: String) -> Self {
        ConditionError { message }
    }
}

/// A condition that compiled but could not be evaluated against this value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct EvalError {
    pub message: String,
}

impl EvalError {
    fn new(message: String) -> Self {
        EvalError { message }
    }
}

/// A compiled condition, reused for every measurement.
#[derive(Debug, Clone)]
pub struct Condition {
    source: String,
    compiled: expr::Expr,
}

/// Two conditions are the same when their text is: the compiled form is a function of it.
impl PartialEq for Condition {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Condition {
    /// Parses and checks a condition: syntax errors and unknown names (only `result` is a variable; functions
    /// must exist and get the right number of arguments) are reported here, before any measurement.
    pub fn compile(source: &str) -> Result<Condition, ConditionError> {
        Condition::compile_with(source, lower::Names::Value("result"))
    }

    /// [`Condition::compile`] for a notification trigger's `when`, which reads several variables (Argo
    /// Rollouts' `InitGetVars`: `rollout`, `analysisRuns`), each a field of the object it is evaluated
    /// against ([`Condition::evaluate_at`]), and the clock: `time.Now()`, `time.Parse(text)`, expr-lang's
    /// `now()` and `duration(text)`, with the methods and operators of Go's times and durations. The same
    /// language and checks.
    pub fn compile_environment(source: &str, names: &[&str]) -> Result<Condition, ConditionError> {
        Condition::compile_with(source, lower::Names::Environment(names))
    }

    fn compile_with(source: &str, names: lower::Names<'_>) -> Result<Condition, ConditionError> {
        let ast = parser::parse(source)?;
        let compiled = lower::lower(source, &ast, names)?;
        Ok(Condition {
            source: source.to_string(),
            compiled,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates against one measured value; anything but `true`/`false` is an error.
    pub fn evaluate(&self, result: &MetricValue) -> Result<bool, EvalError> {
        let scope = val::Scope { result, now: None };
        eval::evaluate_condition(&self.compiled, scope)
    }

    /// Evaluates a [`Condition::compile_environment`] condition against its variables (the fields of
    /// `variables`) with `time.Now()` at `now`.
    pub fn evaluate_at(
        &self,
        variables: &MetricValue,
        now: jiff::Timestamp,
    ) -> Result<bool, EvalError> {
        let scope = val::Scope {
            result: variables,
            now: Some(now),
        };
        eval::evaluate_condition(&self.compiled, scope)
    }
}

/// Argo's measurement phase truth table; any evaluation error -> Err (the caller records phase Error with the
/// message).
pub fn measurement_phase(
    success: Option<&Condition>,
    failure: Option<&Condition>,
    result: &MetricValue,
) -> Result<AnalysisPhase, EvalError> {
    // Both conditions are evaluated first so an error in either is reported even when the other decides.
    let success = success.map(|c| c.evaluate(result)).transpose()?;
    let failure = failure.map(|c| c.evaluate(result)).transpose()?;
    Ok(match (success, failure) {
        (_, Some(true)) => AnalysisPhase::Failed,
        (Some(true), _) => AnalysisPhase::Successful,
        (Some(false), Some(false)) => AnalysisPhase::Inconclusive,
        (Some(false), None) => AnalysisPhase::Failed,
        (None, Some(false)) | (None, None) => AnalysisPhase::Successful,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(s: &str) -> Condition {
        match Condition::compile(s) {
            Ok(c) => c,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    #[test]
    fn phase_follows_argos_truth_table() {
        let (t, f) = (cond("true"), cond("false"));
        let v = MetricValue::Nil;
        let phase = |s: Option<&Condition>, fl: Option<&Condition>| measurement_phase(s, fl, &v);
        assert_eq!(phase(Some(&t), Some(&t)), Ok(AnalysisPhase::Failed));
        assert_eq!(phase(Some(&f), Some(&t)), Ok(AnalysisPhase::Failed));
        assert_eq!(phase(Some(&t), Some(&f)), Ok(AnalysisPhase::Successful));
        assert_eq!(phase(Some(&f), Some(&f)), Ok(AnalysisPhase::Inconclusive));
        assert_eq!(phase(Some(&t), None), Ok(AnalysisPhase::Successful));
        assert_eq!(phase(Some(&f), None), Ok(AnalysisPhase::Failed));
        assert_eq!(phase(None, Some(&t)), Ok(AnalysisPhase::Failed));
        assert_eq!(phase(None, Some(&f)), Ok(AnalysisPhase::Successful));
        assert_eq!(phase(None, None), Ok(AnalysisPhase::Successful));
    }

    #[test]
    fn an_error_in_either_condition_makes_the_phase_an_error() {
        let broken = cond("result[0] > 1");
        let t = cond("true");
        let v = MetricValue::Numbers(vec![]);
        assert!(measurement_phase(Some(&t), Some(&broken), &v).is_err());
        assert!(measurement_phase(Some(&broken), Some(&t), &v).is_err());
    }

    #[test]
    fn compiled_conditions_can_be_shared_between_threads() {
        fn assert_send_sync<T: Send + Sync + Clone + std::fmt::Debug>() {}
        assert_send_sync::<Condition>();
    }
}
