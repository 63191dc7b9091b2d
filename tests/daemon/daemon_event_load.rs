//! Events through a slow Events endpoint, against the fake API server on real time: a Rollout whose
//! ReplicaSet create is refused over and over while every Event create and patch takes a second. Each Event the
//! daemon made (`rollout_events_total`) is an Event created or an occurrence counted in one's series, none is
//! lost (`canaryd_reconcile_errors_total{reason="event"}`), and the repeated Warning is one Event whose series
//! counts every refusal, in fewer requests than refusals.

#![allow(clippy::disallowed_methods)] // The daemon runs on real time; the fake delays on real time.

use std::collections::BTreeMap;
use std::time::Duration;

use canaryd_testkit::fake_apiserver::{CrdSet, RequestPattern};
use canaryd_testkit::harness::{self, Answer};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

/// Creates of the update's ReplicaSet the server refuses.
const REFUSED: usize = 8;

/// How long each Event create or patch takes.
const SLOW: Duration = Duration::from_secs(1);

const WAIT: Duration = Duration::from_secs(60);

/// The occurrences the Rollout's Events tell, by reason: 1 each, or its series' count.
async fn told(client: &kube::Client) -> BTreeMap<String, i32> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let events = api
        .list(&ListParams::default())
        .await
        .expect("events list")
        .items;
    let mut told = BTreeMap::new();
    for event in events {
        if event.regarding.as_ref().and_then(|r| r.kind.as_deref()) != Some("Rollout") {
            continue;
        }
        let count = event.series.as_ref().map_or(1, |s| s.count);
        *told.entry(event.reason.unwrap_or_default()).or_insert(0) += count;
    }
    told
}

async fn a_slow_events_endpoint_loses_no_event_and_counts_the_repeats_in_one(crds: CrdSet) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "1h").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    let creates = RequestPattern::new("POST", "/replicasets");
    let (post, patch) = (
        RequestPattern::new("POST", "/events"),
        RequestPattern::new("PATCH", "/events"),
    );
    server.delay_next(post.clone(), 1000, SLOW);
    server.delay_next(patch.clone(), 1000, SLOW);
    let sent_before = server.request_count(&post) + server.request_count(&patch);
    server.fail_next(creates, REFUSED, 403);
    set_image(&client, "web:2").await;
    until(&server, "the update's pause", |s| {
        s.current_step_index == Some(1)
    })
    .await;

    // Every Event made is told, as an Event of its own or in a series' count.
    let last = std::sync::Mutex::new(String::new());
    let (made, told) = harness::eventually_explained(
        WAIT,
        "every Event made told",
        || async {
            let told = told(&client).await;
            let mut made = BTreeMap::new();
            for reason in told.keys() {
                let labels = [("name", "web"), ("reason", reason.as_str())];
                let n = daemon.metric("rollout_events_total", &labels).await;
                made.insert(reason.clone(), n as i32);
            }
            *last.lock().expect("not poisoned") = format!("; made {made:?}, told {told:?}");
            (made == told && told.get("ReplicaSetCreateError") == Some(&(REFUSED as i32)))
                .then_some((made, told))
        },
        || last.lock().expect("not poisoned").clone(),
    )
    .await;
    let lost = daemon
        .metric("canaryd_reconcile_errors_total", &[("reason", "event")])
        .await;
    daemon.stop().await;
    assert_eq!(lost, 0.0, "made {made:?}, told {told:?}");
    let refusals = events_of_reason(&client, "ReplicaSetCreateError").await;
    assert_eq!(refusals.len(), 1, "one Event for the repeats: {refusals:?}");
    // The refusals came while the first Event was waiting or being sent: a create and a patch or two told
    // them all, not a request each.
    let sent = server.request_count(&post) + server.request_count(&patch) - sent_before;
    let others: i32 = told.values().sum::<i32>() - REFUSED as i32;
    assert!(
        sent < others as usize + REFUSED,
        "{sent} requests for {others} Events and {REFUSED} refusals"
    );
}

with_each_crd_set!(a_slow_events_endpoint_loses_no_event_and_counts_the_repeats_in_one);
