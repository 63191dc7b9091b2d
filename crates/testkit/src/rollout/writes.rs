//! What the Rollout controller wrote, counted: its requests by method and kind, and what each committed
//! version of a Rollout's status and of a ReplicaSet changed. The daemon test of writes per step feeds the
//! versions from the fake API server's change history ([`Tally::from_history`]); the rollouts bench, whose
//! thousands of objects' versions the history cannot keep, feeds them as they are committed
//! (`FakeApiServer::on_commit`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use canaryd::api::Rollout;
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::Value;

use crate::fake_apiserver::{FakeApiServer, RecordedRequest, Stored};

/// The kind of write the Rollout controller made with `request` (`PATCH rollouts/status`, `POST replicasets`,
/// `PATCH virtualservices`, ...), or none for a read or a write that is not the Rollout controller's: the
/// AnalysisRun controller's run status writes, Events and leases, so of AnalysisRuns only creates count.
pub fn rollout_write(request: &RecordedRequest) -> Option<String> {
    if request.method == "GET" {
        return None;
    }
    let kind = [
        "rollouts",
        "replicasets",
        "services",
        "analysisruns",
        "virtualservices",
        "ingresses",
    ]
    .into_iter()
    .find(|k| {
        request.path.contains(&format!("/{k}/")) || request.path.ends_with(&format!("/{k}"))
    })?;
    if kind == "analysisruns" && request.method != "POST" {
        return None;
    }
    let what = if request.path.ends_with("/status") {
        format!("{kind}/status")
    } else {
        kind.to_string()
    };
    Some(format!("{} {what}", request.method))
}

/// The writes the Rollout controller made among `requests`, counted by [`rollout_write`]'s kind.
pub fn rollout_writes<'a>(
    requests: impl IntoIterator<Item = &'a RecordedRequest>,
) -> BTreeMap<String, usize> {
    let mut writes = BTreeMap::new();
    for what in requests.into_iter().filter_map(rollout_write) {
        *writes.entry(what).or_default() += 1;
    }
    writes
}

/// What the committed versions of Rollouts and ReplicaSets changed, each version against the one before it of
/// the same object; only versions marked counted are counted, the others are what the next one is compared to.
#[derive(Debug, Default)]
pub struct Tally {
    /// `replicaset_scale` and `replicaset_annotate` versions.
    replica_sets: BTreeMap<&'static str, usize>,
    /// Rollout status versions by the fields they changed.
    status: BTreeMap<String, usize>,
    /// Each ReplicaSet's and each Rollout's last version, shared with the store (which holds it until the
    /// next one), by kind and name: the bench's tally copies nothing of the versions it compares.
    last: HashMap<(&'static str, String), Arc<Stored>>,
}

impl Tally {
    /// The versions of Rollouts and ReplicaSets in `server`'s change history, counting those committed after
    /// resourceVersion `from_rv`: the history must keep every version since then.
    pub fn from_history(server: &FakeApiServer, from_rv: u64) -> Tally {
        let mut tally = Tally::default();
        let counted = |object: &Value| resource_version(object) > from_rv;
        server.versions_after::<ReplicaSet>(0, |_, rs| tally.replica_set(rs, counted(rs)));
        server.versions_after::<Rollout>(0, |_, r| tally.rollout(r, counted(r)));
        tally
    }

    /// A committed version of a ReplicaSet: a scale when its `spec.replicas` changed (its metadata with it or
    /// not), an annotate when only its metadata did (resourceVersion and managedFields aside); the simulated
    /// ReplicaSet controller's status updates change neither.
    pub fn replica_set(&mut self, rs: &Arc<Stored>, counted: bool) {
        let name = rs["metadata"]["name"].as_str().unwrap_or_default();
        let key = ("ReplicaSet", name.to_string());
        if let Some(before) = self.last.get(&key).filter(|_| counted) {
            let kind = if before["spec"]["replicas"] != rs["spec"]["replicas"] {
                Some("replicaset_scale")
            } else {
                (!same_metadata(&before["metadata"], &rs["metadata"]))
                    .then_some("replicaset_annotate")
            };
            if let Some(kind) = kind {
                *self.replica_sets.entry(kind).or_default() += 1;
            }
        }
        self.last.insert(key, rs.clone());
    }

