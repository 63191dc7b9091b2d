//! Faithfulness tests for the fake API server (`canaryd_testkit::fake_apiserver`) through the real kube client:
//! discovery, CRUD, patches, the status subresource, optimistic concurrency and injected failures.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time.

use canaryd::api::{
    AnalysisPhase, AnalysisRun, AnalysisRunSpec, AnalysisRunStatus, ClusterAnalysisTemplate, Metric,
};
use canaryd_testkit::fake_apiserver::{self, FakeApiServer, RequestPattern, merge_patch};
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::{Value, json};

/// A fake serving canaryd's former AnalysisRun CRD, which declares the status subresource these tests exercise
/// (canaryd's and Argo's current ones do not; `fake_apiserver_crds` covers them).
async fn start() -> FakeApiServer {
    let crd = canaryd_testkit::repo_root()
        .join("tests/fixtures/crds/canaryd-0.1-analysisrun-status-subresource.yaml");
    FakeApiServer::builder().crd_file(&crd).start().await
}

fn run(name: &str) -> AnalysisRun {
    let metric = Metric {
        name: "success-rate".into(),
        ..Default::default()
    };
    AnalysisRun::new(
        name,
        AnalysisRunSpec {
            metrics: vec![metric],
            ..Default::default()
        },
    )
}

fn running() -> AnalysisRunStatus {
    AnalysisRunStatus {
        phase: Some(AnalysisPhase::Running),
        message: Some("measuring".into()),
        ..Default::default()
    }
}

/// AnalysisRun has no PartialEq; its JSON is what the server stores anyway.
fn json(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap()
}

fn rv_of(run: &AnalysisRun) -> u64 {
    run.metadata
        .resource_version
        .as_deref()
        .unwrap_or_default()
        .parse()
        .unwrap()
}

fn api_error(result: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason),
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn runs(server: &FakeApiServer) -> Api<AnalysisRun> {
    Api::namespaced(server.client().await, "default")
}

#[tokio::test]
async fn discovery_finds_every_resource_canaryd_uses() {
    let server = start().await;
    let client = server.client().await;
    assert_eq!(
        client.apiserver_version().await.unwrap().git_version,
        "v1.35.0-fake"
    );
    let discovery = kube::Discovery::new(client).run().await.unwrap();
    for (group, kind) in [
        ("argoproj.io", "AnalysisRun"),
        ("argoproj.io", "ClusterAnalysisTemplate"),
        ("", "Secret"),
        ("events.k8s.io", "Event"),
        ("coordination.k8s.io", "Lease"),
    ] {
        let version = if group == "argoproj.io" {
            "v1alpha1"
        } else {
            "v1"
        };
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        assert!(
            discovery.resolve_gvk(&gvk).is_some(),
            "{gvk:?} is not discoverable"
        );
    }
    let (resource, capabilities) = discovery
        .resolve_gvk(&kube::api::GroupVersionKind::gvk(
            "argoproj.io",
            "v1alpha1",
            "AnalysisRun",
        ))
        .unwrap();
    assert_eq!(resource.plural, "analysisruns");
    assert!(
        capabilities
            .subresources
            .iter()
            .any(|(sub, _)| sub.plural == "status")
    );
}

#[tokio::test]
async fn created_objects_can_be_got_listed_and_deleted() {
    let server = start().await;
    let api = runs(&server).await;
    let created = api
        .create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.generation, Some(1));

    assert_eq!(json(&api.get("canary-1").await.unwrap()), json(&created));
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(json(&list.items), json(&vec![created.clone()]));
    assert_eq!(
        list.metadata.resource_version,
        created.metadata.resource_version
    );

    let deleted = api
        .delete("canary-1", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        deleted
            .left()
            .is_some_and(|d| d.metadata.deletion_timestamp.is_none()),
        "custom resources answer a delete with the object, gone at once without finalizers"
    );
    assert_eq!(
        api_error(api.get("canary-1").await),
        (404, "NotFound".into())
    );
    assert!(api.get_opt("canary-1").await.unwrap().is_none());
}

