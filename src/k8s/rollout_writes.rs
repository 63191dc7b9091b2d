//! The Kubernetes edge of a Rollout: reading what its planner needs (the ReplicaSets and AnalysisRuns it
//! controls, its pods while a restart is due, the Services and analysis templates it names) and making each
//! [`Write`] of a plan as the API call Argo Rollouts makes for it, then its status through the status
//! subresource. Every read-modify-write
//! carries the resourceVersion it read, so a concurrent change is a 409 ([`WriteError::Conflict`]) and the
//! caller plans again; a create of a name that exists is taken as done (names are derived from the template
//! hash and the step, so the object there is this write's); a delete or terminate of what is gone is done.
//! Nothing here decides anything: `engine::rollout` does.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::is_status;
use super::status::{Conditional, StatusWriter, WriteError, api_error, written};
use super::versions::{Expected, Least};
use crate::api::rollout::RolloutStatus;
use crate::api::{
    AnalysisRun, AnalysisTemplate, AnalysisTemplateRef, ClusterAnalysisTemplate, Controlled,
    Rollout,
};
use crate::engine::merge_patch;
use crate::engine::rollout::change::{Change, Created, Kind};
use crate::engine::rollout::hash::HASH_LABEL;
use crate::engine::rollout::reconcile_loop::{Snapshot, Templates, nested_templates};
use crate::engine::rollout::{Write, ephemeral_metadata_configured, restart_due};

/// The label selector of the objects `rollout` may own: its selector's matchLabels, which label every
/// ReplicaSet, pod and AnalysisRun it creates (which of them it controls is for the ownerReferences to say).
pub fn owned_selector(rollout: &Rollout) -> String {
    rollout
        .spec
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.as_ref())
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// Reads what the planner needs for `rollout` at `now`. Objects it names that do not exist are left out (the
/// planner says so in InvalidSpec); any other failure is returned.
pub async fn read(
    client: &kube::Client,
    rollout: Arc<Rollout>,
    now: Timestamp,
) -> Result<Snapshot, kube::Error> {
    let namespace = rollout.namespace().unwrap_or_default();
    let uid = rollout.uid().unwrap_or_default();
    let params = ListParams::default().labels(&owned_selector(&rollout));
    // Listed directly, as Argo's pod restarter and ephemeral metadata do (no pod informer): only a restart and
    // canaryMetadata/stableMetadata need them. The planner keeps those a ReplicaSet of the Rollout controls.
    let pods_needed = restart_due(&rollout, now) || ephemeral_metadata_configured(&rollout);
    let (service_names, wanted) = named(&rollout);
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), &namespace);
    let run_api: Api<AnalysisRun> = Api::namespaced(client.clone(), &namespace);
    // Each read needs only the Rollout: all are sent at once, so a reconcile waits for one round trip, not one
    // after another.
    let (replica_sets, analysis_runs, pods, services, templates) = futures::try_join!(
        rs_api.list(&params),
        run_api.list(&params),
        async {
            if !pods_needed {
                return Ok(None);
            }
            let pod_api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            Ok(Some(pod_api.list(&params).await?.items))
        },
        read_services(client, &namespace, &service_names),
        read_templates(client, &namespace, wanted),
    )?;
    let (mut replica_sets, mut analysis_runs) = (replica_sets.items, analysis_runs.items);
    replica_sets.retain(|rs| rs.metadata.controlled_by(&uid));
    analysis_runs.retain(|run| run.metadata.controlled_by(&uid));
    Ok(Snapshot {
        rollout,
        replica_sets: Arc::new(replica_sets),
        analysis_runs: Arc::new(analysis_runs),
        services,
        // The routers edge reads these (`routers::ApiRouter::read`).
        routers: Vec::new(),
        templates,
        pods,
        now,
    })
}

/// The Services named `names` that exist, in that order.
async fn read_services(
    client: &kube::Client,
    namespace: &str,
    names: &[String],
) -> Result<Vec<Service>, kube::Error> {
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    let found = futures::future::try_join_all(names.iter().map(|name| api.get_opt(name))).await?;
    Ok(found.into_iter().flatten().collect())
}

