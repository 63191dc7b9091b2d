//! The functions a condition may call (`len`, `sum`, `mean`, ..., Argo's `asInt`, `asFloat`, `isNil`,
//! `default`) applied to evaluated arguments. Owns their argument rules and Go's number and text spellings;
//! operators and predicates are `eval.rs`'s. Must not panic on any value.

use evalexpr::Value;
use serde_json::Value as JsonValue;

use super::EvalError;
use super::clock::{go_duration_text, parse_duration, parse_time};
use super::expr::Func;
use super::val::{
    NIL, Val, array_item, array_len, describe, err, number, result_is_nil, result_val,
};
use crate::value::{MetricValue, render_number};

/// `string(x)`: numbers as Go prints them, nil as Go's `<nil>`, arrays and objects as JSON-like text.
pub(super) fn render(v: &Val<'_>) -> String {
    match v {
        Val::Scalar(Value::Float(n)) => render_number(*n),
        Val::Scalar(Value::String(s)) => s.clone(),
        Val::Scalar(Value::Boolean(b)) => b.to_string(),
        Val::Scalar(Value::Empty) => "<nil>".to_string(),
        Val::Scalar(other) => other.to_string(),
        Val::Numbers(ns) => MetricValue::Numbers(ns.to_vec()).render(),
        Val::Json(j) => j.to_string(),
        Val::List(l) => format!("[{}]", l.iter().map(render).collect::<Vec<_>>().join(",")),
        Val::Time(t) => t.to_string(),
        Val::Duration(d) => go_duration_text(*d),
    }
}

/// The numbers of an array argument (`sum`, `mean`, `min`, ...): every element must be a number.
fn numbers_of(v: &Val<'_>, name: &str, arg_text: &str) -> Result<Vec<f64>, EvalError> {
    if let Val::Numbers(ns) = v {
        return Ok(ns.to_vec());
    }
    let Some(len) = array_len(v) else {
        return err(format!(
            "{name}() needs an array of numbers, but {arg_text} is {}",
            describe(v)
        ));
    };
    (0..len)
        .map(|i| match array_item(v, i) {
            Some(Val::Scalar(Value::Float(n))) => Ok(n),
            Some(other) => err(format!(
                "{name}() needs an array of numbers, but element {i} of {arg_text} is {}",
                describe(&other)
            )),
            None => err(format!("{name}(): element {i} of {arg_text} is missing")),
        })
        .collect()
}

fn non_empty(ns: Vec<f64>, name: &str, arg_text: &str) -> Result<Vec<f64>, EvalError> {
    if ns.is_empty() {
        return err(format!(
            "{name}() of an empty array has no value — guard with len({arg_text}) > 0"
        ));
    }
    Ok(ns)
}

pub(super) fn call<'a>(
    func: Func,
    args: Vec<Val<'a>>,
    result: &'a MetricValue,
    arg_text: &str,
) -> Result<Val<'a>, EvalError> {
    let name = func.name();
    let mut args = args.into_iter();
    let Some(first) = args.next() else {
        return err(format!("{name}() needs an argument"));
    };
    let num = |n: f64| Ok(Val::Scalar(Value::Float(n)));
    match func {
        Func::Len => match &first {
            Val::Scalar(Value::String(s)) => num(s.chars().count() as f64),
            Val::Json(JsonValue::Object(m)) => num(m.len() as f64),
            v => match array_len(v) {
                Some(n) => num(n as f64),
                None => err(format!(
                    "len() needs an array, a string or an object, but {arg_text} is {}",
                    describe(v)
                )),
            },
        },
        Func::Sum => num(numbers_of(&first, name, arg_text)?.iter().sum()),
        Func::Mean => {
            let ns = non_empty(numbers_of(&first, name, arg_text)?, name, arg_text)?;
            num(ns.iter().sum::<f64>() / ns.len() as f64)
        }
        Func::Median => {
            let mut ns = non_empty(numbers_of(&first, name, arg_text)?, name, arg_text)?;
            ns.sort_by(f64::total_cmp);
            let mid = ns.len() / 2;
            let upper = ns.get(mid).copied().unwrap_or(f64::NAN);
            if ns.len() % 2 == 0 {
                let lower = ns.get(mid.wrapping_sub(1)).copied().unwrap_or(f64::NAN);
                num((lower + upper) / 2.0)
            } else {
                num(upper)
            }
        }
        Func::Min | Func::Max => {
            let mut ns = Vec::new();
            for v in std::iter::once(first).chain(args) {
                match number(&v) {
                    Some(n) => ns.push(n),
                    None => ns.extend(numbers_of(&v, name, arg_text)?),
                }
            }
            let ns = non_empty(ns, name, arg_text)?;
            let pick = |best: f64, n: f64| {
                let better = if func == Func::Min {
                    n < best
                } else {
                    n > best
                };
                if better { n } else { best }
            };
            let start = ns.first().copied().unwrap_or(f64::NAN);
            num(ns.into_iter().fold(start, pick))
        }
        Func::Int => match &first {
            Val::Scalar(Value::Float(n)) if n.is_finite() => num(n.trunc()),
            Val::Scalar(Value::String(s)) => match s.parse::<i64>() {
                Ok(n) => num(n as f64),
                Err(_) => err(format!("int(): {s:?} is not a whole number")),
            },
            v => err(format!(
                "int() needs a finite number or a string, but {arg_text} is {}",
                describe(v)
            )),
        },
        Func::Float | Func::AsFloat => match &first {
            Val::Scalar(Value::Float(n)) => num(*n),
            Val::Scalar(Value::String(s)) => match parse_go_float(s) {
                Some(n) => num(n),
                None => err(format!("{name}(): {s:?} is not a number")),
            },
            v => err(format!(
                "{name}() needs a number or a string, but {arg_text} is {}",
                describe(v)
            )),
        },
        Func::String => Ok(Val::Scalar(Value::String(render(&first)))),
        Func::AsInt => match &first {
            Val::Scalar(Value::Float(n)) if n.is_finite() => num(n.trunc()),
            Val::Scalar(Value::String(s)) => match s.parse::<i64>() {
                Ok(n) => num(n as f64),
                Err(_) => err(format!(
                    "asInt(): {s:?} is not a whole number — use asFloat() for decimals"
                )),
            },
            v => err(format!(
                "asInt() needs a finite number or a string, but {arg_text} is {}",
                describe(v)
            )),
        },
        // Argo's isNil and default look at `result` itself, whatever their first argument.
        Func::IsNil => Ok(Val::Scalar(Value::Boolean(result_is_nil(result)))),
        Func::ParseTime => parse_time(&first, arg_text),
        Func::Duration => parse_duration(&first, arg_text),
        Func::Default => {
            if result_is_nil(result) {
                Ok(args.next().unwrap_or(NIL))
            } else {
                Ok(result_val(result))
            }
        }
    }
}

/// Go's strconv.ParseFloat spellings: decimal and exponent forms, `NaN`, `Inf`, `+Inf`, `-Inf`, `Infinity`.
fn parse_go_float(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if ["nan", "inf", "infinity"].contains(&unsigned)
        || unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.')
    {
        s.parse::<f64>().ok()
    } else {
        None
    }
}
