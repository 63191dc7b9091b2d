//! One Rollout on the API server, as `engine::rollout::reconcile_loop` acts on it ([`ApiCluster`]): it reads
//! the Rollout with what it controls (ReplicaSets, AnalysisRuns, and its pods while a `restartAt` is due) and
//! names (Services, analysis templates) from the watch caches once they show this process's own last writes
//! (`rollout_caches`, `expect`; afresh from the API server when they do not within a second), makes the plan's
//! writes (`k8s::rollout_writes`) and the routers' (`routers::ApiRouter`), writes the status through the status
//! subresource, and queues the Events.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::Api;
use tracing::{info, warn};

use super::Context;
use super::driver::{Ahead, Key, ReconcileError, shown};
use super::expect::Shown;
use super::rollout::{namespace_of, owned, publish};
use crate::api::Rollout;
use crate::api::reasons::rollout as reasons;
use crate::api::rollout::RolloutStatus;
use crate::engine::rollout::change::Kind;
use crate::engine::rollout::reconcile_loop::{self, Made, Snapshot, Stored};
use crate::engine::rollout::{self, Route, Write};
use crate::engine::routing::RouteFailure;
use crate::k8s::rollout_writes;
use crate::k8s::status::WriteError;
use crate::k8s::versions::{Expected, Least};
use crate::routers::ApiRouter;

/// One Rollout on the API server, as the reconcile loop acts on it.
pub(super) struct ApiCluster<'a> {
    ctx: &'a Context,
    namespace: String,
    name: String,
    /// The Rollout's resourceVersion: as read, then as this reconcile's own writes to it left it.
    rv: String,
    /// The Rollout as cached, when the caches show all this process last wrote or read of its objects: the
    /// first read takes what the planner needs from the caches; a read again (after a write met a change), or
    /// one without it, is afresh from the API server.
    pub(super) cached: Option<Arc<Rollout>>,
}

impl<'a> ApiCluster<'a> {
    /// `rollout` (as the driver's cache holds it), nothing read yet.
    pub(super) fn new(ctx: &'a Context, rollout: &Rollout) -> Self {
        ApiCluster {
            ctx,
            namespace: rollout.namespace().unwrap_or_default(),
            name: rollout.name_any(),
            rv: String::new(),
            cached: None,
        }
    }

    pub(super) fn key(&self) -> Key {
        (self.namespace.clone(), self.name.clone())
    }

    /// How the watch caches stand against what this process last wrote or read of the Rollout's objects,
    /// with the Rollout as cached; `None` when it is not cached or not this instance's.
    pub(super) fn shown(&self) -> Option<(Arc<Rollout>, Shown)> {
        let key = self.key();
        let rollout = self.ctx.rollouts.get(&key)?;
        if !owned(&rollout, self.ctx.config.instance_id.as_deref()) {
            return None;
        }
        let caches = &self.ctx.rollout_caches;
        let held = caches.holder(&rollout);
        let shown = caches.expected.shown(&key, held, self.ctx.clock.now());
        Some((rollout, shown))
    }

