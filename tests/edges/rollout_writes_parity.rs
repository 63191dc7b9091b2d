//! Each Rollout write means one thing wherever it is made: the same plans, made by the API edge against the fake
//! API server (`k8s::rollout_writes::apply`, the daemon's requests) and by the engine's in-memory cluster (the
//! rehearsal's), leave the same annotations, labels, counts, selectors and pod-template metadata on every object
//! they touch. The planner runs on memory; every plan's writes are then sent to the server, one fresh read
//! before each, as the daemon sends them.

use std::collections::BTreeMap;

use canaryd::api::Rollout;
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd::engine::rollout::{Plan, Write};
use canaryd::k8s::rollout_writes::{apply, read};
use canaryd_testkit::fake_apiserver::FakeApiServer;
use canaryd_testkit::rollout::memory::{at, rollout, set_image};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::PostParams;
use serde::Serialize;
use serde_json::{Value, json};

/// The fields a Rollout write may touch, with what the API server fills in by itself (and empty maps, which it
/// drops) left out.
fn touched<T: Serialize>(object: &T) -> Value {
    let v = serde_json::to_value(object).expect("objects serialize");
    let mut out = json!({
        "annotations": v["metadata"]["annotations"],
        "labels": v["metadata"]["labels"],
        "replicas": v["spec"]["replicas"],
        "minReadySeconds": v["spec"]["minReadySeconds"],
        "selector": v["spec"]["selector"],
        "podMetadata": v["spec"]["template"]["metadata"],
        "terminate": v["spec"]["terminate"],
    });
    strip(&mut out);
    out
}

/// Drops nulls and empty objects, recursively.
fn strip(v: &mut Value) {
    if let Value::Object(map) = v {
        for value in map.values_mut() {
            strip(value);
        }
        map.retain(|_, value| {
            !(value.is_null() || value.as_object().is_some_and(serde_json::Map::is_empty))
        });
    }
}

fn by_name<T: Serialize>(objects: &[T]) -> BTreeMap<String, Value> {
    objects
        .iter()
        .map(|o| {
            let v = serde_json::to_value(o).expect("objects serialize");
            let name = v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (name, touched(o))
        })
        .collect()
}

/// The Rollout on the server and memory alike, with its Services.
struct Both {
    memory: MemoryCluster,
    client: kube::Client,
    server: FakeApiServer,
    /// Every kind of write the plans made, by name.
    made: BTreeMap<&'static str, usize>,
}

fn kind_of(write: &Write) -> &'static str {
    match write {
        Write::RolloutRevision { .. } => "RolloutRevision",
        Write::CreateReplicaSet(_) => "CreateReplicaSet",
        Write::ReviseReplicaSet { .. } => "ReviseReplicaSet",
        Write::ScaleReplicaSet { .. } => "ScaleReplicaSet",
        Write::SwitchService { .. } => "SwitchService",
        Write::CreateAnalysisRun(_) => "CreateAnalysisRun",
        Write::TerminateAnalysisRun { .. } => "TerminateAnalysisRun",
        Write::DeleteReplicaSet { .. } => "DeleteReplicaSet",
        Write::SyncPodMetadata { .. } => "SyncPodMetadata",
        Write::RelabelPod { .. } => "RelabelPod",
        Write::RolloutReplicas { .. } => "RolloutReplicas",
        Write::EvictPod { .. } => "EvictPod",
        Write::DeleteAnalysisRun { .. } => "DeleteAnalysisRun",
        Write::AnnotateReplicaSet { .. } => "AnnotateReplicaSet",
    }
}

impl Both {
    async fn new(rollout: Rollout) -> Both {
        let server = FakeApiServer::start().await;
        let client = server.client().await;
        let rollouts: Api<Rollout> = Api::namespaced(client.clone(), "prod");
        let created = rollouts
            .create(&PostParams::default(), &rollout)
            .await
            .expect("the Rollout is created");
        let mut memory = MemoryCluster::new(created);
        let services: Api<Service> = Api::namespaced(client.clone(), "prod");
        for name in ["web-canary", "web-stable"] {
            let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
            memory.add_service(name, selector.clone());
            let mut service = memory.services.last().cloned().expect("just added");
            service.metadata.namespace = Some("prod".to_string());
            service.spec.get_or_insert_with(Default::default).ports = Some(vec![
                serde_json::from_value(json!({"port": 80})).expect("a port"),
            ]);
            services
                .create(&PostParams::default(), &service)
                .await
                .expect("the Service is created");
        }
        Both {
            memory,
            client,
            server,
            made: BTreeMap::new(),
        }
    }

