//! The web provider's `jsonPath`, in the kubectl style Argo uses: `{$.data.ok}`, `{.data.ok}`,
//! `{$.results[0].value}`, `{$.items[*].name}`, `{$['key with.dots']}`, `{$.list[-1]}`, `{$}`. Owns parsing a
//! path and selecting from a JSON document; pure. Filters, slices, unions and recursive descent are refused
//! with a message rather than guessed at.

use serde_json::Value;

/// Why a path cannot be parsed or selects nothing; messages name the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonPathError {
    #[error("jsonPath {path}: {reason}")]
    Syntax { path: String, reason: String },
    #[error("jsonPath {path} selects nothing in the response: {reason}")]
    NoMatch { path: String, reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    steps: Vec<Step>,
}

impl JsonPath {
    pub fn parse(text: &str) -> Result<Self, JsonPathError> {
        let syntax = |reason: &str| JsonPathError::Syntax {
            path: text.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = text.trim();
        let inner = match trimmed.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            Some(inner) => inner.trim(),
            None => trimmed,
        };
        if inner.contains('{') || inner.contains('}') {
            return Err(syntax(
                "write a single {...} expression with no text around it",
            ));
        }
        let mut rest = inner.strip_prefix('$').unwrap_or(inner);
        let mut steps = Vec::new();
        while !rest.is_empty() {
            if rest.starts_with("..") {
                return Err(syntax("recursive descent (..) is not supported"));
            } else if let Some(after) = rest.strip_prefix('.') {
                let end = after.find(['.', '[']).unwrap_or(after.len());
                let name = after.get(..end).unwrap_or("");
                match name {
                    "" => return Err(syntax("a field name is missing after '.'")),
                    "*" => steps.push(Step::Wildcard),
                    _ => steps.push(Step::Field(name.to_string())),
                }
                rest = after.get(end..).unwrap_or("");
            } else if let Some(after) = rest.strip_prefix('[') {
                let (step, remaining) = bracket(after).map_err(|r| syntax(&r))?;
                steps.push(step);
                rest = remaining;
            } else {
                return Err(syntax("expected '.' or '[' (write e.g. {$.data.value})"));
            }
        }
        Ok(JsonPath {
            text: text.to_string(),
            steps,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Every value the path selects, in document order. Empty is an error naming where it ran dry.
    pub fn select<'a>(&self, doc: &'a Value) -> Result<Vec<&'a Value>, JsonPathError> {
        let mut current = vec![doc];
        let mut walked = String::from("$");
        for step in &self.steps {
            let mut next = Vec::new();
            for v in &current {
                match (step, v) {
                    (Step::Field(name), Value::Object(map)) => next.extend(map.get(name)),
                    (Step::Index(i), Value::Array(items)) => {
                        let index = if *i < 0 {
                            items.len().checked_sub(i.unsigned_abs() as usize)
                        } else {
                            Some(*i as usize)
                        };
                        next.extend(index.and_then(|i| items.get(i)));
                    }
                    (Step::Wildcard, Value::Array(items)) => next.extend(items.iter()),
                    (Step::Wildcard, Value::Object(map)) => next.extend(map.values()),
                    _ => {}
                }
            }
            if next.is_empty() {
                let what = match (step, current.as_slice()) {
                    (Step::Field(name), [Value::Object(_)]) => {
                        format!("no key {name:?} at {walked}")
                    }
                    (Step::Index(i), [Value::Array(a)]) => {
                        format!("index {i} is out of range at {walked} ({} items)", a.len())
                    }
                    (Step::Wildcard, [Value::Array(_) | Value::Object(_)]) => {
                        format!("{walked} is empty")
                    }
                    (_, [one]) => format!("{walked} is {}, not {}", kind(one), wanted(step)),
                    _ => format!("no element of {walked} has {}", describe(step)),
                };
                return Err(JsonPathError::NoMatch {
                    path: self.text.clone(),
                    reason: what,
                });
            }
            walked.push_str(&describe(step));
            current = next;
        }
        Ok(current)
    }
}

fn bracket(after: &str) -> Result<(Step, &str), String> {
    let close = after
        .find(']')
        .ok_or_else(|| "a '[' is not closed".to_string())?;
    let inside = after.get(..close).unwrap_or("").trim();
    let rest = after.get(close + 1..).unwrap_or("");
    let quoted = |q: char| {
        inside
            .strip_prefix(q)
            .and_then(|s| s.strip_suffix(q))
            .map(str::to_string)
    };
    let step = if inside == "*" {
        Step::Wildcard
    } else if let Some(name) = quoted('\'').or_else(|| quoted('"')) {
        Step::Field(name)
    } else if let Ok(i) = inside.parse::<i64>() {
        Step::Index(i)
    } else if inside.starts_with('?') {
        return Err("filters [?(...)] are not supported".to_string());
    } else if inside.contains(':') || inside.contains(',') {
        return Err("slices and unions inside [...] are not supported".to_string());
    } else {
        return Err(format!("[{inside}] is not an index, * or a quoted key"));
    };
    Ok((step, rest))
}

fn describe(step: &Step) -> String {
    match step {
        Step::Field(name)
            if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-') =>
        {
            format!(".{name}")
        }
        Step::Field(name) => format!("[{name:?}]"),
        Step::Index(i) => format!("[{i}]"),
        Step::Wildcard => "[*]".to_string(),
    }
}

fn wanted(step: &Step) -> &'static str {
    match step {
        Step::Field(_) => "an object",
        Step::Index(_) => "an array",
        Step::Wildcard => "an array or object",
    }
}

