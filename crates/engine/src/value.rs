//! The value a provider returns and a condition sees as `result`. Providers build it; the engine only reads
//! it. NaN and ±Inf are kept as numbers, as Argo keeps them.

use serde_json::Value as JsonValue;

/// What a metric provider measured.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricValue {
    /// No value at all (`null`); conditions see `nil`.
    Nil,
    /// A Prometheus scalar.
    Number(f64),
    /// A Prometheus vector (server order, labels dropped) or a flattened matrix.
    Numbers(Vec<f64>),
    /// A web or plugin provider's JSON.
    Json(JsonValue),
}

impl MetricValue {
    /// The text Argo stores in `measurement.value`: `0.5`, `[0.99,NaN]`, `{"ok":true}`, empty for nil.
    pub fn render(&self) -> String {
        match self {
            MetricValue::Nil => String::new(),
            MetricValue::Number(n) => render_number(*n),
            MetricValue::Numbers(ns) => {
                let parts: Vec<String> = ns.iter().copied().map(render_number).collect();
                format!("[{}]", parts.join(","))
            }
            MetricValue::Json(JsonValue::String(s)) => s.clone(),
            MetricValue::Json(v) => v.to_string(),
        }
    }
}

/// Numbers as Go's `strconv.FormatFloat(f, 'f', -1, 64)` prints them, with Go's spellings of the specials.
pub fn render_number(n: f64) -> String {
    if n.is_nan() {
        "NaN".to_string()
    } else if n == f64::INFINITY {
        "+Inf".to_string()
    } else if n == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        format!("{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_values_the_way_argo_stores_them() {
        assert_eq!(MetricValue::Number(0.5).render(), "0.5");
        assert_eq!(MetricValue::Number(1.0).render(), "1");
        assert_eq!(
            MetricValue::Numbers(vec![0.99, f64::NAN]).render(),
            "[0.99,NaN]"
        );
        assert_eq!(MetricValue::Numbers(vec![]).render(), "[]");
        assert_eq!(MetricValue::Number(f64::INFINITY).render(), "+Inf");
        assert_eq!(MetricValue::Nil.render(), "");
        assert_eq!(
            MetricValue::Json(serde_json::json!({"ok": true})).render(),
            r#"{"ok":true}"#
        );
        assert_eq!(
            MetricValue::Json(serde_json::json!("It worked!")).render(),
            "It worked!"
        );
    }
}