/// The analysis templates `wanted` names and those they nest, each read once: those a round of reads names are
/// read together in the next.
async fn read_templates(
    client: &kube::Client,
    namespace: &str,
    wanted: Vec<AnalysisTemplateRef>,
) -> Result<Templates, kube::Error> {
    let (namespaced, cluster): (Api<AnalysisTemplate>, Api<ClusterAnalysisTemplate>) = (
        Api::namespaced(client.clone(), namespace),
        Api::all(client.clone()),
    );
    let read = |key: (bool, String)| {
        let (namespaced, cluster) = (&namespaced, &cluster);
        async move {
            let spec = if key.0 {
                cluster.get_opt(&key.1).await?.map(|t| t.spec.0)
            } else {
                namespaced.get_opt(&key.1).await?.map(|t| t.spec)
            };
            Ok::<_, kube::Error>((key, spec))
        }
    };
    let mut read_so_far = HashMap::new();
    loop {
        match nested_templates(wanted.clone(), |key| read_so_far.get(key).cloned()) {
            Ok(templates) => return Ok(templates),
            Err(unknown) => read_so_far
                .extend(futures::future::try_join_all(unknown.into_iter().map(read)).await?),
        }
    }
}

/// The Services (canary and stable, or active and preview) and the analysis templates a Rollout names.
/// Collected before any request, so no borrow of the Rollout is held across one.
pub fn named(rollout: &Rollout) -> (Vec<String>, Vec<AnalysisTemplateRef>) {
    // Read in the order canaryd always has (canary before stable): the order changes nothing.
    let services = crate::engine::rollout::references::named_services(rollout)
        .into_iter()
        .rev()
        .filter_map(|(_, name)| name.filter(|n| !n.is_empty()).map(str::to_string))
        .collect();
    let templates = rollout.spec.analysis_templates().into_iter().cloned();
    (services, templates.collect())
}

/// Makes one write of a plan made from `read` as the [`Change`] it stands for (the Rollout's resourceVersion,
/// `rollout_rv`, is updated when the write is to the Rollout itself), with the resourceVersions of `read`'s
/// objects as preconditions. Returns what the API server holds of the object after it (its version, or that
/// it is gone), but for a pod's. Evictions go through `evictions`, a client that does not retry a 429 itself
/// (kube's default client retries it for minutes).
pub async fn apply(
    client: &kube::Client,
    evictions: &kube::Client,
    rollout_rv: &mut String,
    read: &Snapshot,
    write: &Write,
) -> Result<Option<Expected>, WriteError> {
    let rollout = &read.rollout;
    let namespace = rollout.namespace().unwrap_or_default();
    let version = |kind, name: String, meta: &ObjectMeta| Expected {
        kind,
        name,
        least: Least::Version(meta.resource_version.clone().unwrap_or_default()),
    };
    match write.change() {
        Change::Create(Created::ReplicaSet(rs)) => {
            let made = create(client, &namespace, rs, rollout).await?;
            let name = made.name.clone().unwrap_or_default();
            Ok(Some(version(Kind::ReplicaSet, name, &made)))
        }
        Change::Create(Created::AnalysisRun(run)) => {
            let made = create(client, &namespace, run, rollout).await?;
            let name = made.name.clone().unwrap_or_default();
            Ok(Some(version(Kind::AnalysisRun, name, &made)))
        }
        Change::Patch {
            kind,
            name,
            mut patch,
            versioned,
        } => {
            if versioned {
                let version = match kind {
                    Kind::Rollout => Some(rollout_rv.clone()),
                    _ => read_version(read, kind, name),
                };
                patch["metadata"]["resourceVersion"] = json!(version.ok_or(WriteError::Gone)?);
            }
            let target = if kind == Kind::Rollout {
                rollout.name_any()
            } else {
                name.to_string()
            };
            let done = merge(client, &namespace, kind, &target, &patch)
                .await
                .map(|meta| {
                    if kind == Kind::Rollout {
                        *rollout_rv = meta.resource_version.clone().unwrap_or_default();
                    }
                    Some(version(kind, target.clone(), &meta))
                });
            // An unversioned patch (a run's terminate) of what is gone has nothing left to do.
            match done {
                Err(WriteError::Gone) if !versioned => Ok(None),
                done => done,
            }
        }
        Change::Delete {
            kind,
            name,
            only_as_read,
        } => {
            let uid = read_uid(read, kind, name);
            let params = DeleteParams {
                preconditions: only_as_read.then(|| Preconditions {
                    uid: uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            let deleted = dynamic(client, &namespace, kind)
                .delete(name, &params)
                .await
                .map(drop);
            match deleted.map_err(api_error) {
                Ok(()) | Err(WriteError::Gone) => Ok(Some(Expected {
                    kind,
                    name: name.to_string(),
                    least: Least::Gone(uid),
                })),
                Err(e) => Err(e),
            }
        }
        Change::Evict { name } => {
            let api: Api<Pod> = Api::namespaced(evictions.clone(), &namespace);
            match api.evict(name, &EvictParams::default()).await {
                // 429: a PodDisruptionBudget holds it; the controller plans again without the restart.
                Err(e) if is_status(&e, 429) => Err(WriteError::Refused),
                Err(e) if is_status(&e, 404) => Ok(None),
                Err(e) => Err(api_error(e)),
                Ok(_) => Ok(None),
            }
        }
    }
}

/// The resource of `kind`, untyped: a change is a merge patch or a delete by name, the same request whatever
/// the kind.
fn resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::Rollout => ApiResource::erase::<Rollout>(&()),
        Kind::ReplicaSet => ApiResource::erase::<ReplicaSet>(&()),
        Kind::Service => ApiResource::erase::<Service>(&()),
        Kind::AnalysisRun => ApiResource::erase::<AnalysisRun>(&()),
        Kind::Pod => ApiResource::erase::<Pod>(&()),
    }
}

/// The API of objects of `kind` in `namespace`.
fn dynamic(client: &kube::Client, namespace: &str, kind: Kind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &resource(kind))
}

