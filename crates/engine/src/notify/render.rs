//! Rendering a notification template as the notifications engine does: every string of the template (the
//! `message`, `slack.attachments`, `webhook.<service>.body`, `teams.text`, ...) is a Go `text/template`
//! executed with `.rollout`, `.analysisRuns` (as a trigger's `when` sees them), `.recipient`, `.serviceType` and
//! `.context`; several templates sent together are
//! merged, the later one's fields winning. Go templates are `gtmpl`'s: Go's actions, pipelines, variables,
//! `range`/`if`/`with` and its built-in functions (`and`, `or`, `not`, `len`, `index`, `print`, `printf`,
//! `eq`...), plus the few of sprig's functions listed in [`SPRIG`].

use gtmpl::{Context, Func, FuncError, Template, Value as GoValue};
use gtmpl_value::Number;
use serde_json::{Map, Value};

/// What a template's strings are executed against.
pub struct Vars<'a> {
    pub rollout: &'a Value,
    /// The Rollout's AnalysisRuns as Argo Rollouts' `record.go` gives a notification (nil when there are none).
    pub analysis_runs: &'a Value,
    pub recipient: &'a str,
    pub service: &'a str,
    pub context: &'a std::collections::BTreeMap<String, String>,
}

/// The sprig functions canaryd provides (those Argo's built-in templates and its documented examples use, and
/// their simplest siblings); the rest of sprig is not supported.
pub const SPRIG: &[&str] = &[
    "add",
    "sub",
    "mul",
    "upper",
    "lower",
    "trim",
    "toJson",
    "default",
    "quote",
    "replace",
    "contains",
    "hasPrefix",
    "hasSuffix",
    "trimPrefix",
    "trimSuffix",
];

fn sprig() -> [(&'static str, Func); 15] {
    [
        ("add", add as Func),
        ("sub", sub as Func),
        ("mul", mul as Func),
        ("upper", upper as Func),
        ("lower", lower as Func),
        ("trim", trim as Func),
        ("toJson", to_json as Func),
        ("default", default as Func),
        ("quote", quote as Func),
        ("replace", replace as Func),
        ("contains", contains as Func),
        ("hasPrefix", has_prefix as Func),
        ("hasSuffix", has_suffix as Func),
        ("trimPrefix", trim_prefix as Func),
        ("trimSuffix", trim_suffix as Func),
    ]
}

/// The notification `templates` make for these vars: each named template rendered and merged in order. An
/// unknown template name or one that does not parse or execute is an error naming it.
pub fn render(
    templates: &std::collections::BTreeMap<String, Value>,
    names: &[String],
    vars: &Vars<'_>,
) -> Result<Map<String, Value>, String> {
    let dot = GoValue::from(go_value(&serde_json::json!({
        "rollout": vars.rollout,
        "analysisRuns": vars.analysis_runs,
        "recipient": vars.recipient,
        "serviceType": vars.service,
        "context": vars.context,
    })));
    let context = Context::from(dot);
    let mut notification = Map::new();
    for name in names {
        let Some(template) = templates.get(name) else {
            return Err(format!("template '{name}' is not configured"));
        };
        let rendered = render_value(template, &context, name, "")?;
        if let Value::Object(fields) = rendered {
            merge(&mut notification, fields);
        }
    }
    Ok(notification)
}

fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(more)) => merge(existing, more),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

fn render_value(value: &Value, context: &Context, name: &str, at: &str) -> Result<Value, String> {
    Ok(match value {
        Value::String(text) => Value::String(execute(text, context).map_err(|e| {
            let field = at.trim_start_matches('.');
            format!("template '{name}' field `{field}`: {e}")
        })?),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        render_value(v, context, name, &format!("{at}.{k}"))?,
                    ))
                })
                .collect::<Result<_, String>>()?,
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| render_value(v, context, name, &format!("{at}[{i}]")))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// One Go template executed; a panic inside the template library is an error too, never the daemon's end.
fn execute(text: &str, context: &Context) -> Result<String, String> {
    let run = || -> Result<String, String> {
        let mut template = Template::default();
        template.add_funcs(&sprig());
        template.parse(text).map_err(|e| e.to_string())?;
        template.render(context).map_err(|e| e.to_string())
    };
    std::panic::catch_unwind(run)
        .unwrap_or_else(|_| Err("the template library failed on this template".to_string()))
}

fn go_value(value: &Value) -> GoValue {
    match value {
        Value::Null => GoValue::Nil,
        Value::Bool(b) => GoValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => GoValue::Number(Number::from(i)),
            (_, Some(u)) => GoValue::Number(Number::from(u)),
            _ => GoValue::Number(Number::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => GoValue::String(s.clone()),
        Value::Array(items) => GoValue::Array(items.iter().map(go_value).collect()),
        Value::Object(fields) => GoValue::Map(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), go_value(v)))
                .collect(),
        ),
    }
}

/// sprig's `toInt64`: whole numbers as they are, fractions cut, numeric strings read, anything else 0.
fn int64(value: &GoValue) -> i64 {
    match value {
        GoValue::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .unwrap_or(i64::MAX),
        GoValue::String(s) => s.trim().parse().unwrap_or(0),
        GoValue::Bool(b) => i64::from(*b),
        _ => 0,
    }
}

/// sprig's `add`: the sum of its arguments as int64.
fn add(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let sum = args.iter().map(int64).fold(0i64, i64::wrapping_add);
    Ok(GoValue::Number(Number::from(sum)))
}

