//! The objects a Rollout names, checked as Argo's `getRolloutReferencedResources` and
//! `ValidateRolloutReferencedResources` check them before anything is acted on: InvalidSpec with Argo's
//! `field.Invalid` message, no ReplicaSet created, and cleared once the object or the spec is fixed.

use std::collections::BTreeMap;

use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd::engine::rollout::{Validated, conditions, spec};
use canaryd_testkit::rollout::memory::*;
use serde_json::json;

fn selector(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn invalid(c: &mut MemoryCluster, now: i64) -> String {
    let plan = c.reconcile(at(now));
    assert!(
        plan.writes.is_empty(),
        "nothing is acted on: {:?}",
        plan.writes
    );
    assert_eq!(plan.status.phase, "Degraded");
    assert_eq!(plan.wake_at, Some(at(now + 20)), "looked at again in 20 s");
    plan.status
        .message
        .strip_prefix("InvalidSpec: The Rollout \"web\" is invalid: ")
        .unwrap_or_else(|| panic!("an InvalidSpec message: {}", plan.status.message))
        .to_string()
}

#[test]
fn argos_validate_service_a_selector_label_the_pods_lack_is_invalid_until_the_template_carries_it()
{
    let mut c = MemoryCluster::new(rollout(
        1,
        json!({"canaryService": "web-canary", "stableService": "web-stable",
               "steps": [{"setWeight": 50}]}),
    ));
    c.add_service("web-canary", selector(&[("app", "web"), ("tier", "front")]));
    c.add_service("web-stable", selector(&[("app", "web")]));
    assert_eq!(
        invalid(&mut c, 0),
        "spec.strategy.canary.canaryService: Invalid value: \"web-canary\": Service \"web-canary\" has unmatch label \"tier\" in rollout"
    );
    assert!(c.replica_sets.is_empty());

    c.edit_spec(|s| {
        let labels = s
            .template
            .as_mut()
            .and_then(|t| t.pointer_mut("/metadata/labels"))
            .and_then(|l| l.as_object_mut())
            .expect("template labels");
        labels.insert("tier".into(), json!("front"));
    });
    run(&mut c, at(1));
    assert_eq!(c.status().phase, "Healthy");
    assert!(conditions::get(&c.status(), "InvalidSpec").is_none());
}

#[test]
fn argos_get_referenced_services_the_stable_service_then_the_canary_one_then_the_templates() {
    let mut c = MemoryCluster::new(rollout(
        1,
        json!({"canaryService": "web-canary", "stableService": "web-stable",
               "analysis": {"templates": [{"templateName": "later"}]}}),
    ));
    assert_eq!(
        invalid(&mut c, 0),
        "spec.strategy.canary.stableService: Invalid value: \"web-stable\": service \"web-stable\" not found"
    );
    c.add_service("web-stable", selector(&[("app", "web")]));
    assert_eq!(
        invalid(&mut c, 1),
        "spec.strategy.canary.canaryService: Invalid value: \"web-canary\": service \"web-canary\" not found"
    );
    c.add_service("web-canary", selector(&[("app", "web")]));
    assert!(
        invalid(&mut c, 2).starts_with("spec.strategy.canary.analysis.templates: Invalid value: \"later\": AnalysisTemplate 'later' not found"),
        "the templates come after the Services"
    );
}

/// Argo's getRolloutValidationErrors: getRolloutReferencedResources stops at the first object missing (the
/// canary Service, then a template) before ValidateRolloutReferencedResources looks at a Service read (its
/// selector's labels).
#[test]
fn argos_referenced_resources_every_missing_object_before_a_service_that_does_not_fit() {
    let mut c = MemoryCluster::new(rollout(
        1,
        json!({"canaryService": "web-canary", "stableService": "web-stable",
               "analysis": {"templates": [{"templateName": "later"}]}}),
    ));
    c.add_service("web-stable", selector(&[("app", "web"), ("tier", "front")]));
    assert_eq!(
        invalid(&mut c, 0),
        "spec.strategy.canary.canaryService: Invalid value: \"web-canary\": service \"web-canary\" not found"
    );
    c.add_service("web-canary", selector(&[("app", "web")]));
    assert_eq!(
        invalid(&mut c, 1),
        "spec.strategy.canary.analysis.templates: Invalid value: \"later\": AnalysisTemplate 'later' not found"
    );
    with_analysis_template(
        &mut c,
        "later",
        json!([{"name": "m", "interval": "1m", "provider": {"prometheus": {"query": "up"}}}]),
    );
    assert_eq!(
        invalid(&mut c, 2),
        "spec.strategy.canary.stableService: Invalid value: \"web-stable\": Service \"web-stable\" has unmatch label \"tier\" in rollout"
    );
}

#[test]
fn argos_max_traffic_weight_is_invalid_with_istio_alone_and_valid_with_nginx() {
    let canary = |routing: serde_json::Value| {
        json!({"canaryService": "web-canary", "stableService": "web-stable",
               "trafficRouting": routing, "steps": [{"setWeight": 300}]})
    };
    let mut c = MemoryCluster::new(rollout(
        1,
        canary(
            json!({"maxTrafficWeight": 1000, "istio": {"virtualService": {"name": "web-vsvc"}}}),
        ),
    ));
    assert_eq!(
        invalid(&mut c, 0),
        "spec.strategy.trafficRouting.maxTrafficWeight: Invalid value: 1000: Canary maxTrafficWeight in traffic routing only supported in Nginx and Plugins"
    );
    let nginx = rollout(
        1,
        canary(json!({"maxTrafficWeight": 1000, "nginx": {"stableIngress": "web"}})),
    );
    assert_eq!(spec::check(&nginx), Vec::new());
}

#[test]
fn argos_validate_virtual_service_a_missing_object_or_route_is_invalid_and_one_not_read_is_not_checked()
 {
    use canaryd::engine::routing::RouterObject;
    use canaryd::engine::routing::memory::Routers;
    let r = rollout(
        1,
        json!({"canaryService": "web-canary", "stableService": "web-stable",
               "trafficRouting": {"istio": {"virtualService": {"name": "web-vsvc", "routes": ["primary"]}}},
               "steps": [{"setWeight": 20}]}),
    );
    let missing = RouterObject {
        kind: "VirtualService",
        namespace: "prod".into(),
        name: "web-vsvc".into(),
        object: None,
    };
    let found: Vec<String> = canaryd::engine::rollout::references::routers(&r, &[missing])
        .into_iter()
        .map(|f| format!("{}: {}", f.path, f.message))
        .collect();
    assert_eq!(
        found,
        [
            "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"web-vsvc\": virtualservices.networking.istio.io \"web-vsvc\" not found"
        ]
    );
    assert_eq!(
        canaryd::engine::rollout::references::routers(&r, &[]),
        Vec::new(),
        "one not read (a rehearsal without it among its files) is not checked"
    );

    // Among a rehearsal's files, without the route the Rollout names: InvalidSpec before any ReplicaSet.
    let unfit = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "web-vsvc", "namespace": "prod"},
        "spec": {"http": [{"name": "other", "route": [{"destination": {"host": "web-stable"}, "weight": 100}]}]}});
    let mut c = MemoryCluster::new(r.clone());
    c.add_service("web-canary", selector(&[("app", "web")]));
    c.add_service("web-stable", selector(&[("app", "web")]));
    c.routers = Routers::new(&r, vec![("vsvc.yaml:1".into(), unfit)]).expect("routers");
    let message = invalid(&mut c, 0);
    assert!(
        message.starts_with(
            "spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"web-vsvc\": "
        ) && message.contains("primary"),
        "{message}"
    );
    assert!(c.replica_sets.is_empty());
}

