//! `canaryd run --rollouts` with Rollouts it cannot act on beside one it can: one it cannot decode (a field of
//! a value its field cannot hold, which the CRD's schema lets
//! through) and one without a selector are reported on themselves (the
//! InvalidSpec condition naming the field, phase Degraded), while the healthy one still progresses; each
//! recovers once fixed. So is one whose Service selects a label its pods lack, or whose VirtualService is
//! missing or lacks the route it names, or whose ALB Ingress has no path to the stable Service, before anything
//! is created for it. The condition carries Argo's
//! ValidateRollout error word for word, and twenty Rollouts broken in different ways are each reported on the
//! field while the healthy ones progress.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server and the harness wait on real time.

use canaryd::api::rollout::RolloutStatus;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern};
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::rollout::object;
use canaryd_testkit::router_objects;
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

/// A Rollout as the API server may store it, whatever its fields hold.
mod raw {
    #[derive(
        kube::CustomResource,
        serde::Serialize,
        serde::Deserialize,
        Clone,
        Debug,
        schemars::JsonSchema,
    )]
    #[kube(
        group = "argoproj.io",
        version = "v1alpha1",
        kind = "Rollout",
        namespaced
    )]
    pub struct AnyRolloutSpec {
        #[serde(flatten)]
        pub fields: serde_json::Map<String, serde_json::Value>,
    }
}

/// The one-replica Rollout `name` without steps, its spec changed by `change`.
fn stored(name: &str, change: impl FnOnce(&mut Value)) -> raw::Rollout {
    let mut value = serde_json::to_value(object("default", name, 1, "web:1", json!({})))
        .expect("a Rollout serialises");
    change(&mut value["spec"]);
    serde_json::from_value(value).expect("a raw Rollout")
}

/// The status of the Rollout `name` as stored, decoded where it decodes.
fn status_of(server: &FakeApiServer, name: &str) -> RolloutStatus {
    server
        .get_json::<raw::Rollout>("default", name)
        .and_then(|r| r.get("status").cloned())
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_default()
}

async fn until_status(
    server: &FakeApiServer,
    name: &str,
    what: &str,
    check: impl Fn(&RolloutStatus) -> bool,
) -> RolloutStatus {
    eventually(WAIT, &format!("{name}: {what}"), || async {
        let s = status_of(server, name);
        check(&s).then_some(s)
    })
    .await
}

async fn rollouts_it_cannot_read_are_invalid_spec_and_the_others_progress(crds: CrdSet) {
    let (server, client, _prom, _rsc) =
        deployed_with(crds, Answer::Scalar(1.0), &with_steps("web:1", json!([]))).await;
    // One stored before the daemon starts (in its first list), one after (a watch event).
    // Both CRD sets declare a pause's duration an int-or-string without bounds; canaryd (as Argo) holds an
    // int32.
    server.put(&stored("long-pause", |spec| {
        spec["strategy"]["canary"]["steps"] =
            json!([{"pause": {"duration": 1_099_511_627_776_i64}}]);
    }));
    let daemon = harness::spawn(client.clone(), config()).await;
    server.put(&stored("no-selector", |spec| {
        spec.as_object_mut().map(|s| s.remove("selector"));
    }));
    until(&server, "the healthy Rollout to be Healthy", |s| {
        healthy_at(s, None)
    })
    .await;
    let expected = [
        (
            "long-pause",
            "The Rollout \"long-pause\" is invalid: cannot decode the Rollout: spec.strategy.canary.steps[0].pause.duration: ",
        ),
        (
            "no-selector",
            "The Rollout \"no-selector\" is invalid: spec.selector: Required value: Rollout has missing field '.spec.selector'",
        ),
    ];
    for (name, message) in expected {
        let s = until_status(&server, name, "InvalidSpec", |s| {
            condition(s, "InvalidSpec").0 == "True"
        })
        .await;
        let (_, reason, said) = condition(&s, "InvalidSpec");
        assert_eq!(reason, "InvalidSpec");
        assert!(said.starts_with(message), "{name}: {said}");
        assert_eq!(s.phase, "Degraded", "{name}");
        assert_eq!(s.message, format!("InvalidSpec: {said}"), "{name}");
    }
    // The Event is created after the status write lands, by the publisher on its own time.
    let reported = eventually(WAIT, "the Warning Event", || async {
        Some(events_of(&client, "long-pause").await).filter(|e| !e.is_empty())
    })
    .await;
    assert_eq!(reported.len(), 1, "one Warning Event: {reported:?}");
    assert!(
        reported[0].0 == "InvalidSpec" && reported[0].1.starts_with(expected[0].1),
        "{reported:?}"
    );
    // Reported once: the echo of its own status write writes nothing again.
    let writes = server.request_count(&RequestPattern::new("PATCH", "/rollouts/long-pause"));
    assert_eq!(writes, 1, "one status write");
    assert!(
        replica_sets(&server).iter().all(|rs| rs
            .metadata
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("web-"))),
        "nothing is created for the Rollouts that are invalid"
    );

    // Fixed, each is planned again: the condition goes and the first revision deploys.
    server.put(&stored("long-pause", |spec| {
        spec["strategy"]["canary"]["steps"] = json!([{"setWeight": 50}]);
    }));
    let fixed = until_status(&server, "long-pause", "Healthy once fixed", |s| {
        healthy_at(s, None)
    })
    .await;
    assert_eq!(condition(&fixed, "InvalidSpec"), Default::default());
    server.put(&stored("no-selector", |_| {}));
    until_status(&server, "no-selector", "Healthy once fixed", |s| {
        healthy_at(s, None) && condition(s, "InvalidSpec").0.is_empty()
    })
    .await;
    daemon.stop().await;
}

