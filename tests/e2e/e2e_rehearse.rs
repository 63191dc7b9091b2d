//! `canaryd rehearse` against a real Prometheus (docs/development.md, "Tests"): a Rollout's steps played on a virtual clock
//! by the daemon's planner, its step analyses measured against the loaded history. The Rollout is
//! examples/rehearse/checkout.yaml (step 2 and step 5 are success-rate analyses) with the shipped
//! success-rate template; `--arg service=...` points it at one of the scenario's services.

#![allow(clippy::disallowed_methods)]

use std::sync::OnceLock;

use crate::CANARYD;
use canaryd_testkit::prometheus::{Prometheus, Scenario, Traffic, at, shared, steady};
use serde_json::Value;

static PROMETHEUS: OnceLock<Prometheus> = OnceLock::new();

/// 0.2% errors, except in the windows where `bad` says the canary fails 30% of its requests.
fn failing_between(windows: &'static [(f64, f64)]) -> impl Fn(f64) -> Traffic {
    move |minute| Traffic {
        rps: 20.0,
        errors: if windows.iter().any(|(a, b)| (*a..*b).contains(&minute)) {
            0.3
        } else {
            0.002
        },
    }
}

fn prometheus() -> &'static Prometheus {
    shared(&PROMETHEUS, || {
        let labels = |service: &'static str| [("service", service), ("namespace", "shop")];
        Scenario::new(120)
            .requests(
                "http_requests_total",
                &labels("healthy"),
                "code",
                steady(20.0, 0.002),
            )
            .requests(
                "http_requests_total",
                &labels("regressing"),
                "code",
                failing_between(&[(13.0, 120.0)]),
            )
            .requests(
                "http_requests_total",
                &labels("spiky"),
                "code",
                failing_between(&[(40.0, 50.0)]),
            )
    })
}

/// What one `canaryd rehearse --output json` printed: the timeline entries and the outcome.
struct Rehearsed {
    code: i32,
    lines: Vec<Value>,
    stderr: String,
}

impl Rehearsed {
    fn outcome(&self) -> &Value {
        self.lines
            .iter()
            .rev()
            .find(|l| l["type"] == "outcome")
            .unwrap_or_else(|| panic!("no outcome line: {:#?}\n{}", self.lines, self.stderr))
    }

    fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["type"] == kind).collect()
    }
}

fn rehearse(service: &str, extra: &[&str]) -> Rehearsed {
    let flag = ["--prometheus", prometheus().url()];
    rehearse_with(service, &[&flag[..], extra].concat(), &[])
}

/// `canaryd rehearse` of the example Rollout with the shipped success-rate template, `extra` flags and
/// `env` (where the Prometheus may be configured instead of given with `--prometheus`).
fn rehearse_with(service: &str, extra: &[&str], env: &[(&str, &str)]) -> Rehearsed {
    let from = at(10).to_string();
    let arg = format!("service={service}");
    let mut args = vec![
        "rehearse",
        "-f",
        "examples/rehearse/checkout.yaml",
        "-f",
        "analysis-templates/success-rate.yaml",
        "--arg",
        &arg,
        "--output",
        "json",
    ];
    if !extra.contains(&"--from") {
        args.extend(["--from", &from]);
    }
    args.extend(extra);
    let ran: canaryd_testkit::cli::Ran = CANARYD
        .command()
        .args(&args)
        .envs(env.iter().copied())
        .output()
        .expect("the canaryd binary runs")
        .into();
    let lines = ran
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}\n{}", ran.stderr))
        })
        .collect();
    Rehearsed {
        code: ran.code.unwrap_or(-1),
        lines,
        stderr: ran.stderr,
    }
}

/// The shipped template names no Prometheus address, so the configured one (`CANARYD_PROMETHEUS_ADDRESS`,
/// as the chart's `prometheus.address` sets it in the daemon) is what a rehearsal asks.
#[test]
fn the_shipped_template_asks_the_configured_prometheus() {
    let r = rehearse_with(
        "healthy",
        &[],
        &[("CANARYD_PROMETHEUS_ADDRESS", prometheus().url())],
    );
    assert_eq!(r.code, 0, "{:#?}\n{}", r.lines, r.stderr);
    assert_eq!(r.outcome()["outcome"], "promoted");
}

