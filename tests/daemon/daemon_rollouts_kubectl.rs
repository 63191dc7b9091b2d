//! kubectl-argo-rollouts' commands against `canaryd run --rollouts`: the plugin is a set of patches, sent here
//! with the real `kubectl` (`kubectl patch rollout web [--subresource=status] --type=merge -p …`) against the
//! fake API server, so a real client's requests are exercised: `pause` and its undoing, `abort`, `retry`,
//! `promote` (past an indefinite pause) and `promote --full`, each giving Argo's status.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use std::path::PathBuf;

use canaryd_testkit::fake_apiserver::CrdSet;
use canaryd_testkit::harness::{self, Answer};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use serde_json::json;

/// `kubectl patch rollout web --type=merge -p PATCH`, on the status subresource when `status`; the plugin's
/// patches as it sends them. Panics with kubectl's output when it fails.
async fn kubectl_patch(kubeconfig: PathBuf, status: bool, patch: serde_json::Value) {
    let done = tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new("kubectl");
        command
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["patch", "rollout", "web", "--type=merge", "-p"])
            .arg(patch.to_string());
        if status {
            command.arg("--subresource=status");
        }
        let out = command
            .output()
            .expect("kubectl runs (it is on these machines: /usr/bin/kubectl)");
        (command_line(&command), out)
    })
    .await
    .expect("the kubectl task");
    let (line, out) = done;
    assert!(
        out.status.success(),
        "{line} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn command_line(command: &std::process::Command) -> String {
    let args: Vec<String> = command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!("kubectl {}", args.join(" "))
}

async fn the_plugins_pause_abort_retry_promote_and_promote_full_work_through_kubectl(crds: CrdSet) {
    let steps = json!([{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}, {"pause": {}}]);
    let (server, client, _prom, _rsc) =
        deployed_with(crds, Answer::Scalar(1.0), &with_steps("web:1", steps)).await;
    let kubeconfig = server.kubeconfig_path().to_path_buf();
    let daemon = harness::spawn(client.clone(), config()).await;
    let first = until(&server, "the first deploy", |s| healthy_at(s, None)).await;
    let stable = first.stable_rs.clone();
    set_image(&client, "web:2").await;
    let paused = until(&server, "the indefinite pause", |s| {
        s.phase == "Paused" && s.current_step_index == Some(1)
    })
    .await;
    let canary = paused.current_pod_hash.clone();
    assert_eq!(paused.message, "CanaryPauseStep");

    // kubectl argo rollouts pause web: spec.paused; then undone.
    kubectl_patch(kubeconfig.clone(), false, json!({"spec": {"paused": true}})).await;
    let s = until(&server, "manually paused", |s| {
        s.message == "manually paused"
    })
    .await;
    assert_eq!(s.phase, "Paused");
    kubectl_patch(
        kubeconfig.clone(),
        false,
        json!({"spec": {"paused": false}}),
    )
    .await;
    until(&server, "the step's pause again", |s| {
        s.message == "CanaryPauseStep"
    })
    .await;

    // kubectl argo rollouts abort web
    kubectl_patch(kubeconfig.clone(), true, json!({"status": {"abort": true}})).await;
    let s = until(&server, "the abort", |s| s.phase == "Degraded").await;
    assert_eq!(
        s.message,
        "RolloutAborted: Rollout aborted update to revision 2"
    );
    until(&server, "the canary scaled back", |_| {
        replicas_of(&server, &canary) == Some(0) && replicas_of(&server, &stable) == Some(5)
    })
    .await;

    // kubectl argo rollouts retry rollout web: the steps again from the first.
    kubectl_patch(
        kubeconfig.clone(),
        true,
        json!({"status": {"abort": false}}),
    )
    .await;
    let s = until(&server, "the retried pause", |s| {
        s.phase == "Paused" && s.current_step_index == Some(1) && !s.abort
    })
    .await;
    assert_eq!(s.current_pod_hash, canary);
    assert_eq!(replicas_of(&server, &canary), Some(1));

    // kubectl argo rollouts promote web: past the indefinite pause, to the next one.
    kubectl_patch(
        kubeconfig.clone(),
        true,
        json!({"status": {"pauseConditions": null}}),
    )
    .await;
    until(&server, "the second pause", |s| {
        s.phase == "Paused" && s.current_step_index == Some(3)
    })
    .await;
    assert_eq!(replicas_of(&server, &canary), Some(3), "setWeight 60 of 5");

    // kubectl argo rollouts promote web --full
    kubectl_patch(
        kubeconfig.clone(),
        true,
        json!({"status": {"promoteFull": true}}),
    )
    .await;
    let s = until(&server, "the full promotion", |s| {
        healthy_at(s, Some(&canary)) && s.available_replicas == 5
    })
    .await;
    daemon.stop().await;
    assert!(!s.promote_full && s.pause_conditions.is_empty());
    assert_eq!(s.current_step_index, Some(4));
    let completed: Vec<String> = events(&client)
        .await
        .into_iter()
        .filter(|e| e.0 == "RolloutCompleted")
        .map(|e| e.1)
        .collect();
    assert_eq!(
        completed.last().map(String::as_str),
        Some(&*format!(
            "Rollout completed update to revision 2 ({canary}): Full promotion requested"
        ))
    );
}

with_each_crd_set!(the_plugins_pause_abort_retry_promote_and_promote_full_work_through_kubectl);
