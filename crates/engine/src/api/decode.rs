//! Decoding JSON into the wire types strictly: the path of a type error, and every field the user wrote that
//! the type does not know (a misspelling), with a "did you mean". Serde itself ignores unknown fields, which
//! keeps decoding lenient for objects read from the API server; `validate` and the CLI use this instead.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A JSON value's kind as a message names it ("a string", "an object"); `list` is how an array is called
/// where the message is read ("a list" in a Kubernetes spec, "an array" in a JSON path).
pub fn kind_of(v: &Value, list: &'static str) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => list,
        Value::Object(_) => "an object",
    }
}

/// A field the target type failed on, or does not know.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

/// Decodes a document into `T`. On success, also returns every field the document has that `T` does not
/// know: serializing `T` back must give every key the user wrote, or that key was dropped.
pub fn decode<T>(value: &Value) -> Result<(T, Vec<FieldError>), FieldError>
where
    T: DeserializeOwned + serde::Serialize,
{
    let typed: T = typed(value)?;
    let back = serde_json::to_value(&typed).map_err(|e| FieldError {
        path: String::new(),
        message: e.to_string(),
    })?;
    let mut unknown = Vec::new();
    unknown_fields(value, &back, "", &mut unknown);
    Ok((typed, unknown))
}

/// Decodes a document into `T` leniently, as serde does (unknown fields ignored), naming the path of a type
/// error: for objects read from the API server, where another client may have stored what `T` cannot hold.
pub fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        FieldError {
            path: if path == "." { String::new() } else { path },
            message,
        }
    })
}

fn unknown_fields(written: &Value, kept: &Value, path: &str, out: &mut Vec<FieldError>) {
    match (written, kept) {
        (Value::Object(w), Value::Object(k)) => {
            for (key, wv) in w {
                let child = join(path, key);
                match k.get(key) {
                    Some(kv) => unknown_fields(wv, kv, &child, out),
                    // An explicit null for an optional field is "not set", which Kubernetes treats the same.
                    None if wv.is_null() => {}
                    None => out.push(FieldError {
                        message: format!("unknown field {key:?}{}", suggestion(key)),
                        path: child,
                    }),
                }
            }
        }
        (Value::Array(w), Value::Array(k)) => {
            for (i, (wv, kv)) in w.iter().zip(k).enumerate() {
                unknown_fields(wv, kv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// ", did you mean \"interval\"?" when a known field name is near; for a field that exists, but at another
/// level (`provider` written beside `metrics`), where it belongs.
fn suggestion(key: &str) -> String {
    if let Some((_, home)) = HOMES.iter().find(|(field, _)| *field == key) {
        return format!(", did you mean to indent it under {home}?");
    }
    if KNOWN_FIELDS.contains(&key) {
        return ": it is a field of another level here, check its indentation".to_string();
    }
    match closest_field(key) {
        Some(s) => format!(", did you mean {s:?}?"),
        None => String::new(),
    }
}

/// Where each field that has one home in an analysis template belongs: what a field one level too deep or
/// too shallow is pointed to.
const HOMES: &[(&str, &str)] = &[
    ("metrics", "spec"),
    ("dryRun", "spec"),
    ("measurementRetention", "spec"),
    ("interval", "spec.metrics[]"),
    ("initialDelay", "spec.metrics[]"),
    ("count", "spec.metrics[]"),
    ("successCondition", "spec.metrics[]"),
    ("failureCondition", "spec.metrics[]"),
    ("failureLimit", "spec.metrics[]"),
    ("inconclusiveLimit", "spec.metrics[]"),
    ("consecutiveErrorLimit", "spec.metrics[]"),
    ("consecutiveSuccessLimit", "spec.metrics[]"),
    ("provider", "spec.metrics[]"),
    ("prometheus", "spec.metrics[].provider"),
    ("web", "spec.metrics[].provider"),
    ("plugin", "spec.metrics[].provider"),
    ("query", "spec.metrics[].provider.prometheus"),
    ("rangeQuery", "spec.metrics[].provider.prometheus"),
    ("jsonPath", "spec.metrics[].provider.web"),
    ("url", "spec.metrics[].provider.web"),
];

/// Every field name canaryd's analysis types know, for "did you mean".
const KNOWN_FIELDS: &[&str] = &[
    "metrics",
    "args",
    "dryRun",
    "measurementRetention",
    "templates",
    "templateName",
    "clusterScope",
    "name",
    "interval",
    "initialDelay",
    "count",
    "successCondition",
    "failureCondition",
    "failureLimit",
    "inconclusiveLimit",
    "consecutiveErrorLimit",
    "consecutiveSuccessLimit",
    "provider",
    "prometheus",
    "web",
    "plugin",
    "address",
    "query",
    "authentication",
    "timeout",
    "insecure",
    "headers",
    "rangeQuery",
    "start",
    "end",
    "step",
    "method",
    "url",
    "body",
    "jsonBody",
    "timeoutSeconds",
    "jsonPath",
    "value",
    "valueFrom",
    "secretKeyRef",
    "fieldRef",
    "fieldPath",
    "key",
    "metricName",
    "limit",
    "terminate",
    "ttlStrategy",
    "sigv4",
    "oauth2",
    "basicAuth",
    "tokenUrl",
    "clientId",
    "clientSecret",
    "scopes",
    "username",
    "password",
    "region",
    "profile",
    "roleArn",
    "secondsAfterCompletion",
    "secondsAfterFailure",
    "secondsAfterSuccess",
    "errorRate",
    "distribution",
    "canary",
    "baseline",
    "errors",
    "requests",
    "maxRelativeIncrease",
    "maxAbsoluteIncrease",
    "confidence",
    "minRequests",
    "direction",
    "maxRelativeShift",
    "minSamples",
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "status",
    "labels",
    "annotations",
    "namespace",
    "generateName",
];

fn closest_field(key: &str) -> Option<&'static str> {
    crate::suggest::closest(key, KNOWN_FIELDS.iter().copied())
}

pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decode_lists_fields_the_type_does_not_know_with_a_suggestion() {
        let value = json!({"name": "m", "intervall": "5m", "provider": {"prometheus": {"query": "up", "adress": "x"}}});
        let (_, unknown) = decode::<crate::api::Metric>(&value).expect("decodes");
        let paths: Vec<_> = unknown
            .iter()
            .map(|u| (u.path.as_str(), u.message.as_str()))
            .collect();
        assert_eq!(
            paths,
            vec![
                (
                    "intervall",
                    "unknown field \"intervall\", did you mean \"interval\"?"
                ),
                (
                    "provider.prometheus.adress",
                    "unknown field \"adress\", did you mean \"address\"?"
                ),
            ]
        );
    }

    #[test]
    fn a_known_field_at_the_wrong_level_is_called_misplaced_not_misspelled() {
        let value = json!({"name": "m", "prometheus": {"query": "up"}, "provider": {}});
        let (_, unknown) = decode::<crate::api::Metric>(&value).expect("decodes");
        assert_eq!(
            unknown.first().map(|u| u.message.as_str()),
            Some(
                "unknown field \"prometheus\", did you mean to indent it under spec.metrics[].provider?"
            )
        );
    }

    #[test]
    fn decode_names_the_path_of_a_type_error() {
        let value = json!({"name": "m", "provider": {"prometheus": {"timeout": "soon"}}});
        let err = decode::<crate::api::Metric>(&value).expect_err("type error");
        assert_eq!(err.path, "provider.prometheus.timeout");
        assert!(err.message.contains("invalid type"), "{}", err.message);
    }
}
