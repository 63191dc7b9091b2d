//! Text → tokens for the condition language: numbers, strings with their escapes, names and punctuation,
//! each with its byte span; and the positions syntax errors name (`column N`, or `line L, column N`).

use super::ConditionError;

/// A byte range in the condition text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Number(f64),
    Str(String),
    Ident(String),
    Punct(&'static str),
    Eof,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// The 1-based position of a byte offset, for messages: `column N`, or `line L, column N` in multi-line text.
pub(super) fn position(source: &str, offset: usize) -> String {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    if source.contains('\n') {
        format!("line {line}, column {column}")
    } else {
        format!("column {column}")
    }
}

pub(super) fn error_at(
    source: &str,
    offset: usize,
    message: impl std::fmt::Display,
) -> ConditionError {
    ConditionError::new(format!("{}: {message}", position(source, offset)))
}

const PUNCTS: [&str; 28] = [
    "**", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "..", "+", "-", "*", "/", "%", "^", "<",
    ">", "!", "(", ")", "[", "]", "{", "}", ",", ":", "?",
];

pub(super) fn tokenize(source: &str) -> Result<Vec<Token>, ConditionError> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let tok = if c.is_ascii_digit() {
            let (n, end) = lex_number(source, start)?;
            i = end;
            Tok::Number(n)
        } else if c == b'\'' || c == b'"' {
            let (s, end) = lex_string(source, start)?;
            i = end;
            Tok::Str(s)
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'$')
            {
                i += 1;
            }
            Tok::Ident(source[start..i].to_string())
        } else if c == b'#' || (c == b'.' && bytes.get(i + 1) != Some(&b'.')) {
            i += 1;
            Tok::Punct(if c == b'.' { "." } else { "#" })
        } else if let Some(p) = PUNCTS.iter().find(|p| source[i..].starts_with(**p)) {
            // `?.` followed by a digit is a ternary with a number (`a ?.5 : 1`), not optional chaining.
            if *p == "?." && bytes.get(i + 2).is_some_and(u8::is_ascii_digit) {
                i += 1;
                Tok::Punct("?")
            } else {
                i += p.len();
                Tok::Punct(p)
            }
        } else {
            let ch = source[i..].chars().next().unwrap_or('?');
            let hint = if ch == '=' {
                " (use `==` to compare)"
            } else {
                ""
            };
            return Err(error_at(
                source,
                i,
                format!("unexpected character `{ch}`{hint}"),
            ));
        };
        tokens.push(Token {
            tok,
            span: Span { start, end: i },
        });
    }
    tokens.push(Token {
        tok: Tok::Eof,
        span: Span {
            start: source.len(),
            end: source.len(),
        },
    });
    Ok(tokens)
}

fn lex_number(source: &str, start: usize) -> Result<(f64, usize), ConditionError> {
    let bytes = source.as_bytes();
    let mut i = start;
    if source[start..].starts_with("0x") || source[start..].starts_with("0X") {
        i += 2;
        while i < bytes.len() && (bytes[i].is_ascii_hexdigit() || bytes[i] == b'_') {
            i += 1;
        }
        let digits: String = source[start + 2..i].chars().filter(|c| *c != '_').collect();
        return i64::from_str_radix(&digits, 16)
            .map(|n| (n as f64, i))
            .map_err(|_| error_at(source, start, "invalid hexadecimal number"));
    }
    let digits = |i: &mut usize| {
        while *i < bytes.len() && (bytes[*i].is_ascii_digit() || bytes[*i] == b'_') {
            *i += 1;
        }
    };
    digits(&mut i);
    // A `.` starts a fraction only when a digit follows: `1..3` and `1.foo` are not fractions.
    if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        digits(&mut i);
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(bytes.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if bytes.get(j).is_some_and(u8::is_ascii_digit) {
            i = j;
            digits(&mut i);
        }
    }
    let text: String = source[start..i].chars().filter(|c| *c != '_').collect();
    text.parse::<f64>().map(|n| (n, i)).map_err(|_| {
        error_at(
            source,
            start,
            format!("invalid number `{}`", &source[start..i]),
        )
    })
}

fn lex_string(source: &str, start: usize) -> Result<(String, usize), ConditionError> {
    let mut chars = source[start..].char_indices();
    let quote = chars.next().map_or('"', |(_, c)| c);
    let mut out = String::new();
    while let Some((off, c)) = chars.next() {
        match c {
            c if c == quote => return Ok((out, start + off + c.len_utf8())),
            '\\' => {
                let Some((eoff, e)) = chars.next() else { break };
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    '\\' | '\'' | '"' => e,
                    'u' => {
                        let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                        u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or_else(|| {
                                error_at(source, start + eoff - 1, "invalid \\u escape")
                            })?
                    }
                    _ => {
                        return Err(error_at(
                            source,
                            start + eoff - 1,
                            format!("unknown escape `\\{e}` in string"),
                        ));
                    }
                });
            }
            c => out.push(c),
        }
    }
    Err(error_at(source, start, "string is not closed"))
}
