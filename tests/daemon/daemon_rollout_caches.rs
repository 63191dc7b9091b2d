//! A Rollout's reconcile reads what it plans from from the watch caches (`controller::rollout_caches`), and
//! from the API server only while a cache does not show this process's own last write: the reads an update
//! takes are counted by the fake API server, and with the Rollouts' watch held back in the middle of an update
//! the reconciles read afresh and no step is undone (neither the status's step nor the canary's scale).

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use std::time::Duration;

use canaryd::api::Rollout;
use canaryd::routers::objects::VirtualService;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern};
use canaryd_testkit::harness::{self, Answer};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::router_objects;
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};

/// The reads of what a reconcile plans from (the Rollout by name, its ReplicaSets and AnalysisRuns listed, the
/// Services and templates it names) among the requests since `from`: not the watches.
fn planning_reads(server: &FakeApiServer, from: usize) -> usize {
    let read = |path: &str| {
        path.ends_with("/rollouts/web")
            || path.ends_with("/replicasets")
            || path.ends_with("/analysisruns")
            || path.contains("/services/")
            || path.contains("analysistemplates/")
    };
    server.requests()[from..]
        .iter()
        .filter(|r| r.method == "GET" && !r.query.contains("watch=") && read(&r.path))
        .count()
}

/// The `spec.replicas` of the ReplicaSet `name` as each version of it was committed since `from_rv`.
fn replicas(server: &FakeApiServer, name: &str, from_rv: u64) -> Vec<i64> {
    let mut replicas = Vec::new();
    server.versions_after::<ReplicaSet>(from_rv, |_, rs| {
        if rs.pointer("/metadata/name").and_then(|n| n.as_str()) == Some(name) {
            replicas.extend(rs.pointer("/spec/replicas").and_then(|r| r.as_i64()));
        }
    });
    replicas
}

/// The Rollout's status as each version of it was committed since `from_rv`: its step index.
fn step_indexes(server: &FakeApiServer, from_rv: u64) -> Vec<i64> {
    let mut steps = Vec::new();
    server.versions_after::<Rollout>(from_rv, |_, rollout| {
        if let Some(step) = rollout
            .pointer("/status/currentStepIndex")
            .and_then(|i| i.as_i64())
        {
            steps.push(step);
        }
    });
    steps
}

async fn an_update_is_planned_from_the_watch_caches(crds: CrdSet) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "1s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    let from = server.requests().len();
    let reconciles_before = daemon
        .metric("rollout_reconcile_count", &[("name", "web")])
        .await;
    set_image(&client, "web:2").await;
    until(&server, "the promotion", |s| {
        s.stable_rs != first.stable_rs && healthy_at(s, Some(&s.current_pod_hash))
    })
    .await;
    let reconciles = daemon
        .metric("rollout_reconcile_count", &[("name", "web")])
        .await
        - reconciles_before;
    daemon.stop().await;
    let reads = planning_reads(&server, from);
    println!("{reads} planning reads for {reconciles} reconciles");
    // Read afresh, each reconcile sends 5 (the Rollout, 2 lists, 2 Services); from the caches only those
    // whose caches had not shown the last write yet do: measured 0-6 reads for about 20 reconciles on a quiet
    // machine, up to 24 with three busy loops on its two cores. At most 2 a reconcile: 2 in 5 read afresh.
    assert!(reconciles >= 10.0, "{reconciles} reconciles");
    assert!(
        (reads as f64) < 2.0 * reconciles,
        "{reads} reads for {reconciles} reconciles"
    );
}

with_each_crd_set!(an_update_is_planned_from_the_watch_caches);

async fn with_the_rollouts_watch_held_back_the_reconciles_read_afresh_and_undo_no_step(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "1s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    set_image(&client, "web:2").await;
    // The 1 s pause or the analysis after it: the pause alone can pass between two looks.
    until(&server, "the first step", |s| {
        matches!(s.current_step_index, Some(1 | 2)) && s.current_pod_hash != first.stable_rs
    })
    .await;
    let from_rv = server.resource_version();
    // From here the daemon's cache of the Rollout stays where it is for 3 s: the watch is dropped and the
    // watch that replaces it is answered late.
    let from = server.requests().len();
    server.delay_next(
        RequestPattern::new("GET", "/rollouts").query("watch=true"),
        1,
        Duration::from_secs(3),
    );
    server.drop_watches();
    let promoted = until(&server, "the promotion", |s| {
        s.stable_rs != first.stable_rs && healthy_at(s, Some(&s.current_pod_hash))
    })
    .await;
    daemon.stop().await;
    let canary = replicas(&server, &format!("web-{}", promoted.stable_rs), from_rv);
    assert!(
        canary.windows(2).all(|w| w[0] <= w[1]),
        "the canary scaled back: {canary:?}"
    );
    let fresh = server.requests()[from..]
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/rollouts/web"))
        .count();
    assert!(fresh > 0, "no Rollout read afresh while its watch was held");
    let steps = step_indexes(&server, from_rv);
    assert!(
        steps.windows(2).all(|w| w[0] <= w[1]),
        "a step undone: {steps:?}"
    );
    assert_eq!(steps.last(), Some(&4), "{steps:?}");
}

