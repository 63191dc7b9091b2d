//! A watch's cache of objects, by name and by the uid of the object that controls them (its ownerReference
//! with `controller: true`): what a Rollout's reconcile reads here rather than from the API server each time
//! (its ReplicaSets and AnalysisRuns, the Services and templates it names). A list in progress replaces the
//! cache when it is complete, as client-go's informers do, so a reader never sees half a list. An object that
//! does not decode is kept as such: no reader is handed what its controller controls while one of them is
//! unreadable (a read afresh reports it), nor the object itself.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use kube::Resource;
use kube::runtime::watcher;

use super::watch::{Key, Lenient};
use crate::api::Controlled;
use crate::k8s::versions::Held;

/// One watch's objects, by key and by controller.
pub struct Cache<K> {
    inner: Mutex<Inner<K>>,
}

struct Inner<K> {
    objects: HashMap<Key, Lenient<K>>,
    by_controller: HashMap<String, BTreeSet<Key>>,
    /// The objects of a list in progress.
    listing: Option<HashMap<Key, Lenient<K>>>,
    /// The first list is complete.
    synced: bool,
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        Cache {
            inner: Mutex::new(Inner {
                objects: HashMap::new(),
                by_controller: HashMap::new(),
                listing: None,
                synced: false,
            }),
        }
    }
}

fn key_of<K: Resource<DynamicType = ()>>(object: &Lenient<K>) -> Key {
    let meta = object.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn controller_of<K: Resource<DynamicType = ()>>(object: &Lenient<K>) -> Option<String> {
    object.meta().controller().map(|r| r.uid.clone())
}

impl<K: Resource<DynamicType = ()> + Clone> Inner<K> {
    fn insert(&mut self, object: Lenient<K>) {
        let key = key_of(&object);
        self.remove(&key);
        if let Some(uid) = controller_of(&object) {
            self.by_controller
                .entry(uid)
                .or_default()
                .insert(key.clone());
        }
        self.objects.insert(key, object);
    }

    fn remove(&mut self, key: &Key) {
        let Some(old) = self.objects.remove(key) else {
            return;
        };
        if let Some(uid) = controller_of(&old)
            && let Some(keys) = self.by_controller.get_mut(&uid)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_controller.remove(&uid);
            }
        }
    }
}

