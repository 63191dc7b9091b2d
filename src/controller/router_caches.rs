//! The traffic routers' objects a Rollout's reconcile reads (Istio's VirtualServices and DestinationRules, the
//! Gateway API's HTTPRoutes, NGINX's stable Ingress and ALB's Ingress), from watches, as Argo's controller reads
//! them from its informers. A kind's watch in a namespace starts the first time a reconcile reads one of its
//! objects there, so a daemon whose Rollouts name none of a kind never watches it (its CRD may not be
//! installed); with `--watch-alb-ingresses`, Ingresses are watched from the start, as Argo's are. Until that
//! watch has listed, and for an object it does not hold or holds older than this process last wrote, the
//! reconcile reads the object from the API server; so too for what is not cached here (the canary Ingress
//! NGINX's router creates, SMI's TrafficSplit, Traefik's TraefikService: `routers::api` never asks for them). A
//! copy that is stale all the same (another client's write not heard of yet) makes the router's update meet a
//! 409 and read afresh (`routers::api`). Which Rollouts read what, the versions written, and which Rollouts a
//! watch's event concerns are `router_known`'s.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Resource;
use kube::api::ObjectMeta;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::cache::Cache;
use super::heard::News;
use super::router_known::{Known, locked};
use super::watch::{self, Failures, Key, Watched, names_of};
use crate::observe::Metrics;
use crate::routers::objects::{DestinationRule, HttpRoute, VirtualService};

/// One kind's cache in one namespace, as JSON for the routers' builders.
trait AsJson: Send + Sync {
    /// The object `key` and its resourceVersion.
    fn value(&self, key: &Key) -> Option<(Arc<Value>, Option<String>)>;
}

impl<K: Watched + Serialize> AsJson for Cache<Json<K>> {
    fn value(&self, key: &Key) -> Option<(Arc<Value>, Option<String>)> {
        self.read(key, |o| {
            (o.json.clone(), o.metadata.resource_version.clone())
        })
    }
}

/// A router object as its watch decoded it, kept as the JSON the routers' builders read: serialized once, as
/// the watch hears of it, and shared with the reconciles that read it, rather than serialized for each read
/// and the copy dropped (2.4% of the daemon's CPU at 10,000 Rollouts, each reconcile reading its
/// VirtualService; perf). Only an object that decodes as `K` is held (one that does not is read from the API
/// server, as any the cache does not hold), and its JSON is `K`'s serialization without the managed fields,
/// as the typed copy held before gave it.
#[derive(Debug, Clone)]
pub struct Json<K> {
    metadata: ObjectMeta,
    json: Arc<Value>,
    kind: PhantomData<fn() -> K>,
}

impl<'de, K: Resource + Serialize + DeserializeOwned> Deserialize<'de> for Json<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut object = K::deserialize(deserializer)?;
        object.meta_mut().managed_fields = None;
        let json = serde_json::to_value(&object).map_err(D::Error::custom)?;
        Ok(Json {
            metadata: std::mem::take(object.meta_mut()),
            json: Arc::new(json),
            kind: PhantomData,
        })
    }
}