#[tokio::test]
async fn creating_an_existing_name_is_already_exists() {
    let server = start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    assert_eq!(
        api_error(api.create(&PostParams::default(), &run("canary-1")).await),
        (409, "AlreadyExists".into())
    );
}

#[tokio::test]
async fn generate_name_gives_distinct_names_with_the_prefix() {
    let server = start().await;
    let api = runs(&server).await;
    let mut template = run("");
    template.metadata.name = None;
    template.metadata.generate_name = Some("canary-".into());
    let first = api.create(&PostParams::default(), &template).await.unwrap();
    let second = api.create(&PostParams::default(), &template).await.unwrap();
    let (a, b) = (first.metadata.name.unwrap(), second.metadata.name.unwrap());
    assert!(
        a.starts_with("canary-") && a.len() == "canary-".len() + 5,
        "{a}"
    );
    assert_ne!(a, b);
}

#[tokio::test]
async fn namespaces_are_separate_and_all_namespaces_lists_both() {
    let server = start().await;
    let client = server.client().await;
    for namespace in ["team-a", "team-b"] {
        let api: Api<AnalysisRun> = Api::namespaced(client.clone(), namespace);
        api.create(&PostParams::default(), &run("same-name"))
            .await
            .unwrap();
    }
    let team_a: Api<AnalysisRun> = Api::namespaced(client.clone(), "team-a");
    assert_eq!(
        team_a
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let all: Api<AnalysisRun> = Api::all(client.clone());
    let namespaces: Vec<_> = all
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|r| r.metadata.namespace)
        .collect();
    assert_eq!(
        namespaces,
        vec![Some("team-a".into()), Some("team-b".into())]
    );

    let cluster: Api<ClusterAnalysisTemplate> = Api::all(client);
    let template: ClusterAnalysisTemplate = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "ClusterAnalysisTemplate",
        "metadata": { "name": "shared" }, "spec": { "metrics": [] },
    }))
    .unwrap();
    let created = cluster
        .create(&PostParams::default(), &template)
        .await
        .unwrap();
    assert_eq!(
        created.metadata.namespace, None,
        "cluster-scoped objects have no namespace"
    );
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let server = start().await;
    let api = runs(&server).await;
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "1"})),
        ("b", json!({"app": "api"})),
        ("c", json!({})),
    ] {
        let mut object = run(name);
        object.metadata.labels = Some(serde_json::from_value(labels).unwrap());
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    let names = |selector: &'static str, fields: &'static str| {
        let api = api.clone();
        async move {
            let params = ListParams::default().labels(selector).fields(fields);
            let items = api.list(&params).await.unwrap().items;
            items
                .into_iter()
                .map(|r| r.metadata.name.unwrap())
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    assert_eq!(names("app=web", "").await, "a");
    assert_eq!(names("app==web", "").await, "a");
    assert_eq!(names("app!=web", "").await, "b,c");
    assert_eq!(names("app in (web, api)", "").await, "a,b");
    assert_eq!(names("app notin (web)", "").await, "b,c");
    assert_eq!(names("tier", "").await, "a");
    assert_eq!(names("!tier", "").await, "b,c");
    assert_eq!(names("app,!tier", "").await, "b");
    assert_eq!(names("", "metadata.name=c").await, "c");
    assert_eq!(
        names("", "metadata.name!=c,metadata.namespace=default").await,
        "a,b"
    );
    let bad = api
        .list(&ListParams::default().fields("spec.terminate=true"))
        .await;
    assert_eq!(api_error(bad).0, 400);
}

#[tokio::test]
async fn a_list_by_label_follows_relabels_and_deletions() {
    let server = start().await;
    let api = runs(&server).await;
    for name in ["a", "b"] {
        let mut object = run(name);
        object.metadata.labels = Some(serde_json::from_value(json!({"app": "web"})).unwrap());
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    let relabel = Patch::Merge(json!({"metadata": {"labels": {"app": "api", "tier": "1"}}}));
    api.patch("a", &PatchParams::default(), &relabel)
        .await
        .unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    let mut object = run("c");
    object.metadata.labels = Some(serde_json::from_value(json!({"app": "web"})).unwrap());
    api.create(&PostParams::default(), &object).await.unwrap();
    let names = |selector: &'static str| {
        let api = api.clone();
        async move {
            let params = ListParams::default().labels(selector);
            let items = api.list(&params).await.unwrap().items;
            items
                .into_iter()
                .map(|r| r.metadata.name.unwrap())
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    assert_eq!(names("app=web").await, "c");
    assert_eq!(names("app=api").await, "a");
    assert_eq!(names("tier=1,app=api").await, "a");
    assert_eq!(names("app=web,tier=1").await, "");
}

#[tokio::test]
async fn every_write_bumps_the_resource_version_but_a_no_op_does_not() {
    let server = start().await;
    let api = runs(&server).await;
    let created = api
        .create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({ "metadata": { "labels": { "step": "1" } } }));
    let patched = api
        .patch("canary-1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert!(rv_of(&patched) > rv_of(&created));
    let status = Patch::Merge(json!({ "status": { "phase": "Running" } }));
    let with_status = api
        .patch_status("canary-1", &PatchParams::default(), &status)
        .await
        .unwrap();
    assert!(rv_of(&with_status) > rv_of(&patched));
    assert_eq!(server.resource_version(), rv_of(&with_status));

    let again = api
        .patch("canary-1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        with_status.metadata.resource_version
    );
}

#[tokio::test]
async fn a_metadata_only_change_does_not_bump_generation() {
    let server = start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({ "metadata": { "labels": { "team": "a" } } }));
    let patched = api
        .patch("canary-1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.unwrap().len(), 1);
    assert_eq!(patched.metadata.generation, Some(1));
}

#[tokio::test]
async fn merge_patch_changes_only_the_fields_it_names_and_null_removes() {
    let server = start().await;
    let api = runs(&server).await;
    let mut object = run("canary-1");
    object.metadata.labels = Some(
        [
            ("keep".to_string(), "yes".to_string()),
            ("drop".into(), "x".into()),
        ]
        .into(),
    );
    api.create(&PostParams::default(), &object).await.unwrap();
    let patch = Patch::Merge(
        json!({ "metadata": { "labels": { "drop": null, "new": "1" } }, "spec": { "terminate": true } }),
    );
    let patched = api
        .patch("canary-1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let labels = patched.metadata.labels.unwrap();
    assert_eq!(
        labels.keys().cloned().collect::<Vec<_>>(),
        vec!["keep".to_string(), "new".to_string()]
    );
    assert_eq!(patched.spec.terminate, Some(true));
    assert_eq!(patched.spec.metrics.len(), 1, "untouched fields stay");
    assert_eq!(
        patched.metadata.generation,
        Some(2),
        "a spec change bumps generation"
    );
}

/// JSON documents small enough to shrink well, over few field names so that patches and targets overlap.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..3).prop_map(|n| json!(n)),
        prop::sample::select(vec!["", "x", "y"]).prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec!["a", "b", "metadata", "status"]).prop_map(String::from),
                inner,
                0..4
            )
            .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

proptest! {
    // Seeds of past failures live beside this file (fake_apiserver_crud.proptest-regressions), as they did
    // when it was a test crate of its own; proptest's default, for a module of a main.rs, would look in
    // ../proptest-regressions/fake_apiserver_crud.txt instead.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::with_cases(1024)
    })]

    /// The fixture merges without copying the target first; it must agree with json-patch's RFC 7386 merge,
    /// on a present target and on an absent one (which RFC 7386 treats as `{}`).
    #[test]
    fn the_merge_patch_is_rfc_7386_as_json_patch_applies_it(target in json_value(), patch in json_value()) {
        let mut expected = target.clone();
        json_patch::merge(&mut expected, &patch);
        prop_assert_eq!(merge_patch(Some(&target), patch.clone(), None), expected);
        let mut from_nothing = Value::Null;
        json_patch::merge(&mut from_nothing, &patch);
        prop_assert_eq!(merge_patch(None, patch, None), from_nothing);
    }

    /// A status write merges only `metadata` and `status`: what it gets of them is what the whole merge gives.
    #[test]
    fn merging_some_fields_gives_those_fields_of_the_whole_merge(target in json_value(), patch in json_value()) {
        let fields = ["metadata", "status"];
        let mut whole = merge_patch(Some(&target), patch.clone(), None);
        if let Value::Object(merged) = &mut whole {
            merged.retain(|field, _| fields.contains(&field.as_str()));
        }
        prop_assert_eq!(merge_patch(Some(&target), patch, Some(&fields)), whole);
    }
}

