//! The planner with a traffic router, on the in-memory cluster: Argo's traffic-routed replica counts
//! (canary = ceil(weight × replicas / 100), stable kept at full size, `setCanaryScale`), the weight the
//! routers are handed (`Plan::route`), `status.canary.weights` with its `TrafficWeightUpdated` Events, and
//! the `scale-down-deadline` of the old ReplicaSet after a promotion or an abort. Scenarios are Argo's
//! e2e ones (TestIstioHostSplit, TestCanarySetCanaryScale, TestIstioAbortUpdateDeleteAllCanaryPods).

use std::collections::BTreeMap;

use canaryd::api::rollout::TrafficWeights;
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd::engine::rollout::{Route, Write};
use canaryd_testkit::rollout::memory::*;
use k8s_openapi::api::apps::v1::ReplicaSetStatus;
use serde_json::{Value, json};

const DEADLINE: &str = "scale-down-deadline";

fn routed(replicas: i32, mut canary: Value) -> MemoryCluster {
    canary["canaryService"] = json!("web-canary");
    canary["stableService"] = json!("web-stable");
    canary["trafficRouting"] = json!({"istio": {"virtualService": {"name": "web-vsvc"}}});
    let mut c = MemoryCluster::new(rollout(replicas, canary));
    let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    c.add_service("web-canary", selector.clone());
    c.add_service("web-stable", selector);
    c
}

fn weights(c: &MemoryCluster) -> TrafficWeights {
    c.status().canary.weights.expect("status.canary.weights")
}

fn messages_since(c: &MemoryCluster, from: usize, reason: &str) -> Vec<String> {
    c.events[from..]
        .iter()
        .filter(|e| e.reason == reason)
        .map(|e| e.message.clone())
        .collect()
}

fn deadline_of(c: &MemoryCluster, revision: usize) -> Option<String> {
    let mut sets: Vec<_> = c.replica_sets.iter().collect();
    sets.sort_by_key(|r| {
        r.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"].clone()
    });
    sets[revision - 1]
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEADLINE))
        .cloned()
}

/// Every plan of `c` at `now` until it settles, one reconcile each (pods made available between them).
fn plans(c: &mut MemoryCluster, now: jiff::Timestamp) -> Vec<canaryd::engine::rollout::Plan> {
    let mut out = Vec::new();
    for _ in 0..30 {
        let became_available = c.make_available();
        let before = c.rollout.status.clone();
        let plan = c.reconcile(now);
        let settled = plan.writes.is_empty() && c.rollout.status == before && !became_available;
        out.push(plan);
        if settled {
            break;
        }
    }
    out
}

#[test]
fn the_routers_move_after_the_services_and_before_the_scaling_as_in_argo() {
    // Argo's rolloutCanary: Services (reconcileStableAndCanaryService) before reconcileTrafficRouting, so a
    // weight never goes to a Service that still selects the pods it is to leave; scaling and analysis after.
    let mut c = routed(
        4,
        json!({"steps": [{"setWeight": 50}, {"pause": {}}], "scaleDownDelaySeconds": 0}),
    );
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    let mut all = plans(&mut c, at(10));
    c.patch_status(|s| s.pause_conditions.clear());
    all.extend(plans(&mut c, at(20)));
    assert_eq!(phase(&c).0, "Healthy");
    let mut switched_with_a_route = 0;
    for plan in all.iter().filter(|p| p.route.is_some()) {
        for (i, write) in plan.writes.iter().enumerate() {
            let before_route = i < plan.route_after;
            match write {
                Write::SwitchService { .. } | Write::CreateReplicaSet(_) => {
                    assert!(before_route, "{write:?} after the route in {plan:#?}");
                    switched_with_a_route +=
                        usize::from(matches!(write, Write::SwitchService { .. }));
                }
                Write::ScaleReplicaSet { .. } | Write::CreateAnalysisRun(_) => {
                    assert!(!before_route, "{write:?} before the route in {plan:#?}")
                }
                _ => {}
            }
        }
    }
    assert!(
        switched_with_a_route > 0,
        "a Service was switched in a plan that also moved the routers"
    );
}

