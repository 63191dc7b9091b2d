//! A watch's cache of objects, by name and by the uid of the object that controls them (its ownerReference
//! with `controller: true`): what a Rollout's reconcile reads here rather than from the API server each time
//! (its ReplicaSets and AnalysisRuns, the Services and templates it names). A list in progress replaces the
//! cache when it is complete, as client-go's informers do, so a reader never sees half a list. An object that
//! does not decode is kept as such: no reader is handed what its controller controls while one of them is
//! unreadable (a read afresh reports it), nor the object itself.
//!
//! What a controller controls is held together and shared with its readers: a reconcile takes its Rollout's
//! ReplicaSets and runs without copying them, and a change to one copies the few its controller controls only
//! while a reader still holds them (copying them for every reconcile was 4% of the daemon's CPU at 2,000
//! Rollouts, by perf).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
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
    objects: HashMap<Key, Entry<K>>,
    /// By the uid of their controller.
    groups: HashMap<String, Group<K>>,
    /// The objects of a list in progress.
    listing: Option<HashMap<Key, Lenient<K>>>,
    /// The first list is complete.
    synced: bool,
}

/// Where the cache holds an object.
enum Entry<K> {
    /// Decoded and controlled by the object with this uid: in that controller's [`Group`].
    Grouped(String),
    /// Without a controller, or not decodable.
    Alone(Lenient<K>),
}

/// What one controller controls.
struct Group<K> {
    /// Those that decode, in key order, shared with the readers.
    decoded: Arc<Vec<K>>,
    /// How many do not decode (held [`Entry::Alone`]).
    undecodable: usize,
}

impl<K> Default for Group<K> {
    fn default() -> Self {
        Group {
            decoded: Arc::default(),
            undecodable: 0,
        }
    }
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        Cache {
            inner: Mutex::new(Inner {
                objects: HashMap::new(),
                groups: HashMap::new(),
                listing: None,
                synced: false,
            }),
        }
    }
}

