//! Syntax tree → compiled form. Owns name checking (only the one variable, `result` for an analysis, is a
//! name, or a notification trigger's variables with `time.Now()`, `time.Parse`, `now()` and `duration()`;
//! functions and methods must exist with
//! the right number of arguments, `#`/`.field` only inside predicates), the lowering of operators onto
//! prebuilt `evalexpr` nodes, regexes compiled once, and folding of constant subtrees. Evaluation itself lives
//! in `eval.rs`; nothing here sees a measured value.

use evalexpr::Value;
use regex::Regex;

use super::ConditionError;
use super::clock::{METHOD_NAMES, Method};
use super::eval;
use super::expr::{Expr, Func, NativeKind, PredicateKind, TextOp};
use super::lexer::error_at;
use super::parser::{Ast, AstKind, BinOp, UnOp};

enum Callee {
    Predicate(PredicateKind),
    Native(NativeKind),
    Func(Func, usize, Option<usize>),
    /// `time.Now()`, `now()`.
    Now,
}

fn callee(name: &str) -> Option<Callee> {
    use Callee::{Func as F, Native as N, Predicate as P};
    Some(match name {
        "all" => P(PredicateKind::All),
        "any" => P(PredicateKind::Any),
        "none" => P(PredicateKind::None),
        "one" => P(PredicateKind::One),
        "filter" => P(PredicateKind::Filter),
        "map" => P(PredicateKind::Map),
        "count" => P(PredicateKind::Count),
        "abs" => N(NativeKind::Abs),
        "ceil" => N(NativeKind::Ceil),
        "floor" => N(NativeKind::Floor),
        "round" => N(NativeKind::Round),
        "isNaN" => N(NativeKind::IsNaN),
        "isInf" => N(NativeKind::IsInf),
        "len" => F(Func::Len, 1, Some(1)),
        "sum" => F(Func::Sum, 1, Some(1)),
        "mean" => F(Func::Mean, 1, Some(1)),
        "median" => F(Func::Median, 1, Some(1)),
        "min" => F(Func::Min, 1, None),
        "max" => F(Func::Max, 1, None),
        "int" => F(Func::Int, 1, Some(1)),
        "float" => F(Func::Float, 1, Some(1)),
        "string" => F(Func::String, 1, Some(1)),
        "asInt" => F(Func::AsInt, 1, Some(1)),
        "asFloat" => F(Func::AsFloat, 1, Some(1)),
        "isNil" => F(Func::IsNil, 1, Some(1)),
        "default" => F(Func::Default, 2, Some(2)),
        "time.Now" | "now" => Callee::Now,
        "time.Parse" => F(Func::ParseTime, 1, Some(1)),
        "duration" => F(Func::Duration, 1, Some(1)),
        _ => return None,
    })
}

const FUNCTION_NAMES: &str = "all, any, none, one, filter, map, count, len, sum, mean, median, min, max, abs, \
ceil, floor, round, int, float, string, isNaN, isInf, asInt, asFloat, isNil, default; in a notification \
trigger's `when` also time.Now, time.Parse, now, duration";

/// The names a condition may read.
#[derive(Debug, Clone, Copy)]
pub(super) enum Names<'s> {
    /// One value, under this name (`result`).
    Value(&'s str),
    /// The fields of the value, each under its own name (a trigger's `rollout` and `analysisRuns`), and the
    /// clock: `time.Now()`, `time.Parse(...)`, `now()`, `duration(...)`.
    Environment(&'s [&'s str]),
}

/// Lowers a parsed condition; `source` is the text the spans point into, `names` what it may read.
pub(super) fn lower(source: &str, ast: &Ast, names: Names<'_>) -> Result<Expr, ConditionError> {
    Lowerer { source, names }.lower(ast, false)
}

struct Lowerer<'s> {
    source: &'s str,
    names: Names<'s>,
}

fn boxed(e: Expr) -> Box<Expr> {
    Box::new(e)
}

