//! One watch of one kind in one scope (a namespace, or all): the objects this process owns (the ownership
//! label selector), decoded one by one into a cache, so an object the kind cannot hold (a field of the wrong
//! type, stored by a client that did not check the schema) is handed on as [`Undecodable`] instead of failing
//! the list or the watch for every other object.
//!
//! It also watches objects of other kinds for the object that controls them ([`owners`]): a Rollout's
//! ReplicaSets and AnalysisRuns.
//!
//! This module owns decoding and the cache; what to do with an object is the driver's and its kind's.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use super::cache::Cache;
use super::heard::Heard;
use crate::api::Controlled;
use crate::observe::Metrics;

/// An object's `(namespace, name)`, as the watch hands it on and the driver queues it.
pub type Key = (String, String);

/// An object of the watched kind that does not decode as that kind.
#[derive(Debug, Clone)]
pub struct Undecodable {
    pub metadata: ObjectMeta,
    /// The object's `status` as stored, to tell whether it was reported already.
    pub status: Option<Value>,
    /// The path of the field and what is wrong with it.
    pub error: String,
}

/// What the watch delivers to the driver.
#[derive(Debug)]
pub enum Seen<K> {
    /// An object (the cache's copy), and whether the cache did not hold it before (client-go's informer calls
    /// its `AddFunc`).
    Object(Arc<K>, bool),
    Undecodable(Box<Undecodable>),
    /// An object the watch saw deleted (or leave its label selector), or that a re-list no longer has, by
    /// namespace and name (client-go's informer `DeleteFunc`).
    Deleted(Key),
    /// The watch failed; the watcher re-lists by itself (410 Gone, dropped connections).
    Failed(watcher::Error),
}

/// An object as listed or watched: decoded, or why not. The object's JSON is decoded as `K` straight from the
/// text, its managed fields cut out first ([`crate::k8s::managed_fields`]); only one that fails is parsed again
/// as a JSON tree, so that its metadata is still known. The text is taken as serde_json hands it over: the API
/// server sends a watch event's `type` before its `object` (Go encodes the fields in order), so the event is
/// never buffered first.
#[derive(Debug, Clone)]
pub(super) enum Lenient<K> {
    Decoded(K),
    Undecodable(Box<Undecodable>),
}

impl<'de, K: DeserializeOwned + Resource> serde::Deserialize<'de> for Lenient<K> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let text = crate::k8s::managed_fields::without(raw.get());
        if let Ok(object) = serde_json::from_str::<K>(&text) {
            return Ok(Lenient::Decoded(object).without_managed_fields());
        }
        let value: Value = serde_json::from_str(&text).map_err(serde::de::Error::custom)?;
        let error = match crate::api::decode::typed::<K>(&value) {
            Ok(object) => return Ok(Lenient::Decoded(object).without_managed_fields()),
            Err(e) => format!("{}: {}", e.path, e.message),
        };
        let metadata = value
            .get("metadata")
            .map(|m| ObjectMeta::deserialize(m).map_err(serde::de::Error::custom))
            .transpose()?
            .unwrap_or_default();
        let undecodable = Lenient::Undecodable(Box::new(Undecodable {
            metadata,
            status: value.get("status").cloned(),
            error,
        }));
        Ok(undecodable.without_managed_fields())
    }
}

impl<K: Resource> Lenient<K> {
    /// Without `metadata.managedFields`: the API server's record of which client set which field, which
    /// nothing canaryd does reads, kept on every object and often larger than its spec. Held by the caches
    /// of thousands of objects it is memory for nothing, so it is dropped as client-go's informers let a
    /// transform drop it (when the text could not be cut before decoding). A write made from a cached copy
    /// leaves the field out, and the API server then keeps the object's own.
    fn without_managed_fields(mut self) -> Self {
        let metadata = match &mut self {
            Lenient::Decoded(object) => object.meta_mut(),
            Lenient::Undecodable(u) => &mut u.metadata,
        };
        metadata.managed_fields = None;
        self
    }
}