async fn a_misconfigured_service_is_invalid_spec_before_anything_is_created_and_blocks_no_other_rollout(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) =
        deployed_with(crds, Answer::Scalar(1.0), &with_steps("web:1", json!([]))).await;
    // `other`'s stable Service selects a label its pods lack (Argo's ValidateService).
    create_service_of(&client, "other-canary", "other").await;
    let services: kube::Api<Service> = kube::Api::namespaced(client.clone(), "default");
    let stable: Service = serde_json::from_value(json!({
        "metadata": {"name": "other-stable"},
        "spec": {"selector": {"app": "other", "tier": "front"}},
    }))
    .expect("a Service");
    services
        .create(&Default::default(), &stable)
        .await
        .expect("the Service is created");
    create_rollout(&client, &named("other", 1, "web:1", json!([]))).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let s = until_status(&server, "other", "InvalidSpec", |s| {
        condition(s, "InvalidSpec").0 == "True"
    })
    .await;
    assert_eq!(
        condition(&s, "InvalidSpec").2,
        "The Rollout \"other\" is invalid: spec.strategy.canary.stableService: Invalid value: \"other-stable\": Service \"other-stable\" has unmatch label \"tier\" in rollout"
    );
    assert_eq!(s.phase, "Degraded");
    // The other Rollout deploys and updates meanwhile.
    until(&server, "web to be Healthy", |s| healthy_at(s, None)).await;
    set_image(&client, "web:2").await;
    let first = status(&server).stable_rs;
    until(&server, "web's update to be Healthy", |s| {
        healthy_at(s, None) && s.stable_rs != first
    })
    .await;
    let created: Vec<String> = replica_sets(&server)
        .into_iter()
        .filter_map(|rs| rs.metadata.name)
        .filter(|n| n.starts_with("other-"))
        .collect();
    assert_eq!(
        created,
        Vec::<String>::new(),
        "nothing is created for `other`"
    );

    // Fixed, it deploys on its next look (every 20 s while invalid, as Argo).
    let fix = json!({"spec": {"selector": {"tier": null}}});
    services
        .patch(
            "other-stable",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&fix),
        )
        .await
        .expect("the Service is fixed");
    until_status(&server, "other", "Healthy once its Service is fixed", |s| {
        healthy_at(s, None) && condition(s, "InvalidSpec").0.is_empty()
    })
    .await;
    daemon.stop().await;
}

