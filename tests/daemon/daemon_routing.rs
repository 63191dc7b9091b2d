//! `canaryd run --rollouts` with each traffic router, against the fake API server: the same Rollout pointed at
//! an Istio VirtualService (split by host, or by subset with a DestinationRule), an NGINX stable Ingress, SMI
//! (a TrafficSplit canaryd creates), a Traefik TraefikService (v3's, or v2's with Argo's flags for it), an ALB Ingress or a Gateway API HTTPRoute gets each `setWeight` into the
//! router before the step counts as done, all traffic to the canary after the last step then back to the new
//! stable on promotion, and weight 0 at once on an abort while the canary's pods wait out
//! `abortScaleDownDelaySeconds`. A router object that is missing holds the Rollout where it is with a
//! `TrafficRoutingError` Event instead of a status claiming a weight nobody applied. The weights are read from
//! a watch on the router object, so every weight canaryd wrote is seen, in order.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use canaryd::api::Rollout;
use canaryd::routers::objects::{DestinationRule, HttpRoute, VirtualService};
use canaryd_testkit::fake_apiserver::{
    self, CrdSet, FakeApiServer, RecordedRequest, RequestPattern,
};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::router_objects::{self, TraefikService, TraefikServiceV2};
use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug)]
enum Router {
    Istio,
    /// Istio's subset mode: the VirtualService's routes name subsets of one host, a DestinationRule's.
    IstioSubsets,
    Nginx,
    GatewayApi,
    /// SMI: no object of the user's; canaryd creates the TrafficSplit (v1alpha1, the daemon's default).
    Smi,
    /// Traefik: the weighted TraefikService of Argo's docs (Traefik v3's `traefik.io`, the default).
    Traefik,
    /// The same in Traefik v2's `traefik.containo.us`, the daemon told so by Argo's flags.
    TraefikV2,
    /// AWS ALB: the Ingress of Argo's docs, its action annotation re-weighted.
    Alb,
}

/// The annotation ALB's router writes on the Ingress `web` (the action named for the stable Service).
const ALB_ACTION: &str = "alb.ingress.kubernetes.io/actions.web-stable";

/// That action sending everything to the stable Service.
const ALL_STABLE: &str = r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"web-stable","ServicePort":"80","Weight":100}]}}"#;

use Router::*;

/// SMI's TrafficSplit as the fake API server serves it (v1alpha1, the storage version of Linkerd's CRD).
#[derive(kube::CustomResource, serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
#[kube(
    group = "split.smi-spec.io",
    version = "v1alpha1",
    kind = "TrafficSplit",
    namespaced,
    schema = "disabled"
)]
struct TrafficSplitSpec {
    #[serde(flatten)]
    fields: std::collections::BTreeMap<String, Value>,
}

impl Router {
    /// `spec.strategy.canary.trafficRouting`, as a user of Argo Rollouts writes it.
    fn config(self) -> Value {
        match self {
            Istio => json!({"istio": {"virtualService": {"name": "web-vsvc"}}}),
            IstioSubsets => json!({"istio": {
                "virtualService": {"name": "web-vsvc"},
                "destinationRule": {"name": "web-destrule", "canarySubsetName": "canary", "stableSubsetName": "stable"}
            }}),
            Nginx => json!({"nginx": {"stableIngress": "web"}}),
            GatewayApi => json!({"plugins": {"argoproj-labs/gatewayAPI": {"httpRoute": "web"}}}),
            Smi => json!({"smi": {}}),
            Traefik | TraefikV2 => json!({"traefik": {"weightedTraefikServiceName": "web"}}),
            Alb => json!({"alb": {"ingress": "web", "servicePort": 80}}),
        }
    }

    /// The user's router object, there before the Rollout points at it; its resourceVersion as stored.
    fn install(self, server: &FakeApiServer) -> Option<String> {
        match self {
            Istio => server
                .put(&router_objects::virtual_service(
                    "default", "web-vsvc", "web",
                ))
                .resource_version(),
            IstioSubsets => {
                server.put(&router_objects::destination_rule(
                    "default",
                    "web-destrule",
                    "web",
                ));
                server
                    .put(&router_objects::subset_virtual_service(
                        "default", "web-vsvc", "web",
                    ))
                    .resource_version()
            }
            Nginx => server
                .put(&router_objects::stable_ingress("default"))
                .resource_version(),
            GatewayApi => server
                .put(&router_objects::http_route("default"))
                .resource_version(),
            Smi => None,
            Traefik => server
                .put(&router_objects::traefik_service::<TraefikService>(
                    "default",
                ))
                .resource_version(),
            TraefikV2 => server
                .put(&router_objects::traefik_service::<TraefikServiceV2>(
                    "default",
                ))
                .resource_version(),
            Alb => server
                .put(&router_objects::alb_ingress("default", "web"))
                .resource_version(),
        }
    }

