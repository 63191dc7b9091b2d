//! Hiding secret values: the one rule for everything canaryd shows or writes (provider errors, measurement
//! values and messages, status patches, Events). Every non-empty secret is replaced by `*****`, the longest
//! first, so a secret that contains another is hidden whole rather than leaving the rest of it in the text.

use serde_json::Value;

/// What a hidden value reads as.
pub const REDACTED: &str = "*****";

/// `text` with every non-empty secret value in it replaced by [`REDACTED`].
pub fn text<S: AsRef<str>>(mut text: String, secrets: &[S]) -> String {
    let mut values: Vec<&str> = secrets
        .iter()
        .map(AsRef::as_ref)
        .filter(|v| !v.is_empty())
        .collect();
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    for value in values {
        if text.contains(value) {
            text = text.replace(value, REDACTED);
        }
    }
    text
}

/// Scrubs every string inside `value` ([`text`]).
pub fn json<S: AsRef<str>>(value: &mut Value, secrets: &[S]) {
    match value {
        Value::String(s)
            if secrets
                .iter()
                .any(|v| !v.as_ref().is_empty() && s.contains(v.as_ref())) =>
        {
            *s = text(std::mem::take(s), secrets);
        }
        Value::Array(items) => items.iter_mut().for_each(|v| json(v, secrets)),
        Value::Object(fields) => fields.values_mut().for_each(|v| json(v, secrets)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scrubbing_reaches_every_string() {
        let mut v = json!({"a": "x-s3cr3t-y", "b": [{"c": "s3cr3t"}], "n": 1});
        json(&mut v, &["s3cr3t".to_string(), String::new()]);
        assert_eq!(v, json!({"a": "x-*****-y", "b": [{"c": "*****"}], "n": 1}));
    }

    #[test]
    fn a_secret_that_contains_another_is_hidden_whole_whatever_their_order() {
        // Replacing the shorter first would leave "token-" and "-tail" of the longer one in the text.
        let secrets = ["abc".to_string(), "token-abc-tail".to_string()];
        let mut v = json!({"message": "denied for token-abc-tail and abc"});
        json(&mut v, &secrets);
        assert_eq!(v, json!({"message": "denied for ***** and *****"}));
    }

    #[test]
    fn scrub_hides_every_secret_and_the_longest_first() {
        let secrets = ["abc", "abcdef", ""];
        assert_eq!(
            text("x abcdef y abc z".to_string(), &secrets),
            "x ***** y ***** z"
        );
    }
}
