//! The runtime value model of a condition: a [`Val`] (scalars are evalexpr values; arrays and JSON objects stay
//! borrowed from the measured value), the current element of a predicate, and the readers every part of the
//! evaluator shares (lengths, items, numbers, nil, a value named as a user would name it in a message).

use evalexpr::Value;
use serde_json::Value as JsonValue;

use super::EvalError;
use crate::value::{MetricValue, render_number};

/// A value during evaluation. Scalars are evalexpr values (`Float`, `String`, `Boolean`, `Empty` for nil);
/// numbers are all `f64`, as every value Argo sees from Prometheus or JSON is a Go float64.
#[derive(Debug, Clone)]
pub(super) enum Val<'a> {
    Scalar(Value),
    Numbers(&'a [f64]),
    /// A JSON array or object (JSON scalars become `Scalar`).
    Json(&'a JsonValue),
    /// An array built during evaluation (`filter`, `map`, `[1, 2]`).
    List(Vec<Val<'a>>),
    /// Go's `time.Time` (`time.Now()`, `time.Parse(...)`), in a notification trigger's `when`.
    Time(jiff::Timestamp),
    /// Go's `time.Duration` (`t.Sub(u)`, `duration("5m")`).
    Duration(jiff::SignedDuration),
}

/// What an evaluation reads: the value (`result`, or a trigger's variables as the fields of one object) and,
/// where the caller gives one, the instant `time.Now()` is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scope<'a> {
    pub result: &'a MetricValue,
    pub now: Option<jiff::Timestamp>,
}

/// The current element of a predicate, and whether expr-lang's checker fixes its type (an element of a
/// Prometheus vector is a float64; of a JSON array, `interface{}`).
#[derive(Debug, Clone)]
pub(super) struct Elem<'a> {
    pub val: Val<'a>,
    pub typed: bool,
}

pub(super) const NIL: Val<'static> = Val::Scalar(Value::Empty);

pub(super) fn err<T>(message: String) -> Result<T, EvalError> {
    Err(EvalError::new(message))
}

pub(super) fn from_json(j: &JsonValue) -> Val<'_> {
    match j {
        JsonValue::Null => NIL,
        JsonValue::Bool(b) => Val::Scalar(Value::Boolean(*b)),
        JsonValue::Number(n) => Val::Scalar(Value::Float(n.as_f64().unwrap_or(f64::NAN))),
        JsonValue::String(s) => Val::Scalar(Value::String(s.clone())),
        JsonValue::Array(_) | JsonValue::Object(_) => Val::Json(j),
    }
}

pub(super) fn result_val(result: &MetricValue) -> Val<'_> {
    match result {
        MetricValue::Nil => NIL,
        MetricValue::Number(n) => Val::Scalar(Value::Float(*n)),
        MetricValue::Numbers(ns) => Val::Numbers(ns),
        MetricValue::Json(j) => from_json(j),
    }
}

pub(super) fn result_is_nil(result: &MetricValue) -> bool {
    matches!(
        result,
        MetricValue::Nil | MetricValue::Json(JsonValue::Null)
    )
}

pub(super) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// A value as a user would name it in a message.
pub(super) fn describe(v: &Val<'_>) -> String {
    match v {
        Val::Scalar(Value::Float(n)) => format!("the number {}", render_number(*n)),
        Val::Scalar(Value::String(s)) => format!("the string {s:?}"),
        Val::Scalar(Value::Boolean(b)) => format!("the boolean {b}"),
        Val::Scalar(Value::Empty) => "nil (no value)".to_string(),
        Val::Scalar(other) => format!("the value {other}"),
        Val::Numbers(ns) => format!("an array of {}", plural(ns.len(), "number")),
        Val::Json(JsonValue::Array(a)) => format!("an array of {}", plural(a.len(), "value")),
        Val::List(l) => format!("an array of {}", plural(l.len(), "value")),
        Val::Json(JsonValue::Object(m)) => {
            let keys: Vec<&str> = m.keys().take(5).map(String::as_str).collect();
            let more = if m.len() > 5 { ", ..." } else { "" };
            format!("an object with fields {}{more}", keys.join(", "))
        }
        Val::Json(other) => format!("the JSON value {other}"),
        Val::Time(t) => format!("the time {t}"),
        Val::Duration(d) => format!("the duration {}", super::clock::go_duration_text(*d)),
    }
}

pub(super) fn array_len(v: &Val<'_>) -> Option<usize> {
    match v {
        Val::Numbers(ns) => Some(ns.len()),
        Val::Json(JsonValue::Array(a)) => Some(a.len()),
        Val::List(l) => Some(l.len()),
        _ => None,
    }
}

pub(super) fn array_item<'a>(v: &Val<'a>, i: usize) -> Option<Val<'a>> {
    match v {
        Val::Numbers(ns) => ns.get(i).map(|n| Val::Scalar(Value::Float(*n))),
        Val::Json(JsonValue::Array(a)) => a.get(i).map(from_json),
        Val::List(l) => l.get(i).cloned(),
        _ => None,
    }
}

pub(super) fn number(v: &Val<'_>) -> Option<f64> {
    match v {
        Val::Scalar(Value::Float(n)) => Some(*n),
        _ => None,
    }
}

pub(super) fn is_nil(v: &Val<'_>) -> bool {
    matches!(v, Val::Scalar(Value::Empty))
}
