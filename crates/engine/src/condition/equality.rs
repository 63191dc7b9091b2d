//! expr-lang's `==`, `!=` and `in`: when values of different kinds are an error and when they are simply not
//! equal, and how arrays and objects compare. expr-lang type-checks a condition against the Go type of
//! `result` before running it: where both sides' types are fixed then (`result == 10` with a vector), a kind
//! mismatch is an error; where a side's type is only known when the condition runs (`default(...)`, a JSON
//! member, `??`), values of different kinds are not equal. Nil compares with anything. Ordering operators are
//! not this module's. Must not panic on any value.

use evalexpr::Value;
use serde_json::Value as JsonValue;

use super::EvalError;
use super::expr::{Expr, Func, NativeKind};
use super::val::{Elem, Val, array_item, array_len, describe, err, is_nil, number};
use crate::value::MetricValue;

/// One operand: its value and the expression that gave it.
pub(super) struct Operand<'v, 'a> {
    pub val: &'v Val<'a>,
    pub expr: &'v Expr,
}

/// `==` / `!=` when the operands are not two scalars of the same kind (those go to the evalexpr node): `None`
/// leaves them to it.
pub(super) fn decide<'a>(
    kind: NativeKind,
    l: Operand<'_, 'a>,
    r: Operand<'_, 'a>,
    result: &MetricValue,
    elem: Option<&Elem<'_>>,
    text: &str,
) -> Result<Option<Val<'a>>, EvalError> {
    if same_scalar_kind(l.val, r.val) {
        return Ok(None);
    }
    let comparable = is_nil(l.val)
        || is_nil(r.val)
        || (array_len(l.val).is_some() && array_len(r.val).is_some())
        || matches!(
            (l.val, r.val),
            (
                Val::Json(JsonValue::Object(_)),
                Val::Json(JsonValue::Object(_))
            )
        );
    if !comparable && typed(l.expr, result, elem) && typed(r.expr, result, elem) {
        let hint = if array_len(l.val).is_some() || array_len(r.val).is_some() {
            " — compare elements, e.g. result[0] == 1, or use all(...)/any(...)"
        } else {
            " — convert one side with float(), string() or asFloat()"
        };
        return err(format!(
            "cannot compare {} with {} in `{text}`{hint}",
            describe(l.val),
            describe(r.val)
        ));
    }
    let equal = go_equal(l.val, r.val);
    Ok(Some(Val::Scalar(Value::Boolean(
        equal != (kind == NativeKind::Ne),
    ))))
}

fn same_scalar_kind(l: &Val<'_>, r: &Val<'_>) -> bool {
    matches!(
        (l, r),
        (Val::Scalar(Value::Float(_)), Val::Scalar(Value::Float(_)))
            | (Val::Scalar(Value::String(_)), Val::Scalar(Value::String(_)))
            | (
                Val::Scalar(Value::Boolean(_)),
                Val::Scalar(Value::Boolean(_))
            )
    )
}

/// `x in array` / `key in object`.
pub(super) fn membership<'a>(
    l: Operand<'_, '_>,
    r: Operand<'_, '_>,
    result: &MetricValue,
    elem: Option<&Elem<'_>>,
    text: &str,
) -> Result<Val<'a>, EvalError> {
    let found = if let Some(len) = array_len(r.val) {
        // A vector's elements are float64 when the condition is checked: only a number or nil of a fixed type
        // may be looked for in it. Elsewhere an element of another kind is simply not a match.
        let refused = matches!(r.val, Val::Numbers(_))
            && number(l.val).is_none()
            && !is_nil(l.val)
            && typed(l.expr, result, elem)
            && typed(r.expr, result, elem);
        if refused {
            return err(format!(
                "cannot look for {} in `{text}`: {} holds only numbers",
                describe(l.val),
                describe(r.val)
            ));
        }
        (0..len).any(|i| array_item(r.val, i).is_some_and(|item| go_equal(&item, l.val)))
    } else if let (Val::Json(JsonValue::Object(m)), Val::Scalar(Value::String(k))) = (r.val, l.val)
    {
        m.contains_key(k)
    } else if is_nil(r.val) && !typed(r.expr, result, elem) {
        // A missing JSON member holds nothing.
        false
    } else {
        return err(format!(
            "`in` needs an array (or an object and a key) on its right, but `{text}` has {} there",
            describe(r.val)
        ));
    };
    Ok(Val::Scalar(Value::Boolean(found)))
}