impl<K: Resource<DynamicType = ()> + Clone> Cache<K> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<K>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies one watch event.
    pub fn apply(&self, event: watcher::Event<Lenient<K>>) {
        let mut inner = self.lock();
        match event {
            watcher::Event::Apply(object) => inner.insert(object),
            watcher::Event::Delete(object) => inner.remove(&key_of(&object)),
            watcher::Event::Init => inner.listing = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                let key = key_of(&object);
                inner.listing.get_or_insert_default().insert(key, object);
            }
            watcher::Event::InitDone => {
                let listed = inner.listing.take().unwrap_or_default();
                inner.objects.clear();
                inner.by_controller.clear();
                for object in listed.into_values() {
                    inner.insert(object);
                }
                inner.synced = true;
            }
        }
    }

    /// The objects the object with `uid` controls; `None` until the first list is complete, and while one of
    /// them does not decode.
    pub fn controlled_by(&self, uid: &str) -> Option<Vec<K>> {
        let inner = self.lock();
        if !inner.synced {
            return None;
        }
        let keys = inner.by_controller.get(uid);
        let decoded = |key| match inner.objects.get(key) {
            Some(Lenient::Decoded(object)) => Some(object.clone()),
            _ => None,
        };
        keys.into_iter().flatten().map(decoded).collect()
    }

    /// The object `key`; `None` when it is not cached (or does not decode) or the first list is not complete.
    pub fn get(&self, key: &Key) -> Option<K> {
        let inner = self.lock();
        match inner.objects.get(key).filter(|_| inner.synced)? {
            Lenient::Decoded(object) => Some(object.clone()),
            Lenient::Undecodable(_) => None,
        }
    }

    /// The resourceVersion and uid of the object `key` as cached.
    pub fn held(&self, key: &Key) -> Held {
        let inner = self.lock();
        let meta = inner.objects.get(key)?.meta();
        Some((
            meta.resource_version.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use serde_json::json;

    fn rs(name: &str, owner: &str, rv: &str) -> Lenient<ReplicaSet> {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop", "resourceVersion": rv, "uid": format!("{name}-uid"),
                "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": owner,
                    "uid": format!("{owner}-uid"), "controller": true}]},
        }))
        .expect("a ReplicaSet")
    }

    /// `rs` with a field of the wrong type.
    fn unreadable(name: &str, owner: &str, rv: &str) -> Lenient<ReplicaSet> {
        let Lenient::Decoded(rs) = rs(name, owner, rv) else {
            panic!("a ReplicaSet")
        };
        let mut value = serde_json::to_value(rs).expect("a ReplicaSet");
        value["spec"] = json!({"replicas": "three"});
        serde_json::from_value(value).expect("read leniently")
    }

    fn names(found: Option<Vec<ReplicaSet>>) -> Option<Vec<String>> {
        found.map(|rs| {
            rs.into_iter()
                .map(|r| r.metadata.name.unwrap_or_default())
                .collect()
        })
    }

    #[test]
    fn objects_are_found_by_their_controller_once_the_first_list_is_complete() {
        let owned = Cache::default();
        owned.apply(watcher::Event::Init);
        owned.apply(watcher::Event::InitApply(rs("web-1", "web", "1")));
        assert_eq!(owned.controlled_by("web-uid"), None, "listing");
        assert_eq!(owned.get(&("shop".into(), "web-1".into())), None);
        owned.apply(watcher::Event::InitDone);
        owned.apply(watcher::Event::Apply(rs("web-2", "web", "2")));
        owned.apply(watcher::Event::Apply(rs("api-1", "api", "3")));
        assert_eq!(
            names(owned.controlled_by("web-uid")),
            Some(vec!["web-1".into(), "web-2".into()])
        );
        // Adopted by another controller: found under it alone.
        owned.apply(watcher::Event::Apply(rs("web-1", "api", "4")));
        assert_eq!(
            names(owned.controlled_by("web-uid")),
            Some(vec!["web-2".into()])
        );
        assert_eq!(
            owned.held(&("shop".into(), "web-1".into())),
            Some(("4".into(), "web-1-uid".into()))
        );
        owned.apply(watcher::Event::Delete(rs("web-2", "web", "5")));
        assert_eq!(names(owned.controlled_by("web-uid")), Some(vec![]));
        // A relist replaces everything at its end: what was deleted meanwhile is gone.
        owned.apply(watcher::Event::Init);
        owned.apply(watcher::Event::InitApply(rs("web-3", "web", "6")));
        assert_eq!(
            names(owned.controlled_by("api-uid")),
            Some(vec!["api-1".into(), "web-1".into()]),
            "the old list until the new one is complete"
        );
        owned.apply(watcher::Event::InitDone);
        assert_eq!(names(owned.controlled_by("api-uid")), Some(vec![]));
        assert_eq!(
            names(owned.controlled_by("web-uid")),
            Some(vec!["web-3".into()])
        );
        assert_eq!(
            owned
                .get(&("shop".into(), "web-3".into()))
                .and_then(|r| r.metadata.resource_version),
            Some("6".into())
        );
        // One that no longer decodes hides what its controller controls, and itself, until it decodes again.
        owned.apply(watcher::Event::Apply(unreadable("web-4", "web", "7")));
        assert_eq!(owned.controlled_by("web-uid"), None);
        assert_eq!(owned.get(&("shop".into(), "web-4".into())), None);
        owned.apply(watcher::Event::Apply(rs("web-4", "web", "8")));
        assert_eq!(
            names(owned.controlled_by("web-uid")),
            Some(vec!["web-3".into(), "web-4".into()])
        );
    }
}
