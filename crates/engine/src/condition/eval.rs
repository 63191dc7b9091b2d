//! Runs a compiled condition against one measured value. Owns the runtime value model (scalars are evalexpr
//! values; arrays and JSON objects stay borrowed from the measured value), the type rules Argo's expr-lang
//! applies, and error messages in the user's terms. Operators go through the evalexpr nodes `lower.rs` built;
//! what evalexpr cannot express (indexing, JSON members, predicates over arrays, short-circuiting) is resolved
//! here against the value. Must not panic on any value: every shape of JSON is an ordinary input.

use evalexpr::{
    Context, DefaultNumericTypes, EvalexprError, EvalexprResult, Value, error::EvalexprResultValue,
};
use serde_json::Value as JsonValue;

use super::EvalError;
use super::clock;
use super::equality::{self, Operand};
use super::expr::{Expr, NativeKind, NativeOp, TextOp};
use super::functions::call;
use super::predicates::predicate;
use super::val::{
    Elem, NIL, Scope, Val, array_len, describe, err, from_json, is_nil, number, result_val,
};
use super::values::index_into;
use crate::value::MetricValue;

/// Evaluates a whole condition, which must give a boolean.
pub(super) fn evaluate_condition(expr: &Expr, scope: Scope<'_>) -> Result<bool, EvalError> {
    match eval(expr, scope, None)? {
        Val::Scalar(Value::Boolean(b)) => Ok(b),
        other => {
            let hint = if matches!(expr, Expr::Result) {
                " — compare it, e.g. `result >= 0.95`"
            } else {
                ""
            };
            err(format!(
                "the condition must give true or false, but it gives {}{hint}",
                describe(&other)
            ))
        }
    }
}

/// Computes a subtree that does not depend on the measured value, once at compile time.
pub(super) fn fold_constant(expr: &Expr) -> Option<Value> {
    let scope = Scope {
        result: &MetricValue::Nil,
        now: None,
    };
    match eval(expr, scope, None) {
        Ok(Val::Scalar(v)) => Some(v),
        _ => None,
    }
}

/// The operands of one native operation, as evalexpr reads them: `a` and `b`.
struct Operands<'v> {
    a: &'v Value,
    b: Option<&'v Value>,
}

impl Context for Operands<'_> {
    type NumericTypes = DefaultNumericTypes;

    fn get_value(&self, identifier: &str) -> Option<&Value> {
        match identifier {
            "a" => Some(self.a),
            "b" => self.b,
            _ => None,
        }
    }

    fn call_function(&self, identifier: &str, _: &Value) -> EvalexprResultValue {
        // Only evalexpr's builtins (floor, round, math::abs, ...) are called.
        Err(EvalexprError::FunctionIdentifierNotFound(
            identifier.to_string(),
        ))
    }

    fn are_builtin_functions_disabled(&self) -> bool {
        false
    }

    fn set_builtin_functions_disabled(
        &mut self,
        _: bool,
    ) -> EvalexprResult<(), DefaultNumericTypes> {
        Err(EvalexprError::ContextNotMutable)
    }
}

