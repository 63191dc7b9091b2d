use super::*;
use serde_json::json;

fn run() -> RunRef {
    RunRef {
        namespace: "shop".to_string(),
        name: "smoke-1".to_string(),
        uid: "0b8f7c2e-1d4a-4e0b-9b1a-5d7e3c9f2a61".to_string(),
        owned: true,
    }
}

fn job(spec: Value) -> JobMetric {
    serde_json::from_value(json!({"spec": spec})).expect("a job metric")
}

fn findings(spec: Value) -> Vec<String> {
    let mut found = Vec::new();
    check(&job(spec), "provider.job", &mut found);
    found
        .into_iter()
        .map(|f| format!("{}: {}", f.path, f.message))
        .collect()
}

#[test]
fn a_job_name_is_argos_and_fits_a_label_value() {
    let uid = &run().uid;
    assert_eq!(job_name(uid, "smoke", 1), format!("{uid}.smoke.1"));
    let long = "a-very-long-metric-name-that-does-not-fit";
    let name = job_name(uid, long, 12);
    assert_eq!(name.len(), 63, "{name}");
    assert!(name.starts_with(&format!("{uid}.a-very-long")) && name.ends_with(".12"));
}

#[test]
fn the_job_carries_argos_labels_annotations_owner_and_the_spec_as_written() {
    let spec: JobMetric = serde_json::from_value(json!({
        "metadata": {"labels": {"team": "shop"}, "annotations": {"note": "smoke"}},
        "spec": {"backoffLimit": 0, "x-unknown": true, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "t", "image": "busybox"}]}}},
    }))
    .expect("a job metric");
    let object = job_object(&spec, "uid.smoke.1", "smoke", &run());
    let meta = &object["metadata"];
    assert_eq!(meta["labels"]["team"], "shop");
    assert_eq!(meta["labels"][RUN_UID_LABEL], run().uid);
    assert_eq!(meta["annotations"]["note"], "smoke");
    assert_eq!(meta["annotations"][RUN_NAME_ANNOTATION], "smoke-1");
    assert_eq!(meta["annotations"][RUN_NAMESPACE_ANNOTATION], "shop");
    assert_eq!(meta["annotations"][METRIC_ANNOTATION], "smoke");
    assert_eq!(meta["ownerReferences"][0]["kind"], "AnalysisRun");
    assert_eq!(meta["ownerReferences"][0]["controller"], true);
    assert_eq!(object["spec"]["x-unknown"], true);
    assert_eq!(
        object["spec"]["template"]["metadata"]["labels"][RUN_UID_LABEL],
        run().uid
    );
    let unowned = job_object(
        &spec,
        "n",
        "smoke",
        &RunRef {
            owned: false,
            ..run()
        },
    );
    assert!(unowned["metadata"].get("ownerReferences").is_none());
}

