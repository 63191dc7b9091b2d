//! What kube-apiserver does to one object's JSON on the way into storage: merge patches, server-set metadata and
//! type fields, what a write to the object or to its status keeps of the stored one, the generation rule,
//! defaulting (Secrets' `stringData`, pod templates, ReplicaSets, Jobs, Pods), generated names, and admission
//! against the kind's CRD schema. Pure functions of the object and its kind; `store.rs` decides when each
//! applies.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use canaryd::engine::pod_defaults;

use super::ResourceDef;
use super::error::ApiError;
use super::store::Target;

/// RFC 7386 JSON merge patch of `patch` onto `target` (`None`: absent), keeping only the top-level fields in
/// `only` when it is given. The patch is taken, so what it replaces is moved in rather than copied, and only what
/// it leaves alone is copied from the target: a status write, whose patch carries the whole new status, copies
/// no measurement.
pub fn merge_patch(target: Option<&Value>, patch: Value, only: Option<&[&str]>) -> Value {
    let Value::Object(mut patch) = patch else {
        return patch;
    };
    let kept = |field: &str| only.is_none_or(|fields| fields.contains(&field));
    let mut merged = Map::new();
    if let Some(Value::Object(target)) = target {
        for (field, value) in target.iter().filter(|(field, _)| kept(field)) {
            match patch.remove(field) {
                None => {
                    merged.insert(field.clone(), value.clone());
                }
                Some(Value::Null) => {}
                Some(change) => {
                    merged.insert(field.clone(), merge_patch(Some(value), change, None));
                }
            }
        }
    }
    for (field, value) in patch {
        if kept(&field) && !value.is_null() {
            merged.insert(field, merge_patch(None, value, None));
        }
    }
    Value::Object(merged)
}

pub fn metadata_of(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let object = object.as_object_mut()?;
    object
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
}

pub fn set_meta(object: &mut Value, field: &str, value: Value) {
    if let Some(metadata) = metadata_of(object) {
        if value.is_null() {
            metadata.remove(field);
        } else {
            metadata.insert(field.into(), value);
        }
    }
}

pub fn set_field(object: &mut Value, field: &str, value: Option<Value>) {
    if let Some(object) = object.as_object_mut() {
        match value {
            Some(value) if !value.is_null() => object.insert(field.into(), value),
            _ => object.remove(field),
        };
    }
}

pub fn fill_type_meta(res: &ResourceDef, object: &mut Value) {
    if let Some(object) = object.as_object_mut() {
        object.insert("apiVersion".into(), json!(res.api_version()));
        object.insert("kind".into(), json!(res.kind));
    }
}

/// Whether two versions differ only in what `metadata.generation` ignores: metadata, and status where status
/// is a subresource.
pub fn same_spec(res: &ResourceDef, a: &Value, b: &Value) -> bool {
    let ignored = |k: &str| k == "metadata" || (res.status_subresource && k == "status");
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            let kept = |m: &'_ Map<String, Value>| m.iter().filter(|(k, _)| !ignored(k)).count();
            kept(a) == kept(b)
                && a.iter()
                    .filter(|(k, _)| !ignored(k))
                    .all(|(k, v)| b.get(k) == Some(v))
        }
        _ => a == b,
    }
}

/// A write to `/status`: everything but the status as stored (without copying the stored status only to replace
/// it), the status as sent.
pub fn with_status_of(old: &Value, mut candidate: Value) -> Value {
    let mut new: Value = old
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(field, _)| *field != "status")
                .map(|(field, value)| (field.clone(), value.clone()))
                .collect::<Map<String, Value>>()
        })
        .unwrap_or_default()
        .into();
    let status = candidate.as_object_mut().and_then(|o| o.remove("status"));
    set_field(&mut new, "status", status);
    new
}

