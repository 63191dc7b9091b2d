//! Argo's range-query time expressions (`now()`, `now() - duration("5m")`, `now() + duration("1h")`), the
//! small part of expr-lang that `rangeQuery.start` and `rangeQuery.end` use. Owns parsing and evaluating them
//! against a given `now`; it must not read the clock or know about Prometheus.
//!
//! Grammar: `now()` followed by any number of `+ duration("D")` or `- duration("D")`, where `D` is a Go
//! duration in single or double quotes. Whitespace is free between tokens.

use jiff::Timestamp;

use crate::api::duration::{DurationError, parse_duration};

/// Why a time expression cannot be evaluated; every message names the expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeExprError {
    #[error(
        "time expression {expr:?}: expected {expected} at character {position} (write e.g. now() - duration(\"5m\"))"
    )]
    Syntax {
        expr: String,
        expected: &'static str,
        position: usize,
    },
    #[error("time expression {expr:?}: {source}")]
    Duration {
        expr: String,
        #[source]
        source: DurationError,
    },
    #[error("time expression {expr:?}: the time is out of range")]
    OutOfRange { expr: String },
}

/// Evaluates `expr` with `now()` standing for `now`.
pub fn eval_time_expr(expr: &str, now: Timestamp) -> Result<Timestamp, TimeExprError> {
    let mut cursor = Cursor { expr, pos: 0 };
    cursor.keyword("now", "now()")?;
    cursor.punct('(', "( after now")?;
    cursor.punct(')', ") after now(")?;
    let mut at = now;
    loop {
        cursor.skip_space();
        let sign = match cursor.peek() {
            None => return Ok(at),
            Some('+') => 1,
            Some('-') => -1,
            Some(_) => return Err(cursor.syntax("+ or - or the end")),
        };
        cursor.pos += 1;
        cursor.keyword("duration", "duration(\"...\")")?;
        cursor.punct('(', "( after duration")?;
        let text = cursor.quoted()?;
        cursor.punct(')', ") after the duration")?;
        let duration = parse_duration(text).map_err(|source| TimeExprError::Duration {
            expr: expr.to_string(),
            source,
        })?;
        let stepped = if sign > 0 {
            at.checked_add(duration)
        } else {
            at.checked_sub(duration)
        };
        at = stepped.map_err(|_| TimeExprError::OutOfRange {
            expr: expr.to_string(),
        })?;
    }
}

struct Cursor<'a> {
    expr: &'a str,
    /// Byte offset into `expr`, always on a char boundary.
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        self.expr.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn syntax(&self, expected: &'static str) -> TimeExprError {
        TimeExprError::Syntax {
            expr: self.expr.to_string(),
            expected,
            // Users count characters from 1, not bytes from 0.
            position: self.expr.get(..self.pos).map_or(0, |s| s.chars().count()) + 1,
        }
    }

    fn keyword(&mut self, word: &str, expected: &'static str) -> Result<(), TimeExprError> {
        self.skip_space();
        if self.rest().starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.syntax(expected))
        }
    }

    fn punct(&mut self, c: char, expected: &'static str) -> Result<(), TimeExprError> {
        self.skip_space();
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            Ok(())
        } else {
            Err(self.syntax(expected))
        }
    }

    fn quoted(&mut self) -> Result<&'a str, TimeExprError> {
        self.skip_space();
        let quote = match self.peek() {
            Some(q @ ('"' | '\'')) => q,
            _ => return Err(self.syntax("a quoted duration such as \"5m\"")),
        };
        let body = self.rest().get(1..).unwrap_or("");
        let Some(len) = body.find(quote) else {
            return Err(self.syntax("a closing quote"));
        };
        self.pos += 1 + len + 1;
        Ok(body.get(..len).unwrap_or(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn now_alone_is_now() {
        let now = at("2026-01-01T12:00:00Z");
        assert_eq!(eval_time_expr("now()", now).unwrap(), now);
        assert_eq!(eval_time_expr("  now ( )  ", now).unwrap(), now);
    }

    #[test]
    fn durations_are_subtracted_and_added_in_order() {
        let now = at("2026-01-01T12:00:00Z");
        assert_eq!(
            eval_time_expr(r#"now() - duration("5m")"#, now).unwrap(),
            at("2026-01-01T11:55:00Z")
        );
        assert_eq!(
            eval_time_expr("now() + duration('1h')", now).unwrap(),
            at("2026-01-01T13:00:00Z")
        );
        assert_eq!(
            eval_time_expr(r#"now()-duration("1h30m")+duration("90s")"#, now).unwrap(),
            at("2026-01-01T10:31:30Z")
        );
    }

    #[test]
    fn a_bad_duration_is_an_error_naming_the_expression() {
        let err =
            eval_time_expr(r#"now() - duration("5 minutes")"#, Timestamp::UNIX_EPOCH).unwrap_err();
        assert!(matches!(err, TimeExprError::Duration { .. }));
        assert!(
            err.to_string()
                .contains(r#"now() - duration(\"5 minutes\")"#)
        );
    }

    #[test]
    fn syntax_errors_say_what_was_expected_and_where() {
        let cases = [
            ("", "now()", 1),
            ("time()", "now()", 1),
            ("now", "( after now", 4),
            ("now() * 2", "+ or - or the end", 7),
            ("now() - 5m", "duration(\"...\")", 9),
            (
                "now() - duration(5m)",
                "a quoted duration such as \"5m\"",
                18,
            ),
            ("now() - duration(\"5m)", "a closing quote", 18),
            ("now() - duration(\"5m\"", ") after the duration", 22),
        ];
        for (expr, expected, position) in cases {
            match eval_time_expr(expr, Timestamp::UNIX_EPOCH) {
                Err(TimeExprError::Syntax {
                    expected: e,
                    position: p,
                    ..
                }) => assert_eq!((e, p), (expected, position), "{expr}"),
                other => panic!("{expr}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_time_beyond_the_calendar_is_out_of_range() {
        let err = eval_time_expr(r#"now() - duration("1000000h")"#, Timestamp::MIN).unwrap_err();
        assert!(matches!(err, TimeExprError::OutOfRange { .. }));
    }
}
