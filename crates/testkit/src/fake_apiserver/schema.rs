//! What kube-apiserver does to a custom resource with its CRD's structural `openAPIV3Schema` before storing it:
//! pruning (fields the schema does not declare are dropped, unless `x-kubernetes-preserve-unknown-fields` keeps
//! them; `null` is dropped where the schema does not say `nullable`) and validation (`type`, `required`, `enum`;
//! `x-kubernetes-int-or-string`), with errors worded as kube-apiserver words them. Not checked: `format`,
//! `pattern`, bounds, list-type uniqueness and CEL rules (`x-kubernetes-validations`); no defaulting. Pure: no
//! storage, no HTTP.

use serde_json::{Map, Value};

/// Prunes `object` (a whole custom resource) and validates what is left. `Ok` lists the paths of the fields
/// pruned because the schema does not declare them (kube-apiserver drops them silently; tests want to know);
/// `Err` carries the field errors as kube-apiserver lists them after `… is invalid: `. `old` is the stored
/// object a write replaces: a field with the value it has there is left alone, as it was pruned when it was
/// stored and kube-apiserver's validation ratcheting (on by default since 1.30) lets the errors of a field a
/// write does not change pass. Lists are compared item by item at the same index. (After `install_crds`
/// replaces a schema, kube-apiserver would also prune unchanged fields it no longer declares; this does only
/// where a write changes their parent.)
pub fn admit(
    schema: &Value,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<String>, String> {
    let mut pruned = Vec::new();
    prune(schema, object, old, &Path::Root, &mut pruned);
    let mut errors = Vec::new();
    validate(schema, object, old, &Path::Root, &mut errors);
    verdict(pruned, errors)
}

/// [`admit`] for a status write: only `status` is pruned and validated, as the rest is the stored object's,
/// admitted when it was written. The whole object when the schema does not declare `status`.
pub fn admit_status(
    schema: &Value,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<String>, String> {
    let (Some(declared), Some(status)) = (property(schema, "status"), object.get_mut("status"))
    else {
        return admit(schema, object, old);
    };
    let at = Path::Field(&Path::Root, "status");
    let old = old.and_then(|o| o.get("status"));
    let mut pruned = Vec::new();
    prune(declared, status, old, &at, &mut pruned);
    let mut errors = Vec::new();
    validate(declared, status, old, &at, &mut errors);
    verdict(pruned, errors)
}

/// Whether `value` is what the stored object has at the same place (see [`admit`]).
fn unchanged(value: &Value, old: Option<&Value>) -> bool {
    old.is_some_and(|old| old == value)
}

/// `Ok` with the pruned fields' paths, or the errors as kube-apiserver lists them.
fn verdict(pruned: Vec<String>, mut errors: Vec<String>) -> Result<Vec<String>, String> {
    match errors.len() {
        0 => Ok(pruned),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// The fields a resource keeps whatever its schema says: ObjectMeta is the API server's, not the CRD's.
const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Where a value sits in the resource, rendered only when a pruned field or an error names it: admitting a
/// write walks every field, and most are neither.
#[derive(Clone, Copy)]
enum Path<'a> {
    /// The resource itself.
    Root,
    Field(&'a Path<'a>, &'a str),
    Item(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn is_root(&self) -> bool {
        matches!(self, Path::Root)
    }
}

/// The path as kube-apiserver writes field paths (`spec.metrics[0].count`); "" for the resource itself.
impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Field(Path::Root, name) => f.write_str(name),
            Path::Field(parent, name) => write!(f, "{parent}.{name}"),
            Path::Item(parent, at) => write!(f, "{parent}[{at}]"),
        }
    }
}

/// Prunes `value` at `path` (`old` what the stored object has there), adding the paths of undeclared fields to
/// `pruned`.
fn prune(
    schema: &Value,
    value: &mut Value,
    old: Option<&Value>,
    path: &Path<'_>,
    pruned: &mut Vec<String>,
) {
    if is_true(schema, "x-kubernetes-int-or-string") || unchanged(value, old) {
        return;
    }
    match value {
        Value::Object(fields) => {
            let embedded = is_true(schema, "x-kubernetes-embedded-resource");
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            fields.retain(|name, value| {
                if (path.is_root() || embedded) && ROOT_FIELDS.contains(&name.as_str()) {
                    return true;
                }
                let at = Path::Field(path, name);
                match property(schema, name).or(additional) {
                    None if preserves_unknown(schema) => true,
                    None => {
                        pruned.push(at.to_string());
                        false
                    }
                    Some(declared) if value.is_null() && !nullable(declared) => false,
                    Some(declared) => {
                        prune(declared, value, old.and_then(|o| o.get(name)), &at, pruned);
                        true
                    }
                }
            });
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (at, item) in items.iter_mut().enumerate() {
                    let old = old.and_then(|o| o.get(at));
                    prune(item_schema, item, old, &Path::Item(path, at), pruned);
                }
            }
        }
        _ => {}
    }
}

/// Validates `value` at `path` (`old` what the stored object has there).
fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &Path<'_>,
    errors: &mut Vec<String>,
) {
    if (value.is_null() && nullable(schema)) || unchanged(value, old) {
        return;
    }
    let wanted = if is_true(schema, "x-kubernetes-int-or-string") {
        Some("integer,string")
    } else {
        schema.get("type").and_then(Value::as_str)
    };
    if let Some(wanted) = wanted
        && !wanted.split(',').any(|w| has_type(value, w))
    {
        let got = type_name(value);
        let shown = if path.is_root() {
            "<nil>".to_string()
        } else {
            path.to_string()
        };
        errors.push(format!(
            "{shown}: Invalid value: \"{got}\": {shown} in body must be of type {wanted}: \"{got}\""
        ));
        return;
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && !has_format(value, format)
    {
        errors.push(format!(
            "{path}: Invalid value: {value}: {path} in body must be of type {format}: {value}"
        ));
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(Value::to_string).collect();
        errors.push(format!(
            "{path}: Unsupported value: {value}: supported values: {}",
            supported.join(", ")
        ));
    }
    match value {
        Value::Object(fields) => {
            required(schema, fields, path, errors);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (name, value) in fields {
                if path.is_root() && ROOT_FIELDS.contains(&name.as_str()) {
                    continue;
                }
                if let Some(declared) = property(schema, name).or(additional) {
                    let old = old.and_then(|o| o.get(name));
                    validate(declared, value, old, &Path::Field(path, name), errors);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (at, item) in items.iter().enumerate() {
                    let old = old.and_then(|o| o.get(at));
                    validate(item_schema, item, old, &Path::Item(path, at), errors);
                }
            }
        }
        _ => {}
    }
}

fn required(
    schema: &Value,
    fields: &Map<String, Value>,
    path: &Path<'_>,
    errors: &mut Vec<String>,
) {
    let names = schema.get("required").and_then(Value::as_array);
    for name in names.into_iter().flatten().filter_map(Value::as_str) {
        if !fields.contains_key(name) {
            errors.push(format!("{}: Required value", Path::Field(path, name)));
        }
    }
}

fn property<'a>(schema: &'a Value, name: &str) -> Option<&'a Value> {
    schema.get("properties")?.get(name)
}

fn preserves_unknown(schema: &Value) -> bool {
    is_true(schema, "x-kubernetes-preserve-unknown-fields")
}

fn nullable(schema: &Value) -> bool {
    is_true(schema, "nullable")
}

fn is_true(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// Whether `value` has the schema type `wanted`. JSON numbers without a fraction are integers, as the API
/// server's JSON decoder reads them.
fn has_type(value: &Value, wanted: &str) -> bool {
    match (wanted, value) {
        ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// Whether `value` has `format`, for the formats canaryd's kinds use: an `int32` fits 32 bits, a `date-time` is
/// RFC 3339. Other formats pass.
fn has_format(value: &Value, format: &str) -> bool {
    match (format, value) {
        ("int32", Value::Number(n)) => n.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        ("date-time", Value::String(s)) => s.parse::<jiff::Timestamp>().is_ok(),
        _ => true,
    }
}

/// The type a value has, in the words of kube-openapi's messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
