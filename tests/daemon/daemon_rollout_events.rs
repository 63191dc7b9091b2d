//! The Events the daemon's Rollout controller itself tells, against the fake API server: Argo's Rollout informer
//! tells each Rollout it sees for the first time (`RolloutAddedToInformer`), once, not on every change.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use canaryd_testkit::fake_apiserver::CrdSet;
use canaryd_testkit::harness::{self, Answer};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

async fn a_rollout_is_told_added_to_the_informer_once_not_on_each_change(crds: CrdSet) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "1s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy to be Healthy", |s| {
        healthy_at(s, None)
    })
    .await;
    set_image(&client, "web:2").await;
    // Through every change of the update: a wait for one step in between could miss it between two looks.
    until(&server, "the update to be promoted", |s| {
        healthy_at(s, None) && s.stable_rs != first.stable_rs
    })
    .await;
    daemon.stop().await;
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let mut added = api
        .list(&ListParams::default())
        .await
        .expect("events list")
        .items;
    added.retain(|e| e.reason.as_deref() == Some("RolloutAddedToInformer"));
    assert_eq!(added.len(), 1, "{added:?}");
    let told = &added[0];
    assert_eq!(
        (told.note.as_deref(), told.type_.as_deref()),
        (
            Some("Rollout resource added to informer: default/web"),
            Some("Normal")
        )
    );
    let regarding = told.regarding.as_ref().and_then(|r| r.kind.as_deref());
    assert_eq!(regarding, Some("Rollout"));
    assert!(told.series.is_none(), "told once: {told:?}");
}

with_each_crd_set!(a_rollout_is_told_added_to_the_informer_once_not_on_each_change);