    /// A router object's copy from its watch, where one may be used (`router_caches`).
    fn cached_router(
        &self,
    ) -> impl Fn(&'static str, &str, &str) -> Option<std::sync::Arc<serde_json::Value>> + '_ {
        let (client, routers) = (&self.ctx.client, &self.ctx.rollout_caches.routers);
        let (metrics, reader) = (&self.ctx.metrics, self.key());
        move |kind, namespace, name| routers.get(client, metrics, kind, namespace, name, &reader)
    }

    /// The Rollout and what the planner reads with it, from the API server, all sent at once; `None` when it is
    /// gone or not this instance's. The caches must show at least what was read before they are read again.
    async fn read_afresh(
        &self,
        router: &ApiRouter,
        now: jiff::Timestamp,
    ) -> Result<Option<Snapshot>, ReconcileError> {
        let api: Api<Rollout> = Api::namespaced(self.ctx.client.clone(), &self.namespace);
        let rollout = api
            .get_opt(&self.name)
            .await
            .map_err(ReconcileError::Read)?;
        let Some(rollout) = rollout.filter(|r| owned(r, self.ctx.config.instance_id.as_deref()))
        else {
            return Ok(None);
        };
        let rollout = Arc::new(rollout);
        let (mut seen, routers) = futures::try_join!(
            rollout_writes::read(&self.ctx.client, rollout.clone(), now),
            router.read(&rollout, self.cached_router()),
        )
        .map_err(ReconcileError::Read)?;
        seen.routers = routers;
        let read = |kind, meta: &ObjectMeta| Expected {
            kind,
            name: meta.name.clone().unwrap_or_default(),
            least: Least::Version(meta.resource_version.clone().unwrap_or_default()),
        };
        let versions = std::iter::once(read(Kind::Rollout, &seen.rollout.metadata))
            .chain(
                seen.replica_sets
                    .iter()
                    .map(|o| read(Kind::ReplicaSet, &o.metadata)),
            )
            .chain(
                seen.analysis_runs
                    .iter()
                    .map(|o| read(Kind::AnalysisRun, &o.metadata)),
            )
            .chain(
                seen.services
                    .iter()
                    .map(|o| read(Kind::Service, &o.metadata)),
            );
        self.ctx
            .rollout_caches
            .expected
            .expect(&self.key(), versions);
        Ok(Some(seen))
    }
}

impl reconcile_loop::Cluster for ApiCluster<'_> {
    type Error = ReconcileError;
    const COALESCE: bool = true;

    fn instance_id(&self) -> Option<&str> {
        self.ctx.config.instance_id.as_deref()
    }

    async fn observe(&mut self) -> Result<Option<Snapshot>, ReconcileError> {
        // One `now` for the read and the plans, so pods are read exactly when a plan restarts them.
        let now = self.ctx.clock.stamp();
        let router =
            ApiRouter::new(self.ctx.client.clone()).with_apis(self.ctx.config.routers.clone());
        let caches = &self.ctx.rollout_caches;
        let cached = (self.cached.take()).and_then(|r| caches.snapshot(r, now));
        let seen = match cached {
            Some(mut seen) => {
                seen.routers = router
                    .read(&seen.rollout, self.cached_router())
                    .await
                    .map_err(ReconcileError::Read)?;
                seen
            }
            None => match self.read_afresh(&router, now).await? {
                Some(seen) => seen,
                None => return Ok(None),
            },
        };
        self.rv = seen.rollout.resource_version().unwrap_or_default();
        Ok(Some(seen))
    }

    async fn make(&mut self, seen: &Snapshot, write: &Write) -> Result<Made, ReconcileError> {
        let ctx = self.ctx;
        match rollout_writes::apply(&ctx.client, &ctx.evictions, &mut self.rv, seen, write).await {
            Ok(left) => {
                ctx.rollout_caches.expected.expect(&self.key(), left);
                Ok(Made::Done)
            }
            Err(WriteError::Refused) => Ok(Made::Refused),
            Err(WriteError::Conflict | WriteError::Gone) => {
                ctx.metrics.reconcile_error("conflict");
                Ok(Made::Changed)
            }
            Err(error) => {
                if let (Write::CreateReplicaSet(rs), WriteError::Api(e)) = (write, &error) {
                    report_refused_create(ctx, &seen.rollout, &self.rv, rs, e).await;
                }
                Err(ReconcileError::RolloutWrite {
                    write: rollout_writes::describe(&seen.rollout, write),
                    error,
                })
            }
        }
    }

