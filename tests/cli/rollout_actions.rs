//! `canaryd promote|abort|retry|pause|resume|restart` against the fake API server through `KUBECONFIG`: each
//! makes exactly the requests kubectl-argo-rollouts makes (method, path, content type and body, compared with
//! the patches of the plugin's Go function each test names), leaves the Rollout as they say, and refuses with
//! the exit code of docs/architecture.md what it cannot do (not found, not a canary Rollout, already promoted,
//! no cluster). `undo` and `set image` are in `rollout_undo_set_image.rs`.

#![allow(clippy::disallowed_methods)] // Not the Clock: the child process runs on real time.

use canaryd::api::Rollout;
use canaryd_testkit::cli::Ran;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use serde_json::{Value, json};

use crate::CANARYD;

/// One request as the comparisons read it: method, path (with the decoded query), content type and body.
pub type Sent = (String, String, String, Value);

/// `canaryd ARGS` with `KUBECONFIG` naming `server`, and no other way to a cluster.
pub async fn canaryd(server: &FakeApiServer, args: &[&str]) -> Ran {
    let kubeconfig = server.kubeconfig_path().to_path_buf();
    canaryd_with(&kubeconfig, args).await
}

pub async fn canaryd_with(kubeconfig: &std::path::Path, args: &[&str]) -> Ran {
    CANARYD.on_cluster(kubeconfig, args).await
}

/// The requests made to Rollouts and ReplicaSets (not discovery or `/version`), in order.
pub fn sent(server: &FakeApiServer) -> Vec<Sent> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/rollouts") || r.path.contains("/replicasets"))
        .map(|r| {
            let query: Vec<String> = url::form_urlencoded::parse(r.query.as_bytes())
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let path = match query.is_empty() {
                true => r.path,
                false => format!("{}?{}", r.path, query.join("&")),
            };
            let body = serde_json::from_str(&r.body).unwrap_or(Value::Null);
            (r.method, path, r.content_type, body)
        })
        .collect()
}

pub const WEB: &str = "/apis/argoproj.io/v1alpha1/namespaces/default/rollouts/web";
pub const MERGE: &str = "application/merge-patch+json";

pub fn get(path: &str) -> Sent {
    ("GET".into(), path.into(), String::new(), Value::Null)
}

pub fn patch(path: &str, content_type: &str, body: Value) -> Sent {
    ("PATCH".into(), path.into(), content_type.into(), body)
}

fn status_of(path: &str) -> String {
    format!("{path}/status")
}

/// A canary Rollout `web` in `default` with four steps, its new revision `new` not yet stable and `status`.
pub fn rollout_with(status: Value) -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 5,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "web:2"}]}},
            "strategy": {"canary": {"steps": [
                {"setWeight": 20}, {"pause": {}}, {"setWeight": 60}, {"pause": {"duration": "1h"}}]}},
        },
        "status": status,
    }))
    .expect("a Rollout")
}

fn paused_at_step_one() -> Value {
    json!({
        "currentStepIndex": 1, "currentPodHash": "new", "stableRS": "old", "controllerPause": true,
        "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-01-01T00:00:00Z"}],
    })
}

async fn server_with(set: CrdSet, rollout: &Rollout) -> FakeApiServer {
    let server = FakeApiServer::builder().crds(set).start().await;
    server.put(rollout);
    server
}

fn stored(server: &FakeApiServer) -> Value {
    server
        .get_json::<Rollout>("default", "web")
        .expect("the Rollout is stored")
}

