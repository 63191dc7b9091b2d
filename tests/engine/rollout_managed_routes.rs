//! Header and mirror routes on the planner (`engine::routing::managed_routes`): Argo's checks of the
//! `setHeaderRoute`/`setMirrorRoute` steps and `managedRoutes` with its messages (ValidateRolloutStrategyCanary,
//! its validation_test cases), and what each reconcile hands the routers (`Route::managed`, Argo's
//! reconcileTrafficRouting): the current step's route set once past the first revision, every managed route
//! removed while the canary has no available pod, once promoted and on an abort. The steps are the examples
//! of Argo's docs/features/traffic-management/index.md.

use std::collections::BTreeMap;

use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd::engine::rollout::spec;
use canaryd::engine::routing::managed_routes::StepRoute;
use canaryd_testkit::rollout::memory::*;
use serde_json::{Value, json};

const HEADER: &str = "set-header-1";
const MIRROR: &str = "mirror-route";

fn header_step() -> Value {
    json!({"setHeaderRoute": {"name": HEADER, "match": [
        {"headerName": "Custom-Header1", "headerValue": {"exact": "Mozilla"}},
        {"headerName": "Custom-Header2", "headerValue": {"prefix": "Mozilla"}},
        {"headerName": "Custom-Header3", "headerValue": {"regex": "Mozilla(.*)"}}
    ]}})
}

fn mirror_step() -> Value {
    json!({"setMirrorRoute": {"name": MIRROR, "percentage": 35,
        "match": [{"method": {"exact": "GET"}, "path": {"prefix": "/"}}]}})
}

/// The docs' header and mirror examples in one Rollout behind Istio.
fn canary() -> Value {
    json!({
        "canaryService": "web-canary", "stableService": "web-stable",
        "trafficRouting": {
            "managedRoutes": [{"name": HEADER}, {"name": MIRROR}],
            "istio": {"virtualService": {"name": "web-vsvc", "routes": ["primary"]}}
        },
        "steps": [
            {"setWeight": 20}, header_step(), mirror_step(), {"pause": {}},
            {"setHeaderRoute": {"name": HEADER}}, {"pause": {}}
        ]
    })
}

fn routed(canary: Value) -> MemoryCluster {
    let mut c = MemoryCluster::new(rollout(4, canary));
    let selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    c.add_service("web-canary", selector.clone());
    c.add_service("web-stable", selector);
    c
}

/// Reconciles at `now` as `run` does, noting what each plan does to the managed routes (`remove`, then
/// `set <name>` or `clear <name>` for a step without `match`), repeats folded.
fn run_noting(c: &mut MemoryCluster, now: jiff::Timestamp, log: &mut Vec<String>) {
    for _ in 0..30 {
        let became_available = c.make_available();
        let before = c.rollout.status.clone();
        let plan = c.reconcile(now);
        let managed = plan
            .route
            .as_ref()
            .map(|r| r.managed.clone())
            .unwrap_or_default();
        let mut noted = Vec::new();
        if !managed.remove.is_empty() {
            noted.push(format!("remove {}", managed.remove.join(" ")));
        }
        match &managed.set {
            Some(StepRoute::Header(h)) if h.matches.is_some() => {
                noted.push(format!("set {}", h.name))
            }
            Some(StepRoute::Mirror(m)) if m.matches.is_some() => {
                noted.push(format!("set {}", m.name))
            }
            Some(route) => noted.push(format!("clear {}", route.name())),
            None => {}
        }
        for n in noted {
            if log.last() != Some(&n) {
                log.push(n);
            }
        }
        if plan.writes.is_empty() && c.rollout.status == before && !became_available {
            return;
        }
    }
    panic!("the planner did not settle: {:#?}", c.status());
}

fn promote(c: &mut MemoryCluster) {
    c.patch_status(|s| s.pause_conditions.clear());
}