pub(super) fn eval<'a>(
    expr: &Expr,
    scope: Scope<'a>,
    elem: Option<&Elem<'a>>,
) -> Result<Val<'a>, EvalError> {
    let result = scope.result;
    let ev = |e: &Expr| eval(e, scope, elem);
    match expr {
        Expr::Const(v) => Ok(Val::Scalar(v.clone())),
        Expr::Result => Ok(result_val(result)),
        Expr::Elem => match elem {
            Some(e) => Ok(e.val.clone()),
            None => err("`#` used outside a predicate".to_string()),
        },
        Expr::Array(items) => Ok(Val::List(items.iter().map(ev).collect::<Result<_, _>>()?)),
        Expr::Native {
            op,
            args,
            text,
            arg_texts,
        } => {
            // At most two operands, kept on the stack: this runs once per element inside predicates.
            let Some(a_expr) = args.first() else {
                return err(format!("`{text}` is missing an operand"));
            };
            let a = ev(a_expr)?;
            let b = args.get(1).map(ev).transpose()?;
            if let Some(temporal) = clock::operator(op.kind, &a, b.as_ref(), text)? {
                return Ok(temporal);
            }
            if let (NativeKind::Eq | NativeKind::Ne, Some(b), Some(b_expr)) =
                (op.kind, &b, args.get(1))
            {
                let (l, r) = (
                    Operand {
                        val: &a,
                        expr: a_expr,
                    },
                    Operand {
                        val: b,
                        expr: b_expr,
                    },
                );
                if let Some(decided) = equality::decide(op.kind, l, r, result, elem, text)? {
                    return Ok(decided);
                }
            }
            native(op, &a, b.as_ref(), text, arg_texts)
        }
        Expr::Member {
            base,
            key,
            optional,
            base_text,
            text,
        } => match ev(base)? {
            Val::Json(JsonValue::Object(m)) => Ok(m.get(key.as_ref()).map_or(NIL, from_json)),
            v if is_nil(&v) && *optional => Ok(NIL),
            v if is_nil(&v) => err(format!(
                "{base_text} is nil (no value), so `{text}` does not exist — write {base_text}?.{key} to allow nil, \
                 or guard with {base_text} != nil"
            )),
            v => err(format!(
                "{base_text} is {}, which has no field `{key}`",
                describe(&v)
            )),
        },
        Expr::Index {
            base,
            index,
            base_text,
            text,
        } => {
            let b = ev(base)?;
            let i = ev(index)?;
            index_into(b, &i, base_text, text)
        }
        Expr::Logic {
            and,
            lhs,
            rhs,
            text,
        } => {
            let op = if *and { "&&" } else { "||" };
            let l = boolean(ev(lhs)?, op, text)?;
            if l != *and {
                return Ok(Val::Scalar(Value::Boolean(l)));
            }
            Ok(Val::Scalar(Value::Boolean(boolean(ev(rhs)?, op, text)?)))
        }
        Expr::Cond {
            cond,
            then,
            otherwise,
            text,
        } => {
            if boolean(ev(cond)?, "?:", text)? {
                ev(then)
            } else {
                ev(otherwise)
            }
        }
        Expr::Coalesce(lhs, rhs) => {
            let l = ev(lhs)?;
            if is_nil(&l) { ev(rhs) } else { Ok(l) }
        }
        Expr::Text { op, lhs, rhs, text } => {
            let (l, r) = (ev(lhs)?, ev(rhs)?);
            text_op(op, &l, &r, text)
        }
        Expr::In { lhs, rhs, text } => {
            let (l, r) = (ev(lhs)?, ev(rhs)?);
            let (l, r) = (
                Operand { val: &l, expr: lhs },
                Operand { val: &r, expr: rhs },
            );
            equality::membership(l, r, result, elem, text)
        }
        Expr::Predicate {
            kind,
            over,
            body,
            over_text,
            body_text,
        } => {
            let over_val = ev(over)?;
            // Only a vector fixed by `result`'s type has elements of a fixed type (float64).
            let typed = matches!(over_val, Val::Numbers(_)) && equality::typed(over, result, elem);
            predicate(
                *kind,
                &over_val,
                typed,
                body,
                over_text,
                body_text,
                |body, elem| eval(body, scope, elem),
            )
        }
        Expr::Call {
            func,
            args,
            arg_text,
        } => {
            let values = args.iter().map(ev).collect::<Result<Vec<_>, _>>()?;
            call(*func, values, result, arg_text)
        }
        Expr::Now => match scope.now {
            Some(now) => Ok(Val::Time(now)),
            None => err("time.Now() has no clock here".to_string()),
        },
        Expr::Method {
            base,
            method,
            args,
            text,
        } => {
            let base = ev(base)?;
            let args = args.iter().map(ev).collect::<Result<Vec<_>, _>>()?;
            clock::call_method(*method, &base, &args, text)
        }
    }
}

fn boolean(v: Val<'_>, op: &str, text: &str) -> Result<bool, EvalError> {
    match v {
        Val::Scalar(Value::Boolean(b)) => Ok(b),
        other => err(format!(
            "`{op}` needs true or false, but in `{text}` it got {}",
            describe(&other)
        )),
    }
}