#[test]
fn a_healthy_history_promotes_through_every_step_with_the_weights_written() {
    let r = rehearse("healthy", &[]);
    assert_eq!(r.code, 0, "{:#?}\n{}", r.lines, r.stderr);
    let outcome = r.outcome();
    assert_eq!(outcome["outcome"], "promoted");
    assert_eq!(outcome["status"]["phase"], "Healthy");
    assert_eq!(
        outcome["status"]["stableRS"],
        outcome["status"]["currentPodHash"]
    );
    // Two analyses of ten measurements each, all successful.
    let measurements = r.of_type("measurement");
    assert_eq!(measurements.len(), 20, "{measurements:#?}");
    assert!(
        measurements
            .iter()
            .all(|m| m["measurement"]["phase"] == "Successful")
    );
    // What the routers were told: 0 while the canary has no available pod, step 1's 20 as soon as it has, step
    // 3's 50 once step 2's ten measurements (minute 10 to 19) are in, all of it once step 5's are (the 5m pause
    // ends at 24:00, when the planner wakes), and 0 once the new revision is the stable one. Every step line
    // shows the routers; the weight's changes are read from them.
    let mut weights: Vec<(String, i64)> = r
        .of_type("step")
        .iter()
        .map(|s| {
            assert!(!s["routers"].is_null(), "{s:#}");
            (
                s["time"].as_str().unwrap().to_string(),
                s["weight"].as_i64().unwrap(),
            )
        })
        .collect();
    weights.dedup_by_key(|(_, weight)| *weight);
    assert_eq!(
        weights,
        [
            ("2026-01-01T00:10:00Z".to_string(), 0),
            ("2026-01-01T00:10:00Z".to_string(), 20),
            ("2026-01-01T00:19:00Z".to_string(), 50),
            ("2026-01-01T00:33:00Z".to_string(), 100),
            ("2026-01-01T00:33:00Z".to_string(), 0),
        ]
    );
    let steps = r.of_type("step");
    let first = steps
        .iter()
        .find(|s| s["weight"] == 20 && !s["routers"].is_null())
        .map(|s| &s["routers"][0])
        .expect("the routers were told 20");
    assert_eq!(first["object"], "VirtualService/checkout");
    assert_eq!(
        first["weights"],
        serde_json::json!([["checkout-stable", 80], ["checkout-canary", 20]])
    );
}

#[test]
fn a_regression_during_step_2_aborts_at_step_2_naming_the_metric() {
    let r = rehearse("regressing", &[]);
    assert_eq!(r.code, 1, "{:#?}\n{}", r.lines, r.stderr);
    let outcome = r.outcome();
    assert_eq!(outcome["outcome"], "aborted");
    assert_eq!(outcome["step"], 2);
    assert_eq!(outcome["metric"], "success-rate");
    let reason = outcome["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "Step-based analysis phase error/failed: Metric \"success-rate\" assessed Failed"
        ),
        "{reason}"
    );
    assert_eq!(outcome["status"]["phase"], "Degraded");
    assert!(
        r.of_type("event")
            .iter()
            .any(|e| e["reason"] == "RolloutAborted" && e["warning"] == true),
        "{:#?}",
        r.lines
    );
    // The canary's traffic is taken away.
    let last_step = r.of_type("step").into_iter().last().unwrap().clone();
    assert_eq!(last_step["weight"], 0, "{last_step:#}");
    assert_eq!(
        last_step["routers"][0]["weights"],
        serde_json::json!([["checkout-stable", 100], ["checkout-canary", 0]])
    );
}

