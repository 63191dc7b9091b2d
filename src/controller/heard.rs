//! Which of a watch's events name something to reconcile. For an object another controls, its owner, when what
//! the owner reads of it changed ([`Heard`]); for an object others point at (a Service, a router object), what
//! the event tells of it ([`News`]), the watch's owner saying whom that concerns.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher;
use serde_json::Value;

use super::watch::{Key, Lenient, Read};

/// What a watch of a cache tells of, for naming what to reconcile for its events: an object applied (created
/// or changed) or deleted, and one listed again after the watch's first list (a re-list after a failed watch);
/// not the first list's objects, whose readers read them afresh while it was not complete.
#[derive(Default)]
pub(super) struct News {
    /// The first list is complete.
    listed: bool,
}

impl News {
    /// The metadata of the object `event` tells of, and whether it was applied (a write this process may have
    /// made itself, which the caller may tell by its resourceVersion).
    pub(super) fn of<'e, K: Resource<DynamicType = ()>>(
        &mut self,
        event: &'e watcher::Event<Lenient<K>>,
    ) -> Option<(&'e ObjectMeta, bool)> {
        match event {
            watcher::Event::Apply(o) => Some((o.meta(), true)),
            watcher::Event::Delete(o) => Some((o.meta(), false)),
            watcher::Event::InitApply(o) if self.listed => Some((o.meta(), false)),
            watcher::Event::InitDone => {
                self.listed = true;
                None
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => None,
        }
    }
}

/// For [`watch::kept`](super::watch::kept): no event names anything to reconcile.
pub(super) fn silent<K>(_: &watcher::Event<Lenient<K>>) -> Vec<Key> {
    Vec::new()
}

/// Which watch events concern an object's owner: a listed or deleted object, and a changed one, but with
/// `read`, only a change in what `read` takes of it (only that is kept of each object). An object that does
/// not decode is heard of whenever it changes. Hands on the object's metadata.
pub(super) struct Heard<K> {
    read: Option<Read<K>>,
    /// What `read` took of each object heard of since the last list began.
    last: HashMap<(Option<String>, String), Value>,
}

impl<K: Resource<DynamicType = ()>> Heard<K> {
    pub(super) fn new(read: Option<Read<K>>) -> Self {
        Heard {
            read,
            last: HashMap::new(),
        }
    }

    pub(super) fn of<'e>(
        &mut self,
        event: &'e watcher::Event<Lenient<K>>,
    ) -> Option<&'e ObjectMeta> {
        let id = |m: &ObjectMeta| (m.namespace.clone(), m.name.clone().unwrap_or_default());
        match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                let seen = match (o, self.read) {
                    (_, None) => return Some(o.meta()),
                    (Lenient::Decoded(object), Some(read)) => read(object),
                    (Lenient::Undecodable(u), Some(_)) => Value::String(u.error.clone()),
                };
                let meta = o.meta();
                (self.last.insert(id(meta), seen.clone()).as_ref() != Some(&seen)).then_some(meta)
            }
            watcher::Event::Delete(o) => {
                self.last.remove(&id(o.meta()));
                Some(o.meta())
            }
            // A relist: every object listed is heard of again, those deleted meanwhile are not.
            watcher::Event::Init => {
                self.last.clear();
                None
            }
            watcher::Event::InitDone => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::AnalysisRun;

    fn run(name: &str, phase: &str, measurements: u32) -> Lenient<AnalysisRun> {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"metrics": []},
            "status": {"phase": phase, "metricResults": [{"name": "m", "phase": "Running", "count": measurements}]},
        }))
        .expect("a run")
    }

    fn phase_of(run: &AnalysisRun) -> Value {
        serde_json::to_value(run.status.as_ref().map(|s| &s.phase)).expect("a phase")
    }

    #[test]
    fn with_a_read_only_a_change_in_what_it_takes_is_heard_of_again() {
        let mut heard = Heard {
            read: Some(phase_of),
            last: HashMap::new(),
        };
        let mut of = |e| heard.of(&e).map(|m| m.name.clone().unwrap_or_default());
        assert_eq!(
            of(watcher::Event::InitApply(run("a", "Running", 0))),
            Some("a".into())
        );
        assert_eq!(
            of(watcher::Event::Apply(run("a", "Running", 1))),
            None,
            "a measurement"
        );
        assert_eq!(
            of(watcher::Event::Apply(run("b", "Running", 1))),
            Some("b".into())
        );
        assert_eq!(
            of(watcher::Event::Apply(run("a", "Successful", 2))),
            Some("a".into())
        );
        assert_eq!(
            of(watcher::Event::Delete(run("a", "Successful", 2))),
            Some("a".into())
        );
        assert_eq!(
            of(watcher::Event::Apply(run("a", "Successful", 2))),
            Some("a".into()),
            "made again"
        );
        assert_eq!(of(watcher::Event::Init), None);
        assert_eq!(
            of(watcher::Event::InitApply(run("b", "Running", 1))),
            Some("b".into()),
            "relisted"
        );
    }

    #[test]
    fn without_a_read_every_change_is_heard_of() {
        let mut heard: Heard<AnalysisRun> = Heard {
            read: None,
            last: HashMap::new(),
        };
        assert!(
            heard
                .of(&watcher::Event::Apply(run("a", "Running", 1)))
                .is_some()
        );
        assert!(
            heard
                .of(&watcher::Event::Apply(run("a", "Running", 1)))
                .is_some()
        );
        assert!(heard.last.is_empty(), "nothing kept");
    }
}
