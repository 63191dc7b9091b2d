//! `--rollout-threads`: at most that many Rollout reconciles in flight at once. The first reconcile of a new
//! Rollout writes to it (its revision, its status); the fake API server holds the first such write a while, so
//! with one thread the next Rollout's cannot arrive before the held one is answered, and with a thread per
//! Rollout they all arrive together. (Reads may come from the watch caches: only writes are sure to be sent.)

use std::time::Duration;

use canaryd::api::Rollout;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use serde_json::json;

const ROLLOUTS: usize = 3;
const HELD: Duration = Duration::from_secs(1);

/// When the first write to each Rollout arrived, in order, with `threads` reconciles at most in flight.
async fn first_writes(threads: usize) -> Vec<jiff::Timestamp> {
    let (server, client, _prom) = harness::cluster(CrdSet::Canaryd, Answer::Scalar(1.0)).await;
    let _rsc = server.replica_set_controller(POD_START);
    for i in 0..ROLLOUTS {
        let name = format!("r{i}");
        create_service_of(&client, &format!("{name}-canary"), &name).await;
        create_service_of(&client, &format!("{name}-stable"), &name).await;
        create_rollout(&client, &named(&name, 1, "web:1", json!([]))).await;
    }
    let writes = RequestPattern::new("PATCH", "/rollouts/r");
    server.delay_next(writes.clone(), ROLLOUTS, HELD);
    let daemon = harness::spawn(
        client.clone(),
        canaryd::controller::Config {
            rollout_threads: threads,
            ..config()
        },
    )
    .await;
    eventually(WAIT, "every Rollout reconciled", || async {
        let reconciled = |r: &serde_json::Value| r.get("status").is_some();
        (server.count::<Rollout>("default", reconciled) == ROLLOUTS).then_some(())
    })
    .await;
    daemon.stop().await;
    arrivals(&server, &writes)
}

/// When the first request `writes` selects arrived for each Rollout, in order.
fn arrivals(server: &FakeApiServer, writes: &RequestPattern) -> Vec<jiff::Timestamp> {
    let rollout = |path: &str| {
        path.split("/rollouts/")
            .nth(1)
            .map(|rest| rest.split('/').next().map(str::to_string))
    };
    let mut seen = Vec::new();
    server.each_request(|r| {
        let name = rollout(&r.path).flatten();
        if writes.matches(r) && !seen.iter().any(|(n, _)| *n == name) {
            seen.push((name, r.at));
        }
    });
    seen.into_iter().map(|(_, at)| at).collect()
}

fn spread(at: &[jiff::Timestamp]) -> Vec<Duration> {
    at.windows(2)
        .map(|w| Duration::try_from(w[1].duration_since(w[0])).unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn one_thread_reconciles_one_rollout_at_a_time() {
    let at = first_writes(1).await;
    assert_eq!(at.len(), ROLLOUTS, "{at:?}");
    for gap in spread(&at) {
        assert!(
            gap >= HELD,
            "a write arrived while another was held: {at:?}"
        );
    }
}

#[tokio::test]
async fn a_thread_per_rollout_reconciles_them_together() {
    let at = first_writes(ROLLOUTS).await;
    assert_eq!(at.len(), ROLLOUTS, "{at:?}");
    let all: Duration = spread(&at).into_iter().sum();
    assert!(all < HELD, "the writes waited for each other: {at:?}");
}
