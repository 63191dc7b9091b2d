//! What kube-apiserver does to a custom resource with its CRD's structural `openAPIV3Schema` before storing it:
//! pruning (fields the schema does not declare are dropped, unless `x-kubernetes-preserve-unknown-fields` keeps
//! them; `null` is dropped where the schema does not say `nullable`) and validation (`type`, `required`, `enum`;
//! `x-kubernetes-int-or-string`; the formats `int32` and `date-time`), with errors worded as kube-apiserver words
//! them. Not checked: other formats, `pattern`, bounds, list-type uniqueness and CEL rules
//! (`x-kubernetes-validations`); no defaulting. The schema is read once into a [`Schema`] when its CRD is
//! installed, and a write is walked once, pruned and validated together. Pure: no storage, no HTTP.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// A CRD's structural schema, read once: what admitting a write asks of each node, without looking it up by name
/// in the schema's JSON at every node of every write.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Schema {
    /// The JSON types allowed, comma-separated (`integer,string` for `x-kubernetes-int-or-string`).
    types: Option<String>,
    int_or_string: bool,
    format: Option<String>,
    allowed: Option<Vec<Value>>,
    required: Vec<String>,
    properties: HashMap<String, Schema>,
    /// `additionalProperties` when it is a schema (not `true`/`false`).
    additional: Option<Box<Schema>>,
    items: Option<Box<Schema>>,
    nullable: bool,
    preserve_unknown: bool,
    embedded: bool,
}

impl From<&Value> for Schema {
    fn from(schema: &Value) -> Self {
        let is_true = |key| schema.get(key).and_then(Value::as_bool) == Some(true);
        let text = |key| schema.get(key).and_then(Value::as_str).map(str::to_string);
        let int_or_string = is_true("x-kubernetes-int-or-string");
        Schema {
            types: if int_or_string {
                Some("integer,string".to_string())
            } else {
                text("type")
            },
            int_or_string,
            format: text("format"),
            allowed: schema.get("enum").and_then(Value::as_array).cloned(),
            required: (schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten())
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
            properties: (schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten())
            .map(|(name, property)| (name.clone(), Schema::from(property)))
            .collect(),
            additional: (schema.get("additionalProperties").filter(|a| a.is_object()))
                .map(|a| Box::new(Schema::from(a))),
            items: schema.get("items").map(|i| Box::new(Schema::from(i))),
            nullable: is_true("nullable"),
            preserve_unknown: is_true("x-kubernetes-preserve-unknown-fields"),
            embedded: is_true("x-kubernetes-embedded-resource"),
        }
    }
}

impl Schema {
    /// The schema of the field `name` of an object this schema describes.
    fn field(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name).or(self.additional.as_deref())
    }
}

