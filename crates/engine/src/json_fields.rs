//! A JSON object's fields read from its text without decoding their values: each name borrowed from the text
//! when it has no escapes, each value the text it was sent as. One home for the status write's merge patch
//! ([`crate::merge_patch::diff_of`]) and the daemon's cut of `metadata.managedFields`, which both rewrite an
//! object from its fields' text.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// A field's name as its object's text holds it: borrowed when it has no escapes (so reading the fields of an
/// object allocates no name), a copy when it has.
#[derive(Debug, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Name<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl Name<'_> {
    /// Whether the name is the text between its quotes, which had no escape.
    pub fn is_borrowed(&self) -> bool {
        matches!(self.0, Cow::Borrowed(_))
    }

    /// Appends the name as a JSON string: a borrowed one between quotes as it was (it needs no escape), a
    /// copy serialized.
    pub fn write(&self, out: &mut String) {
        match &self.0 {
            Cow::Borrowed(name) => {
                out.push('"');
                out.push_str(name);
                out.push('"');
            }
            Cow::Owned(name) => out.push_str(&Value::String(name.clone()).to_string()),
        }
    }
}

/// The fields of the object `text`, in the order of the text; `None` when it is not a JSON object.
pub fn fields(text: &str) -> Option<Vec<(Name<'_>, &RawValue)>> {
    serde_json::from_str::<InOrder<'_>>(text).ok().map(|f| f.0)
}

/// An object's fields in the order of its text.
struct InOrder<'a>(Vec<(Name<'a>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for InOrder<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Collect<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Collect<'a> {
            type Value = InOrder<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<InOrder<'a>, M::Error> {
                let mut fields = Vec::new();
                while let Some(field) = map.next_entry::<Name<'de>, &'de RawValue>()? {
                    fields.push(field);
                }
                Ok(InOrder(fields))
            }
        }
        deserializer.deserialize_map(Collect(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_their_order_and_text_and_names_without_escapes_are_borrowed() {
        let text = r#"{"b": [1, 2],"a\n":{"x":1},"c":"\u0065"}"#;
        let read = fields(text).expect("an object");
        let names: Vec<&str> = read.iter().map(|(n, _)| n.0.as_ref()).collect();
        assert_eq!(names, ["b", "a\n", "c"]);
        let borrowed: Vec<bool> = read.iter().map(|(n, _)| n.is_borrowed()).collect();
        assert_eq!(borrowed, [true, false, true]);
        let values: Vec<&str> = read.iter().map(|(_, v)| v.get()).collect();
        assert_eq!(values, ["[1, 2]", r#"{"x":1}"#, r#""\u0065""#]);
    }

    #[test]
    fn a_name_is_written_as_serde_json_writes_it() {
        let read = fields(r#"{"plain":0,"quote\"d":0,"tab\t":0,"\u0061":0}"#).expect("an object");
        for (name, _) in &read {
            let mut out = String::new();
            name.write(&mut out);
            assert_eq!(out, serde_json::to_string(name.0.as_ref()).unwrap());
        }
    }

    #[test]
    fn what_is_not_an_object_has_no_fields() {
        for text in ["[1]", "\"a\"", "1", "{\"a\":", "", "{\"a\":1}x"] {
            assert!(fields(text).is_none(), "{text}");
        }
    }
}
