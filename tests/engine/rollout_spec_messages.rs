//! The InvalidSpec condition of a Rollout whose spec Argo's `ValidateRollout` refuses, word for word: Argo's
//! `field.Error`s (`<path>: Invalid value: <value>: <detail>`, `Required value`, ...), the first one, in
//! `ValidateRolloutSpec`'s order, under `The Rollout "web" is invalid: ` (createInvalidRolloutCondition).
//! Each test names the Go function whose message it expects; Argo's validation_test.go is the evidence
//! where it compares the whole error. What canaryd refuses that Argo does not check keeps canaryd's words in
//! `Forbidden`'s form.

use canaryd::api::Rollout;
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd::engine::rollout::{conditions, spec};
use canaryd_testkit::rollout::memory::*;
use serde_json::{Value, json};

/// The InvalidSpec message of `web` with the canary strategy `canary`, its spec changed by `change`, on its
/// first reconcile; nothing is acted on.
fn invalid_spec(canary: Value, change: impl FnOnce(&mut Value)) -> String {
    let mut value = serde_json::to_value(rollout(1, canary)).expect("a Rollout serialises");
    change(&mut value["spec"]);
    let rollout: Rollout = serde_json::from_value(value).expect("the changed Rollout decodes");
    let mut c = MemoryCluster::new(rollout);
    let plan = c.reconcile(at(0));
    assert!(
        plan.writes.is_empty(),
        "nothing is acted on: {:?}",
        plan.writes
    );
    let invalid = conditions::get(&plan.status, "InvalidSpec").expect("an InvalidSpec condition");
    assert_eq!(invalid.status, "True");
    invalid.message.clone()
}

fn canary_error(canary: Value) -> String {
    invalid_spec(canary, |_| {})
}

/// A change to the Rollout's spec, as stored JSON.
type SpecChange = fn(&mut Value);

const PREFIX: &str = "The Rollout \"web\" is invalid: ";

#[test]
fn validate_rollout_spec_replicas_selector_template_and_deadline() {
    let cases: [(&str, SpecChange); 5] = [
        (
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            |s| s["replicas"] = json!(-1),
        ),
        (
            "spec.selector: Required value: Rollout has missing field '.spec.selector'",
            |s| drop(s.as_object_mut().map(|m| m.remove("selector"))),
        ),
        (
            "spec.selector: Invalid value: {}: empty selector is invalid for deployment",
            |s| s["selector"] = json!({"matchLabels": {}}),
        ),
        (
            "spec.template.metadata.labels: Invalid value: {\"app\":\"web\",\"tier\":\"front\"}: \
             `selector` does not match template `labels`",
            |s| {
                s["template"]["metadata"]["labels"] = json!({"tier": "front", "app": "web"});
                s["selector"]["matchLabels"]["tier"] = json!("back");
            },
        ),
        // GetProgressDeadlineSecondsOrDefault: 600 when unset.
        (
            "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds",
            |s| s["minReadySeconds"] = json!(600),
        ),
    ];
    for (expected, change) in cases {
        assert_eq!(
            invalid_spec(json!({}), change),
            format!("{PREFIX}{expected}")
        );
    }
}

#[test]
fn validate_rollout_strategy_names_the_strategy_spec_strategy_strategy() {
    assert_eq!(
        invalid_spec(json!({}), |s| s["strategy"] = json!({})),
        format!(
            "{PREFIX}spec.strategy.strategy: Required value: Rollout has missing field \
             '.spec.strategy.canary or .spec.strategy.blueGreen'"
        )
    );
    assert_eq!(
        invalid_spec(json!({}), |s| s["strategy"]["blueGreen"] =
            json!({"activeService": "a"})),
        format!(
            "{PREFIX}spec.strategy.strategy: Invalid value: \"blueGreen: true canary: true\": \
             Multiple Strategies can not be listed"
        )
    );
}