    /// The canary's weight in the object canaryd writes (for NGINX the canary Ingress it creates).
    fn canary_weight(self, object: &Value) -> Option<i64> {
        let backend = |list: &Value, key: &str| {
            list.as_array()?
                .iter()
                .find(|b| b.pointer(key) == Some(&json!("web-canary")))
                .map(|b| b["weight"].as_i64().unwrap_or(0))
        };
        match self {
            Istio => backend(&object["spec"]["http"][0]["route"], "/destination/host"),
            IstioSubsets => object["spec"]["http"][0]["route"]
                .as_array()?
                .iter()
                .find(|d| d.pointer("/destination/subset") == Some(&json!("canary")))
                .map(|d| d["weight"].as_i64().unwrap_or(0)),
            Nginx => object["metadata"]["annotations"]["nginx.ingress.kubernetes.io/canary-weight"]
                .as_str()?
                .parse()
                .ok(),
            GatewayApi => backend(&object["spec"]["rules"][0]["backendRefs"], "/name"),
            Traefik | TraefikV2 => Some(
                object["spec"]["weighted"]["services"]
                    .as_array()?
                    .iter()
                    .find(|s| s["name"] == "web-canary")?["weight"]
                    .as_i64()
                    .unwrap_or(0),
            ),
            Alb => {
                let action = object["metadata"]["annotations"][ALB_ACTION].as_str()?;
                let action: Value = serde_json::from_str(action).ok()?;
                action["ForwardConfig"]["TargetGroups"]
                    .as_array()?
                    .iter()
                    .find(|g| g["ServiceName"] == "web-canary")?["Weight"]
                    .as_i64()
            }
            Smi => object["spec"]["backends"]
                .as_array()?
                .iter()
                .find(|b| b["service"] == "web-canary")?["weight"]
                .as_str()?
                .parse()
                .ok(),
        }
    }

    /// Every canary weight the router object shows from now on, in order, repeats folded.
    fn record(self, client: &kube::Client) -> Weights {
        match self {
            Istio | IstioSubsets => Weights::watch::<VirtualService>(client, "web-vsvc", self),
            Nginx => Weights::watch::<Ingress>(client, "web-web-canary", self),
            GatewayApi => Weights::watch::<HttpRoute>(client, "web", self),
            Smi => Weights::watch::<TrafficSplit>(client, "web", self),
            Traefik => Weights::watch::<TraefikService>(client, "web", self),
            TraefikV2 => Weights::watch::<TraefikServiceV2>(client, "web", self),
            Alb => Weights::watch::<Ingress>(client, "web", self),
        }
    }

    /// The flags `canaryd run` is given besides `--rollouts`: for Traefik v2, those Argo's docs give for it.
    fn flags(self) -> &'static [&'static str] {
        match self {
            TraefikV2 => TRAEFIK_V2_FLAGS,
            _ => &[],
        }
    }
}

/// Argo's flags for Traefik v2 (its docs' "Overriding the Default").
const TRAEFIK_V2_FLAGS: &[&str] = &[
    "--traefik-api-group=traefik.containo.us",
    "--traefik-api-version=traefik.containo.us/v1alpha1",
];

/// The daemon's configuration with the routers' APIs as `canaryd run FLAGS` parses them.
fn configured(flags: &[&str]) -> canaryd::controller::Config {
    use clap::Parser;
    let cli = canaryd::cli::Cli::try_parse_from([&["canaryd", "run"], flags].concat())
        .unwrap_or_else(|e| panic!("{flags:?}: {e}"));
    let canaryd::cli::Command::Run(args) = cli.command else {
        panic!("not the run command");
    };
    canaryd::controller::Config {
        routers: args.config("test".to_string()).routers,
        ..config()
    }
}

/// The weights a watch on one router object saw; the watch ends with it.
struct Weights {
    seen: Arc<Mutex<Vec<i64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Weights {
    fn watch<K>(client: &kube::Client, name: &'static str, router: Router) -> Self
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
        K: Clone + DeserializeOwned + serde::Serialize,
        K: std::fmt::Debug + Send + 'static,
    {
        let api: Api<K> = Api::namespaced(client.clone(), "default");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = events.next().await {
                let (Ok(Event::Apply(o)) | Ok(Event::InitApply(o))) = event else {
                    continue;
                };
                if o.name_any() != name {
                    continue;
                }
                let value = serde_json::to_value(&o).expect("a router object serialises");
                let Some(weight) = router.canary_weight(&value) else {
                    continue;
                };
                let mut seen = into.lock().expect("weights lock");
                if seen.last() != Some(&weight) {
                    seen.push(weight);
                }
            }
        });
        Weights { seen, task }
    }

    fn now(&self) -> Vec<i64> {
        self.seen.lock().expect("weights lock").clone()
    }

    async fn until(&self, what: &str, wanted: &[i64]) {
        eventually(WAIT, what, || async {
            (self.now() == wanted).then_some(())
        })
        .await;
    }
}