#[test]
fn no_data_pauses_on_an_inconclusive_analysis_and_waits_for_a_person() {
    let r = rehearse("absent", &[]);
    assert_eq!(r.code, 3, "{:#?}\n{}", r.lines, r.stderr);
    let outcome = r.outcome();
    assert_eq!(outcome["outcome"], "waiting");
    assert_eq!(outcome["step"], 2);
    assert!(
        outcome["reason"]
            .as_str()
            .unwrap()
            .contains("InconclusiveAnalysisRun"),
        "{outcome:#}"
    );
    assert_eq!(
        outcome["status"]["pauseConditions"][0]["reason"],
        "InconclusiveAnalysisRun"
    );
    let phases: Vec<&Value> = r
        .of_type("measurement")
        .iter()
        .map(|m| &m["measurement"]["phase"])
        .collect();
    assert_eq!(phases, ["Inconclusive"; 4]);
}

#[test]
fn every_start_is_counted_once_in_the_summary() {
    // Starts at minutes 5, 25, 45, 65: the spike at 40-50 fails step 5 of the 25-minute start and step 2
    // of the 45-minute start.
    let from = at(5).to_string();
    let until = at(65).to_string();
    let r = rehearse(
        "spiky",
        &["--from", &from, "--every", "20m", "--until", &until],
    );
    assert_eq!(r.code, 1, "{:#?}\n{}", r.lines, r.stderr);
    let outcomes: Vec<(String, Value)> = r
        .of_type("outcome")
        .iter()
        .map(|o| {
            (
                o["started"].as_str().unwrap().to_string(),
                o["step"].clone(),
            )
        })
        .collect();
    assert_eq!(outcomes.len(), 4, "{outcomes:?}");
    let summary = r.lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["rehearsals"], 4);
    assert_eq!(summary["promoted"]["count"], 2);
    assert_eq!(summary["aborted"]["count"], 2);
    assert_eq!(summary["waiting"]["count"], 0);
    assert_eq!(
        summary["abortedBy"],
        serde_json::json!([
            {"step": 2, "metric": "success-rate", "count": 1},
            {"step": 5, "metric": "success-rate", "count": 1}
        ])
    );
}

#[test]
fn a_person_promoting_after_promote_after_carries_an_inconclusive_rollout_through() {
    let r = rehearse("absent", &["--promote-after", "10m"]);
    assert_eq!(r.code, 0, "{:#?}\n{}", r.lines, r.stderr);
    let promotions: Vec<&str> = r
        .of_type("promote")
        .iter()
        .map(|p| p["time"].as_str().unwrap())
        .collect();
    // Step 2's fourth empty look (minute 13) pauses it, step 5's (minute 31) again.
    assert_eq!(promotions, ["2026-01-01T00:23:00Z", "2026-01-01T00:41:00Z"]);
    assert_eq!(r.outcome()["outcome"], "promoted");
}

#[test]
fn new_pods_take_ready_after_before_the_next_step_begins() {
    let r = rehearse("healthy", &["--ready-after", "2m"]);
    assert_eq!(r.code, 0, "{:#?}\n{}", r.lines, r.stderr);
    let first = r.of_type("measurement")[0]["time"].clone();
    assert_eq!(
        first, "2026-01-01T00:12:00Z",
        "step 2 waits for the canary's pods"
    );
}

#[test]
fn a_template_the_files_lack_is_bad_input_named_by_file_object_and_field() {
    let stderr = CANARYD.refused(&[
        "rehearse",
        "-f",
        "examples/rehearse/checkout.yaml",
        "--from",
        "2026-01-01T00:10:00Z",
    ]);
    assert!(
        stderr.contains(
            "examples/rehearse/checkout.yaml:34: Rollout/checkout: \
             spec.strategy.canary.steps[1].analysis.templates: Invalid value: \"success-rate\": \
             AnalysisTemplate 'success-rate' not found"
        ),
        "{}",
        stderr
    );
}

