//! A Rollout's reads for the people who look at it (`canaryd get`, the dashboard): what it owns, listed once
//! with its selector (which of those it controls is the view's to sort out through the ownerReferences), and
//! the Events about it. Nothing here decides or shows anything.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Api;
use kube::api::ListParams;

use super::rollout_writes::owned_selector;
use crate::api::{AnalysisRun, Rollout};
use crate::view::Owned;

/// A read that failed: what was read (`replicasets in namespace "shop"`) and the API server's error.
#[derive(Debug)]
pub struct ReadError {
    pub what: String,
    pub error: kube::Error,
}

/// What a Rollout may own, listed once with its selector.
pub struct Listed {
    pub replica_sets: Vec<ReplicaSet>,
    pub pods: Vec<Pod>,
    pub analysis_runs: Vec<AnalysisRun>,
}

impl Listed {
    pub fn borrowed(&self) -> Owned<'_> {
        Owned {
            replica_sets: &self.replica_sets,
            pods: &self.pods,
            analysis_runs: &self.analysis_runs,
        }
    }
}

/// The ReplicaSets, pods and AnalysisRuns `rollout`'s selector labels, in its namespace.
pub async fn owned(client: &kube::Client, rollout: &Rollout) -> Result<Listed, ReadError> {
    let namespace = rollout.metadata.namespace.clone().unwrap_or_default();
    let params = ListParams::default().labels(&owned_selector(rollout));
    Ok(Listed {
        replica_sets: list(client, &namespace, "replicasets", &params).await?,
        pods: list(client, &namespace, "pods", &params).await?,
        analysis_runs: list(client, &namespace, "analysisruns", &params).await?,
    })
}

/// The core/v1 Events about the Rollout `name` in `namespace`, oldest first.
pub async fn events(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<Event>, ReadError> {
    let mut events: Vec<Event> = list(client, namespace, "events", &ListParams::default())
        .await?
        .into_iter()
        .filter(|e: &Event| {
            e.involved_object.kind.as_deref() == Some("Rollout")
                && e.involved_object.name.as_deref() == Some(name)
        })
        .collect();
    events.sort_by_key(|e| e.last_timestamp.as_ref().map(|t| t.0));
    Ok(events)
}

async fn list<K>(
    client: &kube::Client,
    namespace: &str,
    kind: &str,
    params: &ListParams,
) -> Result<Vec<K>, ReadError>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    match api.list(params).await {
        Ok(listed) => Ok(listed.items),
        Err(error) => Err(ReadError {
            what: format!("{kind} in namespace {namespace:?}"),
            error,
        }),
    }
}