/// A write to the object: as sent, but with the server-set metadata kept, the stored status where status is a
/// subresource, and the kind's type fields and defaults.
pub fn with_spec_of(res: &ResourceDef, old: &Value, mut new: Value) -> Result<Value, ApiError> {
    if !new.is_object() {
        return Err(ApiError::bad_request("the object is not a JSON object"));
    }
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let metadata =
        metadata_of(&mut new).ok_or_else(|| ApiError::bad_request("the object has no metadata"))?;
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
    ] {
        match old_meta.get(field) {
            Some(value) => metadata.insert(field.into(), value.clone()),
            None => metadata.remove(field),
        };
    }
    if res.status_subresource {
        set_field(&mut new, "status", old.get("status").cloned());
    }
    fill_type_meta(res, &mut new);
    normalize(res, &mut new);
    Ok(new)
}

/// What kube-apiserver does with a custom resource's CRD schema before storing it: unknown fields pruned, the
/// rest validated (422 naming each field); of a status write, its status (`schema::admit_status`); of an
/// update, pruned whole but validated only where it differs from `old`, the stored object. Returns the pruned
/// fields' paths.
pub fn admit(
    res: &ResourceDef,
    name: &str,
    target: Target,
    object: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let Some(schema) = res.schema else {
        return Ok(Vec::new());
    };
    match target {
        Target::Main => super::schema::admit(schema, object, old),
        Target::Status => super::schema::admit_status(schema, object, old),
    }
    .map_err(|why| ApiError::invalid(res, name, why))
}

/// Per-kind defaulting kube-apiserver does that clients observe: Secrets' `stringData` folds into base64 `data`;
/// the pod templates of ReplicaSets and Jobs, and Pods, get Kubernetes' pod defaults (`pkg/apis/core/v1`, the
/// one list canaryd's engine keeps for Argo's template comparison), ReplicaSets and Jobs their own
/// (`pkg/apis/apps/v1`, `pkg/apis/batch/v1`). Custom resources are never defaulted: a Rollout's template is not.
pub fn normalize(res: &ResourceDef, object: &mut Value) {
    match (res.group, res.kind) {
        ("", "Secret") => fold_string_data(object),
        ("", "Pod") => pod_defaults::default_pod(object),
        ("apps", "ReplicaSet") => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.entry("replicas").or_insert(json!(1));
            }
            default_pod_template(object);
        }
        ("batch", "Job") => {
            default_job(object);
            default_pod_template(object);
        }
        _ => {}
    }
}

fn fold_string_data(object: &mut Value) {
    let Some(object) = object.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(strings)) = object.remove("stringData") {
        let data = object.entry("data").or_insert_with(|| json!({}));
        for (key, value) in strings {
            let text = value.as_str().unwrap_or_default().as_bytes().to_vec();
            data[key] = json!(base64::engine::general_purpose::STANDARD.encode(text));
        }
    }
}

fn default_pod_template(object: &mut Value) {
    if let Some(template) = object.pointer_mut("/spec/template") {
        pod_defaults::default_template(template);
    }
}

/// batch/v1 `SetDefaults_Job`: one pod at a time, six retries, not indexed, not suspended, a pod replaced once
/// it is terminating or failed, and the template's labels on a Job that has none.
fn default_job(job: &mut Value) {
    let template_labels = job.pointer("/spec/template/metadata/labels").cloned();
    if let Some(metadata) = metadata_of(job)
        && metadata
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
        && let Some(labels) = template_labels
    {
        metadata.insert("labels".into(), labels);
    }
    let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if !spec.contains_key("parallelism") && !spec.contains_key("completions") {
        spec.insert("completions".into(), json!(1));
    }
    let replacement = if spec.contains_key("podFailurePolicy") {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    for (field, value) in [
        ("parallelism", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("podReplacementPolicy", json!(replacement)),
    ] {
        spec.entry(field).or_insert(value);
    }
}

/// Five characters from the alphabet kube-apiserver uses for generateName, varied by a counter.
pub fn random_suffix(serial: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut state = serial.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    (0..5)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let at = usize::try_from((state >> 33) % ALPHABET.len() as u64).unwrap_or(0);
            char::from(ALPHABET.get(at).copied().unwrap_or(b'x'))
        })
        .collect()
}

pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
