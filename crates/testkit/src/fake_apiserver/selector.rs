//! Label and field selectors as kube-apiserver parses them from `labelSelector=` and `fieldSelector=`. Owns the
//! grammar and matching only; it knows nothing of storage or HTTP.

use serde_json::{Map, Value};

/// One requirement of a label selector. `!=` and `notin` match objects without the key, as in Kubernetes.
#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector`; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, String> {
        split_top_level(text)
            .into_iter()
            .filter(|part| !part.trim().is_empty())
            .map(|part| parse_requirement(part.trim()))
            .collect::<Result<Vec<_>, _>>()
            .map(LabelSelector)
    }

    /// A `key=value` requirement of the selector, if it has one: a list can start from the objects with that
    /// label (`Store::list_selected`) rather than look at every object of the kind.
    pub fn an_equality(&self) -> Option<(&str, &str)> {
        self.0.iter().find_map(|requirement| match requirement {
            Requirement::Equals(key, value) => Some((key.as_str(), value.as_str())),
            _ => None,
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        // `get`, not `pointer`: this runs for every object a list or a watch looks at.
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        let label = |key: &str| {
            labels
                .and_then(|l: &Map<String, Value>| l.get(key))
                .and_then(Value::as_str)
        };
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(key, value) => label(key) == Some(value.as_str()),
            Requirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
            Requirement::In(key, values) => {
                label(key).is_some_and(|v| values.iter().any(|w| w == v))
            }
            Requirement::NotIn(key, values) => {
                !label(key).is_some_and(|v| values.iter().any(|w| w == v))
            }
            Requirement::Exists(key) => label(key).is_some(),
            Requirement::NotExists(key) => label(key).is_none(),
        })
    }
}

/// Commas inside `in (a,b)` do not separate requirements.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::NotExists(checked_key(key.trim())?));
    }
    if let Some(open) = part.find('(') {
        let close = part
            .rfind(')')
            .filter(|&c| c > open)
            .ok_or(format!("unclosed set in {part:?}"))?;
        let mut head = part[..open].split_whitespace();
        let (key, operator) = (
            head.next().unwrap_or_default(),
            head.next().unwrap_or_default(),
        );
        let values = part[open + 1..close]
            .split(',')
            .map(|v| v.trim().to_owned())
            .collect();
        return match operator {
            "in" => Ok(Requirement::In(checked_key(key)?, values)),
            "notin" => Ok(Requirement::NotIn(checked_key(key)?, values)),
            other => Err(format!("unknown set operator {other:?} in {part:?}")),
        };
    }
    if let Some((key, value)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(
            checked_key(key.trim())?,
            value.trim().to_owned(),
        ));
    }
    if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(
            checked_key(key.trim())?,
            value.trim().to_owned(),
        ));
    }
    if part.contains(['<', '>']) {
        return Err(format!(
            "numeric label comparisons are not supported by this fake: {part:?}"
        ));
    }
    Ok(Requirement::Exists(checked_key(part)?))
}

fn checked_key(key: &str) -> Result<String, String> {
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(key.to_owned())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

/// A parsed `fieldSelector`: only `metadata.name` and `metadata.namespace`, which every resource supports
/// (each term as the metadata field, `=` or `!=`, the value).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(&'static str, bool, String)>);

impl FieldSelector {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!("invalid field selector term {part:?}"));
            };
            let field = match field.trim() {
                "metadata.name" => "name",
                "metadata.namespace" => "namespace",
                other => return Err(format!("field label not supported: {other}")),
            };
            terms.push((field, equal, value.trim().to_owned()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = object
                .get("metadata")
                .and_then(|m| m.get(field))
                .and_then(Value::as_str)
                .unwrap_or_default();
            (actual == value) == *equal
        })
    }
}
