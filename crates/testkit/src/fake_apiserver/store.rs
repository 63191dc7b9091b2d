//! The fake's storage and write semantics: objects by (resource, namespace, name), the global resourceVersion
//! counter, the change history watches read, and the rules kube-apiserver applies on create, update, patch and
//! delete (status subresource isolation, optimistic concurrency, generation, finalizers, the CRD's schema). No
//! HTTP here: the server module turns requests into these calls and `ApiError`s into `Status` responses.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use hyper::body::Bytes;
use serde_json::{Value, json};

use super::ResourceDef;
use super::error::ApiError;
use super::object::{
    admit, fill_type_meta, merge_patch, metadata_of, normalize, now, random_suffix, same_spec,
    set_meta, with_spec_of, with_status_of,
};
use super::selector::{FieldSelector, LabelSelector};

/// (resource id such as `argoproj.io/v1alpha1/analysisruns`, namespace or "" when cluster-scoped, name).
pub type Key = (String, String, String);

/// What a write did, as watch events name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// A committed version of an object, shared by the store, the watch history and replies. Its JSON is made once,
/// by whichever sends it first: the reply to a write and every watch's event of it carry the same text.
#[derive(Debug)]
pub struct Stored {
    /// The whole object; in a past version only its metadata (see [`Stored::past`]).
    value: Value,
    json: OnceLock<Bytes>,
    past: bool,
}

impl Stored {
    fn new(value: Value) -> Self {
        Stored {
            value,
            json: OnceLock::new(),
            past: false,
        }
    }

    pub fn json(&self) -> &Bytes {
        // Serialized straight into bytes: `to_string` goes through `Display`, a formatter call per token (7% of
        // the fakes' samples at 50,000 AnalysisRuns against 5%). A `Value` always serializes.
        self.json
            .get_or_init(|| Bytes::from(serde_json::to_vec(&self.value).unwrap_or_default()))
    }

    /// This version as the history keeps it once a later one is committed: its JSON (made by then, for the
    /// reply to its write) and, of its value, only the metadata, which is all a watch's selectors and the
    /// ReplicaSet controller read of a version that is not the latest. The whole value is several times the
    /// size of the JSON; the bench at 50,000 AnalysisRuns keeps 100 x 1024 past versions, and the kernel zeroing
    /// fresh pages for gigabytes of them was a sixth of the fakes' CPU.
    fn past(&self) -> Stored {
        let metadata = self.value.get("metadata").cloned().unwrap_or(Value::Null);
        Stored {
            value: json!({ "metadata": metadata }),
            json: OnceLock::from(self.json().clone()),
            past: true,
        }
    }

    /// This version whole: itself, or for a past version its value read back from its JSON.
    pub fn whole(self: &Arc<Self>) -> Arc<Stored> {
        if !self.past {
            return self.clone();
        }
        let value = serde_json::from_slice(self.json()).unwrap_or_else(|_| self.value.clone());
        Arc::new(Stored::new(value))
    }
}

impl Deref for Stored {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.value
    }
}

/// One committed write, kept so that watches can resume from any resourceVersion still in the window.
#[derive(Clone, Debug)]
pub struct Change {
    pub rv: u64,
    pub kind: ChangeKind,
    pub key: Key,
    /// The object before a modification: label-selected watches turn selector transitions into ADDED/DELETED.
    /// Always a past version: its metadata and JSON only.
    pub previous: Option<Arc<Stored>>,
    /// Shared, so a watch takes its changes out from under the store lock cheaply and serializes them after.
    /// Whole while it is the object's latest version, a past version once a later one is committed: read
    /// [`Stored::whole`] for anything but its metadata and JSON.
    pub object: Arc<Stored>,
    /// When it was committed: benches time the daemon's writes by it.
    pub at: jiff::Timestamp,
}

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Main,
    Status,
}

/// The patch flavours kube clients send, named by their Content-Type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`: applied as a merge patch (lists replaced, not merged by key).
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply): applied as a merge patch, creating when absent.
    Apply,
}

/// The outcome of DELETE: gone now, or kept with `deletionTimestamp` until its finalizers are removed.
pub enum Deletion {
    Gone(Arc<Stored>),
    Pending(Arc<Stored>),
}

/// Called with every version of one kind as it is committed (see [`Store::tap`]).
pub type Tap = Box<dyn FnMut(jiff::Timestamp, &Arc<Stored>) + Send>;