async fn a_missing_or_unfit_virtual_service_is_invalid_spec_before_anything_is_created_until_fixed(
    crds: CrdSet,
) {
    let routing = json!({"istio": {"virtualService": {"name": "web-vsvc", "routes": ["primary"]}}});
    let rollout = routed_through(with_steps("web:1", json!([{"setWeight": 20}])), routing);
    let (server, client, _prom, _rsc) = deployed_with(crds, Answer::Scalar(1.0), &rollout).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let invalid = "The Rollout \"web\" is invalid: spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: \"web-vsvc\": ";
    let s = until(&server, "InvalidSpec naming the VirtualService", |s| {
        condition(s, "InvalidSpec").0 == "True"
    })
    .await;
    // Argo's getRolloutReferencedResources: the lister's NotFound.
    assert_eq!(
        condition(&s, "InvalidSpec").2,
        format!("{invalid}virtualservices.networking.istio.io \"web-vsvc\" not found")
    );
    assert_eq!(s.phase, "Degraded");

    // There, but without the route the Rollout names (Argo's ValidateVirtualService).
    let mut unfit = router_objects::virtual_service("default", "web-vsvc", "web");
    unfit.spec.fields.insert(
        "http".into(),
        json!([{"name": "other", "route": [{"destination": {"host": "web-stable"}, "weight": 100}]}]),
    );
    server.put(&unfit);
    let s = until(&server, "InvalidSpec naming the route", |s| {
        condition(s, "InvalidSpec").2.contains("primary")
    })
    .await;
    assert!(
        condition(&s, "InvalidSpec").2.starts_with(invalid),
        "{:?}",
        condition(&s, "InvalidSpec")
    );
    assert!(replica_sets(&server).is_empty(), "nothing is created");
    let routing_errors = events(&client)
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "TrafficRoutingError")
        .count();
    assert_eq!(
        routing_errors, 0,
        "no router is written while it is invalid"
    );

    server.put(&router_objects::virtual_service(
        "default", "web-vsvc", "web",
    ));
    let s = until(&server, "Healthy once the VirtualService fits", |s| {
        healthy_at(s, None)
    })
    .await;
    assert_eq!(condition(&s, "InvalidSpec"), Default::default());
    daemon.stop().await;
}

/// Argo's validateAlbIngress: an ALB Ingress with no path to the stable Service is InvalidSpec, nothing created
/// and nothing written to it, until it gets one.
async fn an_alb_ingress_without_the_stable_services_path_is_invalid_spec_until_fixed(crds: CrdSet) {
    let routing = json!({"alb": {"ingress": "web", "servicePort": 80}});
    let rollout = routed_through(with_steps("web:1", json!([{"setWeight": 20}])), routing);
    let (server, client, _prom, _rsc) = deployed_with(crds, Answer::Scalar(1.0), &rollout).await;
    let mut elsewhere = router_objects::alb_ingress("default", "web");
    let rules = elsewhere
        .spec
        .as_mut()
        .and_then(|s| s.rules.as_mut())
        .unwrap();
    let paths = &mut rules[0].http.as_mut().unwrap().paths;
    paths[0].backend.service.as_mut().unwrap().name = "other".into();
    let installed = server.put(&elsewhere).metadata.resource_version;
    let daemon = harness::spawn(client.clone(), config()).await;
    let s = until(&server, "InvalidSpec naming the Ingress", |s| {
        condition(s, "InvalidSpec").0 == "True"
    })
    .await;
    assert_eq!(
        condition(&s, "InvalidSpec").2,
        "The Rollout \"web\" is invalid: spec.strategy.canary.trafficRouting.alb.ingress: Invalid value: \"web\": ingress `web` has no rules using service web-stable backend"
    );
    assert!(replica_sets(&server).is_empty(), "nothing is created");
    let ingress = server.get::<k8s_openapi::api::networking::v1::Ingress>("default", "web");
    assert_eq!(ingress.and_then(|i| i.metadata.resource_version), installed);

    server.put(&router_objects::alb_ingress("default", "web"));
    let s = until(&server, "Healthy once the Ingress fits", |s| {
        healthy_at(s, None)
    })
    .await;
    assert_eq!(condition(&s, "InvalidSpec"), Default::default());
    daemon.stop().await;
}

with_each_crd_set!(an_alb_ingress_without_the_stable_services_path_is_invalid_spec_until_fixed);