#[test]
fn each_router_object_read_as_missing_or_unfit_is_named_by_its_field_with_the_servers_not_found() {
    use canaryd::engine::routing::RouterObject;
    let routed = |routing: serde_json::Value| {
        rollout(
            1,
            json!({"canaryService": "web-canary", "stableService": "web-stable",
                   "trafficRouting": routing, "steps": [{"setWeight": 20}]}),
        )
    };
    let read = |kind: &'static str, name: &str, object: Option<serde_json::Value>| RouterObject {
        kind,
        namespace: "prod".into(),
        name: name.into(),
        object: object.map(std::sync::Arc::new),
    };
    let first = |r: &canaryd::api::Rollout, objects: &[RouterObject]| {
        canaryd::engine::rollout::references::routers(r, objects)
            .into_iter()
            .map(|f| format!("{}: {}", f.path, f.message))
            .next()
            .unwrap_or_default()
    };
    let at = "spec.strategy.canary.trafficRouting";
    let dr = routed(json!({"istio": {"virtualService": {"name": "web-vsvc"},
        "destinationRule": {"name": "web-dr", "canarySubsetName": "canary", "stableSubsetName": "stable"}}}));
    assert_eq!(
        first(&dr, &[read("DestinationRule", "web-dr", None)]),
        format!(
            "{at}.istio.destinationRule.name: Invalid value: \"web-dr\": destinationrules.networking.istio.io \"web-dr\" not found"
        )
    );
    let nginx = routed(json!({"nginx": {"stableIngress": "web"}}));
    assert_eq!(
        first(&nginx, &[read("Ingress", "web", None)]),
        format!(
            "{at}.nginx.stableIngress: Invalid value: \"web\": ingress.networking.k8s.io \"web\" not found"
        )
    );
    // Argo's validateNginxIngress: the stable Ingress must send to the stable Service.
    let elsewhere = json!({"metadata": {"name": "web", "namespace": "prod"}, "spec": {"rules": [{"http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "other", "port": {"number": 80}}}}]}}]}});
    assert_eq!(
        first(&nginx, &[read("Ingress", "web", Some(elsewhere))]),
        format!(
            "{at}.nginx.stableIngress: Invalid value: \"web\": ingress `web` has no rules using service web-stable backend"
        )
    );
    let gateway = routed(json!({"plugins": {"argoproj-labs/gatewayAPI": {"httpRoute": "web"}}}));
    assert_eq!(
        first(&gateway, &[read("HTTPRoute", "web", None)]),
        format!(
            "{at}.plugins.argoproj-labs/gatewayAPI: Invalid value: \"web\": httproutes.gateway.networking.k8s.io \"web\" not found"
        )
    );
    // Argo's validateAlbIngress: each Ingress must route to rootService (else the stable Service).
    let alb = routed(
        json!({"alb": {"ingresses": ["web", "api"], "rootService": "web-root", "servicePort": 80}}),
    );
    assert_eq!(
        first(&alb, &[read("Ingress", "web", None)]),
        format!(
            "{at}.alb.ingresses: Invalid value: \"web\": ingress.networking.k8s.io \"web\" not found"
        )
    );
    let root = json!({"metadata": {"name": "api", "namespace": "prod"}, "spec": {"rules": [{"http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web-root", "port": {"name": "use-annotation"}}}}]}}]}});
    let mut stable_only = root.clone();
    stable_only["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] =
        json!("web-stable");
    stable_only["metadata"]["name"] = json!("web");
    assert_eq!(
        first(
            &alb,
            &[
                read("Ingress", "web", Some(stable_only)),
                read("Ingress", "api", Some(root))
            ]
        ),
        format!(
            "{at}.alb.ingresses: Invalid value: \"web\": ingress `web` has no rules using service web-root backend"
        )
    );
}

