//! An object's JSON text without `metadata.managedFields`, cut out before the object is decoded. The API server
//! keeps on every object its record of which client set which field (each entry's `fieldsV1` a tree of the
//! object's field names, often larger than the spec). Nothing canaryd does reads it, and the watches drop it
//! from every object they cache; decoded, it is a JSON tree built for each watch event and list item only to be
//! dropped. Owns only the text: decoding it is the watch's.

use std::borrow::Cow;

use canaryd_engine::json_fields::{self, Name};
use serde_json::value::RawValue;

const FIELD: &str = "managedFields";

/// `text` without the `managedFields` of its `metadata`; as it is when it has none, and when it is not an
/// object whose keys (and its metadata's) are plain strings: then it is decoded as it is, the field with it.
pub fn without(text: &str) -> Cow<'_, str> {
    if !text.contains("\"managedFields\"") {
        return Cow::Borrowed(text);
    }
    cut(text).map_or(Cow::Borrowed(text), Cow::Owned)
}

/// The text of the object `text` with its metadata's `managedFields` left out, its other fields as they were
/// (in their order, each value's text untouched); `None` when there is no such field to leave out.
fn cut(text: &str) -> Option<String> {
    let object = plain_fields(text)?;
    let metadata = object
        .iter()
        .find(|(name, _)| name.0 == "metadata")
        .and_then(|(_, m)| plain_fields(m.get()))?;
    if !metadata.iter().any(|(name, _)| name.0 == FIELD) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut metadata_written = false;
    write_object(&mut out, &object, |out, name, value| {
        if name == "metadata" && !metadata_written {
            metadata_written = true;
            write_object(out, &metadata, |out, name, value| {
                if name != FIELD {
                    out.push_str(value);
                }
                name != FIELD
            });
        } else {
            out.push_str(value);
        }
        true
    });
    Some(out)
}

/// The fields of the object `text` in their order, when no name has an escape: one that has is left to be
/// decoded as sent, the text uncut.
fn plain_fields(text: &str) -> Option<Vec<(Name<'_>, &RawValue)>> {
    let fields = json_fields::fields(text)?;
    fields
        .iter()
        .all(|(name, _)| name.is_borrowed())
        .then_some(fields)
}

/// Writes `{"name":value,...}` of `fields`, each value written by `value` (which returns false to leave the
/// field out, having written nothing).
fn write_object(
    out: &mut String,
    fields: &[(Name<'_>, &RawValue)],
    mut value: impl FnMut(&mut String, &str, &str) -> bool,
) {
    out.push('{');
    let mut first = true;
    for (name, raw) in fields {
        let start = out.len();
        if !first {
            out.push(',');
        }
        name.write(out);
        out.push(':');
        if value(out, &name.0, raw.get()) {
            first = false;
        } else {
            out.truncate(start);
        }
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// `object` as the API server sends it: with managed fields.
    fn managed(mut object: Value) -> Value {
        object["metadata"][FIELD] = json!([
            {"manager": "canaryd", "operation": "Update", "apiVersion": "apps/v1",
             "time": "2026-12-06T10:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                          "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {}}}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}}
        ]);
        object
    }

    fn replica_set() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "prod", "resourceVersion": "7",
                         "labels": {"app": "web"},
                         "annotations": {"note": "\"managedFields\": in a value is not the field"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "web", "image": "web:1"}]}}},
            "status": {"replicas": 3}
        })
    }

    #[test]
    fn the_managed_fields_are_cut_and_every_other_field_kept_in_its_order() {
        let plain = replica_set();
        let text = serde_json::to_string(&managed(plain.clone())).unwrap();
        let cut = without(&text);
        assert!(matches!(cut, Cow::Owned(_)));
        assert_eq!(serde_json::from_str::<Value>(&cut).unwrap(), plain);
        // Every value's text as sent: the same text as the object never managed.
        assert_eq!(cut, serde_json::to_string(&plain).unwrap());
        // The fields in the order sent (not sorted), values untouched, whitespace between fields dropped; the
        // managed fields first, in the middle, last or alone.
        for (text, want) in [
            (
                r#"{"spec":{"b": 1,"a":2},"metadata":{"managedFields":[{"f":{}}],"name":"a","labels":{"z":"1"}}}"#,
                r#"{"spec":{"b": 1,"a":2},"metadata":{"name":"a","labels":{"z":"1"}}}"#,
            ),
            (
                r#"{"metadata":{"name":"a","managedFields":[],"uid":"u"},"kind":"ReplicaSet"}"#,
                r#"{"metadata":{"name":"a","uid":"u"},"kind":"ReplicaSet"}"#,
            ),
            (
                r#"{ "metadata" : { "name" : "a" , "managedFields" : [ ] } }"#,
                r#"{"metadata":{"name":"a"}}"#,
            ),
            (
                r#"{"kind":"ReplicaSet","metadata":{"managedFields":[]}}"#,
                r#"{"kind":"ReplicaSet","metadata":{}}"#,
            ),
        ] {
            assert_eq!(without(text), want);
        }
    }

    #[test]
    fn text_without_managed_fields_or_that_cannot_be_cut_is_left_as_it_is() {
        let cases = [
            // None: the words are only in a value, where their quotes are escaped.
            serde_json::to_string(&replica_set()).unwrap(),
            // Not in the metadata.
            json!({"metadata": {"name": "a"}, "spec": {FIELD: []}}).to_string(),
            // A key with an escape: decoded as sent, the field with it.
            r#"{"metadata":{"name":"a","managedFields":[]},"sp\u0065c":{}}"#.to_string(),
            // Not an object, not JSON: the decode says what is wrong, as before.
            r#"["managedFields"]"#.to_string(),
            r#"{"metadata":{"managedFields":[]"#.to_string(),
            // Metadata that is not an object.
            r#"{"metadata":"managedFields"}"#.to_string(),
        ];
        for text in cases {
            assert!(
                matches!(without(&text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
    }

    #[test]
    fn an_object_that_repeats_its_metadata_keeps_the_repeat() {
        // serde refuses a repeated field: the text after the cut must still have it to be refused.
        let text = r#"{"metadata":{"name":"a","managedFields":[]},"metadata":{}}"#;
        assert_eq!(without(text), r#"{"metadata":{"name":"a"},"metadata":{}}"#);
    }
}