/// validation_test.go: `spec.strategy.scaleDownDelaySeconds: Invalid value: 60: ...` — Argo's canary checks
/// name the canary fields under `spec.strategy`.
#[test]
fn validate_rollout_strategy_canary_services_and_router_fields() {
    let cases = [
        (
            json!({"scaleDownDelaySeconds": 60}),
            "spec.strategy.scaleDownDelaySeconds: Invalid value: 60: Canary scaleDownDelaySeconds can \
             only be used with traffic routing",
        ),
        (
            json!({"dynamicStableScale": true}),
            "spec.strategy.dynamicStableScale: Invalid value: true: Canary dynamicStableScale can only \
             be used with traffic routing",
        ),
        (
            json!({"canaryService": "web", "stableService": "web"}),
            "spec.strategy.stableService: Invalid value: \"web\": This rollout uses the same service \
             for the stable and canary services, but two different services are required.",
        ),
        // requireCanaryStableServices: the stable Service is checked first.
        (
            json!({"trafficRouting": {"nginx": {"stableIngress": "web"}}}),
            "spec.strategy.stableService: Invalid value: \"\": Canary service and Stable service must \
             to be set to use Traffic Routing",
        ),
        (
            json!({"canaryService": "c", "stableService": "s", "trafficRouting": {
                "maxTrafficWeight": 1000, "istio": {"virtualService": {"name": "vs"}}}}),
            "spec.strategy.trafficRouting.maxTrafficWeight: Invalid value: 1000: Canary \
             maxTrafficWeight in traffic routing only supported in Nginx and Plugins",
        ),
    ];
    for (canary, expected) in cases {
        assert_eq!(canary_error(canary), format!("{PREFIX}{expected}"));
    }
}

/// invalidMaxSurgeMaxUnavailable: the value is maxSurge's, printed as JSON (apimachinery's ErrorBody).
#[test]
fn invalid_max_surge_max_unavailable_shows_max_surge() {
    assert_eq!(
        canary_error(json!({"maxSurge": 0, "maxUnavailable": "0%"})),
        format!(
            "{PREFIX}spec.strategy.maxSurge: Invalid value: 0: MaxSurge and MaxUnavailable both can \
             not be zero"
        )
    );
    assert_eq!(
        canary_error(json!({"maxSurge": "0%", "maxUnavailable": 0})),
        format!(
            "{PREFIX}spec.strategy.maxSurge: Invalid value: \"0%\": MaxSurge and MaxUnavailable both \
             can not be zero"
        )
    );
}

/// The step checks of ValidateRolloutStrategyCanary and hasMultipleStepsType.
#[test]
fn validate_rollout_strategy_canary_steps() {
    let step_message = "Step must have one of the following set: experiment, setWeight, setCanaryScale, plugin or pause";
    let cases = [
        (
            json!([{"setWeight": 10, "pause": {}}]),
            format!(
                "spec.strategy.steps[0]: Invalid value: \"step.Experiment: false step.Pause: true \
                 step.SetWeight: true step.Analysis: false\": {step_message}"
            ),
        ),
        (
            json!([{}]),
            format!(
                "spec.strategy.steps[0]: Invalid value: \"step.Experiment: true step.Pause: true \
                 step.SetWeight: true step.Analysis: true step.SetCanaryScale: true step.SetHeaderRoute: \
                 true step.SetMirrorRoute: true step.Plugin: true\": {step_message}"
            ),
        ),
        (
            json!([{"setWeight": 120}]),
            "spec.strategy.steps[0].setWeight: Invalid value: 120: SetWeight needs to be between 0 and 100"
                .to_string(),
        ),
        // RolloutPause.DurationSeconds: -1 for a duration it cannot parse.
        (
            json!([{"pause": {"duration": "soon"}}]),
            "spec.strategy.steps[0].pause.duration: Invalid value: -1: Duration needs to be greater than 0"
                .to_string(),
        ),
        (
            json!([{"setCanaryScale": {"replicas": 1}}]),
            "spec.strategy.trafficRouting: Required value: SetCanaryScale requires TrafficRouting to be set"
                .to_string(),
        ),
    ];
    for (steps, expected) in cases {
        assert_eq!(
            canary_error(json!({"steps": steps})),
            format!("{PREFIX}{expected}")
        );
    }
}

/// What Argo runs and canaryd does not: canaryd's words, in `field.Forbidden`'s form.
#[test]
fn what_canaryd_does_not_run_is_forbidden_in_canaryds_words() {
    assert_eq!(
        canary_error(json!({"steps": [{"experiment": {"templates": []}}]})),
        format!(
            "{PREFIX}spec.strategy.canary.steps[0].experiment: Forbidden: this step is not supported by \
             canaryd yet"
        )
    );
}