#[test]
fn a_plans_checks_are_kept_for_the_next_plan_from_the_same_objects_and_made_again_at_other_hashes()
{
    // The reconcile loop keeps them for the plans it runs on in memory from one read, which differ only in
    // status; of the status the checks read only the ReplicaSet hashes the router objects are checked at.
    let mut c = MemoryCluster::new(rollout(
        1,
        json!({"canaryService": "web-canary", "stableService": "web-stable",
               "steps": [{"setWeight": 50}]}),
    ));
    c.add_service("web-stable", selector(&[("app", "web")]));
    let validated = Validated::default();
    let missing = c.plan_checked(at(0), &validated);
    assert_eq!(
        missing.status.phase, "Degraded",
        "{}",
        missing.status.message
    );

    c.add_service("web-canary", selector(&[("app", "web")]));
    let fresh = c.plan(at(0));
    assert_ne!(fresh.status.phase, "Degraded", "{}", fresh.status.message);
    let kept = c.plan_checked(at(0), &validated);
    assert_eq!(kept.status.message, missing.status.message, "checked once");

    c.rollout.status.get_or_insert_default().current_pod_hash = "another".to_string();
    let other = c.plan_checked(at(0), &validated);
    assert_ne!(other.status.phase, "Degraded", "{}", other.status.message);
}
