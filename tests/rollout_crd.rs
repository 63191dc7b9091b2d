//! Everything the Rollout planner writes is valid against Argo's published CRDs: the status of a Rollout
//! through a whole update, abort and promotion, and the AnalysisRuns it creates, checked against the
//! `openAPIV3Schema` of `tests/fixtures/crds/` by a small schema walker (types, formats, required fields,
//! and fields the API server would prune).

mod rollout_support;

use std::path::Path;

use canaryd::api::AnalysisPhase;
use canaryd::cli::load::parse_documents;
use canaryd::engine::rollout::sim::Cluster;
use rollout_support::*;
use serde_json::Value;

fn schema(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/crds")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("fixture CRD is readable");
    let (docs, err) = parse_documents(&path, &text);
    assert!(err.is_none(), "{err:?}");
    docs[0].value["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// Every way `value` breaks `schema`, each with its path.
fn violations(schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) {
            out.push(format!("{path}: null is not allowed"));
        }
        return;
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        if !(value.is_string() || value.is_i64()) {
            out.push(format!(
                "{path}: expected an integer or a string, got {value}"
            ));
        }
        return;
    }
    let expected = schema.get("type").and_then(Value::as_str);
    let ok = match expected {
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    if !ok {
        out.push(format!(
            "{path}: expected {}, got {value}",
            expected.unwrap_or("?")
        ));
        return;
    }
    match schema.get("format").and_then(Value::as_str) {
        Some("int32") if value.as_i64().is_none_or(|n| i32::try_from(n).is_err()) => {
            out.push(format!("{path}: {value} is not an int32"))
        }
        Some("date-time")
            if value
                .as_str()
                .is_none_or(|s| s.parse::<jiff::Timestamp>().is_err()) =>
        {
            out.push(format!("{path}: {value} is not a date-time"))
        }
        _ => {}
    }
    if let Some(items) = schema.get("items") {
        for (i, item) in value.as_array().into_iter().flatten().enumerate() {
            violations(items, item, &format!("{path}[{i}]"), out);
        }
    }
    let Some(object) = value.as_object() else {
        return;
    };
    for required in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = required.as_str().unwrap_or_default();
        if !object.contains_key(name) {
            out.push(format!("{path}.{name}: required"));
        }
    }
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    for (key, child) in object {
        let at = format!("{path}.{key}");
        match (properties.and_then(|p| p.get(key)), additional) {
            (Some(s), _) => violations(s, child, &at, out),
            (None, Some(s)) if s.is_object() => violations(s, child, &at, out),
            // ObjectMeta is the API server's own, left undescribed by CRDs.
            (None, _) if preserve || path == ".metadata" => {}
            (None, _) => out.push(format!(
                "{at}: not in the schema (the API server would prune it)"
            )),
        }
    }
}

fn assert_valid(schema: &Value, value: &Value, what: &str) {
    let mut out = Vec::new();
    violations(schema, value, "", &mut out);
    assert!(
        out.is_empty(),
        "{what} breaks the CRD:\n{}\n{value:#}",
        out.join("\n")
    );
}

#[test]
fn the_schema_walker_rejects_wrong_types_missing_fields_and_unknown_fields() {
    let rollout = schema("argo-rollouts-rollout-crd.yaml");
    let status = &rollout["properties"]["status"];
    let mut out = Vec::new();
    let bad = serde_json::json!({
        "observedGeneration": 3, "currentStepIndex": "one",
        "pauseConditions": [{"reason": "CanaryPauseStep"}], "made-up": true
    });
    violations(status, &bad, "status", &mut out);
    let text = out.join("\n");
    for expected in [
        "status.observedGeneration: expected string",
        "status.currentStepIndex: expected integer",
        "status.pauseConditions[0].startTime: required",
        "status.made-up: not in the schema",
    ] {
        assert!(text.contains(expected), "{expected} not in:\n{text}");
    }
}

#[test]
fn every_status_the_planner_writes_through_an_update_abort_and_promotion_is_valid() {
    let rollout_schema = schema("argo-rollouts-rollout-crd.yaml");
    let status_schema = &rollout_schema["properties"]["status"];
    let run_schema = schema("argo-rollouts-analysis-run-crd.yaml");
    let mut c: Cluster = analysis_rollout();
    let check = |c: &Cluster, step: &str| {
        let status = serde_json::to_value(c.status()).unwrap();
        assert_valid(status_schema, &status, &format!("the status after {step}"));
        let spec = serde_json::to_value(&c.rollout.spec).unwrap();
        assert_valid(
            &rollout_schema["properties"]["spec"],
            &spec,
            "the Rollout spec",
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
