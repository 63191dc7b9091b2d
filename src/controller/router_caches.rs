//! The traffic routers' objects a Rollout's reconcile reads (Istio's VirtualServices and DestinationRules, the
//! Gateway API's HTTPRoutes, NGINX's stable Ingress and ALB's Ingress), from watches, as Argo's controller reads
//! them from its informers. A kind's watch in a namespace starts the first time a reconcile reads one of its
//! objects there, so a daemon whose Rollouts name none of a kind never watches it (its CRD may not be
//! installed). Until that watch has listed, and for an object it does not hold or holds older than this process
//! last wrote, the reconcile reads the object from the API server; so too for what is not cached here (the
//! canary Ingress NGINX's router creates, SMI's TrafficSplit, Traefik's TraefikService: `routers::api` never
//! asks for them). A copy that is stale all the same (another client's write not heard of yet) makes the
//! router's update meet a 409 and read afresh (`routers::api`).
//!
//! The versions written are kept here by object, not in the Rollouts' `Expectations`: those are by Rollout and
//! by the planner's `change::Kind`, which names the objects a Rollout controls, not the routers' objects it
//! points at. Both compare versions with `k8s::versions::at_least`.
//!
//! A change to a router object reconciles the Rollouts that read it, as Argo's Istio and ingress controllers
//! queue the Rollouts naming a VirtualService or Ingress they hear changed: created, changed by another client
//! or deleted, so that a Rollout waiting for it (InvalidSpec), whose weights another client changed or whose
//! canary Ingress must follow the stable one acts at once. The readers are recorded as the reconciles read
//! (until the Rollout is gone). Not heard: this process's own writes (the reconcile that made one planned on
//! from it) and a watch's first list (its readers read afresh meanwhile); a re-list after a failed watch is,
//! object by object. An ALB Ingress's every event, its first list's too, also names the Rollouts its managed
//! annotation names that never read it here (one deleted while the daemon was down): the driver hands a
//! Rollout it does not hold to its `gone`, which releases the Ingress when that Rollout no longer exists.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::cache::Cache;
use super::heard::News;
use super::watch::{self, Failures, Key, Lenient, Watched};
use crate::engine::routing::alb::MANAGED;
use crate::engine::routing::alb_release;
use crate::k8s::versions::at_least;
use crate::observe::Metrics;
use crate::routers::objects::{DestinationRule, HttpRoute, VirtualService};

/// One kind's cache in one namespace, as JSON for the routers' builders.
trait AsJson: Send + Sync {
    fn value(&self, key: &Key) -> Option<Value>;
}

impl<K: Watched + Serialize> AsJson for Cache<K> {
    fn value(&self, key: &Key) -> Option<Value> {
        // Serialized where the cache holds it: a copy to serialize was half of this read's cost (perf).
        self.read(key, |o| serde_json::to_value(o))?.ok()
    }
}

/// A watch started for the caches, stopped with them.
struct Watch {
    cache: Arc<dyn AsJson>,
    task: AbortHandle,
}