/// Argo's ValidateRolloutStrategyBlueGreen, with its paths one level up, then what canaryd does not run.
#[test]
fn blue_green_fields_are_checked_as_argos_validate_rollout_does() {
    let blue_green = |strategy: serde_json::Value| {
        invalid_spec(json!({}), |s| {
            s["strategy"] = json!({"blueGreen": strategy})
        })
    };
    assert_eq!(
        blue_green(json!({"activeService": "a", "previewService": "a"})),
        format!(
            "{PREFIX}spec.strategy.activeService: Invalid value: \"a\": This rollout uses the same service \
             for the active and preview services, but two different services are required."
        )
    );
    assert_eq!(
        blue_green(json!({"activeService": "a", "scaleDownDelayRevisionLimit": 11})),
        format!(
            "{PREFIX}spec.strategy.scaleDownDelayRevisionLimit: Invalid value: 11: This rollout's revision \
             history limit can not be smaller than the rollout's scale down limit"
        )
    );
    assert_eq!(
        blue_green(json!({"activeService": "a", "antiAffinity": {}})),
        format!(
            "{PREFIX}spec.strategy.antiAffinity: Invalid value: \"antiAffinity.PreferredDuringSchedulingIgnoredDuringExecution: \
             false antiAffinity.RequiredDuringSchedulingIgnoredDuringExecution: false\": AntiAffinity must have exactly \
             one strategy listed"
        )
    );
}

/// Argo's ValidateRolloutStrategyAntiAffinity, the last check of either strategy: exactly one rule, and the
/// preferred one's weight from 1 to 100; a valid one is run.
#[test]
fn anti_affinity_is_checked_as_argos_validate_rollout_does() {
    let both = json!({"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 1},
                      "requiredDuringSchedulingIgnoredDuringExecution": {}});
    assert_eq!(
        invalid_spec(json!({"antiAffinity": both}), |_| {}),
        format!(
            "{PREFIX}spec.strategy.antiAffinity: Invalid value: \"antiAffinity.PreferredDuringSchedulingIgnoredDuringExecution: \
             true antiAffinity.RequiredDuringSchedulingIgnoredDuringExecution: true\": AntiAffinity must have exactly \
             one strategy listed"
        )
    );
    for weight in [0, 101] {
        let canary = json!({"antiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": {"weight": weight}}});
        assert_eq!(
            invalid_spec(canary, |_| {}),
            format!(
                "{PREFIX}spec.strategy.antiAffinity.weight: Invalid value: {weight}: AntiAffinity weight must be \
                 between 1-100"
            )
        );
    }
    for weight in [1, 100] {
        let canary = json!({"antiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": {"weight": weight}}});
        let mut c = MemoryCluster::new(rollout(1, canary));
        run(&mut c, at(0));
        assert_eq!(c.status().phase, "Healthy", "weight {weight}");
    }
}

#[test]
fn argos_strategy_paths_one_level_up_are_written_under_their_strategy() {
    for (argo, written) in [
        (
            "spec.strategy.steps[0].setWeight",
            "spec.strategy.canary.steps[0].setWeight",
        ),
        (
            "spec.strategy.canaryService",
            "spec.strategy.canary.canaryService",
        ),
        (
            "spec.strategy.canary.analysis",
            "spec.strategy.canary.analysis",
        ),
        ("spec.strategy.blueGreen", "spec.strategy.blueGreen"),
        ("spec.selector", "spec.selector"),
    ] {
        assert_eq!(spec::written_at(argo, &rollout(1, json!({}))), written);
    }
    let mut blue_green = rollout(1, json!({}));
    blue_green.spec.strategy = serde_json::from_value(json!({"blueGreen": {}})).ok();
    assert_eq!(
        spec::written_at("spec.strategy.antiAffinity.weight", &blue_green),
        "spec.strategy.blueGreen.antiAffinity.weight"
    );
}

