//! `canaryd demo`, the README's first command: it must end with the decision and its reason.

#[path = "support/cli.rs"]
mod cli;

fn demo(args: &[&str]) -> (i32, String) {
    let ran = cli::run(&[&["demo"], args].concat());
    (ran.code.unwrap_or(-1), ran.stdout)
}

#[test]
fn the_degrading_canary_is_rolled_back_with_the_reason() {
    let (code, out) = demo(&[]);
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
fn the_healthy_canary_is_promoted() {
    let (code, out) = demo(&["--scenario", "healthy"]);
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
fn json_output_is_the_final_status_alone() {
    let (code, out) = demo(&["--output", "json"]);
    assert_eq!(code, 1);
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
