//! Notifications sent by the daemon against the fake API server and a wiremock webhook: a subscribed Rollout
//! aborted is notified exactly once with the rendered body (Argo's built-in trigger and template, the webhook
//! body of a template of the user's), once after a retry that first met a 500, not again after a restart, and
//! an Event a daemon died before notifying is notified by the next one, once; a configuration created while
//! the daemon runs applies at once. A service that keeps failing is
//! a Warning Event that shows no secret. Argo's built-in abort template reaches Slack, Teams and email stand-ins
//! once each. With self-service notifications the configuration and Secret of the
//! Rollout's namespace notify it; without, they are not read. A Rollout or AnalysisRun the daemon holds is read
//! afresh only for a trigger it subscribes to.

#![allow(clippy::disallowed_methods)] // Not the Clock: the daemon runs against real sockets and is timed on real time.

use std::collections::BTreeMap;
use std::time::Duration;

use canaryd_testkit::fake_apiserver::CrdSet;
use canaryd_testkit::harness::{self, Answer, eventually};
use canaryd_testkit::rollout::cluster::*;
use canaryd_testkit::with_each_crd_set;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const BUILTIN: &str = include_str!("../../charts/canaryd/files/notifications-builtin.yaml");
const TOKEN: &str = "hook-s3cr3t-token";

fn notifying() -> canaryd::controller::Config {
    canaryd::controller::Config {
        notifications_namespace: Some("default".to_string()),
        ..config()
    }
}

/// Argo's built-ins, with `on-rollout-aborted` also sending a webhook body, and the webhook service `hook`
/// at `url` with a secret header; then the `extra` keys.
async fn configure(client: &kube::Client, url: &str, extra: &BTreeMap<String, String>) {
    let mut data: BTreeMap<String, String> =
        serde_json::from_value(canaryd::notify::settings::yaml_value(BUILTIN).expect("YAML"))
            .expect("the built-ins");
    data.insert(
        "trigger.on-rollout-aborted".into(),
        "- send: [rollout-aborted, hook-body]".into(),
    );
    data.insert(
        "template.hook-body".into(),
        "webhook:\n  hook:\n    method: POST\n    path: /aborted\n    body: |\n      {\"rollout\": \"{{.rollout.metadata.name}}\", \"image\": \"{{(index .rollout.spec.template.spec.containers 0).image}}\"}\n".into(),
    );
    data.insert(
        "service.webhook.hook".into(),
        format!("url: {url}\nheaders:\n- name: Authorization\n  value: Bearer $hook-token\nretryWaitMin: 10ms\nretryWaitMax: 50ms\nretryMax: 2\n"),
    );
    data.extend(extra.clone());
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "argo-rollouts-notification-configmap", "namespace": "default"},
        "data": data,
    }))
    .expect("a ConfigMap");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "argo-rollouts-notification-secret", "namespace": "default"},
        "stringData": {"hook-token": TOKEN},
    }))
    .expect("a Secret");
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &config_map)
        .await
        .expect("the ConfigMap is created");
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .expect("the Secret is created");
}

/// `web`, subscribed to `on-rollout-aborted` through the webhook `hook`, paused an hour at its first step.
fn subscribed() -> canaryd::api::Rollout {
    subscribed_to(&[("hook", "")])
}

/// `web`, subscribed to `on-rollout-aborted` through each service and recipient, paused an hour at its first
/// step.
fn subscribed_to(services: &[(&str, &str)]) -> canaryd::api::Rollout {
    let mut rollout = rollout("web:1", "1h");
    let annotation =
        |service: &str| format!("notifications.argoproj.io/subscribe.on-rollout-aborted.{service}");
    rollout.metadata.annotations = Some(
        services
            .iter()
            .map(|(service, recipient)| (annotation(service), recipient.to_string()))
            .collect(),
    );
    rollout
}

async fn webhook(first: Option<u16>) -> MockServer {
    let hook = MockServer::start().await;
    if let Some(status) = first {
        Mock::given(method("POST"))
            .and(path("/aborted"))
            .respond_with(ResponseTemplate::new(status))
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&hook)
            .await;
    }
    Mock::given(method("POST"))
        .and(path("/aborted"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&hook)
        .await;
    hook
}

async fn received(hook: &MockServer) -> Vec<Request> {
    hook.received_requests().await.unwrap_or_default()
}

/// A daemon whose own namespace (`canaryd`) holds no configuration, reading the Rollout's namespace's with
/// `self_service`.
fn elsewhere(self_service: bool) -> canaryd::controller::Config {
    canaryd::controller::Config {
        notifications_namespace: Some("canaryd".to_string()),
        self_service_notifications: self_service,
        ..config()
    }
}