fn key_of(meta: &ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// An object's key, borrowed, to order a group by.
fn key_in(meta: &ObjectMeta) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

fn controller_of(meta: &ObjectMeta) -> Option<String> {
    meta.controller().map(|r| r.uid.clone())
}

impl<K: Resource<DynamicType = ()> + Clone> Group<K> {
    /// Where the object `key` is in `decoded`, or would be.
    fn position(&self, key: &Key) -> Result<usize, usize> {
        let key = (key.0.as_str(), key.1.as_str());
        self.decoded
            .binary_search_by(|object| key_in(object.meta()).cmp(&key))
    }

    fn find(&self, key: &Key) -> Option<&K> {
        self.decoded.get(self.position(key).ok()?)
    }
}

impl<K: Resource<DynamicType = ()> + Clone> Inner<K> {
    fn insert(&mut self, object: Lenient<K>) {
        let key = key_of(object.meta());
        self.remove(&key);
        let controller = controller_of(object.meta());
        let entry = match (controller, object) {
            (Some(uid), Lenient::Decoded(object)) => {
                let group = self.groups.entry(uid.clone()).or_default();
                let at = group.position(&key).unwrap_or_else(|at| at);
                Arc::make_mut(&mut group.decoded).insert(at, object);
                Entry::Grouped(uid)
            }
            (controller, object) => {
                if let Some(uid) = controller {
                    self.groups.entry(uid).or_default().undecodable += 1;
                }
                Entry::Alone(object)
            }
        };
        self.objects.insert(key, entry);
    }

    fn remove(&mut self, key: &Key) {
        let (uid, grouped) = match self.objects.remove(key) {
            None => return,
            Some(Entry::Grouped(uid)) => (uid, true),
            Some(Entry::Alone(old)) => match controller_of(old.meta()) {
                Some(uid) => (uid, false),
                None => return,
            },
        };
        let Some(group) = self.groups.get_mut(&uid) else {
            return;
        };
        if grouped {
            if let Ok(at) = group.position(key) {
                Arc::make_mut(&mut group.decoded).remove(at);
            }
        } else {
            group.undecodable = group.undecodable.saturating_sub(1);
        }
        if group.decoded.is_empty() && group.undecodable == 0 {
            self.groups.remove(&uid);
        }
    }

    /// The metadata of the object `key`, and the object when it decodes.
    fn meta(&self, key: &Key) -> Option<(&ObjectMeta, Option<&K>)> {
        match self.objects.get(key)? {
            Entry::Grouped(uid) => {
                let object = self.groups.get(uid)?.find(key)?;
                Some((object.meta(), Some(object)))
            }
            Entry::Alone(Lenient::Decoded(object)) => Some((object.meta(), Some(object))),
            Entry::Alone(undecodable) => Some((undecodable.meta(), None)),
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
            watcher::Event::Delete(object) => inner.remove(&key_of(object.meta())),
            watcher::Event::Init => inner.listing = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                let key = key_of(object.meta());
                inner.listing.get_or_insert_default().insert(key, object);
            }
            watcher::Event::InitDone => {
                let listed = inner.listing.take().unwrap_or_default();
                inner.objects.clear();
                inner.groups.clear();
                for object in listed.into_values() {
                    inner.insert(object);
                }
                inner.synced = true;
            }
        }
    }

    /// The objects the object with `uid` controls, in key order, shared; `None` until the first list is
    /// complete, and while one of them does not decode.
    pub fn controlled_by(&self, uid: &str) -> Option<Arc<Vec<K>>> {
        let inner = self.lock();
        if !inner.synced {
            return None;
        }
        match inner.groups.get(uid) {
            None => Some(Arc::default()),
            Some(group) if group.undecodable > 0 => None,
            Some(group) => Some(group.decoded.clone()),
        }
    }

    /// The object `key`; `None` when it is not cached (or does not decode) or the first list is not complete.
    pub fn get(&self, key: &Key) -> Option<K> {
        self.read(key, K::clone)
    }

    /// What `read` makes of the object `key`, read where it is held (under the cache's lock: `read` must be
    /// quick); `None` as for [`Cache::get`].
    pub fn read<T>(&self, key: &Key, read: impl FnOnce(&K) -> T) -> Option<T> {
        let inner = self.lock();
        if !inner.synced {
            return None;
        }
        inner.meta(key)?.1.map(read)
    }

    /// The resourceVersion and uid of the object `key` as cached.
    pub fn held(&self, key: &Key) -> Held {
        let inner = self.lock();
        let (meta, _) = inner.meta(key)?;
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

    fn names(found: Option<Arc<Vec<ReplicaSet>>>) -> Option<Vec<String>> {
        found.map(|rs| {
            rs.iter()
                .map(|r| r.metadata.name.clone().unwrap_or_default())
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

    #[test]
    fn what_a_reader_was_handed_stays_as_it_was_while_the_cache_changes() {
        let owned = Cache::default();
        owned.apply(watcher::Event::Init);
        owned.apply(watcher::Event::InitApply(rs("web-2", "web", "1")));
        owned.apply(watcher::Event::InitApply(rs("web-1", "web", "2")));
        owned.apply(watcher::Event::InitDone);
        let read = owned.controlled_by("web-uid").expect("listed");
        owned.apply(watcher::Event::Apply(rs("web-1", "web", "3")));
        owned.apply(watcher::Event::Delete(rs("web-2", "web", "4")));
        let versions = |found: &[ReplicaSet]| -> Vec<String> {
            found
                .iter()
                .map(|r| r.metadata.resource_version.clone().unwrap_or_default())
                .collect()
        };
        assert_eq!(
            versions(&read),
            vec!["2", "1"],
            "web-1 before web-2, as read"
        );
        let now = owned.controlled_by("web-uid").expect("listed");
        assert_eq!(versions(&now), vec!["3"]);
        // Unchanged since, it is handed out shared again.
        assert!(Arc::ptr_eq(
            &now,
            &owned.controlled_by("web-uid").expect("listed")
        ));
        // One that does not decode, deleted: what its controller controls is readable again.
        owned.apply(watcher::Event::Apply(unreadable("web-5", "web", "5")));
        assert_eq!(owned.controlled_by("web-uid"), None);
        assert_eq!(
            owned.held(&("shop".into(), "web-5".into())),
            Some(("5".into(), "web-5-uid".into()))
        );
        owned.apply(watcher::Event::Delete(unreadable("web-5", "web", "6")));
        assert_eq!(
            names(owned.controlled_by("web-uid")),
            Some(vec!["web-1".into()])
        );
        assert_eq!(owned.held(&("shop".into(), "web-5".into())), None);
    }
}