#[test]
fn each_route_step_sets_its_route_once_the_canary_is_up_and_promotion_removes_them_all() {
    let mut c = routed(canary());
    let mut log = Vec::new();
    run_noting(&mut c, at(0), &mut log);
    // Argo's `revision > 1`: the first deploy sets no route (it removes the ones it would own).
    assert!(log.iter().all(|l| !l.starts_with("set")), "{log:?}");
    log.clear();

    set_image(&mut c, "web:2");
    run_noting(&mut c, at(10), &mut log);
    assert_eq!(phase(&c), ("Paused".into(), "CanaryPauseStep".into()));
    assert_eq!(c.status().current_step_index, Some(3));
    assert_eq!(
        log,
        [
            // The new canary has no available pod yet: nothing may route to it.
            format!("remove {HEADER} {MIRROR}"),
            format!("set {HEADER}"),
            format!("set {MIRROR}"),
        ]
    );
    log.clear();

    promote(&mut c);
    run_noting(&mut c, at(20), &mut log);
    assert_eq!(c.status().current_step_index, Some(5));
    assert_eq!(log, [format!("clear {HEADER}")]);
    log.clear();

    promote(&mut c);
    run_noting(&mut c, at(30), &mut log);
    assert_eq!(phase(&c), ("Healthy".into(), String::new()));
    assert_eq!(log, [format!("remove {HEADER} {MIRROR}")]);
}

#[test]
fn an_abort_removes_every_managed_route() {
    let mut c = routed(canary());
    run(&mut c, at(0));
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    assert_eq!(c.status().current_step_index, Some(3));
    let mut log = Vec::new();
    c.patch_status(|s| s.abort = true);
    run_noting(&mut c, at(20), &mut log);
    assert_eq!(log, [format!("remove {HEADER} {MIRROR}")]);
}

/// The findings `spec::check` reports on `web` with the canary strategy `canary`, as the InvalidSpec
/// condition and `validate` word them.
fn findings(canary: Value) -> Vec<String> {
    spec::check(&rollout(1, canary))
        .into_iter()
        .map(|f| format!("{}: {}", f.path, f.message))
        .collect()
}

fn with(routing: Value, steps: Value) -> Value {
    json!({"canaryService": "web-canary", "stableService": "web-stable",
           "trafficRouting": routing, "steps": steps})
}

fn istio(managed: Value) -> Value {
    json!({"managedRoutes": managed, "istio": {"virtualService": {"name": "web-vsvc"}}})
}

#[test]
fn argos_examples_of_header_and_mirror_routes_are_valid() {
    assert_eq!(findings(canary()), Vec::<String>::new());
}