/// Deploys, runs a daemon with `daemon`, configures the Rollout's namespace (while the daemon runs: the watch
/// applies it without a restart), updates to `web:2` and aborts it while paused; returns once it is Degraded.
async fn aborted(
    crds: CrdSet,
    first: Option<u16>,
    daemon: canaryd::controller::Config,
) -> (Deployed, MockServer, harness::Running) {
    let hook = webhook(first).await;
    let (deployed, daemon) =
        aborted_with(crds, &hook, &subscribed(), daemon, &BTreeMap::new()).await;
    (deployed, hook, daemon)
}

/// [`aborted`] for `rollout`, the ConfigMap's `extra` keys added.
async fn aborted_with(
    crds: CrdSet,
    hook: &MockServer,
    rollout: &canaryd::api::Rollout,
    daemon: canaryd::controller::Config,
    extra: &BTreeMap<String, String>,
) -> (Deployed, harness::Running) {
    let deployed = deployed_with(crds, Answer::Scalar(1.0), rollout).await;
    let (server, client) = (&deployed.0, &deployed.1);
    let daemon = harness::spawn(client.clone(), daemon).await;
    until(server, "the first deploy", |s| healthy_at(s, None)).await;
    configure(client, &hook.uri(), extra).await;
    set_image(client, "web:2").await;
    until(server, "the pause", |s| s.current_step_index == Some(1)).await;
    patch_status(client, json!({"status": {"abort": true}})).await;
    until(server, "the abort", |s| s.phase == "Degraded").await;
    (deployed, daemon)
}

/// [`aborted`] with the daemon reading its own namespace; returns when the abort is notified.
async fn abort_notified(
    crds: CrdSet,
    first: Option<u16>,
) -> (Deployed, MockServer, harness::Running) {
    let (deployed, hook, daemon) = aborted(crds, first, notifying()).await;
    let wanted = if first.is_some() { 2 } else { 1 };
    eventually(WAIT, "the webhook to be called", || async {
        (received(&hook).await.len() >= wanted).then_some(())
    })
    .await;
    (deployed, hook, daemon)
}

/// Long enough for a second notification, were one sent, to arrive.
const SETTLE: Duration = Duration::from_secs(2);

fn notified_annotation(events: &[Event]) -> Option<String> {
    events
        .iter()
        .find(|e| e.reason.as_deref() == Some("RolloutAborted"))
        .and_then(|e| {
            e.metadata
                .annotations
                .as_ref()?
                .get(canaryd::notify::NOTIFIED)
                .cloned()
        })
}

async fn all_events(client: &kube::Client) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
}

async fn an_aborted_rollout_is_notified_once_with_the_rendered_body_and_not_again_after_a_restart(
    crds: CrdSet,
) {
    let (deployed, hook, daemon) = abort_notified(crds, None).await;
    let client = &deployed.1;
    tokio::time::sleep(SETTLE).await;
    let requests = received(&hook).await;
    assert_eq!(requests.len(), 1, "exactly one notification");
    let body: Value = serde_json::from_slice(&requests[0].body).expect("a JSON body");
    assert_eq!(body, json!({"rollout": "web", "image": "web:2"}));
    assert_eq!(
        requests[0]
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok()),
        Some(format!("Bearer {TOKEN}").as_str()),
        "the secret filled in"
    );
    eventually(WAIT, "the send to be recorded on the Event", || async {
        notified_annotation(&all_events(client).await)
    })
    .await;
    let labels = [
        ("namespace", "default"),
        ("name", "web"),
        ("type", "Warning"),
        ("reason", "RolloutAborted"),
    ];
    assert_eq!(
        daemon.metric("notification_send_success", &labels).await,
        1.0
    );
    daemon.kill().await;
    let again = harness::spawn(client.clone(), notifying()).await;
    tokio::time::sleep(SETTLE).await;
    again.stop().await;
    assert_eq!(received(&hook).await.len(), 1, "none after the restart");
}

with_each_crd_set!(
    an_aborted_rollout_is_notified_once_with_the_rendered_body_and_not_again_after_a_restart
);