pub struct Store {
    pub rv: u64,
    /// Shared with the history and with responses being written, so a write copies only what it changes.
    objects: BTreeMap<Key, Arc<Stored>>,
    /// The names of the objects carrying each label, by (resource id, namespace, label key, label value): a list
    /// by a label selector (a controller reading what one Rollout owns) starts from them instead of looking at
    /// every object of the kind.
    labelled: HashMap<(String, String, String, String), BTreeSet<String>>,
    history: VecDeque<Change>,
    history_limit: usize,
    /// Changes up to here fell out of the history window: a watch behind it gets 410 Expired.
    pub compacted_rv: u64,
    /// Set by the fixture: a new watch from a resourceVersion before this gets 410 Expired, while open watches
    /// that keep up continue, as after an etcd compaction.
    expired_before: u64,
    /// Set by the fixture: the next watch from any resourceVersion gets 410 Expired, so that even a client
    /// that was fully caught up must relist once.
    expire_next_watch: bool,
    /// Bumped to cut every open watch.
    pub watch_epoch: u64,
    conflicts: Vec<Key>,
    serial: u64,
    /// Every field a write lost to pruning, as `Kind/name: path`: the API server drops them without a word.
    pub pruned: Vec<String>,
    /// By resource id: who hears of each version of that kind committed.
    taps: Vec<(String, Tap)>,
}

impl Store {
    pub fn new(history_limit: usize) -> Self {
        Store {
            rv: 1,
            objects: BTreeMap::new(),
            labelled: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted_rv: 0,
            expired_before: 0,
            expire_next_watch: false,
            watch_epoch: 0,
            conflicts: Vec::new(),
            taps: Vec::new(),
            serial: 0,
            pruned: Vec::new(),
        }
    }

    pub fn get(&self, key: &Key) -> Option<&Arc<Stored>> {
        self.objects.get(key)
    }

    /// Objects of one resource in key order (namespace, then name), like etcd's. A range of the key order, not
    /// a scan of every object: with 20,000 pods stored, a list of Rollouts must not look at them.
    pub fn list<'a>(
        &'a self,
        res_id: &'a str,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<Stored>> + 'a {
        let from = (
            res_id.to_owned(),
            namespace.unwrap_or_default().to_owned(),
            String::new(),
        );
        self.objects
            .range(from..)
            .take_while(move |((id, ns, _), _)| id == res_id && namespace.is_none_or(|n| n == ns))
            .map(|(_, object)| object)
    }

    /// The objects of one resource (in one namespace, or in all) that `labels` and `fields` select, in key
    /// order. Within a namespace, a selector with a `key=value` requirement starts from the objects with that
    /// label.
    pub fn list_selected<'a>(
        &'a self,
        res_id: &'a str,
        namespace: Option<&'a str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> Vec<&'a Arc<Stored>> {
        let selected = |o: &&Arc<Stored>| labels.matches(o) && fields.matches(o);
        match (namespace, labels.an_equality()) {
            (Some(namespace), Some((key, value))) => {
                let (id, ns) = (res_id.to_owned(), namespace.to_owned());
                let label = (id.clone(), ns.clone(), key.to_owned(), value.to_owned());
                self.labelled
                    .get(&label)
                    .into_iter()
                    .flatten()
                    .filter_map(|name| self.objects.get(&(id.clone(), ns.clone(), name.clone())))
                    .filter(selected)
                    .collect()
            }
            _ => self.list(res_id, namespace).filter(selected).collect(),
        }
    }

    /// Changes committed after `rv`, oldest first. The history is in commit order, so the first one is
    /// found by bisection: every write wakes every watch, and scanning the whole window (10,000 changes by
    /// default) each time, under the store lock, slowed every call the daemon bench measures.
    pub fn changes_after(&self, rv: u64) -> impl Iterator<Item = &Change> {
        let first = self.history.partition_point(|c| c.rv <= rv);
        self.history.range(first..)
    }

    /// Compact at the current resourceVersion: new watches from older ones get 410 Expired, and so does the
    /// next watch from the current one.
    pub fn expire_history(&mut self) {
        self.expired_before = self.rv;
        self.expire_next_watch = true;
    }

    /// Whether a new watch from `rv` is refused with 410 Expired, and from which version on history is kept.
    pub fn refuse_watch_from(&mut self, rv: u64) -> Option<u64> {
        let oldest = self.compacted_rv.max(self.expired_before);
        let refused = rv < oldest || std::mem::take(&mut self.expire_next_watch);
        refused.then_some(oldest)
    }

