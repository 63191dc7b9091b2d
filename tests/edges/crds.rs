//! canaryd's generated CRDs against the ones Argo Rollouts publishes (tests/fixtures/crds/): only one CRD per
//! kind can exist in a cluster, so the definitions must agree on everything a client or a controller relies on,
//! and whatever canaryd writes must survive either set's schema unchanged (the fake API server's pruning and
//! validation, the same code that serves them in the daemon tests).

#![allow(clippy::disallowed_methods)] // Not the Clock: the fake API server keeps real time.

use std::collections::BTreeMap;
use std::path::Path;

use canaryd::api::{AnalysisPhase, AnalysisRunStatus, Measurement, MetricResult, RunSummary};
use canaryd_testkit::fake_apiserver::schema::{self, Schema};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

const ARGO: [&str; 4] = [
    "argo-rollouts-analysis-run-crd.yaml",
    "argo-rollouts-analysis-template-crd.yaml",
    "argo-rollouts-cluster-analysis-template-crd.yaml",
    "argo-rollouts-rollout-crd.yaml",
];

fn load(path: &Path) -> Vec<Value> {
    let (documents, error) = canaryd::cli::load::load_file(path);
    assert!(error.is_none(), "{error:?}");
    documents.into_iter().map(|d| d.value).collect()
}

fn argo_crds() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crds");
    ARGO.iter().flat_map(|file| load(&dir.join(file))).collect()
}

fn canaryd_crds() -> Vec<Value> {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/canaryd/files/crds.yaml"))
}

fn named<'a>(crds: &'a [Value], name: &str) -> &'a Value {
    crds.iter()
        .find(|c| c["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no CRD {name}"))
}

/// What clients and controllers see of a CRD besides its schema. kube-apiserver fills `listKind` (Kind + "List")
/// and reads absent `subresources` as none, so both are compared as the server serves them.
fn served_shape(crd: &Value) -> Value {
    let spec = &crd["spec"];
    let mut names = spec["names"].clone();
    if names.get("listKind").is_none() {
        names["listKind"] = json!(format!(
            "{}List",
            names["kind"].as_str().unwrap_or_default()
        ));
    }
    let versions: Vec<Value> = spec["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| {
            json!({
                "name": v["name"], "served": v["served"], "storage": v["storage"],
                "subresources": v.get("subresources").cloned().unwrap_or_else(|| json!({})),
                "additionalPrinterColumns": v["additionalPrinterColumns"],
            })
        })
        .collect();
    json!({ "group": spec["group"], "names": names, "scope": spec["scope"], "versions": versions })
}

