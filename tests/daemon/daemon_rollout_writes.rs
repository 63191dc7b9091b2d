//! How many API writes `canaryd run --rollouts` makes to take one update of a Rollout through its steps,
//! counted by the fake API server, so the figure cannot grow unnoticed. Everything else about the same update
//! (status, Events, counts) is tests/daemon/daemon_rollouts.rs'.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use canaryd_testkit::fake_apiserver::CrdSet;
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;

/// The steps of `rollout::cluster::rollout`.
const STEPS: usize = 4;

/// API writes per step per Rollout one update may take, as measured (30 for the 4 steps: 17 status, 8
/// ReplicaSet, 2 Service, 1 revision, 2 creates). The target is 3: most status writes follow the
/// ReplicaSets' counts as their pods come up (one per change seen), which only the planner can thin out.
const WRITES_PER_STEP: f64 = 7.5;

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
    set_image(&client, "web:2").await;
    let from = server.requests().len();
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
    let writes = rollout_writes(&server.requests()[from..]);
    let total: usize = writes.values().sum();
    let per_step = total as f64 / STEPS as f64;
    println!("{total} writes for {STEPS} steps ({per_step:.2} per step): {writes:?}");
    assert!(
        per_step <= WRITES_PER_STEP,
        "{per_step:.2} writes per step: {writes:?}"
    );
}

with_each_crd_set!(an_update_through_its_steps_takes_few_api_writes_per_step);
