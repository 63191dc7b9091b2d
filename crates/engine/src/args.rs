//! Argo's `{{args.NAME}}` placeholders: finding them (for `validate`) and substituting supplied values (for
//! measurements). Spaces inside the braces are allowed (`{{ args.name }}`), as in Argo. Owns the placeholder
//! syntax only; where values come from (template defaults, run args, secrets) is the caller's business.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::decode::join;

/// A placeholder found in a string, by what it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placeholder {
    /// `{{args.NAME}}`
    Arg(String),
    /// Any other `{{...}}`: canaryd's own (such as `{{window}}`) or a mistake, as the caller decides.
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    #[error("unterminated placeholder {0:?}: expected `}}}}`")]
    Unterminated(String),
    #[error("arg {0:?} is not declared in spec.args")]
    Undeclared(String),
    #[error(
        "arg {0:?} has no value: supply it from the Rollout or AnalysisRun, or give it a default"
    )]
    Missing(String),
    #[error("unknown placeholder {{{{{0}}}}} (expected {{{{args.NAME}}}})")]
    Unknown(String),
}

/// Every placeholder in `text`, in order.
pub fn placeholders(text: &str) -> Result<Vec<Placeholder>, ArgsError> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            let excerpt: String = rest[start..].chars().take(40).collect();
            return Err(ArgsError::Unterminated(excerpt));
        };
        out.push(classify(after[..end].trim()));
        rest = &after[end + 2..];
    }
    Ok(out)
}

fn classify(inner: &str) -> Placeholder {
    match inner.strip_prefix("args.") {
        Some(name) => Placeholder::Arg(name.trim().to_string()),
        None => Placeholder::Other(inner.to_string()),
    }
}

/// Replaces every `{{args.NAME}}` in `text`. `other` decides what to do with any other placeholder:
/// `Some(value)` substitutes it, `None` makes it an error.
pub fn substitute(
    text: &str,
    args: &BTreeMap<String, Option<String>>,
    other: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ArgsError> {
    if !text.contains("{{") {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            let excerpt: String = rest[start..].chars().take(40).collect();
            return Err(ArgsError::Unterminated(excerpt));
        };
        match classify(after[..end].trim()) {
            Placeholder::Arg(name) => match args.get(&name) {
                Some(Some(value)) => out.push_str(value),
                Some(None) => return Err(ArgsError::Missing(name)),
                None => return Err(ArgsError::Undeclared(name)),
            },
            Placeholder::Other(inner) => match other(&inner) {
                Some(value) => out.push_str(&value),
                None => return Err(ArgsError::Unknown(inner)),
            },
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Substitutes in every string of a JSON tree (a whole metric), reporting the first failure with its path.
pub fn substitute_value(
    value: &mut Value,
    args: &BTreeMap<String, Option<String>>,
    other: &dyn Fn(&str) -> Option<String>,
) -> Result<(), (String, ArgsError)> {
    let mut failure = None;
    visit_strings(value, "", &mut |path, s| {
        if failure.is_none() {
            match substitute(s, args, other) {
                Ok(new) => *s = new,
                Err(e) => failure = Some((path.to_string(), e)),
            }
        }
    });
    failure.map_or(Ok(()), Err)
}

/// Calls `f(path, string)` for every string in a JSON tree; paths look like `provider.prometheus.query`.
pub fn visit_strings(value: &mut Value, path: &str, f: &mut dyn FnMut(&str, &mut String)) {
    match value {
        Value::String(s) => f(path, s),
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                visit_strings(v, &format!("{path}[{i}]"), f);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                visit_strings(v, &join(path, k), f);
            }
        }
        _ => {}
    }
}

/// True when `text` consists of placeholders only (`{{args.count}}`): its value is known at run time.
pub fn is_templated(text: &str) -> bool {
    text.contains("{{")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(pairs: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn finds_args_with_and_without_spaces() {
        let found =
            placeholders("a{{args.service}}b{{ args.restarts.max-restarts }}{{window}}").unwrap();
        assert_eq!(
            found,
            vec![
                Placeholder::Arg("service".into()),
                Placeholder::Arg("restarts.max-restarts".into()),
                Placeholder::Other("window".into()),
            ]
        );
    }

    #[test]
    fn an_unterminated_placeholder_is_an_error() {
        assert!(matches!(
            placeholders("x{{args.a"),
            Err(ArgsError::Unterminated(_))
        ));
    }

    #[test]
    fn substitutes_declared_values_and_rejects_the_rest() {
        let a = args(&[("svc", Some("checkout")), ("empty", None)]);
        let none = |_: &str| None;
        assert_eq!(
            substitute("s={{ args.svc }}", &a, &none).unwrap(),
            "s=checkout"
        );
        assert_eq!(
            substitute("{{args.nope}}", &a, &none),
            Err(ArgsError::Undeclared("nope".into()))
        );
        assert_eq!(
            substitute("{{args.empty}}", &a, &none),
            Err(ArgsError::Missing("empty".into()))
        );
        assert_eq!(
            substitute("{{x}}", &a, &none),
            Err(ArgsError::Unknown("x".into()))
        );
        let window = |name: &str| (name == "window").then(|| "300s".to_string());
        assert_eq!(substitute("[{{window}}]", &a, &window).unwrap(), "[300s]");
    }

    #[test]
    fn substitutes_in_every_string_of_a_metric_and_names_the_failing_path() {
        let a = args(&[("svc", Some("web"))]);
        let mut v = json!({"provider": {"prometheus": {"query": "up{svc=\"{{args.svc}}\"}"}}, "count": "{{args.n}}"});
        let err = substitute_value(&mut v, &a, &|_| None).unwrap_err();
        assert_eq!(
            err,
            ("count".to_string(), ArgsError::Undeclared("n".into()))
        );
        let mut v = json!({"provider": {"prometheus": {"query": "up{svc=\"{{args.svc}}\"}"}}});
        substitute_value(&mut v, &a, &|_| None).unwrap();
        assert_eq!(v["provider"]["prometheus"]["query"], "up{svc=\"web\"}");
    }
}
