//! How the fake answers one request once its faults are applied: the path routed to discovery or to a resource,
//! the verb turned into a store call or a watch, and the answer (or the `Status` of a failure) written as
//! kube-apiserver writes it. Owns no state: storage is `store.rs`, watch streams `watch.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Response, StatusCode};
use serde_json::{Value, json};

use super::error::ApiError;
use super::resources::{group_list, resource_list, version};
use super::selector::{FieldSelector, LabelSelector};
use super::store::{Deletion, Key, PatchKind, Stored, Target};
use super::{Body, ResourceDef, Shared, watch};

pub struct Call<'a> {
    pub method: Method,
    pub path: &'a str,
    pub query: HashMap<String, String>,
    pub content_type: String,
    pub body: Bytes,
}

impl Call<'_> {
    fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not JSON: {e}")))
    }
}

fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

pub fn route(shared: &Arc<Shared>, call: Call<'_>) -> Result<Response<Body>, ApiError> {
    let segments: Vec<&str> = call.path.split('/').filter(|s| !s.is_empty()).collect();
    if call.method != Method::GET
        && matches!(
            segments.as_slice(),
            ["version"] | ["api"] | ["apis"] | ["api", _] | ["apis", _, _]
        )
    {
        return Err(method_not_allowed());
    }
    match segments.as_slice() {
        ["version"] => Ok(ok(StatusCode::OK, &version())),
        ["api"] => Ok(ok(
            StatusCode::OK,
            &json!({
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    { "clientCIDR": "0.0.0.0/0", "serverAddress": shared.address.to_string() },
                ],
            }),
        )),
        ["apis"] => Ok(ok(StatusCode::OK, &group_list(&shared.lock_resources()))),
        ["api", version] => resource_list(&shared.lock_resources(), "", version)
            .map(|list| ok(StatusCode::OK, &list))
            .ok_or_else(not_found),
        ["apis", group, version] => resource_list(&shared.lock_resources(), group, version)
            .map(|list| ok(StatusCode::OK, &list))
            .ok_or_else(not_found),
        ["api", version, rest @ ..] => serve_resource(shared, &call, "", version, rest),
        ["apis", group, version, rest @ ..] => serve_resource(shared, &call, group, version, rest),
        _ => Err(not_found()),
    }
}

/// What a resource path names: `[namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]` of a kind the fake serves.
struct ResourcePath<'a> {
    resource: ResourceDef,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
}

