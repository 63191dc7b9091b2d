//! `canaryd validate` end to end: the binary, real files, exit codes and the exact lines users read.

use std::path::{Path, PathBuf};

use crate::CANARYD;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/validate")
        .join(name)
}

/// Runs `canaryd validate ARGS` from the repository root; returns (exit code, stdout lines).
fn validate(args: &[&str]) -> (i32, Vec<String>) {
    let ran = CANARYD.run(&[&["validate"], args].concat());
    (
        ran.code.unwrap_or(-1),
        ran.stdout.lines().map(str::to_string).collect(),
    )
}

fn assert_one_problem(file: &str, expected: &str) {
    let path = format!("tests/fixtures/validate/{file}");
    let (code, lines) = validate(&[&path]);
    assert_eq!(code, 1, "{file} must be invalid: {lines:?}");
    assert_eq!(lines, vec![format!("{path}:{expected}")], "{file}");
}

#[test]
fn the_shipped_template_library_is_valid() {
    let (code, lines) = validate(&["analysis-templates/"]);
    assert_eq!((code, lines), (0, vec![]));
}

#[test]
fn a_misspelled_field_is_named_with_a_suggestion() {
    assert_one_problem(
        "misspelled-field.yaml",
        "8: AnalysisTemplate/misspelled: spec.metrics[0].intervall: unknown field \"intervall\", did you mean \"interval\"?",
    );
}

#[test]
fn a_promql_syntax_error_is_reported_on_its_line_and_one_an_arg_makes_is_refused_by_analyze() {
    assert_one_problem(
        "promql-syntax.yaml",
        "16: AnalysisTemplate/unclosed: spec.metrics[0].provider.prometheus.query: not valid PromQL: unclosed \
         left parenthesis (checked with each {{...}} replaced by a placeholder)",
    );
    // With the args known the query itself is checked, before anything is measured: here an arg breaks a
    // template that is valid on its own.
    let stderr = CANARYD.refused(&[
        "analyze",
        "-f",
        "analysis-templates/success-rate.yaml",
        "--arg",
        "service=checkout",
        "--arg",
        "namespace=shop",
        "--arg",
        "window=2m]",
        "--prometheus",
        "http://127.0.0.1:1",
    ]);
    assert!(
        stderr.contains("provider.prometheus.query: not valid PromQL: ")
            && !stderr.contains("placeholder"),
        "{stderr}"
    );
}

#[test]
fn a_field_one_level_off_is_pointed_to_where_it_belongs() {
    assert_one_problem(
        "misplaced-provider.yaml",
        "7: AnalysisTemplate/t: spec.provider: unknown field \"provider\", did you mean to indent it under \
         spec.metrics[]?",
    );
}

#[test]
fn a_bad_duration_is_reported_on_its_line() {
    assert_one_problem(
        "bad-duration.yaml",
        "8: AnalysisTemplate/bad-duration: spec.metrics[0].interval: invalid duration \"5 minutes\": unknown unit \" minutes\" (expected ns, us, ms, s, m or h)",
    );
}

#[test]
fn an_undeclared_arg_is_reported_where_it_is_used() {
    assert_one_problem(
        "undeclared-arg.yaml",
        "13: AnalysisTemplate/undeclared-arg: spec.metrics[0].provider.prometheus.query: {{args.namespace}} refers to an arg that is not declared in spec.args",
    );
}

#[test]
fn a_count_above_one_without_interval_is_rejected() {
    assert_one_problem(
        "count-without-interval.yaml",
        "8: AnalysisTemplate/count-without-interval: spec.metrics[0].count: count 5 takes more than one measurement, so interval is required",
    );
}

#[test]
fn an_unsupported_provider_is_named() {
    assert_one_problem(
        "datadog-provider.yaml",
        "11: AnalysisTemplate/datadog: spec.metrics[0].provider.datadog: provider datadog is not supported by canaryd (supported: prometheus, web, job, plugin \"canaryd/...\")",
    );
}