#[test]
fn each_header_and_mirror_route_mistake_gets_argos_message() {
    let at = "spec.strategy.steps[0]";
    let cases = [
        // TestValidateRolloutStrategyCanarySetHeaderRoute: no router.
        (
            json!({"steps": [{"setHeaderRoute": {"name": "h", "match": [{"headerName": "agent", "headerValue": {"exact": "chrome"}}]}}]}),
            format!(
                "{at}.setHeaderRoute: Invalid value: {{\"name\":\"h\",\"match\":[{{\"headerName\":\"agent\",\"headerValue\":{{\"exact\":\"chrome\"}}}}]}}: \
                 SetHeaderRoute requires TrafficRouting, supports Istio and ALB and Apisix"
            ),
        ),
        // TestValidateRolloutStrategyCanarySetMirrorRoute: a router that does not mirror.
        (
            with(json!({"managedRoutes": [{"name": "m"}], "nginx": {"stableIngress": "web"}}),
                 json!([{"setMirrorRoute": {"name": "m"}}])),
            format!("{at}.setMirrorRoute: Invalid value: {{\"name\":\"m\"}}: SetMirrorRoute requires TrafficRouting, supports Istio and Plugins"),
        ),
        // NGINX takes neither (Argo's NGINX router ignores them): canary-by-header annotations instead.
        (
            with(json!({"managedRoutes": [{"name": "h"}], "nginx": {"stableIngress": "web"}}),
                 json!([{"setHeaderRoute": {"name": "h"}}])),
            format!("{at}.setHeaderRoute: Invalid value: {{\"name\":\"h\"}}: SetHeaderRoute requires TrafficRouting, supports Istio and ALB and Apisix"),
        ),
        (
            with(json!({"istio": {"virtualService": {"name": "web-vsvc"}}}), json!([header_step()])),
            "spec.strategy.trafficRouting.managedRoutes: Required value: Rollout has missing field 'spec.strategy.canary.trafficRouting.managedRoutes'".to_string(),
        ),
        (
            with(istio(json!([{"name": "not-in-steps"}])), json!([header_step()])),
            format!("{at}.setHeaderRoute: Invalid value: \"{HEADER}\": Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes"),
        ),
        (
            with(istio(json!([{"name": "h"}])),
                 json!([{"setHeaderRoute": {"name": "h", "match": [{"headerName": "agent", "headerValue": {"exact": "a", "prefix": "b"}}]}}])),
            format!("{at}.setHeaderRoute.match[0]: Invalid value: {{\"exact\":\"a\",\"prefix\":\"b\"}}: StringMatch match value must have exactly one of the following: exact, regex, prefix"),
        ),
        (
            with(istio(json!([{"name": "h"}])),
                 json!([{"setHeaderRoute": {"name": "h", "match": [{"headerName": "agent"}]}}])),
            format!("{at}.setHeaderRoute.match[0]: Invalid value: null: StringMatch value missed, match value must have one of the following: exact, regex, prefix"),
        ),
        (
            with(istio(json!([{"name": "m"}])),
                 json!([{"setMirrorRoute": {"name": "m", "match": [{"path": {}}]}}])),
            format!("{at}.setMirrorRoute.match[0]: Invalid value: {{}}: StringMatch value missed, match value must have one of the following: exact, regex, prefix"),
        ),
        // TestValidateRolloutStrategyCanarySetHeaderRoutingALB: ALB matches exact values only.
        (
            with(json!({"managedRoutes": [{"name": "h"}], "alb": {"ingress": "i"}}),
                 json!([{"setHeaderRoute": {"name": "h", "match": [{"headerName": "agent", "headerValue": {"prefix": "p"}}]}}])),
            format!("{at}.setHeaderRoute.match[0]: Invalid value: {{\"prefix\":\"p\"}}: SetHeaderRoute match value invalid. ALB supports 'exact' value only"),
        ),
    ];
    for (canary, expected) in cases {
        let got = findings(canary.clone());
        assert_eq!(got.first(), Some(&expected), "{canary}: {got:#?}");
    }
}

/// The Gateway API plugin takes header routes (and does nothing with mirror routes), as Argo lets it.
#[test]
fn route_steps_with_the_gateway_api_plugin_are_accepted() {
    for step in [
        json!({"setHeaderRoute": {"name": "h", "match": [{"headerName": "agent", "headerValue": {"exact": "x"}}]}}),
        json!({"setHeaderRoute": {"name": "h"}}),
        json!({"setMirrorRoute": {"name": "h", "match": [{"method": {"exact": "GET"}}]}}),
    ] {
        let canary = with(
            json!({"managedRoutes": [{"name": "h"}], "plugins": {"argoproj-labs/gatewayAPI": {"httpRoute": "web"}}}),
            json!([step]),
        );
        assert_eq!(findings(canary.clone()), Vec::<String>::new(), "{canary}");
        assert_eq!(spec::check(&rollout(1, canary)), [], "{step}");
    }
}

#[test]
fn managed_routes_that_do_not_read_are_invalid_spec() {
    let got = findings(with(
        istio(json!([{"name": 1}])),
        json!([{"setWeight": 10}]),
    ));
    assert_eq!(
        got,
        [
            "spec.strategy.canary.trafficRouting.managedRoutes: [0].name: invalid type: integer `1`, expected a string"
        ]
    );
}
