//! The rules of the Rollout actions (`engine::rollout::actions`), case by case against kubectl-argo-rollouts'
//! Go: promote.go `getPatches` (each branch, the step index kept within the steps, the unified patch for a CRD
//! without a status subresource), undo.go `rolloutRevision` and `equalIgnoreHash`, set_image.go
//! `newRolloutSetImage`.

use canaryd::api::Rollout;
use canaryd::engine::rollout::actions::{
    self, PromotePatches, PromoteRefusal, RevisionCandidate, UndoRefusal,
};
use serde_json::{Value, json};

fn rollout(steps: Value, paused: bool, status: Value) -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"paused": paused, "strategy": {"canary": {"steps": steps}},
                 "template": {"spec": {"containers": [{"name": "web", "image": "web:2"}]}}},
        "status": status,
    }))
    .expect("a Rollout")
}

fn two_steps() -> Value {
    json!([{"setWeight": 50}, {"pause": {}}])
}

fn promoted(r: &Rollout) -> PromotePatches {
    actions::promote(r, false).expect("promotable")
}

#[test]
fn getpatches_moves_to_the_next_step_but_never_past_the_last() {
    let at = |index: i32| {
        let r = rollout(
            two_steps(),
            false,
            json!({"currentStepIndex": index, "currentPodHash": "b", "stableRS": "a"}),
        );
        promoted(&r).status
    };
    assert_eq!(
        at(0),
        Some(json!({"status": {"pauseConditions": null, "currentStepIndex": 1}}))
    );
    assert_eq!(
        at(2),
        Some(json!({"status": {"pauseConditions": null, "currentStepIndex": 2}}))
    );
    let r = rollout(
        two_steps(),
        false,
        json!({"currentStepIndex": 0, "currentPodHash": "b", "stableRS": "a"}),
    );
    assert_eq!(
        promoted(&r).unified,
        json!({"spec": {"paused": false}, "status": {"pauseConditions": null, "currentStepIndex": 1}}),
        "the one patch for a CRD without /status"
    );
}

#[test]
fn getpatches_clears_pause_conditions_and_unpauses_without_moving_the_step() {
    let status = json!({"currentStepIndex": 1, "currentPodHash": "b", "stableRS": "a",
                        "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-01-01T00:00:00Z"}]});
    let p = promoted(&rollout(two_steps(), true, status));
    assert_eq!(p.status, Some(json!({"status": {"pauseConditions": null}})));
    assert_eq!(p.spec, Some(json!({"spec": {"paused": false}})));
    assert_eq!(
        p.unified,
        json!({"spec": {"paused": false}, "status": {"pauseConditions": null}})
    );
}

#[test]
fn getpatches_after_an_inconclusive_analysis_needs_the_controller_pause_and_steps() {
    let status = |controller_pause: bool| {
        json!({"currentStepIndex": 0, "currentPodHash": "b", "stableRS": "a", "controllerPause": controller_pause,
               "pauseConditions": [{"reason": "InconclusiveAnalysisRun", "startTime": "2026-01-01T00:00:00Z"}],
               "canary": {"currentStepAnalysisRunStatus": {"name": "r", "status": "Inconclusive"}}})
    };
    let p = promoted(&rollout(
        json!([{"analysis": {}}, {"pause": {}}]),
        false,
        status(true),
    ));
    let step = json!({"status": {"pauseConditions": null, "controllerPause": false, "currentStepIndex": 1}});
    assert_eq!(p.status, Some(step));
    let p = promoted(&rollout(json!([{"analysis": {}}]), false, status(false)));
    assert_eq!(
        p.status,
        Some(json!({"status": {"pauseConditions": null}})),
        "no controller pause"
    );
    // No steps: GetCurrentCanaryStep has no index, and the plugin sends no status patch at all.
    let p = promoted(&rollout(json!([]), false, status(true)));
    assert_eq!((p.status, p.spec), (None, None));
}

#[test]
fn getpatches_full_unpauses_and_asks_for_promote_full_unless_the_current_revision_is_stable() {
    let p = actions::promote(
        &rollout(
            two_steps(),
            true,
            json!({"currentPodHash": "b", "stableRS": "a"}),
        ),
        true,
    );
    let p = p.expect("promotable");
    assert_eq!(p.status, Some(json!({"status": {"promoteFull": true}})));
    assert_eq!(p.spec, Some(json!({"spec": {"paused": false}})));
    let p = actions::promote(
        &rollout(
            two_steps(),
            true,
            json!({"currentPodHash": "a", "stableRS": "a"}),
        ),
        true,
    );
    assert_eq!(p.expect("only unpaused").status, None);
}

