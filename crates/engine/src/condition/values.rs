//! Indexing into an evaluated value: `result[0]`, `result[-1]`, `result["key"]`, a character of a string,
//! with out-of-range and nil reported in the user's terms. Member access (`.field`) is `eval.rs`'s. Must not
//! panic on any value.

use evalexpr::Value;
use serde_json::Value as JsonValue;

use super::EvalError;
use super::val::{NIL, Val, array_item, array_len, describe, err, from_json, is_nil, number};

pub(super) fn index_into<'a>(
    base: Val<'a>,
    index: &Val<'_>,
    base_text: &str,
    text: &str,
) -> Result<Val<'a>, EvalError> {
    if let (Val::Json(JsonValue::Object(m)), Val::Scalar(Value::String(k))) = (&base, index) {
        return Ok(m.get(k).map_or(NIL, from_json));
    }
    if let Some(len) = array_len(&base) {
        let Some(i) = number(index).filter(|i| i.fract() == 0.0) else {
            return err(format!(
                "{text}: an array index must be a whole number, but it is {}",
                describe(index)
            ));
        };
        let what = describe(&base);
        let position = if i < 0.0 { len as f64 + i } else { i };
        return match (position >= 0.0 && position < len as f64)
            .then(|| array_item(&base, position as usize))
        {
            Some(Some(v)) => Ok(v),
            _ => {
                let guard = if i < 0.0 {
                    format!("len({base_text}) >= {}", -i)
                } else {
                    format!("len({base_text}) > {i}")
                };
                err(format!(
                    "{base_text} is {what}; {text} is out of range — guard with {guard}"
                ))
            }
        };
    }
    match (&base, index) {
        (Val::Scalar(Value::String(s)), Val::Scalar(Value::Float(i))) if i.fract() == 0.0 => {
            let len = s.chars().count() as f64;
            let position = if *i < 0.0 { len + i } else { *i };
            if position >= 0.0 && position < len {
                let c = s
                    .chars()
                    .nth(position as usize)
                    .map(String::from)
                    .unwrap_or_default();
                Ok(Val::Scalar(Value::String(c)))
            } else {
                err(format!(
                    "{base_text} is {}; {text} is out of range",
                    describe(&base)
                ))
            }
        }
        (b, _) if is_nil(b) => err(format!(
            "{base_text} is nil (no value), so {text} does not exist — guard with isNil(result) or use default(result, ...)"
        )),
        (b, i) => err(format!(
            "{text}: cannot index {} with {}",
            describe(b),
            describe(i)
        )),
    }
}