#[test]
fn a_host_split_moves_the_weight_then_promotes_and_keeps_the_old_stable_for_its_delay() {
    // Argo's TestIstioHostSplit: 1 replica, setWeight 10 then an indefinite pause.
    let mut c = routed(1, json!({"steps": [{"setWeight": 10}, {"pause": {}}]}));
    run(&mut c, at(0));
    let first = c.status().current_pod_hash;
    assert_eq!(weights(&c).canary.weight, 0);
    assert_eq!(weights(&c).stable.weight, 100);
    assert_eq!(
        messages_since(&c, 0, "TrafficWeightUpdated"),
        ["Traffic weight updated to 0"]
    );

    let mark = c.events.len();
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
    assert_eq!(
        replicas(&c),
        [1, 1],
        "stable stays at full size beside ceil(10% of 1)"
    );
    let w = weights(&c);
    let second = c.status().current_pod_hash;
    assert_eq!((w.canary.weight, w.stable.weight), (10, 90));
    assert_eq!(
        (
            w.canary.pod_template_hash.as_str(),
            w.stable.pod_template_hash.as_str()
        ),
        (second.as_str(), first.as_str())
    );
    assert_eq!(
        (
            w.canary.service_name.as_str(),
            w.stable.service_name.as_str()
        ),
        ("web-canary", "web-stable")
    );
    assert_eq!(
        messages_since(&c, mark, "TrafficWeightUpdated"),
        // The canary hash moved first (Argo's message then names no weight), then the weight.
        [
            "Traffic weight updated ",
            "Traffic weight updated from 0 to 10"
        ]
    );
    let plan = c.plan(at(11));
    assert_eq!(
        plan.route,
        Some(Route {
            weight: 10,
            canary_hash: second.clone(),
            stable_hash: first.clone(),
            managed: Default::default(),
        })
    );

    let mark = c.events.len();
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(20));
    let w = weights(&c);
    assert_eq!(
        (w.canary.weight, w.stable.weight),
        (0, 100),
        "promoted: all traffic to the new stable"
    );
    assert_eq!(
        (
            w.canary.pod_template_hash.as_str(),
            w.stable.pod_template_hash.as_str()
        ),
        (second.as_str(), second.as_str())
    );
    assert_eq!(
        messages_since(&c, mark, "TrafficWeightUpdated"),
        [
            "Traffic weight updated from 10 to 100",
            "Traffic weight updated from 100 to 0"
        ]
    );
    assert_eq!(
        replicas(&c),
        [1, 1],
        "the old stable waits for scaleDownDelaySeconds"
    );
    assert_eq!(deadline_of(&c, 1).as_deref(), Some("2027-01-15T08:00:50Z"));
    assert_eq!(c.plan(at(21)).wake_at, Some(at(50)));

    run(&mut c, at(49));
    assert_eq!(replicas(&c), [1, 1]);
    run(&mut c, at(51));
    assert_eq!(replicas(&c), [0, 1], "scaled down once the deadline passed");
    assert_eq!(phase(&c).0, "Healthy");
}

#[test]
fn a_small_weight_gets_one_canary_pod_and_the_stable_keeps_every_pod() {
    // "Pod counts can't express 5% with 4 pods": with a router they need not.
    let mut c = routed(4, json!({"steps": [{"setWeight": 5}, {"pause": {}}]}));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(replicas(&c), [4, 1]);
    assert_eq!(weights(&c).canary.weight, 5);
    assert_eq!(weights(&c).stable.weight, 95);
}

#[test]
fn min_pods_per_replica_set_raises_the_canary() {
    let mut c = routed(
        4,
        json!({"minPodsPerReplicaSet": 2, "steps": [{"setWeight": 5}, {"pause": {}}]}),
    );
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(replicas(&c), [4, 2]);
}

