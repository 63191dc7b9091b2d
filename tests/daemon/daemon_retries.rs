//! A Rollout whose reconcile keeps failing, on the daemon's manual clock against the fake API server: each
//! failure waits twice as long as the one before (Argo's rate limiter, per object), and the Warning it
//! repeats is one Event whose series counts the repeats, as client-go's recorder aggregates them.

#![allow(clippy::disallowed_methods)] // The harness times its waits on real time; the daemon runs on the clock.

use canaryd_testkit::fake_apiserver::{CrdSet, RequestPattern};
use canaryd_testkit::harness::{self, Answer, run_clock_until};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

/// Creates of the update's ReplicaSet the server refuses.
const REFUSED: usize = 8;

/// The Rollout's Events with `reason`.
async fn events_with_reason(client: &kube::Client, reason: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut events = api
        .list(&ListParams::default())
        .await
        .expect("events list")
        .items;
    events.retain(|e| {
        e.reason.as_deref() == Some(reason)
            && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Rollout")
    });
    events
}

async fn a_refused_create_backs_off_per_object_and_its_warning_is_one_event_counting_the_repeats(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "1s").await;
    let clock = harness::manual_clock();
    let daemon = harness::spawn_on(client.clone(), config(), clock.clone()).await;
    until_on(&server, &clock, "the first deploy", |s| healthy_at(s, None)).await;
    let creates = RequestPattern::new("POST", "/replicasets");
    let before = server.request_count(&creates);
    server.fail_next(creates.clone(), REFUSED, 403);
    set_image(&client, "web:2").await;

    // The clock's time at each create the server saw: the clock moves only when the daemon waits.
    let mut tried: Vec<Timestamp> = Vec::new();
    run_clock_until(&server, &clock, "the create after the refusals", || {
        let seen = server.request_count(&creates) - before;
        while tried.len() < seen {
            tried.push(clock.now());
        }
        (seen > REFUSED).then_some(())
    })
    .await;
    let waits: Vec<SignedDuration> = tried
        .windows(2)
        .map(|w| w[1].duration_since(w[0]))
        .collect();
    // The wait after the nth refusal is 2^(n-1) ms, doubling with each one. But the update's first writes (the
    // first refusal's Progressing condition among them) are changes to the Rollout whose watch events reconcile
    // it at once (as an informer's update event queues Argo's): the second try comes at once, and so may the
    // third when one of those events arrives after the second try began. From the fourth on, only the
    // per-object backoff decides.
    for (n, wait) in waits.iter().enumerate() {
        let doubled = SignedDuration::from_millis(1 << n);
        let brought_forward = n < 2 && wait.is_zero();
        assert!(
            *wait == doubled && n > 0 || brought_forward,
            "the wait after refusal {}: {wait:?}; all: {waits:?}",
            n + 1
        );
    }
    assert_eq!(waits.len(), REFUSED, "{waits:?}");

    until_on(&server, &clock, "the update's first step", |s| {
        s.current_step_index == Some(1)
    })
    .await;
    daemon.stop().await;
    let refusals = events_with_reason(&client, "ReplicaSetCreateError").await;
    assert_eq!(refusals.len(), 1, "one Event for the repeats: {refusals:?}");
    let series = refusals[0].series.as_ref().expect("a series");
    assert_eq!(series.count, REFUSED as i32, "{refusals:?}");
    let last = tried[REFUSED - 1];
    assert_eq!(series.last_observed_time.0, last, "{refusals:?}");
    assert_eq!(
        refusals[0].event_time.as_ref().map(|t| t.0),
        tried.first().copied(),
        "the Event's time is the first refusal's"
    );
}

with_each_crd_set!(
    a_refused_create_backs_off_per_object_and_its_warning_is_one_event_counting_the_repeats,
);
