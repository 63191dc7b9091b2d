//! What Argo's ingress controller does to an ALB Ingress whose managed annotation names a Rollout that no
//! longer exists (its syncALBIngress): each of that Rollout's action annotations is reset to send everything to
//! the Service the action is named for, on the port the action gave that Service, its stickiness kept; the
//! Rollout's entry leaves [`MANAGED`] (the annotation goes with its last entry), and the deprecated
//! `managed-alb-actions` annotation goes too. Its other annotations (a header route's conditions) are left.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::RoutingError;
use super::alb::{Action, Forward, MANAGED, Stickiness, TargetGroup, annotations, go_json};
use crate::api::Rollout;

/// The annotation Argo's ALB router wrote before [`MANAGED`], which its ingress controller removes.
const MANAGED_ACTIONS: &str = "rollouts.argoproj.io/managed-alb-actions";

/// Where an action annotation's key names its Service (`alb.ingress.kubernetes.io/actions.web-stable`).
const ACTION_PREFIX: &str = "/actions.";

/// The Ingress `ingress` with the gone Rollout `rollout` released (see the module doc), or `None` when its
/// managed annotation does not name `rollout`. An error where Argo gives up on the Ingress without writing: a
/// managed annotation or action that does not read, or an action without a target group for its Service.
pub fn released(ingress: &Value, rollout: &str) -> Result<Option<Value>, RoutingError> {
    let mut out = ingress.clone();
    let annotations = annotations(&mut out)?;
    let mut managed: BTreeMap<String, Option<Vec<String>>> =
        match annotations.get(MANAGED).and_then(Value::as_str) {
            None | Some("") => return Ok(None),
            Some(text) => serde_json::from_str(text).map_err(|e| {
                RoutingError::Mismatch(format!("annotation {MANAGED} does not read: {e}"))
            })?,
        };
    let Some(keys) = managed.remove(rollout) else {
        return Ok(None);
    };
    for key in keys.iter().flatten().filter(|k| k.contains(ACTION_PREFIX)) {
        let reset = reset_action(annotations, key)?;
        annotations.insert(key.clone(), Value::from(reset));
    }
    if managed.is_empty() {
        annotations.remove(MANAGED);
    } else {
        annotations.insert(MANAGED.to_string(), Value::from(go_json(&managed)?));
    }
    annotations.remove(MANAGED_ACTIONS);
    Ok(Some(out))
}

/// The Rollouts the managed annotation's text `managed` names (none when it does not read, where Argo's
/// ingress controller leaves the Ingress alone).
pub fn managing(managed: &str) -> Vec<String> {
    serde_json::from_str::<BTreeMap<String, Value>>(managed)
        .map(|by_rollout| by_rollout.into_keys().collect())
        .unwrap_or_default()
}

/// Of the Ingresses `naming` (by name, in the Rollout's namespace) whose managed annotation names `rollout`,
/// those its traffic routing no longer names (it moved to other Ingresses, or off ALB): Argo's ingress controller
/// releases them as it does a deleted Rollout's, keeping those the Rollout names as ALB's or NGINX's stable
/// Ingress (its GetRolloutIngressKeys). None while the routing does not read (an `InvalidSpec` Rollout's
/// Ingresses are left as they are).
pub fn left_behind<'a>(rollout: &Rollout, naming: &'a [String]) -> Vec<&'a str> {
    let Ok(routing) = super::routing(rollout) else {
        return Vec::new();
    };
    let (alb, nginx) = match &routing {
        Some(r) => (r.alb.as_ref(), r.nginx.as_ref()),
        None => (None, None),
    };
    let mut routed = alb.map(super::alb::ingresses).unwrap_or_default();
    routed.extend(
        nginx
            .map(super::nginx::stable_ingresses)
            .unwrap_or_default(),
    );
    naming
        .iter()
        .map(String::as_str)
        .filter(|name| !routed.contains(name))
        .collect()
}