#[test]
fn the_weight_waits_for_the_canary_pods_and_never_goes_to_a_canary_without_one() {
    let mut c = routed(
        4,
        json!({"steps": [{"setWeight": 20}, {"setWeight": 60}, {"pause": {}}]}),
    );
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    // The new ReplicaSet is created and scaled, but no pod of it is available yet.
    for n in 0..4 {
        let plan = c.reconcile(at(10 + n));
        if let Some(route) = &plan.route {
            assert_eq!(
                route.weight, 0,
                "no weight to a canary without an available pod"
            );
        }
    }
    assert_eq!(replicas(&c), [4, 1]);
    assert_eq!(weights(&c).canary.weight, 0);
    assert_eq!(
        c.status().current_step_index,
        Some(0),
        "setWeight is not done before its weight is applied"
    );

    c.make_available();
    let plan = c.reconcile(at(20));
    assert_eq!(plan.route.map(|r| r.weight), Some(20));
    assert_eq!(c.status().current_step_index, Some(1));
    // Step 2 scales the canary to 3 pods; until they are available the routers keep step 1's weight.
    let plan = c.reconcile(at(21));
    assert_eq!(plan.route.map(|r| r.weight), Some(20));
    assert_eq!(replicas(&c), [4, 3]);
    run(&mut c, at(22));
    assert_eq!(weights(&c).canary.weight, 60);
    assert_eq!(c.status().current_step_index, Some(2));
}

#[test]
fn set_canary_scale_decouples_pods_from_weight_as_argos_e2e_counts_say() {
    // Argo's TestCanarySetCanaryScale (NGINX, 4 replicas): canary/stable pods at each step index.
    let mut c = routed(
        4,
        json!({"steps": [
            {"pause": {}},
            {"setCanaryScale": {"weight": 25}},
            {"pause": {"duration": "100s"}},
            {"setWeight": 50},
            {"pause": {"duration": "10s"}},
            {"setCanaryScale": {"replicas": 3}},
            {"pause": {}},
            {"setCanaryScale": {"matchTrafficWeight": true}},
            {"pause": {"duration": "5s"}}
        ]}),
    );
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(c.status().current_step_index, Some(0));
    assert_eq!(replicas(&c), [4, 0]);

    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(20));
    assert_eq!(c.status().current_step_index, Some(2));
    assert_eq!(replicas(&c), [4, 1]);
    assert_eq!(
        weights(&c).canary.weight,
        0,
        "setCanaryScale moves pods, not traffic"
    );

    run(&mut c, at(121));
    assert_eq!(c.status().current_step_index, Some(4));
    assert_eq!(
        replicas(&c),
        [4, 1],
        "setWeight does not rescale while setCanaryScale holds"
    );
    assert_eq!(weights(&c).canary.weight, 50);

    run(&mut c, at(132));
    assert_eq!(c.status().current_step_index, Some(6));
    assert_eq!(replicas(&c), [4, 3]);

    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(140));
    assert_eq!(c.status().current_step_index, Some(8));
    assert_eq!(
        replicas(&c),
        [4, 2],
        "matchTrafficWeight: back to ceil(50% of 4)"
    );

    run(&mut c, at(146));
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    assert_eq!(
        replicas(&c),
        [4, 4],
        "the old stable keeps its pods for its delay"
    );
    run(&mut c, at(180));
    assert_eq!(replicas(&c), [0, 4]);
}

#[test]
fn an_abort_sets_weight_zero_at_once_and_scales_the_canary_down_after_its_delay() {
    // Argo's TestIstioAbortUpdateDeleteAllCanaryPods: 5 replicas, setCanaryScale 2 then 4.
    let mut c = routed(
        5,
        json!({"abortScaleDownDelaySeconds": 60, "steps": [
            {"setCanaryScale": {"replicas": 2}}, {"setWeight": 20}, {"pause": {}},
            {"setCanaryScale": {"replicas": 4}}, {"pause": {}}
        ]}),
    );
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    c.patch_status(|s| s.pause_conditions.clear());
    run(&mut c, at(20));
    assert_eq!(replicas(&c), [5, 4]);
    assert_eq!(weights(&c).canary.weight, 20);

    let mark = c.events.len();
    c.patch_status(|s| s.abort = true);
    let plan = c.reconcile(at(30));
    assert_eq!(plan.route.map(|r| r.weight), Some(0), "weight 0 at once");
    run(&mut c, at(30));
    assert_eq!(phase(&c).0, "Degraded");
    assert_eq!(
        messages_since(&c, mark, "TrafficWeightUpdated"),
        ["Traffic weight updated from 20 to 0"]
    );
    assert_eq!(
        replicas(&c),
        [5, 4],
        "the canary keeps its pods for abortScaleDownDelaySeconds"
    );
    assert_eq!(deadline_of(&c, 2).as_deref(), Some("2027-01-15T08:01:30Z"));
    run(&mut c, at(89));
    assert_eq!(replicas(&c), [5, 4]);
    run(&mut c, at(91));
    assert_eq!(replicas(&c), [5, 0]);
}

