//! PromQL syntax, checked before a query is sent: `validate`, `analyze` and the daemon's preparation of a
//! run all refuse a query Prometheus would refuse with "parse error" (which the daemon would otherwise
//! measure as Error, consecutiveErrorLimit times, and roll back on). The parser is `promql-parser`, the
//! grammar of Prometheus' own.
//!
//! A template's query still holds `{{args...}}` (and `canaryd/compare`'s `{{window}}`) until a run resolves
//! them: each is replaced by a placeholder, `x` where the text around it makes it a name (a label in a
//! matcher or a `by (...)` list, part of a metric name), `1m` elsewhere (a duration, a number and a string's
//! text alike), and the message says so when the query still does not parse.

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Why `query` is not valid PromQL, or `None` when it is (or when it could be, for some value of each
/// placeholder).
pub fn syntax_error(query: &str) -> Option<String> {
    if !query.contains("{{") {
        return parse(query).err();
    }
    parse(&fill_placeholders(query))
        .err()
        .map(|e| format!("{e} (checked with each {{{{...}}}} replaced by a placeholder)"))
}

/// The parser's verdict. A panic inside the parser (on input it did not foresee) is reported as its own
/// kind of error rather than taking the process down.
fn parse(query: &str) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| promql_parser::parser::parse(query))) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the PromQL parser could not read this query".to_string()),
    }
}

/// `query` with every complete `{{...}}` replaced by a placeholder that fits where it stands; an unterminated
/// one is left as it is (the placeholder checks report it).
fn fill_placeholders(query: &str) -> String {
    let mut out = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let after = &rest[start + len + 2..];
        out.push_str(&rest[..start]);
        out.push_str(if is_name(&out, after) { "x" } else { "1m" });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Whether a placeholder between `before` and `after` stands for a name: it touches a name's characters
/// (`{{args.metric}}_total`), names a label to match (`{{args.label}}="v"`), or is in a `by`/`without` list.
fn is_name(before: &str, after: &str) -> bool {
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    if before.ends_with(name_char) || after.starts_with(name_char) {
        return true;
    }
    let next = after.trim_start();
    let matcher = ["=~", "!~", "!=", "="]
        .iter()
        .find_map(|op| next.strip_prefix(op))
        .is_some_and(|value| value.trim_start().starts_with(['"', '\'', '`']));
    if matcher {
        return true;
    }
    let Some(open) = before.rfind('(') else {
        return false;
    };
    let grouping = before[..open].trim_end();
    !before[open..].contains(')') && (grouping.ends_with("by") || grouping.ends_with("without"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unclosed_parenthesis_is_named() {
        assert_eq!(
            syntax_error("sum(rate(x[1m])").as_deref(),
            Some("unclosed left parenthesis")
        );
    }

    #[test]
    fn placeholders_stand_for_durations_numbers_strings_and_names() {
        for query in [
            r#"sum(rate(http_requests_total{service="{{args.service}}"}[{{args.window}}])) > {{args.threshold}}"#,
            "{{args.metric}}_total",
            "rate(x[{{window}}])",
            r#"sum(rate(x{service="{{args.app}}",{{args.cluster-label}}="{{args.cluster}}"}[{{args.window}}]))"#,
            "sum without ({{args.label}}) (x)",
        ] {
            assert_eq!(syntax_error(query), None, "{query}");
        }
    }

    #[test]
    fn a_query_wrong_whatever_its_args_says_it_was_checked_with_placeholders() {
        let e = syntax_error("sum(rate(x[{{args.window}}])").expect("unclosed");
        assert!(
            e.ends_with("(checked with each {{...}} replaced by a placeholder)"),
            "{e}"
        );
    }

    #[test]
    fn each_placeholder_is_filled_as_what_it_stands_for() {
        assert_eq!(
            fill_placeholders(
                r#"sum by ({{a}}) (rate({{b}}_total{a="b",{{c}}="{{d}}"}[{{e}}])) > {{f}}"#
            ),
            r#"sum by (x) (rate(x_total{a="b",x="1m"}[1m])) > 1m"#
        );
    }

    #[test]
    fn an_unterminated_placeholder_is_left_for_the_placeholder_checks() {
        assert_eq!(fill_placeholders("a {{b"), "a {{b");
    }
}