    /// The plan's writes, each sent to the server after a fresh read, as the daemon sends them.
    async fn send(&mut self, plan: &Plan, now: Timestamp) {
        let rollouts: Api<Rollout> = Api::namespaced(self.client.clone(), "prod");
        for write in &plan.writes {
            *self.made.entry(kind_of(write)).or_default() += 1;
            let mut rollout = self.memory.rollout.clone();
            let on_server = rollouts.get("web").await.expect("the Rollout is there");
            rollout.metadata.resource_version = on_server.metadata.resource_version.clone();
            let mut rv = rollout
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default();
            let seen = read(&self.client, rollout.into(), now)
                .await
                .expect("the read");
            apply(&self.client, &self.client, &mut rv, &seen, write)
                .await
                .unwrap_or_else(|e| panic!("{write:?} was refused: {e}"));
        }
    }

    /// Reconciles at `now` on memory, every pod becoming available, until nothing changes; each plan's writes
    /// also go to the server, and the objects are compared after each.
    async fn settle(&mut self, now: Timestamp) {
        for _ in 0..30 {
            let became_available = self.memory.make_available();
            let before = self.memory.rollout.status.clone();
            let plan = self.memory.reconcile(now);
            self.send(&plan, now).await;
            self.compare(&plan);
            if plan.writes.is_empty() && self.memory.rollout.status == before && !became_available {
                return;
            }
        }
        panic!("the planner did not settle");
    }

    fn compare(&self, plan: &Plan) {
        let on_server = self.server.list::<ReplicaSet>("prod");
        assert_eq!(
            by_name(&on_server),
            by_name(&self.memory.replica_sets),
            "ReplicaSets after {:?}",
            plan.writes
        );
        let services = self.server.list::<Service>("prod");
        assert_eq!(
            by_name(&services),
            by_name(&self.memory.services),
            "Services after {:?}",
            plan.writes
        );
        let rollout = self
            .server
            .get::<Rollout>("prod", "web")
            .expect("the Rollout");
        assert_eq!(
            touched(&rollout)["annotations"],
            touched(&self.memory.rollout)["annotations"],
            "the Rollout's annotations after {:?}",
            plan.writes
        );
    }
}

#[tokio::test]
async fn the_same_plans_leave_the_same_objects_through_the_api_server_and_in_memory() {
    let mut web = rollout(
        4,
        json!({
            "canaryService": "web-canary", "stableService": "web-stable",
            "canaryMetadata": {"labels": {"role": "canary"}, "annotations": {"tier": "new"}},
            "stableMetadata": {"labels": {"role": "stable"}},
            "steps": [{"setWeight": 50}, {"pause": {}}],
        }),
    );
    web.spec.revision_history_limit = Some(1);
    let mut both = Both::new(web).await;
    both.settle(at(0)).await;
    for (i, image) in ["web:2", "web:3"].into_iter().enumerate() {
        let t = at(600 * (i as i64 + 1));
        set_image(&mut both.memory, image);
        both.settle(t).await;
        // The running canary follows the Rollout's minReadySeconds (Argo's syncReplicaSetRevision).
        both.memory
            .edit_spec(|s| s.min_ready_seconds = Some(5 + i as i32));
        both.settle(t).await;
        both.memory.patch_status(|s| s.promote_full = true);
        both.settle(t).await;
    }
    // The scenario reaches every write of a canary Rollout without a router or an analysis.
    for kind in [
        "RolloutRevision",
        "CreateReplicaSet",
        "ScaleReplicaSet",
        "SwitchService",
        "SyncPodMetadata",
        "ReviseReplicaSet",
        "DeleteReplicaSet",
    ] {
        assert!(
            both.made.contains_key(kind),
            "no {kind} was made: {:?}",
            both.made
        );
    }
}