with_each_crd_set!(with_the_rollouts_watch_held_back_the_reconciles_read_afresh_and_undo_no_step);

/// The canary's weight in each version of the VirtualService `web-vsvc` committed since `from_rv`, and whether
/// that version still carries the label `team`.
fn vs_versions(server: &FakeApiServer, from_rv: u64) -> Vec<(i64, bool)> {
    let mut versions = Vec::new();
    server.versions_after::<VirtualService>(from_rv, |_, vs| {
        let weight = vs
            .pointer("/spec/http/0/route/1/weight")
            .and_then(|w| w.as_i64());
        let labelled = vs.pointer("/metadata/labels/team").is_some();
        versions.push((weight.unwrap_or(-1), labelled));
    });
    versions
}

/// The Rollout routed through the VirtualService `web-vsvc`, created with it, its Services and its template.
async fn routed_and_deployed(crds: CrdSet) -> Deployed {
    let routed = routed_through(
        rollout("web:1", "1s"),
        serde_json::json!({"istio": {"virtualService": {"name": "web-vsvc"}}}),
    );
    let deployed = deployed_with(crds, Answer::Scalar(1.0), &routed).await;
    deployed.0.put(&router_objects::virtual_service(
        "default", "web-vsvc", "web",
    ));
    deployed
}

async fn a_routed_update_reads_its_virtual_service_from_a_watch_and_keeps_another_clients_change(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) = routed_and_deployed(crds).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    let (from, from_rv) = (server.requests().len(), server.resource_version());
    set_image(&client, "web:2").await;
    // The 1 s pause or the analysis after it: the pause alone can pass between two looks.
    until(&server, "the first step", |s| {
        matches!(s.current_step_index, Some(1 | 2)) && s.current_pod_hash != first.stable_rs
    })
    .await;
    // Another client labels the VirtualService in the middle of the update, as its owner may.
    let api: Api<VirtualService> = Api::namespaced(client.clone(), "default");
    let label = serde_json::json!({"metadata": {"labels": {"team": "shop"}}});
    api.patch("web-vsvc", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("the VirtualService is labelled");
    until(&server, "the promotion", |s| {
        s.stable_rs != first.stable_rs && healthy_at(s, Some(&s.current_pod_hash))
    })
    .await;
    // The route goes back to the stable side once its Service is switched, after the promoted status.
    harness::eventually(WAIT, "the canary's weight back to 0", || async {
        let vs = server.get_json::<VirtualService>("default", "web-vsvc")?;
        (vs.pointer("/spec/http/0/route/1/weight")?.as_i64()? == 0).then_some(())
    })
    .await;
    daemon.stop().await;
    let requests = &server.requests()[from..];
    let vs_reads = requests
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with("/virtualservices/web-vsvc"))
        .count();
    let watched = server
        .requests()
        .iter()
        .any(|r| r.path.ends_with("/virtualservices") && r.query.contains("watch="));
    let versions = vs_versions(&server, from_rv);
    println!(
        "{vs_reads} reads of the VirtualService; its versions (canary weight, labelled): {versions:?}"
    );
    assert!(watched, "the VirtualServices were not watched");
    // Read from the API server each reconcile, it was read about 20 times; from the watch, only while the
    // watch had not shown the daemon's own last write (4 writes).
    assert!(vs_reads <= 6, "{vs_reads} reads of the VirtualService");
    let weights: Vec<i64> = versions.iter().map(|v| v.0).collect();
    assert_eq!(weights, [20, 20, 60, 100, 0], "{versions:?}");
    // Labelled at 20, before the daemon's next write: every write after it keeps the label.
    assert_eq!(versions.iter().position(|v| v.1), Some(1), "{versions:?}");
    assert!(
        versions[1..].iter().all(|v| v.1),
        "a write lost the label: {versions:?}"
    );
}

with_each_crd_set!(
    a_routed_update_reads_its_virtual_service_from_a_watch_and_keeps_another_clients_change
);