impl Drop for Weights {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `web` behind `router`: `setWeight: 20`, then an indefinite pause; an aborted canary keeps its pods 2 s.
fn routed(router: Router) -> Rollout {
    let mut rollout = routed_through(
        with_steps("web:1", json!([{"setWeight": 20}, {"pause": {}}])),
        router.config(),
    );
    if let Some(canary) = rollout
        .spec
        .strategy
        .as_mut()
        .and_then(|s| s.canary.as_mut())
    {
        canary.abort_scale_down_delay_seconds = Some(2);
    }
    rollout
}

/// `routed(router)` deployed (Healthy at revision 1) behind the user's router object, the daemon running,
/// and a watch on the router's weights.
struct Routed {
    router: Router,
    server: FakeApiServer,
    client: kube::Client,
    daemon: harness::Running,
    weights: Weights,
    /// The resourceVersion of the user's router object as installed.
    installed: Option<String>,
    _prometheus: harness::FakePrometheus,
    _replica_sets: fake_apiserver::ReplicaSetController,
}

async fn deployed_behind(router: Router) -> Routed {
    deployed_behind_with(router, CrdSet::Argo).await
}

/// [`deployed_behind`] with the `crds` installed.
async fn deployed_behind_with(router: Router, crds: CrdSet) -> Routed {
    let (server, client, _prometheus, _replica_sets) =
        deployed_with(crds, Answer::Scalar(1.0), &routed(router)).await;
    let installed = router.install(&server);
    let weights = router.record(&client);
    let daemon = harness::spawn(client.clone(), configured(router.flags())).await;
    until(&server, "the first deploy to be Healthy", |s| {
        healthy_at(s, None) && s.available_replicas == 5
    })
    .await;
    weights
        .until("a first deploy moving no traffic", &[0])
        .await;
    Routed {
        router,
        server,
        client,
        daemon,
        weights,
        installed,
        _prometheus,
        _replica_sets,
    }
}

/// The update to `web:2`, paused after its `setWeight: 20`.
async fn updated_to_twenty(r: &Routed) -> String {
    let (server, client, weights) = (&r.server, &r.client, &r.weights);
    set_image(client, "web:2").await;
    let s = until(server, "the pause after setWeight: 20", |s| {
        s.current_step_index == Some(1) && !s.pause_conditions.is_empty()
    })
    .await;
    // The router's own account, from this test's watch of it, which can be a moment behind the store (CI saw
    // [0] here once); that the weight was written before the step completed is the status's to say, below.
    weights
        .until("the router object to give the canary 20", &[0, 20])
        .await;
    let applied = s.canary.weights.as_ref().map(|w| w.canary.weight);
    assert_eq!(
        applied,
        Some(20),
        "status.canary.weights says what was applied"
    );
    assert_eq!(
        replicas_of(server, &s.current_pod_hash),
        Some(1),
        "the canary gets ceil(20% of 5) pods"
    );
    assert_eq!(
        replicas_of(server, &s.stable_rs),
        Some(5),
        "the stable keeps every pod"
    );
    if let IstioSubsets = r.router {
        assert_eq!(
            subset_hashes(server),
            [s.current_pod_hash.clone(), s.stable_rs.clone()],
            "the subsets select the canary's and the stable's pods"
        );
    }
    s.current_pod_hash
}

async fn promotion_sends_all_traffic_to_the_canary_then_to_the_new_stable(router: Router) {
    let r = deployed_behind(router).await;
    let canary = updated_to_twenty(&r).await;
    let (server, client, weights) = (&r.server, &r.client, &r.weights);
    patch_status(client, json!({"status": {"pauseConditions": null}})).await;
    until(server, "the promotion", |s| healthy_at(s, Some(&canary))).await;
    weights
        .until(
            "100 after the last step, then 0 on the new stable",
            &[0, 20, 100, 0],
        )
        .await;
    assert_eq!(service_hash(server, "web-stable"), canary);
    assert_eq!(service_hash(server, "web-canary"), canary);
    if let IstioSubsets = router {
        eventually(WAIT, "both subsets on the new hash", || async {
            (subset_hashes(server) == [canary.clone(), canary.clone()]).then_some(())
        })
        .await;
    }
    r.daemon.stop().await;
}

/// The `rollouts-pod-template-hash` each subset of the DestinationRule selects (canary, stable).
fn subset_hashes(server: &FakeApiServer) -> Vec<String> {
    let dr = server
        .get_json::<DestinationRule>("default", "web-destrule")
        .unwrap_or_default();
    ["canary", "stable"]
        .iter()
        .map(|name| {
            dr["spec"]["subsets"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| s["name"] == *name)
                .and_then(|s| s["labels"]["rollouts-pod-template-hash"].as_str())
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

async fn an_abort_returns_all_traffic_to_the_stable_at_once(router: Router) {
    let r = deployed_behind(router).await;
    let canary = updated_to_twenty(&r).await;
    let (server, client, weights) = (&r.server, &r.client, &r.weights);
    patch_status(client, json!({"status": {"abort": true}})).await;
    let aborted = until(server, "the abort", |s| s.phase == "Degraded").await;
    weights.until("weight 0 on the abort", &[0, 20, 0]).await;
    assert_eq!(
        aborted.canary.weights.as_ref().map(|w| w.canary.weight),
        Some(0)
    );
    let deadline = |server: &FakeApiServer| {
        server
            .get::<k8s_openapi::api::apps::v1::ReplicaSet>("default", &format!("web-{canary}"))
            .and_then(|rs| rs.metadata.annotations)
            .and_then(|a| a.get("scale-down-deadline").cloned())
    };
    eventually(
        WAIT,
        "the canary scaled to 0 once its delay is over",
        || async { (replicas_of(server, &canary) == Some(0)).then_some(()) },
    )
    .await;
    assert!(
        deadline(server).is_some(),
        "the canary waited for a scale-down deadline before losing its pods"
    );
    assert_eq!(
        weights.now(),
        [0, 20, 0],
        "no traffic went back to the canary"
    );
    r.daemon.stop().await;
}

macro_rules! with_each_router {
    ($flow:ident) => {
        mod $flow {
            use super::*;
            #[tokio::test]
            async fn istio() {
                $flow(Istio).await
            }
            #[tokio::test]
            async fn istio_subsets() {
                $flow(IstioSubsets).await
            }
            #[tokio::test]
            async fn nginx() {
                $flow(Nginx).await
            }
            #[tokio::test]
            async fn gateway_api() {
                $flow(GatewayApi).await
            }
            #[tokio::test]
            async fn smi() {
                $flow(Smi).await
            }
            #[tokio::test]
            async fn traefik() {
                $flow(Traefik).await
            }
            #[tokio::test]
            async fn traefik_v2() {
                $flow(TraefikV2).await
            }
            #[tokio::test]
            async fn alb() {
                $flow(Alb).await
            }
        }
    };
}

with_each_router!(promotion_sends_all_traffic_to_the_canary_then_to_the_new_stable);
with_each_router!(an_abort_returns_all_traffic_to_the_stable_at_once);

/// The Rollout's Events that Argo's routers record, as (reason, note), in order.
async fn router_events(client: &kube::Client) -> Vec<(String, String)> {
    let told = [
        "UpdatedDestinationRule",
        "Updated VirtualService",
        "CreatingCanaryIngress",
        "PatchingCanaryIngress",
        "TrafficSplitCreated",
        "PatchingALBIngress",
    ];
    let mut events = events(client).await;
    events.retain(|(reason, _)| told.contains(&reason.as_str()));
    events
}

/// The first deploy and the update to 20 behind `router`, and the router Events the Rollout then has.
async fn told_by(router: Router, crds: CrdSet) -> (String, String, Vec<(String, String)>) {
    let r = deployed_behind_with(router, crds).await;
    let stable = status(&r.server).stable_rs;
    let canary = updated_to_twenty(&r).await;
    r.daemon.stop().await;
    (stable, canary, router_events(&r.client).await)
}

fn told(reason: &str, note: String) -> (String, String) {
    (reason.to_string(), note)
}

/// Argo's Istio router (`UpdateHash`, `SetWeight`) and NGINX router (`SetWeight`) record an Event on the
/// Rollout for each object they write; its SMI router only when it creates the TrafficSplit.
async fn each_router_write_is_told_in_argos_event(crds: CrdSet) {
    let (stable, canary, events) = told_by(IstioSubsets, crds).await;
    assert_eq!(
        events,
        [
            told(
                "UpdatedDestinationRule",
                format!(
                    "DestinationRule web-destrule subset updated (canary: {stable}, stable: {stable})"
                )
            ),
            told(
                "UpdatedDestinationRule",
                format!(
                    "DestinationRule web-destrule subset updated (canary: {canary}, stable: {stable})"
                )
            ),
            told(
                "Updated VirtualService",
                "VirtualService `web-vsvc` set to desiredWeight '20'".to_string()
            ),
        ]
    );
    let (_, _, events) = told_by(Nginx, crds).await;
    assert_eq!(
        events,
        [
            told(
                "CreatingCanaryIngress",
                "Creating canary ingress `web-web-canary` with weight `0`".to_string()
            ),
            told(
                "PatchingCanaryIngress",
                "Updating Ingress `web-web-canary` to desiredWeight '20'".to_string()
            ),
        ]
    );
    let (_, _, events) = told_by(Smi, crds).await;
    assert_eq!(
        events,
        [told(
            "TrafficSplitCreated",
            "TrafficSplit `web` created".to_string()
        )]
    );
}

canaryd_testkit::with_each_crd_set!(each_router_write_is_told_in_argos_event);

#[tokio::test]
async fn the_stable_ingress_and_the_other_backends_are_left_alone() {
    let r = deployed_behind(Nginx).await;
    updated_to_twenty(&r).await;
    r.daemon.stop().await;
    let stable = r.server.get::<Ingress>("default", "web");
    assert_eq!(
        stable.and_then(|i| i.metadata.resource_version),
        r.installed,
        "the stable Ingress is never written"
    );

    let r = deployed_behind(GatewayApi).await;
    updated_to_twenty(&r).await;
    r.daemon.stop().await;
    let route = r.server.get_json::<HttpRoute>("default", "web").unwrap();
    let refs = &route["spec"]["rules"][0]["backendRefs"];
    assert_eq!(
        (refs[0]["weight"].as_i64(), refs[1]["weight"].as_i64()),
        (Some(80), Some(20))
    );
    assert_eq!(refs[2], json!({"name": "extra", "port": 80}), "{route}");
}

/// Another client's change to the stable Ingress reconciles the Rollout, as Argo's ingress controller queues
/// it: a host added to the stable Ingress mid-update reaches the canary Ingress at once.
#[tokio::test]
async fn a_change_to_the_stable_ingress_reaches_the_canary_ingress_at_once() {
    let r = deployed_behind(Nginx).await;
    updated_to_twenty(&r).await;
    let api: Api<Ingress> = Api::namespaced(r.client.clone(), "default");
    let host = json!({"spec": {"rules": [{"host": "shop.example.com", "http": {"paths": [
        {"path": "/", "pathType": "Prefix",
         "backend": {"service": {"name": "web-stable", "port": {"number": 80}}}}
    ]}}]}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&host))
        .await
        .expect("the stable Ingress's host changed by hand");
    eventually(WAIT, "the canary Ingress on the new host", || async {
        let canary = r.server.get_json::<Ingress>("default", "web-web-canary")?;
        (canary.pointer("/spec/rules/0/host")? == "shop.example.com").then_some(())
    })
    .await;
    r.daemon.stop().await;
}

/// Another client's change to the ALB Ingress reconciles the Rollout, as Argo's ingress controller queues the
/// Rollouts its managed annotations name: the action set back to all-stable by hand mid-update is put back to
/// the step's weight at once. The Rollout waits on an indefinite pause with nothing else due, so without the
/// trigger the action would stay.
#[tokio::test]
async fn a_change_to_the_alb_ingress_is_put_back_at_once() {
    let r = deployed_behind(Alb).await;
    updated_to_twenty(&r).await;
    eventually(WAIT, "the Ingresses watched", || async {
        let watched = r.server.requests().iter().any(|request| {
            request.path.ends_with("/ingresses") && request.query.contains("watch=")
        });
        watched.then_some(())
    })
    .await;
    let api: Api<Ingress> = Api::namespaced(r.client.clone(), "default");
    let by_hand = json!({"metadata": {"annotations": {ALB_ACTION: ALL_STABLE}}});
    let rv = api
        .patch("web", &PatchParams::default(), &Patch::Merge(&by_hand))
        .await
        .expect("the action set by hand")
        .metadata
        .resource_version;
    eventually(WAIT, "the step's weight put back", || async {
        let ingress = r.server.get_json::<Ingress>("default", "web")?;
        let later = ingress.pointer("/metadata/resourceVersion")?.as_str()? != rv.as_deref()?;
        (later && Alb.canary_weight(&ingress)? == 20).then_some(())
    })
    .await;
    r.daemon.stop().await;
}

/// The ALB Ingress `web`'s managed annotation and its action annotation, as they stand (`None` when absent).
fn alb_annotations(server: &FakeApiServer) -> (Option<String>, Option<String>) {
    let ingress = server.get_json::<Ingress>("default", "web");
    let annotation = |key: &str| {
        let value = ingress
            .as_ref()?
            .pointer("/metadata/annotations")?
            .get(key)?;
        Some(value.as_str()?.to_string())
    };
    (
        annotation("rollouts.argoproj.io/managed-alb-annotations"),
        annotation(ALB_ACTION),
    )
}

/// A deleted Rollout lets go of its ALB Ingress, as Argo's ingress controller resets the action of a Rollout
/// that no longer exists: everything to the stable Service the action is named for, the Rollout's entry out of
/// the managed annotation. Deleted mid-update (its canary at 20%) with its ReplicaSets orphaned, as when moving
/// back to a Deployment, the canary's pods would otherwise keep a fifth of the traffic.
#[tokio::test]
async fn a_deleted_rollout_releases_its_alb_ingress() {
    let r = deployed_behind(Alb).await;
    updated_to_twenty(&r).await;
    let rollouts: Api<Rollout> = Api::namespaced(r.client.clone(), "default");
    rollouts
        .delete("web", &DeleteParams::orphan())
        .await
        .expect("the Rollout deleted");
    eventually(WAIT, "the action released", || async {
        (alb_annotations(&r.server) == (None, Some(ALL_STABLE.to_string()))).then_some(())
    })
    .await;
    r.daemon.stop().await;
}

/// With `--watch-alb-ingresses`, a Rollout deleted while the daemon was not running lets go of its ALB Ingress
/// once the daemon starts, though no Rollout reads an Ingress there any more: Argo's ingress controller watches
/// every Ingress. (Without the flag that Ingress is never watched: docs/rollouts.md.)
#[tokio::test]
async fn a_rollout_deleted_while_the_daemon_was_down_releases_its_alb_ingress_at_start() {
    let r = deployed_behind(Alb).await;
    updated_to_twenty(&r).await;
    r.daemon.stop().await;
    let rollouts: Api<Rollout> = Api::namespaced(r.client.clone(), "default");
    rollouts
        .delete("web", &DeleteParams::orphan())
        .await
        .expect("the Rollout deleted");
    let config = canaryd::controller::Config {
        watch_alb_ingresses: true,
        ..configured(Alb.flags())
    };
    let daemon = harness::spawn(r.client.clone(), config).await;
    eventually(WAIT, "the action released", || async {
        (alb_annotations(&r.server) == (None, Some(ALL_STABLE.to_string()))).then_some(())
    })
    .await;
    daemon.stop().await;
}

/// An ALB Ingress whose managed annotation names a Rollout that does not exist (deleted while the daemon was
/// down, or by another controller) is released when its watch shows it, as Argo's ingress controller does on
/// every Ingress event: that Rollout's action sends everything to its stable Service and its entry leaves the
/// annotation; the running Rollout's entry and action stay.
#[tokio::test]
async fn an_alb_ingress_naming_a_rollout_that_does_not_exist_is_released() {
    let r = deployed_behind(Alb).await;
    updated_to_twenty(&r).await;
    let (managed, action) = alb_annotations(&r.server);
    let managed: BTreeMap<String, Value> =
        serde_json::from_str(&managed.expect("web's managed entry")).expect("the annotation reads");
    let legacy_action = "alb.ingress.kubernetes.io/actions.legacy-stable";
    let weighted = json!({"Type": "forward", "ForwardConfig": {"TargetGroups": [
        {"ServiceName": "legacy-canary", "ServicePort": "8080", "Weight": 30},
        {"ServiceName": "legacy-stable", "ServicePort": "8080", "Weight": 70},
    ]}});
    let mut left_behind = managed.clone();
    left_behind.insert("legacy".to_string(), json!([legacy_action]));
    let ingresses: Api<Ingress> = Api::namespaced(r.client.clone(), "default");
    let annotations = json!({"metadata": {"annotations": {
        "rollouts.argoproj.io/managed-alb-annotations": serde_json::to_string(&left_behind).expect("json"),
        legacy_action: weighted.to_string(),
    }}});
    ingresses
        .patch("web", &PatchParams::default(), &Patch::Merge(&annotations))
        .await
        .expect("the entry left behind");
    let all_legacy_stable = json!({"Type": "forward", "ForwardConfig": {"TargetGroups": [
        {"ServiceName": "legacy-stable", "ServicePort": "8080", "Weight": 100},
    ]}});
    eventually(WAIT, "legacy's action released", || async {
        let ingress = r.server.get_json::<Ingress>("default", "web")?;
        let text = ingress
            .pointer("/metadata/annotations")?
            .get(legacy_action)?
            .as_str()?;
        (serde_json::from_str::<Value>(text).ok()? == all_legacy_stable).then_some(())
    })
    .await;
    let (managed_after, action_after) = alb_annotations(&r.server);
    let managed_after: BTreeMap<String, Value> =
        serde_json::from_str(&managed_after.expect("web's entry kept"))
            .expect("the annotation reads");
    assert_eq!(managed_after, managed, "only legacy's entry left");
    assert_eq!(action_after, action, "web's action untouched");
    r.daemon.stop().await;
}

/// A Rollout moved to another ALB Ingress lets go of the one it left, as Argo's ingress controller releases an
/// Ingress whose managed annotation names a Rollout that no longer points at it: the new Ingress gets the
/// step's weight, the old one sends everything to the stable Service and loses the Rollout's entry, retried with
/// the Rollout's backoff when the update is refused.
#[tokio::test]
async fn a_rollout_moved_to_another_alb_ingress_releases_the_one_it_left() {
    let r = deployed_behind(Alb).await;
    updated_to_twenty(&r).await;
    let ingresses: Api<Ingress> = Api::namespaced(r.client.clone(), "default");
    let mut moved: Ingress = ingresses.get("web").await.expect("the Ingress");
    moved.metadata = kube::api::ObjectMeta {
        name: Some("moved".to_string()),
        ..Default::default()
    };
    ingresses
        .create(&kube::api::PostParams::default(), &moved)
        .await
        .expect("the new Ingress");
    // The first two updates of the Ingress left are refused: the reconcile fails and its backoff retries.
    let release = RequestPattern::new("PUT", "/ingresses/web");
    let puts = || {
        r.server
            .requests()
            .iter()
            .filter(|q| release.matches(q))
            .count()
    };
    let before = puts();
    r.server.fail_next(release.clone(), 2, 500);
    let rollouts: Api<Rollout> = Api::namespaced(r.client.clone(), "default");
    let to_moved = json!({"spec": {"strategy": {"canary": {"trafficRouting": {"alb": {"ingress": "moved"}}}}}});
    rollouts
        .patch("web", &PatchParams::default(), &Patch::Merge(&to_moved))
        .await
        .expect("the Rollout moved");
    eventually(WAIT, "the new Ingress at the step's weight", || async {
        let ingress = r.server.get_json::<Ingress>("default", "moved")?;
        (Alb.canary_weight(&ingress)? == 20).then_some(())
    })
    .await;
    eventually(WAIT, "the Ingress left released", || async {
        (alb_annotations(&r.server) == (None, Some(ALL_STABLE.to_string()))).then_some(())
    })
    .await;
    assert_eq!(puts() - before, 3, "two refused, then written");
    r.daemon.stop().await;
}

/// A Rollout handed to another controller instance (its instance-id label changed) is gone for this one, but
/// it still exists: its ALB Ingress keeps the action it set.
#[tokio::test]
async fn a_rollout_handed_to_another_instance_keeps_its_alb_ingress() {
    let r = deployed_behind(Alb).await;
    updated_to_twenty(&r).await;
    let before = alb_annotations(&r.server);
    assert!(before.0.is_some() && before.1.is_some(), "{before:?}");
    let reads = || {
        let requests = r.server.requests();
        let read = |q: &&RecordedRequest| q.method == "GET" && q.path.ends_with("/rollouts/web");
        requests.iter().filter(read).count()
    };
    let read_before = reads();
    let rollouts: Api<Rollout> = Api::namespaced(r.client.clone(), "default");
    let handed = json!({"metadata": {"labels": {canaryd::api::INSTANCE_LABEL: "other"}}});
    rollouts
        .patch("web", &PatchParams::default(), &Patch::Merge(&handed))
        .await
        .expect("the Rollout handed over");
    // The daemon reads the Rollout afresh to tell whether it still exists.
    eventually(WAIT, "the Rollout read afresh", || async {
        (reads() > read_before).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(alb_annotations(&r.server), before);
    r.daemon.stop().await;
}

/// The TrafficSplit as Argo's SMI router leaves it at each weight (its generateTrafficSplits): named after the
/// Rollout, controlled by it, the stable Service as the root, the canary's backend then the stable's, v1alpha1
/// quantities; only the weights change.
async fn the_traffic_split_is_argos_at_every_weight(crds: CrdSet) {
    let r = deployed_behind_with(Smi, crds).await;
    let split = |canary: &str, stable: &str| {
        json!({"service": "web-stable", "backends": [
            {"service": "web-canary", "weight": canary},
            {"service": "web-stable", "weight": stable},
        ]})
    };
    let written = || r.server.get_json::<TrafficSplit>("default", "web").unwrap();
    assert_eq!(written()["spec"], split("0", "100"));
    let uid = r
        .server
        .get::<Rollout>("default", "web")
        .and_then(|o| o.metadata.uid);
    let owner = &written()["metadata"]["ownerReferences"];
    assert_eq!(
        owner,
        &json!([{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web",
                  "uid": uid, "controller": true, "blockOwnerDeletion": true}])
    );
    updated_to_twenty(&r).await;
    assert_eq!(written()["spec"], split("20", "80"));
    r.daemon.stop().await;
}

canaryd_testkit::with_each_crd_set!(the_traffic_split_is_argos_at_every_weight);

/// The TraefikService as Argo's Traefik router leaves it (its SetWeight): only the canary's and the stable's
/// entries get weights, out of 100; the other entry and fields are kept; no Event. The same for Traefik v2's.
async fn the_traefik_service_is_argos_at_every_weight(crds: CrdSet) {
    for router in [Traefik, TraefikV2] {
        traefik_service_at_every_weight(router, crds).await;
    }
}

async fn traefik_service_at_every_weight(router: Router, crds: CrdSet) {
    let r = deployed_behind_with(router, crds).await;
    let services = |canary: i64, stable: i64| {
        json!([
            {"name": "web-stable", "port": 80, "weight": stable},
            {"name": "web-canary", "port": 80, "weight": canary},
            {"name": "extra", "port": 80, "weight": 5}
        ])
    };
    let written = || {
        let service = match router {
            TraefikV2 => r.server.get_json::<TraefikServiceV2>("default", "web"),
            _ => r.server.get_json::<TraefikService>("default", "web"),
        };
        service.unwrap()["spec"]["weighted"]["services"].clone()
    };
    assert_eq!(written(), services(0, 100));
    updated_to_twenty(&r).await;
    assert_eq!(written(), services(20, 80));
    r.daemon.stop().await;
    assert_eq!(router_events(&r.client).await, []);
}

canaryd_testkit::with_each_crd_set!(the_traefik_service_is_argos_at_every_weight);

/// A refused update of the TraefikService is told as Argo's Traefik router tells it: its own Warning
/// `TraefikServiceUpdateError` ("Error updating traefik service "web": <the server's words>"), then the
/// `TrafficRoutingError` both routers record; the weight is set at the retry.
#[tokio::test]
async fn a_refused_traefik_service_update_is_told_as_argos_router_tells_it() {
    let r = deployed_behind(Traefik).await;
    let put = fake_apiserver::RequestPattern::new("PUT", "/traefikservices/web");
    r.server.fail_next(put, 1, 403);
    set_image(&r.client, "web:2").await;
    r.weights
        .until("the weight set at the retry", &[0, 20])
        .await;
    r.daemon.stop().await;
    let told: Vec<(String, String)> = events(&r.client).await;
    let at = told
        .iter()
        .position(|(reason, _)| reason == "TraefikServiceUpdateError")
        .expect("a TraefikServiceUpdateError");
    assert_eq!(
        told[at].1,
        r#"Error updating traefik service "web": injected by the test: Forbidden"#
    );
    let (reason, message) = &told[at + 1];
    assert_eq!(reason, "TrafficRoutingError");
    assert!(
        message.contains("refused the write of TraefikService default/web"),
        "{message}"
    );
}

/// Without Argo's flags for Traefik v2 the daemon asks for v3's `traefik.io`, as Argo's controller does: a
/// TraefikService in v2's `traefik.containo.us` alone is not found, the Rollout is held with a
/// `TrafficRoutingError` naming it, and the v2 object is never written.
#[tokio::test]
async fn a_traefik_v2_service_is_not_found_without_argos_flags() {
    let (server, client, _prometheus, _replica_sets) =
        deployed_with(CrdSet::Argo, Answer::Scalar(1.0), &routed(TraefikV2)).await;
    let installed = TraefikV2.install(&server);
    let daemon = harness::spawn(client.clone(), configured(&[])).await;
    let not_found = eventually(WAIT, "a TrafficRoutingError", || async {
        events(&client)
            .await
            .into_iter()
            .find(|(reason, _)| reason == "TrafficRoutingError")
    })
    .await;
    daemon.stop().await;
    assert!(
        not_found.1.contains("TraefikService default/web not found"),
        "{not_found:?}"
    );
    let told = events(&client).await;
    let update_errors = told
        .iter()
        .filter(|(r, _)| r == "TraefikServiceUpdateError");
    assert_eq!(
        update_errors.count(),
        0,
        "a failed read is not Argo's update error"
    );
    let v2 = server.get::<TraefikServiceV2>("default", "web");
    assert_eq!(v2.and_then(|s| s.metadata.resource_version), installed);
    assert_eq!(status(&server).canary.weights, None, "no weight claimed");
}

/// The Ingress as Argo's ALB router leaves it (its SetWeight): the action annotation forwards to the canary's
/// and the stable's target groups on `servicePort`, the Rollout named as its manager; the Ingress's rules and
/// other annotations kept; Argo's `PatchingALBIngress` Event for each weight written.
async fn the_alb_ingress_is_argos_at_every_weight(crds: CrdSet) {
    let r = deployed_behind_with(Alb, crds).await;
    let action = |canary: i64| {
        format!(
            r#"{{"Type":"forward","ForwardConfig":{{"TargetGroups":[{{"ServiceName":"web-canary","ServicePort":"80","Weight":{canary}}},{{"ServiceName":"web-stable","ServicePort":"80","Weight":{}}}]}}}}"#,
            100 - canary
        )
    };
    let annotations = |canary: i64| {
        json!({
            "alb.ingress.kubernetes.io/scheme": "internet-facing",
            ALB_ACTION: action(canary),
            "rollouts.argoproj.io/managed-alb-annotations": format!(r#"{{"web":["{ALB_ACTION}"]}}"#),
        })
    };
    let written = || r.server.get_json::<Ingress>("default", "web").unwrap();
    assert_eq!(written()["metadata"]["annotations"], annotations(0));
    updated_to_twenty(&r).await;
    let ingress = written();
    assert_eq!(ingress["metadata"]["annotations"], annotations(20));
    let installed = serde_json::to_value(router_objects::alb_ingress("default", "web")).unwrap();
    assert_eq!(ingress["spec"], installed["spec"]);
    r.daemon.stop().await;
    let patched = |weight: u32| {
        told(
            "PatchingALBIngress",
            format!("Updating Ingress `web` to desiredWeight '{weight}'"),
        )
    };
    assert_eq!(router_events(&r.client).await, [patched(0), patched(20)]);
}

canaryd_testkit::with_each_crd_set!(the_alb_ingress_is_argos_at_every_weight);