#[tokio::test]
async fn json_patch_applies_in_order_and_a_failing_test_changes_nothing() {
    let server = start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let ops: json_patch::Patch = serde_json::from_value(json!([
        { "op": "test", "path": "/spec/metrics/0/name", "value": "success-rate" },
        { "op": "add", "path": "/spec/terminate", "value": true },
        { "op": "replace", "path": "/spec/metrics/0/name", "value": "latency" },
    ]))
    .unwrap();
    let patched = api
        .patch("canary-1", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .unwrap();
    assert_eq!(patched.spec.metrics[0].name, "latency");
    assert_eq!(patched.spec.terminate, Some(true));

    let failing: json_patch::Patch = serde_json::from_value(json!([
        { "op": "replace", "path": "/spec/terminate", "value": false },
        { "op": "test", "path": "/spec/metrics/0/name", "value": "success-rate" },
    ]))
    .unwrap();
    let result = api
        .patch(
            "canary-1",
            &PatchParams::default(),
            &Patch::Json::<()>(failing),
        )
        .await;
    assert_eq!(api_error(result), (422, "Invalid".into()));
    assert_eq!(json(&api.get("canary-1").await.unwrap()), json(&patched));
}

#[tokio::test]
async fn status_writes_change_only_status() {
    let server = start().await;
    let api = runs(&server).await;
    let created = api
        .create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({
        "metadata": { "labels": { "sneaky": "yes" } },
        "spec": { "terminate": true },
        "status": { "phase": "Running", "message": "measuring" },
    }));
    let patched = api
        .patch_status("canary-1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched.status, Some(running()));
    assert_eq!(
        patched.spec, created.spec,
        "spec is not writable through /status"
    );
    assert_eq!(
        patched.metadata.labels, None,
        "metadata is not writable through /status"
    );
    assert_eq!(
        patched.metadata.generation,
        Some(1),
        "a status write does not bump generation"
    );

    let mut replacement = patched.clone();
    replacement.status = Some(AnalysisRunStatus {
        phase: Some(AnalysisPhase::Successful),
        ..Default::default()
    });
    replacement.spec.terminate = Some(true);
    let replaced = api
        .replace_status("canary-1", &PostParams::default(), &replacement)
        .await
        .unwrap();
    assert_eq!(
        replaced.status.and_then(|s| s.phase),
        Some(AnalysisPhase::Successful)
    );
    assert_eq!(replaced.spec.terminate, None);
}

#[tokio::test]
async fn writes_to_the_object_ignore_status() {
    let server = start().await;
    let api = runs(&server).await;
    let mut object = run("canary-1");
    object.status = Some(running());
    let created = api.create(&PostParams::default(), &object).await.unwrap();
    assert_eq!(
        created.status, None,
        "create drops status when status is a subresource"
    );

    let patch =
        Patch::Merge(json!({ "status": { "phase": "Failed" }, "spec": { "terminate": true } }));
    let patched = api
        .patch("canary-1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(patched.status, None);
    assert_eq!(patched.spec.terminate, Some(true));

    api.patch_status(
        "canary-1",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": running() })),
    )
    .await
    .unwrap();
    let mut replacement = api.get("canary-1").await.unwrap();
    replacement.status = None;
    replacement.spec.terminate = Some(false);
    let replaced = api
        .replace("canary-1", &PostParams::default(), &replacement)
        .await
        .unwrap();
    assert_eq!(
        replaced.status,
        Some(running()),
        "PUT of the object keeps the stored status"
    );
    assert_eq!(replaced.spec.terminate, Some(false));
}

#[tokio::test]
async fn server_side_apply_of_status_merges_the_fields_sent() {
    let server = start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let body = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "status": { "phase": "Running", "message": "measuring" },
    });
    let applied = api
        .patch_status(
            "canary-1",
            &PatchParams::apply("canaryd"),
            &Patch::Apply(&body),
        )
        .await
        .unwrap();
    assert_eq!(applied.status, Some(running()));

    let without_manager = api
        .patch_status("canary-1", &PatchParams::default(), &Patch::Apply(&body))
        .await;
    assert_eq!(
        api_error(without_manager).0,
        400,
        "apply needs a fieldManager, as on a real server"
    );

    let fresh = api
        .patch(
            "canary-2",
            &PatchParams::apply("canaryd"),
            &Patch::Apply(&run("canary-2")),
        )
        .await
        .unwrap();
    assert_eq!(
        fresh.metadata.name.as_deref(),
        Some("canary-2"),
        "apply creates an absent object"
    );
}