fn kind(v: &Value) -> &'static str {
    crate::api::decode::kind_of(v, "an array")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn select(path: &str, doc: &Value) -> Result<Vec<Value>, JsonPathError> {
        JsonPath::parse(path)?
            .select(doc)
            .map(|vs| vs.into_iter().cloned().collect())
    }

    #[test]
    fn selects_fields_indexes_and_wildcards_the_kubectl_way() {
        let doc = json!({
            "data": {"ok": true, "odd.key": 3},
            "results": [{"value": 0.5}, {"value": 0.7}],
            "items": [{"name": "a"}, {"name": "b"}, {"other": 1}]
        });
        assert_eq!(select("{$.data.ok}", &doc).unwrap(), vec![json!(true)]);
        assert_eq!(select("{.data.ok}", &doc).unwrap(), vec![json!(true)]);
        assert_eq!(select("$.data.ok", &doc).unwrap(), vec![json!(true)]);
        assert_eq!(
            select("{$.results[0].value}", &doc).unwrap(),
            vec![json!(0.5)]
        );
        assert_eq!(
            select("{$.results[-1].value}", &doc).unwrap(),
            vec![json!(0.7)]
        );
        assert_eq!(
            select("{$.items[*].name}", &doc).unwrap(),
            vec![json!("a"), json!("b")]
        );
        assert_eq!(select("{$.data['odd.key']}", &doc).unwrap(), vec![json!(3)]);
        assert_eq!(select("{ $ }", &doc).unwrap(), vec![doc.clone()]);
    }

    #[test]
    fn a_path_that_selects_nothing_says_where() {
        let doc = json!({"data": {"ok": true}, "list": [1], "pair": [1, 2], "n": 1});
        let cases = [
            ("{$.data.missing}", "no key \"missing\" at $.data"),
            ("{$.list[3]}", "index 3 is out of range at $.list (1 items)"),
            ("{$.n.x}", "$.n is a number, not an object"),
            ("{$.list[*].x}", "$.list[*] is a number, not an object"),
            ("{$.pair[*].x}", "no element of $.pair[*] has .x"),
        ];
        for (path, reason) in cases {
            let err = select(path, &doc).unwrap_err();
            assert_eq!(
                err,
                JsonPathError::NoMatch {
                    path: path.to_string(),
                    reason: reason.to_string()
                }
            );
            assert!(err.to_string().contains(path));
        }
    }

    #[test]
    fn unsupported_syntax_is_refused_by_name() {
        for (path, reason) in [
            ("{$..name}", "recursive descent"),
            ("{$.items[?(@.x==1)]}", "filters"),
            ("{$.items[0:2]}", "slices"),
            ("{$.a", "a single {...} expression"),
            ("value: {$.a}", "a single {...} expression"),
            ("{$.a[}", "not closed"),
            ("{$.}", "field name is missing"),
        ] {
            let err = JsonPath::parse(path).unwrap_err().to_string();
            assert!(err.contains(reason), "{path}: {err}");
        }
    }
}