/// The kind, group, version and plural of `K`, in the `Resource` impl of a wrapper of `K` (which lends its own
/// metadata).
macro_rules! names_of {
    ($k:ident) => {
        fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
            $k::kind(dt)
        }
        fn group(dt: &()) -> std::borrow::Cow<'_, str> {
            $k::group(dt)
        }
        fn version(dt: &()) -> std::borrow::Cow<'_, str> {
            $k::version(dt)
        }
        fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
            $k::plural(dt)
        }
    };
}
pub(super) use names_of;

impl<K: Resource<DynamicType = ()>> Resource for Lenient<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    names_of!(K);
    fn meta(&self) -> &ObjectMeta {
        match self {
            Lenient::Decoded(object) => object.meta(),
            Lenient::Undecodable(u) => &u.metadata,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Lenient::Decoded(object) => object.meta_mut(),
            Lenient::Undecodable(u) => &mut u.metadata,
        }
    }
}

/// The API of the objects of kind `K` in `namespace` (every namespace for `None`), decoded leniently.
pub(super) fn lenient<K>(client: kube::Client, namespace: Option<&str>) -> Api<Lenient<K>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    }
}

/// A namespaced kind a watch decodes and hands to other tasks.
pub trait Watched:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// What of a watched object its owner's reconcile reads: a change elsewhere in it concerns the owner not.
pub type Read<K> = fn(&K) -> Value;

/// What a watch of the caches does when it fails: the watcher retries by itself, with backoff, and the
/// reconciles read from the API server what the cache does not show meanwhile, so nothing waits on it; but the
/// failure is counted in `canaryd_reconcile_errors_total{reason="watch"}` and logged with the kind and where it
/// is watched, as the driver does for its kinds' own watches, so that a watch the RBAC refuses (or of a kind
/// whose CRD is missing) is seen.
pub struct Failures {
    metrics: Arc<Metrics>,
    kind: String,
    scope: String,
}

impl Failures {
    /// For a watch of `K` in `namespace` (every namespace for `None`).
    pub fn of<K: Resource<DynamicType = ()>>(
        metrics: &Arc<Metrics>,
        namespace: Option<&str>,
    ) -> Self {
        Failures {
            metrics: metrics.clone(),
            kind: K::kind(&()).into_owned(),
            scope: namespace.unwrap_or("every namespace").to_string(),
        }
    }

    fn failed(&self, error: &watcher::Error) {
        self.metrics.reconcile_error("watch");
        tracing::warn!(kind = %self.kind, namespace = %self.scope, error = %error, "Watch of a cache failed; retrying");
    }
}

/// A watch of the objects of kind `K` that `selector` picks in `namespace` (all for `None`), kept in `cache`
/// by their controller, yielding the key of the object of kind `owner` that controls one (its ownerReference
/// with `controller: true`) when it is heard of ([`Heard`]), once `cache` shows it. An object that does not
/// decode as `K` is kept in the cache as such and still heard of; a failed watch is told to `failures` and
/// retried by the watcher itself.
pub fn owners<K>(
    client: kube::Client,
    namespace: Option<&str>,
    selector: &str,
    owner: &'static str,
    read: Option<Read<K>>,
    cache: Arc<Cache<K>>,
    failures: Failures,
) -> BoxStream<'static, Key>
where
    K: Watched,
{
    let api = lenient(client, namespace);
    let mut heard = Heard::new(read);
    watcher(api, watcher::Config::default().labels(selector))
        .default_backoff()
        .filter_map(move |event| {
            let key = match event {
                Ok(e) => {
                    let key = heard.of(&e).and_then(|metadata| {
                        let controller = metadata.controller().filter(|r| r.kind == owner)?;
                        Some((metadata.namespace.clone()?, controller.name.clone()))
                    });
                    cache.apply(e);
                    key
                }
                Err(e) => {
                    failures.failed(&e);
                    None
                }
            };
            std::future::ready(key)
        })
        .boxed()
}

