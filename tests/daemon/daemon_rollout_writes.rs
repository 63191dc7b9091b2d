//! How many API writes `canaryd run --rollouts` makes to take one update of a Rollout through its steps,
//! counted by the fake API server, so the figure cannot grow unnoticed, and that the status holding back a
//! change of the counts alone (`engine::rollout::status_write`) still ends with the final counts. Everything
//! else about the same update (status, Events, counts) is tests/daemon/daemon_rollouts.rs'.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use canaryd::api::Rollout;
use canaryd::api::rollout::RolloutStatus;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::rollout::writes::{Tally, rollout_writes};
use canaryd_testkit::{router_objects, with_each_crd_set};
use serde_json::json;

/// The steps of `rollout::cluster::rollout`.
const STEPS: usize = 4;

/// API writes per step per Rollout one update may take: measured 21 for the 4 steps (5.25), 8 of them status
/// writes, since the plans after a plan's writes that change only the status join its status write and a run
/// of status-only plans may end with the plan with writes after it; 23 (5.75) before that, with 10 status
/// writes, 26-27 before the `Available` condition waited with the counts, 30 (7.5) before a change of the
/// counts alone was held back. One write of slack for timing.
const WRITES_PER_STEP: f64 = 5.5;

/// The same behind a router (4 router writes, the old ReplicaSet's deadline annotation): measured 24 (6.0), 10
/// of them status writes; 26 (6.5), 12 of them status writes, before. One write of slack for timing.
const ROUTED_WRITES_PER_STEP: f64 = 6.25;

/// Who the test's own write (the image update) is from, so it is not counted as the daemon's.
const FIELD_MANAGER: &str = "canaryd-test";

/// The image update, sent as a user would with `kubectl`.
async fn update(client: &kube::Client) {
    let params = kube::api::PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    };
    set_image_of(client, "web", "web:2", &params).await;
}

/// The daemon's writes since request `from`, printed by kind; per step.
fn writes_per_step(server: &FakeApiServer, from: usize, from_rv: u64) -> f64 {
    let requests: Vec<_> = server.requests()[from..]
        .iter()
        .filter(|r| !r.query.contains(&format!("fieldManager={FIELD_MANAGER}")))
        .cloned()
        .collect();
    let writes = rollout_writes(&requests);
    let total: usize = writes.values().sum();
    let per_step = total as f64 / STEPS as f64;
    let tally = Tally::from_history(server, from_rv);
    println!(
        "{total} writes for {STEPS} steps ({per_step:.2} per step): {:?}",
        tally.writes_by_kind(&writes)
    );
    for (fields, writes) in tally.status_changes() {
        println!("  {writes} status write(s) changing {fields}");
    }
    per_step
}

async fn an_update_through_its_steps_takes_few_api_writes_per_step(crds: CrdSet) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "1s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    // The first deploy's last writes may still be on their way: start counting when they have settled.
    eventually(WAIT, "the first deploy's Services", || async {
        let s = status(&server);
        (service_hash(&server, "web-stable") == s.stable_rs).then_some(())
    })
    .await;
    // Counted from before the update: the daemon's first writes may come before the update's answer.
    let (from, from_rv) = (server.requests().len(), server.resource_version());
    update(&client).await;
    let done = until(&server, "the promotion", |s| {
        s.stable_rs != first.stable_rs
            && healthy_at(s, Some(&s.current_pod_hash))
            && condition(s, "Healthy").0 == "True"
    })
    .await;
    eventually(WAIT, "the stable Service switched", || async {
        (service_hash(&server, "web-stable") == done.current_pod_hash).then_some(())
    })
    .await;
    daemon.stop().await;
    let per_step = writes_per_step(&server, from, from_rv);
    assert!(per_step <= WRITES_PER_STEP, "{per_step:.2} writes per step");
}

with_each_crd_set!(an_update_through_its_steps_takes_few_api_writes_per_step);

/// Behind a router the old ReplicaSet keeps its pods for `scaleDownDelaySeconds` (2 s here) after the
/// promotion, so the last change the Rollout sees is its pods going, a change of the counts alone: the status
/// ends with them. (Whether it is held back here depends on timing: this test passes without the wake-up too;
/// the wake-up for counts held back is tests/engine/rollout_act.rs'.)
async fn the_counts_after_the_old_pods_go_are_written_in_the_end(crds: CrdSet) {
    let mut rollout = routed_through(
        rollout("web:1", "1s"),
        json!({"istio": {"virtualService": {"name": "web-vsvc"}}}),
    );
    if let Some(canary) = rollout
        .spec
        .strategy
        .as_mut()
        .and_then(|s| s.canary.as_mut())
    {
        canary.scale_down_delay_seconds = Some(2);
    }
    let (server, client, _prom, _rsc) = deployed_with(crds, Answer::Scalar(1.0), &rollout).await;
    server.put(&router_objects::virtual_service(
        "default", "web-vsvc", "web",
    ));
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    // Counted from before the update: the daemon's first writes may come before the update's answer.
    let (from, from_rv) = (server.requests().len(), server.resource_version());
    update(&client).await;
    let promoted = |s: &RolloutStatus| {
        s.stable_rs != first.stable_rs && healthy_at(s, Some(&s.current_pod_hash))
    };
    until(&server, "the promotion", promoted).await;
    // The first promoted status as committed: a look may come after the 2 s delay has passed.
    let mut first_promoted = None;
    server.versions_after::<Rollout>(from_rv, |_, r| {
        let status = serde_json::from_value::<RolloutStatus>(r["status"].clone()).ok();
        if first_promoted.is_none() {
            first_promoted = status.filter(promoted);
        }
    });
    let first_promoted = first_promoted.expect("a promoted status");
    assert_eq!(
        first_promoted.replicas, 10,
        "the old pods wait out their delay"
    );
    eventually(WAIT, "the old ReplicaSet's pods gone", || async {
        let old = server.get::<k8s_openapi::api::apps::v1::ReplicaSet>(
            "default",
            &format!("web-{}", first.stable_rs),
        )?;
        (old.status?.replicas == 0).then_some(())
    })
    .await;
    let last = until(&server, "the final counts", |s| s.replicas == 5).await;
    daemon.stop().await;
    assert_eq!(
        (
            last.replicas,
            last.updated_replicas,
            last.ready_replicas,
            last.available_replicas
        ),
        (5, 5, 5, 5)
    );
    assert_eq!(last.phase, "Healthy");
    let per_step = writes_per_step(&server, from, from_rv);
    assert!(
        per_step <= ROUTED_WRITES_PER_STEP,
        "{per_step:.2} writes per step"
    );
}

with_each_crd_set!(the_counts_after_the_old_pods_go_are_written_in_the_end);