impl Lowerer<'_> {
    fn text(&self, ast: &Ast) -> Box<str> {
        self.source
            .get(ast.span.start..ast.span.end)
            .unwrap_or("")
            .trim()
            .into()
    }

    fn error(&self, ast: &Ast, message: impl std::fmt::Display) -> ConditionError {
        error_at(self.source, ast.span.start, message)
    }

    fn lower(&self, ast: &Ast, in_predicate: bool) -> Result<Expr, ConditionError> {
        let l = |a: &Ast| self.lower(a, in_predicate).map(boxed);
        Ok(match &ast.kind {
            AstKind::Nil => Expr::Const(Value::Empty),
            AstKind::Bool(b) => Expr::Const(Value::Boolean(*b)),
            AstKind::Number(n) => Expr::Const(Value::Float(*n)),
            AstKind::Str(s) => Expr::Const(Value::String(s.clone())),
            AstKind::Ident(name) => self.name(name, ast)?,
            AstKind::MethodCall { base, name, args } => {
                self.method_call(base, name, args, ast, in_predicate)?
            }
            AstKind::Pointer if in_predicate => Expr::Elem,
            AstKind::Pointer => {
                return Err(self.error(
                    ast,
                    "`#` is the element inside a predicate such as all(result, # < 1) and means nothing here",
                ));
            }
            AstKind::ElemField(key) if in_predicate => Expr::Member {
                base: boxed(Expr::Elem),
                key: key.as_str().into(),
                optional: false,
                base_text: "#".into(),
                text: self.text(ast),
            },
            AstKind::ElemField(key) => {
                return Err(self.error(
                    ast,
                    format!("`.{key}` is a field of the element inside a predicate and means nothing here; use result.{key}"),
                ));
            }
            AstKind::Array(items) => Expr::Array(
                items
                    .iter()
                    .map(|i| self.lower(i, in_predicate))
                    .collect::<Result<_, _>>()?,
            ),
            AstKind::Unary(op, operand) => match op {
                UnOp::Plus => *l(operand)?,
                UnOp::Not => self.native(NativeKind::Not, vec![*l(operand)?], &[operand], ast)?,
                UnOp::Neg => self.native(NativeKind::Neg, vec![*l(operand)?], &[operand], ast)?,
            },
            AstKind::Binary(op, lhs, rhs) => self.binary(*op, lhs, rhs, ast, in_predicate)?,
            AstKind::Cond(c, t, f) => Expr::Cond {
                cond: l(c)?,
                then: l(t)?,
                otherwise: l(f)?,
                text: self.text(c),
            },
            AstKind::Member {
                base,
                key,
                optional,
            } => Expr::Member {
                base: l(base)?,
                key: key.as_str().into(),
                optional: *optional,
                base_text: self.text(base),
                text: self.text(ast),
            },
            AstKind::Index { base, index } => Expr::Index {
                base: l(base)?,
                index: l(index)?,
                base_text: self.text(base),
                text: self.text(ast),
            },
            AstKind::Call { name, args } => self.call(name, args, ast, in_predicate)?,
            AstKind::Closure(_) => {
                return Err(self.error(ast, "a `{ ... }` predicate is only allowed as the second argument of all, any, none, one, filter, map or count"));
            }
        })
    }

    /// A bare name: the value, or one of the environment's fields.
    fn name(&self, name: &str, ast: &Ast) -> Result<Expr, ConditionError> {
        let known = match self.names {
            Names::Value(variable) if name == variable => return Ok(Expr::Result),
            Names::Environment(fields) if fields.contains(&name) => {
                return Ok(Expr::Member {
                    base: boxed(Expr::Result),
                    key: name.into(),
                    optional: false,
                    base_text: "the trigger's variables".into(),
                    text: name.into(),
                });
            }
            Names::Value(variable) => format!("the value is called `{variable}`"),
            Names::Environment(fields) => format!("the names are {}", fields.join(", ")),
        };
        let hint = if callee(name).is_some() {
            format!("(`{name}` is a function: call it as `{name}(...)`)")
        } else if name == "time" && matches!(self.names, Names::Environment(_)) {
            "(`time` is called: time.Now() or time.Parse(text))".to_string()
        } else {
            format!("({known})")
        };
        Err(self.error(ast, format!("unknown name `{name}` {hint}")))
    }

    /// `base.Name(args)`: `time.Now()`/`time.Parse(text)` where the clock is available, else a method of a
    /// time or a duration.
    fn method_call(
        &self,
        base: &Ast,
        name: &str,
        args: &[Ast],
        ast: &Ast,
        in_predicate: bool,
    ) -> Result<Expr, ConditionError> {
        if matches!(&base.kind, AstKind::Ident(t) if t == "time") {
            return match name {
                "Now" | "Parse" => self.call(&format!("time.{name}"), args, ast, in_predicate),
                _ => Err(self.error(
                    ast,
                    format!("unknown function `time.{name}` (known: time.Now, time.Parse)"),
                )),
            };
        }
        let Some(method) = Method::from_name(name) else {
            return Err(self.error(
                ast,
                format!("unknown method `{name}` (known methods: {METHOD_NAMES})"),
            ));
        };
        if args.len() != method.arity() {
            return Err(self.error(
                ast,
                format!(
                    "{name}() takes {} argument{}, but got {}",
                    method.arity(),
                    if method.arity() == 1 { "" } else { "s" },
                    args.len()
                ),
            ));
        }
        Ok(Expr::Method {
            base: boxed(self.lower(base, in_predicate)?),
            method,
            args: args
                .iter()
                .map(|a| self.lower(a, in_predicate))
                .collect::<Result<_, _>>()?,
            text: self.text(ast),
        })
    }

    fn binary(
        &self,
        op: BinOp,
        lhs: &Ast,
        rhs: &Ast,
        ast: &Ast,
        in_predicate: bool,
    ) -> Result<Expr, ConditionError> {
        let l = self.lower(lhs, in_predicate)?;
        let r = self.lower(rhs, in_predicate)?;
        let text = self.text(ast);
        let native = match op {
            BinOp::Add => NativeKind::Add,
            BinOp::Sub => NativeKind::Sub,
            BinOp::Mul => NativeKind::Mul,
            BinOp::Div => NativeKind::Div,
            BinOp::Mod => NativeKind::Mod,
            BinOp::Pow => NativeKind::Pow,
            BinOp::Eq => NativeKind::Eq,
            BinOp::Ne => NativeKind::Ne,
            BinOp::Lt => NativeKind::Lt,
            BinOp::Le => NativeKind::Le,
            BinOp::Gt => NativeKind::Gt,
            BinOp::Ge => NativeKind::Ge,
            BinOp::And | BinOp::Or => {
                return Ok(Expr::Logic {
                    and: op == BinOp::And,
                    lhs: boxed(l),
                    rhs: boxed(r),
                    text,
                });
            }
            BinOp::Coalesce => return Ok(Expr::Coalesce(boxed(l), boxed(r))),
            BinOp::In => {
                return Ok(Expr::In {
                    lhs: boxed(l),
                    rhs: boxed(r),
                    text,
                });
            }
            BinOp::Matches => {
                let regex = match &r {
                    Expr::Const(Value::String(pattern)) => {
                        Some(Regex::new(pattern).map_err(|e| {
                            self.error(rhs, format!("invalid regular expression: {e}"))
                        })?)
                    }
                    _ => None,
                };
                return Ok(self.text_op(TextOp::Matches(regex), l, r, text));
            }
            BinOp::Contains => return Ok(self.text_op(TextOp::Contains, l, r, text)),
            BinOp::StartsWith => return Ok(self.text_op(TextOp::StartsWith, l, r, text)),
            BinOp::EndsWith => return Ok(self.text_op(TextOp::EndsWith, l, r, text)),
        };
        self.native(native, vec![l, r], &[lhs, rhs], ast)
    }

    fn text_op(&self, op: TextOp, lhs: Expr, rhs: Expr, text: Box<str>) -> Expr {
        Expr::Text {
            op,
            lhs: boxed(lhs),
            rhs: boxed(rhs),
            text,
        }
    }

    /// A native operation; when every operand is a constant it is computed now, once.
    fn native(
        &self,
        kind: NativeKind,
        args: Vec<Expr>,
        arg_asts: &[&Ast],
        ast: &Ast,
    ) -> Result<Expr, ConditionError> {
        let expr = Expr::Native {
            op: kind.build()?,
            args,
            text: self.text(ast),
            arg_texts: arg_asts.iter().map(|a| self.text(a)).collect(),
        };
        Ok(match &expr {
            Expr::Native { args, .. } if args.iter().all(|a| matches!(a, Expr::Const(_))) => {
                // A constant that cannot be computed (`'a' < 1`) stays as it is and reports at evaluation, as
                // Argo does.
                eval::fold_constant(&expr).map_or(expr, Expr::Const)
            }
            _ => expr,
        })
    }

    fn call(
        &self,
        name: &str,
        args: &[Ast],
        ast: &Ast,
        in_predicate: bool,
    ) -> Result<Expr, ConditionError> {
        let Some(callee) = callee(name) else {
            let hint = if name == "result" {
                " (result is a value, not a function)".to_string()
            } else {
                format!(" (known functions: {FUNCTION_NAMES})")
            };
            return Err(self.error(ast, format!("unknown function `{name}`{hint}")));
        };
        let reads_clock = matches!(callee, Callee::Now)
            || matches!(callee, Callee::Func(Func::ParseTime | Func::Duration, ..));
        if reads_clock && matches!(self.names, Names::Value(_)) {
            return Err(self.error(
                ast,
                format!("`{name}` is only available in a notification trigger's `when`"),
            ));
        }
        let arity = |min: usize, max: Option<usize>| -> Result<(), ConditionError> {
            let n = args.len();
            if n < min || max.is_some_and(|m| n > m) {
                let wanted = match max {
                    Some(m) if m == min => format!("{min}"),
                    Some(m) => format!("{min} to {m}"),
                    None => format!("at least {min}"),
                };
                let plural = if wanted == "1" { "" } else { "s" };
                return Err(self.error(
                    ast,
                    format!("{name}() takes {wanted} argument{plural}, but got {n}"),
                ));
            }
            Ok(())
        };
        let plain = |a: &Ast| -> Result<Expr, ConditionError> {
            if matches!(a.kind, AstKind::Closure(_)) {
                return Err(
                    self.error(a, format!("{name}() does not take a `{{ ... }}` predicate"))
                );
            }
            self.lower(a, in_predicate)
        };
        match callee {
            Callee::Predicate(kind) => {
                arity(2, Some(2))?;
                let (Some(over), Some(body)) = (args.first(), args.get(1)) else {
                    return Err(self.error(ast, format!("{name}() takes 2 arguments")));
                };
                let body_ast = match &body.kind {
                    AstKind::Closure(inner) => inner.as_ref(),
                    _ => body,
                };
                Ok(Expr::Predicate {
                    kind,
                    over: boxed(plain(over)?),
                    body: boxed(self.lower(body_ast, true)?),
                    over_text: self.text(over),
                    body_text: self.text(body_ast),
                })
            }
            Callee::Native(kind) => {
                arity(1, Some(1))?;
                let lowered = args.iter().map(plain).collect::<Result<_, _>>()?;
                let arg_asts: Vec<&Ast> = args.iter().collect();
                self.native(kind, lowered, &arg_asts, ast)
            }
            Callee::Now => {
                arity(0, Some(0))?;
                Ok(Expr::Now)
            }
            Callee::Func(func, min, max) => {
                arity(min, max)?;
                let lowered = args.iter().map(plain).collect::<Result<_, _>>()?;
                Ok(Expr::Call {
                    func,
                    args: lowered,
                    arg_text: args.first().map_or_else(|| "".into(), |a| self.text(a)),
                })
            }
        }
    }
}