#[tokio::test]
async fn a_stale_resource_version_is_a_conflict_for_update_and_status_patch() {
    let server = start().await;
    let api = runs(&server).await;
    let stale = api
        .create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({ "spec": { "terminate": true } }));
    api.patch("canary-1", &PatchParams::default(), &patch)
        .await
        .unwrap();

    let conflict = api
        .replace("canary-1", &PostParams::default(), &stale)
        .await;
    assert_eq!(api_error(conflict), (409, "Conflict".into()));
    let stale_status = Patch::Merge(json!({
        "metadata": { "resourceVersion": stale.metadata.resource_version },
        "status": { "phase": "Running" },
    }));
    let conflict = api
        .patch_status("canary-1", &PatchParams::default(), &stale_status)
        .await;
    assert_eq!(api_error(conflict), (409, "Conflict".into()));
    assert_eq!(
        api.get("canary-1").await.unwrap().status,
        None,
        "a rejected write changes nothing"
    );

    let fresh = api.get("canary-1").await.unwrap();
    let fresh_status = Patch::Merge(json!({
        "metadata": { "resourceVersion": fresh.metadata.resource_version },
        "status": { "phase": "Running" },
    }));
    api.patch_status("canary-1", &PatchParams::default(), &fresh_status)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_put_without_resource_version_is_refused_for_custom_resources_but_not_secrets() {
    let server = start().await;
    let client = server.client().await;
    let api: Api<AnalysisRun> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let unconditional = api
        .replace("canary-1", &PostParams::default(), &run("canary-1"))
        .await;
    assert_eq!(api_error(unconditional), (422, "Invalid".into()));

    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("token".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    secrets
        .replace("token", &PostParams::default(), &secret)
        .await
        .unwrap();
}

#[tokio::test]
async fn creating_an_object_that_carries_a_resource_version_is_refused() {
    let server = start().await;
    let api = runs(&server).await;
    let created = api
        .create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    api.delete("canary-1", &DeleteParams::default())
        .await
        .unwrap();
    let again = api.create(&PostParams::default(), &created).await;
    assert_eq!(
        api_error(again).0,
        500,
        "kube-apiserver's answer when a re-created object keeps its version"
    );
}

#[tokio::test]
async fn a_put_of_an_absent_lease_creates_it() {
    let server = start().await;
    let api: Api<Lease> = Api::namespaced(server.client().await, "canaryd");
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("canaryd-leader".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("pod-a".into()),
            ..Default::default()
        }),
    };
    let created = api
        .replace("canaryd-leader", &PostParams::default(), &lease)
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(
        server.request_count(&RequestPattern::new("POST", "/leases")),
        0
    );
}

