//! The numbers a condition compares a measurement with, read off its syntax tree so a chart can draw them:
//! `result[0] < 0.05` is a line at 0.05 on series 0. Only comparisons of the value itself (`result`,
//! `result[N]`, `asFloat(...)` of either) with a literal number count, joined by `&&`/`||`; anything else
//! (`len(result) > 0`, `result.verdict == "fail"`) has no line to draw and is left out. Decides nothing.

use super::parser::{self, Ast, AstKind, BinOp, UnOp};

/// A comparison of one measured number with a constant: the measurement is on the `side` of `value`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// Which number of a vector value (`result[N]`); `None` for a scalar `result`.
    pub series: Option<usize>,
    pub comparison: Comparison,
    pub value: f64,
}

/// How the measured number compares with the threshold, read as `measurement <op> value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Below,
    AtMost,
    Above,
    AtLeast,
}

impl Comparison {
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::Below => "<",
            Comparison::AtMost => "<=",
            Comparison::Above => ">",
            Comparison::AtLeast => ">=",
        }
    }

    /// `value <op> measurement` read the other way round.
    fn flipped(self) -> Comparison {
        match self {
            Comparison::Below => Comparison::Above,
            Comparison::AtMost => Comparison::AtLeast,
            Comparison::Above => Comparison::Below,
            Comparison::AtLeast => Comparison::AtMost,
        }
    }
}

/// The thresholds of a condition, in the order written; empty when it does not parse or holds none.
pub fn thresholds(source: &str) -> Vec<Threshold> {
    let mut found = Vec::new();
    if let Ok(ast) = parser::parse(source) {
        collect(&ast, &mut found);
    }
    found
}

fn collect(ast: &Ast, found: &mut Vec<Threshold>) {
    let AstKind::Binary(op, left, right) = &ast.kind else {
        return;
    };
    let comparison = match op {
        BinOp::And | BinOp::Or => {
            collect(left, found);
            collect(right, found);
            return;
        }
        BinOp::Lt => Comparison::Below,
        BinOp::Le => Comparison::AtMost,
        BinOp::Gt => Comparison::Above,
        BinOp::Ge => Comparison::AtLeast,
        _ => return,
    };
    let threshold = match (measured(left), number(right), measured(right), number(left)) {
        (Some(series), Some(value), _, _) => Threshold {
            series,
            comparison,
            value,
        },
        (_, _, Some(series), Some(value)) => Threshold {
            series,
            comparison: comparison.flipped(),
            value,
        },
        _ => return,
    };
    found.push(threshold);
}

/// `Some(series)` when the node is the measured value: `result`, `result[N]`, or `asFloat` of one.
fn measured(ast: &Ast) -> Option<Option<usize>> {
    match &ast.kind {
        AstKind::Ident(name) if name == "result" => Some(None),
        AstKind::Index { base, index } => match (&base.kind, &index.kind) {
            (AstKind::Ident(name), AstKind::Number(n))
                if name == "result" && *n >= 0.0 && n.fract() == 0.0 =>
            {
                Some(Some(*n as usize))
            }
            _ => None,
        },
        AstKind::Call { name, args } if name == "asFloat" => match args.as_slice() {
            [inner] => measured(inner),
            _ => None,
        },
        _ => None,
    }
}

fn number(ast: &Ast) -> Option<f64> {
    match &ast.kind {
        AstKind::Number(n) => Some(*n),
        AstKind::Unary(UnOp::Neg, inner) => number(inner).map(|n| -n),
        AstKind::Unary(UnOp::Plus, inner) => number(inner),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(series: Option<usize>, comparison: Comparison, value: f64) -> Threshold {
        Threshold {
            series,
            comparison,
            value,
        }
    }

    #[test]
    fn comparisons_of_the_value_with_a_number_are_thresholds() {
        assert_eq!(
            thresholds("result[0] < 0.05"),
            vec![line(Some(0), Comparison::Below, 0.05)]
        );
        assert_eq!(
            thresholds("0.95 <= result"),
            vec![line(None, Comparison::AtLeast, 0.95)],
            "a number on the left is read the other way round"
        );
        assert_eq!(
            thresholds("asFloat(result[1]) > -2 || result[0] >= 3"),
            vec![
                line(Some(1), Comparison::Above, -2.0),
                line(Some(0), Comparison::AtLeast, 3.0)
            ]
        );
    }

    #[test]
    fn what_cannot_be_drawn_is_left_out() {
        assert_eq!(thresholds("len(result) > 0"), vec![]);
        assert_eq!(thresholds("result.verdict == \"fail\""), vec![]);
        assert_eq!(thresholds("result[0] < result[1]"), vec![]);
        assert_eq!(thresholds("result[0] <"), vec![]);
    }
}
