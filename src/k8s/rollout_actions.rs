//! The requests of the Rollout actions a person makes (`canaryd promote`, `abort`, `retry`, `pause`, `resume`,
//! `restart`, `undo`, `set image`), made as kubectl-argo-rollouts makes them: the same verbs, subresources and
//! patch types, so Argo Rollouts and canaryd both honour them. What each writes is `engine::rollout::actions`'s;
//! this only reads, sends and names what went wrong.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::is_status;
use crate::api::Rollout;
use crate::engine::rollout::actions::{
    self, PromotePatches, PromoteRefusal, RevisionCandidate, Toggle, UndoRefusal,
};

/// How many times `set image` reads and replaces the Rollout when another writer wins the race
/// (set_image.go's `maxAttempts`).
const SET_IMAGE_ATTEMPTS: usize = 5;

/// Why an action was not made.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("rollout {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("rollout {0} is not a canary or blue-green Rollout")]
    NotCanary(String),
    #[error(
        "rollout {0} is already fully promoted: its stable ReplicaSet is the current revision and nothing pauses it"
    )]
    AlreadyPromoted(String),
    #[error("rollout {0} has spec.workloadRef, which canaryd does not run")]
    WorkloadRef(String),
    #[error("rollout {0} has no revision {1}")]
    NoSuchRevision(String, i64),
    #[error("rollout {0} has no earlier revision to go back to")]
    NoPreviousRevision(String),
    #[error("restart --in {0} is too far ahead")]
    TooFarAhead(String),
    #[error("rollout {0} has no container named {1:?}")]
    UnknownContainer(String, String),
    #[error("rollout {0}: {1}")]
    Api(String, kube::Error),
    #[error("rollout {0} cannot be read: {1}")]
    Unreadable(String, String),
}

/// What `undo` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undone {
    /// The template of the revision was written.
    Restored,
    /// The Rollout's template already was the revision's (undo.go's "skipped rollback").
    AlreadyThere,
}

/// One Rollout the actions address.
pub struct Target {
    api: Api<DynamicObject>,
    client: kube::Client,
    namespace: String,
    name: String,
}