/// The resourceVersion `read` holds for the named object of `kind`.
fn read_version(read: &Snapshot, kind: Kind, name: &str) -> Option<String> {
    read_meta(read, kind, name).and_then(|m| m.resource_version.clone())
}

/// The uid `read` holds for the named object of `kind`.
fn read_uid(read: &Snapshot, kind: Kind, name: &str) -> Option<String> {
    read_meta(read, kind, name).and_then(|m| m.uid.clone())
}

fn read_meta<'a>(read: &'a Snapshot, kind: Kind, name: &str) -> Option<&'a ObjectMeta> {
    let named = |m: &&ObjectMeta| m.name.as_deref() == Some(name);
    match kind {
        Kind::Rollout => Some(&read.rollout.metadata),
        Kind::ReplicaSet => read.replica_sets.iter().map(|o| &o.metadata).find(named),
        Kind::Service => read.services.iter().map(|o| &o.metadata).find(named),
        Kind::AnalysisRun => read.analysis_runs.iter().map(|o| &o.metadata).find(named),
        Kind::Pod => read.pods.iter().flatten().map(|o| &o.metadata).find(named),
    }
}

/// Merge-patches the `kind` named `name`; returns its metadata after the write.
async fn merge(
    client: &kube::Client,
    namespace: &str,
    kind: Kind,
    name: &str,
    patch: &Value,
) -> Result<ObjectMeta, WriteError> {
    let request =
        kube::core::Request::new(DynamicObject::url_path(&resource(kind), Some(namespace)))
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .map_err(|e| WriteError::Api(kube::Error::BuildRequest(e)))?;
    written(client, request).await
}