impl<K: Resource<DynamicType = (), Scope = NamespaceResourceScope>> Resource for Json<K> {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    names_of!(K);
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A watch started for the caches, stopped with them.
struct Watch {
    cache: Arc<dyn AsJson>,
    task: AbortHandle,
}

/// The namespace of a watch slot that watches every namespace (no object's namespace is empty).
const EVERY_NAMESPACE: &str = "";

#[derive(Default)]
pub struct RouterCaches {
    watches: Mutex<HashMap<(&'static str, String), Watch>>,
    known: Arc<Known>,
    /// Where the Rollouts to reconcile are sent, by the scope they are reconciled in (a namespace, or every
    /// one for `None`).
    triggers: Mutex<Vec<(Option<String>, mpsc::Sender<Key>)>>,
}

/// Starts a watch of `K` in `namespace`, kept in a cache of its own, sending the Rollouts to reconcile for
/// its events to `trigger`.
fn start<K: Watched + Serialize>(
    client: &kube::Client,
    metrics: &Arc<Metrics>,
    kind: &'static str,
    namespace: Option<&str>,
    known: &Arc<Known>,
    trigger: Option<mpsc::Sender<Key>>,
) -> Watch {
    let cache = Arc::new(Cache::<Json<K>>::default());
    let (known, mut news) = (known.clone(), News::default());
    let stream = watch::kept(
        watch::lenient::<Json<K>>(client.clone(), namespace),
        cache.clone(),
        Failures::of::<K>(metrics, namespace),
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
    ) -> Option<Arc<Value>> {
        let key = (kind, namespace.to_string(), name.to_string());
        let cache = self.cache(client, metrics, kind, namespace)?;
        self.known.read(&key, reader);
        let (object, held) = cache?.value(&(key.1.clone(), key.2.clone()))?;
        self.known.shows_written(&key, &held?).then_some(object)
    }

    /// The cache of `kind`'s watch covering `namespace` (its own, or one of every namespace); `Some(None)` when
    /// there was none and one is started in `namespace` (it has not listed yet), `None` when the kind is not
    /// cached.
    fn cache(
        &self,
        client: &kube::Client,
        metrics: &Arc<Metrics>,
        kind: &'static str,
        namespace: &str,
    ) -> Option<Option<Arc<dyn AsJson>>> {
        let mut watches = locked(&self.watches);
        for slot in [namespace, EVERY_NAMESPACE] {
            if let Some(watch) = watches.get(&(kind, slot.to_string())) {
                return Some(Some(watch.cache.clone()));
            }
        }
        self.start_in(&mut watches, client, metrics, kind, Some(namespace))
            .then_some(None)
    }

    /// Starts `kind`'s watch in `scope` (a namespace, or every one for `None`); false when the kind is not
    /// cached.
    fn start_in(
        &self,
        watches: &mut HashMap<(&'static str, String), Watch>,
        client: &kube::Client,
        metrics: &Arc<Metrics>,
        kind: &'static str,
        scope: Option<&str>,
    ) -> bool {
        let trigger = locked(&self.triggers)
            .iter()
            .find(|(reconciled, _)| reconciled.as_deref().is_none_or(|r| Some(r) == scope))
            .map(|(_, sender)| sender.clone());
        let known = &self.known;
        let watch = match kind {
            "VirtualService" => {
                start::<VirtualService>(client, metrics, kind, scope, known, trigger)
            }
            "DestinationRule" => {
                start::<DestinationRule>(client, metrics, kind, scope, known, trigger)
            }
            "HTTPRoute" => start::<HttpRoute>(client, metrics, kind, scope, known, trigger),
            "Ingress" => start::<Ingress>(client, metrics, kind, scope, known, trigger),
            _ => return false,
        };
        let slot = scope.unwrap_or(EVERY_NAMESPACE).to_string();
        watches.insert((kind, slot), watch);
        true
    }

    /// Watches the Ingresses in `scope` (a namespace, or every one for `None`) from now on, not from the first
    /// read (`--watch-alb-ingresses`): an ALB Ingress naming a Rollout that no longer exists is then heard of
    /// at the watch's first list, whichever Rollouts read Ingresses.
    pub fn watch_ingresses(
        &self,
        client: &kube::Client,
        metrics: &Arc<Metrics>,
        scope: Option<&str>,
    ) {
        let mut watches = locked(&self.watches);
        let slot = ("Ingress", scope.unwrap_or(EVERY_NAMESPACE).to_string());
        if !watches.contains_key(&slot) {
            let started = self.start_in(&mut watches, client, metrics, "Ingress", scope);
            debug_assert!(started, "Ingresses are cached");
        }
    }

    /// This process wrote `kind` `namespace/name`, which the API server answered with `version`.
    pub fn wrote(&self, kind: &'static str, namespace: &str, name: &str, version: String) {
        let object = (kind, namespace.to_string(), name.to_string());
        self.known.wrote(object, version);
    }

    /// The Ingresses the Rollout `rollout` read, and those a watch showed naming it in their ALB managed
    /// annotation, by namespace and name.
    pub fn alb_ingresses(&self, rollout: &Key) -> Vec<(String, String)> {
        self.known.alb_ingresses(rollout)
    }

    /// The Ingresses (in its namespace) a watch showed naming the Rollout `rollout` in their ALB managed
    /// annotation, by name.
    pub fn alb_naming(&self, rollout: &Key) -> Vec<String> {
        self.known.naming(rollout)
    }

    /// Forgets what the Rollout `reader` read (it is gone).
    pub fn forget(&self, reader: &Key) {
        self.known.forget(reader);
    }

    /// Stops every watch and forgets what they, the reads and the writes said (the controllers stopped).
    pub fn clear(&self) {
        for (_, watch) in locked(&self.watches).drain() {
            watch.task.abort();
        }
        locked(&self.triggers).clear();
        self.known.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher;
    use serde_json::json;

    use super::super::router_known::tests::{ingress, vs};
    use super::super::watch::Lenient;

    /// A client never connected to: the watches the tests put in place stand in for the ones a read would start.
    fn offline() -> kube::Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("an address"));
        kube::Client::try_from(config).expect("a client")
    }

    /// A watch of `K` standing in `caches`' slot of `kind` in `namespace`: its cache, to fill by hand.
    fn standing_in<K: Watched + Serialize>(
        caches: &RouterCaches,
        kind: &'static str,
        namespace: &str,
    ) -> Arc<Cache<Json<K>>> {
        let cache = Arc::new(Cache::<Json<K>>::default());
        let task = tokio::spawn(std::future::pending::<()>()).abort_handle();
        let watch = Watch {
            cache: cache.clone(),
            task,
        };
        locked(&caches.watches).insert((kind, namespace.to_string()), watch);
        cache
    }

    #[test]
    fn a_held_copy_is_its_kinds_serialization_without_the_managed_fields_and_only_of_its_kind() {
        let sent = json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "3",
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
            "spec": {"rules": [{"host": "web.example.com"}]},
            "status": {"loadBalancer": {}},
            "notAField": 1,
        });
        let Lenient::Decoded(held) =
            serde_json::from_value::<Lenient<Json<Ingress>>>(sent.clone()).expect("decodes")
        else {
            panic!("an Ingress not held");
        };
        let mut typed: Ingress = serde_json::from_value(sent.clone()).expect("an Ingress");
        typed.metadata.managed_fields = None;
        assert_eq!(
            *held.json,
            serde_json::to_value(&typed).expect("serializes")
        );
        assert_eq!(held.json.pointer("/metadata/managedFields"), None);
        assert_eq!(held.meta().resource_version.as_deref(), Some("3"));
        let mut not_one = sent;
        not_one["spec"]["rules"] = json!("not a list");
        let read = serde_json::from_value::<Lenient<Json<Ingress>>>(not_one).expect("read");
        assert!(matches!(read, Lenient::Undecodable(_)), "{read:?}");
    }

