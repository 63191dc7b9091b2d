//! The Kubernetes edge of the job provider: create, read and delete the Jobs canaryd runs as measurements,
//! and one watch per namespace of the Jobs it created (those labelled [`RUN_UID_LABEL`]), so a measurement
//! in flight is collected from a cache rather than by polling each Job.
//!
//! This module owns the API calls and the cache; it decides nothing about a measurement (names, labels and
//! phases are `providers/job.rs`'s).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams, PropagationPolicy};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

/// The label on every Job canaryd creates: the UID of the run it measures for (Argo's key). The watch picks
/// Jobs by it.
pub const RUN_UID_LABEL: &str = "analysisrun.argoproj.io/uid";
/// The annotation naming the run a Job measures for (Argo's key).
pub const RUN_NAME_ANNOTATION: &str = "analysisrun.argoproj.io/name";

/// The Jobs canaryd creates, on one API server. Build once per process and share.
pub struct Jobs {
    client: kube::Client,
    /// One watch per namespace, started on first use.
    watched: Mutex<HashMap<String, Watched>>,
}

struct Watched {
    store: Store<Job>,
    task: tokio::task::AbortHandle,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let namespaces: Vec<String> = self
            .watched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        f.debug_struct("Jobs")
            .field("watched", &namespaces)
            .finish()
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        let watched = self
            .watched
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for w in watched.values() {
            w.task.abort();
        }
    }
}

impl Jobs {
    pub fn new(client: kube::Client) -> Jobs {
        Jobs {
            client,
            watched: Mutex::new(HashMap::new()),
        }
    }

    /// The namespace the client's configuration names (kubeconfig context, or the pod's own).
    pub fn default_namespace(&self) -> &str {
        self.client.default_namespace()
    }

    /// Creates `job` (a whole Job object, its spec as the user wrote it) in `namespace`.
    pub async fn create(&self, namespace: &str, job: Value) -> Result<(), kube::Error> {
        self.watch(namespace);
        let resource = ApiResource::erase::<Job>(&());
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        let object: DynamicObject = serde_json::from_value(job).map_err(kube::Error::SerdeError)?;
        api.create(&PostParams::default(), &object).await?;
        Ok(())
    }

    /// The Job `name` in `namespace`: from the watch's cache, else (not listed yet, or just created) from the
    /// API server. `None` when there is none.
    pub async fn get(&self, namespace: &str, name: &str) -> Result<Option<Arc<Job>>, kube::Error> {
        let store = self.watch(namespace);
        if let Some(job) = store.get(&ObjectRef::new(name).within(namespace)) {
            return Ok(Some(job));
        }
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace);
        Ok(api.get_opt(name).await?.map(Arc::new))
    }

    /// The Jobs canaryd created in `namespace` as the watch last saw them (none until it has listed).
    pub fn cached(&self, namespace: &str) -> Vec<Arc<Job>> {
        self.watch(namespace).state()
    }

    /// Deletes the Job and, before it goes, its Pods (foreground, as Argo deletes a measurement's Job). A Job
    /// already gone is no error.
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..DeleteParams::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if super::is_status(&e, 404) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The cache of `namespace`'s Jobs, its watch started if it was not.
    fn watch(&self, namespace: &str) -> Store<Job> {
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = watched.get(namespace) {
            return w.store.clone();
        }
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace);
        let (store, writer) = reflector::store();
        let config = watcher::Config::default().labels(RUN_UID_LABEL);
        let task = tokio::spawn(async move {
            let events = watcher(api, config).default_backoff().reflect(writer);
            let mut events = std::pin::pin!(events);
            // The cache is the point; a failed watch re-lists with backoff by itself.
            while events.next().await.is_some() {}
        });
        watched.insert(
            namespace.to_string(),
            Watched {
                store: store.clone(),
                task: task.abort_handle(),
            },
        );
        store
    }
}