/// A watch of every object `api` lists, kept in `cache`; a failure is told to `failures`. It yields the keys
/// `tell` names for each event (told before the cache applies it, yielded after): of the objects to reconcile
/// for it, none for a watch polled beside a kind's triggers only for the caches its reconciles read
/// ([`heard::silent`](super::heard::silent)).
pub fn kept<K>(
    api: Api<Lenient<K>>,
    cache: Arc<Cache<K>>,
    failures: Failures,
    mut tell: impl FnMut(&watcher::Event<Lenient<K>>) -> Vec<Key> + Send + 'static,
) -> BoxStream<'static, Key>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .flat_map(move |event| {
            let keys = match event {
                Ok(event) => {
                    let keys = tell(&event);
                    cache.apply(event);
                    keys
                }
                Err(e) => {
                    failures.failed(&e);
                    Vec::new()
                }
            };
            futures::stream::iter(keys)
        })
        .boxed()
}

/// Watch events decoded ahead of the queue, per watch (and keys named by the watches of other kinds).
pub const WATCH_BUFFER: usize = 1024;

/// Starts watching the objects `selector` picks in `namespace` (all namespaces for `None`). Returns the
/// cache, the flag set once the first list is in it, the receiving end of what the watch saw and the future
/// that runs the watch (it ends when the receiver is dropped).
pub fn start<K>(
    client: kube::Client,
    namespace: Option<&str>,
    selector: &str,
) -> (
    Store<K>,
    Arc<AtomicBool>,
    tokio::sync::mpsc::Receiver<Seen<K>>,
    impl Future<Output = ()> + Send + 'static,
)
where
    K: Watched,
{
    let lenient = lenient(client, namespace);
    let mut writer = reflector::store::Writer::<K>::new(());
    let store = writer.as_reader();
    let reader = store.clone();
    let synced = Arc::new(AtomicBool::new(false));
    let flag = synced.clone();
    let (sender, receiver) = tokio::sync::mpsc::channel(WATCH_BUFFER);
    let selector = selector.to_string();
    let run = async move {
        let mut events = std::pin::pin!(
            watcher(lenient, watcher::Config::default().labels(&selector)).default_backoff()
        );
        // Objects of a (re-)list reach the cache only when the list is complete, so they are handed on then:
        // handed on earlier, one new since the last list would not be found in the cache and be dropped.
        let mut listed: Vec<(ObjectRef<K>, bool)> = Vec::new();
        while let Some(event) = events.next().await {
            let seen = match event {
                Err(e) => vec![Seen::Failed(e)],
                Ok(event) => apply(&mut writer, &reader, event, &flag, &mut listed),
            };
            for seen in seen {
                if sender.send(seen).await.is_err() {
                    return;
                }
            }
        }
    };
    (store, synced, receiver, run)
}

