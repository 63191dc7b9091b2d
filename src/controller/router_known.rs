//! What the router caches (`router_caches`) know besides the objects: which Rollouts read each router object,
//! the versions this process wrote, and which Rollouts each ALB Ingress's managed annotation names; and from
//! them, which Rollouts an event of a router object's watch concerns ([`Known::heard`]).
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
//! Rollout it does not hold to its `gone`, which releases the Ingress when that Rollout no longer exists; and
//! each Rollout reconcile releases the Ingresses naming it that its routing no longer names.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher;

use super::heard::News;
use super::watch::{Key, Lenient};
use crate::engine::routing::alb::MANAGED;
use crate::engine::routing::alb_release;
use crate::k8s::versions::at_least;

/// Object by kind, namespace and name.
pub(super) type Object = (&'static str, String, String);

/// What the reconciles told the caches, which the watches read too.
#[derive(Default)]
pub(super) struct Known {
    /// The resourceVersion of this process's last write of each object: a cached copy must show at least it.
    pub(super) written: Mutex<HashMap<Object, String>>,
    pub(super) readers: Mutex<Readers>,
    managed: Mutex<Managed>,
}

/// The Rollouts each watched Ingress's ALB managed annotation names, as the watch last showed it, and the
/// Ingresses naming each Rollout.
#[derive(Default)]
struct Managed {
    by_ingress: HashMap<Object, Vec<String>>,
    /// Ingress names (in the Rollout's namespace) by Rollout.
    by_rollout: HashMap<Key, HashSet<String>>,
}

impl Managed {
    /// The Ingress `ingress` names `names`.
    fn set(&mut self, ingress: Object, names: Vec<String>) {
        let (_, namespace, name) = &ingress;
        for rollout in self.by_ingress.remove(&ingress).unwrap_or_default() {
            let key = (namespace.clone(), rollout);
            if let Some(ingresses) = self.by_rollout.get_mut(&key) {
                ingresses.remove(name);
                if ingresses.is_empty() {
                    self.by_rollout.remove(&key);
                }
            }
        }
        for rollout in &names {
            let key = (namespace.clone(), rollout.clone());
            self.by_rollout.entry(key).or_default().insert(name.clone());
        }
        if !names.is_empty() {
            self.by_ingress.insert(ingress, names);
        }
    }
}

/// Which Rollouts read each object.
#[derive(Default)]
pub(super) struct Readers {
    pub(super) of: HashMap<Object, HashSet<Key>>,
    /// What each Rollout read, to forget it with the Rollout.
    read_by: HashMap<Key, Vec<Object>>,
}

pub(super) fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
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
    pub(super) fn heard<K: Resource<DynamicType = ()>>(
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
        locked(&self.managed).set(object, names);
        unread
    }

    /// The Rollout `reader` read `object`.
    pub(super) fn read(&self, object: &Object, reader: &Key) {
        locked(&self.readers).read(object, reader);
    }

    /// This process wrote `object`, which the API server answered with `version`.
    pub(super) fn wrote(&self, object: Object, version: String) {
        locked(&self.written).insert(object, version);
    }

    /// Whether a cached copy of `object` at version `held` shows this process's last write of it (which is
    /// then forgotten).
    pub(super) fn shows_written(&self, object: &Object, held: &str) -> bool {
        let mut written = locked(&self.written);
        match written.get(object) {
            Some(wrote) if !at_least(held, wrote) => false,
            Some(_) => {
                written.remove(object);
                true
            }
            None => true,
        }
    }

    /// The Ingresses the Rollout `rollout` read, and those a watch showed naming it in their ALB managed
    /// annotation, by namespace and name.
    pub(super) fn alb_ingresses(&self, rollout: &Key) -> Vec<(String, String)> {
        let readers = locked(&self.readers);
        let read = readers.read_by.get(rollout).into_iter().flatten();
        let mut ingresses: Vec<_> = read
            .filter(|(k, _, _)| *k == "Ingress")
            .map(|(_, namespace, name)| (namespace.clone(), name.clone()))
            .collect();
        drop(readers);
        for ingress in self.naming(rollout) {
            let ingress = (rollout.0.clone(), ingress);
            if !ingresses.contains(&ingress) {
                ingresses.push(ingress);
            }
        }
        ingresses
    }

    /// The Ingresses (in its namespace) whose ALB managed annotation names the Rollout `rollout`, by name.
    pub(super) fn naming(&self, rollout: &Key) -> Vec<String> {
        let managed = locked(&self.managed);
        let mut names: Vec<String> = managed
            .by_rollout
            .get(rollout)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// Forgets what the Rollout `reader` read (it is gone).
    pub(super) fn forget(&self, reader: &Key) {
        locked(&self.readers).forget(reader);
    }

    /// Forgets everything (the controllers stopped).
    pub(super) fn clear(&self) {
        locked(&self.written).clear();
        *locked(&self.readers) = Readers::default();
        *locked(&self.managed) = Managed::default();
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use k8s_openapi::api::networking::v1::Ingress;
    use serde_json::json;

    use super::super::router_caches::Json;
    use crate::routers::objects::VirtualService;

    /// A VirtualService as the router caches' watches decode it.
    pub(in crate::controller) fn vs(rv: &str) -> Lenient<Json<VirtualService>> {
        serde_json::from_value(json!({
            "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "web-vsvc", "namespace": "shop", "resourceVersion": rv},
            "spec": {"hosts": ["web"]},
        }))
        .expect("a VirtualService")
    }

    /// An Ingress as the router caches' watches decode it.
    pub(in crate::controller) fn ingress(
        rv: &str,
        managed: Option<&str>,
    ) -> Lenient<Json<Ingress>> {
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
        let known = Known::default();
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
        assert_eq!(known.alb_ingresses(&legacy), vec![web.clone()]);
        assert_eq!(known.naming(&legacy), ["web"]);
        assert_eq!(
            known.alb_ingresses(&web),
            vec![web.clone()],
            "read, and named"
        );
        assert_eq!(
            heard(watcher::Event::Apply(ingress("4", Some("not json")))),
            vec![web.clone()],
            "an annotation that does not read names none; the reader hears of the change"
        );
        assert!(known.alb_ingresses(&legacy).is_empty() && known.naming(&web).is_empty());
        heard(watcher::Event::Apply(ingress("5", Some(both))));
        assert_eq!(known.naming(&legacy), ["web"]);
        heard(watcher::Event::Apply(ingress("6", Some(r#"{"web":null}"#))));
        assert!(known.naming(&legacy).is_empty(), "legacy's entry gone");
        assert_eq!(known.naming(&web), ["web"]);
        heard(watcher::Event::Delete(ingress("6", Some(both))));
        assert!(known.naming(&web).is_empty(), "deleted");
        assert!(locked(&known.managed).by_rollout.is_empty(), "nothing left");
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
        let mut heard = |event: watcher::Event<Lenient<Json<VirtualService>>>| {
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