/// Another client's change to a Rollout's VirtualService reconciles the Rollout, as Argo's Istio controller
/// queues it: the weights of a Healthy Rollout, set to 50/50 by hand, are put back at once. Nothing else wakes a
/// Healthy Rollout (it has no wake-up due), so without the trigger they would stay.
async fn another_clients_change_to_the_virtual_service_reconciles_the_rollout_at_once(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) = routed_and_deployed(crds).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    harness::eventually(WAIT, "the VirtualServices watched", || async {
        let watched = server
            .requests()
            .iter()
            .any(|r| r.path.ends_with("/virtualservices") && r.query.contains("watch="));
        watched.then_some(())
    })
    .await;
    let weights = |vs: &serde_json::Value| {
        let weight = |i: usize| {
            vs.pointer(&format!("/spec/http/0/route/{i}/weight"))?
                .as_i64()
        };
        Some((weight(0)?, weight(1)?))
    };
    let api: Api<VirtualService> = Api::namespaced(client.clone(), "default");
    let mut vs = server
        .get_json::<VirtualService>("default", "web-vsvc")
        .expect("the VirtualService");
    assert_eq!(weights(&vs), Some((100, 0)));
    vs["spec"]["http"][0]["route"][0]["weight"] = 50.into();
    vs["spec"]["http"][0]["route"][1]["weight"] = 50.into();
    let by_hand: VirtualService = serde_json::from_value(vs).expect("a VirtualService");
    let rv = api
        .replace("web-vsvc", &Default::default(), &by_hand)
        .await
        .expect("the weights set by hand")
        .metadata
        .resource_version;
    harness::eventually(WAIT, "the weights put back", || async {
        let vs = server.get_json::<VirtualService>("default", "web-vsvc")?;
        let later = vs.pointer("/metadata/resourceVersion")?.as_str()? != rv.as_deref()?;
        (later && weights(&vs)? == (100, 0)).then_some(())
    })
    .await;
    daemon.stop().await;
}

with_each_crd_set!(another_clients_change_to_the_virtual_service_reconciles_the_rollout_at_once);

/// Another client's change to a Service a Rollout manages reconciles the Rollout, as Argo's Service controller
/// queues it: the stable Service's pod-template-hash selector, dropped by hand (as a GitOps sync putting back the
/// Service from git does), is put back at once. Nothing else wakes a Healthy Rollout.
async fn another_clients_change_to_a_managed_service_reconciles_the_rollout_at_once(crds: CrdSet) {
    let (server, client, _prom, _rsc) =
        deployed_with(crds, Answer::Scalar(1.0), &rollout("web:1", "1s")).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let healthy = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    let hash = |svc: &serde_json::Value| {
        let selector = svc.pointer("/spec/selector/rollouts-pod-template-hash")?;
        Some(selector.as_str()?.to_string())
    };
    let stable = || server.get_json::<Service>("default", "web-stable");
    harness::eventually(WAIT, "the stable Service selects the hash", || async {
        (hash(&stable()?)? == healthy.stable_rs).then_some(())
    })
    .await;
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let unselect = serde_json::json!({"spec": {"selector": {"rollouts-pod-template-hash": null}}});
    let rv = api
        .patch(
            "web-stable",
            &PatchParams::default(),
            &Patch::Merge(&unselect),
        )
        .await
        .expect("the selector reset by hand")
        .metadata
        .resource_version;
    harness::eventually(WAIT, "the hash selected again", || async {
        let svc = stable()?;
        let later = svc.pointer("/metadata/resourceVersion")?.as_str()? != rv.as_deref()?;
        (later && hash(&svc)? == healthy.stable_rs).then_some(())
    })
    .await;
    daemon.stop().await;
}

with_each_crd_set!(another_clients_change_to_a_managed_service_reconciles_the_rollout_at_once);

/// A watch of a cache the API server refuses (as RBAC refuses a kind) is counted and retried, and the
/// reconciles read the object afresh meanwhile: the Rollout is deployed as if nothing failed.
async fn a_refused_watch_of_the_virtual_services_is_counted_and_the_reconciles_read_meanwhile(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) = routed_and_deployed(crds).await;
    // The watcher's list (a GET of the collection with a page size), not the reconciles' GETs of the object.
    let listed = RequestPattern::new("GET", "/virtualservices").query("limit=");
    server.fail_next(listed.clone(), 2, 403);
    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    harness::eventually(
        WAIT,
        "two failed lists of the VirtualServices counted",
        || async {
            let failed = daemon
                .metric("canaryd_reconcile_errors_total", &[("reason", "watch")])
                .await;
            (failed >= 2.0).then_some(())
        },
    )
    .await;
    harness::eventually(WAIT, "the VirtualServices listed after all", || async {
        let lists = server.request_count(&listed);
        (lists >= 3).then_some(())
    })
    .await;
    daemon.stop().await;
    let read = RequestPattern::new("GET", "/virtualservices/web-vsvc");
    assert!(
        server.request_count(&read) >= 1,
        "the reconciles never read the VirtualService"
    );
}

with_each_crd_set!(
    a_refused_watch_of_the_virtual_services_is_counted_and_the_reconciles_read_meanwhile
);