#[test]
fn abort_scale_down_delay_zero_leaves_a_scaled_canary_up() {
    let mut c = routed(
        4,
        json!({"abortScaleDownDelaySeconds": 0, "steps": [
            {"setCanaryScale": {"replicas": 2}}, {"setWeight": 20}, {"pause": {}}
        ]}),
    );
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    c.patch_status(|s| s.abort = true);
    run(&mut c, at(20));
    run(&mut c, at(1000));
    assert_eq!(replicas(&c), [4, 2]);
    assert!(deadline_of(&c, 2).is_none());
    assert_eq!(weights(&c).canary.weight, 0);
}

#[test]
fn routers_canaryd_does_not_drive_and_set_canary_scale_without_one_are_invalid_spec() {
    let mut c = routed(1, json!({"steps": [{"setWeight": 10}]}));
    c.rollout
        .spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .traffic_routing =
        Some(serde_json::from_value(json!({"ambassador": {"mappings": ["web"]}})).unwrap());
    let plan = c.reconcile(at(0));
    assert_eq!(
        plan.status.message,
        "InvalidSpec: The Rollout \"web\" is invalid: spec.strategy.canary.trafficRouting.ambassador: Forbidden: not supported by canaryd: it drives Istio, NGINX Ingress, ALB, SMI, Traefik and the Gateway API plugin"
    );
    assert!(plan.route.is_none());

    let mut c = MemoryCluster::new(rollout(
        1,
        json!({"steps": [{"setCanaryScale": {"replicas": 1}}]}),
    ));
    let plan = c.reconcile(at(0));
    assert!(
        plan.status.message.ends_with("spec.strategy.trafficRouting: Required value: SetCanaryScale requires TrafficRouting to be set"),
        "{}",
        plan.status.message
    );

    let mut c = MemoryCluster::new(rollout(1, json!({"scaleDownDelaySeconds": 30})));
    let plan = c.reconcile(at(0));
    assert!(
        plan.status.message.ends_with("spec.strategy.scaleDownDelaySeconds: Invalid value: 30: Canary scaleDownDelaySeconds can only be used with traffic routing"),
        "{}",
        plan.status.message
    );
}

/// `maxTrafficWeight: max`, through NGINX: Argo allows another total only with NGINX and the plugins.
fn with_max_traffic_weight(c: &mut MemoryCluster, max: i32) {
    let canary = c.rollout.spec.strategy.as_mut().unwrap().canary.as_mut();
    let routing = canary.unwrap().traffic_routing.as_mut().unwrap();
    routing.max_traffic_weight = Some(max);
    routing.istio = None;
    routing.nginx = Some(serde_json::from_value(json!({"stableIngress": "web"})).unwrap());
}

#[test]
fn past_the_last_step_the_canary_is_scaled_to_all_of_max_traffic_weight_and_promoted() {
    // Argo's GetCurrentSetWeight: past the last step the weight is maxTrafficWeight, not 100.
    let mut c = routed(
        10,
        json!({"steps": [{"setWeight": 50}, {"pause": {"duration": 5}}]}),
    );
    with_max_traffic_weight(&mut c, 1000);
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(replicas(&c), [10, 1], "ceil(50 × 10 / 1000)");
    assert_eq!(weights(&c).canary.weight, 50);
    assert_eq!(weights(&c).stable.weight, 950);
    run(&mut c, at(15));
    run(&mut c, at(16));
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    assert_eq!(replicas(&c), [10, 10]);
}

#[test]
fn set_weight_is_checked_against_max_traffic_weight_as_argo_does() {
    let mut c = routed(10, json!({"steps": [{"setWeight": 500}, {"pause": {}}]}));
    with_max_traffic_weight(&mut c, 1000);
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(replicas(&c), [10, 5], "ceil(500 × 10 / 1000)");
    assert_eq!(weights(&c).canary.weight, 500);

    let mut c = routed(10, json!({"steps": [{"setWeight": 50}]}));
    with_max_traffic_weight(&mut c, 10);
    let plan = c.reconcile(at(0));
    assert!(
        plan.status.message.ends_with(
            "spec.strategy.steps[0].setWeight: Invalid value: 50: SetWeight needs to be between 0 and 10"
        ),
        "{}",
        plan.status.message
    );
}

