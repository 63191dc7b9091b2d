//! [`ApiRouter`]: the routers through the API server. Each object is read, handed to its
//! `engine::routing` builder, and written only when the builder changes it: a full update carrying the
//! resourceVersion it read (VirtualService, DestinationRule, HTTPRoute, TraefikService, ALB's Ingress), or for the NGINX canary Ingress and
//! SMI's TrafficSplit a create, or a merge patch carrying that resourceVersion. A 409 (the object changed since it was read)
//! reads it again and retries; any other refusal is returned with the server's message.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::objects::{DestinationRule, HttpRoute, VirtualService};
use super::{Action, Change, FIELD_MANAGER, Route, RouterApis, RouterError};
use crate::api::Rollout;
use crate::engine::routing::alb_release;
use crate::engine::routing::nginx::CanaryIngress;
use crate::engine::routing::smi::{self, TrafficSplitWrite};
use crate::engine::routing::{
    self, Built, Desired, Moved, RouterObject, RoutingError, Target, nginx, traefik,
};
use crate::k8s::is_status;

/// How often one object is read and written again after a 409 before giving up for this reconcile.
const ATTEMPTS: usize = 5;

#[derive(Clone)]
pub struct ApiRouter {
    client: kube::Client,
    /// Where the TrafficSplit and the TraefikService are served (the daemon's flags).
    apis: RouterApis,
}

impl ApiRouter {
    /// The router with Argo's default APIs.
    pub fn new(client: kube::Client) -> ApiRouter {
        ApiRouter {
            client,
            apis: RouterApis::default(),
        }
    }

    /// The same router reading and writing through `apis`.
    pub fn with_apis(self, apis: RouterApis) -> ApiRouter {
        ApiRouter { apis, ..self }
    }

    /// The TraefikService's API, as `--traefik-api-group` and `--traefik-api-version` name it.
    fn traefik_services(&self, namespace: &str) -> Api<DynamicObject> {
        let api = &self.apis.traefik;
        let gvk = GroupVersionKind::gvk(&api.group, &api.version, traefik::KIND);
        let resource = ApiResource::from_gvk_with_plural(&gvk, traefik::PLURAL);
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }
}

/// The object one write is about, for messages.
struct Object<'a> {
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
}

impl Object<'_> {
    fn missing(&self) -> RouterError {
        RouterError::Missing {
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
        }
    }

    fn unfit(&self, error: RoutingError) -> RouterError {
        RouterError::Unfit {
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            error: Box::new(error),
        }
    }

    fn change(&self, action: Action) -> Change {
        Change {
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            action,
            announced: Vec::new(),
            version: None,
        }
    }

    /// A failed read or (`writing`) write: a refusal keeps the server's words, other failures the client's
    /// error.
    fn failed(&self, e: kube::Error, writing: bool) -> RouterError {
        match e {
            kube::Error::Api(status) if (400..500).contains(&status.code) => RouterError::Refused {
                kind: self.kind,
                namespace: self.namespace.to_string(),
                name: self.name.to_string(),
                message: status.message.clone(),
                writing,
            },
            source => RouterError::Api {
                kind: self.kind,
                namespace: self.namespace.to_string(),
                name: self.name.to_string(),
                source: Box::new(source),
                writing,
            },
        }
    }

    fn conflict(&self) -> RouterError {
        RouterError::Conflict {
            kind: self.kind,
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            attempts: ATTEMPTS,
        }
    }

    fn json<T: Serialize>(&self, object: &T) -> Result<Value, RouterError> {
        serde_json::to_value(object)
            .map_err(|e| self.unfit(RoutingError::Mismatch(format!("cannot be encoded: {e}"))))
    }

    fn decode<T: DeserializeOwned>(&self, value: Value) -> Result<T, RouterError> {
        serde_json::from_value(value).map_err(|e| {
            self.unfit(RoutingError::Mismatch(format!(
                "the builder's result does not decode: {e}"
            )))
        })
    }
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_string()),
    }
}