#[test]
fn broken_yaml_is_reported_where_the_broken_construct_starts() {
    assert_one_problem(
        "broken-yaml.yaml",
        "10: invalid YAML: did not find expected ',' or ']' while parsing a flow sequence that starts at column 16",
    );
}

#[test]
fn nested_templates_are_resolved_among_the_given_files() {
    let (code, lines) = validate(&["tests/fixtures/validate/valid-nested.yaml"]);
    assert_eq!((code, lines), (0, vec![]));
}

#[test]
fn duplicate_metric_names_across_nested_templates_fail_and_unknown_references_warn() {
    let p = "tests/fixtures/validate/duplicate-nested-metric.yaml";
    let (code, lines) = validate(&[p]);
    assert_eq!(code, 1);
    assert_eq!(
        lines,
        vec![
            format!(
                "{p}:20: AnalysisTemplate/outer: spec.templates[1].templateName: warning: AnalysisTemplate \"elsewhere\" is not among the given files; it must exist in the cluster"
            ),
            format!(
                "{p}:22: AnalysisTemplate/outer: spec.metrics[0].name: metric name \"up\" is used twice (first at AnalysisTemplate/inner); names must be unique across nested templates"
            ),
        ]
    );
}

#[test]
fn argo_limit_rules_and_provider_rules_each_give_one_line() {
    let p = "tests/fixtures/validate/limits.yaml";
    let (code, lines) = validate(&[p]);
    assert_eq!(code, 1);
    let expected = [
        "7: AnalysisTemplate/limits: spec.dryRun[0].metricName: \"nothing-matches\" matches no metric name",
        "9: AnalysisTemplate/limits: spec.measurementRetention[0].metricName: invalid regular expression \"(\": unclosed group",
        "14: AnalysisTemplate/limits: spec.metrics[0].count: count (2) must be >= failureLimit (3) + consecutiveSuccessLimit (0), or the limits can never be reached",
        "18: AnalysisTemplate/limits: spec.metrics[0].provider.prometheus.address: \"prometheus:9090\" is not an http(s) URL (scheme \"prometheus\")",
        "22: AnalysisTemplate/limits: spec.metrics[1].failureLimit: failureLimit -1 turns failure counting off, so consecutiveSuccessLimit must be > 0 to ever decide",
        "23: AnalysisTemplate/limits: spec.metrics[1].consecutiveErrorLimit: must not be negative, got -2",
        "29: AnalysisTemplate/limits: spec.metrics[2].provider: exactly one provider is allowed, found prometheus, web",
        "38: AnalysisTemplate/limits: spec.metrics[3].provider.plugin.argoproj-labs/metric-ai: plugin argoproj-labs/metric-ai is not supported by canaryd (canaryd runs prometheus, web, job and its own plugin canaryd/compare)",
    ];
    let expected: Vec<String> = expected.iter().map(|e| format!("{p}:{e}")).collect();
    assert_eq!(lines, expected);
}

#[test]
fn with_failure_limit_off_the_count_is_held_against_the_consecutive_success_limit_alone() {
    let p = "tests/fixtures/validate/limits-failure-off.yaml";
    let (code, lines) = validate(&[p]);
    assert_eq!(code, 1);
    assert_eq!(
        lines,
        vec![format!(
            "{p}:8: AnalysisTemplate/failure-off: spec.metrics[0].count: count (1) must be >= consecutiveSuccessLimit (2) when failureLimit is -1, or the limit can never be reached"
        )]
    );
}

