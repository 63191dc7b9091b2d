//! The compiled form of a condition: [`Expr`], the tree `lower.rs` builds and `eval.rs` walks, with the
//! operators lowered onto prebuilt evalexpr nodes, the text operators, predicates and functions it names.

use evalexpr::{DefaultNumericTypes, Node, Value};
use regex::Regex;

use super::ConditionError;
use super::clock::Method;

/// The compiled form of a condition (or of one of its subexpressions).
#[derive(Debug, Clone)]
pub(super) enum Expr {
    Const(Value),
    /// The measured value.
    Result,
    /// `#`, the current element of the innermost predicate.
    Elem,
    Array(Vec<Expr>),
    /// An operation evalexpr performs: arithmetic, comparison, `!`, unary minus, rounding.
    Native {
        op: NativeOp,
        args: Vec<Expr>,
        /// The whole operation and each operand as written, for messages.
        text: Box<str>,
        arg_texts: Vec<Box<str>>,
    },
    Member {
        base: Box<Expr>,
        key: Box<str>,
        optional: bool,
        base_text: Box<str>,
        text: Box<str>,
    },
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
        base_text: Box<str>,
        text: Box<str>,
    },
    /// `&&` / `||`: evaluated here because they short-circuit (`len(result) > 0 && result[0] > 1`) and
    /// evalexpr evaluates both operands first.
    Logic {
        and: bool,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        text: Box<str>,
    },
    Cond {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
        text: Box<str>,
    },
    Coalesce(Box<Expr>, Box<Expr>),
    Text {
        op: TextOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        text: Box<str>,
    },
    In {
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        text: Box<str>,
    },
    Predicate {
        kind: PredicateKind,
        over: Box<Expr>,
        body: Box<Expr>,
        over_text: Box<str>,
        body_text: Box<str>,
    },
    Call {
        func: Func,
        args: Vec<Expr>,
        arg_text: Box<str>,
    },
    /// `time.Now()` (or expr-lang's `now()`): the instant the evaluation was given.
    Now,
    /// A method of a time or a duration: `time.Now().Sub(t)`, `d.Minutes()`.
    Method {
        base: Box<Expr>,
        method: Method,
        args: Vec<Expr>,
        text: Box<str>,
    },
}

/// An operator evaluated by an evalexpr node built once at compile time over the operands `a` (and `b`).
#[derive(Debug, Clone)]
pub(super) struct NativeOp {
    pub kind: NativeKind,
    pub node: Node<DefaultNumericTypes>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NativeKind {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Not,
    Neg,
    Abs,
    Ceil,
    Floor,
    Round,
    IsNaN,
    IsInf,
}

impl NativeKind {
    /// The evalexpr source this operator is lowered to.
    fn evalexpr_source(self) -> &'static str {
        match self {
            NativeKind::Add => "a + b",
            NativeKind::Sub => "a - b",
            NativeKind::Mul => "a * b",
            NativeKind::Div => "a / b",
            NativeKind::Mod => "a % b",
            NativeKind::Pow => "a ^ b",
            NativeKind::Eq => "a == b",
            NativeKind::Ne => "a != b",
            NativeKind::Lt => "a < b",
            NativeKind::Le => "a <= b",
            NativeKind::Gt => "a > b",
            NativeKind::Ge => "a >= b",
            NativeKind::Not => "!a",
            NativeKind::Neg => "-a",
            NativeKind::Abs => "math::abs(a)",
            NativeKind::Ceil => "ceil(a)",
            NativeKind::Floor => "floor(a)",
            NativeKind::Round => "round(a)",
            NativeKind::IsNaN => "math::is_nan(a)",
            NativeKind::IsInf => "math::is_infinite(a)",
        }
    }

    /// The operator as the user wrote it, for messages.
    pub fn symbol(self) -> &'static str {
        match self {
            NativeKind::Add => "+",
            NativeKind::Sub => "-",
            NativeKind::Mul => "*",
            NativeKind::Div => "/",
            NativeKind::Mod => "%",
            NativeKind::Pow => "**",
            NativeKind::Eq => "==",
            NativeKind::Ne => "!=",
            NativeKind::Lt => "<",
            NativeKind::Le => "<=",
            NativeKind::Gt => ">",
            NativeKind::Ge => ">=",
            NativeKind::Not => "!",
            NativeKind::Neg => "-",
            NativeKind::Abs => "abs",
            NativeKind::Ceil => "ceil",
            NativeKind::Floor => "floor",
            NativeKind::Round => "round",
            NativeKind::IsNaN => "isNaN",
            NativeKind::IsInf => "isInf",
        }
    }

    /// The most common shape, two numbers compared or combined, computed directly: the same f64 operation
    /// evalexpr's operator performs for two floats (a unit test holds the two equal, NaN and infinities included),
    /// without its generic dispatch and argument vector. Everything else goes through the evalexpr node.
    pub fn on_floats(self, x: f64, y: f64) -> Option<Value> {
        Some(match self {
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

    pub fn build(self) -> Result<NativeOp, ConditionError> {
        let root = evalexpr::build_operator_tree::<DefaultNumericTypes>(self.evalexpr_source())
            .map_err(|e| {
                ConditionError::new(format!("internal error lowering `{}`: {e}", self.symbol()))
            })?;
        // The root wraps the operator once more; evaluating the operator directly saves a step per use.
        let node = root.children().first().cloned().unwrap_or(root);
        Ok(NativeOp { kind: self, node })
    }
}

#[derive(Debug, Clone)]
pub(super) enum TextOp {
    /// A constant pattern is compiled once; a computed one at evaluation.
    Matches(Option<Regex>),
    Contains,
    StartsWith,
    EndsWith,
}

impl TextOp {
    pub fn symbol(&self) -> &'static str {
        match self {
            TextOp::Matches(_) => "matches",
            TextOp::Contains => "contains",
            TextOp::StartsWith => "startsWith",
            TextOp::EndsWith => "endsWith",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PredicateKind {
    All,
    Any,
    None,
    One,
    Filter,
    Map,
    Count,
}

impl PredicateKind {
    pub fn name(self) -> &'static str {
        match self {
            PredicateKind::All => "all",
            PredicateKind::Any => "any",
            PredicateKind::None => "none",
            PredicateKind::One => "one",
            PredicateKind::Filter => "filter",
            PredicateKind::Map => "map",
            PredicateKind::Count => "count",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Func {
    Len,
    Sum,
    Mean,
    Median,
    Min,
    Max,
    Int,
    Float,
    String,
    AsInt,
    AsFloat,
    IsNil,
    Default,
    /// `time.Parse(text)`, in a notification trigger's `when`.
    ParseTime,
    /// expr-lang's `duration(text)`, in a notification trigger's `when`.
    Duration,
}

impl Func {
    pub fn name(self) -> &'static str {
        match self {
            Func::Len => "len",
            Func::Sum => "sum",
            Func::Mean => "mean",
            Func::Median => "median",
            Func::Min => "min",
            Func::Max => "max",
            Func::Int => "int",
            Func::Float => "float",
            Func::String => "string",
            Func::AsInt => "asInt",
            Func::AsFloat => "asFloat",
            Func::IsNil => "isNil",
            Func::Default => "default",
            Func::ParseTime => "time.Parse",
            Func::Duration => "duration",
        }
    }
}
