//! The watch caches a Rollout's reconcile reads from, as Argo's controller reads its informers' listers: the
//! ReplicaSets and AnalysisRuns it controls, the Services and analysis templates it names, one set per watched
//! scope, and what the reconciles know the API server holds ([`Expectations`]). A reconcile reads here only
//! when every cache it needs has listed, shows what this process last wrote or read there, and holds every
//! object the Rollout names; otherwise (and always for its pods) it reads afresh from the API server.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::stream::BoxStream;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::Api;

use super::cache::Cache;
use super::expect::Expectations;
use super::router_caches::RouterCaches;
use super::watch::{self, Failures, Key};
use crate::api::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate, Rollout};
use crate::engine::rollout::change::Kind;
use crate::engine::rollout::hash::HASH_LABEL;
use crate::engine::rollout::reconcile_loop::{Snapshot, nested_templates};
use crate::engine::rollout::{ephemeral_metadata_configured, restart_due};
use crate::k8s::rollout_writes;
use crate::k8s::versions::Held;
use crate::observe::Metrics;

/// One watched scope's caches.
struct Scope {
    /// `None`: every namespace.
    namespace: Option<String>,
    replica_sets: Arc<Cache<ReplicaSet>>,
    runs: Arc<Cache<AnalysisRun>>,
    services: Arc<Cache<Service>>,
    templates: Arc<Cache<AnalysisTemplate>>,
}

/// Every scope's caches, the cluster's ClusterAnalysisTemplates, and the reconciles' expectations.
#[derive(Default)]
pub struct RolloutCaches {
    scopes: Mutex<Vec<Arc<Scope>>>,
    cluster_templates: Mutex<Option<Arc<Cache<ClusterAnalysisTemplate>>>>,
    pub expected: Expectations,
    /// The routers' objects, watched once a reconcile reads one.
    pub routers: RouterCaches,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RolloutCaches {
    /// Starts caching `namespace` (every namespace for `None`): the watches to poll. Those of ReplicaSets and
    /// AnalysisRuns (both carry the pod-template hash label when a Rollout made them) name the Rollout that
    /// controls what changed: a run only when what `runs_read` takes of it changed. The last stream names the
    /// Rollouts that read a router object that changed (`router_caches`).
    pub fn watch(
        &self,
        client: &kube::Client,
        metrics: &Arc<Metrics>,
        namespace: Option<&str>,
        runs_read: watch::Read<AnalysisRun>,
    ) -> Vec<BoxStream<'static, Key>> {
        let scope = Arc::new(Scope {
            namespace: namespace.map(str::to_string),
            replica_sets: Arc::default(),
            runs: Arc::default(),
            services: Arc::default(),
            templates: Arc::default(),
        });
        let (rs, runs) = (scope.replica_sets.clone(), scope.runs.clone());
        let mut watches = vec![
            watch::owners(
                client.clone(),
                namespace,
                HASH_LABEL,
                "Rollout",
                None,
                rs,
                Failures::of::<ReplicaSet>(metrics, namespace),
            ),
            watch::owners(
                client.clone(),
                namespace,
                HASH_LABEL,
                "Rollout",
                Some(runs_read),
                runs,
                Failures::of::<AnalysisRun>(metrics, namespace),
            ),
            watch::kept(
                watch::lenient(client.clone(), namespace),
                scope.services.clone(),
                Failures::of::<Service>(metrics, namespace),
                watch::silent,
            ),
            watch::kept(
                watch::lenient(client.clone(), namespace),
                scope.templates.clone(),
                Failures::of::<AnalysisTemplate>(metrics, namespace),
                watch::silent,
            ),
            self.routers.triggers(namespace),
        ];
        let mut cluster = locked(&self.cluster_templates);
        if cluster.is_none() {
            let cache = Arc::new(Cache::default());
            let failures = Failures::of::<ClusterAnalysisTemplate>(metrics, None);
            watches.push(watch::kept(
                Api::all(client.clone()),
                cache.clone(),
                failures,
                watch::silent,
            ));
            *cluster = Some(cache);
        }
        locked(&self.scopes).push(scope);
        watches
    }

    fn scope(&self, namespace: &str) -> Option<Arc<Scope>> {
        let scopes = locked(&self.scopes);
        let covers = |s: &&Arc<Scope>| s.namespace.as_deref().is_none_or(|n| n == namespace);
        scopes.iter().find(covers).cloned()
    }

    /// What the caches hold of each object of `rollout` (its namespace's scope looked up once): the Rollout
    /// as the driver's cache holds it (`rollout` is that copy), the others as these caches do.
    pub fn holder<'a>(&self, rollout: &'a Rollout) -> impl Fn(Kind, &str) -> Held + 'a {
        let namespace = rollout.namespace().unwrap_or_default();
        let scope = self.scope(&namespace);
        move |kind, name| {
            let meta = &rollout.metadata;
            if kind == Kind::Rollout {
                return Some((meta.resource_version.clone()?, meta.uid.clone()?));
            }
            let scope = scope.as_ref()?;
            let key = (namespace.clone(), name.to_string());
            match kind {
                Kind::ReplicaSet => scope.replica_sets.held(&key),
                Kind::AnalysisRun => scope.runs.held(&key),
                Kind::Service => scope.services.held(&key),
                Kind::Rollout | Kind::Pod => None,
            }
        }
    }

    /// What the planner reads of `rollout` at `now`, as the caches hold it, but its routers' objects (the
    /// routers edge reads those); `None` when they cannot say: a cache not listed yet, a Service or template
    /// it names not cached (it may be new, or missing: a read afresh says which), or its pods needed.
    pub fn snapshot(&self, rollout: Arc<Rollout>, now: Timestamp) -> Option<Snapshot> {
        if restart_due(&rollout, now) || ephemeral_metadata_configured(&rollout) {
            return None;
        }
        let namespace = rollout.namespace().unwrap_or_default();
        let uid = rollout.uid()?;
        let scope = self.scope(&namespace)?;
        let cluster = locked(&self.cluster_templates).clone();
        let (service_names, wanted) = rollout_writes::named(&rollout);
        let at = |name: &str| (namespace.clone(), name.to_string());
        let services = service_names
            .iter()
            .map(|name| scope.services.get(&at(name)))
            .collect::<Option<Vec<_>>>()?;
        let templates = nested_templates(wanted, |(cluster_scoped, name)| {
            if *cluster_scoped {
                let cached = cluster.as_ref()?.get(&(String::new(), name.clone()));
                cached.map(|t| Some(t.spec.0))
            } else {
                scope.templates.get(&at(name)).map(|t| Some(t.spec))
            }
        })
        .ok()?;
        Some(Snapshot {
            replica_sets: scope.replica_sets.controlled_by(&uid)?,
            analysis_runs: scope.runs.controlled_by(&uid)?,
            rollout,
            services,
            routers: Vec::new(),
            templates,
            pods: None,
            now,
        })
    }

    /// Forgets every cache (the controllers stopped; their watches with them).
    pub fn clear(&self) {
        locked(&self.scopes).clear();
        *locked(&self.cluster_templates) = None;
        self.expected.clear();
        self.routers.clear();
    }
}