#[test]
fn json_output_carries_the_same_findings_and_nothing_else_on_stdout() {
    let (code, lines) = validate(&[
        "--output",
        "json",
        "tests/fixtures/validate/datadog-provider.yaml",
    ]);
    assert_eq!(code, 1);
    let report: serde_json::Value =
        serde_json::from_str(&lines.join("\n")).expect("stdout is one JSON document");
    assert_eq!(report["valid"], false);
    assert_eq!(report["objects"], 1);
    let f = &report["findings"][0];
    assert_eq!(f["line"], 11);
    assert_eq!(f["kind"], "AnalysisTemplate");
    assert_eq!(f["name"], "datadog");
    assert_eq!(f["path"], "spec.metrics[0].provider.datadog");
    assert_eq!(f["severity"], "error");
}

#[test]
fn a_missing_path_is_a_usage_error() {
    let (code, _) = validate(&["tests/fixtures/validate/does-not-exist.yaml"]);
    assert_eq!(code, 2);
    let out = CANARYD.command().arg("validate").output().expect("runs");
    assert_eq!(
        out.status.code(),
        Some(2),
        "no path at all is a usage error"
    );
}

/// Argo Rollouts' own published templates (tests/fixtures/argo-examples, with their source).
fn argo_examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/argo-examples")
}

#[test]
fn argo_documented_prometheus_web_and_job_templates_validate() {
    let dir = argo_examples();
    let valid = [
        "docs__analysis__prometheus.md__01.yaml",
        "docs__analysis__prometheus.md__02.yaml",
        "docs__analysis__prometheus.md__03.yaml",
        "docs__analysis__prometheus.md__04.yaml",
        "docs__analysis__web.md__01.yaml",
        "docs__features__analysis.md__01.yaml",
        "docs__features__analysis.md__02.yaml",
        "docs__features__analysis.md__03.yaml",
        "docs__features__analysis.md__04.yaml",
        "docs__features__analysis.md__05.yaml",
        "docs__features__analysis.md__06.yaml",
        "docs__features__analysis.md__07.yaml",
        "docs__features__analysis.md__08.yaml",
        "docs__features__analysis.md__09.yaml",
        "docs__features__analysis.md__10.yaml",
        "docs__features__analysis.md__11.yaml",
        "examples__appmesh__canary-rollout.yaml",
        "examples__rollout-secret.yaml",
        "examples__analysis-templates.yaml__01.yaml",
        "examples__analysis-templates.yaml__02.yaml",
        "examples__cluster-analysis-templates.yaml",
        "examples__traffic-management__job.yaml",
    ];
    let paths: Vec<String> = valid
        .iter()
        .map(|f| dir.join(f).display().to_string())
        .collect();
    let args: Vec<&str> = paths.iter().map(String::as_str).collect();
    let (code, lines) = validate(&args);
    let errors: Vec<&String> = lines
        .iter()
        .filter(|l| !l.contains(": warning: "))
        .collect();
    assert_eq!((code, errors), (0, Vec::<&String>::new()));
}

#[test]
fn argo_templates_for_other_providers_fail_naming_the_provider() {
    let dir = argo_examples();
    for (file, provider) in [
        ("docs__analysis__datadog.md__01.yaml", "datadog"),
        ("docs__analysis__wavefront.md__01.yaml", "wavefront"),
        ("docs__analysis__cloudwatch.md__01.yaml", "cloudWatch"),
        ("docs__analysis__newrelic.md__01.yaml", "newRelic"),
    ] {
        let path = dir.join(file).display().to_string();
        let (code, lines) = validate(&[&path]);
        assert_eq!(code, 1, "{file}");
        assert_eq!(lines.len(), 1, "{file}: {lines:?}");
        assert!(
            lines[0].contains(&format!(
                "provider.{provider}: provider {provider} is not supported by canaryd"
            )),
            "{file}: {}",
            lines[0]
        );
    }
}

#[test]
fn an_argo_snippet_without_a_name_fails_naming_metadata_name() {
    let path = argo_examples()
        .join("docs__features__analysis.md__12.yaml")
        .display()
        .to_string();
    let (code, lines) = validate(&[&path]);
    assert_eq!(code, 1);
    assert_eq!(
        lines[0],
        format!("{path}:2: AnalysisTemplate/<unnamed>: metadata.name: required")
    );
}