#[test]
fn a_router_object_that_does_not_fit_the_rollout_is_invalid_spec_as_in_the_daemon() {
    // The VirtualService among the files has no route named `primary`, which the Rollout names: refused
    // before anything is acted on, by the rule the daemon's InvalidSpec comes from (Argo's
    // ValidateVirtualService), found as `validate` finds it, on the Rollout's line.
    let fixture = std::fs::read_to_string("examples/rehearse/checkout.yaml").expect("the fixture");
    assert!(fixture.contains("  - name: primary\n"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("checkout.yaml");
    std::fs::write(
        &file,
        fixture.replace("  - name: primary\n", "  - name: other\n"),
    )
    .expect("written");
    let file = file.display().to_string();
    let stderr = CANARYD.refused(&[
        "rehearse",
        "-f",
        &file,
        "-f",
        "analysis-templates/success-rate.yaml",
        "--prometheus",
        prometheus().url(),
        "--from",
        "2026-01-01T00:10:00Z",
    ]);
    assert_eq!(
        stderr.trim(),
        format!(
            "canaryd rehearse: {file}:28: Rollout/checkout: spec.strategy.canary.trafficRouting.istio.virtualService.name: \
             Invalid value: \"checkout\": HTTP Route 'primary' is not found in the defined Virtual Service."
        )
    );
}

/// A server that answers every request `503 Service Unavailable`: a Prometheus that is there (so the
/// rehearsal starts) but fails every query (so each measurement is an Error).
fn erroring_prometheus() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = format!("http://{}", listener.local_addr().expect("its address"));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = stream
                .write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    address
}

#[test]
fn a_rehearsal_that_would_run_past_the_last_representable_instant_ends_waiting() {
    // Timestamps end at 9999-12-30T22:00:00Z: a retry 10 s after an Error, or pods ready 2 h later, fall
    // past it. The Prometheus here answers every query with 503, so the analysis only errors.
    let erroring = erroring_prometheus();
    for late in [
        &["--from", "9999-12-30T21:59:59Z"][..],
        &["--from", "9999-12-30T21:00:00Z", "--ready-after", "2h"][..],
    ] {
        let mut args = vec![
            "rehearse",
            "-f",
            "examples/rehearse/checkout.yaml",
            "-f",
            "analysis-templates/success-rate.yaml",
            "--prometheus",
            &erroring,
            "--output",
            "json",
        ];
        args.extend(late);
        let ran = CANARYD.run(&args);
        assert_eq!(ran.code, Some(3), "{late:?}: {}", ran.stderr);
        let outcome: Value = serde_json::from_str(ran.stdout.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{late:?}: {e}: {}", ran.stdout));
        assert_eq!(outcome["outcome"], "waiting", "{outcome}");
        assert!(
            outcome["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("not finished by 9999-12-30T22:00:00Z")),
            "{outcome}"
        );
    }
}

#[test]
fn a_job_metric_is_bad_input_named_by_file_template_and_field_not_a_made_up_abort() {
    let stderr = CANARYD.refused(&[
        "rehearse",
        "-f",
        "tests/fixtures/rehearse/smoke-job.yaml",
        "-f",
        "analysis-templates/job-smoke-test.yaml",
        "--from",
        "2026-01-01T00:10:00Z",
    ]);
    assert!(
        stderr.contains(
            "analysis-templates/job-smoke-test.yaml:32: AnalysisTemplate/job-smoke-test: \
             spec.metrics[0].provider.job: metric \"smoke-test\" runs a Kubernetes Job, which a rehearsal \
             cannot run"
        ),
        "{}",
        stderr
    );
}

#[test]
fn more_starts_than_a_tally_can_hold_are_bad_input_before_any_is_played() {
    // Every millisecond of an hour: 3.6 million rehearsals.
    let stderr = CANARYD.refused(&[
        "rehearse",
        "-f",
        "examples/rehearse/checkout.yaml",
        "-f",
        "analysis-templates/success-rate.yaml",
        "--prometheus",
        "http://127.0.0.1:1",
        "--from",
        "2026-01-01T00:00:00Z",
        "--every",
        "1ms",
        "--until",
        "2026-01-01T01:00:00Z",
    ]);
    assert!(
        stderr.contains(
            "--every 1ms from 2026-01-01T00:00:00Z until 2026-01-01T01:00:00Z is 3600001 starts, more than \
             100000"
        ),
        "{}",
        stderr
    );
}

/// A blue-green Rollout rehearsed on the same planner: its pre-promotion analysis measured against the
/// history, then the pause a person ends (`--promote-after` among `extra`), or an abort when the preview
/// regresses.
fn rehearse_blue_green(service: &str, extra: &[&str]) -> Rehearsed {
    let from = at(10).to_string();
    let arg = format!("service={service}");
    let mut args = vec![
        "rehearse",
        "-f",
        "tests/fixtures/rehearse/bluegreen.yaml",
        "-f",
        "analysis-templates/success-rate.yaml",
        "--arg",
        &arg,
        "--prometheus",
        prometheus().url(),
        "--from",
        &from,
        "--output",
        "json",
    ];
    args.extend(extra);
    let ran = CANARYD.run(&args);
    let lines = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    Rehearsed {
        code: ran.code.unwrap_or(-1),
        lines,
        stderr: ran.stderr,
    }
}

#[test]
fn a_blue_green_rollout_is_promoted_after_its_pre_promotion_analysis_passes_on_the_history() {
    let r = rehearse_blue_green("healthy", &["--promote-after", "5m"]);
    assert_eq!(r.code, 0, "{:#?}\n{}", r.lines, r.stderr);
    let status = &r.outcome()["status"];
    assert_eq!(r.outcome()["outcome"], "promoted");
    assert_eq!(status["stableRS"], status["currentPodHash"]);
    assert_eq!(
        status["blueGreen"]["activeSelector"],
        status["currentPodHash"]
    );
    assert_eq!(
        status["blueGreen"]["prePromotionAnalysisRunStatus"]["status"],
        "Successful"
    );
    assert_eq!(r.of_type("measurement").len(), 10);
    assert!(r.of_type("step").is_empty(), "no steps: {:#?}", r.lines);
    assert!(r.outcome().get("step").is_none(), "{:#}", r.outcome());
}

#[test]
fn a_blue_green_preview_that_regresses_is_aborted_before_the_switch() {
    let r = rehearse_blue_green("regressing", &["--promote-after", "5m"]);
    assert_eq!(r.code, 1, "{:#?}\n{}", r.lines, r.stderr);
    let status = &r.outcome()["status"];
    assert_eq!(r.outcome()["outcome"], "aborted");
    assert!(r.outcome().get("step").is_none(), "{:#}", r.outcome());
    assert_ne!(
        status["blueGreen"]["activeSelector"],
        status["currentPodHash"]
    );
    assert_eq!(
        status["blueGreen"]["prePromotionAnalysisRunStatus"]["status"],
        "Failed"
    );
}

#[test]
fn a_blue_green_pause_without_auto_promotion_waits_for_a_person() {
    let r = rehearse_blue_green("healthy", &[]);
    assert_eq!(r.code, 3, "{:#?}\n{}", r.lines, r.stderr);
    let outcome = r.outcome();
    assert_eq!(outcome["outcome"], "waiting");
    assert!(
        outcome["reason"]
            .as_str()
            .unwrap()
            .contains("BlueGreenPause"),
        "{outcome:#}"
    );
    let status = &outcome["status"];
    assert_eq!(status["pauseConditions"][0]["reason"], "BlueGreenPause");
    assert_eq!(
        status["blueGreen"]["previewSelector"],
        status["currentPodHash"]
    );
    assert_ne!(
        status["blueGreen"]["activeSelector"],
        status["currentPodHash"]
    );
}

/// `--every` over a blue-green Rollout: each abort is tallied before the switch, as a blue-green Rollout
/// has no step to name.
#[test]
fn a_blue_green_tally_counts_aborts_before_the_switch() {
    let until = at(20).to_string();
    let r = rehearse_blue_green(
        "regressing",
        &["--promote-after", "5m", "--every", "10m", "--until", &until],
    );
    assert_eq!(r.code, 1, "{:#?}\n{}", r.lines, r.stderr);
    let summary = r.lines.last().unwrap();
    assert_eq!(summary["type"], "summary");
    let causes = summary["abortedBy"].as_array().unwrap();
    assert!(!causes.is_empty(), "{summary:#}");
    for cause in causes {
        assert_eq!(cause["promotion"], "PrePromotion", "{summary:#}");
        assert_eq!(cause["step"], Value::Null, "{summary:#}");
    }
}