/// sprig's `sub`: the first argument less the second, as int64.
fn sub(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let [a, b] = args else {
        return Err(FuncError::ExactlyXArgs("sub".to_string(), 2));
    };
    Ok(GoValue::Number(Number::from(
        int64(a).wrapping_sub(int64(b)),
    )))
}

/// sprig's `mul`: the product of its arguments as int64.
fn mul(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let product = args.iter().map(int64).fold(1i64, i64::wrapping_mul);
    Ok(GoValue::Number(Number::from(product)))
}

fn one_string(name: &str, args: &[GoValue]) -> Result<String, FuncError> {
    let [text] = strings(name, args)?;
    Ok(text)
}

fn upper(args: &[GoValue]) -> Result<GoValue, FuncError> {
    Ok(GoValue::String(one_string("upper", args)?.to_uppercase()))
}

fn lower(args: &[GoValue]) -> Result<GoValue, FuncError> {
    Ok(GoValue::String(one_string("lower", args)?.to_lowercase()))
}

fn trim(args: &[GoValue]) -> Result<GoValue, FuncError> {
    Ok(GoValue::String(
        one_string("trim", args)?.trim().to_string(),
    ))
}

/// A value as sprig's string functions read it (`strval`): a string as it is, anything else as Go prints it.
fn string_of(value: &GoValue) -> String {
    match value {
        GoValue::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Exactly `N` arguments of `name`, as strings; the last is the piped one.
fn strings<const N: usize>(name: &str, args: &[GoValue]) -> Result<[String; N], FuncError> {
    let strings: Vec<String> = args.iter().map(string_of).collect();
    strings
        .try_into()
        .map_err(|_| FuncError::ExactlyXArgs(name.to_string(), N))
}

/// sprig's `empty`: nil, false, 0, "" and an empty list or map.
fn empty(value: &GoValue) -> bool {
    match value {
        GoValue::NoValue | GoValue::Nil => true,
        GoValue::Bool(b) => !b,
        GoValue::String(s) => s.is_empty(),
        GoValue::Number(n) => n.as_f64() == Some(0.0),
        GoValue::Array(items) => items.is_empty(),
        GoValue::Map(fields) | GoValue::Object(fields) => fields.is_empty(),
        GoValue::Function(_) => false,
    }
}

/// sprig's `default DEFAULT GIVEN`: GIVEN unless it is empty (or not given).
fn default(args: &[GoValue]) -> Result<GoValue, FuncError> {
    match args {
        [fallback] => Ok(fallback.clone()),
        [fallback, given] => Ok(if empty(given) { fallback } else { given }.clone()),
        _ => Err(FuncError::ExactlyXArgs("default".to_string(), 2)),
    }
}

/// sprig's `quote`: each non-nil argument in Go's double quotes, separated by spaces.
fn quote(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let quoted: Vec<String> = args
        .iter()
        .filter(|a| !matches!(a, GoValue::Nil | GoValue::NoValue))
        .map(|a| Value::String(string_of(a)).to_string())
        .collect();
    Ok(GoValue::String(quoted.join(" ")))
}

/// sprig's `replace OLD NEW TEXT`: every OLD in TEXT replaced.
fn replace(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let [old, new, text] = strings("replace", args)?;
    Ok(GoValue::String(text.replace(&old, &new)))
}

/// sprig's `contains PART TEXT`.
fn contains(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let [part, text] = strings("contains", args)?;
    Ok(GoValue::Bool(text.contains(&part)))
}

/// sprig's `hasPrefix PREFIX TEXT`.
fn has_prefix(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let [prefix, text] = strings("hasPrefix", args)?;
    Ok(GoValue::Bool(text.starts_with(&prefix)))
}

/// sprig's `hasSuffix SUFFIX TEXT`.
fn has_suffix(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let [suffix, text] = strings("hasSuffix", args)?;
    Ok(GoValue::Bool(text.ends_with(&suffix)))
}

/// sprig's `trimPrefix PREFIX TEXT`.
fn trim_prefix(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let [prefix, text] = strings("trimPrefix", args)?;
    Ok(GoValue::String(
        text.strip_prefix(prefix.as_str())
            .unwrap_or(&text)
            .to_string(),
    ))
}

/// sprig's `trimSuffix SUFFIX TEXT`.
fn trim_suffix(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let [suffix, text] = strings("trimSuffix", args)?;
    Ok(GoValue::String(
        text.strip_suffix(suffix.as_str())
            .unwrap_or(&text)
            .to_string(),
    ))
}

fn to_json(args: &[GoValue]) -> Result<GoValue, FuncError> {
    let [value] = args else {
        return Err(FuncError::ExactlyXArgs("toJson".to_string(), 1));
    };
    Ok(GoValue::String(json_value(value).to_string()))
}

fn json_value(value: &GoValue) -> Value {
    match value {
        GoValue::NoValue | GoValue::Nil | GoValue::Function(_) => Value::Null,
        GoValue::Bool(b) => Value::Bool(*b),
        GoValue::String(s) => Value::String(s.clone()),
        GoValue::Number(n) => n
            .as_i64()
            .map(Value::from)
            .or_else(|| n.as_f64().map(Value::from))
            .unwrap_or(Value::Null),
        GoValue::Array(items) => Value::Array(items.iter().map(json_value).collect()),
        GoValue::Map(fields) | GoValue::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), json_value(v)))
                .collect(),
        ),
    }
}
