//! `--rollout-threads`: at most that many Rollout reconciles in flight at once. Each reconcile begins by
//! reading its Rollout; the fake API server holds the first reads a while, so with one thread the next read
//! cannot arrive before the held one is answered, and with a thread per Rollout they all arrive together.

use std::time::Duration;

use canaryd::api::Rollout;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use serde_json::json;

const ROLLOUTS: usize = 3;
const HELD: Duration = Duration::from_secs(1);

/// When the first read of each Rollout by name arrived, in order, with `threads` reconciles at most in flight.
async fn first_reads(threads: usize) -> Vec<jiff::Timestamp> {
    let (server, client, _prom) = harness::cluster(CrdSet::Canaryd, Answer::Scalar(1.0)).await;
    let _rsc = server.replica_set_controller(POD_START);
    for i in 0..ROLLOUTS {
        let name = format!("r{i}");
        create_service_of(&client, &format!("{name}-canary"), &name).await;
        create_service_of(&client, &format!("{name}-stable"), &name).await;
        create_rollout(&client, &named(&name, 1, "web:1", json!([]))).await;
    }
    let reads = RequestPattern::new("GET", "/rollouts/r");
    server.delay_next(reads.clone(), ROLLOUTS, HELD);
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
    arrivals(&server, &reads)
}

fn arrivals(server: &FakeApiServer, reads: &RequestPattern) -> Vec<jiff::Timestamp> {
    let mut seen = Vec::new();
    server.each_request(|r| {
        if reads.matches(r) && !seen.iter().any(|(path, _)| *path == r.path) {
            seen.push((r.path.clone(), r.at));
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
    let at = first_reads(1).await;
    assert_eq!(at.len(), ROLLOUTS, "{at:?}");
    for gap in spread(&at) {
        assert!(gap >= HELD, "a read arrived while another was held: {at:?}");
    }
}

#[tokio::test]
async fn a_thread_per_rollout_reconciles_them_together() {
    let at = first_reads(ROLLOUTS).await;
    assert_eq!(at.len(), ROLLOUTS, "{at:?}");
    let all: Duration = spread(&at).into_iter().sum();
    assert!(all < HELD, "the reads waited for each other: {at:?}");
}