/// Argo's built-in triggers fire on most of an update's Events (`on-rollout-updated`, `on-scaling-replica-set`,
/// `on-rollout-step-completed`, `on-rollout-paused`): a Rollout the daemon holds that subscribes to none of them
/// is not read afresh for them, as Argo's recorder looks at the object it holds. Only the abort, which it
/// subscribes to, reads it (so what is sent shows it as it is).
async fn a_rollout_is_read_afresh_only_for_the_triggers_it_subscribes_to(crds: CrdSet) {
    let (deployed, _hook, daemon) = abort_notified(crds, None).await;
    daemon.stop().await;
    let requests = deployed.0.requests();
    // From the configuration on (the first deploy's reconciles may read the Rollout before the caches fill).
    let configured = requests
        .iter()
        .find(|r| r.method == "POST" && r.path.ends_with("/configmaps"))
        .map(|r| r.at)
        .expect("the configuration was created");
    let rollout = "/apis/argoproj.io/v1alpha1/namespaces/default/rollouts/web";
    let gets = |path: &dyn Fn(&str, &str) -> bool| {
        requests
            .iter()
            .filter(|r| r.at > configured && r.method == "GET" && path(&r.path, &r.query))
            .count()
    };
    // A reconcile whose caches lag its own last write by more than a second reads the Rollout afresh too, and
    // lists its ReplicaSets by the Rollout's selector with it (the watches list by other selectors): those reads
    // are not the notifier's.
    let fresh = gets(&|p, q| p.ends_with("/default/replicasets") && q.contains("app%3Dweb"));
    let reads = gets(&|p, _| p == rollout).saturating_sub(fresh);
    let events = all_events(&deployed.1).await;
    let fired = [
        "RolloutUpdated",
        "ScalingReplicaSet",
        "RolloutStepCompleted",
        "RolloutPaused",
    ];
    let triggered: Vec<_> = events
        .iter()
        .filter(|e| e.event_time.as_ref().is_some_and(|t| t.0 > configured))
        .filter_map(|e| e.reason.as_deref())
        .filter(|r| fired.contains(r))
        .collect();
    assert!(
        triggered.len() >= 3,
        "the update fired built-in triggers: {triggered:?}"
    );
    assert_eq!(reads, 1, "one read, for the abort");
}

with_each_crd_set!(a_rollout_is_read_afresh_only_for_the_triggers_it_subscribes_to);

/// The same for an AnalysisRun: with triggers on the step run's own Events (`on-metric-successful`,
/// `on-analysis-run-successful`), the run, held in the daemon's cache and subscribed to nothing, is not read
/// afresh for them. (Nothing else reads a run here: the daemon reads one afresh only after a conflicting status
/// write, and no other writer touches it.)
async fn an_analysis_run_subscribed_to_nothing_is_not_read_afresh_for_its_events(crds: CrdSet) {
    let hook = webhook(None).await;
    let deployed = deployed_with(crds, Answer::Scalar(1.0), &rollout("web:1", "1s")).await;
    let (server, client) = (&deployed.0, &deployed.1);
    let daemon = harness::spawn(client.clone(), notifying()).await;
    let first = until(server, "the first deploy", |s| healthy_at(s, None)).await;
    let fired = ["MetricSuccessful", "AnalysisRunSuccessful"];
    let triggers = fired.map(|reason| {
        (
            format!(
                "trigger.{}",
                canaryd::engine::notify::trigger_for_reason(reason)
            ),
            "- send: [analysis-run-running]".to_string(),
        )
    });
    configure(client, &hook.uri(), &BTreeMap::from(triggers)).await;
    set_image(client, "web:2").await;
    until(server, "the update to be promoted", |s| {
        healthy_at(s, None) && s.stable_rs != first.stable_rs
    })
    .await;
    daemon.stop().await;
    let requests = server.requests();
    let configured = requests
        .iter()
        .find(|r| r.method == "POST" && r.path.ends_with("/configmaps"))
        .map(|r| r.at)
        .expect("the configuration was created");
    let told: Vec<_> = all_events(client)
        .await
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("AnalysisRun"))
        .filter(|e| e.event_time.as_ref().is_some_and(|t| t.0 > configured))
        .filter_map(|e| e.reason)
        .collect();
    assert_eq!(told, fired, "the step run's Events");
    let runs = "/apis/argoproj.io/v1alpha1/namespaces/default/analysisruns/";
    let reads: Vec<_> = requests
        .iter()
        .filter(|r| r.at > configured && r.method == "GET" && r.path.starts_with(runs))
        .map(|r| &r.path)
        .collect();
    assert_eq!(reads, Vec::<&String>::new(), "no run read afresh");
}

with_each_crd_set!(an_analysis_run_subscribed_to_nothing_is_not_read_afresh_for_its_events);

async fn a_send_that_first_meets_a_500_is_retried_and_arrives_once(crds: CrdSet) {
    let (_deployed, hook, daemon) = abort_notified(crds, Some(500)).await;
    tokio::time::sleep(SETTLE).await;
    daemon.stop().await;
    let statuses: Vec<String> = received(&hook)
        .await
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(
        statuses.len(),
        2,
        "the 500, then the one that arrives: {statuses:?}"
    );
    assert_eq!(statuses[0], statuses[1], "the same rendered body retried");
}

