//! Rendering an ApplicationSet template string against one parameter set, as Argo CD's two engines do for
//! plain references: fasttemplate's `{{metadata.labels.env}}` and, with `goTemplate: true`,
//! `{{ .metadata.labels.env }}` or `{{ index .metadata.labels "env" }}`. Anything else (pipelines, Sprig
//! functions, conditionals) is reported as not evaluated, never guessed. Owns the tag syntax only; where
//! parameters come from is `params`'s business.

use serde_json::Value;

use super::param_set::ParamSet;

/// The result of rendering one string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendered {
    Known(String),
    /// Depends on something canaryd did not evaluate; the text keeps the tags as written, for display.
    Unknown(String),
}

impl Rendered {
    pub fn known(&self) -> Option<&str> {
        match self {
            Rendered::Known(s) => Some(s),
            Rendered::Unknown(_) => None,
        }
    }

    /// The text to show a person: the value, or the template with its unevaluated tags.
    pub fn shown(&self) -> &str {
        match self {
            Rendered::Known(s) | Rendered::Unknown(s) => s,
        }
    }
}

/// Which template engine the ApplicationSet uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Fasttemplate,
    Go { missing_key_error: bool },
}

/// Renders `text`. A problem (a tag canaryd cannot evaluate, a parameter that does not exist) is pushed
/// to `problems` as a message; the result is then Unknown.
pub fn render(
    text: &str,
    engine: Engine,
    params: &ParamSet,
    problems: &mut Vec<String>,
) -> Rendered {
    let mut out = String::new();
    let mut unknown = false;
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            problems.push(format!("unterminated tag in {text:?}"));
            return Rendered::Unknown(text.to_string());
        };
        let tag = &after[..end];
        let whole = &rest[start..start + 2 + end + 2];
        match resolve(tag, engine, params) {
            Resolved::Value(v) => out.push_str(&v),
            Resolved::FromUnevaluated => {
                unknown = true;
                out.push_str(whole);
            }
            Resolved::Problem(message) => {
                problems.push(message);
                unknown = true;
                out.push_str(whole);
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    if unknown {
        Rendered::Unknown(out)
    } else {
        Rendered::Known(out)
    }
}

enum Resolved {
    Value(String),
    /// The parameter may come from a generator canaryd did not evaluate.
    FromUnevaluated,
    Problem(String),
}

fn resolve(tag: &str, engine: Engine, params: &ParamSet) -> Resolved {
    let path = match engine {
        Engine::Fasttemplate => Some(tag.trim().to_string()),
        Engine::Go { .. } => go_reference(tag),
    };
    let Some(path) = path else {
        return Resolved::Problem(format!(
            "{{{{{tag}}}}} is not evaluated by canaryd (it reads plain field references such as \
             {{{{ .name }}}} and {{{{ index .metadata.labels \"env\" }}}})"
        ));
    };
    match params.lookup(&path) {
        Some(Value::String(s)) => Resolved::Value(s.clone()),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Resolved::Value(v.to_string()),
        Some(_) => Resolved::Problem(format!("{{{{{tag}}}}} names a list or map, not a value")),
        None if params.has_unevaluated() => Resolved::FromUnevaluated,
        None => Resolved::Problem(match engine {
            Engine::Fasttemplate => format!(
                "{{{{{tag}}}}}: no generator gives the parameter {path:?} (Argo CD leaves the tag as written)"
            ),
            Engine::Go {
                missing_key_error: true,
            } => format!(
                "{{{{{tag}}}}}: no generator gives the parameter {path:?} (with missingkey=error Argo CD \
                 fails to generate the Application)"
            ),
            Engine::Go { .. } => format!(
                "{{{{{tag}}}}}: no generator gives the parameter {path:?} (Argo CD renders \"<no value>\")"
            ),
        }),
    }
}

/// The dotted path a Go template tag reads, for `.a.b` and `index .a.b "c"` (chains of string keys), or
/// None for anything else.
fn go_reference(tag: &str) -> Option<String> {
    let inner = tag.trim();
    let inner = inner.strip_prefix('-').unwrap_or(inner);
    let inner = inner.strip_suffix('-').unwrap_or(inner).trim();
    if let Some(args) = inner.strip_prefix("index ") {
        let mut words = args.split_whitespace();
        let first = words.next()?;
        let mut path = if first == "." {
            String::new()
        } else {
            field_path(first)?
        };
        for key in words {
            let key = key.strip_prefix('"')?.strip_suffix('"')?;
            if key.is_empty() || key.contains('"') {
                return None;
            }
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(key);
        }
        return (!path.is_empty()).then_some(path);
    }
    field_path(inner)
}

fn field_path(word: &str) -> Option<String> {
    let path = word.strip_prefix('.')?;
    let plain = path
        .split('.')
        .all(|part| !part.is_empty() && part.chars().all(|c| c.is_alphanumeric() || c == '_'));
    plain.then(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> ParamSet {
        ParamSet::known(v)
    }

    fn go() -> Engine {
        Engine::Go {
            missing_key_error: false,
        }
    }

    #[test]
    fn fasttemplate_reads_flat_and_nested_parameters() {
        let p = params(json!({"name": "prod-east", "metadata": {"labels": {"env": "prod"}}}));
        let mut problems = Vec::new();
        let r = render(
            "app-{{name}}-{{ metadata.labels.env }}",
            Engine::Fasttemplate,
            &p,
            &mut problems,
        );
        assert_eq!(r, Rendered::Known("app-prod-east-prod".into()));
        assert!(problems.is_empty());
    }

    #[test]
    fn go_templates_read_fields_and_index_expressions() {
        let p = params(json!({"name": "qa", "metadata": {"labels": {"env": "qa"}}}));
        let mut problems = Vec::new();
        let r = render(
            "{{ .name }}-{{index .metadata.labels \"env\"}}-{{- .name -}}-{{ index . \"name\" }}",
            go(),
            &p,
            &mut problems,
        );
        assert_eq!(r, Rendered::Known("qa-qa-qa-qa".into()));
    }

    #[test]
    fn a_pipeline_is_named_as_not_evaluated_rather_than_guessed() {
        let p = params(json!({"name": "qa"}));
        let mut problems = Vec::new();
        let r = render("{{ .name | upper }}", go(), &p, &mut problems);
        assert_eq!(r, Rendered::Unknown("{{ .name | upper }}".into()));
        assert!(problems[0].contains("is not evaluated"), "{problems:?}");
    }

    #[test]
    fn a_missing_parameter_says_what_argo_cd_does_with_it() {
        let p = params(json!({"name": "qa"}));
        let mut problems = Vec::new();
        render("{{ .cluster }}", go(), &p, &mut problems);
        render("{{cluster}}", Engine::Fasttemplate, &p, &mut problems);
        assert!(problems[0].contains("<no value>"), "{problems:?}");
        assert!(
            problems[1].contains("leaves the tag as written"),
            "{problems:?}"
        );
    }
}