    async fn route(
        &mut self,
        seen: &Snapshot,
        route: &Route,
    ) -> Result<Vec<rollout::Event>, RouteFailure> {
        let router =
            ApiRouter::new(self.ctx.client.clone()).with_apis(self.ctx.config.routers.clone());
        let changes = router
            .apply(&seen.rollout, route, &seen.replica_sets, &seen.routers)
            .await
            .map_err(|e| e.failure())?;
        let mut announced = Vec::new();
        for change in changes {
            info!(rollout = %shown(&self.namespace, &self.name), %change, "traffic");
            if let Some(version) = change.version {
                let routers = &self.ctx.rollout_caches.routers;
                routers.wrote(change.kind, &change.namespace, &change.name, version);
            }
            announced.extend(change.announced);
        }
        Ok(announced)
    }

    async fn store_status(
        &mut self,
        seen: &Snapshot,
        status: &RolloutStatus,
    ) -> Result<Stored, ReconcileError> {
        let rollout = &seen.rollout;
        let old = rollout.status.clone().unwrap_or_default();
        let written =
            rollout_writes::patch_status(&self.ctx.statuses, rollout, &self.rv, &old, status).await;
        match written {
            Ok(meta) => {
                let durations = &self.ctx.metrics.rollout_durations;
                durations.written(old.duration.as_ref(), status.duration.as_ref());
                let key = self.key();
                let written = Expected {
                    kind: Kind::Rollout,
                    name: self.name.clone(),
                    least: Least::Version(meta.resource_version.clone().unwrap_or_default()),
                };
                self.ctx.rollout_caches.expected.expect(&key, [written]);
                self.ctx.status_writes.record(key.clone(), Some(seen.now));
                let ahead = Ahead {
                    base_rv: self.rv.clone(),
                    status: status.clone(),
                    written_rv: meta.resource_version,
                    uncounted: Vec::new(),
                    wakeup: None,
                    superseded: Vec::new(),
                };
                self.ctx.rollouts.echo.remember(key, Some(ahead));
                Ok(Stored::Written)
            }
            Err(WriteError::Conflict) => {
                self.ctx.metrics.reconcile_error("conflict");
                Ok(Stored::Changed)
            }
            Err(WriteError::Gone) => Ok(Stored::Gone),
            Err(e) => Err(ReconcileError::Write(e)),
        }
    }

    fn publish(&mut self, rollout: &Rollout, events: &[rollout::Event]) {
        publish(self.ctx, rollout, events);
    }

    fn status_written_at(&self) -> Option<jiff::Timestamp> {
        self.ctx.status_writes.last(&self.key())
    }
}

/// Argo's report of a new ReplicaSet the API server refused (a quota, an admission webhook, RBAC), so that
/// `kubectl describe rollout` and `kubectl argo rollouts get` say why the Rollout does not progress: a Warning
/// Event `ReplicaSetCreateError` and the Progressing condition False with the server's message, written over
/// the status read at `rv` (nothing else of it changes). Like Argo's, a status write that fails is logged and
/// the reconcile's error stands; the reconcile retried after it creates the ReplicaSet once the server lets
/// it, and its plan sets Progressing to `NewReplicaSetCreated`.
async fn report_refused_create(
    ctx: &Context,
    rollout: &Rollout,
    rv: &str,
    rs: &ReplicaSet,
    error: &kube::Error,
) {
    // The server's words alone, as Argo's `%v` of a StatusError shows them.
    let said = match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    };
    let name = rs.metadata.name.as_deref().unwrap_or_default();
    let (status, message) =
        rollout::conditions::create_refused(rollout, name, &said, ctx.clock.stamp());
    let old = rollout.status.clone().unwrap_or_default();
    if status != old {
        let written = rollout_writes::patch_status(&ctx.statuses, rollout, rv, &old, &status).await;
        if let Err(e) = written {
            warn!(rollout = %shown(&namespace_of(rollout), &rollout.name_any()), error = %e, "Cannot write the Progressing condition");
        }
    }
    let refused = rollout::Event {
        reason: reasons::FAILED_RS_CREATE.to_string(),
        message,
        warning: true,
        after_write: None,
    };
    publish(ctx, rollout, &[refused]);
}
