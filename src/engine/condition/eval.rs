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
use super::lower::{Expr, Func, NativeKind, NativeOp, PredicateKind, TextOp};
use crate::engine::value::{MetricValue, render_number};

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
}

const NIL: Val<'static> = Val::Scalar(Value::Empty);

fn err<T>(message: String) -> Result<T, EvalError> {
    Err(EvalError::new(message))
}

/// Evaluates a whole condition, which must give a boolean.
pub(super) fn evaluate_condition(expr: &Expr, result: &MetricValue) -> Result<bool, EvalError> {
    match eval(expr, result, None)? {
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
    match eval(expr, &MetricValue::Nil, None) {
        Ok(Val::Scalar(v)) => Some(v),
        _ => None,
    }
}

fn from_json(j: &JsonValue) -> Val<'_> {
    match j {
        JsonValue::Null => NIL,
        JsonValue::Bool(b) => Val::Scalar(Value::Boolean(*b)),
        JsonValue::Number(n) => Val::Scalar(Value::Float(n.as_f64().unwrap_or(f64::NAN))),
        JsonValue::String(s) => Val::Scalar(Value::String(s.clone())),
        JsonValue::Array(_) | JsonValue::Object(_) => Val::Json(j),
    }
}

fn result_val(result: &MetricValue) -> Val<'_> {
    match result {
        MetricValue::Nil => NIL,
        MetricValue::Number(n) => Val::Scalar(Value::Float(*n)),
        MetricValue::Numbers(ns) => Val::Numbers(ns),
        MetricValue::Json(j) => from_json(j),
    }
}

fn result_is_nil(result: &MetricValue) -> bool {
    matches!(
        result,
        MetricValue::Nil | MetricValue::Json(JsonValue::Null)
    )
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// A value as a user would name it in a message.
fn describe(v: &Val<'_>) -> String {
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
    }
}

/// `string(x)`: numbers as Go prints them, nil as Go's `<nil>`, arrays and objects as JSON-like text.
fn render(v: &Val<'_>) -> String {
    match v {
        Val::Scalar(Value::Float(n)) => render_number(*n),
        Val::Scalar(Value::String(s)) => s.clone(),
        Val::Scalar(Value::Boolean(b)) => b.to_string(),
        Val::Scalar(Value::Empty) => "<nil>".to_string(),
        Val::Scalar(other) => other.to_string(),
        Val::Numbers(ns) => MetricValue::Numbers(ns.to_vec()).render(),
        Val::Json(j) => j.to_string(),
        Val::List(l) => format!("[{}]", l.iter().map(render).collect::<Vec<_>>().join(",")),
    }
}

fn array_len(v: &Val<'_>) -> Option<usize> {
    match v {
        Val::Numbers(ns) => Some(ns.len()),
        Val::Json(JsonValue::Array(a)) => Some(a.len()),
        Val::List(l) => Some(l.len()),
        _ => None,
    }
}

fn array_item<'a>(v: &Val<'a>, i: usize) -> Option<Val<'a>> {
    match v {
        Val::Numbers(ns) => ns.get(i).map(|n| Val::Scalar(Value::Float(*n))),
        Val::Json(JsonValue::Array(a)) => a.get(i).map(from_json),
        Val::List(l) => l.get(i).cloned(),
        _ => None,
    }
}

fn number(v: &Val<'_>) -> Option<f64> {
    match v {
        Val::Scalar(Value::Float(n)) => Some(*n),
        _ => None,
    }
}