/// Object by kind, namespace and name.
type Object = (&'static str, String, String);

#[derive(Default)]
pub struct RouterCaches {
    watches: Mutex<HashMap<(&'static str, String), Watch>>,
    known: Arc<Known>,
    /// Where the Rollouts to reconcile are sent, by the scope they are reconciled in (a namespace, or every
    /// one for `None`).
    triggers: Mutex<Vec<(Option<String>, mpsc::Sender<Key>)>>,
}

/// What the reconciles told the caches, which the watches read too.
#[derive(Default)]
struct Known {
    /// The resourceVersion of this process's last write of each object: a cached copy must show at least it.
    written: Mutex<HashMap<Object, String>>,
    readers: Mutex<Readers>,
    /// The Rollouts each watched Ingress's ALB managed annotation names, as the watch last showed it.
    managing: Mutex<HashMap<Object, Vec<String>>>,
}

/// Which Rollouts read each object.
#[derive(Default)]
struct Readers {
    of: HashMap<Object, HashSet<Key>>,
    /// What each Rollout read, to forget it with the Rollout.
    read_by: HashMap<Key, Vec<Object>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Readers {
    fn read(&mut self, object: &Object, reader: &Key) {
        if self.of.get(object).is_some_and(|r| r.contains(reader)) {
            return;
        }
        let readers = self.of.entry(object.clone()).or_default();
        readers.insert(reader.clone());
        let read = self.read_by.entry(reader.clone()).or_default();
        read.push(object.clone());
    }

    fn forget(&mut self, reader: &Key) {
        for object in self.read_by.remove(reader).unwrap_or_default() {
            if let Some(readers) = self.of.get_mut(&object) {
                readers.remove(reader);
                if readers.is_empty() {
                    self.of.remove(&object);
                }
            }
        }
    }
}

fn object_of(kind: &'static str, meta: &ObjectMeta) -> Object {
    (
        kind,
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl Known {
    /// The Rollouts to reconcile for one event of a watch of `kind` (see the module doc), before the cache
    /// applies it; for an Ingress, also those its ALB managed annotation names ([`Known::managed`]).
    fn heard<K: Resource<DynamicType = ()>>(
        &self,
        kind: &'static str,
        event: &watcher::Event<Lenient<K>>,
        news: &mut News,
    ) -> Vec<Key> {
        let mut keys = if kind == "Ingress" {
            self.managed(event)
        } else {
            Vec::new()
        };
        let Some((meta, applied)) = news.of(event) else {
            return keys;
        };
        let object = object_of(kind, meta);
        if applied && locked(&self.written).get(&object) == meta.resource_version.as_ref() {
            return keys;
        }
        let readers = locked(&self.readers);
        let of = readers.of.get(&object).into_iter().flatten();
        keys.extend(
            of.filter(|r| !keys.contains(r))
                .cloned()
                .collect::<Vec<_>>(),
        );
        keys
    }

    /// Keeps which Rollouts the Ingress of `event` names in its ALB managed annotation (any event, the first
    /// list's too), and names those that have not read it in this process's life: a Rollout deleted while the
    /// daemon was down, which Argo's ingress controller finds so. The driver hands a Rollout it does not hold
    /// to its `gone`, which releases the Ingress if the Rollout no longer exists.
    fn managed<K: Resource<DynamicType = ()>>(
        &self,
        event: &watcher::Event<Lenient<K>>,
    ) -> Vec<Key> {
        let (meta, present) = match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => (o.meta(), true),
            watcher::Event::Delete(o) => (o.meta(), false),
            watcher::Event::Init | watcher::Event::InitDone => return Vec::new(),
        };
        let object = object_of("Ingress", meta);
        let annotation = meta.annotations.as_ref().and_then(|a| a.get(MANAGED));
        let names = match annotation {
            Some(text) if present => alb_release::managing(text),
            _ => Vec::new(),
        };
        let readers = locked(&self.readers);
        let unread = names
            .iter()
            .map(|name| (object.1.clone(), name.clone()))
            .filter(|key| readers.of.get(&object).is_none_or(|r| !r.contains(key)))
            .collect();
        drop(readers);
        let mut managing = locked(&self.managing);
        if names.is_empty() {
            managing.remove(&object);
        } else {
            managing.insert(object, names);
        }
        unread
    }
}

/// Starts a watch of `K` in `namespace`, kept in a cache of its own, sending the Rollouts to reconcile for
/// its events to `trigger`.
fn start<K: Watched + Serialize>(
    client: &kube::Client,
    metrics: &Arc<Metrics>,
    kind: &'static str,
    namespace: &str,
    known: &Arc<Known>,
    trigger: Option<mpsc::Sender<Key>>,
) -> Watch {
    let cache = Arc::new(Cache::<K>::default());
    let (known, mut news) = (known.clone(), News::default());
    let stream = watch::kept(
        watch::lenient(client.clone(), Some(namespace)),
        cache.clone(),
        Failures::of::<K>(metrics, Some(namespace)),
        move |event| known.heard(kind, event, &mut news),
    );
    let task = tokio::spawn(stream.for_each(move |key| {
        let trigger = trigger.clone();
        async move {
            if let Some(trigger) = trigger {
                // Closed only when the controllers stop, which stops this watch too.
                let _ = trigger.send(key).await;
            }
        }
    }))
    .abort_handle();
    Watch { cache, task }
}

impl RouterCaches {
    /// The Rollouts to reconcile in `scope` (a namespace, or every one for `None`) for the changes the router
    /// objects' watches hear there.
    pub fn triggers(&self, scope: Option<&str>) -> BoxStream<'static, Key> {
        let (sender, receiver) = mpsc::channel(watch::WATCH_BUFFER);
        locked(&self.triggers).push((scope.map(str::to_string), sender));
        futures::stream::unfold(
            receiver,
            |mut r| async move { r.recv().await.map(|k| (k, r)) },
        )
        .boxed()
    }

    /// The object `kind` `namespace/name`, which the Rollout `reader` reads, as JSON from its cache, starting the
    /// kind's watch in `namespace` if it is not watched yet; `None` when the reconcile must read it from the API
    /// server (see the module doc).
    pub fn get(
        &self,
        client: &kube::Client,
        metrics: &Arc<Metrics>,
        kind: &'static str,
        namespace: &str,
        name: &str,
        reader: &Key,
    ) -> Option<Value> {
        let key = (kind, namespace.to_string(), name.to_string());
        let cache = {
            let mut watches = locked(&self.watches);
            let slot = (kind, namespace.to_string());
            if let Some(watch) = watches.get(&slot) {
                Some(watch.cache.clone())
            } else {
                let trigger = locked(&self.triggers)
                    .iter()
                    .find(|(scope, _)| scope.as_deref().is_none_or(|s| s == namespace))
                    .map(|(_, sender)| sender.clone());
                let known = &self.known;
                let watch = match kind {
                    "VirtualService" => {
                        start::<VirtualService>(client, metrics, kind, namespace, known, trigger)
                    }
                    "DestinationRule" => {
                        start::<DestinationRule>(client, metrics, kind, namespace, known, trigger)
                    }
                    "HTTPRoute" => {
                        start::<HttpRoute>(client, metrics, kind, namespace, known, trigger)
                    }
                    "Ingress" => start::<Ingress>(client, metrics, kind, namespace, known, trigger),
                    _ => return None,
                };
                watches.insert(slot, watch);
                None
            }
        };
        locked(&self.known.readers).read(&key, reader);
        let object = cache?.value(&(key.1.clone(), key.2.clone()))?;
        let held = object.pointer("/metadata/resourceVersion")?.as_str()?;
        let mut written = locked(&self.known.written);
        match written.get(&key) {
            Some(wrote) if !at_least(held, wrote) => None,
            Some(_) => {
                written.remove(&key);
                Some(object)
            }
            None => Some(object),
        }
    }

    /// This process wrote `kind` `namespace/name`, which the API server answered with `version`.
    pub fn wrote(&self, kind: &'static str, namespace: &str, name: &str, version: String) {
        let key = (kind, namespace.to_string(), name.to_string());
        locked(&self.known.written).insert(key, version);
    }

    /// The Ingresses the Rollout `rollout` read, and those a watch showed naming it in their ALB managed
    /// annotation, by namespace and name.
    pub fn alb_ingresses(&self, rollout: &Key) -> Vec<(String, String)> {
        let readers = locked(&self.known.readers);
        let read = readers.read_by.get(rollout).into_iter().flatten();
        let mut ingresses: Vec<_> = read
            .filter(|(k, _, _)| *k == "Ingress")
            .map(|(_, namespace, name)| (namespace.clone(), name.clone()))
            .collect();
        drop(readers);
        let managing = locked(&self.known.managing);
        for ((_, namespace, name), names) in managing.iter() {
            let ingress = (namespace.clone(), name.clone());
            if *namespace == rollout.0
                && names.contains(&rollout.1)
                && !ingresses.contains(&ingress)
            {
                ingresses.push(ingress);
            }
        }
        ingresses
    }

    /// Forgets what the Rollout `reader` read (it is gone).
    pub fn forget(&self, reader: &Key) {
        locked(&self.known.readers).forget(reader);
    }

    /// Stops every watch and forgets what they, the reads and the writes said (the controllers stopped).
    pub fn clear(&self) {
        for (_, watch) in locked(&self.watches).drain() {
            watch.task.abort();
        }
        locked(&self.triggers).clear();
        locked(&self.known.written).clear();
        *locked(&self.known.readers) = Readers::default();
        locked(&self.known.managing).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher;
    use serde_json::json;

    fn vs(rv: &str) -> watch::Lenient<VirtualService> {
        serde_json::from_value(json!({
            "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "web-vsvc", "namespace": "shop", "resourceVersion": rv},
            "spec": {"hosts": ["web"]},
        }))
        .expect("a VirtualService")
    }

    #[tokio::test]
    async fn a_cached_copy_is_used_once_listed_and_once_it_shows_this_processs_last_write() {
        // Never connected to: the watch below stands in for the one the first read would start.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("an address"));
        let client = kube::Client::try_from(config).expect("a client");
        let caches = RouterCaches::default();
        let cache = Arc::new(Cache::<VirtualService>::default());
        let task = tokio::spawn(std::future::pending::<()>()).abort_handle();
        let watched = Watch {
            cache: cache.clone(),
            task,
        };
        locked(&caches.watches).insert(("VirtualService", "shop".to_string()), watched);
        let metrics = Arc::new(Metrics::starting_at(jiff::Timestamp::UNIX_EPOCH));
        let reader = ("shop".to_string(), "web".to_string());
        let get = || {
            caches.get(
                &client,
                &metrics,
                "VirtualService",
                "shop",
                "web-vsvc",
                &reader,
            )
        };
        let version = |v: Option<Value>| v.map(|v| v["metadata"]["resourceVersion"].clone());
        cache.apply(watcher::Event::Init);
        cache.apply(watcher::Event::InitApply(vs("5")));
        assert_eq!(get(), None, "not listed yet");
        cache.apply(watcher::Event::InitDone);
        assert_eq!(version(get()), Some(json!("5")));
        caches.wrote("VirtualService", "shop", "web-vsvc", "7".to_string());
        assert_eq!(get(), None, "older than the write");
        cache.apply(watcher::Event::Apply(vs("7")));
        assert_eq!(version(get()), Some(json!("7")));
        assert!(
            locked(&caches.known.written).is_empty(),
            "the write shown is forgotten"
        );
        assert_eq!(
            caches.get(&client, &metrics, "TrafficSplit", "shop", "web", &reader),
            None,
            "a kind not cached"
        );
        assert_eq!(
            locked(&caches.watches).len(),
            1,
            "no watch of a kind not cached"
        );
        let readers = locked(&caches.known.readers);
        let read: Vec<_> = readers.of.keys().map(|o| o.0).collect();
        assert_eq!(read, ["VirtualService"], "a reader of what is watched only");
        drop(readers);
        caches.clear();
        assert!(locked(&caches.watches).is_empty());
    }

    fn ingress(rv: &str, managed: Option<&str>) -> watch::Lenient<Ingress> {
        let annotations = managed.map(|m| json!({MANAGED: m}));
        serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": rv,
                         "annotations": annotations},
        }))
        .expect("an Ingress")
    }

    #[test]
    fn an_ingress_names_the_rollouts_its_managed_annotation_names_that_never_read_it_first_list_included()
     {
        let caches = RouterCaches::default();
        let known = &caches.known;
        let web = ("shop".to_string(), "web".to_string());
        let legacy = ("shop".to_string(), "legacy".to_string());
        let object = ("Ingress", "shop".to_string(), "web".to_string());
        locked(&known.readers).read(&object, &web);
        let both = r#"{"legacy":["alb.ingress.kubernetes.io/actions.legacy-stable"],"web":null}"#;
        let mut news = News::default();
        let mut heard = |event| known.heard("Ingress", &event, &mut news);
        assert_eq!(heard(watcher::Event::Init), Vec::<Key>::new());
        assert_eq!(
            heard(watcher::Event::InitApply(ingress("3", Some(both)))),
            vec![legacy.clone()],
            "the first list names the Rollout that never read it, not its reader"
        );
        assert_eq!(heard(watcher::Event::InitDone), Vec::<Key>::new());
        assert_eq!(caches.alb_ingresses(&legacy), vec![web.clone()]);
        assert_eq!(
            caches.alb_ingresses(&web),
            vec![web.clone()],
            "read, and named"
        );
        assert_eq!(
            heard(watcher::Event::Apply(ingress("4", Some("not json")))),
            vec![web.clone()],
            "an annotation that does not read names none; the reader hears of the change"
        );
        assert!(caches.alb_ingresses(&legacy).is_empty());
        heard(watcher::Event::Apply(ingress("5", Some(both))));
        heard(watcher::Event::Delete(ingress("5", Some(both))));
        assert!(caches.alb_ingresses(&legacy).is_empty(), "deleted");
    }

    #[test]
    fn a_change_names_the_rollouts_that_read_the_object_but_not_this_processs_own_write_or_the_first_list()
     {
        let known = Known::default();
        let (web, api) = (
            ("shop".to_string(), "web".to_string()),
            ("shop".to_string(), "api".to_string()),
        );
        let vsvc = ("VirtualService", "shop".to_string(), "web-vsvc".to_string());
        let other = ("VirtualService", "shop".to_string(), "other".to_string());
        {
            let mut readers = locked(&known.readers);
            readers.read(&vsvc, &web);
            readers.read(&vsvc, &web);
            readers.read(&vsvc, &api);
            readers.read(&other, &api);
        }
        let mut news = News::default();
        let mut heard = |event: watcher::Event<Lenient<VirtualService>>| {
            let mut keys = known.heard("VirtualService", &event, &mut news);
            keys.sort();
            keys
        };
        let both = vec![api.clone(), web.clone()];
        assert_eq!(heard(watcher::Event::Init), Vec::<Key>::new());
        assert_eq!(
            heard(watcher::Event::InitApply(vs("3"))),
            Vec::<Key>::new(),
            "the first list"
        );
        assert_eq!(heard(watcher::Event::InitDone), Vec::<Key>::new());
        assert_eq!(
            heard(watcher::Event::Apply(vs("4"))),
            both,
            "another client's change"
        );
        locked(&known.written).insert(vsvc.clone(), "5".to_string());
        assert_eq!(
            heard(watcher::Event::Apply(vs("5"))),
            Vec::<Key>::new(),
            "this process's write"
        );
        assert_eq!(
            heard(watcher::Event::Apply(vs("6"))),
            both,
            "a change after it"
        );
        assert_eq!(heard(watcher::Event::Init), Vec::<Key>::new());
        assert_eq!(heard(watcher::Event::InitApply(vs("7"))), both, "a re-list");
        locked(&known.readers).forget(&web);
        assert_eq!(
            heard(watcher::Event::Delete(vs("7"))),
            vec![api.clone()],
            "web is gone"
        );
        locked(&known.readers).forget(&api);
        let readers = locked(&known.readers);
        assert!(
            readers.of.is_empty() && readers.read_by.is_empty(),
            "all forgotten"
        );
    }
}
