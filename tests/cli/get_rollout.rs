//! `canaryd get rollout` and `canaryd get rollouts` against fixed objects served by the fake API server,
//! reached through the kubeconfig it writes (as kubectl would reach it), under both CRD sets: the text as a
//! golden file, `--output json` against the schema shipped in docs/schemas/, and the errors' exit codes.

#![allow(clippy::disallowed_methods)] // Not the Clock: the child process runs on real time.

use canaryd::api::Rollout;
use canaryd_testkit::cli::Ran;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern};
use canaryd_testkit::rollout::checkout::{NAME, NAMESPACE, from, rollout_object, serve_fixture};
use canaryd_testkit::with_each_crd_set;
use serde_json::{Value, json};

use crate::CANARYD;
use crate::golden_text::assert_golden;

/// `canaryd ARGS` against `server`'s cluster (its kubeconfig, no in-cluster settings, a home without one).
pub async fn get(server: &FakeApiServer, args: &[&str]) -> Ran {
    CANARYD.on_cluster(server.kubeconfig_path(), args).await
}

/// The output with every age the objects just created can have (`0s` to `9s`) said as `0s`, so the golden
/// text does not depend on how long the test took.
pub fn ages_zeroed(text: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        let age = c.is_ascii_digit()
            && i > 0
            && chars[i - 1] == ' '
            && chars.get(i + 1) == Some(&'s')
            && chars.get(i + 2).is_none_or(|n| *n == ' ' || *n == '\n');
        out.push(if age { '0' } else { *c });
    }
    out
}

async fn text_view_is_the_golden_one(crds: CrdSet) {
    let server = serve_fixture(crds).await;
    let ran = get(&server, &["get", "rollout", NAME, "-n", NAMESPACE]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_golden("get-rollout.txt", &ages_zeroed(&ran.stdout));
}

async fn table_is_the_golden_one(crds: CrdSet) {
    let server = serve_fixture(crds).await;
    let mut other = rollout_object();
    other["metadata"] = json!({"name": "search", "namespace": "default"});
    other["status"] = json!({"phase": "Healthy", "observedGeneration": "1", "currentStepIndex": 4,
        "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3});
    server.put::<Rollout>(&from(other));
    let ran = get(&server, &["get", "rollouts", "-n", NAMESPACE]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_golden("get-rollouts.txt", &ran.stdout);
    let ran = get(&server, &["get", "rollouts", "-A"]).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_golden("get-rollouts-all.txt", &ran.stdout);
}

with_each_crd_set!(text_view_is_the_golden_one, table_is_the_golden_one);

/// Without `-n`, the namespace is the kubeconfig context's, as kubectl takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_namespace_the_kubeconfig_contexts_is_read() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    let dir = tempfile::tempdir().expect("a folder");
    let kubeconfig = dir.path().join("config");
    let text = std::fs::read_to_string(server.kubeconfig_path()).expect("the fake's kubeconfig");
    let in_shop = text.replace("namespace: default", &format!("namespace: {NAMESPACE}"));
    assert_ne!(text, in_shop, "the fake's kubeconfig names a namespace");
    std::fs::write(&kubeconfig, in_shop).expect("written");
    for args in [["get", "rollout", NAME].as_slice(), &["get", "rollouts"]] {
        let mut command = CANARYD.command();
        command
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", dir.path());
        let ran: Ran = tokio::task::spawn_blocking(move || command.output())
            .await
            .expect("joined")
            .expect("runs")
            .into();
        assert_eq!(ran.code, Some(0), "{ran:?}");
        assert!(ran.stdout.contains("checkout"), "{ran:?}");
    }
}

/// The view README.md shows is the golden one, so it cannot drift from what the command prints.
#[test]
fn the_readme_shows_the_golden_view() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("README.md");
    let golden = std::fs::read_to_string(format!("{root}/tests/cli/golden/get-rollout.txt"))
        .expect("golden");
    assert!(
        readme.contains(&format!("```text\n{golden}```\n")),
        "README.md lacks:\n{golden}"
    );
}

/// The JSON view validates against the shipped schema, and says what the text says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_view_follows_the_shipped_schema() {
    let server = serve_fixture(CrdSet::Argo).await;
    let ran = get(
        &server,
        &["get", "rollout", NAME, "-n", NAMESPACE, "--output", "json"],
    )
    .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let view: Value = serde_json::from_str(&ran.stdout).expect("the view as JSON");
    let schema = crate::get_rollout::schema();
    let errors: Vec<String> = schema
        .iter_errors(&view)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{view:#}");
    assert_eq!(view["canary"]["actualWeight"], 20);
    assert_eq!(view["canary"]["step"]["text"], "pause");
    assert_eq!(
        view["revisions"][0]["analysisRuns"][0]["metrics"][1]["measurements"][1]["value"],
        "[0.412]"
    );
}

/// The schema in docs/schemas/, compiled; it refuses what the view never holds.
pub fn schema() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/schemas/get-rollout.schema.json"
    );
    let text = std::fs::read_to_string(path).expect("the schema file");
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

#[test]
fn the_schema_refuses_a_view_missing_its_tree() {
    let view = json!({"name": NAME, "namespace": NAMESPACE, "status": "Healthy"});
    assert!(!schema().is_valid(&view));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_rollout_is_named_and_exits_2() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    let ran = get(&server, &["get", "rollout", "cart", "-n", NAMESPACE]).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stdout.is_empty(), "{ran:?}");
    assert_eq!(
        ran.stderr,
        "canaryd get: rollout \"cart\" in namespace \"shop\" not found\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_read_is_named_and_exits_4() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    server.fail_next(RequestPattern::new("GET", "/replicasets"), 1, 403);
    let ran = get(&server, &["get", "rollout", NAME, "-n", NAMESPACE]).await;
    assert_eq!(ran.code, Some(4), "{ran:?}");
    assert!(
        ran.stderr
            .starts_with("canaryd get: not allowed to read replicasets in namespace \"shop\""),
        "{ran:?}"
    );
}

#[test]
fn no_cluster_exits_4() {
    let mut command = CANARYD.command();
    let home = tempfile::tempdir().expect("a home");
    command
        .args(["get", "rollouts"])
        .env("KUBECONFIG", home.path().join("none"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", home.path());
    let ran: Ran = command.output().expect("runs").into();
    assert_eq!(ran.code, Some(4), "{ran:?}");
    assert!(ran.stderr.contains("no cluster configured"), "{ran:?}");
}
