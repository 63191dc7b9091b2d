//! Writing a custom resource's status where the installed CRD keeps it. A CRD either declares the status
//! subresource (then `/status` is the only way to change status, and the object itself ignores it) or does not
//! (Argo Rollouts' analysis kinds: then `/status` answers 404 and status is written with the object). Which one
//! holds is learned from discovery, remembered per kind, and learned again when a write shows the CRD changed:
//! a 404 from `/status`, or a write to the object that the server kept as it was. Every write is a merge patch
//! carrying `metadata.resourceVersion`, so the API server refuses it with 409 when the object changed since it
//! was read. This module owns no status contents: callers bring the patch body.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Patch, PatchParams};
use serde::Serialize;

use super::is_status;

/// The body of a status write: the resourceVersion it is conditional on, and the status fields it writes.
#[derive(Serialize)]
pub struct Conditional<'a, S> {
    metadata: Precondition<'a>,
    status: S,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Precondition<'a> {
    resource_version: &'a str,
}

impl<'a, S: Serialize> Conditional<'a, S> {
    pub fn new(resource_version: &'a str, status: S) -> Self {
        Conditional {
            metadata: Precondition { resource_version },
            status,
        }
    }
}

/// Where a kind's status is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusAt {
    /// The status subresource: `PATCH …/NAME/status`.
    Subresource,
    /// The object itself: `PATCH …/NAME` with only `status` and the resourceVersion in the patch.
    Object,
}

/// Why a status write did not land.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// 409: the object changed since `resource_version` was read.
    #[error("the object changed since it was read (409 Conflict)")]
    Conflict,
    /// 404: it was deleted.
    #[error("the object is gone")]
    Gone,
    /// Discovery does not list the kind: its CRD is not installed.
    #[error("the API server does not serve {0}: is its CustomResourceDefinition installed?")]
    NotServed(String),
    #[error("status patch failed: {0}")]
    Api(kube::Error),
    /// A create met an object of that name that the writer does not control.
    #[error("the name is taken by an object the Rollout does not control")]
    Taken,
    /// An eviction a PodDisruptionBudget refused (429): the pod was not evicted.
    #[error("refused by a PodDisruptionBudget (429 TooManyRequests)")]
    Refused,
}

/// Status writes of one process: the route of each kind, shared by every reconcile.
pub struct StatusWriter {
    client: kube::Client,
    /// Where status goes, by `group/version/plural`. An async lock, so that a thousand reconciles starting together wait
    /// for one discovery request instead of sending a thousand.
    routes: tokio::sync::Mutex<HashMap<String, StatusAt>>,
}

impl StatusWriter {
    pub fn new(client: kube::Client) -> StatusWriter {
        StatusWriter {
            client,
            routes: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Merges `body` (`metadata.resourceVersion` = `resource_version`, and `status`) into the status of the
    /// `K` named `name`, by whichever route its CRD offers. Returns the updated object's metadata.
    pub async fn patch<K, B>(
        &self,
        namespace: Option<&str>,
        name: &str,
        resource_version: &str,
        body: &B,
    ) -> Result<ObjectMeta, WriteError>
    where
        K: Resource<DynamicType = ()>,
        B: Serialize,
    {
        let route = self.route::<K>(None).await?;
        match (route, self.send::<K, B>(route, namespace, name, body).await) {
            (StatusAt::Subresource, Err(WriteError::Gone)) => {
                // Gone, or the CRD no longer declares the subresource: only discovery tells which.
                match self.route::<K>(Some(route)).await? {
                    StatusAt::Subresource => Err(WriteError::Gone),
                    StatusAt::Object => {
                        self.send::<K, B>(StatusAt::Object, namespace, name, body)
                            .await
                    }
                }
            }
            (StatusAt::Object, Ok(meta))
                if meta.resource_version.as_deref() == Some(resource_version) =>
            {
                // A write that changes nothing keeps the resourceVersion. The status this writes differs from
                // the stored one, so the server ignored it: the CRD gained the status subresource.
                match self.route::<K>(Some(route)).await? {
                    StatusAt::Subresource => {
                        self.send::<K, B>(StatusAt::Subresource, namespace, name, body)
                            .await
                    }
                    StatusAt::Object => Ok(meta),
                }
            }
            (_, result) => result,
        }
    }

    /// The route of `K`: the one remembered, or from discovery when none is, or when the one remembered is
    /// `stale` (a write by it just failed). When another reconcile already replaced the stale route, that one
    /// is used without asking again.
    async fn route<K: Resource<DynamicType = ()>>(
        &self,
        stale: Option<StatusAt>,
    ) -> Result<StatusAt, WriteError> {
        let key = format!("{}/{}", K::api_version(&()), K::plural(&()));
        let mut routes = self.routes.lock().await;
        match routes.get(&key) {
            Some(known) if stale != Some(*known) => return Ok(*known),
            _ => {}
        }
        let resources = self
            .client
            .list_api_group_resources(&K::api_version(&()))
            .await
            .map_err(|e| {
                if is_status(&e, 404) {
                    WriteError::NotServed(key.clone())
                } else {
                    WriteError::Api(e)
                }
            })?;
        let plural = K::plural(&());
        let served = |name: &str| resources.resources.iter().any(|r| r.name == name);
        if !served(&plural) {
            return Err(WriteError::NotServed(key));
        }
        let route = if served(&format!("{plural}/status")) {
            StatusAt::Subresource
        } else {
            StatusAt::Object
        };
        if stale.is_some() {
            tracing::info!(resource = %key, route = ?route, "Discovery changed where status is written");
        }
        routes.insert(key, route);
        Ok(route)
    }

    async fn send<K, B>(
        &self,
        route: StatusAt,
        namespace: Option<&str>,
        name: &str,
        body: &B,
    ) -> Result<ObjectMeta, WriteError>
    where
        K: Resource<DynamicType = ()>,
        B: Serialize,
    {
        let target = kube::core::Request::new(K::url_path(&(), namespace));
        let (params, patch) = (PatchParams::default(), Patch::Merge(body));
        let request = match route {
            StatusAt::Subresource => target.patch_subresource("status", name, &params, &patch),
            StatusAt::Object => target.patch(name, &params, &patch),
        }
        .map_err(|e| WriteError::Api(kube::Error::BuildRequest(e)))?;
        written(&self.client, request).await
    }
}

/// Sends a write and reads only the metadata of the object in the reply, but its managed fields
/// ([`super::managed_fields`]): serde skips the rest without building it, where decoding the whole object would
/// build its spec and status only to drop them.
pub(super) async fn written(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
) -> Result<ObjectMeta, WriteError> {
    #[derive(serde::Deserialize)]
    struct Written {
        metadata: ObjectMeta,
    }
    let text = client.request_text(request).await.map_err(api_error)?;
    serde_json::from_str::<Written>(&super::managed_fields::without(&text))
        .map(|w| w.metadata)
        .map_err(|e| WriteError::Api(kube::Error::SerdeError(e)))
}

/// A failed request as a [`WriteError`]: 409 a conflict, 404 gone.
pub(super) fn api_error(e: kube::Error) -> WriteError {
    if is_status(&e, 409) {
        WriteError::Conflict
    } else if is_status(&e, 404) {
        WriteError::Gone
    } else {
        WriteError::Api(e)
    }
}