/// Argo's ValidateRollout errors as the condition's message, whole: apimachinery's `field.Error` text and
/// Argo's paths (canary fields under `spec.strategy`), beside a healthy Rollout.
async fn the_condition_carries_argos_validate_rollout_error_word_for_word(crds: CrdSet) {
    let (server, client, _prom, _rsc) =
        deployed_with(crds, Answer::Scalar(1.0), &with_steps("web:1", json!([]))).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    let cases: [(&str, SpecChange, &str); 6] = [
        (
            "weight",
            |s| s["strategy"]["canary"]["steps"] = json!([{"setWeight": 120}]),
            "spec.strategy.steps[0].setWeight: Invalid value: 120: SetWeight needs to be between 0 and 100",
        ),
        (
            "two-actions",
            |s| s["strategy"]["canary"]["steps"] = json!([{"setWeight": 10, "pause": {}}]),
            "spec.strategy.steps[0]: Invalid value: \"step.Experiment: false step.Pause: true \
             step.SetWeight: true step.Analysis: false\": Step must have one of the following set: \
             experiment, setWeight, setCanaryScale, plugin or pause",
        ),
        (
            "no-surge",
            |s| s["strategy"]["canary"] = json!({"maxSurge": 0, "maxUnavailable": "0%"}),
            "spec.strategy.maxSurge: Invalid value: 0: MaxSurge and MaxUnavailable both can not be zero",
        ),
        (
            "deadline",
            |s| s["minReadySeconds"] = json!(600),
            "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds",
        ),
        // Kubernetes' ValidatePodTemplateSpecForReplicaSet, which Argo runs before any ReplicaSet exists.
        (
            "no-containers",
            |s| s["template"]["spec"]["containers"] = json!([]),
            "spec.template.spec.containers: Required value",
        ),
        (
            "no-image",
            |s| s["template"]["spec"]["containers"] = json!([{"name": "web"}]),
            "spec.template.spec.containers[0].image: Required value",
        ),
    ];
    for (name, change, _) in &cases {
        server.put(&stored(name, change));
    }
    for (name, _, error) in cases {
        let s = until_status(&server, name, "InvalidSpec", |s| {
            condition(s, "InvalidSpec").0 == "True"
        })
        .await;
        assert_eq!(
            condition(&s, "InvalidSpec").2,
            format!("The Rollout {name:?} is invalid: {error}")
        );
    }
    until(&server, "web to stay Healthy", |s| healthy_at(s, None)).await;
    let owners: Vec<String> = replica_sets(&server)
        .iter()
        .flat_map(|rs| {
            rs.metadata
                .owner_references
                .iter()
                .flatten()
                .map(|o| o.name.clone())
        })
        .collect();
    assert!(
        !owners.is_empty() && owners.iter().all(|o| o == "web"),
        "no ReplicaSet for an invalid Rollout: {owners:?}"
    );
    daemon.stop().await;
}

/// A change to a stored Rollout's spec.
type SpecChange = fn(&mut Value);

/// More than the int32 a pause's duration is: both CRDs' int-or-string lets it through, canaryd (as Argo)
/// cannot hold it.
const BIG: i64 = 1_099_511_627_776;

fn steps(spec: &mut Value, steps: Value) {
    spec["strategy"]["canary"]["steps"] = steps;
}

