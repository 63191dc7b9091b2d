//! Everything the Rollout planner writes is valid against Argo's published CRDs: the status of a Rollout
//! through a whole update, abort and promotion, and the AnalysisRuns it creates, checked against the
//! `openAPIV3Schema` of `tests/fixtures/crds/` by the fake API server's schema checker (types, formats,
//! required fields, and fields the API server would prune).

use std::path::Path;

use canaryd::api::AnalysisPhase;
use canaryd::cli::load::parse_documents;
use canaryd::engine::rollout::memory::MemoryCluster;
use canaryd_testkit::fake_apiserver::schema::{self, Schema};
use canaryd_testkit::rollout::memory::*;
use serde_json::Value;

fn schema(file: &str) -> Schema {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/crds")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("fixture CRD is readable");
    let (docs, err) = parse_documents(&path, &text);
    assert!(err.is_none(), "{err:?}");
    Schema::from(&docs[0].value["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
}

/// `value` (a whole object) as kube-apiserver would admit it under `schema`: nothing pruned, nothing refused.
fn assert_valid(schema: &Schema, value: &Value, what: &str) {
    let mut admitted = value.clone();
    match schema::admit(schema, &mut admitted, None) {
        Ok(pruned) => assert!(
            pruned.is_empty(),
            "the API server would prune {pruned:?} from {what}:\n{value:#}"
        ),
        Err(why) => panic!("{what} breaks the CRD: {why}\n{value:#}"),
    }
}

#[test]
fn the_schema_checker_rejects_wrong_types_formats_and_missing_fields_and_prunes_unknown_ones() {
    let rollout = schema("argo-rollouts-rollout-crd.yaml");
    let mut bad = serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": {"name": "r"},
        "status": {
            "observedGeneration": 3, "currentStepIndex": "one", "replicas": 4294967296_i64,
            "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "yesterday"}, {"reason": "CanaryPauseStep"}],
            "made-up": true
        }
    });
    let Err(text) = schema::admit(&rollout, &mut bad, None) else {
        panic!("a status of wrong types is admitted");
    };
    for expected in [
        "status.observedGeneration: Invalid value: \"integer\": status.observedGeneration in body must be of type string",
        "status.currentStepIndex: Invalid value: \"string\": status.currentStepIndex in body must be of type integer",
        "status.replicas: Invalid value: 4294967296: status.replicas in body must be of type int32",
        "status.pauseConditions[0].startTime: Invalid value: \"yesterday\": status.pauseConditions[0].startTime in body must be of type date-time",
        "status.pauseConditions[1].startTime: Required value",
    ] {
        assert!(text.contains(expected), "{expected} not in:\n{text}");
    }
    let mut unknown =
        serde_json::json!({"metadata": {"name": "r"}, "spec": {}, "status": {"made-up": true}});
    assert_eq!(
        schema::admit(&rollout, &mut unknown, None),
        Ok(vec!["status.made-up".to_string()])
    );
}

#[test]
fn every_status_the_planner_writes_through_an_update_abort_and_promotion_is_valid() {
    let rollout_schema = schema("argo-rollouts-rollout-crd.yaml");
    let run_schema = schema("argo-rollouts-analysis-run-crd.yaml");
    let mut c: MemoryCluster = analysis_rollout();
    let check = |c: &MemoryCluster, step: &str| {
        let rollout = serde_json::to_value(&c.rollout).unwrap();
        assert_valid(
            &rollout_schema,
            &rollout,
            &format!("the Rollout after {step}"),
        );
        for run in &c.analysis_runs {
            let mut value = serde_json::to_value(run).unwrap();
            value.as_object_mut().unwrap().remove("status");
            assert_valid(&run_schema, &value, "an AnalysisRun canaryd created");
        }
    };
    run(&mut c, at(0));
    check(&c, "the first deploy");
    set_image(&mut c, "web:2");
    run(&mut c, at(10));
    check(&c, "reaching the analysis step");
    let name = c.analysis_runs[0].metadata.name.clone().unwrap();
    c.finish_run(
        &name,
        AnalysisPhase::Failed,
        "failed (1) > failureLimit (0)",
    );
    run(&mut c, at(20));
    check(&c, "an abort");
    c.patch_status(|s| s.abort = false);
    run(&mut c, at(30));
    check(&c, "a retry");
    c.patch_status(|s| s.promote_full = true);
    run(&mut c, at(40));
    check(&c, "a full promotion");
    assert_eq!(c.status().phase, "Healthy");
}