/// ValidateRolloutNginxIngressesConfig and ValidateRolloutVirtualServicesConfig report with
/// `field.InternalError`, whose text apimachinery prints as `<path>: Internal error: <detail>`.
#[test]
fn router_configuration_errors_are_argos_internal_errors() {
    let routed = |routing: Value| {
        canary_error(json!({
            "canaryService": "web-canary", "stableService": "web-stable",
            "trafficRouting": routing,
        }))
    };
    let nginx = "spec.strategy.canary.trafficRouting.nginx: Internal error: Either StableIngress or \
                 StableIngresses must be configured.";
    assert_eq!(
        routed(json!({"nginx": {"stableIngress": "a", "stableIngresses": ["b"]}})),
        format!("{PREFIX}{nginx} Both are configured.")
    );
    assert_eq!(
        routed(json!({"nginx": {}})),
        format!("{PREFIX}{nginx} Neither are configured.")
    );
    assert_eq!(
        routed(json!({"istio": {
            "virtualService": {"name": "a"}, "virtualServices": [{"name": "b"}],
        }})),
        format!(
            "{PREFIX}spec.strategy.canary.trafficRouting.istio: Internal error: either VirtualService \
             or VirtualServices must be configured"
        )
    );
}

/// Kubernetes' ValidateLabelSelector and ValidatePodTemplateSpecForReplicaSet (with the parts of ValidatePodSpec
/// a mistyped template trips over), which Argo's ValidateRolloutSpec runs before acting: without them the
/// ReplicaSet is refused by the API server later, after the Rollout looked valid.
#[test]
fn validate_pod_template_spec_for_replica_set() {
    let cases: [(&str, SpecChange); 10] = [
        ("spec.template.spec.containers: Required value", |s| {
            s["template"]["spec"]["containers"] = json!([])
        }),
        (
            "spec.template.spec.containers[0].image: Required value",
            |s| {
                drop(
                    s["template"]["spec"]["containers"][0]
                        .as_object_mut()
                        .map(|c| c.remove("image")),
                )
            },
        ),
        (
            "spec.template.spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label must \
             consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric \
             character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            |s| s["template"]["spec"]["containers"][0]["name"] = json!("Web"),
        ),
        (
            "spec.template.spec.initContainers[0].name: Duplicate value: \"web\"",
            |s| {
                s["template"]["spec"]["initContainers"] =
                    json!([{"name": "web", "image": "busybox"}])
            },
        ),
        (
            "spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 \
             and 65535, inclusive",
            |s| s["template"]["spec"]["containers"][0]["ports"] = json!([{"containerPort": 70000}]),
        ),
        (
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            |s| s["template"]["spec"]["restartPolicy"] = json!("Never"),
        ),
        (
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not \
             Supported",
            |s| s["template"]["spec"]["activeDeadlineSeconds"] = json!(30),
        ),
        // LabelSelectorAsSelector: a matchExpressions entry the template's labels fail.
        (
            "spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match \
             template `labels`",
            |s| s["selector"]["matchExpressions"] = json!([{"key": "tier", "operator": "Exists"}]),
        ),
        // ValidateLabelSelectorRequirement, then "invalid label selector" and no template check.
        (
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is \
             'In' or 'NotIn'",
            |s| {
                s["selector"]["matchExpressions"] = json!([{"key": "tier", "operator": "In"}]);
                s["template"]["spec"]["containers"] = json!([]);
            },
        ),
        (
            "spec.selector.matchExpressions[0].operator: Invalid value: \"Has\": not a valid selector operator",
            |s| s["selector"]["matchExpressions"] = json!([{"key": "app", "operator": "Has"}]),
        ),
    ];
    for (expected, change) in cases {
        assert_eq!(
            invalid_spec(json!({}), change),
            format!("{PREFIX}{expected}")
        );
    }
}

/// A template the selector's expressions select, with an init container of its own name, is valid.
#[test]
fn a_template_matching_match_expressions_with_init_containers_is_valid() {
    let mut value = serde_json::to_value(rollout(1, json!({}))).expect("a Rollout serialises");
    let spec = &mut value["spec"];
    spec["selector"]["matchExpressions"] = json!([
        {"key": "app", "operator": "In", "values": ["web", "api"]},
        {"key": "tier", "operator": "DoesNotExist"},
        {"key": "track", "operator": "NotIn", "values": ["canary"]}
    ]);
    spec["template"]["spec"]["initContainers"] = json!([{"name": "migrate", "image": "busybox"}]);
    spec["template"]["spec"]["restartPolicy"] = json!("Always");
    let rollout: Rollout = serde_json::from_value(value).expect("the changed Rollout decodes");
    assert_eq!(spec::check(&rollout), Vec::new());
}
