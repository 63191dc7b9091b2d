//! `kubectl argo rollouts restart` against `canaryd run --rollouts`: `spec.restartAt` set by a merge patch, as
//! the plugin sends it, on a Healthy Rollout whose pods the fake API server's simulated ReplicaSet controller
//! runs. Every pod created before restartAt is evicted (through the eviction subresource) and replaced, never
//! more than maxUnavailable at once, `status.restartedAt` records it, the pods are listed only while the
//! restart is due, and no Event is written for it (Argo's pod restarter writes none).

#![allow(clippy::disallowed_methods)] // Not the Clock: the tests wait on real time, as all daemons here but one (on a manual clock) run.

use std::time::{Duration, Instant};

use canaryd::api::Rollout;
use canaryd::controller::Clients;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern};
use canaryd_testkit::harness::{self, Answer};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

fn created(pod: &Pod) -> Timestamp {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .expect("the API server sets creationTimestamp")
}

fn ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn pods(server: &FakeApiServer) -> Vec<Pod> {
    server.list::<Pod>("default")
}

fn pod_lists(server: &FakeApiServer) -> usize {
    server.request_count(
        &RequestPattern::new("GET", "/namespaces/default/pods").query("labelSelector"),
    )
}

/// Waits for the second after every pod of `old` was created: restartAt is in whole seconds, as the plugin
/// writes it.
async fn second_after(old: &[Pod]) {
    let newest = old.iter().map(created).max().expect("pods");
    let start = Instant::now();
    while Timestamp::now().as_second() <= newest.as_second() {
        assert!(start.elapsed() < WAIT, "the clock moves on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sets restartAt to now, as `kubectl argo rollouts restart` does.
async fn restart(client: &kube::Client) -> Timestamp {
    let now = Timestamp::from_second(Timestamp::now().as_second()).expect("a time");
    restart_at(client, now).await
}

/// Sets restartAt to `restart_at` (whole seconds).
async fn restart_at(client: &kube::Client, restart_at: Timestamp) -> Timestamp {
    let api: Api<Rollout> = Api::namespaced(client.clone(), "default");
    let patch =
        json!({"spec": {"restartAt": restart_at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("restartAt is set");
    restart_at
}

async fn a_restart_evicts_every_older_pod_within_max_unavailable_and_records_restarted_at(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "2s").await;
    let daemon = harness::spawn(client.clone(), config()).await;
    until(&server, "the first deploy to be Healthy with 5 pods", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    let old = pods(&server);
    assert_eq!(old.len(), 5);
    assert_eq!(pod_lists(&server), 0, "pods are read only for a restart");
    second_after(&old).await;
    let before = events(&client).await;
    let from_rv = server.resource_version();
    let restart_at = restart(&client).await;

    // 5 replicas, maxUnavailable 25% (1): at least 4 Ready pods at every look.
    let mut fewest_ready = usize::MAX;
    let start = Instant::now();
    let done = loop {
        fewest_ready = fewest_ready.min(pods(&server).iter().filter(|p| ready(p)).count());
        let s = status(&server);
        if s.restarted_at.is_some() {
            break s;
        }
        assert!(
            start.elapsed() < WAIT,
            "the restart never completed: {s:?}, pods {:?}",
            pods(&server)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(done.restarted_at.map(|t| t.0), Some(restart_at));
    // Read from the versions committed: the message shows for about a second, which a look can miss.
    let mut restarting = false;
    server.versions_after::<Rollout>(from_rv, |_, r| {
        restarting |=
            r.pointer("/status/message").and_then(|m| m.as_str()) == Some("rollout is restarting");
    });
    assert!(restarting, "the phase said so meanwhile");
    assert!(fewest_ready >= 4, "{fewest_ready} Ready pods at one point");

    // The last eviction's replacement comes from the ReplicaSet controller's next pass, after restartedAt.
    let now = harness::eventually(WAIT, "five pods, all made after the restart", || async {
        let now = pods(&server);
        (now.len() == 5 && now.iter().all(|p| created(p) >= restart_at)).then_some(now)
    })
    .await;
    for pod in &now {
        assert!(
            created(pod) >= restart_at,
            "{:?} is older",
            pod.metadata.name
        );
        assert!(!old.iter().any(|o| o.metadata.name == pod.metadata.name));
    }
    assert_eq!(
        server.request_count(&RequestPattern::new("POST", "/eviction")),
        5,
        "each old pod evicted once"
    );
    let s = until(&server, "Healthy again with 5 available", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    assert_eq!(s.stable_rs, done.stable_rs, "a restart is no update");
    assert_eq!(replica_sets(&server).len(), 1);
    // Done once: no further pod list nor eviction, and no Event for the restart.
    let lists = pod_lists(&server);
    assert!(lists > 0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(pod_lists(&server), lists, "pods listed after the restart");
    daemon.stop().await;
    assert_eq!(events(&client).await, before);
}

with_each_crd_set!(
    a_restart_evicts_every_older_pod_within_max_unavailable_and_records_restarted_at
);

/// The daemon's clients of the fake, built as `canaryd run` builds them: evictions through one that hands a 429
/// back at once, every other request through kube's default client (which retries a 429 itself, for minutes).
async fn clients(server: &FakeApiServer) -> Clients {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(server.kubeconfig_path()).expect("the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a kube config");
    Clients::new(config).expect("the kube clients")
}

async fn a_restart_a_disruption_budget_refuses_is_tried_again_30_s_later_and_not_recorded(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) = deployed(crds, Answer::Scalar(1.0), "2s").await;
    let clock = harness::manual_clock();
    let daemon = harness::spawn_on(clients(&server).await, config(), clock.clone()).await;
    until_on(
        &server,
        &clock,
        "the first deploy to be Healthy with 5 pods",
        |s| healthy_at(s, None) && s.available_replicas == 5,
    )
    .await;
    let old = pods(&server);
    // A PodDisruptionBudget that allows no disruption: every eviction is refused.
    let evictions = RequestPattern::new("POST", "/eviction");
    server.fail_next(evictions.clone(), 1000, 429);
    // The second after the pods were created (stamped on real time by the API server); the daemon's clock gets
    // there by its own wake-up.
    let newest = old.iter().map(created).max().expect("pods");
    restart_at(
        &client,
        Timestamp::from_second(newest.as_second() + 1).expect("a time"),
    )
    .await;
    let asked = Instant::now();
    // Argo's restarter: a refused pod is not restarted; the reconcile goes on and looks again in 30 s. The
    // refusal comes back at once: the status write after it is not held while a client retries the 429.
    until_on(&server, &clock, "the phase to say it is restarting", |s| {
        s.message == "rollout is restarting"
    })
    .await;
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "the reconcile was held {:?}",
        asked.elapsed()
    );
    let tried_at = |n: usize| {
        let what = format!("eviction {n} to be tried");
        let (server, clock, evictions) = (&server, &clock, &evictions);
        async move {
            harness::run_clock_until(server, clock, &what, || {
                (server.request_count(evictions) >= n)
                    .then(|| (clock.now(), server.request_count(evictions)))
            })
            .await
        }
    };
    let (first, tries) = tried_at(1).await;
    assert_eq!(tries, 1, "one pod at a time");
    let (again, tries) = tried_at(2).await;
    assert_eq!(tries, 2, "one pod at a time");
    // 30 s after the refusal, counted from the whole second the plan stamps.
    let due = canaryd::time::whole_second(first)
        .checked_add(jiff::SignedDuration::from_secs(30))
        .ok();
    assert_eq!(Some(again), due, "tried at {first}, again at {again}");
    let s = status(&server);
    assert_eq!(s.restarted_at, None);
    assert_eq!(s.message, "rollout is restarting");
    assert_eq!(pods(&server).len(), 5);
    daemon.stop().await;
}

with_each_crd_set!(
    a_restart_a_disruption_budget_refuses_is_tried_again_30_s_later_and_not_recorded
);