impl ApiRouter {
    /// Brings every router `rollout.spec.strategy.canary.trafficRouting` names to `route`; returns the
    /// objects it wrote (none when they already said so). The Rollout controller calls it with the Rollout
    /// as read, `Plan::route` and the ReplicaSets it owns, before making the plan's writes; on an error it
    /// writes nothing else of the plan. `replica_sets` gate Istio's subset-only mode, whose DestinationRule
    /// moves only to fully available ReplicaSets. An object updated whole is built from its copy in `read`
    /// (what [`ApiRouter::read`] returned for the same plan) rather than read again; a 409 reads it afresh.
    pub async fn apply(
        &self,
        rollout: &Rollout,
        route: &Route,
        replica_sets: &[ReplicaSet],
        read: &[RouterObject],
    ) -> Result<Vec<Change>, RouterError> {
        let Some(config) =
            routing::routing(rollout).map_err(|e| RouterError::Config(Box::new(e)))?
        else {
            return Ok(Vec::new());
        };
        let d = Desired::new(
            rollout,
            &config,
            route.weight,
            &route.canary_hash,
            &route.stable_hash,
        )
        .with_managed(&route.managed);
        let mut changes = Vec::new();
        for target in routing::targets(&config, &d) {
            let name = target.name(&d);
            let object = Object {
                kind: target.kind(),
                namespace: target.namespace(),
                name: &name,
            };
            let build = |current: &Value| target.build(current, &d);
            target.held(&d, replica_sets).map_err(|e| object.unfit(e))?;
            // The copy read for this plan, of the object written.
            let first = target
                .read_in(read)
                .filter(|o| o.name == name)
                .and_then(|o| o.object.as_deref());
            let written = match target {
                Target::DestinationRule { namespace, .. } => {
                    let api: Api<DestinationRule> = Api::namespaced(self.client.clone(), namespace);
                    update(&api, &object, first, build).await?
                }
                Target::VirtualService { namespace, .. } => {
                    let api: Api<VirtualService> = Api::namespaced(self.client.clone(), namespace);
                    update(&api, &object, first, build).await?
                }
                Target::HttpRoute { namespace, .. } => {
                    let api: Api<HttpRoute> = Api::namespaced(self.client.clone(), namespace);
                    update(&api, &object, first, build).await?
                }
                Target::TraefikService { namespace, .. } => {
                    update(&self.traefik_services(namespace), &object, first, build).await?
                }
                Target::AlbIngress { namespace, .. } => {
                    let api: Api<Ingress> = Api::namespaced(self.client.clone(), namespace);
                    update(&api, &object, first, build).await?
                }
                Target::CanaryIngress { stable, config, .. } => self
                    .canary_ingress(stable, &name, config, &d)
                    .await?
                    .map(|c| (c, Moved::WEIGHTS)),
                Target::TrafficSplit { config, .. } => self
                    .traffic_split(&object, config, &d)
                    .await?
                    .map(|c| (c, Moved::WEIGHTS)),
            };
            if let Some((mut change, moved)) = written {
                change.announced = target.written(&d, change.action == Action::Created, moved);
                changes.push(change);
            }
        }
        Ok(changes)
    }