/// Applies one watch event to the cache; returns what the driver is to see of it, the cache's copy of the object
/// rather than one more (a Rollout's spec and status copied on each of its watch events was 0.5% of the
/// daemon's CPU at 2,000 Rollouts, by perf). `listed` names the objects of a list in progress.
fn apply<K>(
    writer: &mut reflector::store::Writer<K>,
    reader: &Store<K>,
    event: watcher::Event<Lenient<K>>,
    synced: &AtomicBool,
    listed: &mut Vec<(ObjectRef<K>, bool)>,
) -> Vec<Seen<K>>
where
    K: Resource<DynamicType = ()> + Clone,
{
    use watcher::Event as E;
    // A cached version of an object that no longer decodes is stale: drop it, so nothing acts on it.
    let forget = |writer: &mut reflector::store::Writer<K>, u: &Undecodable| {
        let name = u.metadata.name.clone().unwrap_or_default();
        let mut reference = ObjectRef::<K>::new(&name);
        if let Some(ns) = &u.metadata.namespace {
            reference = reference.within(ns);
        }
        if let Some(old) = reader.get(&reference) {
            writer.apply_watcher_event(&E::Delete((*old).clone()));
        }
    };
    // Not in the cache yet (during a re-list the cache still holds what was there before it).
    let added = |reference: &ObjectRef<K>| reader.get(reference).is_none();
    match event {
        E::Apply(Lenient::Decoded(object)) => {
            let reference = ObjectRef::from_obj(&object);
            let added = added(&reference);
            writer.apply_watcher_event(&E::Apply(object));
            let cached = reader.get(&reference);
            cached.map(|o| Seen::Object(o, added)).into_iter().collect()
        }
        E::InitApply(Lenient::Decoded(object)) => {
            let reference = ObjectRef::from_obj(&object);
            let added = added(&reference);
            listed.push((reference, added));
            writer.apply_watcher_event(&E::InitApply(object));
            Vec::new()
        }
        E::Apply(Lenient::Undecodable(u)) | E::InitApply(Lenient::Undecodable(u)) => {
            forget(writer, &u);
            vec![Seen::Undecodable(u)]
        }
        E::Delete(Lenient::Decoded(object)) => {
            let key = (object.namespace().unwrap_or_default(), object.name_any());
            writer.apply_watcher_event(&E::Delete(object));
            vec![Seen::Deleted(key)]
        }
        E::Delete(Lenient::Undecodable(u)) => {
            forget(writer, &u);
            let m = &u.metadata;
            let key = (
                m.namespace.clone().unwrap_or_default(),
                m.name.clone().unwrap_or_default(),
            );
            vec![Seen::Deleted(key)]
        }
        E::Init => {
            writer.apply_watcher_event(&E::Init);
            listed.clear();
            Vec::new()
        }
        E::InitDone => {
            // What the cache held that the list no longer has was deleted while no watch was open (client-go's
            // informer tells it as `DeletedFinalStateUnknown`).
            let relisted: HashSet<&ObjectRef<K>> = listed.iter().map(|(r, _)| r).collect();
            let mut seen: Vec<Seen<K>> = (reader.state().iter())
                .map(|o| ObjectRef::from_obj(&**o))
                .filter(|r| !relisted.contains(r))
                .map(|r| Seen::Deleted((r.namespace.unwrap_or_default(), r.name)))
                .collect();
            writer.apply_watcher_event(&E::InitDone);
            synced.store(true, Ordering::Relaxed);
            let cached = |(reference, added)| Some(Seen::Object(reader.get(&reference)?, added));
            seen.extend(listed.drain(..).filter_map(cached));
            seen
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::AnalysisRun;
    use serde_json::json;

    #[test]
    fn an_object_with_a_field_of_the_wrong_type_keeps_its_name_and_says_which_field() {
        let raw = json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
            "metadata": {"name": "odd", "namespace": "default", "resourceVersion": "7"},
            "spec": {"metrics": [], "terminate": "yes"},
        });
        let Ok(Lenient::<AnalysisRun>::Undecodable(u)) = serde_json::from_value(raw) else {
            panic!("an undecodable run");
        };
        assert_eq!(u.metadata.name.as_deref(), Some("odd"));
        assert!(
            u.error.starts_with("spec.terminate: invalid type"),
            "{}",
            u.error
        );
    }

    #[test]
    fn a_well_typed_object_decodes_as_its_kind() {
        let raw = json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
            "metadata": {"name": "fine"}, "spec": {"metrics": []},
        });
        let decoded: Lenient<AnalysisRun> = serde_json::from_value(raw).expect("decodes");
        assert!(matches!(decoded, Lenient::Decoded(_)));
    }

    #[test]
    fn a_watch_events_object_is_decoded_from_its_text_and_one_that_fails_from_a_tree() {
        let event = |object: &str| {
            let line = format!(r#"{{"type":"MODIFIED","object":{object}}}"#);
            match serde_json::from_str::<kube::core::WatchEvent<Lenient<AnalysisRun>>>(&line) {
                Ok(kube::core::WatchEvent::Modified(o)) => o,
                other => panic!("a modified object, not {other:?}"),
            }
        };
        let run =
            r#"{"apiVersion":"argoproj.io/v1alpha1","kind":"AnalysisRun","metadata":{"name":"a"}"#;
        let Lenient::Decoded(fine) = event(&format!(r#"{run},"spec":{{"metrics":[]}}}}"#)) else {
            panic!("decoded");
        };
        assert_eq!(fine.metadata.name.as_deref(), Some("a"));
        // A key given twice fails the typed decoder, not a JSON tree (the last one stands), as before.
        let twice =
            format!(r#"{run},"spec":{{"metrics":[],"terminate":false,"terminate":true}}}}"#);
        assert!(
            serde_json::from_str::<AnalysisRun>(&twice).is_err(),
            "the text alone does not decode"
        );
        let Lenient::Decoded(twice) = event(&twice) else {
            panic!("decoded through a tree");
        };
        assert_eq!(twice.spec.terminate, Some(true));
        let Lenient::Undecodable(odd) =
            event(&format!(r#"{run},"spec":{{"metrics":[],"terminate":1}}}}"#))
        else {
            panic!("undecodable");
        };
        assert_eq!(odd.metadata.name.as_deref(), Some("a"));
        assert!(odd.error.starts_with("spec.terminate"), "{}", odd.error);
    }

    #[test]
    fn a_watched_object_is_kept_without_its_managed_fields() {
        let managed = json!([{"manager": "kubectl", "operation": "Update", "apiVersion": "argoproj.io/v1alpha1",
                              "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:metrics": {}}}}]);
        let object = |spec: Value| {
            json!({
                "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
                "metadata": {"name": "a", "managedFields": managed}, "spec": spec,
            })
        };
        let decoded: Lenient<AnalysisRun> =
            serde_json::from_value(object(json!({"metrics": []}))).expect("decodes");
        let Lenient::Decoded(run) = decoded else {
            panic!("decoded");
        };
        assert_eq!(run.metadata.name.as_deref(), Some("a"));
        assert_eq!(run.metadata.managed_fields, None);
        let odd: Lenient<AnalysisRun> =
            serde_json::from_value(object(json!({"metrics": [], "terminate": 1}))).expect("read");
        let Lenient::Undecodable(odd) = odd else {
            panic!("undecodable");
        };
        assert_eq!(odd.metadata.managed_fields, None);
        // Without the dropping, the typed decoder keeps them: the test above would fail.
        let typed: AnalysisRun =
            serde_json::from_value(object(json!({"metrics": []}))).expect("typed");
        assert_eq!(typed.metadata.managed_fields.map(|m| m.len()), Some(1));
    }

    #[test]
    fn a_deletion_and_an_object_a_relist_no_longer_has_are_seen_deleted() {
        let run = |name: &str| -> AnalysisRun {
            serde_json::from_value(json!({
                "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
                "metadata": {"name": name, "namespace": "shop"}, "spec": {"metrics": []},
            }))
            .expect("a run")
        };
        let mut writer = reflector::store::Writer::<AnalysisRun>::new(());
        let reader = writer.as_reader();
        let (synced, mut listed) = (AtomicBool::new(false), Vec::new());
        let mut apply = |event| {
            let seen = apply(&mut writer, &reader, event, &synced, &mut listed);
            let name = |s: &Seen<AnalysisRun>| match s {
                Seen::Object(o, added) => {
                    format!("{} {added}", o.metadata.name.clone().unwrap_or_default())
                }
                Seen::Deleted((namespace, name)) => format!("deleted {namespace}/{name}"),
                _ => "other".to_string(),
            };
            seen.iter().map(name).collect::<Vec<_>>()
        };
        use watcher::Event as E;
        apply(E::Init);
        for name in ["a", "b", "c"] {
            apply(E::InitApply(Lenient::Decoded(run(name))));
        }
        assert_eq!(apply(E::InitDone), ["a true", "b true", "c true"]);
        assert_eq!(
            apply(E::Delete(Lenient::Decoded(run("a")))),
            ["deleted shop/a"]
        );
        apply(E::Init);
        apply(E::InitApply(Lenient::Decoded(run("c"))));
        assert_eq!(apply(E::InitDone), ["deleted shop/b", "c false"]);
    }
}