#[test]
fn a_weight_in_the_status_out_of_range_is_planned_without_overflow() {
    // promote --full keeps the weight the status says was applied, whatever was written there.
    let mut c = routed(4, json!({"steps": [{"setWeight": 20}, {"pause": {}}]}));
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    c.patch_status(|s| {
        s.promote_full = true;
        if let Some(w) = s.canary.weights.as_mut() {
            w.canary.weight = i32::MIN;
        }
    });
    let plan = c.plan(at(20));
    assert!(
        plan.route
            .as_ref()
            .is_none_or(|r| (0..=100).contains(&r.weight)),
        "{:?}",
        plan.route
    );
}

/// The in-memory routers a rehearsal plays on create the TrafficSplit as the daemon does (Argo's SMI
/// SetWeight), tell it once with `TrafficSplitCreated`, and show its backends' weights at each route.
#[test]
fn a_rehearsal_shows_the_traffic_split_the_rollout_creates() {
    use canaryd::engine::routing::memory::Routers;
    let mut c = MemoryCluster::new(rollout(
        4,
        json!({"canaryService": "web-canary", "stableService": "web-stable",
               "trafficRouting": {"smi": {"rootService": "web"}},
               "steps": [{"setWeight": 20}, {"pause": {}}]}),
    ));
    let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    c.add_service("web-canary", selector.clone());
    c.add_service("web-stable", selector);
    c.routers = Routers::new(&c.rollout, Vec::new()).unwrap();
    run(&mut c, at(0));
    let shown = |c: &MemoryCluster| -> Vec<String> {
        c.routers.shown().iter().map(ToString::to_string).collect()
    };
    assert_eq!(
        shown(&c),
        ["TrafficSplit/web: web-canary 0, web-stable 100"]
    );
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(
        shown(&c),
        ["TrafficSplit/web: web-canary 20, web-stable 80"]
    );
    assert_eq!(
        messages_since(&c, 0, "TrafficSplitCreated"),
        ["TrafficSplit `web` created"]
    );
}

/// A TraefikService among a rehearsal's files, Traefik v3's or v2's (a rehearsal talks to no API server, so
/// needs no `--traefik-api-group`), is re-weighted as the daemon would (Argo's Traefik SetWeight), its other
/// entries kept, and shown at each route.
#[test]
fn a_rehearsal_shows_the_traefik_service_among_its_files() {
    for api_version in ["traefik.io/v1alpha1", "traefik.containo.us/v1alpha1"] {
        rehearsed_traefik_service(api_version);
    }
}

fn rehearsed_traefik_service(api_version: &str) {
    use canaryd::engine::routing::memory::Routers;
    let mut c = MemoryCluster::new(rollout(
        4,
        json!({"canaryService": "web-canary", "stableService": "web-stable",
               "trafficRouting": {"traefik": {"weightedTraefikServiceName": "web"}},
               "steps": [{"setWeight": 20}, {"pause": {}}]}),
    ));
    let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    c.add_service("web-canary", selector.clone());
    c.add_service("web-stable", selector);
    let service = json!({"apiVersion": api_version, "kind": "TraefikService",
        "metadata": {"name": "web", "namespace": "prod"},
        "spec": {"weighted": {"services": [
            {"name": "web-stable", "port": 80}, {"name": "web-canary", "port": 80},
            {"name": "extra", "port": 80, "weight": 5}]}}});
    c.routers = Routers::new(&c.rollout, vec![("traefik.yaml:1".into(), service)]).unwrap();
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let shown: Vec<String> = c.routers.shown().iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        ["TraefikService/web: web-stable 80, web-canary 20, extra 5"],
        "{api_version}"
    );
}