    /// A committed version of a Rollout: counted by the status fields it changed, if any.
    pub fn rollout(&mut self, rollout: &Arc<Stored>, counted: bool) {
        let name = rollout["metadata"]["name"].as_str().unwrap_or_default();
        let key = ("Rollout", name.to_string());
        if let Some(before) = self.last.get(&key).filter(|_| counted) {
            let mut fields = Vec::new();
            changed_fields("", &before["status"], &rollout["status"], &mut fields);
            if !fields.is_empty() {
                *self.status.entry(fields.join(",")).or_default() += 1;
            }
        }
        self.last.insert(key, rollout.clone());
    }

    /// The Rollout controller's `writes` ([`rollout_writes`], of the same span as the counted versions) by
    /// kind: `rollout_status`, `rollout_spec_metadata`, `replicaset_create`, `replicaset_scale`,
    /// `replicaset_annotate`, `replicaset_unchanged` (a ReplicaSet patch that made neither change), `service`,
    /// `router` and `analysisrun_create`.
    pub fn writes_by_kind(
        &self,
        writes: &BTreeMap<String, usize>,
    ) -> BTreeMap<&'static str, usize> {
        let mut by_kind: BTreeMap<&'static str, usize> = BTreeMap::new();
        for (what, count) in writes {
            let kind = match what.as_str() {
                "PATCH rollouts/status" => "rollout_status",
                "PATCH rollouts" => "rollout_spec_metadata",
                "POST replicasets" => "replicaset_create",
                "PATCH replicasets" => "replicaset_unchanged",
                "PATCH services" => "service",
                "POST analysisruns" => "analysisrun_create",
                "PUT virtualservices"
                | "PATCH virtualservices"
                | "PUT ingresses"
                | "PATCH ingresses" => "router",
                _ => "other",
            };
            *by_kind.entry(kind).or_default() += count;
        }
        for (kind, count) in &self.replica_sets {
            *by_kind.entry(kind).or_default() += count;
            if let Some(patches) = by_kind.get_mut("replicaset_unchanged") {
                *patches = patches.saturating_sub(*count);
            }
        }
        by_kind
    }

    /// The counted Rollout status versions by the fields they changed: each key lists them, comma-separated,
    /// as `status` paths (`phase`, `canary.weights`, `conditions[Progressing].lastUpdateTime`, …; a condition
    /// added or removed is `conditions[Type]`); versions whose status did not change (spec or metadata writes)
    /// are left out.
    pub fn status_changes(&self) -> &BTreeMap<String, usize> {
        &self.status
    }
}

/// The conditions in `conditions` by type.
fn by_type(conditions: &Value) -> BTreeMap<&str, &Value> {
    let conditions = conditions.as_array().into_iter().flatten();
    conditions
        .map(|c| (c["type"].as_str().unwrap_or_default(), c))
        .collect()
}

/// Whether two versions' metadata are the same but for their resourceVersion and managedFields (serde_json's
/// maps iterate in key order).
fn same_metadata(before: &Value, after: &Value) -> bool {
    fn kept(m: &Value) -> impl Iterator<Item = (&String, &Value)> {
        let fields = m.as_object().into_iter().flatten();
        fields.filter(|(k, _)| !matches!(k.as_str(), "resourceVersion" | "managedFields"))
    }
    kept(before).eq(kept(after))
}

fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The paths under `path` where `before` and `after` differ: objects by key, conditions by type, other arrays
/// whole. Only the parts that differ are looked into, and nothing is copied.
fn changed_fields(path: &str, before: &Value, after: &Value, fields: &mut Vec<String>) {
    let at = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match (before, after) {
        _ if before == after => {}
        (Value::Object(b), Value::Object(a)) => {
            let keys: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for key in keys {
                let (b, a) = (
                    b.get(key).unwrap_or(&Value::Null),
                    a.get(key).unwrap_or(&Value::Null),
                );
                if b == a {
                    continue;
                }
                if key == "conditions" {
                    let (b, a) = (by_type(b), by_type(a));
                    let types: BTreeSet<&str> = b.keys().chain(a.keys()).copied().collect();
                    for t in types {
                        match (b.get(t), a.get(t)) {
                            (Some(b), Some(a)) => {
                                changed_fields(&at(&format!("conditions[{t}]")), b, a, fields);
                            }
                            _ => fields.push(at(&format!("conditions[{t}]"))),
                        }
                    }
                } else {
                    changed_fields(&at(key), b, a, fields);
                }
            }
        }
        _ => fields.push(path.to_string()),
    }
}