/// Runs `args` against `rollout` under both CRD sets; checks the exit code, the requests and what the stored
/// Rollout then says at `pointer`.
async fn acts(rollout: &Rollout, args: &[&str], requests: &[Sent], pointer: &str, after: Value) {
    for set in [CrdSet::Canaryd, CrdSet::Argo] {
        let server = server_with(set, rollout).await;
        let ran = canaryd(&server, args).await;
        assert_eq!(ran.code, Some(0), "{set:?} {args:?}: {}", ran.stderr);
        assert_eq!(sent(&server), requests, "{set:?} {args:?}");
        let value = stored(&server)
            .pointer(pointer)
            .cloned()
            .unwrap_or(Value::Null);
        assert_eq!(value, after, "{set:?} {args:?}: {pointer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_at_a_pause_step_clears_the_pause_conditions_as_getpatches_does() {
    let status = json!({"status": {"pauseConditions": null}});
    let requests = [get(WEB), patch(&status_of(WEB), MERGE, status)];
    let rollout = rollout_with(paused_at_step_one());
    acts(
        &rollout,
        &["promote", "web"],
        &requests,
        "/status/pauseConditions",
        Value::Null,
    )
    .await;
    let server = server_with(CrdSet::Canaryd, &rollout).await;
    assert_eq!(
        canaryd(&server, &["promote", "web"]).await.stdout,
        "rollout 'web' promoted\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_of_a_paused_rollout_clears_its_pause_conditions_then_unpauses_it_as_getpatches_does()
 {
    let mut rollout = rollout_with(paused_at_step_one());
    rollout.spec.paused = Some(true);
    let requests = [
        get(WEB),
        patch(
            &status_of(WEB),
            MERGE,
            json!({"status": {"pauseConditions": null}}),
        ),
        patch(WEB, MERGE, json!({"spec": {"paused": false}})),
    ];
    acts(
        &rollout,
        &["promote", "web"],
        &requests,
        "/spec/paused",
        json!(false),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_without_a_pause_moves_to_the_next_step_as_getpatches_does() {
    let rollout =
        rollout_with(json!({"currentStepIndex": 2, "currentPodHash": "new", "stableRS": "old"}));
    let body = json!({"status": {"pauseConditions": null, "currentStepIndex": 3}});
    let requests = [get(WEB), patch(&status_of(WEB), MERGE, body)];
    acts(
        &rollout,
        &["promote", "web"],
        &requests,
        "/status/currentStepIndex",
        json!(3),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_past_an_inconclusive_analysis_clears_the_controller_pause_as_getpatches_does() {
    let rollout = rollout_with(json!({
        "currentStepIndex": 3, "currentPodHash": "new", "stableRS": "old", "controllerPause": true,
        "pauseConditions": [{"reason": "InconclusiveAnalysisRun", "startTime": "2026-01-01T00:00:00Z"}],
        "canary": {"currentStepAnalysisRunStatus": {"name": "web-new-3", "status": "Inconclusive"}},
    }));
    let body = json!({"status": {"pauseConditions": null, "controllerPause": false, "currentStepIndex": 4}});
    let requests = [get(WEB), patch(&status_of(WEB), MERGE, body)];
    acts(
        &rollout,
        &["promote", "web"],
        &requests,
        "/status/controllerPause",
        json!(false),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_full_asks_for_a_full_promotion_as_getpatches_does() {
    let rollout = rollout_with(paused_at_step_one());
    let body = json!({"status": {"promoteFull": true}});
    let requests = [get(WEB), patch(&status_of(WEB), MERGE, body)];
    acts(
        &rollout,
        &["promote", "web", "--full"],
        &requests,
        "/status/promoteFull",
        json!(true),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_is_refused_when_already_fully_promoted_or_not_a_canary_or_not_found() {
    let promoted =
        rollout_with(json!({"currentStepIndex": 4, "currentPodHash": "old", "stableRS": "old"}));
    let server = server_with(CrdSet::Argo, &promoted).await;
    for args in [["promote", "web", "--full"].as_slice(), &["promote", "web"]] {
        let ran = canaryd(&server, args).await;
        assert_eq!(ran.code, Some(1), "{args:?}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("default/web is already fully promoted"),
            "{}",
            ran.stderr
        );
    }
    assert_eq!(sent(&server), [get(WEB), get(WEB)], "read, never written");

    let mut no_strategy = rollout_with(json!({}));
    if let Some(strategy) = no_strategy.spec.strategy.as_mut() {
        strategy.canary = None;
    }
    let server = server_with(CrdSet::Argo, &no_strategy).await;
    let ran = canaryd(&server, &["promote", "web"]).await;
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("default/web is not a canary or blue-green Rollout"),
        "{}",
        ran.stderr
    );

    let ran = canaryd(&server, &["promote", "api", "-n", "shop"]).await;
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert_eq!(ran.stderr, "canaryd: rollout shop/api not found\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_and_retry_patch_the_status_as_abortrollout_and_retryrollout_do() {
    let rollout = rollout_with(paused_at_step_one());
    let abort = [patch(
        &status_of(WEB),
        MERGE,
        json!({"status": {"abort": true}}),
    )];
    acts(
        &rollout,
        &["abort", "web"],
        &abort,
        "/status/abort",
        json!(true),
    )
    .await;
    let retry = [patch(
        &status_of(WEB),
        MERGE,
        json!({"status": {"abort": false}}),
    )];
    acts(
        &rollout,
        &["retry", "web"],
        &retry,
        "/status/abort",
        json!(false),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_patch_spec_paused_as_the_pause_command_and_promotes_unpausepatch_do() {
    let rollout = rollout_with(paused_at_step_one());
    let pause = [patch(WEB, MERGE, json!({"spec": {"paused": true}}))];
    acts(
        &rollout,
        &["pause", "web"],
        &pause,
        "/spec/paused",
        json!(true),
    )
    .await;
    let resume = [patch(WEB, MERGE, json!({"spec": {"paused": false}}))];
    // resume leaves the step's pause: its condition stays for promote.
    acts(
        &rollout,
        &["resume", "web"],
        &resume,
        "/status/pauseConditions/0/reason",
        json!("CanaryPauseStep"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_of_a_missing_rollout_tries_the_status_then_the_object_as_abortrollout_does() {
    let server = FakeApiServer::start().await;
    let ran = canaryd(&server, &["abort", "web"]).await;
    assert_eq!(
        (ran.code, ran.stderr.as_str()),
        (Some(2), "canaryd: rollout default/web not found\n")
    );
    let body = json!({"status": {"abort": true}});
    assert_eq!(
        sent(&server),
        [
            patch(&status_of(WEB), MERGE, body.clone()),
            patch(WEB, MERGE, body)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_in_an_hour_sets_restart_at_to_the_second_as_restartrollout_does() {
    let rollout = rollout_with(paused_at_step_one());
    let server = server_with(CrdSet::Argo, &rollout).await;
    let before = jiff::Timestamp::now();
    let ran = canaryd(&server, &["restart", "web", "--in", "1h"]).await;
    let after = jiff::Timestamp::now();
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (Some(0), "rollout 'web' restarts in 1h\n"),
        "{}",
        ran.stderr
    );
    let requests = sent(&server);
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (method, path, content_type, body) = &requests[0];
    assert_eq!(
        (method.as_str(), path.as_str(), content_type.as_str()),
        ("PATCH", WEB, MERGE)
    );
    let at = body["spec"]["restartAt"].as_str().expect("restartAt");
    assert_eq!(
        at.len(),
        "2026-01-01T00:00:00Z".len(),
        "RFC 3339 to the second: {at}"
    );
    let at: jiff::Timestamp = at.parse().expect("a timestamp");
    let hour = jiff::SignedDuration::from_hours(1);
    let earliest = (before + hour).round(jiff::Unit::Second).expect("rounded")
        - jiff::SignedDuration::from_secs(1);
    assert!(
        at >= earliest && at <= after + hour,
        "{at} not an hour after {before}..{after}"
    );
    assert_eq!(
        stored(&server)["spec"]["restartAt"],
        body["spec"]["restartAt"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_delay_is_refused_before_and_no_cluster_after() {
    let server = FakeApiServer::start().await;
    let ran = canaryd(&server, &["restart", "web", "--in", "soon"]).await;
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("invalid value 'soon' for '--in <DELAY>': invalid duration \"soon\""),
        "{}",
        ran.stderr
    );
    assert!(
        server.requests().is_empty(),
        "refused before the cluster is asked"
    );
    let ran = canaryd_with(
        std::path::Path::new("/nonexistent/kubeconfig"),
        &["pause", "web"],
    )
    .await;
    assert_eq!(ran.code, Some(4), "{}", ran.stderr);
    assert!(
        ran.stderr.starts_with("canaryd: no cluster configured"),
        "{}",
        ran.stderr
    );
}

/// Argo's Rollout CRD without its status subresource, in `dir`: status is then written with the object.
fn crd_without_status(dir: &std::path::Path) -> std::path::PathBuf {
    let argo =
        canaryd_testkit::repo_root().join("tests/fixtures/crds/argo-rollouts-rollout-crd.yaml");
    let text = std::fs::read_to_string(argo).expect("Argo's Rollout CRD");
    let without = text.replace(
        "        statusReplicasPath: .status.HPAReplicas\n      status: {}\n",
        "        statusReplicasPath: .status.HPAReplicas\n",
    );
    assert_ne!(without, text, "the status subresource was declared");
    let file = dir.join("rollout-crd.yaml");
    std::fs::write(&file, without).expect("written");
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_status_subresource_promote_and_abort_send_the_object_the_unified_patch_as_the_plugin_does()
 {
    let dir = tempfile::tempdir().expect("a folder");
    let crd = crd_without_status(dir.path());
    let rollout = rollout_with(paused_at_step_one());
    let server = FakeApiServer::builder()
        .crds(CrdSet::Argo)
        .crd_file(&crd)
        .start()
        .await;
    server.put(&rollout);
    let ran = canaryd(&server, &["promote", "web"]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let cleared = json!({"status": {"pauseConditions": null}});
    let unified = json!({"spec": {"paused": false}, "status": {"pauseConditions": null}});
    let promote = [
        get(WEB),
        patch(&status_of(WEB), MERGE, cleared),
        patch(WEB, MERGE, unified),
    ];
    assert_eq!(
        sent(&server),
        promote,
        "PromoteRollout's unifiedPatch after a 404 on /status"
    );
    assert_eq!(stored(&server).pointer("/status/pauseConditions"), None);

    let ran = canaryd(&server, &["abort", "web"]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let abort = json!({"status": {"abort": true}});
    assert_eq!(
        sent(&server)[3..],
        [
            patch(&status_of(WEB), MERGE, abort.clone()),
            patch(WEB, MERGE, abort)
        ]
    );
    assert_eq!(stored(&server)["status"]["abort"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_n_the_namespace_is_the_kubeconfig_contexts_as_kubectl_takes_it() {
    let mut rollout = rollout_with(paused_at_step_one());
    rollout.metadata.namespace = Some("shop".into());
    let server = server_with(CrdSet::Argo, &rollout).await;
    let dir = tempfile::tempdir().expect("a folder");
    let text = std::fs::read_to_string(server.kubeconfig_path()).expect("the kubeconfig");
    let shop = text.replace("    namespace: default\n", "    namespace: shop\n");
    assert_ne!(shop, text, "the context names a namespace");
    let kubeconfig = dir.path().join("config");
    std::fs::write(&kubeconfig, shop).expect("written");
    let ran = canaryd_with(&kubeconfig, &["pause", "web"]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let path = WEB.replace("/namespaces/default/", "/namespaces/shop/");
    assert_eq!(
        sent(&server),
        [patch(&path, MERGE, json!({"spec": {"paused": true}}))]
    );
    let ran = canaryd_with(&kubeconfig, &["pause", "web", "-n", "default"]).await;
    assert_eq!(
        ran.stderr, "canaryd: rollout default/web not found\n",
        "-n wins"
    );
}