    /// Reads every router object `rollout` names (for NGINX the stable Ingress), as they are, for the planner
    /// to check before anything is acted on; one that does not exist is read as `None`. A configuration that
    /// does not read names nothing (the planner reports it). `cached` gives an object's copy by kind,
    /// namespace and name where a watch holds one that may be used; the others are read from the API server.
    pub async fn read(
        &self,
        rollout: &Rollout,
        cached: impl Fn(&'static str, &str, &str) -> Option<Arc<Value>>,
    ) -> Result<Vec<RouterObject>, kube::Error> {
        let Ok(Some(config)) = routing::routing(rollout) else {
            return Ok(Vec::new());
        };
        let d = Desired::new(rollout, &config, 0, "", "");
        let mut out = Vec::new();
        for target in routing::targets(&config, &d)
            .into_iter()
            .filter(Target::referenced)
        {
            let (namespace, name) = (target.namespace(), target.read_name());
            let object = match target {
                _ if let Some(copy) = cached(target.kind(), namespace, name) => Some(copy),
                Target::DestinationRule { .. } => {
                    get::<DestinationRule>(&self.client, namespace, name).await?
                }
                Target::VirtualService { .. } => {
                    get::<VirtualService>(&self.client, namespace, name).await?
                }
                Target::HttpRoute { .. } => get::<HttpRoute>(&self.client, namespace, name).await?,
                Target::CanaryIngress { .. } | Target::AlbIngress { .. } => {
                    get::<Ingress>(&self.client, namespace, name).await?
                }
                Target::TrafficSplit { .. } | Target::TraefikService { .. } => continue,
            };
            out.push(RouterObject {
                kind: target.kind(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                object,
            });
        }
        Ok(out)
    }

    /// The canary Ingress of one stable Ingress: created owned by the Rollout, or merge-patched.
    async fn canary_ingress(
        &self,
        stable_name: &str,
        canary_name: &str,
        config: &crate::api::traffic_routing::NginxTrafficRouting,
        d: &Desired<'_>,
    ) -> Result<Option<Change>, RouterError> {
        let namespace = d.rollout_namespace();
        let api: Api<Ingress> = Api::namespaced(self.client.clone(), namespace);
        let stable_target = Object {
            kind: "Ingress",
            namespace,
            name: stable_name,
        };
        let target = Object {
            kind: "Ingress",
            namespace,
            name: canary_name,
        };
        on_conflict_read_again(&target, || async {
            let stable = api
                .get_opt(stable_name)
                .await
                .map_err(|e| stable_target.failed(e, false))?
                .ok_or_else(|| stable_target.missing())?;
            let existing = api
                .get_opt(canary_name)
                .await
                .map_err(|e| target.failed(e, false))?;
            let planned = nginx::canary_ingress(&stable, stable_name, existing.as_ref(), config, d)
                .map_err(|e| target.unfit(e))?;
            Ok(match planned {
                CanaryIngress::Unchanged => Ok(None),
                CanaryIngress::Create(ingress) => api
                    .create(&post_params(), &ingress)
                    .await
                    .map(|_| Some(target.change(Action::Created))),
                CanaryIngress::Patch(patch) => {
                    let version = existing.and_then(|i| i.metadata.resource_version);
                    api.patch(canary_name, &patch_params(), &conditional(patch, version))
                        .await
                        .map(|_| Some(target.change(Action::Updated)))
                }
            })
        })
        .await
    }
}

impl ApiRouter {
    /// SMI's TrafficSplit: created controlled by the Rollout, or its spec merge-patched.
    async fn traffic_split(
        &self,
        target: &Object<'_>,
        config: &crate::api::traffic_routing::SmiTrafficRouting,
        d: &Desired<'_>,
    ) -> Result<Option<Change>, RouterError> {
        let gvk = GroupVersionKind::gvk(smi::GROUP, self.apis.smi.as_str(), smi::KIND);
        let resource = ApiResource::from_gvk_with_plural(&gvk, smi::PLURAL);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), target.namespace, &resource);
        on_conflict_read_again(target, || async {
            let existing = api
                .get_opt(target.name)
                .await
                .map_err(|e| target.failed(e, false))?;
            let existing = existing.map(|o| target.json(&o)).transpose()?;
            let planned = smi::traffic_split(existing.as_ref(), config, self.apis.smi, d)
                .map_err(|e| target.unfit(e))?;
            Ok(match planned {
                TrafficSplitWrite::Unchanged => Ok(None),
                TrafficSplitWrite::Create(object) => {
                    let object: DynamicObject = target.decode(object)?;
                    api.create(&post_params(), &object)
                        .await
                        .map(|_| Some(target.change(Action::Created)))
                }
                TrafficSplitWrite::Patch(patch) => {
                    let version = existing
                        .as_ref()
                        .and_then(|o| o.pointer("/metadata/resourceVersion"))
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    api.patch(target.name, &patch_params(), &conditional(patch, version))
                        .await
                        .map(|_| Some(target.change(Action::Updated)))
                }
            })
        })
        .await
    }
}