    #[tokio::test]
    async fn a_cached_copy_is_used_once_listed_and_once_it_shows_this_processs_last_write() {
        let client = offline();
        let caches = RouterCaches::default();
        let cache = standing_in::<VirtualService>(&caches, "VirtualService", "shop");
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
        let version = |v: Option<Arc<Value>>| v.map(|v| v["metadata"]["resourceVersion"].clone());
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

    #[tokio::test]
    async fn a_watch_of_every_namespace_serves_each_namespaces_reads() {
        let client = offline();
        let caches = RouterCaches::default();
        let cache = standing_in::<Ingress>(&caches, "Ingress", EVERY_NAMESPACE);
        let every = ("Ingress", EVERY_NAMESPACE.to_string());
        let metrics = Arc::new(Metrics::starting_at(jiff::Timestamp::UNIX_EPOCH));
        caches.watch_ingresses(&client, &metrics, None);
        cache.apply(watcher::Event::Init);
        cache.apply(watcher::Event::InitApply(ingress("3", None)));
        cache.apply(watcher::Event::InitDone);
        let reader = ("shop".to_string(), "web".to_string());
        let read = caches.get(&client, &metrics, "Ingress", "shop", "web", &reader);
        assert_eq!(
            read.map(|o| o["metadata"]["resourceVersion"].clone()),
            Some(json!("3"))
        );
        let watches: Vec<_> = locked(&caches.watches).keys().cloned().collect();
        assert_eq!(
            watches,
            [every],
            "no watch of the namespace, nor a second of every one"
        );
        caches.clear();
    }
}