with_each_crd_set!(a_send_that_first_meets_a_500_is_retried_and_arrives_once);

async fn with_self_service_the_rollouts_namespace_configuration_and_secret_notify_it_once(
    crds: CrdSet,
) {
    let (deployed, hook, daemon) = aborted(crds, None, elsewhere(true)).await;
    let client = &deployed.1;
    let annotation = eventually(WAIT, "the send to be recorded on the Event", || async {
        notified_annotation(&all_events(client).await)
    })
    .await;
    tokio::time::sleep(SETTLE).await;
    daemon.stop().await;
    let requests = received(&hook).await;
    assert_eq!(requests.len(), 1, "exactly one notification");
    let body: Value = serde_json::from_slice(&requests[0].body).expect("a JSON body");
    assert_eq!(body, json!({"rollout": "web", "image": "web:2"}));
    assert_eq!(
        requests[0]
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok()),
        Some(format!("Bearer {TOKEN}").as_str()),
        "the secret of the Rollout's namespace filled in"
    );
    let recorded: Value = serde_json::from_str(&annotation).expect("JSON");
    assert_eq!(
        recorded,
        json!({"default/on-rollout-aborted:hook:": "sent"}),
        "recorded under the namespace whose configuration sent it"
    );
}

with_each_crd_set!(
    with_self_service_the_rollouts_namespace_configuration_and_secret_notify_it_once
);

async fn without_self_service_a_configuration_in_the_rollouts_namespace_sends_nothing(
    crds: CrdSet,
) {
    let (deployed, hook, daemon) = aborted(crds, None, elsewhere(false)).await;
    tokio::time::sleep(SETTLE).await;
    daemon.stop().await;
    assert!(received(&hook).await.is_empty());
    let events = all_events(&deployed.1).await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("RolloutAborted")),
        "the abort was recorded"
    );
    assert_eq!(notified_annotation(&events), None);
    assert!(
        !events
            .iter()
            .any(|e| e.reason.as_deref() == Some(canaryd::notify::FAILED))
    );
}

with_each_crd_set!(without_self_service_a_configuration_in_the_rollouts_namespace_sends_nothing);

async fn a_service_that_keeps_failing_is_a_warning_event_that_shows_no_secret(crds: CrdSet) {
    let hook = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(503).set_body_string(format!("denied for Bearer {TOKEN}")),
        )
        .mount(&hook)
        .await;
    let deployed = deployed_with(crds, Answer::Scalar(1.0), &subscribed()).await;
    let (server, client) = (&deployed.0, &deployed.1);
    configure(client, &hook.uri(), &BTreeMap::new()).await;
    let daemon = harness::spawn(client.clone(), notifying()).await;
    until(server, "the first deploy", |s| healthy_at(s, None)).await;
    set_image(client, "web:2").await;
    until(server, "the pause", |s| s.current_step_index == Some(1)).await;
    patch_status(client, json!({"status": {"abort": true}})).await;
    let failed = eventually(WAIT, "the failure to be told", || async {
        all_events(client)
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(canaryd::notify::FAILED))
    })
    .await;
    let labels = [("name", "web"), ("reason", "RolloutAborted")];
    assert_eq!(daemon.metric("notification_send_error", &labels).await, 1.0);
    daemon.stop().await;
    assert_eq!(
        received(&hook).await.len(),
        3,
        "the first try and retryMax: 2 retries"
    );
    let note = failed.note.clone().unwrap_or_default();
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    assert!(
        note.starts_with("Notification for trigger 'on-rollout-aborted' failed: request to POST"),
        "{note}"
    );
    assert!(
        note.contains("503") && note.contains("denied for Bearer *****"),
        "{note}"
    );
    assert!(!note.contains(TOKEN), "{note}");
    let regarding = failed.regarding.as_ref().and_then(|r| r.name.as_deref());
    assert_eq!(regarding, Some("web"));
}

with_each_crd_set!(a_service_that_keeps_failing_is_a_warning_event_that_shows_no_secret);

