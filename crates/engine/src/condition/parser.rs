//! Text → syntax tree for Argo's condition language (the expr-lang subset Argo users write).
//! Owns operator precedence (expr-lang's table) and syntax errors with positions. It knows
//! nothing about names, types or values: `lexer.rs` makes the tokens, `lower.rs` checks names, `eval.rs`
//! gives meaning.

use super::ConditionError;
use super::lexer::Span;
use super::lexer::{Tok, Token, error_at, tokenize};

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ast {
    pub kind: AstKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum AstKind {
    Nil,
    Bool(bool),
    Number(f64),
    Str(String),
    /// A bare name: only `result` means something; `lower.rs` rejects the rest.
    Ident(String),
    /// `#`, the element inside a predicate.
    Pointer,
    /// `.field` inside a predicate: the element's field.
    ElemField(String),
    Array(Vec<Ast>),
    Unary(UnOp, Box<Ast>),
    Binary(BinOp, Box<Ast>, Box<Ast>),
    Cond(Box<Ast>, Box<Ast>, Box<Ast>),
    Member {
        base: Box<Ast>,
        key: String,
        optional: bool,
    },
    Index {
        base: Box<Ast>,
        index: Box<Ast>,
    },
    Call {
        name: String,
        args: Vec<Ast>,
    },
    /// `base.Name(args)`: a method of a time or a duration, or `time.Now()`/`time.Parse(...)`.
    MethodCall {
        base: Box<Ast>,
        name: String,
        args: Vec<Ast>,
    },
    /// `{ ... }`, a predicate body (only as a predicate's argument).
    Closure(Box<Ast>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UnOp {
    Not,
    Neg,
    Plus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Matches,
    Contains,
    StartsWith,
    EndsWith,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Coalesce,
}

impl BinOp {
    /// expr-lang's binary precedences; `**`/`^` is the only right-associative one.
    fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 10,
            BinOp::And => 15,
            BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::In
            | BinOp::Matches
            | BinOp::Contains
            | BinOp::StartsWith
            | BinOp::EndsWith => 20,
            BinOp::Add | BinOp::Sub => 30,
            BinOp::Mul | BinOp::Div | BinOp::Mod => 60,
            BinOp::Pow => 100,
            BinOp::Coalesce => 200, // expr-lang: 500, above every other operator
        }
    }

    /// Operators that may follow `not` (`a not in b`, `s not matches 'x'`).
    fn negatable(self) -> bool {
        matches!(
            self,
            BinOp::In | BinOp::Matches | BinOp::Contains | BinOp::StartsWith | BinOp::EndsWith
        )
    }
}

const UNARY_NOT_PRECEDENCE: u8 = 50;
const UNARY_SIGN_PRECEDENCE: u8 = 90;
/// Deep nesting and very long conditions are refused rather than allowed to exhaust the stack (the compiled
/// form is a tree walked recursively); real conditions are a few dozen tokens.
const MAX_DEPTH: usize = 100;
const MAX_TOKENS: usize = 512;

struct Parser<'s> {
    source: &'s str,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

/// Parses a whole condition.
pub(super) fn parse(source: &str) -> Result<Ast, ConditionError> {
    let tokens = tokenize(source)?;
    if tokens.len() > MAX_TOKENS {
        return Err(ConditionError::new(format!(
            "the condition is too long (more than {MAX_TOKENS} tokens)"
        )));
    }
    let mut p = Parser {
        source,
        tokens,
        pos: 0,
        depth: 0,
    };
    if matches!(p.peek(), Tok::Eof) {
        return Err(ConditionError::new("the condition is empty".to_string()));
    }
    let ast = p.expression(0)?;
    if !matches!(p.peek(), Tok::Eof) {
        return Err(p.unexpected());
    }
    Ok(ast)
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        self.tokens.get(self.pos).map_or(&Tok::Eof, |t| &t.tok)
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        self.tokens
            .get(self.pos + ahead)
            .map_or(&Tok::Eof, |t| &t.tok)
    }

    fn span(&self) -> Span {
        self.tokens.get(self.pos).map_or(
            Span {
                start: self.source.len(),
                end: self.source.len(),
            },
            |t| t.span,
        )
    }

    fn prev_end(&self) -> usize {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.tokens.get(i))
            .map_or(0, |t| t.span.end)
    }

    fn bump(&mut self) {
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn eat(&mut self, p: &str) -> bool {
        let hit = self.is_punct(p);
        if hit {
            self.bump();
        }
        hit
    }

    fn expect(&mut self, p: &str) -> Result<(), ConditionError> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(self.error_here(format!(
                "expected `{p}` but found {}",
                self.describe_current()
            )))
        }
    }

    fn describe_current(&self) -> String {
        match self.peek() {
            Tok::Eof => "the end of the condition".to_string(),
            Tok::Number(_) | Tok::Str(_) | Tok::Ident(_) | Tok::Punct(_) => {
                let s = self.span();
                format!("`{}`", self.source.get(s.start..s.end).unwrap_or("?"))
            }
        }
    }

    fn error_here(&self, message: String) -> ConditionError {
        error_at(self.source, self.span().start, message)
    }

    fn unexpected(&self) -> ConditionError {
        let hint = if self.is_punct("..") {
            " (ranges are not supported)"
        } else {
            ""
        };
        self.error_here(format!("unexpected {}{hint}", self.describe_current()))
    }

    fn node(&self, kind: AstKind, start: usize) -> Ast {
        Ast {
            kind,
            span: Span {
                start,
                end: self.prev_end(),
            },
        }
    }

    fn binary_op(&self, ahead: usize) -> Option<BinOp> {
        Some(match self.peek_at(ahead) {
            Tok::Punct(p) => match *p {
                "||" => BinOp::Or,
                "&&" => BinOp::And,
                "==" => BinOp::Eq,
                "!=" => BinOp::Ne,
                "<" => BinOp::Lt,
                "<=" => BinOp::Le,
                ">" => BinOp::Gt,
                ">=" => BinOp::Ge,
                "+" => BinOp::Add,
                "-" => BinOp::Sub,
                "*" => BinOp::Mul,
                "/" => BinOp::Div,
                "%" => BinOp::Mod,
                "**" | "^" => BinOp::Pow,
                "??" => BinOp::Coalesce,
                _ => return None,
            },
            Tok::Ident(w) => match w.as_str() {
                "or" => BinOp::Or,
                "and" => BinOp::And,
                "in" => BinOp::In,
                "matches" => BinOp::Matches,
                "contains" => BinOp::Contains,
                "startsWith" => BinOp::StartsWith,
                "endsWith" => BinOp::EndsWith,
                _ => return None,
            },
            _ => return None,
        })
    }

    fn expression(&mut self, min: u8) -> Result<Ast, ConditionError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error_here("the condition is nested too deeply".to_string()));
        }
        let start = self.span().start;
        let mut left = self.unary()?;
        loop {
            let negated = matches!(self.peek(), Tok::Ident(w) if w == "not");
            let Some(op) = self.binary_op(usize::from(negated)) else {
                break;
            };
            if negated && !op.negatable() {
                break;
            }
            if op.precedence() < min {
                break;
            }
            self.bump();
            if negated {
                self.bump();
            }
            let next_min = if op == BinOp::Pow {
                op.precedence()
            } else {
                op.precedence() + 1
            };
            let right = self.expression(next_min)?;
            left = self.node(AstKind::Binary(op, Box::new(left), Box::new(right)), start);
            if negated {
                left = self.node(AstKind::Unary(UnOp::Not, Box::new(left)), start);
            }
        }
        if min == 0 && self.eat("?") {
            let then = self.expression(0)?;
            self.expect(":")?;
            let otherwise = self.expression(0)?;
            left = self.node(
                AstKind::Cond(Box::new(left), Box::new(then), Box::new(otherwise)),
                start,
            );
        }
        self.depth -= 1;
        Ok(left)
    }

    fn unary(&mut self) -> Result<Ast, ConditionError> {
        let start = self.span().start;
        let op = match self.peek() {
            Tok::Punct("!") => Some((UnOp::Not, UNARY_NOT_PRECEDENCE)),
            Tok::Ident(w) if w == "not" => Some((UnOp::Not, UNARY_NOT_PRECEDENCE)),
            Tok::Punct("-") => Some((UnOp::Neg, UNARY_SIGN_PRECEDENCE)),
            Tok::Punct("+") => Some((UnOp::Plus, UNARY_SIGN_PRECEDENCE)),
            _ => None,
        };
        if let Some((op, precedence)) = op {
            self.bump();
            let operand = self.expression(precedence)?;
            let node = self.node(AstKind::Unary(op, Box::new(operand)), start);
            return self.postfix(node, start);
        }
        let primary = self.primary()?;
        self.postfix(primary, start)
    }

    fn primary(&mut self) -> Result<Ast, ConditionError> {
        let start = self.span().start;
        let tok = self.peek().clone();
        let kind = match tok {
            Tok::Number(n) => {
                self.bump();
                AstKind::Number(n)
            }
            Tok::Str(s) => {
                self.bump();
                AstKind::Str(s)
            }
            Tok::Ident(name) => {
                self.bump();
                match name.as_str() {
                    "nil" => AstKind::Nil,
                    "true" => AstKind::Bool(true),
                    "false" => AstKind::Bool(false),
                    _ if self.is_punct("(") => {
                        self.bump();
                        let args = self.arguments()?;
                        AstKind::Call { name, args }
                    }
                    _ => AstKind::Ident(name),
                }
            }
            Tok::Punct("#") => {
                self.bump();
                AstKind::Pointer
            }
            Tok::Punct(".") => {
                self.bump();
                AstKind::ElemField(self.field_name()?)
            }
            Tok::Punct("(") => {
                self.bump();
                let inner = self.expression(0)?;
                self.expect(")")?;
                return Ok(Ast {
                    kind: inner.kind,
                    span: Span {
                        start,
                        end: self.prev_end(),
                    },
                });
            }
            Tok::Punct("[") => {
                self.bump();
                let mut items = Vec::new();
                while !self.is_punct("]") {
                    items.push(self.expression(0)?);
                    if !self.eat(",") {
                        break;
                    }
                }
                self.expect("]")?;
                AstKind::Array(items)
            }
            Tok::Punct("{") => {
                return Err(self.error_here(
                    "`{` starts a predicate, which is only allowed as the second argument of all, any, none, one, filter, map or count"
                        .to_string(),
                ));
            }
            Tok::Eof => {
                return Err(self.error_here("the condition ends too early".to_string()));
            }
            Tok::Punct(_) => return Err(self.unexpected()),
        };
        Ok(self.node(kind, start))
    }

    fn field_name(&mut self) -> Result<String, ConditionError> {
        match self.peek().clone() {
            Tok::Ident(name) => {
                self.bump();
                Ok(name)
            }
            _ => Err(self.error_here(format!(
                "expected a field name after `.` but found {}",
                self.describe_current()
            ))),
        }
    }

    /// Call arguments; a `{ ... }` argument is a predicate body.
    fn arguments(&mut self) -> Result<Vec<Ast>, ConditionError> {
        let mut args = Vec::new();
        while !self.is_punct(")") {
            let start = self.span().start;
            if self.eat("{") {
                let body = self.expression(0)?;
                self.expect("}")?;
                args.push(self.node(AstKind::Closure(Box::new(body)), start));
            } else {
                args.push(self.expression(0)?);
            }
            if !self.eat(",") {
                break;
            }
        }
        self.expect(")")?;
        Ok(args)
    }

    fn postfix(&mut self, mut node: Ast, start: usize) -> Result<Ast, ConditionError> {
        loop {
            if self.eat(".") {
                let key = self.field_name()?;
                let kind = if self.eat("(") {
                    AstKind::MethodCall {
                        base: Box::new(node),
                        name: key,
                        args: self.arguments()?,
                    }
                } else {
                    AstKind::Member {
                        base: Box::new(node),
                        key,
                        optional: false,
                    }
                };
                node = self.node(kind, start);
            } else if self.eat("?.") {
                let key = self.field_name()?;
                node = self.node(
                    AstKind::Member {
                        base: Box::new(node),
                        key,
                        optional: true,
                    },
                    start,
                );
            } else if self.eat("[") {
                let index = self.expression(0)?;
                if self.is_punct(":") {
                    return Err(self.error_here("slices (`[a:b]`) are not supported".to_string()));
                }
                self.expect("]")?;
                node = self.node(
                    AstKind::Index {
                        base: Box::new(node),
                        index: Box::new(index),
                    },
                    start,
                );
            } else {
                return Ok(node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(source: &str) -> String {
        fn show(a: &Ast) -> String {
            match &a.kind {
                AstKind::Nil => "nil".into(),
                AstKind::Bool(b) => b.to_string(),
                AstKind::Number(n) => n.to_string(),
                AstKind::Str(s) => format!("{s:?}"),
                AstKind::Ident(n) => n.clone(),
                AstKind::Pointer => "#".into(),
                AstKind::ElemField(f) => format!(".{f}"),
                AstKind::Array(items) => {
                    format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(" "))
                }
                AstKind::Unary(op, e) => format!("({op:?} {})", show(e)),
                AstKind::Binary(op, l, r) => format!("({op:?} {} {})", show(l), show(r)),
                AstKind::Cond(c, t, f) => format!("(? {} {} {})", show(c), show(t), show(f)),
                AstKind::Member { base, key, .. } => format!("{}.{key}", show(base)),
                AstKind::Index { base, index } => format!("{}[{}]", show(base), show(index)),
                AstKind::Call { name, args } => {
                    format!(
                        "{name}({})",
                        args.iter().map(show).collect::<Vec<_>>().join(" ")
                    )
                }
                AstKind::MethodCall { base, name, args } => format!(
                    "{}.{name}({})",
                    show(base),
                    args.iter().map(show).collect::<Vec<_>>().join(" ")
                ),
                AstKind::Closure(b) => format!("{{{}}}", show(b)),
            }
        }
        parse(source).map_or_else(|e| e.to_string(), |a| show(&a))
    }

    #[test]
    fn precedence_follows_expr_lang() {
        assert_eq!(shape("a || b && c"), "(Or a (And b c))");
        assert_eq!(shape("1 + 2 * 3 >= 7"), "(Ge (Add 1 (Mul 2 3)) 7)");
        assert_eq!(shape("2 ** 3 ** 2"), "(Pow 2 (Pow 3 2))");
        assert_eq!(shape("-x ** 2"), "(Neg (Pow x 2))");
        assert_eq!(shape("not a == b"), "(Eq (Not a) b)");
        assert_eq!(shape("a not in b"), "(Not (In a b))");
        assert_eq!(shape("a ?? b + 1"), "(Add (Coalesce a b) 1)");
        assert_eq!(shape("a ? b : c ? d : e"), "(? a b (? c d e))");
    }

    #[test]
    fn postfix_chains_bind_tighter_than_operators() {
        assert_eq!(shape("result.a.b[0] > 1"), "(Gt result.a.b[0] 1)");
        assert_eq!(shape("all(result, {.x > #})"), "all(result {(Gt .x #)})");
        assert_eq!(shape("len(result) == 0"), "(Eq len(result) 0)");
        assert_eq!(
            shape("time.Now().Sub(time.Parse(r.at)).Minutes() > 5"),
            "(Gt time.Now().Sub(time.Parse(r.at)).Minutes() 5)"
        );
    }

    #[test]
    fn syntax_errors_name_the_column() {
        assert_eq!(
            shape("result[0] >"),
            "column 12: the condition ends too early"
        );
        assert_eq!(
            shape("result = 1"),
            "column 8: unexpected character `=` (use `==` to compare)"
        );
        assert_eq!(
            shape("(1 + 2"),
            "column 7: expected `)` but found the end of the condition"
        );
        assert_eq!(shape("'abc"), "column 1: string is not closed");
        assert_eq!(shape("a\n  && )"), "line 2, column 6: unexpected `)`");
    }
}