fn native<'a>(
    op: &NativeOp,
    a: &Val<'a>,
    b: Option<&Val<'a>>,
    text: &str,
    arg_texts: &[Box<str>],
) -> Result<Val<'a>, EvalError> {
    if let (Val::Scalar(Value::Float(x)), Some(Val::Scalar(Value::Float(y)))) = (a, b)
        && let Some(v) = op.kind.on_floats(*x, *y)
    {
        return Ok(Val::Scalar(v));
    }
    match b {
        Some(r) => check_binary(op.kind, a, r, text, arg_texts)?,
        None => check_unary(op.kind, a, arg_texts)?,
    }
    let (Val::Scalar(a), b) = (a, b) else {
        return err(format!("`{text}` cannot be computed"));
    };
    let b = match b {
        Some(Val::Scalar(v)) => Some(v),
        Some(_) => return err(format!("`{text}` cannot be computed")),
        None => None,
    };
    op.node
        .eval_with_context(&Operands { a, b })
        .map(Val::Scalar)
        .map_err(|e| EvalError::new(format!("`{text}` cannot be computed: {e}")))
}

/// Whether the operator `kind` takes the two operands `l` and `r`: two scalars of one kind for `==` and
/// `!=`, two numbers or two strings for `+` and the comparisons, numbers for the arithmetic (whole ones and
/// a divisor other than zero for `%`); an operator of one operand has too many.
fn check_binary(
    kind: NativeKind,
    l: &Val<'_>,
    r: &Val<'_>,
    text: &str,
    arg_texts: &[Box<str>],
) -> Result<(), EvalError> {
    let a_text = arg_texts.first().map_or("", |t| t.as_ref());
    let b_text = arg_texts.get(1).map_or("", |t| t.as_ref());
    let sym = kind.symbol();
    match kind {
        // Two scalars of one kind: `equality::decide` took every other pair.
        NativeKind::Eq | NativeKind::Ne => Ok(()),
        NativeKind::Add | NativeKind::Lt | NativeKind::Le | NativeKind::Gt | NativeKind::Ge
            if matches!(
                (l, r),
                (Val::Scalar(Value::Float(_)), Val::Scalar(Value::Float(_)))
                    | (Val::Scalar(Value::String(_)), Val::Scalar(Value::String(_)))
            ) =>
        {
            Ok(())
        }
        NativeKind::Add
        | NativeKind::Sub
        | NativeKind::Mul
        | NativeKind::Div
        | NativeKind::Mod
        | NativeKind::Pow
        | NativeKind::Lt
        | NativeKind::Le
        | NativeKind::Gt
        | NativeKind::Ge => match (number(l), number(r)) {
            (Some(x), Some(y)) if kind == NativeKind::Mod => {
                if x.fract() != 0.0 || y.fract() != 0.0 || !x.is_finite() || !y.is_finite() {
                    return err(format!(
                        "`%` needs whole numbers, but `{text}` has {} and {}",
                        describe(l),
                        describe(r)
                    ));
                }
                if y == 0.0 {
                    return err(format!("`{text}` divides by zero"));
                }
                Ok(())
            }
            (Some(_), Some(_)) => Ok(()),
            _ => err(operand_error(sym, l, r, text, a_text, b_text)),
        },
        _ => err(format!("`{text}` has too many operands")),
    }
}

/// Whether the operator `kind` takes the one operand `a`: true or false for `!`/`not`, a number for the
/// others (unary `-` and the functions evalexpr computes).
fn check_unary(kind: NativeKind, a: &Val<'_>, arg_texts: &[Box<str>]) -> Result<(), EvalError> {
    let a_text = arg_texts.first().map_or("", |t| t.as_ref());
    let sym = kind.symbol();
    match (kind, a) {
        (NativeKind::Not, Val::Scalar(Value::Boolean(_))) => Ok(()),
        (NativeKind::Not, v) => err(format!(
            "`!`/`not` needs true or false, but {a_text} is {}",
            describe(v)
        )),
        (_, Val::Scalar(Value::Float(_))) => Ok(()),
        (_, v) => {
            let hint = if array_len(v).is_some() {
                format!(
                    " — pick one element, e.g. {sym}({a_text}[0]), or check every one with all({a_text}, {sym}(#))"
                )
            } else {
                String::new()
            };
            let what = if kind == NativeKind::Neg {
                "unary `-`".to_string()
            } else {
                format!("{sym}()")
            };
            err(format!(
                "{what} needs a number, but {a_text} is {}{hint}",
                describe(v)
            ))
        }
    }
}