#[tokio::test]
async fn an_injected_conflict_fails_only_the_next_write() {
    let server = start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    server.conflict_next_write::<AnalysisRun>("default", "canary-1");
    let patch = Patch::Merge(json!({ "status": { "phase": "Running" } }));
    let first = api
        .patch_status("canary-1", &PatchParams::default(), &patch)
        .await;
    assert_eq!(api_error(first), (409, "Conflict".into()));
    api.patch_status("canary-1", &PatchParams::default(), &patch)
        .await
        .unwrap();
}

#[tokio::test]
async fn finalizers_hold_a_deleted_object_until_they_are_removed() {
    let server = start().await;
    let api = runs(&server).await;
    let mut object = run("canary-1");
    object.metadata.finalizers = Some(vec!["canaryd.io/cleanup".into()]);
    api.create(&PostParams::default(), &object).await.unwrap();
    let pending = api
        .delete("canary-1", &DeleteParams::default())
        .await
        .unwrap();
    let pending = pending.left().expect("a finalized object is kept");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert!(
        api.get("canary-1")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );

    let release = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
    api.patch("canary-1", &PatchParams::default(), &release)
        .await
        .unwrap();
    assert!(api.get_opt("canary-1").await.unwrap().is_none());
}

#[tokio::test]
async fn delete_preconditions_are_checked() {
    let server = start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(
        api_error(api.delete("canary-1", &params).await),
        (409, "Conflict".into())
    );
    assert!(api.get_opt("canary-1").await.unwrap().is_some());
}

