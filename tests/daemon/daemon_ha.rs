//! `canaryd run` killed and restarted, and two daemons electing a leader on a Lease: a run finishes with
//! exactly its measurements, none lost, none repeated, each taken when the stored status said it was due.

#![allow(clippy::disallowed_methods)] // Not the Clock: fail-over is timed on real time against real sockets.

use std::time::Duration;

use canaryd::api::{AnalysisPhase, AnalysisRun, MetricResult};
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use canaryd_testkit::harness::{self, Answer, create, eventually, first_result, run};
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(40);

async fn measured_at_least(server: &FakeApiServer, name: &str, n: i32) {
    eventually(WAIT, &format!("{n} measurements of {name}"), || async {
        let r = server.get::<AnalysisRun>("default", name)?;
        (first_result(&r)?.count >= n).then_some(())
    })
    .await;
}

/// Every measurement started no earlier than the previous one finished plus the interval (none early, none
/// twice) and all are distinct.
fn assert_exactly_scheduled(r: &MetricResult, count: usize) {
    assert_eq!(r.measurements.len(), count, "{r:?}");
    assert_eq!(r.count as usize, count, "{r:?}");
    assert_eq!(r.successful as usize, count, "{r:?}");
    for pair in r.measurements.windows(2) {
        let (Some(prev), Some(next)) = (pair[0].finished_at.as_ref(), pair[1].started_at.as_ref())
        else {
            panic!("timestamps missing: {r:?}");
        };
        assert!(
            next.0.duration_since(prev.0) >= jiff::SignedDuration::from_secs(1),
            "measured before it was due: {r:?}"
        );
    }
}

async fn a_daemon_killed_mid_run_and_restarted_neither_loses_nor_repeats_a_measurement(
    crds: CrdSet,
) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    create(
        &client,
        &run(
            "restart",
            &prom.uri(),
            json!({"interval": "1s", "count": 5, "successCondition": "result == 1"}),
        ),
    )
    .await;
    let first = harness::spawn(client.clone(), harness::config()).await;
    measured_at_least(&server, "restart", 2).await;
    first.kill().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Read once the killed daemon's last write, which may still be on its way, has landed.
    let at_kill = first_result(&server.get("default", "restart").expect("stored"))
        .expect("a result")
        .count;
    let second = harness::spawn(client.clone(), harness::config()).await;
    let done = harness::finished(&server, "restart", WAIT).await;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.phase),
        Some(AnalysisPhase::Successful)
    );
    let r = first_result(&done).expect("a result");
    assert_exactly_scheduled(&r, 5);
    // The second daemon recorded only what was left (counted once its last write is answered, which can be
    // after the store shows it).
    let recorded = || async {
        second
            .metric(
                "canaryd_measurements_total",
                &[("phase", "Successful"), ("provider", "prometheus")],
            )
            .await
    };
    let left = f64::from(5 - at_kill);
    let counted = eventually(WAIT, "the second daemon's count", || async {
        let n = recorded().await;
        (n >= left).then_some(n)
    })
    .await;
    assert_eq!(counted, left);
    second.stop().await;
}

async fn when_the_leader_dies_the_standby_finishes_the_run_without_a_duplicate(crds: CrdSet) {
    let (server, client, prom) = harness::cluster(crds, Answer::Scalar(1.0)).await;
    let a = harness::spawn(client.clone(), harness::elected("a")).await;
    eventually(WAIT, "a to lead", || async {
        (a.metric("canaryd_leader", &[]).await == 1.0).then_some(())
    })
    .await;
    let b = harness::spawn(client.clone(), harness::elected("b")).await;
    eventually(WAIT, "b to know it stands by", || async {
        (b.scrape("/readyz").await.0 == 200).then_some(())
    })
    .await;
    assert_eq!(b.metric("canaryd_leader", &[]).await, 0.0);
    create(
        &client,
        &run(
            "ha",
            &prom.uri(),
            json!({"interval": "1s", "count": 6, "successCondition": "result == 1"}),
        ),
    )
    .await;
    measured_at_least(&server, "ha", 2).await;
    assert_eq!(
        b.metric("canaryd_measurements_total", &[("phase", "Successful")])
            .await,
        0.0,
        "the standby does not reconcile"
    );
    let killed = std::time::Instant::now();
    a.kill().await;
    eventually(WAIT, "b to take over", || async {
        (b.metric("canaryd_leader", &[]).await == 1.0).then_some(())
    })
    .await;
    // Within the lease duration (3 s) plus one retry period.
    assert!(
        killed.elapsed() < Duration::from_millis(3300 + 300 + 500),
        "{:?}",
        killed.elapsed()
    );
    let done = harness::finished(&server, "ha", WAIT).await;
    assert_exactly_scheduled(&first_result(&done).expect("a result"), 6);
    let lease = server
        .get::<Lease>("default", "canaryd")
        .expect("the Lease");
    let spec = lease.spec.expect("a Lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(spec.lease_duration_seconds, Some(3));
    b.stop().await;
}

async fn a_leader_stopped_gracefully_releases_the_lease_and_the_standby_takes_over_at_once(
    crds: CrdSet,
) {
    let server = FakeApiServer::builder().crds(crds).start().await;
    let client = server.client().await;
    let a = harness::spawn(client.clone(), harness::elected("a")).await;
    eventually(WAIT, "a to lead", || async {
        (a.metric("canaryd_leader", &[]).await == 1.0).then_some(())
    })
    .await;
    let b = harness::spawn(client.clone(), harness::elected("b")).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let stopped = std::time::Instant::now();
    a.stop().await;
    let released = server
        .get::<Lease>("default", "canaryd")
        .and_then(|l| l.spec)
        .expect("the Lease");
    assert!(
        released.holder_identity.is_none() || released.holder_identity.as_deref() == Some("b"),
        "{released:?}"
    );
    eventually(WAIT, "b to take over", || async {
        (b.metric("canaryd_leader", &[]).await == 1.0).then_some(())
    })
    .await;
    // Well before the 3 s lease would have expired.
    assert!(
        stopped.elapsed() < Duration::from_secs(2),
        "{:?}",
        stopped.elapsed()
    );
    b.stop().await;
}

with_each_crd_set!(
    a_daemon_killed_mid_run_and_restarted_neither_loses_nor_repeats_a_measurement,
    when_the_leader_dies_the_standby_finishes_the_run_without_a_duplicate,
    a_leader_stopped_gracefully_releases_the_lease_and_the_standby_takes_over_at_once,
);