#[test]
fn promote_refuses_a_fully_promoted_unpaused_rollout_and_ends_a_blue_green_pause() {
    let done = rollout(
        two_steps(),
        false,
        json!({"currentStepIndex": 2, "currentPodHash": "a", "stableRS": "a"}),
    );
    for full in [false, true] {
        assert_eq!(
            actions::promote(&done, full),
            Err(PromoteRefusal::AlreadyPromoted)
        );
    }
    let mut blue_green = rollout(
        two_steps(),
        false,
        json!({"currentPodHash": "b", "stableRS": "a", "controllerPause": true,
               "pauseConditions": [{"reason": "BlueGreenPause", "startTime": "2026-01-01T00:00:00Z"}]}),
    );
    blue_green.spec.strategy =
        serde_json::from_value(json!({"blueGreen": {"activeService": "web"}})).ok();
    let patches = actions::promote(&blue_green, false).expect("a paused blue-green Rollout");
    assert_eq!(
        patches.status,
        Some(json!({"status": {"pauseConditions": null}}))
    );
    let mut neither = blue_green.clone();
    neither.spec.strategy = None;
    assert_eq!(
        actions::promote(&neither, false),
        Err(PromoteRefusal::NotCanary)
    );
}

fn rs(uid: &str, revision: Option<&str>, image: &str) -> RevisionCandidate {
    let annotations = revision.map(|r| json!({"rollout.argoproj.io/revision": r}));
    RevisionCandidate {
        metadata: serde_json::from_value(json!({
            "name": format!("web-{image}"), "annotations": annotations,
            "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web",
                                 "uid": uid, "controller": true}],
        }))
        .expect("metadata"),
        template: json!({"metadata": {"labels": {"app": "web", "rollouts-pod-template-hash": image}},
                         "spec": {"containers": [{"name": "web", "image": image, "resources": {}}]}}),
    }
}

#[test]
fn rolloutrevision_takes_the_second_highest_revision_it_controls_or_the_one_asked_for() {
    let candidates = [
        rs("u", Some("3"), "three"),
        rs("u", Some("x"), "unreadable"),
        rs("other", Some("9"), "not-ours"),
        rs("u", None, "zero"),
        rs("u", Some("4"), "four"),
        rs("u", Some("2"), "two"),
    ];
    let name = |c: &RevisionCandidate| c.metadata.name.clone().unwrap_or_default();
    let previous = actions::undo_target(&candidates, "u", 0).map(name);
    assert_eq!(previous.as_deref(), Ok("web-three"));
    let asked = actions::undo_target(&candidates, "u", 2).map(name);
    assert_eq!(asked.as_deref(), Ok("web-two"));
    assert_eq!(
        actions::undo_target(&candidates, "u", 9).map(name),
        Err(UndoRefusal::NoSuchRevision(9))
    );
    let alone = [rs("u", Some("1"), "one")];
    assert_eq!(
        actions::undo_target(&alone, "u", 0).map(name),
        Err(UndoRefusal::NoPreviousRevision)
    );
}

#[test]
fn equalignorehash_ignores_the_hash_label_and_what_the_rollout_leaves_unset() {
    let target = rs("u", Some("1"), "one");
    let same = json!({"metadata": {"labels": {"app": "web"}},
                      "spec": {"containers": [{"name": "web", "image": "one"}]}});
    assert!(
        actions::template_matches(&same, &target),
        "resources: {{}} unset in the Rollout"
    );
    let other = json!({"metadata": {"labels": {"app": "web"}},
                       "spec": {"containers": [{"name": "web", "image": "two"}]}});
    assert!(!actions::template_matches(&other, &target));
    let more =
        json!({"spec": {"containers": [{"name": "web", "image": "one"}, {"name": "sidecar"}]}});
    assert!(
        !actions::template_matches(&more, &target),
        "a container the revision lacks"
    );
    let patch = actions::undo_patch(&target);
    assert_eq!(
        patch[0]["value"]["metadata"]["labels"],
        json!({"app": "web"})
    );
    assert_eq!(
        (&patch[0]["op"], &patch[0]["path"]),
        (&json!("replace"), &json!("/spec/template"))
    );
}

#[test]
fn newrolloutsetimage_sets_every_container_so_named_or_all_with_a_star() {
    let mut object = json!({"spec": {"template": {"spec": {
        "initContainers": [{"name": "init", "image": "a"}],
        "containers": [{"name": "web", "image": "a"}, {"name": "sidecar", "image": "a"}],
        "ephemeralContainers": [{"name": "web", "image": "a"}]}}}});
    assert!(actions::set_image(&mut object, "web", "b"));
    let images = |o: &Value| -> Vec<String> {
        ["initContainers", "containers", "ephemeralContainers"]
            .iter()
            .flat_map(|l| {
                o["spec"]["template"]["spec"][l]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|c| c["image"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(images(&object), ["a", "b", "a", "b"]);
    assert!(actions::set_image(&mut object, "*", "c"));
    assert_eq!(images(&object), ["c", "c", "c", "c"]);
    assert!(!actions::set_image(&mut object, "nope", "d"));
    assert!(
        !actions::set_image(&mut json!({"spec": {}}), "*", "d"),
        "no template"
    );
}