fn openapi_schema(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

#[test]
fn canaryd_defines_the_same_kinds_as_argo_rollouts() {
    let (argo, ours) = (argo_crds(), canaryd_crds());
    let names = |crds: &[Value]| -> Vec<String> {
        let mut names: Vec<String> = crds
            .iter()
            .map(|c| {
                c["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&ours), names(&argo));
}

#[test]
fn each_crd_has_argo_rollouts_group_names_scope_versions_subresources_and_columns() {
    let argo = argo_crds();
    let ours = canaryd_crds();
    for theirs in &argo {
        let name = theirs["metadata"]["name"].as_str().unwrap_or_default();
        assert_eq!(
            served_shape(named(&ours, name)),
            served_shape(theirs),
            "{name}"
        );
    }
}

#[test]
fn only_the_rollout_has_a_status_subresource_and_its_scale_reads_argo_fields() {
    let ours = canaryd_crds();
    for name in [
        "analysisruns.argoproj.io",
        "analysistemplates.argoproj.io",
        "clusteranalysistemplates.argoproj.io",
    ] {
        assert_eq!(
            named(&ours, name)["spec"]["versions"][0]["subresources"],
            json!({}),
            "{name}"
        );
    }
    let rollout = &named(&ours, "rollouts.argoproj.io")["spec"]["versions"][0];
    assert_eq!(
        rollout["subresources"],
        json!({"status": {}, "scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.HPAReplicas",
            "labelSelectorPath": ".status.selector",
        }})
    );
}

/// The status of a run with every field canaryd writes set. Built without `..Default`, so a field added to the
/// status types must be added here, and is then checked against both schemas.
fn every_status_field() -> AnalysisRunStatus {
    let at = |s: &str| Some(Time(s.parse().expect("a timestamp")));
    let summary = RunSummary {
        count: 3,
        successful: 1,
        failed: 1,
        inconclusive: 1,
        error: 1,
    };
    let measurement = Measurement {
        phase: AnalysisPhase::Error,
        message: Some("Prometheus answered 503".into()),
        started_at: at("2026-01-01T00:00:00Z"),
        finished_at: at("2026-01-01T00:00:01Z"),
        value: Some("[0.99]".into()),
        metadata: Some(BTreeMap::from([(
            "resolvedQuery".to_owned(),
            "sum(rate(x[1m]))".to_owned(),
        )])),
        resume_at: at("2026-01-01T00:00:11Z"),
    };
    let result = MetricResult {
        name: "success-rate".into(),
        phase: AnalysisPhase::Running,
        measurements: vec![measurement],
        message: Some("measuring".into()),
        count: 3,
        successful: 1,
        failed: 1,
        inconclusive: 1,
        error: 1,
        consecutive_error: 1,
        consecutive_success: 0,
        dry_run: true,
        metadata: Some(BTreeMap::from([(
            "ResolvedPrometheusQuery".to_owned(),
            "sum(rate(x[1m]))".to_owned(),
        )])),
    };
    AnalysisRunStatus {
        phase: Some(AnalysisPhase::Running),
        message: Some("measuring".into()),
        metric_results: Some(vec![result]),
        started_at: at("2026-01-01T00:00:00Z"),
        completed_at: at("2026-01-01T00:10:00Z"),
        run_summary: Some(summary.clone()),
        dry_run_summary: Some(summary),
    }
}

#[test]
fn every_status_field_canaryd_writes_is_kept_and_valid_under_both_crd_sets() {
    let status = serde_json::to_value(every_status_field()).expect("the status serializes");
    let run = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {"name": "r", "namespace": "default", "resourceVersion": "7"},
        "spec": {"metrics": [{"name": "success-rate", "provider": {"prometheus": {"query": "x"}}}]},
        "status": status,
    });
    for (set, crds) in [
        ("Argo Rollouts'", argo_crds()),
        ("canaryd's", canaryd_crds()),
    ] {
        let schema = Schema::from(openapi_schema(named(&crds, "analysisruns.argoproj.io")));
        let mut admitted = run.clone();
        assert_eq!(
            schema::admit(&schema, &mut admitted, None),
            Ok(Vec::new()),
            "{set} AnalysisRun schema: nothing refused, nothing pruned"
        );
        assert_eq!(admitted, run, "{set} AnalysisRun schema");
    }
}

#[test]
fn a_wrong_type_in_a_status_is_refused_by_argo_rollouts_schema_naming_the_field() {
    // The check above can fail: the same schema refuses a count written as text.
    let mut status = serde_json::to_value(every_status_field()).expect("the status serializes");
    status["metricResults"][0]["count"] = json!("3");
    let mut run = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun", "metadata": {"name": "r"},
        "spec": {"metrics": []}, "status": status,
    });
    let crds = argo_crds();
    let schema = &Schema::from(openapi_schema(named(&crds, "analysisruns.argoproj.io")));
    assert_eq!(
        schema::admit(schema, &mut run, None),
        Err("status.metricResults[0].count: Invalid value: \"string\": status.metricResults[0].count in body must be of type integer: \"string\"".to_owned())
    );
}