    /// The next update or patch of this object fails with 409 Conflict, as if another writer won the race.
    pub fn conflict_next_write(&mut self, key: Key) {
        self.conflicts.push(key);
    }

    pub fn create(
        &mut self,
        res: &ResourceDef,
        namespace: &str,
        mut object: Value,
    ) -> Result<Arc<Stored>, ApiError> {
        let metadata = metadata_of(&mut object)
            .ok_or_else(|| ApiError::bad_request("the object has no metadata"))?;
        if metadata
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty())
        {
            // etcd's storage layer refuses this with a plain error, which kube-apiserver sends as a 500.
            return Err(ApiError::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let sent_namespace = metadata
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !sent_namespace.is_empty() && sent_namespace != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let name = match metadata
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            Some(name) => name.to_owned(),
            None => match metadata
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                Some(prefix) => {
                    self.serial += 1;
                    format!("{prefix}{}", random_suffix(self.serial))
                }
                None => {
                    return Err(ApiError::invalid(
                        res,
                        "",
                        "metadata.name: Required value: name or generateName is required",
                    ));
                }
            },
        };
        let key = (res.id(), namespace.to_owned(), name.clone());
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(res, &name));
        }
        self.serial += 1;
        let rv = self.rv + 1;
        metadata.insert("name".into(), json!(name));
        if res.namespaced {
            metadata.insert("namespace".into(), json!(namespace));
        }
        metadata.insert(
            "uid".into(),
            json!(format!("00000000-0000-4000-8000-{:012x}", self.serial)),
        );
        metadata.insert("creationTimestamp".into(), json!(now()));
        metadata.insert("resourceVersion".into(), json!(rv.to_string()));
        metadata.remove("deletionTimestamp");
        if res.keeps_generation() {
            metadata.insert("generation".into(), json!(1));
        }
        if res.status_subresource {
            // kube-apiserver drops status on create when the status subresource is enabled.
            object.as_object_mut().map(|o| o.remove("status"));
        }
        fill_type_meta(res, &mut object);
        normalize(res, &mut object);
        let pruned = admit(res, &name, Target::Main, &mut object, None)?;
        self.note_pruned(res, &name, pruned);
        Ok(self.commit(ChangeKind::Added, key, object))
    }

    /// HTTP PUT: the kind's rules for an absent object and a missing resourceVersion, then `update`. Returns
    /// the object and whether it was created.
    pub fn replace(
        &mut self,
        res: &ResourceDef,
        key: &Key,
        target: Target,
        mut candidate: Value,
    ) -> Result<(Arc<Stored>, bool), ApiError> {
        if !self.objects.contains_key(key) && res.create_on_update && target == Target::Main {
            set_meta(&mut candidate, "resourceVersion", Value::Null);
            set_meta(&mut candidate, "name", json!(key.2));
            return self.create(res, &key.1, candidate).map(|o| (o, true));
        }
        let sent_rv = candidate
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        if !res.unconditional_update
            && sent_rv.is_none_or(str::is_empty)
            && self.objects.contains_key(key)
        {
            let why =
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update";
            return Err(ApiError::invalid(res, &key.2, why));
        }
        self.update(res, key, target, candidate).map(|o| (o, false))
    }

    /// Whole-object write semantics shared by PUT, PATCH and the fixture: `candidate` is the object as the
    /// client wants it; a non-empty `metadata.resourceVersion` in it is a precondition.
    pub fn update(
        &mut self,
        res: &ResourceDef,
        key: &Key,
        target: Target,
        candidate: Value,
    ) -> Result<Arc<Stored>, ApiError> {
        let old = self
            .objects
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(res, &key.2))?;
        self.check_preconditions(res, key, &old, &candidate)?;
        let mut new = match target {
            Target::Status => with_status_of(&old, candidate),
            Target::Main => with_spec_of(res, &old, candidate)?,
        };
        let old_rv = old
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(Value::Null);
        set_meta(&mut new, "resourceVersion", old_rv);
        let pruned = admit(res, &key.2, target, &mut new, Some(&old))?;
        self.note_pruned(res, &key.2, pruned);
        // A status write takes everything but the status from the stored object: no spec change to look for.
        if res.keeps_generation() && target == Target::Main && !same_spec(res, &old, &new) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            set_meta(&mut new, "generation", json!(generation + 1));
        }
        let unchanged = match target {
            Target::Status => new.get("status") == old.get("status"),
            Target::Main => new == old.value,
        };
        if unchanged {
            // kube-apiserver does not bump resourceVersion or notify watches for a no-op write.
            return Ok(old);
        }
        let rv = self.rv + 1;
        set_meta(&mut new, "resourceVersion", json!(rv.to_string()));
        let finalized = new.pointer("/metadata/deletionTimestamp").is_some()
            && new
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty);
        if finalized {
            Ok(self.commit(ChangeKind::Deleted, key.clone(), new))
        } else {
            Ok(self.commit(ChangeKind::Modified, key.clone(), new))
        }
    }

    /// 409 Conflict for an injected conflict or a stale resourceVersion; 400 for a name or namespace other than
    /// the URL's.
    fn check_preconditions(
        &mut self,
        res: &ResourceDef,
        key: &Key,
        old: &Stored,
        candidate: &Value,
    ) -> Result<(), ApiError> {
        let conflict = || {
            ApiError::conflict(
                res,
                &key.2,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        };
        if let Some(at) = self.conflicts.iter().position(|k| k == key) {
            self.conflicts.remove(at);
            return Err(conflict());
        }
        let sent_rv = candidate
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !sent_rv.is_empty()
            && Some(sent_rv)
                != old
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
        {
            return Err(conflict());
        }
        for (field, expected) in [("name", &key.2), ("namespace", &key.1)] {
            let sent = candidate
                .pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !sent.is_empty() && sent != expected {
                return Err(ApiError::bad_request(format!(
                    "the {field} of the object ({sent}) does not match the {field} on the URL ({expected})"
                )));
            }
        }
        Ok(())
    }

    /// PATCH semantics. Returns the object and whether it was created (server-side apply of an absent object).
    pub fn patch(
        &mut self,
        res: &ResourceDef,
        key: &Key,
        target: Target,
        kind: PatchKind,
        patch: Value,
    ) -> Result<(Arc<Stored>, bool), ApiError> {
        let Some(current) = self.objects.get(key).cloned() else {
            if kind == PatchKind::Apply && target == Target::Main {
                let mut object = patch;
                set_meta(&mut object, "name", json!(key.2));
                return self.create(res, &key.1, object).map(|o| (o, true));
            }
            return Err(ApiError::not_found(res, &key.2));
        };
        let doc = match kind {
            PatchKind::Merge | PatchKind::Strategic | PatchKind::Apply => {
                // A status write keeps only the status of the patched object and the preconditions in its
                // metadata (see `update`): merging the rest would copy it to throw it away.
                let only = (target == Target::Status).then_some(&["metadata", "status"][..]);
                merge_patch(Some(&current), patch, only)
            }
            PatchKind::Json => {
                let ops: json_patch::Patch = serde_json::from_value(patch)
                    .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
                let mut doc = Value::clone(&current);
                json_patch::patch(&mut doc, &ops.0)
                    .map_err(|e| ApiError::invalid(res, &key.2, e.to_string()))?;
                doc
            }
        };
        self.update(res, key, target, doc).map(|o| (o, false))
    }

    /// DELETE, honouring `preconditions` (uid, resourceVersion) and finalizers.
    pub fn delete(
        &mut self,
        res: &ResourceDef,
        key: &Key,
        preconditions: &Value,
    ) -> Result<Deletion, ApiError> {
        let old = self
            .objects
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(res, &key.2))?;
        for (field, pointer) in [
            ("UID", "/metadata/uid"),
            ("ResourceVersion", "/metadata/resourceVersion"),
        ] {
            let wanted = preconditions
                .get(if field == "UID" {
                    "uid"
                } else {
                    "resourceVersion"
                })
                .and_then(Value::as_str);
            let actual = old
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default();
            if let Some(wanted) = wanted.filter(|w| *w != actual) {
                let why = format!(
                    "Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {actual}"
                );
                return Err(ApiError::conflict(res, &key.2, &why));
            }
        }
        let rv = self.rv + 1;
        let mut object = Value::clone(&old);
        set_meta(&mut object, "resourceVersion", json!(rv.to_string()));
        let has_finalizers = old
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if has_finalizers {
            if old.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Deletion::Pending(old));
            }
            set_meta(&mut object, "deletionTimestamp", json!(now()));
            let pending = self.commit(ChangeKind::Modified, key.clone(), object);
            return Ok(Deletion::Pending(pending));
        }
        Ok(Deletion::Gone(self.commit(
            ChangeKind::Deleted,
            key.clone(),
            object,
        )))
    }

    /// The fixture's back door: store `object` as given (status included), creating or replacing it, with fresh
    /// server-set metadata and a watch event, as if another client had written it.
    pub fn put_direct(
        &mut self,
        res: &ResourceDef,
        mut object: Value,
    ) -> Result<Arc<Stored>, ApiError> {
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let namespace = if res.namespaced {
            namespace
        } else {
            String::new()
        };
        let key = (res.id(), namespace.clone(), name.clone());
        set_meta(&mut object, "resourceVersion", Value::Null);
        let Some(old) = self.objects.get(&key).cloned() else {
            let status = object.get("status").cloned();
            let created = self.create(res, &namespace, object)?;
            return match status {
                Some(status) => self.update(res, &key, Target::Status, json!({ "status": status })),
                None => Ok(created),
            };
        };
        let with_status = object.get("status").cloned();
        let updated = self.update(res, &key, Target::Main, object)?;
        if res.status_subresource && with_status != old.get("status").cloned() {
            return self.update(res, &key, Target::Status, json!({ "status": with_status }));
        }
        Ok(updated)
    }

    fn note_pruned(&mut self, res: &ResourceDef, name: &str, paths: Vec<String>) {
        let kind = res.kind;
        self.pruned.extend(
            paths
                .into_iter()
                .map(|path| format!("{kind}/{name}: {path}")),
        );
    }

    /// Adds the object stored at `key` to the label index, or takes it out.
    fn index(&mut self, key: &Key, object: &Value, add: bool) {
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        for (label, value) in labels.into_iter().flatten() {
            let Some(value) = value.as_str() else {
                continue;
            };
            let entry = (
                key.0.clone(),
                key.1.clone(),
                label.clone(),
                value.to_owned(),
            );
            if add {
                self.labelled
                    .entry(entry)
                    .or_default()
                    .insert(key.2.clone());
            } else if let Some(names) = self.labelled.get_mut(&entry) {
                names.remove(&key.2);
                if names.is_empty() {
                    self.labelled.remove(&entry);
                }
            }
        }
    }

    /// Has `tap` called with every version of the kind `resource_id` committed from now on (deletions left
    /// out), under the store's lock, with when it was committed.
    pub fn tap(&mut self, resource_id: String, tap: Tap) {
        self.taps.push((resource_id, tap));
    }

    /// Records a write: the stored object (unless deleted) and the history share the returned one. The version
    /// it replaces becomes a past one in the history, and a modification's `previous`.
    fn commit(&mut self, kind: ChangeKind, key: Key, object: Value) -> Arc<Stored> {
        self.rv += 1;
        let object = Arc::new(Stored::new(object));
        let replaced = if kind == ChangeKind::Deleted {
            self.objects.remove(&key)
        } else {
            self.objects.insert(key.clone(), object.clone())
        };
        let past = replaced.map(|replaced| {
            self.index(&key, &replaced, false);
            self.keep_past(&replaced)
        });
        if kind != ChangeKind::Deleted {
            self.index(&key, &object, true);
        }
        let at = jiff::Timestamp::now();
        if kind != ChangeKind::Deleted {
            for (_, tap) in self.taps.iter_mut().filter(|(id, _)| *id == key.0) {
                tap(at, &object);
            }
        }
        self.history.push_back(Change {
            rv: self.rv,
            kind,
            key,
            previous: past.filter(|_| kind == ChangeKind::Modified),
            object: object.clone(),
            at,
        });
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted_rv = dropped.rv;
            }
        }
        object
    }

    /// `replaced` as a past version ([`Stored::past`]), put in its place in the history when it is still there.
    fn keep_past(&mut self, replaced: &Stored) -> Arc<Stored> {
        let past = Arc::new(replaced.past());
        let rv = replaced
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|rv| rv.parse::<u64>().ok());
        let at = rv.map(|rv| self.history.partition_point(|c| c.rv < rv));
        if let Some(change) = at.and_then(|at| self.history.get_mut(at))
            && Some(change.rv) == rv
        {
            change.object = past.clone();
        }
        past
    }
}