impl Target {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Target {
        let resource = ApiResource::erase::<Rollout>(&());
        Target {
            api: Api::namespaced_with(client.clone(), namespace, &resource),
            client,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `namespace/name`, as the errors name the Rollout.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn error(&self, e: kube::Error) -> ActionError {
        if is_status(&e, 404) {
            ActionError::NotFound {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
            }
        } else {
            ActionError::Api(self.id(), e)
        }
    }

    async fn get(&self) -> Result<DynamicObject, ActionError> {
        self.api.get(&self.name).await.map_err(|e| self.error(e))
    }

    async fn patch(&self, patch: Patch<Value>) -> Result<(), ActionError> {
        let params = PatchParams::default();
        self.api
            .patch(&self.name, &params, &patch)
            .await
            .map(drop)
            .map_err(|e| self.error(e))
    }

    /// A merge patch of the status subresource; `Ok(false)` when it is 404 (no status subresource, or no
    /// Rollout), for the caller to send to the object instead as the plugin does.
    async fn patch_status(&self, patch: &Value) -> Result<bool, ActionError> {
        let params = PatchParams::default();
        match self
            .api
            .patch_status(&self.name, &params, &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_status(&e, 404) => Ok(false),
            Err(e) => Err(self.error(e)),
        }
    }

    /// `abort`, `retry`, `pause` or `resume`: the fixed patch, to the status subresource first where the plugin
    /// sends it there (AbortRollout, RetryRollout), else to the object.
    pub async fn toggle(&self, toggle: Toggle) -> Result<(), ActionError> {
        let patch = toggle.patch();
        if toggle.on_status() && self.patch_status(&patch).await? {
            return Ok(());
        }
        self.patch(Patch::Merge(patch)).await
    }

    /// `restart`: `spec.restartAt` at `at` (RestartRollout).
    pub async fn restart(&self, at: Timestamp) -> Result<(), ActionError> {
        self.patch(Patch::Merge(actions::restart_patch(at))).await
    }

    /// `promote [--full]` (PromoteRollout): read the Rollout, then the status patch and the spec patch
    /// `getPatches` picks, the unified one to the object when the status subresource is 404.
    pub async fn promote(&self, full: bool) -> Result<(), ActionError> {
        let object = self.get().await?;
        let rollout: Rollout = object
            .try_parse()
            .map_err(|e| ActionError::Unreadable(self.id(), e.to_string()))?;
        let PromotePatches {
            mut spec,
            status,
            unified,
        } = actions::promote(&rollout, full).map_err(|refusal| match refusal {
            PromoteRefusal::NotCanary => ActionError::NotCanary(self.id()),
            PromoteRefusal::AlreadyPromoted => ActionError::AlreadyPromoted(self.id()),
        })?;
        if let Some(status) = status
            && !self.patch_status(&status).await?
        {
            spec = Some(unified);
        }
        match spec {
            Some(spec) => self.patch(Patch::Merge(spec)).await,
            None => Ok(()),
        }
    }

    /// `undo [--to-revision N]` (RunUndoRollout): read the Rollout, list the ReplicaSets its selector
    /// selects, and put the revision's template back with a JSON patch unless it is there already.
    pub async fn undo(&self, to_revision: i64) -> Result<Undone, ActionError> {
        let rollout = self.get().await?;
        self.refuse_workload_ref(&rollout)?;
        let selector = selector_of(&rollout);
        let resource = ApiResource::erase::<ReplicaSet>(&());
        let rs_api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.namespace, &resource);
        let listed = rs_api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| ActionError::Api(self.id(), e))?;
        let candidates: Vec<RevisionCandidate> = listed
            .items
            .into_iter()
            .map(|rs| RevisionCandidate {
                template: rs
                    .data
                    .pointer("/spec/template")
                    .cloned()
                    .unwrap_or_default(),
                metadata: rs.metadata,
            })
            .collect();
        let uid = rollout.metadata.uid.clone().unwrap_or_default();
        let target =
            actions::undo_target(&candidates, &uid, to_revision).map_err(
                |refusal| match refusal {
                    UndoRefusal::NoSuchRevision(n) => ActionError::NoSuchRevision(self.id(), n),
                    UndoRefusal::NoPreviousRevision => ActionError::NoPreviousRevision(self.id()),
                },
            )?;
        let template = rollout
            .data
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_default();
        if actions::template_matches(&template, target) {
            return Ok(Undone::AlreadyThere);
        }
        let patch: json_patch::Patch = serde_json::from_value(actions::undo_patch(target))
            .map_err(|e| ActionError::Unreadable(self.id(), e.to_string()))?;
        self.patch(Patch::Json(patch)).await?;
        Ok(Undone::Restored)
    }

    /// `set image CONTAINER=IMAGE` (SetImage): read the Rollout, set the image, and replace it, reading
    /// again when another writer changed it in between.
    pub async fn set_image(&self, container: &str, image: &str) -> Result<(), ActionError> {
        let mut attempt = 1;
        loop {
            let mut rollout = self.get().await?;
            self.refuse_workload_ref(&rollout)?;
            if !actions::set_image(&mut rollout.data, container, image) {
                return Err(ActionError::UnknownContainer(self.id(), container.into()));
            }
            match self
                .api
                .replace(&self.name, &PostParams::default(), &rollout)
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if is_status(&e, 409) && attempt < SET_IMAGE_ATTEMPTS => attempt += 1,
                Err(e) => return Err(self.error(e)),
            }
        }
    }

    fn refuse_workload_ref(&self, rollout: &DynamicObject) -> Result<(), ActionError> {
        match rollout.data.pointer("/spec/workloadRef") {
            Some(_) => Err(ActionError::WorkloadRef(self.id())),
            None => Ok(()),
        }
    }
}

/// The label selector of the Rollout's `spec.selector`, as undo.go's `listReplicaSets` lists with it.
fn selector_of(rollout: &DynamicObject) -> String {
    let selector = rollout
        .data
        .pointer("/spec/selector")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok());
    selector
        .map(|s| crate::api::meta::selector_string(&s))
        .unwrap_or_default()
}
