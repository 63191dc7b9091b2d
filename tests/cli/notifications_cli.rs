//! `canaryd notifications template notify` and `trigger run` (the notifications engine's `pkg/cmd` verbs)
//! against the fake API server through `KUBECONFIG`, under both CRD sets: a template printed as the daemon
//! would render it and sent to a recipient (a wiremock Slack), each condition of a trigger with whether it
//! fires (reading `time.Now()` and the Rollout's AnalysisRuns), the exit codes of what does not exist, and
//! `template get`/`trigger get` listing what is configured.

#![allow(clippy::disallowed_methods)] // Not the Clock: the child process runs on real time.

use canaryd::api::{AnalysisRun, Rollout};
use canaryd_testkit::cli::Ran;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use canaryd_testkit::rollout::cluster::rollout;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::CANARYD;

const TOKEN: &str = "xoxb-cli-s3cr3t";

fn from<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("the object")
}

/// `web` on revision 2, paused since 2020 at its second step, pods of hash `abc`; one failed AnalysisRun of
/// its revision; a template, two triggers and a Slack service at `slack`.
async fn serve(set: CrdSet, slack: &str) -> FakeApiServer {
    let server = FakeApiServer::builder().crds(set).start().await;
    let mut web = serde_json::to_value(rollout("web:2", "1h")).expect("JSON");
    web["metadata"]["annotations"] = json!({"rollout.argoproj.io/revision": "2"});
    web["status"] = json!({
        "currentPodHash": "abc",
        "currentStepIndex": 1,
        "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2020-01-01T00:00:00Z"}],
    });
    server.put::<Rollout>(&from(web));
    server.put::<AnalysisRun>(&from(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {
            "name": "web-abc-2", "namespace": "default",
            "labels": {"rollouts-pod-template-hash": "abc"},
            "annotations": {"rollout.argoproj.io/revision": "2"},
        },
        "spec": {"metrics": [{"name": "m", "provider": {"job": {"spec": {"template": {"spec": {"containers": []}}}}}}]},
        "status": {"phase": "Failed"},
    })));
    let paused_long =
        "time.Now().Sub(time.Parse(rollout.status.pauseConditions[0].startTime)).Hours() > 1";
    server.put::<ConfigMap>(&from(json!({
        "metadata": {"name": "argo-rollouts-notification-configmap", "namespace": "default"},
        "data": {
            "template.stuck": "message: Rollout {{.rollout.metadata.name}} is stuck at step {{.rollout.status.currentStepIndex}}, {{.recipient}}\n",
            "trigger.on-stuck": format!("- when: {paused_long}\n  send: [stuck]\n- when: analysisRuns[0].status.phase == 'Successful'\n  send: [stuck]\n"),
            "trigger.on-fresh": "- when: time.Now().Sub(time.Parse(rollout.status.pauseConditions[0].startTime)).Minutes() < 5\n  send: [stuck]\n",
            "service.slack": format!("token: $slack-token\napiURL: {slack}\n"),
        },
    })));
    server.put::<Secret>(&from(json!({
        "metadata": {"name": "argo-rollouts-notification-secret", "namespace": "default"},
        "stringData": {"slack-token": TOKEN},
    })));
    server
}