#[tokio::test]
async fn secrets_keep_base64_data_and_fold_string_data_into_it() {
    let server = start().await;
    let api: Api<Secret> = Api::namespaced(server.client().await, "default");
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("prometheus".into()),
            ..Default::default()
        },
        data: Some([("token".to_string(), ByteString(b"s3cr\xc3\xa9t".to_vec()))].into()),
        string_data: Some([("user".to_string(), "canaryd".to_string())].into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &secret).await.unwrap();
    let stored = api.get("prometheus").await.unwrap();
    let data = stored.data.unwrap();
    assert_eq!(data["token"].0, b"s3cr\xc3\xa9t".to_vec());
    assert_eq!(data["user"].0, b"canaryd".to_vec());
    assert_eq!(stored.string_data, None);
    let raw = server.get_json::<Secret>("default", "prometheus").unwrap();
    assert_eq!(raw["data"]["user"], "Y2FuYXJ5ZA==");
    let deleted = api
        .delete("prometheus", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        deleted.is_right(),
        "built-in kinds answer a delete with a Success Status"
    );
}

#[tokio::test]
async fn a_lease_taken_with_a_stale_version_is_a_conflict() {
    let server = start().await;
    let api: Api<Lease> = Api::namespaced(server.client().await, "canaryd");
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("canaryd-leader".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("pod-a".into()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        }),
    };
    let seen_by_b = api.create(&PostParams::default(), &lease).await.unwrap();
    let mut renewed = seen_by_b.clone();
    renewed.spec.as_mut().unwrap().lease_transitions = Some(1);
    api.replace("canaryd-leader", &PostParams::default(), &renewed)
        .await
        .unwrap();

    let mut takeover = seen_by_b;
    takeover.spec.as_mut().unwrap().holder_identity = Some("pod-b".into());
    assert_eq!(
        api_error(
            api.replace("canaryd-leader", &PostParams::default(), &takeover)
                .await
        ),
        (409, "Conflict".into())
    );
    let holder = server
        .get::<Lease>("canaryd", "canaryd-leader")
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some("pod-a"));
}

#[tokio::test]
async fn the_event_recorder_creates_and_then_patches_an_event_series() {
    let server = start().await;
    let client = server.client().await;
    let created = runs(&server)
        .await
        .create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "canaryd".into(),
            instance: None,
        },
    );
    let reference = ObjectReference {
        api_version: Some("argoproj.io/v1alpha1".into()),
        kind: Some("AnalysisRun".into()),
        name: created.metadata.name.clone(),
        namespace: created.metadata.namespace.clone(),
        uid: created.metadata.uid.clone(),
        ..Default::default()
    };
    let event = Event {
        type_: EventType::Warning,
        reason: "MetricFailed".into(),
        note: Some("success-rate failed".into()),
        action: "Measure".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, "default");
    let stored = events.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].reason.as_deref(), Some("MetricFailed"));
    assert_eq!(stored[0].series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(
        server.request_count(&RequestPattern::new(
            "POST",
            "/apis/events.k8s.io/v1/namespaces/default/events"
        )),
        1
    );
    assert_eq!(
        server.request_count(&RequestPattern::new("PATCH", "/apis/events.k8s.io/v1/")),
        1
    );
}

