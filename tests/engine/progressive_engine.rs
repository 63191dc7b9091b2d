//! `engine::progressive` on ApplicationSets built in the test: Argo CD's quirks that the CLI fixtures do not
//! show (unmatched Applications inflating step 1, several steps selecting one Application, the local cluster
//! of an unfiltered cluster generator, merge generators).

use canaryd::api::{ApplicationSetSpec, ClusterSecret};
use canaryd::engine::progressive::{Flag, Options, analyze};
use canaryd::engine::template::Severity;
use serde_json::{Value, json};

fn spec(v: Value) -> ApplicationSetSpec {
    serde_json::from_value(v).expect("a valid spec")
}

fn list(envs: &[&str]) -> Value {
    let elements: Vec<Value> = envs
        .iter()
        .enumerate()
        .map(|(i, e)| json!({"name": format!("c{i}"), "env": e}))
        .collect();
    json!([{"list": {"elements": elements}}])
}

fn rolling(generators: Value, steps: Value) -> ApplicationSetSpec {
    spec(json!({
        "generators": generators,
        "template": {"metadata": {"name": "app-{{name}}", "labels": {"env": "{{env}}"}}},
        "strategy": {"type": "RollingSync", "rollingSync": {"steps": steps}},
    }))
}

fn on() -> Options<'static> {
    Options {
        clusters: None,
        flag: Flag::On,
    }
}

fn errors(a: &canaryd::engine::progressive::Analysis) -> Vec<String> {
    a.findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| format!("{}: {}", f.path, f.message))
        .collect()
}

#[test]
fn unmatched_applications_inflate_step_one_percentage_as_argo_cd_counts_them() {
    // Two prod apps in step 1 at 50% would go one at a time; the two unmatched apps make the total 4.
    let a = analyze(
        &rolling(
            list(&["prod", "prod", "dev", "dev"]),
            json!([{"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}], "maxUpdate": "50%"}]),
        ),
        &on(),
    );
    let step = &a.plan.steps[0];
    assert_eq!(step.batches, vec![vec!["app-c0", "app-c1"]]);
    assert_eq!(a.plan.unmatched, ["app-c2", "app-c3"]);
    assert!(
        errors(&a)
            .iter()
            .any(|e| e.contains("no step selects 2 Application(s): \"app-c2\", \"app-c3\"")),
        "{:?}",
        errors(&a)
    );
}

#[test]
fn an_application_selected_by_two_steps_is_synced_by_the_first_and_awaited_by_both() {
    let a = analyze(
        &rolling(
            list(&["qa", "prod"]),
            json!([
                {"matchExpressions": [{"key": "env", "operator": "In", "values": ["qa"]}]},
                {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]},
            ]),
        ),
        &on(),
    );
    assert_eq!(a.plan.steps[1].applications, ["app-c1"]);
    assert_eq!(a.plan.steps[1].also_waits_for, ["app-c0"]);
    assert_eq!(
        errors(&a),
        [
            "spec.strategy.rollingSync.steps[1]: Application \"app-c0\" is selected by steps 1, 2: step 1 \
          syncs it and the later steps wait for it too (Argo CD reports the rollout config as invalid)"
        ]
    );
}

fn secret(name: &str, labels: Value) -> ClusterSecret {
    let mut all = json!({"argocd.argoproj.io/secret-type": "cluster"});
    if let (Some(a), Some(b)) = (all.as_object_mut(), labels.as_object()) {
        a.extend(b.clone());
    }
    serde_json::from_value(json!({
        "metadata": {"name": format!("cluster-{name}"), "labels": all},
        "stringData": {"name": name, "server": format!("https://{name}.example.com")},
    }))
    .expect("a Secret")
}

#[test]
fn an_unfiltered_cluster_generator_also_generates_the_local_cluster() {
    let clusters = [secret("east", json!({"env": "prod"}))];
    let a = analyze(
        &spec(json!({
            "generators": [{"clusters": {}}],
            "template": {"metadata": {"name": "web-{{name}}", "labels": {"env": "{{metadata.labels.env}}"}}},
            "strategy": {"type": "RollingSync", "rollingSync": {"steps": [
                {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}]}},
        })),
        &Options {
            clusters: Some(&clusters),
            flag: Flag::On,
        },
    );
    assert_eq!(a.plan.applications, ["web-east", "web-in-cluster"]);
    // The local cluster has no labels, so `{{metadata.labels.env}}` names no parameter for it.
    assert_eq!(a.plan.undecided, ["web-in-cluster"]);
}

#[test]
fn a_merge_generator_overrides_base_parameters_by_its_merge_keys() {
    let a = analyze(
        &rolling(
            json!([{"merge": {"mergeKeys": ["name"], "generators": [
                {"list": {"elements": [{"name": "a", "env": "qa"}, {"name": "b", "env": "qa"}]}},
                {"list": {"elements": [{"name": "b", "env": "prod"}]}},
            ]}}]),
            json!([
                {"matchExpressions": [{"key": "env", "operator": "In", "values": ["qa"]}]},
                {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
            ]),
        ),
        &on(),
    );
    assert_eq!(a.plan.steps[0].applications, ["app-a"]);
    assert_eq!(a.plan.steps[1].applications, ["app-b"]);
    assert_eq!(errors(&a), Vec::<String>::new());
}

#[test]
fn a_held_step_has_no_batch_and_says_so() {
    let a = analyze(
        &rolling(
            list(&["prod"]),
            json!([{"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}], "maxUpdate": 0}]),
        ),
        &on(),
    );
    assert!(a.plan.steps[0].held);
    assert!(a.plan.steps[0].batches.is_empty());
}

#[test]
fn application_sets_and_cluster_secrets_round_trip_without_losing_a_field() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in [
        "tests/fixtures/progressive/git-matrix.yaml",
        "tests/fixtures/progressive/four-stages.yaml",
        "examples/progressive-sync/prod-clusters/prod-us-2.yaml",
    ] {
        let (docs, error) = canaryd::cli::load::load_file(&root.join(name));
        assert!(error.is_none(), "{error:?}");
        let written = &docs[0].value;
        let back = if docs[0].kind() == Some("Secret") {
            let s: ClusterSecret = serde_json::from_value(written.clone()).expect("a Secret");
            assert_eq!(
                s.field("name").as_deref(),
                Some("prod-us-2"),
                "base64 data is decoded"
            );
            let mut v = serde_json::to_value(s).expect("serializes");
            // kind and apiVersion are not part of the wire type; everything else must be.
            if let (Some(v), Some(w)) = (v.as_object_mut(), written.as_object()) {
                v.insert("kind".into(), w["kind"].clone());
                v.insert("apiVersion".into(), w["apiVersion"].clone());
            }
            v
        } else {
            let a: canaryd::api::ApplicationSet =
                serde_json::from_value(written.clone()).expect("an ApplicationSet");
            serde_json::to_value(a).expect("serializes")
        };
        assert_eq!(&back, written, "{name}");
    }
}
