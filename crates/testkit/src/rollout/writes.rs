//! What the Rollout controller wrote, counted: its requests by method and kind, and what each committed
//! version of a Rollout's status and of a ReplicaSet changed. The daemon test of writes per step feeds the
//! versions from the fake API server's change history ([`Tally::from_history`]); the rollouts bench, whose
//! thousands of objects' versions the history cannot keep, feeds them as they are committed
//! (`FakeApiServer::on_commit`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use canaryd::api::Rollout;
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::Value;

use crate::fake_apiserver::{FakeApiServer, RecordedRequest};

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
    /// Each ReplicaSet's last `spec.replicas` and metadata (without resourceVersion and managedFields).
    last_replica_set: HashMap<String, (Value, Value)>,
    /// Each Rollout's last status.
    last_status: HashMap<String, Value>,
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
    /// not), an annotate when only its metadata did; the simulated ReplicaSet controller's status updates
    /// change neither.
    pub fn replica_set(&mut self, rs: &Value, counted: bool) {
        let name = rs["metadata"]["name"].as_str().unwrap_or_default();
        let mut metadata = rs["metadata"].clone();
        if let Some(m) = metadata.as_object_mut() {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        let seen = (rs["spec"]["replicas"].clone(), metadata);
        if let Some(before) = self.last_replica_set.get(name).filter(|_| counted) {
            let kind = if before.0 != seen.0 {
                Some("replicaset_scale")
            } else {
                (before.1 != seen.1).then_some("replicaset_annotate")
            };
            if let Some(kind) = kind {
                *self.replica_sets.entry(kind).or_default() += 1;
            }
        }
        self.last_replica_set.insert(name.to_string(), seen);
    }

    /// A committed version of a Rollout: counted by the status fields it changed, if any.
    pub fn rollout(&mut self, rollout: &Value, counted: bool) {
        let name = rollout["metadata"]["name"].as_str().unwrap_or_default();
        let status = &rollout["status"];
        if let Some(before) = self.last_status.get(name).filter(|_| counted) {
            let mut fields = Vec::new();
            changed_fields("", before, status, &mut fields);
            if !fields.is_empty() {
                *self.status.entry(fields.join(",")).or_default() += 1;
            }
        }
        self.last_status.insert(name.to_string(), status.clone());
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
                "PUT virtualservices" | "PATCH virtualservices" => "router",
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

fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The paths under `path` where `before` and `after` differ: objects by key, conditions by type, other arrays
/// whole.
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
                if key == "conditions" {
                    let by_type = |v: &Value| -> BTreeMap<String, Value> {
                        v.as_array()
                            .into_iter()
                            .flatten()
                            .map(|c| {
                                (
                                    c["type"].as_str().unwrap_or_default().to_string(),
                                    c.clone(),
                                )
                            })
                            .collect()
                    };
                    let (b, a) = (by_type(b), by_type(a));
                    let types: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
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
