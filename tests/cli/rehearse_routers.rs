//! `canaryd rehearse` with router objects among the files: the rehearsal shows what the daemon's routers would
//! write and when, including Argo's hold-back of a DestinationRule in subset-only mode and the header and
//! mirror routes of `setHeaderRoute` / `setMirrorRoute` steps (on Istio, the Gateway API plugin and ALB).

use serde_json::Value;

use super::CANARYD;

const SUBSET_ONLY: &str = "tests/fixtures/rehearse/subset-only.yaml";
const HEADER_ROUTES: &str = "tests/fixtures/rehearse/header-routes.yaml";
const GATEWAY_HEADER_ROUTES: &str = "tests/fixtures/rehearse/gateway-header-routes.yaml";
const ALB_HEADER_ROUTES: &str = "tests/fixtures/rehearse/alb-header-routes.yaml";

/// The JSON lines of `canaryd rehearse -o json` of the subset-only Rollout with pods ready `ready_after` later.
fn rehearse_subset_only(ready_after: &str) -> Vec<Value> {
    rehearse(SUBSET_ONLY, ready_after)
}

/// The JSON lines of `canaryd rehearse -o json` of `fixture` with pods ready `ready_after` later.
fn rehearse(fixture: &str, ready_after: &str) -> Vec<Value> {
    let ran = CANARYD.run(&[
        "rehearse",
        "-f",
        fixture,
        "--from",
        "2026-01-01T00:00:00Z",
        "--ready-after",
        ready_after,
        "-o",
        "json",
    ]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    ran.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

/// Argo's shouldDelayDestinationRuleUpdate: in subset-only mode the DestinationRule moves only once the
/// ReplicaSets to receive traffic are fully available, and the weight waits with it; the rehearsal says so
/// and the step's weight lands when the pods are ready, as in the daemon.
#[test]
fn a_destination_rule_held_back_until_the_canary_is_available_is_shown_and_waited_out() {
    let lines = rehearse_subset_only("1m");
    let held = of_type(&lines, "held");
    assert_eq!(
        held.first().map(|h| (&h["time"], &h["message"])),
        Some((
            &Value::from("2026-01-01T00:00:00Z"),
            &Value::from(
                "DestinationRule shop/web-dr: delaying destination rule switch: ReplicaSet \
                 web-64c99bfb9d not fully available"
            )
        )),
        "{lines:#?}"
    );
    let weighted = of_type(&lines, "step")
        .into_iter()
        .find(|s| s["weight"] == 25)
        .expect("the canary reaches weight 25");
    assert_eq!(weighted["time"], "2026-01-01T00:01:00Z", "{weighted}");
    // The routers' own Events, as the daemon publishes them once it wrote the objects among the files.
    let events: Vec<(&str, &str)> = of_type(&lines, "event")
        .iter()
        .filter_map(|e| Some((e["time"].as_str()?, e["message"].as_str()?)))
        .collect();
    assert!(
        events.contains(&(
            "2026-01-01T00:01:00Z",
            "VirtualService `web-vsvc` set to desiredWeight '25'"
        )),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|(_, m)| m.starts_with("DestinationRule web-dr subset updated")),
        "{events:#?}"
    );
    assert_eq!(
        lines.last().map(|l| &l["outcome"]),
        Some(&Value::from("promoted"))
    );
}

#[test]
fn pods_ready_at_once_never_hold_the_destination_rule() {
    let lines = rehearse_subset_only("0s");
    assert!(of_type(&lines, "held").is_empty(), "{lines:#?}");
    assert_eq!(
        lines.last().map(|l| &l["outcome"]),
        Some(&Value::from("promoted"))
    );
}

type Weights = Vec<(String, i64)>;

/// Each step line's step name and its first router's weights.
fn step_weights(lines: &[Value]) -> Vec<(String, Weights)> {
    of_type(lines, "step")
        .iter()
        .map(|s| {
            let weights = s["routers"][0]["weights"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|w| {
                    (
                        w[0].as_str().unwrap_or("").to_string(),
                        w[1].as_i64().unwrap_or(-1),
                    )
                })
                .collect();
            (s["name"].as_str().unwrap_or("").to_string(), weights)
        })
        .collect()
}

fn w(pairs: &[(&str, i64)]) -> Weights {
    pairs.iter().map(|(n, w)| (n.to_string(), *w)).collect()
}

/// Argo's header-routing example (docs/features/traffic-management): each route step's route shows in the
/// VirtualService from the next step on, ahead of `primary`, in managedRoutes order; the mirror route
/// follows the weights as Argo's SetWeight moves it; a step with only the name removes its route, and the
/// promotion removes what is left.
#[test]
fn header_and_mirror_routes_show_at_each_step_and_are_gone_after_promotion() {
    let lines = rehearse(HEADER_ROUTES, "0s");
    let steps = step_weights(&lines);
    let primary = [("web-stable", 80), ("web-canary", 20)];
    let header = ("set-header-1: web-canary", 100);
    let mirror = [
        ("mirror-route: web-stable", 80),
        ("mirror-route: web-canary", 20),
        ("mirror-route: mirror to web-canary", 35),
    ];
    let with = |extra: &[(&str, i64)]| w(&[extra, &primary[..]].concat());
    let expected = vec![
        (
            "setWeight: 20".to_string(),
            w(&[("web-stable", 100), ("web-canary", 0)]),
        ),
        ("setWeight: 20".to_string(), with(&[])),
        ("setHeaderRoute: set-header-1".to_string(), with(&[])),
        ("setMirrorRoute: mirror-route".to_string(), with(&[header])),
        (
            "pause: 5m".to_string(),
            with(&[&[header][..], &mirror].concat()),
        ),
        (
            "setHeaderRoute: set-header-1".to_string(),
            with(&[&[header][..], &mirror].concat()),
        ),
        ("pause: 5m".to_string(), with(&mirror)),
        ("done".to_string(), with(&mirror)),
        (
            "done".to_string(),
            w(&[
                ("mirror-route: web-stable", 0),
                ("mirror-route: web-canary", 100),
                ("mirror-route: mirror to web-canary", 35),
                ("web-stable", 0),
                ("web-canary", 100),
            ]),
        ),
        (
            "done".to_string(),
            w(&[("web-stable", 100), ("web-canary", 0)]),
        ),
    ];
    assert_eq!(steps, expected, "{lines:#?}");
    assert_eq!(
        lines.last().map(|l| &l["outcome"]),
        Some(&Value::from("promoted"))
    );
}

/// Argo's Istio router records each route write in its own Event (its istio.go SetHeaderRoute,
/// SetMirrorRoute, RemoveManagedRoutes, SetWeight): the rehearsal shows them as the daemon publishes them,
/// once per write, in Argo's order.
#[test]
fn header_and_mirror_route_writes_are_told_in_argos_events() {
    let lines = rehearse(HEADER_ROUTES, "0s");
    let told: Vec<(&str, &str)> = of_type(&lines, "event")
        .iter()
        .filter(|e| e["reason"] == "Updated VirtualService")
        .filter_map(|e| Some((e["time"].as_str()?, e["message"].as_str()?)))
        .collect();
    let (start, resumed, promoted) = (
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:05:00Z",
        "2026-01-01T00:10:00Z",
    );
    assert_eq!(
        told,
        [
            (start, "VirtualService `web-vsvc` set to desiredWeight '20'"),
            (
                start,
                "VirtualService `web-vsvc` set headerRoute 'set-header-1'"
            ),
            (
                start,
                "VirtualService `web-vsvc` set mirrorRoute 'mirror-route'"
            ),
            (
                resumed,
                "VirtualService `web-vsvc` set headerRoute 'set-header-1'"
            ),
            (
                promoted,
                "VirtualService `web-vsvc` set to desiredWeight '100'"
            ),
            (
                promoted,
                "VirtualService `web-vsvc` removed all managed routes."
            ),
            (
                promoted,
                "VirtualService `web-vsvc` set to desiredWeight '0'"
            ),
        ],
        "{lines:#?}"
    );
}

/// The Gateway API plugin's header routes (its e2e advanced-header-based-httproute): each header step's rule
/// shows in the HTTPRoute from the next step on, after the weighted rule, and keeps its backend (the Gateway
/// API's default weight) while the weighted rule moves; the mirror step changes nothing, as in the plugin;
/// the promotion removes the rules.
#[test]
fn gateway_api_header_rules_show_at_each_step_and_are_gone_after_promotion() {
    let lines = rehearse(GATEWAY_HEADER_ROUTES, "0s");
    let at = |canary: i64, rules: &[&str]| {
        let mut out = w(&[("web-stable", 100 - canary), ("web-canary", canary)]);
        out.extend(rules.iter().map(|r| (format!("{r}: web-canary"), 1)));
        out
    };
    let one = ["canary-route1"];
    let two = ["canary-route1", "canary-route2"];
    let expected: Vec<(String, Weights)> = [
        ("setWeight: 30", at(0, &[])),
        ("setWeight: 30", at(30, &[])),
        ("setHeaderRoute: canary-route1", at(30, &[])),
        ("pause: 5m", at(30, &one)),
        ("setWeight: 60", at(30, &one)),
        ("setWeight: 60", at(60, &one)),
        ("setHeaderRoute: canary-route2", at(60, &one)),
        ("setMirrorRoute: mirror-route", at(60, &two)),
        ("pause: 5m", at(60, &two)),
        ("done", at(60, &two)),
        ("done", at(100, &two)),
        ("done", at(0, &[])),
    ]
    .into_iter()
    .map(|(n, w)| (n.to_string(), w))
    .collect();
    assert_eq!(step_weights(&lines), expected, "{lines:#?}");
    assert_eq!(
        lines.last().map(|l| &l["outcome"]),
        Some(&Value::from("promoted"))
    );
}

/// Argo's ALB router (its SetHeaderRoute, SetWeight): the header step's action (all of it to the canary)
/// shows on the Ingress from the next step on, ahead of the weighted action, and stays while the weight
/// moves; the step with only the name removes it. Each write is told in Argo's `PatchingALBIngress` Event.
#[test]
fn alb_header_routes_show_at_each_step_and_are_told_in_argos_events() {
    let lines = rehearse(ALB_HEADER_ROUTES, "0s");
    let at = |canary: i64, header_route: bool| {
        let route = header_route.then_some(("set-header-1: web-canary", 100));
        let split = [("web-canary", canary), ("web-stable", 100 - canary)];
        w(&route.into_iter().chain(split).collect::<Vec<_>>())
    };
    let expected: Vec<(String, Weights)> = [
        ("setWeight: 20", at(0, false)),
        ("setWeight: 20", at(20, false)),
        ("setHeaderRoute: set-header-1", at(20, false)),
        ("pause: 5m", at(20, true)),
        ("setWeight: 50", at(20, true)),
        ("setWeight: 50", at(50, true)),
        ("pause: 5m", at(50, true)),
        ("setHeaderRoute: set-header-1", at(50, true)),
        ("pause: 5m", at(50, false)),
        ("done", at(50, false)),
        ("done", at(100, false)),
        ("done", at(0, false)),
    ]
    .into_iter()
    .map(|(n, w)| (n.to_string(), w))
    .collect();
    assert_eq!(step_weights(&lines), expected, "{lines:#?}");
    let told: Vec<(&str, &str)> = of_type(&lines, "event")
        .iter()
        .filter(|e| e["reason"] == "PatchingALBIngress")
        .filter_map(|e| Some((e["time"].as_str()?, e["message"].as_str()?)))
        .collect();
    let header = "Updating Ingress `web` to headerRoute 'set-header-1'";
    assert_eq!(
        told,
        [
            (
                "2026-01-01T00:00:00Z",
                "Updating Ingress `web` to desiredWeight '20'"
            ),
            ("2026-01-01T00:00:00Z", header),
            (
                "2026-01-01T00:05:00Z",
                "Updating Ingress `web` to desiredWeight '50'"
            ),
            ("2026-01-01T00:10:00Z", header),
            (
                "2026-01-01T00:15:00Z",
                "Updating Ingress `web` to desiredWeight '100'"
            ),
            (
                "2026-01-01T00:15:00Z",
                "Updating Ingress `web` to desiredWeight '0'"
            ),
        ],
        "{lines:#?}"
    );
    assert_eq!(
        lines.last().map(|l| &l["outcome"]),
        Some(&Value::from("promoted"))
    );
}
