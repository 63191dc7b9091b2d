//! The parameters one generated Application is rendered with ([`ParamSet`]): the values a generator gave,
//! looked up by dotted path, combined as matrix and merge generators combine them, and whether a generator
//! canaryd does not evaluate contributed some. `params` makes them; `render` reads them.

use serde_json::{Map, Value};

/// The parameters one generated Application is rendered with.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParamSet {
    values: Map<String, Value>,
    /// Generators that contributed parameters canaryd did not evaluate (described for messages).
    unevaluated: Vec<String>,
}

impl ParamSet {
    /// A set whose parameters are all known (`values` must be an object; anything else gives no params).
    pub fn known(values: Value) -> ParamSet {
        ParamSet {
            values: match values {
                Value::Object(map) => map,
                _ => Map::new(),
            },
            unevaluated: Vec::new(),
        }
    }

    pub(super) fn unevaluated(what: String) -> ParamSet {
        ParamSet {
            values: Map::new(),
            unevaluated: vec![what],
        }
    }

    /// Sets the parameter `key` (a cluster generator's `values` after rendering).
    pub(super) fn insert(&mut self, key: &str, value: Value) {
        self.values.insert(key.to_string(), value);
    }

    /// Takes on `other`'s unevaluated generators: its parameters may override any of this set's.
    pub(super) fn unevaluated_from(&mut self, other: &ParamSet) {
        self.unevaluated.extend(other.unevaluated.iter().cloned());
    }

    pub fn has_unevaluated(&self) -> bool {
        !self.unevaluated.is_empty()
    }

    /// A parameter by its dotted path: a flat key first (fasttemplate's flattened params, list elements
    /// with dotted keys), then a walk through nested maps.
    pub fn lookup(&self, path: &str) -> Option<&Value> {
        if let Some(v) = self.values.get(path) {
            return Some(v);
        }
        let mut parts = path.split('.');
        let mut current = self.values.get(parts.next()?)?;
        for part in parts {
            current = current.get(part)?;
        }
        Some(current)
    }

    /// Both sets' parameters, `other`'s winning (the matrix and merge rule).
    pub(super) fn combined(&self, other: &ParamSet) -> ParamSet {
        let mut values = Value::Object(self.values.clone());
        deep_merge(&mut values, &Value::Object(other.values.clone()));
        let mut unevaluated = self.unevaluated.clone();
        unevaluated.extend(other.unevaluated.iter().cloned());
        ParamSet {
            values: match values {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            unevaluated,
        }
    }
}

fn deep_merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                deep_merge(a.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}