async fn canaryd(server: &FakeApiServer, args: &[&str]) -> Ran {
    let mut all = vec!["notifications"];
    all.extend_from_slice(args);
    CANARYD.on_cluster(server.kubeconfig_path(), &all).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_notify_prints_the_notification_and_sends_it_to_a_recipient_through_its_service() {
    for set in [CrdSet::Canaryd, CrdSet::Argo] {
        let slack = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/chat.postMessage"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
            .mount(&slack)
            .await;
        let server = serve(set, &slack.uri()).await;
        let ran = canaryd(&server, &["template", "notify", "stuck", "web"]).await;
        assert_eq!(ran.code, Some(0), "{set:?}: {}", ran.stderr);
        let printed: Value = serde_json::from_str(&ran.stdout).expect("the notification as JSON");
        assert_eq!(
            printed,
            json!({"message": "Rollout web is stuck at step 1, stdout"}),
            "{set:?}"
        );
        let args = [
            "template",
            "notify",
            "stuck",
            "web",
            "--recipient",
            "slack:ops",
        ];
        let ran = canaryd(&server, &args).await;
        assert_eq!(ran.code, Some(0), "{set:?}: {}", ran.stderr);
        let received = slack.received_requests().await.unwrap_or_default();
        assert_eq!(received.len(), 1, "{set:?}");
        let body: Value = serde_json::from_slice(&received[0].body).expect("JSON");
        assert_eq!(body["channel"], "ops", "{set:?}");
        assert_eq!(
            body["text"], "Rollout web is stuck at step 1, ops",
            "{set:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_run_prints_each_condition_and_whether_it_fires_now_with_the_analysis_runs() {
    for set in [CrdSet::Canaryd, CrdSet::Argo] {
        let server = serve(set, "http://127.0.0.1:1").await;
        let ran = canaryd(&server, &["trigger", "run", "on-stuck", "web"]).await;
        assert_eq!(ran.code, Some(0), "{set:?}: {}", ran.stderr);
        let rows: Vec<Vec<&str>> = ran
            .stdout
            .lines()
            .map(|l| l.rsplitn(2, "  ").collect())
            .collect();
        let results: Vec<&str> = rows.iter().map(|r| r[0].trim()).collect();
        assert_eq!(
            results,
            ["RESULT", "true", "false"],
            "{set:?}:\n{}",
            ran.stdout
        );
        assert!(rows[1][1].starts_with("time.Now().Sub("), "{}", ran.stdout);
        let ran = canaryd(&server, &["trigger", "run", "on-fresh", "web"]).await;
        assert_eq!(ran.code, Some(1), "{set:?}: {}", ran.stderr);
        assert!(ran.stdout.ends_with("  false\n"), "{}", ran.stdout);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_does_not_exist_is_exit_2_naming_what_does() {
    let server = serve(CrdSet::Canaryd, "http://127.0.0.1:1").await;
    for (args, says) in [
        (
            vec!["template", "notify", "gone", "web"],
            "template 'gone' does not exist (found stuck)",
        ),
        (
            vec!["trigger", "run", "on-gone", "web"],
            "trigger with name 'on-gone' does not exist (found on-fresh, on-stuck)",
        ),
        (
            vec!["trigger", "run", "on-stuck", "api"],
            r#"rollout "api" in namespace "default" not found"#,
        ),
        (
            vec![
                "trigger",
                "run",
                "on-stuck",
                "web",
                "--config-namespace",
                "argo",
            ],
            r#"configmap "argo-rollouts-notification-configmap" not found in namespace "argo""#,
        ),
    ] {
        let ran = canaryd(&server, &args).await;
        assert_eq!(ran.code, Some(2), "{args:?}: {}", ran.stderr);
        assert!(ran.stderr.contains(says), "{args:?}: {}", ran.stderr);
    }
    let args = [
        "template",
        "notify",
        "stuck",
        "web",
        "--recipient",
        "slack:ops",
    ];
    let ran = canaryd(&server, &args).await;
    assert_eq!(ran.code, Some(4), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("failed to notify 'slack:ops'"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains(TOKEN), "{}", ran.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_get_and_trigger_get_list_what_is_configured_as_a_table_names_or_json() {
    let server = serve(CrdSet::Argo, "http://127.0.0.1:1").await;
    let ran = canaryd(&server, &["template", "get"]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(
        ran.stdout,
        "NAME   PREVIEW\nstuck  Rollout {{.rollout.metadata.name}} is stuck at step {{.rollout.status.currentStepIndex}}, {{.recipi...\n",
        "the message's first line, cut at 99 bytes as Notification.Preview cuts it"
    );
    let ran = canaryd(&server, &["trigger", "get"]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let lines: Vec<Vec<&str>> = ran
        .stdout
        .lines()
        .map(|l| {
            l.split("  ")
                .filter(|c| !c.is_empty())
                .map(str::trim)
                .collect()
        })
        .collect();
    assert_eq!(
        lines[0],
        ["NAME", "TEMPLATE", "CONDITION"],
        "{}",
        ran.stdout
    );
    assert_eq!(lines[1][..2], ["on-fresh", "stuck"], "{}", ran.stdout);
    assert_eq!(lines[2][..2], ["on-stuck", "stuck"], "{}", ran.stdout);
    assert_eq!(
        lines[3],
        ["stuck", "analysisRuns[0].status.phase == 'Successful'"],
        "the second condition of on-stuck, without its name:\n{}",
        ran.stdout
    );
    let ran = canaryd(&server, &["trigger", "get", "on-fresh", "-o", "name"]).await;
    assert_eq!((ran.code, ran.stdout.as_str()), (Some(0), "on-fresh\n"));
    let ran = canaryd(&server, &["trigger", "get", "on-stuck", "-o", "json"]).await;
    let definition: Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(
        definition["on-stuck"][1],
        json!({"when": "analysisRuns[0].status.phase == 'Successful'", "send": ["stuck"]})
    );
    let ran = canaryd(&server, &["template", "get", "gone"]).await;
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (Some(0), "NAME  PREVIEW\n")
    );
    let ran = canaryd(&server, &["template", "get", "-o", "yaml"]).await;
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
}
