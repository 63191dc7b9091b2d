//! An object's JSON text without `metadata.managedFields`, cut out before the object is decoded. The API server
//! keeps on every object its record of which client set which field (each entry's `fieldsV1` a tree of the
//! object's field names, often larger than the spec). Nothing canaryd does reads it, and the watches drop it
//! from every object they cache; decoded, it is a JSON tree built for each watch event and list item only to be
//! dropped. Owns only the text: decoding it is the watch's.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
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
    let Fields(object) = serde_json::from_str(text).ok()?;
    let Fields(metadata) = object
        .iter()
        .find(|(key, _)| *key == "metadata")
        .and_then(|(_, m)| serde_json::from_str(m.get()).ok())?;
    if !metadata.iter().any(|(key, _)| *key == FIELD) {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut metadata_written = false;
    write_object(&mut out, &object, |out, key, value| {
        if key == "metadata" && !metadata_written {
            metadata_written = true;
            write_object(out, &metadata, |out, key, value| {
                if key != FIELD {
                    out.push_str(value);
                }
                key != FIELD
            });
        } else {
            out.push_str(value);
        }
        true
    });
    Some(out)
}

/// Writes `{"key":value,...}` of `fields`, each value written by `value` (which returns false to leave the
/// field out, having written nothing).
fn write_object(
    out: &mut String,
    fields: &[(&str, &RawValue)],
    mut value: impl FnMut(&mut String, &str, &str) -> bool,
) {
    out.push('{');
    let mut first = true;
    for (key, raw) in fields {
        let start = out.len();
        if !first {
            out.push(',');
        }
        // A borrowed key had no escapes: its text is the key between quotes.
        out.push('"');
        out.push_str(key);
        out.push_str("\":");
        if value(out, key, raw.get()) {
            first = false;
        } else {
            out.truncate(start);
        }
    }
    out.push('}');
}

/// An object's fields in order, keys and values borrowed from the text (a key with an escape cannot be, and
/// fails the parse).
struct Fields<'a>(Vec<(&'a str, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Fields<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Collect<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Collect<'a> {
            type Value = Fields<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Fields<'a>, M::Error> {
                let mut fields = Vec::new();
                while let Some(field) = map.next_entry::<&'de str, &'de RawValue>()? {
                    fields.push(field);
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(Collect(std::marker::PhantomData))
    }
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