fn operand_error(
    sym: &str,
    l: &Val<'_>,
    r: &Val<'_>,
    text: &str,
    a_text: &str,
    b_text: &str,
) -> String {
    let verb = match sym {
        "+" | "-" | "*" | "/" | "%" | "**" => "compute",
        _ => "compare",
    };
    let hint = if array_len(l).is_some() {
        format!(
            " — {verb} one element ({a_text}[0] {sym} {b_text}) or check every element (all({a_text}, # {sym} {b_text}))"
        )
    } else if array_len(r).is_some() {
        format!(
            " — {verb} one element ({a_text} {sym} {b_text}[0]) or check every element (all({b_text}, {a_text} {sym} #))"
        )
    } else if is_nil(l) || is_nil(r) {
        " — there is no value; guard with isNil(result) or use default(result, 0)".to_string()
    } else {
        String::new()
    };
    format!(
        "cannot {verb} `{text}`: {a_text} is {} and {b_text} is {}{hint}",
        describe(l),
        describe(r)
    )
}

fn strings<'v>(l: &'v Val<'_>, r: &'v Val<'_>) -> Option<(&'v str, &'v str)> {
    match (l, r) {
        (Val::Scalar(Value::String(a)), Val::Scalar(Value::String(b))) => Some((a, b)),
        _ => None,
    }
}

fn text_op<'a>(op: &TextOp, l: &Val<'_>, r: &Val<'_>, text: &str) -> Result<Val<'a>, EvalError> {
    let Some((s, t)) = strings(l, r) else {
        return err(format!(
            "`{}` works on strings, but `{text}` has {} and {}",
            op.symbol(),
            describe(l),
            describe(r)
        ));
    };
    let hit = match op {
        TextOp::Matches(Some(re)) => re.is_match(s),
        TextOp::Matches(None) => regex::Regex::new(t)
            .map_err(|e| EvalError::new(format!("`{text}`: invalid regular expression: {e}")))?
            .is_match(s),
        TextOp::Contains => s.contains(t),
        TextOp::StartsWith => s.starts_with(t),
        TextOp::EndsWith => s.ends_with(t),
    };
    Ok(Val::Scalar(Value::Boolean(hit)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::expr::NativeKind;

    #[test]
    fn the_float_fast_path_agrees_with_evalexpr_on_every_special_value() {
        let values = [
            0.0,
            -0.0,
            1.0,
            -1.5,
            0.95,
            1e308,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        let kinds = [
            NativeKind::Lt,
            NativeKind::Le,
            NativeKind::Gt,
            NativeKind::Ge,
            NativeKind::Eq,
            NativeKind::Ne,
            NativeKind::Add,
            NativeKind::Sub,
            NativeKind::Mul,
            NativeKind::Div,
        ];
        for kind in kinds {
            let Ok(op) = kind.build() else {
                panic!("{kind:?} does not build");
            };
            for x in values {
                for y in values {
                    let (a, b) = (Value::Float(x), Value::Float(y));
                    let slow = op.node.eval_with_context(&Operands { a: &a, b: Some(&b) });
                    let fast = kind.on_floats(x, y);
                    let same = match (&slow, &fast) {
                        (Ok(Value::Float(s)), Some(Value::Float(f))) => {
                            s.to_bits() == f.to_bits() || (s.is_nan() && f.is_nan())
                        }
                        (Ok(s), Some(f)) => s == f,
                        _ => false,
                    };
                    assert!(
                        same,
                        "{kind:?} {x} {y}: evalexpr {slow:?}, fast path {fast:?}"
                    );
                }
            }
        }
    }
}
