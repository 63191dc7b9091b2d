//! Notifications' pure half: Argo's built-in triggers and templates (as the chart ships them) and its published
//! example ConfigMap read unchanged, every built-in template rendered as Go's text/template renders it, the
//! `when` conditions, `$key` secrets, the errors that name a ConfigMap key, and who is subscribed.

use std::collections::BTreeMap;

use canaryd::engine::notify::config::{Config, ConfigError};
use canaryd::engine::notify::render::{Vars, render};
use canaryd::engine::notify::subscriptions::{Destination, destinations};
use canaryd::engine::notify::templates_to_send;
use canaryd::notify::settings::yaml_value;
use serde_json::{Value, json};

const BUILTIN: &str = include_str!("../../charts/canaryd/files/notifications-builtin.yaml");
const ARGO_EXAMPLE: &str =
    include_str!("../fixtures/argo-examples/examples__notifications__configmap.yaml");

fn data(yaml: &str) -> BTreeMap<String, String> {
    serde_json::from_value(yaml_value(yaml).expect("YAML")).expect("a map of strings")
}

fn parse(data: &BTreeMap<String, String>, secret: &[(&str, &str)]) -> (Config, Vec<ConfigError>) {
    let secret = secret
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::parse(data, &secret, &yaml_value)
}

fn builtin() -> Config {
    let (config, errors) = parse(&data(BUILTIN), &[]);
    assert_eq!(errors, [], "the built-ins read without error");
    config
}

/// `web`: a canary of two containers at step 1 of 3.
fn rollout() -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 5,
            "template": {"spec": {"containers": [
                {"name": "web", "image": "web:2"},
                {"name": "proxy", "image": "envoy:1"},
            ]}},
            "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}]}},
        },
        "status": {"currentStepIndex": 1, "updatedReplicas": 2},
    })
}

fn rendered(config: &Config, template: &str, rollout: &Value) -> serde_json::Map<String, Value> {
    let context = BTreeMap::new();
    let vars = Vars {
        rollout,
        analysis_runs: &Value::Null,
        recipient: "ops",
        service: "slack",
        context: &context,
    };
    render(&config.templates, &[template.to_string()], &vars)
        .unwrap_or_else(|e| panic!("{template}: {e}"))
}