#[tokio::test]
async fn an_injected_server_error_reaches_the_client_then_requests_succeed() {
    let server = start().await;
    let api = runs(&server).await;
    server.fail_next(RequestPattern::new("GET", "/analysisruns"), 1, 500);
    assert_eq!(
        api_error(api.list(&ListParams::default()).await),
        (500, "InternalError".into())
    );
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        server.request_count(&RequestPattern::new("GET", "/analysisruns")),
        2
    );
}

#[tokio::test]
async fn the_kube_client_retries_an_unavailable_server_by_itself() {
    let server = start().await;
    let api = runs(&server).await;
    server.fail_next(RequestPattern::new("POST", "/analysisruns"), 2, 503);
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    assert_eq!(
        server.request_count(&RequestPattern::new("POST", "/analysisruns")),
        3
    );
}

#[tokio::test]
async fn too_many_requests_carries_retry_after_which_the_client_waits_for() {
    let server = start().await;
    let api = runs(&server).await;
    api.create(&PostParams::default(), &run("canary-1"))
        .await
        .unwrap();
    server.fail_next(RequestPattern::new("GET", "/analysisruns/canary-1"), 1, 429);
    let started = std::time::Instant::now();
    api.get("canary-1").await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(1),
        "retried after {waited:?}, before Retry-After: 1"
    );
    assert_eq!(
        server.request_count(&RequestPattern::new("GET", "/analysisruns/canary-1")),
        2
    );
}

#[tokio::test]
async fn a_delayed_answer_arrives_after_the_delay() {
    let server = start().await;
    let api = runs(&server).await;
    server.delay_next(
        RequestPattern::new("GET", "/analysisruns"),
        1,
        std::time::Duration::from_millis(300),
    );
    let started = std::time::Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(300),
        "answered after {waited:?}"
    );
}

#[tokio::test]
async fn objects_put_by_the_fixture_are_served_with_their_status() {
    let server = start().await;
    let mut object = run("restored");
    object.metadata.namespace = Some("default".into());
    object.status = Some(running());
    let stored = server.put(&object);
    assert_eq!(stored.status, Some(running()));
    let got = runs(&server).await.get("restored").await.unwrap();
    assert_eq!(json(&got), json(&stored));
}

#[tokio::test]
async fn extra_kinds_can_be_served_and_used_through_dynamic_objects() {
    let virtual_service = fake_apiserver::ResourceDef {
        group: "networking.istio.io",
        version: "v1",
        plural: "virtualservices",
        singular: "virtualservice",
        kind: "VirtualService",
        namespaced: true,
        status_subresource: true,
        custom: true,
        unconditional_update: false,
        create_on_update: false,
        schema: None,
    };
    let server = FakeApiServer::builder()
        .resource(virtual_service)
        .start()
        .await;
    let client = server.client().await;
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let gvk = kube::api::GroupVersionKind::gvk("networking.istio.io", "v1", "VirtualService");
    let (resource, _) = discovery
        .resolve_gvk(&gvk)
        .expect("the extra kind is discoverable");
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let object: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": { "name": "web" },
        "spec": { "http": [{ "route": [{ "destination": { "host": "stable" }, "weight": 100 }] }] },
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
    let weights = Patch::Json::<()>(
        serde_json::from_value(json!([
            { "op": "test", "path": "/spec/http/0/route/0/weight", "value": 100 },
            { "op": "replace", "path": "/spec/http/0/route/0/weight", "value": 80 },
        ]))
        .unwrap(),
    );
    let patched = api
        .patch("web", &PatchParams::default(), &weights)
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["http"][0]["route"][0]["weight"], 80);
    assert_eq!(patched.metadata.generation, Some(2));
}