/// expr-lang's runtime equality: numbers by value, arrays element by element, objects deeply, nil only
/// with nil, and values of different kinds not equal.
fn go_equal(l: &Val<'_>, r: &Val<'_>) -> bool {
    match (l, r) {
        (Val::Scalar(Value::Float(a)), Val::Scalar(Value::Float(b))) => a == b,
        (Val::Scalar(Value::String(a)), Val::Scalar(Value::String(b))) => a == b,
        (Val::Scalar(Value::Boolean(a)), Val::Scalar(Value::Boolean(b))) => a == b,
        (Val::Json(a @ JsonValue::Object(_)), Val::Json(b @ JsonValue::Object(_))) => {
            json_equal(a, b)
        }
        _ if is_nil(l) || is_nil(r) => is_nil(l) && is_nil(r),
        _ => match (array_len(l), array_len(r)) {
            (Some(n), Some(m)) => {
                n == m
                    && (0..n).all(|i| match (array_item(l, i), array_item(r, i)) {
                        (Some(a), Some(b)) => go_equal(&a, &b),
                        _ => false,
                    })
            }
            _ => false,
        },
    }
}

/// Go's reflect.DeepEqual on decoded JSON (every number a float64).
fn json_equal(a: &JsonValue, b: &JsonValue) -> bool {
    match (a, b) {
        (JsonValue::Number(x), JsonValue::Number(y)) => x.as_f64() == y.as_f64(),
        (JsonValue::Array(x), JsonValue::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (JsonValue::Object(x), JsonValue::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Whether expr-lang's checker, knowing only `result`'s Go type, fixes the type of `expr` (rather than
/// `interface{}`). Where canaryd cannot tell, it answers "not fixed", which compares instead of refusing.
pub(super) fn typed(expr: &Expr, result: &MetricValue, elem: Option<&Elem<'_>>) -> bool {
    let typed = |e: &Expr| typed(e, result, elem);
    match expr {
        Expr::Const(_) | Expr::Result | Expr::Array(_) => true,
        Expr::Elem => elem.is_some_and(|e| e.typed),
        Expr::Native { op, args, .. } => match op.kind {
            // Arithmetic on a value of unknown type has an unknown type; `/`, `**`, comparisons and the
            // rounding functions always give a float64 or a bool.
            NativeKind::Add
            | NativeKind::Sub
            | NativeKind::Mul
            | NativeKind::Neg
            | NativeKind::Abs => args.iter().all(typed),
            _ => true,
        },
        // A JSON object's members are `interface{}`; an element of a vector is a float64, of a JSON array
        // `interface{}`; a character of a string is a string.
        Expr::Member { .. } => false,
        Expr::Index { base, .. } => {
            matches!(base.as_ref(), Expr::Result)
                && matches!(
                    result,
                    MetricValue::Numbers(_) | MetricValue::Json(JsonValue::String(_))
                )
        }
        Expr::Logic { .. } | Expr::Text { .. } | Expr::In { .. } | Expr::Predicate { .. } => true,
        Expr::Cond {
            then, otherwise, ..
        } => typed(then) && typed(otherwise),
        // `a ?? b` keeps a fixed type only when `b`'s fits `a`'s, which for `result ?? 0` it does not (a
        // literal 0 is an int).
        Expr::Coalesce(..) => false,
        Expr::Call { func, args, .. } => match func {
            Func::Default | Func::Mean | Func::Median | Func::Min | Func::Max => false,
            Func::Sum => matches!(
                (args.first(), result),
                (Some(Expr::Result), MetricValue::Numbers(_))
            ),
            Func::Len
            | Func::Int
            | Func::Float
            | Func::String
            | Func::AsInt
            | Func::AsFloat
            | Func::IsNil
            | Func::ParseTime
            | Func::Duration => true,
        },
        Expr::Now | Expr::Method { .. } => true,
    }
}