impl ApiRouter {
    /// Lets the ALB Ingress `namespace/name` go of the Rollout `rollout`, which no longer exists, as Argo's
    /// ingress controller does (`engine::routing::alb_release`): an update carrying the resourceVersion read.
    /// Whether it was written: not when the Ingress is gone or its managed annotation does not name `rollout`.
    /// `RouterError::Unfit` where Argo gives up on the Ingress without writing.
    pub async fn release_alb(
        &self,
        namespace: &str,
        name: &str,
        rollout: &str,
    ) -> Result<bool, RouterError> {
        let api: Api<Ingress> = Api::namespaced(self.client.clone(), namespace);
        let target = Object {
            kind: "Ingress",
            namespace,
            name,
        };
        on_conflict_read_again(&target, || async {
            let Some(current) = api
                .get_opt(name)
                .await
                .map_err(|e| target.failed(e, false))?
            else {
                return Ok(Ok(false));
            };
            let released = alb_release::released(&target.json(&current)?, rollout)
                .map_err(|e| target.unfit(e))?;
            Ok(match released {
                None => Ok(false),
                Some(released) => {
                    let released: Ingress = target.decode(released)?;
                    api.replace(name, &post_params(), &released)
                        .await
                        .map(|_| true)
                }
            })
        })
        .await
    }
}

/// Runs `attempt` (read, plan, write) until its write is not refused with 409, at most `ATTEMPTS` times: a
/// 409 means the object changed (or was created) since it was read, so it is read again. An attempt's own
/// error (a failed read, an unfit object) ends it at once; its write's other errors are the target's.
async fn on_conflict_read_again<T, Attempt>(
    target: &Object<'_>,
    mut attempt: impl FnMut() -> Attempt,
) -> Result<T, RouterError>
where
    Attempt: std::future::Future<Output = Result<Result<T, kube::Error>, RouterError>>,
{
    for _ in 0..ATTEMPTS {
        match attempt().await? {
            Ok(done) => return Ok(done),
            Err(e) if is_status(&e, 409) => continue,
            Err(e) => return Err(target.failed(e, true)),
        }
    }
    Err(target.conflict())
}

/// A merge patch made conditional, like an update, on the resourceVersion that was read.
fn conditional(mut patch: Value, version: Option<String>) -> Patch<Value> {
    if let Some(root) = patch.as_object_mut() {
        let metadata = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("resourceVersion".into(), Value::from(version));
        }
    }
    Patch::Merge(patch)
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    }
}

/// The object `name` of kind `K` as JSON; `None` when there is none.
async fn get<K>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Arc<Value>>, kube::Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let object = api.get_opt(name).await?;
    object
        .map(|o| serde_json::to_value(o).map_err(kube::Error::SerdeError))
        .transpose()
        .map(|o| o.map(Arc::new))
}

/// Reads the object (the first time, takes `first` when given: a copy just read), lets `build` change it,
/// and updates it with the resourceVersion it read when it changed; a 409 starts over from a fresh read.
async fn update<K>(
    api: &Api<K>,
    target: &Object<'_>,
    first: Option<&Value>,
    build: impl Fn(&Value) -> Result<Option<Built>, RoutingError>,
) -> Result<Option<(Change, Moved)>, RouterError>
where
    K: kube::Resource + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let (mut first, build) = (first, &build);
    on_conflict_read_again(target, || {
        let taken = first.take();
        async move {
            let current = match taken {
                Some(read) => read.clone(),
                None => {
                    let read = api.get_opt(target.name).await;
                    target.json(
                        &read
                            .map_err(|e| target.failed(e, false))?
                            .ok_or_else(|| target.missing())?,
                    )?
                }
            };
            let Some(built) = build(&current).map_err(|e| target.unfit(e))? else {
                return Ok(Ok(None));
            };
            let desired: K = target.decode(built.object)?;
            Ok(api
                .replace(target.name, &post_params(), &desired)
                .await
                .map(|written| {
                    let change = Change {
                        version: written.meta().resource_version.clone(),
                        ..target.change(Action::Updated)
                    };
                    Some((change, built.moved))
                }))
        }
    })
    .await
}