#[test]
fn a_job_spec_without_what_a_job_needs_is_reported_field_by_field() {
    assert_eq!(findings(Value::Null), ["provider.job.spec: required"]);
    assert_eq!(
        findings(json!({"backoffLimit": "two"})),
        [
            "provider.job.spec.backoffLimit: must be an integer, got a string",
            "provider.job.spec.template.spec: required: the Pod template the Job runs",
        ]
    );
    assert_eq!(
        findings(
            json!({"template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "t"}]}}})
        ),
        [
            "provider.job.spec.template.spec.restartPolicy: \"Always\" is not allowed for a Job: use Never or OnFailure",
            "provider.job.spec.template.spec.containers[0].image: required",
        ]
    );
    assert_eq!(
        findings(json!({"template": {"spec": {"containers": []}}})),
        [
            "provider.job.spec.template.spec.restartPolicy: required for a Job: Never or OnFailure",
            "provider.job.spec.template.spec.containers: required: at least one container",
        ]
    );
    // A field given with the wrong type says so rather than that it is missing.
    assert_eq!(
        findings(json!({"template": {"spec": 5}})),
        ["provider.job.spec.template.spec: must be a Pod spec (an object), got a number"]
    );
    assert_eq!(
        findings(json!({"template": {"spec": {"restartPolicy": ["Never"], "containers": 7}}})),
        [
            "provider.job.spec.template.spec.restartPolicy: must be Never or OnFailure, got a list",
            "provider.job.spec.template.spec.containers: must be a list of containers, got a number",
        ]
    );
    assert_eq!(
        findings(
            json!({"template": {"spec": {"restartPolicy": "Never", "containers": ["busybox", {"name": 1, "image": "i"}]}}})
        ),
        [
            "provider.job.spec.template.spec.containers[0]: must be a container (an object), got a string",
            "provider.job.spec.template.spec.containers[1].name: must be a string, got a number",
        ]
    );
    assert!(
        findings(json!({"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "t", "image": "i"}]}}}))
            .is_empty()
    );
}

#[test]
fn a_jobs_conditions_give_the_measurement_its_phase_and_a_failure_its_reason() {
    let with = |conditions: Value| -> Job {
        serde_json::from_value(
            json!({"metadata": {"name": "j"}, "status": {"conditions": conditions}}),
        )
        .expect("a job")
    };
    assert_eq!(outcome(&with(json!([]))), None);
    assert_eq!(
        outcome(&with(json!([{"type": "Complete", "status": "True"}]))),
        Some((AnalysisPhase::Successful, None))
    );
    assert_eq!(
        outcome(&with(
            json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit"}])
        )),
        Some((
            AnalysisPhase::Failed,
            Some("BackoffLimitExceeded: Job has reached the specified backoff limit".to_string())
        ))
    );
    assert_eq!(
        outcome(&with(json!([{"type": "Failed", "status": "False"}]))),
        None
    );
}

#[test]
fn a_measurement_without_its_jobs_name_cannot_be_collected() {
    let e = job_ref(None, &run()).expect_err("no metadata");
    assert_eq!(e.to_string(), "job metadata reference missing");
    let m = BTreeMap::from([(JOB_NAME_KEY.to_string(), "j".to_string())]);
    assert_eq!(
        job_ref(Some(&m), &run()).ok(),
        Some(("shop".to_string(), "j".to_string()))
    );
}

/// A Job `run` created for `metric`, numbered `n`, created at second `at`.
fn made(metric: &str, n: i64, at: i64) -> Arc<Job> {
    let r = run();
    let object = job_object(&job(json!({})), &job_name(&r.uid, metric, n), metric, &r);
    let mut made: Job = serde_json::from_value(object).expect("a Job");
    made.metadata.namespace = Some(r.namespace);
    made.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::from_second(at).expect("a time"),
    ));
    Arc::new(made)
}

#[test]
fn garbage_is_a_metrics_own_jobs_but_its_newest_by_creation_then_number() {
    let r = run();
    let mut going = made("smoke", 1, 0);
    Arc::make_mut(&mut going).metadata.deletion_timestamp =
        made("smoke", 1, 0).metadata.creation_timestamp.clone();
    let jobs = [
        made("smoke", 4, 20),
        made("smoke", 3, 10),
        made("smoke", 2, 10),
        going,
        made("other", 1, 0),
        made("smoke", 5, 20),
    ];
    let names = |keep| -> Vec<String> {
        past_retention(&jobs, &r, "smoke", keep)
            .iter()
            .filter_map(|j| j.metadata.name.clone())
            .collect()
    };
    let n = |k: i64| job_name(&r.uid, "smoke", k);
    // The Job being deleted is left to go; another metric's Jobs are never counted nor deleted.
    assert_eq!(names(2), [n(2), n(3)]);
    assert_eq!(names(1), [n(2), n(3), n(4)]);
    assert!(names(4).is_empty());
    let elsewhere = RunRef {
        uid: "another-run".to_string(),
        ..run()
    };
    assert!(past_retention(&jobs, &elsewhere, "smoke", 0).is_empty());
}