#[test]
fn an_update_is_admitted_on_what_it_changes_from_the_stored_object() {
    // Stored before a stricter schema: a count written as text.
    let mut status = serde_json::to_value(every_status_field()).expect("the status serializes");
    status["metricResults"][0]["count"] = json!("3");
    let stored = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun", "metadata": {"name": "r"},
        "spec": {"metrics": []}, "status": status,
    });
    let crds = argo_crds();
    let schema = &Schema::from(openapi_schema(named(&crds, "analysisruns.argoproj.io")));

    let mut phase_written = stored.clone();
    phase_written["status"]["phase"] = json!("Successful");
    phase_written["spec"]["added"] = json!(1);
    assert_eq!(
        schema::admit(schema, &mut phase_written, Some(&stored)),
        Ok(vec!["spec.added".to_owned()]),
        "what the write does not change passes as it is stored (validation ratcheting); what it adds is pruned"
    );
    assert_eq!(phase_written["status"]["metricResults"][0]["count"], "3");

    let mut beside = stored.clone();
    beside["status"]["metricResults"][0]["message"] = json!("changed");
    assert_eq!(
        schema::admit(schema, &mut beside, Some(&stored)),
        Ok(vec![]),
        "a field written beside the unchanged one is validated, the unchanged one is not"
    );
    beside["status"]["metricResults"][0]["failed"] = json!("1");
    assert_eq!(
        schema::admit(schema, &mut beside, Some(&stored))
            .map_err(|e| e.starts_with("status.metricResults[0].failed:")),
        Err(true),
        "a changed field beside it is"
    );

    // Stored before the schema required it: a measurement without its phase.
    let mut phaseless = stored.clone();
    let measurement = &mut phaseless["status"]["metricResults"][0]["measurements"][0];
    measurement
        .as_object_mut()
        .expect("a measurement")
        .remove("phase");
    let mut around = phaseless.clone();
    around["status"]["phase"] = json!("Failed");
    assert_eq!(
        schema::admit(schema, &mut around, Some(&phaseless)),
        Ok(vec![]),
        "an object the write leaves alone passes without what it lacks"
    );
    around["status"]["metricResults"][0]["measurements"][0]["value"] = json!("2");
    assert_eq!(
        schema::admit(schema, &mut around, Some(&phaseless)),
        Err("status.metricResults[0].measurements[0].phase: Required value".to_owned()),
        "a changed one is checked whole"
    );

    // Stored under a schema that declared it: pruning is not ratcheted, as kube-apiserver prunes every object it
    // decodes.
    let mut undeclared = stored.clone();
    undeclared["status"]["metricResults"][0]["retired"] = json!(true);
    let mut retired_kept = undeclared.clone();
    retired_kept["status"]["phase"] = json!("Failed");
    assert_eq!(
        schema::admit(schema, &mut retired_kept, Some(&undeclared)),
        Ok(vec!["status.metricResults[0].retired".to_owned()]),
        "a field the schema no longer declares is pruned though the write leaves it alone"
    );

    let mut count_written = stored.clone();
    count_written["status"]["metricResults"][0]["count"] = json!("4");
    assert_eq!(
        schema::admit(schema, &mut count_written, Some(&stored)),
        Err("status.metricResults[0].count: Invalid value: \"string\": status.metricResults[0].count in body must be of type integer: \"string\"".to_owned()),
        "a changed field is validated"
    );
    let mut created = stored.clone();
    assert_eq!(
        schema::admit(schema, &mut created, None)
            .map_err(|e| e.contains("must be of type integer")),
        Err(true),
        "with nothing stored, everything is"
    );
}

/// Where `schema` puts the field at `path` (property names, `[]` for array items): `Ok(Some(schema))` where it
/// declares it, `Ok(None)` where an ancestor keeps unknown fields, `Err(prefix)` where it would prune it.
fn declared<'a>(schema: &'a Value, path: &[&str]) -> Result<Option<&'a Value>, String> {
    let mut at = schema;
    for (depth, part) in path.iter().enumerate() {
        if at["x-kubernetes-preserve-unknown-fields"] == true {
            return Ok(None);
        }
        let next = match *part {
            "[]" => at.get("items"),
            name => at
                .get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| at.get("additionalProperties").filter(|a| a.is_object())),
        };
        at = next.ok_or_else(|| path[..=depth].join("."))?;
    }
    Ok(Some(at))
}

/// Every field path `schema` declares, with its schema, outside ObjectMeta.
fn fields<'a>(schema: &'a Value, path: Vec<&'a str>, out: &mut Vec<(Vec<&'a str>, &'a Value)>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, field) in properties {
            if path.is_empty() && ["apiVersion", "kind", "metadata"].contains(&name.as_str()) {
                continue;
            }
            let mut at = path.clone();
            at.push(name);
            out.push((at.clone(), field));
            fields(field, at, out);
        }
    }
    if let Some(items) = schema.get("items") {
        let mut at = path.clone();
        at.push("[]");
        fields(items, at, out);
    }
}

#[test]
fn every_field_argo_rollouts_declares_is_kept_by_canaryds_crds_with_the_same_type() {
    // So Argo Rollouts' controller loses nothing it writes where canaryd's CRDs are installed.
    let (argo, ours) = (argo_crds(), canaryd_crds());
    for theirs in &argo {
        let name = theirs["metadata"]["name"].as_str().unwrap_or_default();
        let our_schema = openapi_schema(named(&ours, name));
        let mut argo_fields = Vec::new();
        fields(openapi_schema(theirs), Vec::new(), &mut argo_fields);
        assert!(
            argo_fields.len() > 10,
            "{name}: {} fields",
            argo_fields.len()
        );
        for (path, their_field) in argo_fields {
            let ours = declared(our_schema, &path)
                .unwrap_or_else(|pruned| panic!("{name}: canaryd's CRD prunes {pruned}"));
            if let Some(ours) = ours
                && their_field.get("type").is_some()
                && ours.get("type").is_some()
            {
                assert_eq!(
                    ours["type"],
                    their_field["type"],
                    "{name}: {}",
                    path.join(".")
                );
            }
        }
    }
}