/// Argo's getResetALBActionStr: the action `key` forwarding everything to the Service its key names.
fn reset_action(annotations: &Map<String, Value>, key: &str) -> Result<String, RoutingError> {
    let mismatch = |what: &str| RoutingError::Mismatch(format!("{what} (annotation {key})"));
    let service = match key.split(ACTION_PREFIX).collect::<Vec<_>>()[..] {
        [_, service] => service,
        _ => return Err(mismatch("unable to parse action to get the service")),
    };
    let previous: Value = annotations
        .get(key)
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str(text).ok())
        .filter(Value::is_object)
        .ok_or_else(|| mismatch("unable to unmarshal previous ALB action"))?;
    let forward = &previous["ForwardConfig"];
    let port = forward["TargetGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["ServiceName"] == service)
        .filter_map(|g| g["ServicePort"].as_str())
        .next_back()
        .filter(|port| !port.is_empty())
        .ok_or_else(|| mismatch("unable to reset annotation due to missing port"))?;
    let sticky = &forward["TargetGroupStickinessConfig"];
    let stickiness = sticky.is_object().then(|| Stickiness {
        enabled: sticky["Enabled"].as_bool().unwrap_or_default(),
        duration_seconds: sticky["DurationSeconds"].as_i64().unwrap_or_default(),
    });
    go_json(&Action {
        kind: "forward",
        forward: Forward {
            target_groups: vec![TargetGroup {
                service,
                port: port.to_string(),
                weight: 100,
            }],
            stickiness,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::routing;
    use serde_json::json;

    fn routed_through(alb: Value) -> Rollout {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"strategy": {"canary": {"canaryService": "web-canary", "stableService": "web-stable",
                     "trafficRouting": {"alb": alb}}}},
        }))
        .expect("a Rollout")
    }

    #[test]
    fn the_ingresses_naming_a_rollout_that_its_routing_no_longer_names_are_left_behind() {
        let naming = ["old".to_string(), "web".to_string()];
        let through_web = routed_through(json!({"ingress": "web", "servicePort": 80}));
        assert_eq!(left_behind(&through_web, &naming), ["old"]);
        let through_both = routed_through(json!({"ingresses": ["web", "old"], "servicePort": 80}));
        assert!(left_behind(&through_both, &naming).is_empty());
        let nginx = json!({"nginx": {"stableIngress": "old"}, "alb": {"ingress": "web", "servicePort": 80}});
        let mut also_nginx: Value = serde_json::to_value(&through_web).expect("json");
        also_nginx["spec"]["strategy"]["canary"]["trafficRouting"] = nginx;
        let also_nginx: Rollout = serde_json::from_value(also_nginx).expect("a Rollout");
        assert!(
            left_behind(&also_nginx, &naming).is_empty(),
            "NGINX's stable Ingress is named too"
        );
        let mut off_alb = through_web.clone();
        off_alb.spec.strategy = None;
        assert_eq!(left_behind(&off_alb, &naming), ["old", "web"]);
        let mut unread: Value = serde_json::to_value(&through_web).expect("json");
        unread["spec"]["strategy"]["canary"]["trafficRouting"]["ambassador"] =
            json!({"mappings": ["web"]});
        let unread: Rollout = serde_json::from_value(unread).expect("a Rollout");
        assert!(
            routing(&unread).is_err() && left_behind(&unread, &naming).is_empty(),
            "a routing canaryd does not read releases nothing"
        );
    }

    #[test]
    fn the_managed_annotation_names_its_rollouts_and_one_that_does_not_read_names_none() {
        let managed = r#"{"web":["alb.ingress.kubernetes.io/actions.web-stable"],"api":null}"#;
        assert_eq!(managing(managed), ["api", "web"]);
        assert!(managing("not json").is_empty());
        assert!(managing("[\"web\"]").is_empty());
    }

    const KEY: &str = "alb.ingress.kubernetes.io/actions.stable-service";
    const CONDITIONS: &str = "alb.ingress.kubernetes.io/conditions.stable-service";

    /// Argo's test Ingress (ingress/alb_test.go's newALBIngress): an action at 85/15 managed by `rollout`, with
    /// a condition key in its entry too.
    fn ingress(rollout: &str, sticky: bool) -> Value {
        let mut action = json!({"Type": "forward", "ForwardConfig": {"TargetGroups": [
            {"ServiceName": "stable-service", "ServicePort": "80", "Weight": 85},
            {"ServiceName": "stable-service-canary", "ServicePort": "80", "Weight": 15},
        ]}});
        if sticky {
            action["ForwardConfig"]["TargetGroupStickinessConfig"] =
                json!({"DurationSeconds": 300, "Enabled": true});
        }
        json!({"metadata": {"name": "test-ingress", "annotations": {
            "kubernetes.io/ingress.class": "alb",
            KEY: action.to_string(),
            CONDITIONS: "[]",
            MANAGED: json!({rollout: [KEY, CONDITIONS]}).to_string(),
        }}})
    }

    fn annotation<'a>(ingress: &'a Value, key: &str) -> Option<&'a str> {
        ingress["metadata"]["annotations"][key].as_str()
    }

    /// The Ingress of `ingress("gone", sticky)` released, and its action.
    fn reset(sticky: bool) -> (Value, String) {
        let out = released(&ingress("gone", sticky), "gone")
            .expect("released")
            .expect("changed");
        let action = annotation(&out, KEY).expect("the action").to_string();
        (out, action)
    }

    #[test]
    fn a_gone_rollouts_action_is_reset_to_its_service_and_its_entry_removed() {
        let (out, action) = reset(false);
        assert_eq!(
            action,
            r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"stable-service","ServicePort":"80","Weight":100}]}}"#
        );
        assert_eq!(annotation(&out, MANAGED), None);
        assert_eq!(annotation(&out, CONDITIONS), Some("[]"), "not an action");
        assert_eq!(annotation(&out, "kubernetes.io/ingress.class"), Some("alb"));
    }

    #[test]
    fn the_stickiness_is_kept() {
        assert_eq!(
            reset(true).1,
            r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"stable-service","ServicePort":"80","Weight":100}],"TargetGroupStickinessConfig":{"Enabled":true,"DurationSeconds":300}}}"#
        );
    }

    #[test]
    fn another_rollouts_entry_stays_and_an_unnamed_rollout_changes_nothing() {
        let mut both = ingress("gone", false);
        let managed = json!({"gone": [KEY], "web": ["alb.ingress.kubernetes.io/actions.web"]});
        both["metadata"]["annotations"][MANAGED] = managed.to_string().into();
        both["metadata"]["annotations"][MANAGED_ACTIONS] = "gone:x".into();
        let out = released(&both, "gone").expect("released").expect("changed");
        assert_eq!(
            annotation(&out, MANAGED),
            Some(r#"{"web":["alb.ingress.kubernetes.io/actions.web"]}"#)
        );
        assert_eq!(annotation(&out, MANAGED_ACTIONS), None);
        assert_eq!(released(&both, "other").expect("read"), None);
        assert_eq!(
            released(&json!({"metadata": {}}), "gone").expect("read"),
            None
        );
    }

    #[test]
    fn what_argo_gives_up_on_is_an_error() {
        let with = |key: &str, value: &str| {
            let mut i = ingress("gone", false);
            i["metadata"]["annotations"][key] = value.into();
            i
        };
        let no_port = r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"other","ServicePort":"80"}]}}"#;
        for (ingress, why) in [
            (with(MANAGED, "{"), "does not read"),
            (with(MANAGED, r#"{"gone": "x"}"#), "does not read"),
            (
                with(KEY, "not json"),
                "unable to unmarshal previous ALB action",
            ),
            (with(KEY, no_port), "missing port"),
        ] {
            let error = released(&ingress, "gone").expect_err(why).to_string();
            assert!(error.contains(why), "{error}");
        }
        let mut odd_key = ingress("gone", false);
        let key = "x/actions.a/actions.b";
        odd_key["metadata"]["annotations"][MANAGED] = json!({"gone": [key]}).to_string().into();
        let error = released(&odd_key, "gone").expect_err("key").to_string();
        assert!(error.contains("unable to parse action"), "{error}");
    }
}
