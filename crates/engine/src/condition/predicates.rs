//! The predicates over arrays (`all`, `any`, `none`, `one`, `filter`, `map`, `count`): iterating an evaluated
//! array with `#` bound to each element, short-circuiting where Argo does, and a fast path for `# < constant`
//! over numbers. Evaluating the body is the evaluator's it is given (`eval.rs`'s). Must not panic on any value.

use evalexpr::Value;

use super::EvalError;
use super::expr::{Expr, NativeKind, PredicateKind};
use super::val::{Elem, Val, array_item, array_len, describe, err, is_nil};

pub(super) fn predicate<'a>(
    kind: PredicateKind,
    over: &Val<'a>,
    typed: bool,
    body: &Expr,
    over_text: &str,
    body_text: &str,
    eval: impl Fn(&Expr, Option<&Elem<'a>>) -> Result<Val<'a>, EvalError>,
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
            .map(|val| eval(body, Some(&Elem { val, typed })))
            .collect::<Result<_, _>>()?;
        return Ok(Val::List(mapped));
    }
    let shortcut = element_against_number(body);
    let test = |item: &Elem<'a>| -> Result<bool, EvalError> {
        if let (Some((kind, c, elem_first)), Val::Scalar(Value::Float(x))) = (shortcut, &item.val) {
            let (l, r) = if elem_first { (*x, c) } else { (c, *x) };
            if let Some(Value::Boolean(b)) = kind.on_floats(l, r) {
                return Ok(b);
            }
        }
        match eval(body, Some(item))? {
            Val::Scalar(Value::Boolean(b)) => Ok(b),
            other => err(format!(
                "the predicate `{body_text}` in {name}() must give true or false, but for {} it gives {}",
                describe(&item.val),
                describe(&other)
            )),
        }
    };
    let mut hits = 0usize;
    let mut kept = Vec::new();
    for val in items {
        let item = Elem { val, typed };
        let hit = test(&item)?;
        match (kind, hit) {
            (PredicateKind::All, false) => return Ok(Val::Scalar(Value::Boolean(false))),
            (PredicateKind::Any, true) => return Ok(Val::Scalar(Value::Boolean(true))),
            (PredicateKind::None, true) => return Ok(Val::Scalar(Value::Boolean(false))),
            (PredicateKind::Filter, true) => kept.push(item.val),
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
/// elements the lowered operator is applied through `NativeKind::on_floats` without walking the tree per element.
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