fn attachments(notification: &serde_json::Map<String, Value>) -> Value {
    let text = notification["slack"]["attachments"]
        .as_str()
        .expect("attachments text");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

#[test]
fn argos_nine_builtin_triggers_each_send_their_template() {
    let config = builtin();
    let triggers: Vec<&str> = config.triggers.keys().map(String::as_str).collect();
    assert_eq!(
        triggers,
        [
            "on-analysis-run-error",
            "on-analysis-run-failed",
            "on-analysis-run-running",
            "on-rollout-aborted",
            "on-rollout-completed",
            "on-rollout-paused",
            "on-rollout-step-completed",
            "on-rollout-updated",
            "on-scaling-replica-set",
        ]
    );
    for (trigger, conditions) in &config.triggers {
        let sends = templates_to_send(
            &config,
            trigger,
            &rollout(),
            &Value::Null,
            jiff::Timestamp::UNIX_EPOCH,
        )
        .expect("no when to fail");
        assert_eq!(sends.len(), 1, "{trigger}");
        assert_eq!(sends[0], conditions[0].send, "{trigger}");
        assert!(config.templates.contains_key(&sends[0][0]), "{trigger}");
    }
}

#[test]
fn every_builtin_template_renders_its_message_subject_and_slack_attachments_as_go_would() {
    let config = builtin();
    assert_eq!(config.templates.len(), 9);
    for name in config.templates.keys() {
        let notification = rendered(&config, name, &rollout());
        let message = notification["message"].as_str().expect("a message");
        assert!(
            message.starts_with("Rollout web") || message.starts_with("Scaling Rollout web"),
            "{name}: {message}"
        );
        assert_eq!(
            notification["email"]["subject"].as_str(),
            Some(message.trim_end()),
            "{name}"
        );
        let fields = attachments(&notification)[0]["fields"].clone();
        let containers: Vec<&Value> = fields
            .as_array()
            .expect("fields")
            .iter()
            .filter(|f| f["title"] == "web" || f["title"] == "proxy")
            .collect();
        assert_eq!(
            containers,
            [
                &json!({"title": "web", "value": "web:2", "short": true}),
                &json!({"title": "proxy", "value": "envoy:1", "short": true}),
            ],
            "{name}"
        );
        assert_eq!(
            fields[0],
            json!({"title": "Strategy", "value": "Canary", "short": true}),
            "{name}"
        );
    }
}

#[test]
fn the_aborted_template_renders_exactly_argos_text() {
    let notification = rendered(&builtin(), "rollout-aborted", &rollout());
    assert_eq!(notification["message"], "Rollout web has been aborted.");
    assert_eq!(
        attachments(&notification),
        json!([{
            "title": "web", "color": "#E01E5A",
            "fields": [
                {"title": "Strategy", "value": "Canary", "short": true},
                {"title": "web", "value": "web:2", "short": true},
                {"title": "proxy", "value": "envoy:1", "short": true},
            ],
        }])
    );
}

#[test]
fn the_step_template_counts_steps_with_sprigs_add_and_gos_len() {
    let notification = rendered(&builtin(), "rollout-step-completed", &rollout());
    assert_eq!(
        notification["message"],
        "Rollout web step number 2/3 has been completed."
    );
    let fields = attachments(&notification)[0]["fields"].clone();
    assert!(
        fields
            .as_array()
            .expect("fields")
            .contains(&json!({"title": "Step completed", "value": "2/3", "short": true})),
        "{fields}"
    );
}

#[test]
fn a_template_reads_the_analysis_runs_as_argo_gives_them() {
    let (config, errors) = parse(
        &data(
            "template.analysis: |\n  message: '{{ len .analysisRuns }} run(s), the newest {{ (index .analysisRuns 0).status.phase }}'\n",
        ),
        &[],
    );
    assert_eq!(errors, []);
    let runs = json!([{"status": {"phase": "Failed"}}, {"status": {"phase": "Successful"}}]);
    let context = BTreeMap::new();
    let vars = Vars {
        rollout: &rollout(),
        analysis_runs: &runs,
        recipient: "ops",
        service: "slack",
        context: &context,
    };
    let notification =
        render(&config.templates, &["analysis".to_string()], &vars).expect("rendered");
    assert_eq!(notification["message"], "2 run(s), the newest Failed");
}

#[test]
fn sprigs_string_functions_render_as_sprig_does() {
    let template = concat!(
        "message: '{{ .rollout.metadata.labels.team | default \"nobody\" }} ",
        "{{ .rollout.metadata.name | default \"unnamed\" }} ",
        "{{ .rollout.metadata.name | quote }} ",
        "{{ \"web:2\" | replace \":\" \"@\" }} ",
        "{{ if contains \"eb\" .rollout.metadata.name }}yes{{ end }} ",
        "{{ if hasPrefix \"we\" .rollout.metadata.name }}yes{{ end }} ",
        "{{ if hasSuffix \"x\" .rollout.metadata.name }}yes{{ else }}no{{ end }} ",
        "{{ \"v1.2.3\" | trimPrefix \"v\" | trimSuffix \".3\" }}'\n",
    );
    let (config, errors) = parse(&data(&format!("template.strings: |\n  {template}")), &[]);
    assert_eq!(errors, []);
    let notification = rendered(&config, "strings", &rollout());
    assert_eq!(
        notification["message"],
        "nobody web \"web\" web@2 yes yes no 1.2"
    );
}

#[test]
fn a_blue_green_rollout_says_so_where_a_field_is_missing_go_reads_no_value() {
    let mut blue_green = rollout();
    blue_green["spec"]["strategy"] = json!({"blueGreen": {"activeService": "web"}});
    let notification = rendered(&builtin(), "rollout-completed", &blue_green);
    assert_eq!(
        attachments(&notification)[0]["fields"][0]["value"],
        "BlueGreen"
    );
}

#[test]
fn argos_published_example_reads_unchanged_and_its_when_selects_the_purple_image() {
    let (config, errors) = parse(
        &data(&yaml_value(ARGO_EXAMPLE).expect("YAML")["data"].to_string()),
        &[("slack-token", "xoxb-secret")],
    );
    assert_eq!(errors, []);
    assert_eq!(config.services["slack"].kind, "slack");
    assert_eq!(
        config.services["slack"].options,
        json!({"token": "xoxb-secret"})
    );
    assert!(
        !format!("{config:?}").contains("xoxb-secret"),
        "Debug hides the options"
    );
    let mut purple = rollout();
    purple["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("argoproj/rollouts-demo:purple");
    let sends = |r: &Value| {
        templates_to_send(
            &config,
            "on-purple",
            r,
            &Value::Null,
            jiff::Timestamp::UNIX_EPOCH,
        )
        .expect("evaluates")
    };
    assert_eq!(sends(&purple), [vec!["my-purple-template".to_string()]]);
    assert_eq!(sends(&rollout()), Vec::<Vec<String>>::new());
    let notification = rendered(&config, "my-purple-template", &purple);
    assert_eq!(notification["message"], "Rollout web has purple image\n");
    assert_eq!(
        attachments(&notification),
        json!([{"title": "web", "color": "#800080"}])
    );
}

#[test]
fn a_key_that_cannot_be_read_is_named_the_others_apply_and_no_secret_is_shown() {
    let data: BTreeMap<String, String> = [
        ("service.webhook.hook", "url: https://example.test/$token\nheaders: [{name: X, value: $missing}]"),
        ("trigger.on-bad", "- send: [x]\n  when: rollout.spec.replicas >"),
        ("trigger.on-good", "- send: [x]\n  when: rollout.spec.replicas > 1\n  oncePer: rollout.metadata.generation"),
        ("template.broken", "[not, a, mapping]"),
        ("service.a.b.c", "{}"),
        ("defaultTriggers", "{oops: $token}"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let (config, errors) = parse(&data, &[("token", "s3cr3t")]);
    let named: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        named,
        [
            "defaultTriggers",
            "service.a.b.c",
            "template.broken",
            "trigger.on-bad"
        ]
    );
    let shown = errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(shown.contains("argo-rollouts-notification-configmap key `trigger.on-bad`: `when: rollout.spec.replicas >`"), "{shown}");
    assert!(!shown.contains("s3cr3t"), "{shown}");
    assert_eq!(
        config.services["hook"].options,
        json!({"url": "https://example.test/s3cr3t", "headers": [{"name": "X", "value": "$missing"}]})
    );
    assert_eq!(
        config.triggers["on-good"][0].once_per.as_deref(),
        Some("rollout.metadata.generation")
    );
}

#[test]
fn subscribers_come_from_the_configmap_and_every_annotation_form() {
    let data: BTreeMap<String, String> = [
        ("defaultTriggers", "[on-rollout-aborted]"),
        ("defaultTriggers.teams", "[on-rollout-completed]"),
        ("subscriptions", "- recipients: [slack:all]\n- recipients: ['webhook:']\n  triggers: [on-rollout-aborted]\n  selector: app=api"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let (config, errors) = parse(&data, &[]);
    assert_eq!(errors, []);
    let annotations: BTreeMap<String, String> = [
        ("notifications.argoproj.io/subscribe.on-rollout-aborted.slack", "a; b;"),
        ("notifications.argoproj.io/subscribe.webhook", ""),
        ("notifications.argoproj.io/subscribe.teams", "ops"),
        ("notifications.argoproj.io/subscriptions", "- trigger: [on-rollout-aborted]\n  destinations: [{service: email, recipients: [me@example.test]}]"),
        ("other", "x"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let to = |service: &str, recipient: &str| Destination {
        service: service.into(),
        recipient: recipient.into(),
    };
    let (aborted, problems) = destinations(
        &config,
        "on-rollout-aborted",
        &labels,
        &annotations,
        &yaml_value,
    );
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(
        aborted,
        [
            to("slack", "all"),
            to("slack", "a"),
            to("slack", "b"),
            to("webhook", ""),
            to("email", "me@example.test")
        ]
    );
    let (completed, _) = destinations(
        &config,
        "on-rollout-completed",
        &labels,
        &annotations,
        &yaml_value,
    );
    assert_eq!(completed, [to("teams", "ops")]);
    let api = BTreeMap::from([("app".to_string(), "api".to_string())]);
    let (for_api, _) = destinations(
        &config,
        "on-rollout-aborted",
        &api,
        &BTreeMap::new(),
        &yaml_value,
    );
    assert_eq!(for_api, [to("slack", "all"), to("webhook", "")]);
    let broken = BTreeMap::from([(
        "notifications.argoproj.io/subscriptions".to_string(),
        "{not: a list}".to_string(),
    )]);
    let (none, problems) =
        destinations(&config, "on-rollout-aborted", &labels, &broken, &yaml_value);
    assert_eq!((none.len(), problems.len()), (1, 1), "{problems:?}");
}

#[test]
fn a_template_that_fails_is_an_error_naming_it_and_its_field_never_a_panic() {
    let data: BTreeMap<String, String> = [
        ("template.unclosed", "message: '{{if .rollout}}'"),
        (
            "template.bad-call",
            "webhook:\n  hook:\n    body: '{{ .rollout.metadata.name | nosuch }}'",
        ),
        ("template.deep", "message: '{{ .rollout.nothing.here }}'"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let (config, _) = parse(&data, &[]);
    let context = BTreeMap::new();
    let vars = Vars {
        rollout: &rollout(),
        analysis_runs: &Value::Null,
        recipient: "",
        service: "hook",
        context: &context,
    };
    let fail = |name: &str| render(&config.templates, &[name.to_string()], &vars).expect_err(name);
    assert!(
        fail("unclosed").starts_with("template 'unclosed' field `message`: "),
        "{}",
        fail("unclosed")
    );
    assert!(
        fail("bad-call").starts_with("template 'bad-call' field `webhook.hook.body`: "),
        "{}",
        fail("bad-call")
    );
    let _ = render(&config.templates, &["deep".to_string()], &vars);
    assert_eq!(fail("absent"), "template 'absent' is not configured");
}