/// Prunes `object` (a whole custom resource) and validates what is left. `Ok` lists the paths of the fields
/// pruned because the schema does not declare them (kube-apiserver drops them silently; tests want to know);
/// `Err` carries the field errors as kube-apiserver lists them after `… is invalid: `. `old` is the stored
/// object a write replaces: kube-apiserver's validation ratcheting (on by default since 1.30) lets the errors
/// of a field a write does not change pass, so the errors found in a value equal to the one there are taken
/// back. Lists are compared item by item at the same index. Pruning is not ratcheted: the whole object is
/// pruned, as kube-apiserver prunes every object it decodes.
pub fn admit(
    schema: &Schema,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<String>, String> {
    let mut found = Found::default();
    walk(schema, object, old, &Path::Root, true, &mut found);
    found.verdict()
}

/// [`admit`] for a status write: only `status` is pruned and validated, as the rest is the stored object's,
/// admitted when it was written. The whole object when the schema does not declare `status`.
pub fn admit_status(
    schema: &Schema,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<String>, String> {
    let (Some(declared), Some(status)) =
        (schema.properties.get("status"), object.get_mut("status"))
    else {
        return admit(schema, object, old);
    };
    let old = old.and_then(|o| o.get("status"));
    let mut found = Found::default();
    walk(
        declared,
        status,
        old,
        &Path::Field(&Path::Root, "status"),
        true,
        &mut found,
    );
    found.verdict()
}

/// What admitting a write found: the fields pruned and the errors.
#[derive(Default)]
struct Found {
    pruned: Vec<String>,
    errors: Vec<String>,
}

impl Found {
    /// `Ok` with the pruned fields' paths, or the errors as kube-apiserver lists them.
    fn verdict(mut self) -> Result<Vec<String>, String> {
        match self.errors.len() {
            0 => Ok(self.pruned),
            1 => Err(self.errors.remove(0)),
            _ => Err(format!("[{}]", self.errors.join(", "))),
        }
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

/// Admits `value` at `path` (`old` what the stored object has there): prunes it when `prune` (an embedded
/// resource's ObjectMeta is validated, not pruned), validates what is left, and says whether it equals `old`.
/// The errors found in a value equal to `old` are taken back (ratcheting); an unchanged scalar is not checked.
/// Each value is compared with the stored one once, on the way back up.
fn walk(
    schema: &Schema,
    value: &mut Value,
    old: Option<&Value>,
    path: &Path<'_>,
    prune: bool,
    found: &mut Found,
) -> bool {
    let composite = matches!(value, Value::Object(_) | Value::Array(_));
    if !composite && old == Some(&*value) {
        return true;
    }
    if value.is_null() && schema.nullable {
        return false;
    }
    let from = found.errors.len();
    let typed = check(schema, value, path, &mut found.errors);
    let prune = prune && !schema.int_or_string;
    let same = match value {
        Value::Object(fields) => {
            let old = old.and_then(Value::as_object);
            walk_fields(schema, fields, old, path, prune, typed, found)
                && old.is_some_and(|o| o.len() == fields.len())
        }
        Value::Array(items) => match (&schema.items, old.and_then(Value::as_array)) {
            (Some(item_schema), old) if typed => {
                let mut same = old.is_some_and(|o| o.len() == items.len());
                for (at, item) in items.iter_mut().enumerate() {
                    let old = old.and_then(|o| o.get(at));
                    same &= walk(item_schema, item, old, &Path::Item(path, at), prune, found);
                }
                same
            }
            (_, old) => old.is_some_and(|o| o == items),
        },
        _ => false,
    };
    if same {
        found.errors.truncate(from);
    }
    same
}

/// [`walk`] of an object's fields (`typed`: the object is of the schema's type; its fields are not validated
/// otherwise, as the type's error says all there is to say): whether each one equals the stored one.
fn walk_fields(
    schema: &Schema,
    fields: &mut Map<String, Value>,
    old: Option<&Map<String, Value>>,
    path: &Path<'_>,
    prune: bool,
    typed: bool,
    found: &mut Found,
) -> bool {
    let mut same = true;
    let before_fields = found.errors.len();
    fields.retain(|name, value| {
        let old = old.and_then(|o| o.get(name));
        let at = Path::Field(path, name);
        let kept = (path.is_root() || schema.embedded) && ROOT_FIELDS.contains(&name.as_str());
        let declared = if kept && path.is_root() {
            None
        } else {
            schema.field(name)
        };
        match declared {
            Some(declared) if typed => {
                if prune && !kept && value.is_null() && !declared.nullable {
                    same &= old.is_none();
                    return false;
                }
                same &= walk(declared, value, old, &at, prune && !kept, found);
                true
            }
            None if prune && !kept && !schema.preserve_unknown => {
                found.pruned.push(at.to_string());
                same &= old.is_none();
                false
            }
            _ => {
                same = same && old == Some(&*value);
                true
            }
        }
    });
    if typed {
        // Listed before the fields' own errors, as validating the object before its fields lists them.
        let mut missing = Vec::new();
        required(schema, fields, path, &mut missing);
        found.errors.splice(before_fields..before_fields, missing);
    }
    same
}

/// Checks `value`'s type, format and enum at `path`, adding what is wrong to `errors`; false when its type is
/// not the schema's (nothing inside it is checked then).
fn check(schema: &Schema, value: &Value, path: &Path<'_>, errors: &mut Vec<String>) -> bool {
    if let Some(wanted) = &schema.types
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
        return false;
    }
    if let Some(format) = &schema.format
        && !has_format(value, format)
    {
        errors.push(format!(
            "{path}: Invalid value: {value}: {path} in body must be of type {format}: {value}"
        ));
    }
    if let Some(allowed) = &schema.allowed
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(Value::to_string).collect();
        errors.push(format!(
            "{path}: Unsupported value: {value}: supported values: {}",
            supported.join(", ")
        ));
    }
    true
}

fn required(
    schema: &Schema,
    fields: &Map<String, Value>,
    path: &Path<'_>,
    errors: &mut Vec<String>,
) {
    for name in &schema.required {
        if !fields.contains_key(name) {
            errors.push(format!("{}: Required value", Path::Field(path, name)));
        }
    }
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