async fn an_event_a_daemon_died_before_notifying_is_notified_by_the_next_once(crds: CrdSet) {
    let hook = webhook(None).await;
    let deployed = deployed_with(crds, Answer::Scalar(1.0), &subscribed()).await;
    let client = &deployed.1;
    configure(client, &hook.uri(), &BTreeMap::new()).await;
    // The Event a daemon created just before it was killed, not yet notified.
    let recorded: Event = serde_json::from_value(json!({
        "metadata": {"name": "web.recorded", "namespace": "default"},
        "eventTime": jiff::Timestamp::now().to_string(),
        "reason": "RolloutAborted", "type": "Warning", "action": "Reconcile",
        "note": "Rollout aborted update to revision 2",
        "reportingController": "canaryd", "reportingInstance": "gone",
        "regarding": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "namespace": "default", "name": "web"},
    }))
    .expect("an Event");
    Api::<Event>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &recorded)
        .await
        .expect("the Event is created");
    let daemon = harness::spawn(client.clone(), notifying()).await;
    eventually(WAIT, "the catch-up to notify it", || async {
        (!received(&hook).await.is_empty()).then_some(())
    })
    .await;
    eventually(WAIT, "the send to be recorded", || async {
        notified_annotation(&all_events(client).await)
    })
    .await;
    daemon.kill().await;
    let again = harness::spawn(client.clone(), notifying()).await;
    tokio::time::sleep(SETTLE).await;
    again.stop().await;
    let requests = received(&hook).await;
    assert_eq!(requests.len(), 1, "notified once across the restart");
    let body: Value = serde_json::from_slice(&requests[0].body).expect("a JSON body");
    assert_eq!(body, json!({"rollout": "web", "image": "web:1"}));
}

with_each_crd_set!(an_event_a_daemon_died_before_notifying_is_notified_by_the_next_once);

async fn argos_built_in_abort_template_reaches_slack_teams_and_email_stand_ins_once_each(
    crds: CrdSet,
) {
    let stand_in = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat.postMessage"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "channel": "C1", "ts": "1.0"})),
        )
        .mount(&stand_in)
        .await;
    Mock::given(method("POST"))
        .and(path("/teams/ops"))
        .respond_with(ResponseTemplate::new(200).set_body_string("1"))
        .mount(&stand_in)
        .await;
    let smtp = canaryd_testkit::smtp::SmtpServer::start().await;
    let extra = BTreeMap::from([
        (
            "service.slack".to_string(),
            format!("token: $hook-token\napiURL: {}/api\n", stand_in.uri()),
        ),
        (
            "service.teams".to_string(),
            format!("recipientUrls:\n  ops: {}/teams/ops\n", stand_in.uri()),
        ),
        (
            "service.email".to_string(),
            format!(
                "host: 127.0.0.1\nport: {}\nfrom: canaryd@example.com\n",
                smtp.port
            ),
        ),
    ]);
    let rollout = subscribed_to(&[
        ("slack", "deploys"),
        ("teams", "ops"),
        ("email", "ops@example.com"),
    ]);
    let (deployed, daemon) = aborted_with(crds, &stand_in, &rollout, notifying(), &extra).await;
    eventually(WAIT, "the three sends to be recorded", || async {
        let recorded = notified_annotation(&all_events(&deployed.1).await)?;
        let recorded: serde_json::Map<String, Value> = serde_json::from_str(&recorded).ok()?;
        (recorded.len() == 3).then_some(recorded)
    })
    .await;
    tokio::time::sleep(SETTLE).await;
    daemon.stop().await;
    let requests = received(&stand_in).await;
    let to = |p: &str| {
        requests
            .iter()
            .filter(|r| r.url.path() == p)
            .collect::<Vec<_>>()
    };
    let (slack, teams) = (to("/api/chat.postMessage"), to("/teams/ops"));
    assert_eq!((slack.len(), teams.len()), (1, 1), "one message each");
    assert_eq!(
        slack[0]
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok()),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    let posted: Value = serde_json::from_slice(&slack[0].body).expect("JSON");
    assert_eq!(posted["channel"], "deploys");
    assert_eq!(posted["text"], "Rollout web has been aborted.");
    let attachment = &posted["attachments"][0];
    assert_eq!(attachment["title"], "web");
    assert_eq!(
        attachment["fields"][0],
        json!({"title": "Strategy", "value": "Canary", "short": true})
    );
    assert_eq!(attachment["fields"][1]["value"], "web:2", "{posted}");
    let card: Value = serde_json::from_slice(&teams[0].body).expect("JSON");
    assert_eq!(card["@type"], "MessageCard");
    assert_eq!(card["text"], "Rollout web has been aborted.");
    let mails = smtp.mails();
    assert_eq!(mails.len(), 1, "one mail");
    assert_eq!(mails[0].to, ["ops@example.com"]);
    assert!(
        mails[0]
            .data
            .contains("Subject: Rollout web has been aborted."),
        "{}",
        mails[0].data
    );
}

with_each_crd_set!(argos_built_in_abort_template_reaches_slack_teams_and_email_stand_ins_once_each);
