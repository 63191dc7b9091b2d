//! The traffic routers' objects a Rollout's reconcile reads (Istio's VirtualServices and DestinationRules, the
//! Gateway API's HTTPRoutes), from watches, as Argo's controller reads them from its informers. A kind's watch
//! in a namespace starts the first time a reconcile reads one of its objects there, so a daemon whose Rollouts
//! name none of a kind never watches it (its CRD may not be installed). Until that watch has listed, and for an
//! object it does not hold or holds older than this process last wrote, the reconcile reads the object from the
//! API server; so too for the kinds not cached here (Ingresses: ALB's RBAC has no watch of them). A copy that is
//! stale all the same (another client's write not heard of yet) makes the router's update meet a 409 and read
//! afresh (`routers::api`).
//!
//! The versions written are kept here by object, not in the Rollouts' `Expectations`: those are by Rollout and
//! by the planner's `change::Kind`, which names the objects a Rollout controls, not the routers' objects it
//! points at. Both compare versions with `k8s::versions::at_least`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;
use tokio::task::AbortHandle;

use super::cache::Cache;
use super::watch::{self, Failures, Key, Watched};
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
    /// The resourceVersion of this process's last write of each object: a cached copy must show at least it.
    written: Mutex<HashMap<Object, String>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts a watch of `K` in `namespace`, kept in a cache of its own.
fn start<K: Watched + Serialize>(
    client: &kube::Client,
    metrics: &Arc<Metrics>,
    namespace: &str,
) -> Watch {
    let cache = Arc::new(Cache::<K>::default());
    let stream = watch::kept(
        watch::lenient(client.clone(), Some(namespace)),
        cache.clone(),
        Failures::of::<K>(metrics, Some(namespace)),
    );
    let task = tokio::spawn(stream.for_each(|_| std::future::ready(()))).abort_handle();
    Watch { cache, task }
}

impl RouterCaches {
    /// The object `kind` `namespace/name` as JSON from its cache, starting the kind's watch in `namespace` if
    /// it is not watched yet; `None` when the reconcile must read it from the API server (see the module doc).
    pub fn get(
        &self,
        client: &kube::Client,
        metrics: &Arc<Metrics>,
        kind: &'static str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let cache = {
            let mut watches = locked(&self.watches);
            let slot = (kind, namespace.to_string());
            if let Some(watch) = watches.get(&slot) {
                watch.cache.clone()
            } else {
                let watch = match kind {
                    "VirtualService" => start::<VirtualService>(client, metrics, namespace),
                    "DestinationRule" => start::<DestinationRule>(client, metrics, namespace),
                    "HTTPRoute" => start::<HttpRoute>(client, metrics, namespace),
                    _ => return None,
                };
                watches.insert(slot, watch);
                return None;
            }
        };
        let object = cache.value(&(namespace.to_string(), name.to_string()))?;
        let held = object.pointer("/metadata/resourceVersion")?.as_str()?;
        let key = (kind, namespace.to_string(), name.to_string());
        let mut written = locked(&self.written);
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
        locked(&self.written).insert(key, version);
    }

    /// Stops every watch and forgets what they and the writes said (the controllers stopped).
    pub fn clear(&self) {
        for (_, watch) in locked(&self.watches).drain() {
            watch.task.abort();
        }
        locked(&self.written).clear();
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
        let get = || caches.get(&client, &metrics, "VirtualService", "shop", "web-vsvc");
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
            locked(&caches.written).is_empty(),
            "the write shown is forgotten"
        );
        assert_eq!(
            caches.get(&client, &metrics, "Ingress", "shop", "web"),
            None,
            "a kind not cached"
        );
        assert_eq!(locked(&caches.watches).len(), 1, "no watch of Ingresses");
        caches.clear();
        assert!(locked(&caches.watches).is_empty());
    }
}