fn is_nil(v: &Val<'_>) -> bool {
    matches!(v, Val::Scalar(Value::Empty))
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

fn eval<'a>(
    expr: &Expr,
    result: &'a MetricValue,
    elem: Option<&Val<'a>>,
) -> Result<Val<'a>, EvalError> {
    let ev = |e: &Expr| eval(e, result, elem);
    match expr {
        Expr::Const(v) => Ok(Val::Scalar(v.clone())),
        Expr::Result => Ok(result_val(result)),
        Expr::Elem => match elem {
            Some(v) => Ok(v.clone()),
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
            let Some(a) = args.first() else {
                return err(format!("`{text}` is missing an operand"));
            };
            let a = ev(a)?;
            let b = args.get(1).map(ev).transpose()?;
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
            membership(&l, &r, text)
        }
        Expr::Predicate {
            kind,
            over,
            body,
            over_text,
            body_text,
        } => {
            let over = ev(over)?;
            predicate(*kind, &over, body, result, over_text, body_text)
        }
        Expr::Call {
            func,
            args,
            arg_text,
        } => {
            let values = args.iter().map(ev).collect::<Result<Vec<_>, _>>()?;
            call(*func, values, result, arg_text)
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
        && let Some(v) = float_fast_path(op.kind, *x, *y)
    {
        return Ok(Val::Scalar(v));
    }
    let a_text = arg_texts.first().map_or("", |t| t.as_ref());
    let b_text = arg_texts.get(1).map_or("", |t| t.as_ref());
    let sym = op.kind.symbol();
    let (av, bv) = match (op.kind, a, b) {
        (NativeKind::Eq | NativeKind::Ne, l, Some(r)) => {
            if let Some(decided) = equality_without_evalexpr(op.kind, l, r, text)? {
                return Ok(decided);
            }
            (l, Some(r))
        }
        (
            NativeKind::Add | NativeKind::Lt | NativeKind::Le | NativeKind::Gt | NativeKind::Ge,
            l,
            Some(r),
        ) if matches!(
            (l, r),
            (Val::Scalar(Value::Float(_)), Val::Scalar(Value::Float(_)))
                | (Val::Scalar(Value::String(_)), Val::Scalar(Value::String(_)))
        ) =>
        {
            (l, Some(r))
        }
        (
            NativeKind::Add
            | NativeKind::Sub
            | NativeKind::Mul
            | NativeKind::Div
            | NativeKind::Mod
            | NativeKind::Pow
            | NativeKind::Lt
            | NativeKind::Le
            | NativeKind::Gt
            | NativeKind::Ge,
            l,
            Some(r),
        ) => match (number(l), number(r)) {
            (Some(x), Some(y)) if op.kind == NativeKind::Mod => {
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
                (l, Some(r))
            }
            (Some(_), Some(_)) => (l, Some(r)),
            _ => return err(operand_error(sym, l, r, text, a_text, b_text)),
        },
        (NativeKind::Not, Val::Scalar(Value::Boolean(_)), None) => (a, None),
        (NativeKind::Not, v, None) => {
            return err(format!(
                "`!`/`not` needs true or false, but {a_text} is {}",
                describe(v)
            ));
        }
        (_, Val::Scalar(Value::Float(_)), None) => (a, None),
        (_, v, None) => {
            let hint = if array_len(v).is_some() {
                format!(
                    " — pick one element, e.g. {sym}({a_text}[0]), or check every one with all({a_text}, {sym}(#))"
                )
            } else {
                String::new()
            };
            let what = if op.kind == NativeKind::Neg {
                "unary `-`".to_string()
            } else {
                format!("{sym}()")
            };
            return err(format!(
                "{what} needs a number, but {a_text} is {}{hint}",
                describe(v)
            ));
        }
        (_, _, Some(_)) => return err(format!("`{text}` has too many operands")),
    };
    let (Val::Scalar(a), b) = (av, bv) else {
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

/// The most common shape, two numbers compared or combined, computed directly: the same f64 operation
/// evalexpr's operator performs for two floats (a unit test holds the two equal, NaN and infinities included),
/// without its generic dispatch and argument vector. Everything else goes through the evalexpr node.
fn float_fast_path(kind: NativeKind, x: f64, y: f64) -> Option<Value> {
    Some(match kind {
        NativeKind::Lt => Value::Boolean(x < y),
        NativeKind::Le => Value::Boolean(x <= y),
        NativeKind::Gt => Value::Boolean(x > y),
        NativeKind::Ge => Value::Boolean(x >= y),
        NativeKind::Eq => Value::Boolean(x == y),
        NativeKind::Ne => Value::Boolean(x != y),
        NativeKind::Add => Value::Float(x + y),
        NativeKind::Sub => Value::Float(x - y),
        NativeKind::Mul => Value::Float(x * y),
        NativeKind::Div => Value::Float(x / y),
        _ => return None,
    })
}

/// `==`/`!=` where evalexpr's equality would be wrong or meaningless: nil against anything (only nil equals
/// nil), arrays and objects, and values of different kinds (an error, not a silent `false`).
fn equality_without_evalexpr<'a>(
    kind: NativeKind,
    l: &Val<'_>,
    r: &Val<'_>,
    text: &str,
) -> Result<Option<Val<'a>>, EvalError> {
    let negate = kind == NativeKind::Ne;
    if is_nil(l) || is_nil(r) {
        return Ok(Some(Val::Scalar(Value::Boolean(
            (is_nil(l) && is_nil(r)) != negate,
        ))));
    }
    let same_kind = matches!(
        (l, r),
        (Val::Scalar(Value::Float(_)), Val::Scalar(Value::Float(_)))
            | (Val::Scalar(Value::String(_)), Val::Scalar(Value::String(_)))
            | (
                Val::Scalar(Value::Boolean(_)),
                Val::Scalar(Value::Boolean(_))
            )
    );
    if same_kind {
        return Ok(None);
    }
    let hint = if array_len(l).is_some() || array_len(r).is_some() {
        " — compare elements, e.g. result[0] == 1, or use all(...)/any(...)"
    } else {
        " — convert one side with float(), string() or asFloat()"
    };
    err(format!(
        "cannot compare {} with {} in `{text}`{hint}",
        describe(l),
        describe(r)
    ))
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

fn index_into<'a>(
    base: Val<'a>,
    index: &Val<'_>,
    base_text: &str,
    text: &str,
) -> Result<Val<'a>, EvalError> {
    if let (Val::Json(JsonValue::Object(m)), Val::Scalar(Value::String(k))) = (&base, index) {
        return Ok(m.get(k).map_or(NIL, from_json));
    }
    if let Some(len) = array_len(&base) {
        let Some(i) = number(index).filter(|i| i.fract() == 0.0) else {
            return err(format!(
                "{text}: an array index must be a whole number, but it is {}",
                describe(index)
            ));
        };
        let what = describe(&base);
        let position = if i < 0.0 { len as f64 + i } else { i };
        return match (position >= 0.0 && position < len as f64)
            .then(|| array_item(&base, position as usize))
        {
            Some(Some(v)) => Ok(v),
            _ => {
                let guard = if i < 0.0 {
                    format!("len({base_text}) >= {}", -i)
                } else {
                    format!("len({base_text}) > {i}")
                };
                err(format!(
                    "{base_text} is {what}; {text} is out of range — guard with {guard}"
                ))
            }
        };
    }
    match (&base, index) {
        (Val::Scalar(Value::String(s)), Val::Scalar(Value::Float(i))) if i.fract() == 0.0 => {
            let len = s.chars().count() as f64;
            let position = if *i < 0.0 { len + i } else { *i };
            if position >= 0.0 && position < len {
                let c = s
                    .chars()
                    .nth(position as usize)
                    .map(String::from)
                    .unwrap_or_default();
                Ok(Val::Scalar(Value::String(c)))
            } else {
                err(format!(
                    "{base_text} is {}; {text} is out of range",
                    describe(&base)
                ))
            }
        }
        (b, _) if is_nil(b) => err(format!(
            "{base_text} is nil (no value), so {text} does not exist — guard with isNil(result) or use default(result, ...)"
        )),
        (b, i) => err(format!(
            "{text}: cannot index {} with {}",
            describe(b),
            describe(i)
        )),
    }
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

fn membership<'a>(l: &Val<'_>, r: &Val<'_>, text: &str) -> Result<Val<'a>, EvalError> {
    let found = if let Some(len) = array_len(r) {
        // Like expr-lang, an element of another kind is simply not a match.
        (0..len).any(|i| match (l, array_item(r, i)) {
            (Val::Scalar(a), Some(Val::Scalar(b))) => *a == b,
            _ => false,
        })
    } else if let (Val::Json(JsonValue::Object(m)), Val::Scalar(Value::String(k))) = (r, l) {
        m.contains_key(k)
    } else {
        return err(format!(
            "`in` needs an array (or an object and a key) on its right, but `{text}` has {} there",
            describe(r)
        ));
    };
    Ok(Val::Scalar(Value::Boolean(found)))
}

fn predicate<'a>(
    kind: PredicateKind,
    over: &Val<'a>,
    body: &Expr,
    result: &'a MetricValue,
    over_text: &str,
    body_text: &str,
) -> Result<Val<'a>, EvalError> {
    let name = kind.name();
    let Some(len) = array_len(over) else {
        let hint = if is_nil(over) {
            " — guard with isNil(result) or use default(result, ...)"
        } else {
            ""
        };
        return err(format!(
            "{name}() needs an array, but {over_text} is {}{hint}",
            describe(over)
        ));
    };
    let items = (0..len).filter_map(|i| array_item(over, i));
    if kind == PredicateKind::Map {
        let mapped = items
            .map(|item| eval(body, result, Some(&item)))
            .collect::<Result<_, _>>()?;
        return Ok(Val::List(mapped));
    }
    let shortcut = element_against_number(body);
    let test = |item: &Val<'a>| -> Result<bool, EvalError> {
        if let (Some((kind, c, elem_first)), Val::Scalar(Value::Float(x))) = (shortcut, item) {
            let (l, r) = if elem_first { (*x, c) } else { (c, *x) };
            if let Some(Value::Boolean(b)) = float_fast_path(kind, l, r) {
                return Ok(b);
            }
        }
        match eval(body, result, Some(item))? {
            Val::Scalar(Value::Boolean(b)) => Ok(b),
            other => err(format!(
                "the predicate `{body_text}` in {name}() must give true or false, but for {} it gives {}",
                describe(item),
                describe(&other)
            )),
        }
    };
    let mut hits = 0usize;
    let mut kept = Vec::new();
    for item in items {
        let hit = test(&item)?;
        match (kind, hit) {
            (PredicateKind::All, false) => return Ok(Val::Scalar(Value::Boolean(false))),
            (PredicateKind::Any, true) => return Ok(Val::Scalar(Value::Boolean(true))),
            (PredicateKind::None, true) => return Ok(Val::Scalar(Value::Boolean(false))),
            (PredicateKind::Filter, true) => kept.push(item),
            (_, true) => hits += 1,
            (_, false) => {}
        }
    }
    Ok(match kind {
        PredicateKind::All | PredicateKind::None => Val::Scalar(Value::Boolean(true)),
        PredicateKind::Any => Val::Scalar(Value::Boolean(false)),
        PredicateKind::One => Val::Scalar(Value::Boolean(hits == 1)),
        PredicateKind::Count => Val::Scalar(Value::Float(hits as f64)),
        PredicateKind::Filter | PredicateKind::Map => Val::List(kept),
    })
}

/// A predicate body of the shape `# < 1000` or `0 < #` (the element against a constant number): for number
/// elements the lowered operator is applied through `float_fast_path` without walking the tree per element.
fn element_against_number(body: &Expr) -> Option<(NativeKind, f64, bool)> {
    let Expr::Native { op, args, .. } = body else {
        return None;
    };
    match args.as_slice() {
        [Expr::Elem, Expr::Const(Value::Float(c))] => Some((op.kind, *c, true)),
        [Expr::Const(Value::Float(c)), Expr::Elem] => Some((op.kind, *c, false)),
        _ => None,
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

fn call<'a>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::condition::lower::NativeKind;

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
                    let fast = float_fast_path(kind, x, y);
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
