//! `canaryd demo`, the README's first command: the Rollout progresses and rolls back with its reason (or
//! promotes with `--scenario healthy`); `--analysis-only` still runs the analysis alone.

use crate::CANARYD;

fn demo(args: &[&str]) -> (i32, String) {
    let ran = CANARYD.run(&[&["demo"], args].concat());
    (ran.code.unwrap_or(-1), ran.stdout)
}

#[test]
fn the_analysis_alone_fails_the_degrading_canary_with_the_reason() {
    let (code, out) = demo(&["--analysis-only"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("Analysis success-rate: Failed — Metric \"success-rate\" assessed Failed due to failed (2) > failureLimit (1)"),
        "{out}"
    );
    assert!(
        out.trim_end()
            .ends_with("Decision: roll back: abort the rollout"),
        "{out}"
    );
    // The first failure comes after the canary degrades at minute 8.
    assert!(
        out.contains("2026-01-01T00:08:00Z  success-rate         [0.99"),
        "{out}"
    );
    assert!(
        out.contains("2026-01-01T00:09:00Z  success-rate         [0.935"),
        "{out}"
    );
}

#[test]
fn the_analysis_alone_passes_the_healthy_canary() {
    let (code, out) = demo(&["--analysis-only", "--scenario", "healthy"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("10 measurement(s): 10 successful, 0 failed"),
        "{out}"
    );
    assert!(
        out.trim_end()
            .ends_with("Decision: promote: the canary may take the next step"),
        "{out}"
    );
}

#[test]
fn the_analysis_alone_prints_the_final_status_as_json() {
    let (code, out) = demo(&["--analysis-only", "--output", "json"]);
    assert_eq!(code, 1);
    assert_eq!(
        out.lines().count(),
        1,
        "one JSON line, as the whole demo prints: {out}"
    );
    let status: serde_json::Value =
        serde_json::from_str(&out).expect("stdout is one JSON document");
    assert_eq!(status["phase"], "Failed");
    assert_eq!(status["metricResults"][0]["failed"], 2);
    assert_eq!(
        status["metricResults"][0]["measurements"]
            .as_array()
            .map(Vec::len),
        Some(9)
    );
}

#[test]
fn the_rollout_shifts_traffic_step_by_step_and_rolls_back_when_the_canary_degrades() {
    let (code, out) = demo(&[]);
    assert_eq!(code, 1, "{out}");
    let has = |line: &str| out.lines().any(|l| l.contains(line));
    assert!(
        has(
            "00:02:00Z  step 1/7  setWeight: 20    canary weight 0  VirtualService/checkout: checkout-stable 100, checkout-canary 0"
        ),
        "no traffic goes to a canary without an available pod: {out}"
    );
    assert!(
        has(
            "00:02:00Z  step 2/7  pause: 5m        canary weight 20  VirtualService/checkout: checkout-stable 80, checkout-canary 20"
        ),
        "setWeight: 20 completes once the VirtualService has it: {out}"
    );
    assert!(
        has("00:02:00Z  RolloutPaused: Rollout is paused (CanaryPauseStep)"),
        "{out}"
    );
    assert!(has("00:07:00Z  step 3/7  analysis"), "{out}");
    assert!(
        has("00:10:00Z  success-rate         [0.88]         Failed"),
        "{out}"
    );
    assert!(
        has(
            "00:10:00Z  warning RolloutAborted: Rollout aborted update to revision 2: Step-based analysis phase \
             error/failed: Metric \"success-rate\" assessed Failed due to failed (2) > failureLimit (1)"
        ),
        "{out}"
    );
    assert!(
        has(
            "00:10:00Z  step 3/7  aborted          canary weight 0  VirtualService/checkout: checkout-stable 100, checkout-canary 0"
        ),
        "the canary's traffic is taken back, at the step the outcome names: {out}"
    );
    assert!(
        out.trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .starts_with(
                "Outcome: aborted at step 3/7 after 8m (metric success-rate): RolloutAborted:"
            ),
        "{out}"
    );
}

/// Argo sets currentStepIndex back to 0 on abort (syncRolloutStatusCanary); the timeline's step lines and the
/// outcome still agree on the step the rollout was aborted at.
#[test]
fn the_abort_lines_name_the_step_the_outcome_names() {
    let (_, out) = demo(&[]);
    let aborted: Vec<&str> = out.lines().filter(|l| l.contains("  aborted  ")).collect();
    assert!(!aborted.is_empty(), "{out}");
    for line in aborted {
        assert!(line.contains("  step 3/7  aborted"), "{line}\n{out}");
    }
}

/// The VirtualService's weights are on every step line, not only where the weight changed.
#[test]
fn every_step_line_shows_the_virtual_service() {
    for scenario in ["degrading", "healthy"] {
        let (_, out) = demo(&["--scenario", scenario]);
        let steps: Vec<&str> = out.lines().filter(|l| l.contains("  step ")).collect();
        assert!(steps.len() >= 3, "{out}");
        for line in steps {
            assert!(
                line.contains("  VirtualService/checkout: checkout-stable "),
                "{line}"
            );
        }
    }
}

/// A setWeight step's weight is set and the step completed in one reconcile; each setWeight step still has a
/// line with the weight it set, not only the weight from before it.
#[test]
fn every_set_weight_step_shows_the_weight_it_set() {
    let (_, out) = demo(&["--scenario", "healthy"]);
    for (step, weight) in [("1/7", 20), ("4/7", 50), ("6/7", 80)] {
        let set = format!("step {step}  setWeight: {weight}    canary weight {weight}  ");
        assert!(out.contains(&set), "{set}\n{out}");
    }
}

/// Argo's trafficWeightUpdatedMessage names no weight when only the ReplicaSets behind the weights changed;
/// the Event keeps Argo's words and the timeline says what happened.
#[test]
fn the_traffic_weight_update_that_names_no_weight_is_explained() {
    let (_, out) = demo(&[]);
    assert!(
        out.contains(
            "00:02:00Z  TrafficWeightUpdated: Traffic weight updated [the weight is unchanged: the weights now \
             name the new ReplicaSet's pod-template hash]"
        ),
        "{out}"
    );
    assert!(
        out.contains("00:02:00Z  TrafficWeightUpdated: Traffic weight updated from 0 to 20\n"),
        "a weight change keeps Argo's words alone: {out}"
    );
}

/// The story counts from when the Rollout ships (00:02), not from the scenario's start.
#[test]
fn the_story_counts_from_when_the_rollout_ships() {
    let (_, out) = demo(&[]);
    assert!(
        out.contains(
            "The canary is fine (0.8% errors) until 00:08, 6 minutes after it ships, then at 12%"
        ),
        "{out}"
    );
}

#[test]
fn the_healthy_rollout_is_promoted_through_every_step() {
    let (code, out) = demo(&["--scenario", "healthy"]);
    assert_eq!(code, 0, "{out}");
    for weight in [
        "checkout-stable 50, checkout-canary 50",
        "checkout-stable 20, checkout-canary 80",
        "checkout-stable 0, checkout-canary 100",
    ] {
        assert!(out.contains(weight), "{weight}: {out}");
    }
    assert!(
        out.contains("RolloutCompleted: Rollout completed update to revision 2"),
        "{out}"
    );
    assert!(
        out.trim_end()
            .ends_with("Outcome: promoted after 24m: the new revision is stable"),
        "{out}"
    );
}

#[test]
fn json_output_is_one_object_per_line_ending_with_the_rollout_status() {
    let (code, out) = demo(&["--output", "json"]);
    assert_eq!(code, 1);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stdout line is JSON"))
        .collect();
    let last = lines.last().expect("an outcome line");
    assert_eq!(last["type"], "outcome");
    assert_eq!(last["outcome"], "aborted");
    assert_eq!(last["status"]["phase"], "Degraded");
    assert_eq!(last["status"]["abort"], true);
    let failed = lines
        .iter()
        .filter(|l| l["type"] == "measurement" && l["measurement"]["phase"] == "Failed")
        .count();
    assert_eq!(failed, 2);
}

/// `canaryd demo | head`: once the reader has gone, the command stops with exit code 4, quietly, instead of
/// panicking on its next line (the reader here is gone before the first).
#[test]
fn a_reader_that_stops_reading_ends_the_demo_quietly() {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = CANARYD
        .command()
        .arg("demo")
        .stdout(writer)
        .output()
        .expect("the canaryd binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `--strategy bluegreen`: the same service as a blue-green Rollout; the degrading preview fails its
/// pre-promotion analysis and the active Service never leaves the old pods, where the healthy one is
/// switched to once the analysis has passed.
#[test]
fn the_blue_green_demo_aborts_the_degrading_preview_before_the_switch() {
    let (code, out) = demo(&["--strategy", "bluegreen"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("SwitchService: Switched selector for service 'checkout-preview'"),
        "{out}"
    );
    assert!(!out.contains("service 'checkout-active'"), "{out}");
    assert!(
        !out.contains("step "),
        "a blue-green Rollout has no steps: {out}"
    );
    assert!(
        out.trim_end().ends_with(
            "Outcome: aborted after 8m (metric success-rate): RolloutAborted: Rollout aborted update to \
             revision 2: Blue/green pre-promotion analysis phase error/failed: Metric \"success-rate\" \
             assessed Failed due to failed (2) > failureLimit (1)"
        ),
        "{out}"
    );

    let (code, out) = demo(&["--strategy", "bluegreen", "--scenario", "healthy"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("SwitchService: Switched selector for service 'checkout-active'"),
        "{out}"
    );
    assert!(
        out.trim_end()
            .ends_with("Outcome: promoted after 9m: the new revision is stable"),
        "{out}"
    );
}
