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
use kube::runtime::watcher;

use super::cache::Cache;
use super::expect::Expectations;
use super::heard::{self, News};
use super::router_caches::RouterCaches;
use super::watch::{self, Failures, Key, Lenient};
use crate::api::rollout::MANAGED_BY_ANNOTATION;
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
    /// Shared with the Services' watches, which tell this process's own writes by it.
    pub expected: Arc<Expectations>,
    /// The routers' objects, watched once a reconcile reads one.
    pub routers: RouterCaches,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a Service's watch names for its events: the Rollout that manages it (the annotation Argo's and canaryd's
/// Service writes set), as Argo's Service controller queues it, so that a selector or port changed by another
/// client (a GitOps sync putting back the Service as stored in git) is put right at once. Argo queues only a
/// Service that still selects a pod-template hash; one whose selector lost it is queued here too. Not this
/// process's own writes (by `expected`), nor the first list.
fn managing(
    expected: Arc<Expectations>,
) -> impl FnMut(&watcher::Event<Lenient<Service>>) -> Vec<Key> {
    let mut news = News::default();
    move |event| {
        let Some((meta, applied)) = news.of(event) else {
            return Vec::new();
        };
        let managed_by = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(MANAGED_BY_ANNOTATION));
        let (Some(rollout), Some(namespace)) = (managed_by, meta.namespace.as_ref()) else {
            return Vec::new();
        };
        let key = (namespace.clone(), rollout.clone());
        let name = meta.name.as_deref().unwrap_or_default();
        let version = meta.resource_version.as_deref().unwrap_or_default();
        if applied && expected.awaits(&key, Kind::Service, name, version) {
            return Vec::new();
        }
        vec![key]
    }
}

impl RolloutCaches {
    /// Starts caching `namespace` (every namespace for `None`): the watches to poll. Those of ReplicaSets and
    /// AnalysisRuns (both carry the pod-template hash label when a Rollout made them) name the Rollout that
    /// controls what changed: a run only when what `runs_read` takes of it changed. Those of Services name the
    /// Rollout managing one ([`managing`]), and the last stream the Rollouts that read a router object that
    /// changed (`router_caches`).
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
                managing(self.expected.clone()),
            ),
            watch::kept(
                watch::lenient(client.clone(), namespace),
                scope.templates.clone(),
                Failures::of::<AnalysisTemplate>(metrics, namespace),
                heard::silent,
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
                heard::silent,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::versions::{Expected, Least};
    use serde_json::json;

    fn service(rv: &str, managed_by: Option<&str>) -> Lenient<Service> {
        let annotations = managed_by.map(|r| json!({MANAGED_BY_ANNOTATION: r}));
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web-stable", "namespace": "shop", "resourceVersion": rv,
                         "annotations": annotations},
            "spec": {"selector": {"app": "web"}},
        }))
        .expect("a Service")
    }

    #[test]
    fn a_managed_services_change_names_its_rollout_but_not_this_processs_own_write_or_the_first_list()
     {
        let expected = Arc::new(Expectations::default());
        let web = ("shop".to_string(), "web".to_string());
        let mut named = managing(expected.clone());
        let none: Vec<Key> = Vec::new();
        assert_eq!(named(&watcher::Event::Init), none);
        let listed = watcher::Event::InitApply(service("3", Some("web")));
        assert_eq!(named(&listed), none, "the first list");
        assert_eq!(named(&watcher::Event::InitDone), none);
        let changed = watcher::Event::Apply(service("4", Some("web")));
        assert_eq!(
            named(&changed),
            vec![web.clone()],
            "another client's change"
        );
        let unmanaged = watcher::Event::Apply(service("5", None));
        assert_eq!(named(&unmanaged), none, "managed by no Rollout");
        let written = Expected {
            kind: Kind::Service,
            name: "web-stable".to_string(),
            least: Least::Version("6".to_string()),
        };
        expected.expect(&web, [written]);
        let own = watcher::Event::Apply(service("6", Some("web")));
        assert_eq!(named(&own), none, "this process's write");
        let later = watcher::Event::Apply(service("7", Some("web")));
        assert_eq!(named(&later), vec![web.clone()], "a change after it");
        let deleted = watcher::Event::Delete(service("7", Some("web")));
        assert_eq!(named(&deleted), vec![web.clone()]);
        assert_eq!(named(&watcher::Event::Init), none);
        let relisted = watcher::Event::InitApply(service("8", Some("web")));
        assert_eq!(named(&relisted), vec![web], "a re-list");
    }
}