impl<'a> ResourcePath<'a> {
    fn parse(
        shared: &Shared,
        group: &str,
        version: &str,
        rest: &[&'a str],
    ) -> Result<Self, ApiError> {
        let (namespace, rest) = match rest {
            ["namespaces", namespace, rest @ ..] if !rest.is_empty() => (Some(*namespace), rest),
            _ => (None, rest),
        };
        let (plural, name, subresource) = match rest {
            [plural] => (*plural, None, None),
            [plural, name] => (*plural, Some(*name), None),
            [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
            _ => return Err(not_found()),
        };
        let resource = shared
            .resource(group, version, plural)
            .ok_or_else(not_found)?;
        if resource.namespaced != namespace.is_some() && (name.is_some() || !resource.namespaced) {
            return Err(not_found());
        }
        Ok(ResourcePath {
            resource,
            namespace,
            name,
            subresource,
        })
    }

    fn key(&self, name: &str) -> Key {
        let namespace = self.namespace.unwrap_or_default().to_owned();
        (self.resource.id(), namespace, name.to_owned())
    }
}

fn serve_resource(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Response<Body>, ApiError> {
    let path = ResourcePath::parse(shared, group, version, rest)?;
    let target = match path.subresource {
        None => Target::Main,
        Some("status") if path.resource.status_subresource => Target::Status,
        Some("eviction") if path.resource.is_pods() => {
            let key = path.key(path.name.unwrap_or_default());
            return evict(shared, call, &path.resource, &key);
        }
        Some(_) => return Err(not_found()),
    };
    match path.name {
        None => serve_collection(shared, call, path),
        Some(name) => serve_object(shared, call, &path.resource, &path.key(name), target),
    }
}

/// List, watch or create, on a kind's collection (in a namespace, or across all for list and watch).
fn serve_collection(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    path: ResourcePath<'_>,
) -> Result<Response<Body>, ApiError> {
    let ResourcePath {
        resource,
        namespace,
        ..
    } = path;
    match call.method {
        Method::GET if matches!(call.param("watch"), Some("true" | "1")) => {
            watch(shared, call, resource, namespace)
        }
        Method::GET => list(shared, call, &resource, namespace),
        Method::POST if namespace.is_some() || !resource.namespaced => {
            let namespace = namespace.unwrap_or_default();
            // Parsed before the store is locked: every other request waits for the lock.
            let body = call.json_body()?;
            let object = shared.write(|store| store.create(&resource, namespace, body))?;
            Ok(stored(StatusCode::CREATED, &object))
        }
        _ => Err(method_not_allowed()),
    }
}

/// Get, replace, patch or delete one object (or its status).
fn serve_object(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    resource: &ResourceDef,
    key: &Key,
    target: Target,
) -> Result<Response<Body>, ApiError> {
    let written = |(object, created): (Arc<Stored>, bool)| {
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        stored(status, &object)
    };
    match call.method {
        Method::GET => {
            let object = shared.lock_store().get(key).cloned();
            object
                .map(|o| stored(StatusCode::OK, &o))
                .ok_or_else(|| ApiError::not_found(resource, &key.2))
        }
        Method::PUT => {
            let body = call.json_body()?;
            shared
                .write(|store| store.replace(resource, key, target, body))
                .map(written)
        }
        Method::PATCH => {
            let kind = patch_kind(call, resource)?;
            let patch = call.json_body()?;
            shared
                .write(|store| store.patch(resource, key, target, kind, patch))
                .map(written)
        }
        Method::DELETE if target == Target::Main => delete(shared, call, resource, key),
        _ => Err(method_not_allowed()),
    }
}

/// The patch flavour the Content-Type names (415 for any other, and for a strategic merge patch of a custom
/// resource, which has no patch strategy to follow), and server-side apply's required `fieldManager`.
fn patch_kind(call: &Call<'_>, resource: &ResourceDef) -> Result<PatchKind, ApiError> {
    let kind = match call.content_type.as_str() {
        "application/merge-patch+json" => PatchKind::Merge,
        "application/json-patch+json" => PatchKind::Json,
        "application/strategic-merge-patch+json" if !resource.custom => PatchKind::Strategic,
        "application/apply-patch+yaml" => PatchKind::Apply,
        other => {
            let message = format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"
            );
            return Err(ApiError::new(415, "UnsupportedMediaType", message));
        }
    };
    if kind == PatchKind::Apply && call.param("fieldManager").is_none() {
        return Err(ApiError::bad_request(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    }
    Ok(kind)
}

/// DELETE with the body's `preconditions`, answered as kube-apiserver answers for the kind.
fn delete(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    resource: &ResourceDef,
    key: &Key,
) -> Result<Response<Body>, ApiError> {
    let options = if call.body.is_empty() {
        json!({})
    } else {
        call.json_body()?
    };
    let preconditions = options.get("preconditions").cloned().unwrap_or(json!({}));
    match shared.write(|store| store.delete(resource, key, &preconditions))? {
        Deletion::Pending(object) => Ok(stored(StatusCode::OK, &object)),
        // kube-apiserver's custom resource storage and pod storage return the deleted object; most
        // built-in kinds (Secrets, ConfigMaps, Events, Leases) return a Success Status instead.
        Deletion::Gone(object) if resource.custom || resource.is_pods() => {
            Ok(stored(StatusCode::OK, &object))
        }
        Deletion::Gone(object) => Ok(ok(
            StatusCode::OK,
            &json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": { "name": key.2, "group": resource.group, "kind": resource.plural,
                             "uid": object.pointer("/metadata/uid") },
            }),
        )),
    }
}

/// POST `pods/NAME/eviction` with a policy/v1 (or v1beta1) Eviction naming the pod: no PodDisruptionBudget
/// exists here, so the pod is deleted (the Eviction's `deleteOptions.preconditions` honoured) and the answer is
/// kube-apiserver's 201 with a Success Status; a missing pod is 404.
fn evict(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    resource: &ResourceDef,
    key: &Key,
) -> Result<Response<Body>, ApiError> {
    if call.method != Method::POST {
        return Err(method_not_allowed());
    }
    let body = call.json_body()?;
    // Absent type fields default to the endpoint's kind, as kube-apiserver decodes them (kube-rs sends none).
    let api_version = body.get("apiVersion").and_then(Value::as_str);
    let kind = body.get("kind").and_then(Value::as_str);
    if !matches!(kind, None | Some("Eviction"))
        || !matches!(api_version, None | Some("policy/v1" | "policy/v1beta1"))
    {
        return Err(ApiError::bad_request(format!(
            "expected a policy/v1 Eviction, got {body}"
        )));
    }
    if body.pointer("/metadata/name").and_then(Value::as_str) != Some(key.2.as_str()) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let preconditions = body
        .pointer("/deleteOptions/preconditions")
        .cloned()
        .unwrap_or(json!({}));
    shared.write(|store| store.delete(resource, key, &preconditions))?;
    Ok(ok(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

fn selectors(call: &Call<'_>) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(call.param("labelSelector").unwrap_or_default())
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(call.param("fieldSelector").unwrap_or_default())
        .map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

fn list(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    resource: &ResourceDef,
    namespace: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let (labels, fields) = selectors(call)?;
    let id = resource.id();
    // Taken under the store lock, written after it: each item is the JSON its object already has.
    let (items, rv): (Vec<Arc<Stored>>, u64) = {
        let store = shared.lock_store();
        let items = store.list_selected(&id, namespace, &labels, &fields);
        (items.into_iter().cloned().collect(), store.rv)
    };
    let head = json!({
        "apiVersion": resource.api_version(), "kind": format!("{}List", resource.kind),
        "metadata": { "resourceVersion": rv.to_string() },
    })
    .to_string();
    let mut body = Vec::with_capacity(
        head.len() + items.iter().map(|o| o.json().len() + 1).sum::<usize>() + 12,
    );
    // The head's closing brace gives way to the items.
    body.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    body.extend_from_slice(br#","items":["#);
    for (i, object) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(object.json());
    }
    body.extend_from_slice(b"]}");
    Ok(reply(StatusCode::OK, Bytes::from(body)))
}

fn watch(
    shared: &Arc<Shared>,
    call: &Call<'_>,
    resource: ResourceDef,
    namespace: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let (labels, fields) = selectors(call)?;
    let from = match call.param("resourceVersion") {
        None | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?,
        ),
    };
    let timeout = match call.param("timeoutSeconds") {
        None => None,
        Some(t) => Some(Duration::from_secs(t.parse().map_err(|_| {
            ApiError::bad_request(format!("invalid timeoutSeconds {t:?}"))
        })?)),
    };
    let request = watch::WatchRequest {
        resource,
        namespace: namespace.map(str::to_owned),
        labels,
        fields,
        from,
        timeout,
        bookmarks: call.param("allowWatchBookmarks") == Some("true"),
        initial_events: call.param("sendInitialEvents") == Some("true"),
    };
    let mut response = Response::new(watch::serve(shared.clone(), request));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

fn ok(status: StatusCode, body: &Value) -> Response<Body> {
    reply(status, Bytes::from(body.to_string()))
}

/// A stored object as the answer, in the JSON its watch events carry too.
fn stored(status: StatusCode, object: &Stored) -> Response<Body> {
    reply(status, object.json().clone())
}

fn reply(status: StatusCode, json: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(json).map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

pub fn failure(error: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    ok(status, &error.status())
}

/// The Status kube-apiserver (or its front proxy) sends for a code a test injects.
pub fn injected_failure(code: u16) -> Response<Body> {
    let reason = match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    let mut response = failure(&ApiError::new(
        code,
        reason,
        format!("injected by the test: {reason}"),
    ));
    if code == 429 {
        response.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from_static("1"),
        );
    }
    response
}