/// An ALB Ingress among a rehearsal's files gets the action annotation the daemon would write, and the route
/// shows the target groups' shares.
#[test]
fn a_rehearsal_shows_the_alb_ingress_among_its_files() {
    use canaryd::engine::routing::memory::Routers;
    let mut c = MemoryCluster::new(rollout(
        4,
        json!({"canaryService": "web-canary", "stableService": "web-stable",
               "trafficRouting": {"alb": {"ingress": "web", "servicePort": 80}},
               "steps": [{"setWeight": 20}, {"pause": {}}]}),
    ));
    let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    c.add_service("web-canary", selector.clone());
    c.add_service("web-stable", selector);
    let ingress = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "prod"},
        "spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "web-stable", "port": {"name": "use-annotation"}}}}]}}]}});
    c.routers = Routers::new(&c.rollout, vec![("ingress.yaml:1".into(), ingress)]).unwrap();
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    let shown: Vec<String> = c.routers.shown().iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["Ingress/web: web-canary 20, web-stable 80"]);
    assert_eq!(
        messages_since(&c, 0, "PatchingALBIngress"),
        [
            "Updating Ingress `web` to desiredWeight '0'",
            "Updating Ingress `web` to desiredWeight '20'"
        ]
    );
}

/// The canary ReplicaSet as if `available` of its pods were available, the others still starting.
fn canary_available(c: &mut MemoryCluster, available: i32) {
    let hash = c.status().current_pod_hash;
    let rs = (c.replica_sets.iter_mut())
        .find(|r| {
            r.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.ends_with(&hash))
        })
        .expect("the canary ReplicaSet");
    let spec = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    rs.status = Some(ReplicaSetStatus {
        replicas: spec,
        ready_replicas: Some(available),
        available_replicas: Some(available),
        ..Default::default()
    });
}

/// The update to `web:2` of 10 replicas through `setWeight: 20` and `setWeight: 60`, with `threshold`, its
/// canary's pods becoming available one by one: the step index, canary weight and whether the Rollout is
/// promoted after each.
fn stepped_with(threshold: Option<Value>) -> Vec<(i32, i32, i32, bool)> {
    let mut canary = json!({"steps": [{"setWeight": 20}, {"setWeight": 60}]});
    if let Some(threshold) = threshold {
        canary["replicaProgressThreshold"] = threshold;
    }
    let mut c = routed(10, canary);
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    let mut seen = Vec::new();
    for (n, available) in (0..=10).enumerate() {
        c.settle(at(10 + n as i64), 20);
        canary_available(&mut c, available);
        c.settle(at(10 + n as i64), 20);
        let s = c.status();
        let weight = s.canary.weights.map_or(0, |w| w.canary.weight);
        let promoted = s.stable_rs == s.current_pod_hash;
        seen.push((
            available,
            s.current_step_index.unwrap_or(-1),
            weight,
            promoted,
        ));
    }
    seen
}

/// Argo's `replicaProgressThreshold` (ReplicaProgressThresholdMet): a step goes on, and the weight with it, once
/// that share of the canary's pods for the step is available (here half: 1 of 2, 3 of 6), and the update is
/// promoted once that share of all the replicas is (5 of 10); without it, every pod is waited for.
#[test]
fn a_replica_progress_threshold_lets_a_step_go_on_with_that_share_of_its_pods() {
    let half = stepped_with(Some(json!({"type": "Percent", "value": 50})));
    let all = stepped_with(None);
    // (available, step index, weight, promoted)
    assert_eq!(half[1], (1, 1, 20, false));
    assert_eq!(all[1], (1, 0, 0, false));
    assert_eq!(all[2], (2, 1, 20, false));
    assert_eq!(half[2], (2, 1, 20, false), "2 of 6 is under half");
    assert_eq!(half[3], (3, 2, 60, false));
    assert_eq!(all[5], (5, 1, 20, false));
    assert_eq!(all[6], (6, 2, 60, false));
    assert_eq!(half[5], (5, 2, 0, true));
    assert_eq!(all[9], (9, 2, 60, false));
    assert_eq!(all[10], (10, 2, 0, true));
    // As Argo reads `Pods`: that many available pods, whatever the step asks for.
    let one = stepped_with(Some(json!({"type": "Pods", "value": 1})));
    assert_eq!(one[1], (1, 2, 0, true), "{one:?}");
    // A negative value is Argo's default: every pod.
    assert_eq!(
        stepped_with(Some(json!({"type": "Pods", "value": -1}))),
        all
    );
}