/// Twenty Rollouts broken in different ways (a number its field cannot hold, which the CRDs' schemas let
/// through where they refuse a value of the wrong JSON type; missing required fields; bad values and steps)
/// beside two
/// healthy ones: each broken one is InvalidSpec naming its field, the healthy ones deploy and update, and
/// the daemon stays up.
async fn twenty_broken_rollouts_are_each_invalid_spec_naming_the_field_and_the_healthy_ones_progress(
    crds: CrdSet,
) {
    let (server, client, _prom, _rsc) =
        deployed_with(crds, Answer::Scalar(1.0), &with_steps("web:1", json!([]))).await;
    let daemon = harness::spawn(client.clone(), config()).await;
    server.put(&stored("calm", |_| {}));
    let broken: [(SpecChange, &str); 20] = [
        (
            |s| steps(s, json!([{"pause": {"duration": BIG}}])),
            "spec.strategy.canary.steps[0].pause.duration",
        ),
        (|s| s["replicas"] = json!(-1), "spec.replicas"),
        (
            |s| drop(s.as_object_mut().map(|m| m.remove("selector"))),
            "spec.selector",
        ),
        (
            |s| s["selector"] = json!({"matchLabels": {}}),
            "spec.selector",
        ),
        (
            |s| s["template"]["metadata"]["labels"] = json!({"app": "other"}),
            "spec.template.metadata.labels",
        ),
        (
            |s| drop(s.as_object_mut().map(|m| m.remove("template"))),
            "spec.template.metadata.labels",
        ),
        (
            |s| s["minReadySeconds"] = json!(900),
            "spec.progressDeadlineSeconds",
        ),
        (|s| s["minReadySeconds"] = json!(-1), "spec.minReadySeconds"),
        (
            |s| s["progressDeadlineSeconds"] = json!(-5),
            "spec.progressDeadlineSeconds",
        ),
        (
            |s| s["revisionHistoryLimit"] = json!(-1),
            "spec.revisionHistoryLimit",
        ),
        (|s| s["strategy"] = json!({}), "spec.strategy.strategy"),
        (
            |s| s["strategy"]["canary"]["maxSurge"] = json!("lots"),
            "spec.strategy.canary.maxSurge",
        ),
        (
            |s| s["strategy"]["canary"]["dynamicStableScale"] = json!(true),
            "spec.strategy.dynamicStableScale",
        ),
        (
            |s| s["strategy"]["canary"] = json!({"maxSurge": 0, "maxUnavailable": 0}),
            "spec.strategy.maxSurge",
        ),
        (
            |s| steps(s, json!([{"setWeight": 120}])),
            "spec.strategy.steps[0].setWeight",
        ),
        (|s| steps(s, json!([{}])), "spec.strategy.steps[0]"),
        (
            |s| steps(s, json!([{"pause": {"duration": "soon"}}])),
            "spec.strategy.steps[0].pause.duration",
        ),
        (
            |s| steps(s, json!([{"setCanaryScale": {"replicas": 1}}])),
            "spec.strategy.trafficRouting",
        ),
        (
            |s| s["strategy"]["canary"]["scaleDownDelaySeconds"] = json!(30),
            "spec.strategy.scaleDownDelaySeconds",
        ),
        (
            |s| s["strategy"]["canary"] = json!({"canaryService": "same", "stableService": "same"}),
            "spec.strategy.stableService",
        ),
    ];
    for (i, (change, _)) in broken.iter().enumerate() {
        server.put(&stored(&format!("broken-{i}"), change));
    }
    for (i, (_, field)) in broken.iter().enumerate() {
        let name = format!("broken-{i}");
        let s = until_status(&server, &name, "InvalidSpec", |s| {
            condition(s, "InvalidSpec").0 == "True"
        })
        .await;
        let said = condition(&s, "InvalidSpec").2;
        let shown = said.strip_prefix(&format!("The Rollout {name:?} is invalid: "));
        let named = shown.map(|m| m.strip_prefix("cannot decode the Rollout: ").unwrap_or(m));
        assert!(
            named.is_some_and(|m| m.starts_with(&format!("{field}: "))),
            "{name} names {field}: {said}"
        );
        assert_eq!(s.phase, "Degraded", "{name}");
    }
    until_status(&server, "calm", "Healthy", |s| healthy_at(s, None)).await;
    until(&server, "web to be Healthy", |s| healthy_at(s, None)).await;
    set_image(&client, "web:2").await;
    let first = status(&server).stable_rs;
    until(&server, "web's update to be Healthy", |s| {
        healthy_at(s, None) && s.stable_rs != first
    })
    .await;
    daemon.stop().await;
}

/// The Warning Events about the Rollout `name`, as (reason, note).
async fn events_of(client: &kube::Client, name: &str) -> Vec<(String, String)> {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), "default");
    let listed = api.list(&Default::default()).await.expect("events list");
    listed
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

with_each_crd_set!(
    rollouts_it_cannot_read_are_invalid_spec_and_the_others_progress,
    a_misconfigured_service_is_invalid_spec_before_anything_is_created_and_blocks_no_other_rollout,
    a_missing_or_unfit_virtual_service_is_invalid_spec_before_anything_is_created_until_fixed,
    the_condition_carries_argos_validate_rollout_error_word_for_word,
    twenty_broken_rollouts_are_each_invalid_spec_naming_the_field_and_the_healthy_ones_progress
);