/// Creates `object`, controlled by `rollout`; returns its metadata. A 409 is this write made before when the
/// object of that name is controlled by `rollout` (its name derives from the template hash and the step); one
/// it does not control (an orphan, another owner's) is [`WriteError::Taken`], as the next read would not show
/// it either.
async fn create<K>(
    client: &kube::Client,
    namespace: &str,
    object: &K,
    rollout: &Rollout,
) -> Result<ObjectMeta, WriteError>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let body =
        serde_json::to_vec(object).map_err(|e| WriteError::Api(kube::Error::SerdeError(e)))?;
    let request = kube::core::Request::new(K::url_path(&(), Some(namespace)))
        .create(&PostParams::default(), body)
        .map_err(|e| WriteError::Api(kube::Error::BuildRequest(e)))?;
    match written(client, request).await {
        Err(WriteError::Conflict) => {
            let name = object.meta().name.as_deref().unwrap_or_default();
            let api: Api<K> = Api::namespaced(client.clone(), namespace);
            match api.get_opt(name).await.map_err(api_error)? {
                Some(there)
                    if there
                        .meta()
                        .controlled_by(&rollout.uid().unwrap_or_default()) =>
                {
                    Ok(there.meta().clone())
                }
                Some(_) => Err(WriteError::Taken),
                // Deleted since: plan again.
                None => Err(WriteError::Conflict),
            }
        }
        made => made,
    }
}

/// What `write` does, naming its object, for the error when it fails.
pub fn describe(rollout: &Rollout, write: &Write) -> String {
    let namespace = rollout.namespace().unwrap_or_default();
    let at = |kind: &str, name: &str| format!("{kind} {namespace}/{name}");
    let named = |meta: &ObjectMeta| meta.name.clone().unwrap_or_default();
    match write {
        Write::RolloutRevision { revision } => format!(
            "setting the revision of {} to {revision}",
            at("Rollout", &rollout.name_any())
        ),
        Write::CreateReplicaSet(rs) => {
            format!("creating {}", at("ReplicaSet", &named(&rs.metadata)))
        }
        Write::ReviseReplicaSet { name, .. } => format!(
            "syncing the revision, annotations and minReadySeconds of {}",
            at("ReplicaSet", name)
        ),
        Write::ScaleReplicaSet { name, replicas, .. } => {
            format!("scaling {} to {replicas}", at("ReplicaSet", name))
        }
        Write::SwitchService { name, hash, .. } => {
            format!("pointing {} at {HASH_LABEL}={hash}", at("Service", name))
        }
        Write::CreateAnalysisRun(run) => {
            format!("creating {}", at("AnalysisRun", &named(&run.metadata)))
        }
        Write::TerminateAnalysisRun { name } => format!("terminating {}", at("AnalysisRun", name)),
        Write::DeleteReplicaSet { name } => format!("deleting {}", at("ReplicaSet", name)),
        Write::SyncPodMetadata { name, .. } => format!(
            "writing canaryMetadata/stableMetadata into the pod template of {}",
            at("ReplicaSet", name)
        ),
        Write::RelabelPod { name, .. } => format!(
            "writing canaryMetadata/stableMetadata onto {}",
            at("Pod", name)
        ),
        Write::RolloutReplicas { replicas } => format!(
            "setting spec.replicas of {} to {replicas}",
            at("Rollout", &rollout.name_any())
        ),
        Write::EvictPod { name } => format!("evicting {}", at("Pod", name)),
        Write::DeleteAnalysisRun { name } => format!("deleting {}", at("AnalysisRun", name)),
        Write::AnnotateReplicaSet { name, key, .. } => {
            format!("writing the annotation {key} of {}", at("ReplicaSet", name))
        }
    }
}

/// Writes `new` over `old` (the status the Rollout held at `resource_version`) through the status subresource:
/// a merge patch of what changed, `null` for what `new` no longer has, as Argo's controller patches it.
pub async fn patch_status(
    writer: &StatusWriter,
    rollout: &Rollout,
    resource_version: &str,
    old: &RolloutStatus,
    new: &RolloutStatus,
) -> Result<ObjectMeta, WriteError> {
    let patch =
        merge_patch::diff_of(old, new).map_err(|e| WriteError::Api(kube::Error::SerdeError(e)))?;
    let body = Conditional::new(resource_version, patch);
    writer
        .patch::<Rollout, _>(
            rollout.namespace().as_deref(),
            &rollout.name_any(),
            resource_version,
            &body,
        )
        .await
}