#[test]
fn a_folder_is_searched_recursively_and_every_document_is_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nested = dir.path().join("a/b");
    std::fs::create_dir_all(&nested).expect("mkdir");
    std::fs::copy(fixture("datadog-provider.yaml"), nested.join("x.yml")).expect("copy");
    std::fs::copy(fixture("valid-nested.yaml"), dir.path().join("ok.yaml")).expect("copy");
    std::fs::write(dir.path().join("notes.txt"), "not yaml: [").expect("write");
    let (code, lines) = validate(&[&dir.path().display().to_string()]);
    assert_eq!(code, 1);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].ends_with("provider datadog is not supported by canaryd (supported: prometheus, web, job, plugin \"canaryd/...\")"));
}

#[test]
fn the_compare_plugin_is_checked_field_by_field_and_window_belongs_to_it_alone() {
    let p = "tests/fixtures/validate/compare.yaml";
    let (code, lines) = validate(&[p]);
    assert_eq!(code, 1);
    let c = "provider.plugin.canaryd/compare";
    let expected = [
        format!("13: AnalysisTemplate/compare: spec.metrics[0].{c}.errorRate.baseline.requests: required"),
        format!("14: AnalysisTemplate/compare: spec.metrics[0].{c}.errorRate.confidense: unknown field \"confidense\", did you mean \"confidence\"?"),
        format!("22: AnalysisTemplate/compare: spec.metrics[1].{c}.distribution.confidence: must be between 0 and 1, got 1.5"),
        format!("23: AnalysisTemplate/compare: spec.metrics[1].{c}.distribution.direction: \"up\" is not one of increase, decrease, either"),
        "28: AnalysisTemplate/compare: spec.metrics[2].provider.prometheus.query: unknown placeholder {{window}} (expected {{args.NAME}})".to_string(),
    ];
    let expected: Vec<String> = expected.iter().map(|e| format!("{p}:{e}")).collect();
    assert_eq!(lines, expected);
}

#[test]
fn a_range_query_step_of_zero_is_reported_rather_than_failing_every_measurement() {
    assert_one_problem(
        "zero-step.yaml",
        "15: AnalysisTemplate/zero-step: spec.metrics[0].provider.prometheus.rangeQuery.step: invalid duration \"0s\": a step must be greater than zero",
    );
}

#[test]
fn an_argo_kind_of_another_api_version_is_named_once_whichever_kind_it_is() {
    let path = "tests/fixtures/validate/wrong-api-version.yaml";
    let (code, lines) = validate(&[path]);
    assert_eq!(code, 1, "{lines:?}");
    let expected = r#"apiVersion: expected "argoproj.io/v1alpha1", got "argoproj.io/v1beta1""#;
    assert_eq!(
        lines,
        vec![
            format!("{path}:2: AnalysisTemplate/success-rate: {expected}"),
            format!("{path}:13: ApplicationSet/guestbook: {expected}"),
        ]
    );
}

#[test]
fn a_job_spec_that_no_job_controller_would_run_is_reported_at_its_field() {
    let p = "tests/fixtures/validate/job.yaml";
    let (code, lines) = validate(&[p]);
    assert_eq!(code, 1);
    let spec = "provider.job.spec";
    let expected = [
        format!(
            "13: AnalysisTemplate/smoke: spec.metrics[0].{spec}.template.spec.restartPolicy: \"Always\" is not allowed for a Job: use Never or OnFailure"
        ),
        format!(
            "21: AnalysisTemplate/smoke: spec.metrics[1].{spec}.backoffLimit: must be an integer, got a string"
        ),
        format!(
            "23: AnalysisTemplate/smoke: spec.metrics[1].{spec}.template.spec.containers: required: at least one container"
        ),
    ];
    let expected: Vec<String> = expected.iter().map(|e| format!("{p}:{e}")).collect();
    assert_eq!(lines, expected);
}
