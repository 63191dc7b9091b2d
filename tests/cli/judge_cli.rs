//! `canaryd judge`: output shapes, exit codes and input errors naming file, line and column.

use std::path::PathBuf;
use std::process::Output;

use crate::CANARYD;

fn canaryd(args: &[&str]) -> Output {
    CANARYD
        .command()
        .args(args)
        .output()
        .expect("the canaryd binary runs")
}

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path: PathBuf = dir.path().join(name);
    std::fs::write(&path, text).expect("temp file written");
    path.to_string_lossy().into_owned()
}

const HEADER: &str = "canary_errors,canary_requests,baseline_errors,baseline_requests\n";

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn error_rate_prints_one_json_line_per_look_and_exits_with_the_last_verdict() {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = file(
        &dir,
        "looks.csv",
        &format!(
            "{HEADER}4,1000,3,1000\n11,2000,9,2000\n25,3000,12,3000\n41,4000,16,4000\n58,5000,20,5000\n"
        ),
    );
    let o = canaryd(&["judge", "error-rate", "--csv", &csv, "--output", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["look"], 1);
    assert_eq!(lines[0]["verdict"], "inconclusive");
    assert_eq!(lines[3]["verdict"], "inconclusive");
    assert_eq!(lines[4]["look"], 5);
    assert_eq!(lines[4]["verdict"], "fail");
    assert_eq!(lines[4]["canaryErrors"], 58);
    assert_eq!(lines[4]["baselineRate"], 0.004);
    assert!(lines[4]["ratioLower"].as_f64().is_some_and(|l| l > 1.1));
}

#[test]
fn error_rate_table_is_the_default_and_inconclusive_exits_three() {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = file(&dir, "looks.csv", &format!("{HEADER}1,100,1,100\n"));
    let o = canaryd(&["judge", "error-rate", "--csv", &csv]);
    assert_eq!(o.status.code(), Some(3));
    let out = stdout(&o);
    assert!(out.starts_with(" look  verdict"), "{out}");
    assert!(
        out.contains("inconclusive") && out.contains("1/100"),
        "{out}"
    );
}

#[test]
fn error_rate_passes_with_exit_zero_when_the_canary_is_clearly_within_the_margin() {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = file(
        &dir,
        "looks.csv",
        &format!("{HEADER}100,100000,200,100000\n"),
    );
    let o = canaryd(&["judge", "error-rate", "--csv", &csv]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn a_non_numeric_cell_names_file_line_and_column() {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = file(
        &dir,
        "bad.csv",
        &format!("{HEADER}1,1000,2,1000\n3,2000,x,2000\n"),
    );
    let o = canaryd(&["judge", "error-rate", "--csv", &csv]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("bad.csv:3:3: baseline_errors:"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn a_wrong_header_an_unreadable_file_and_a_counter_reset_are_bad_input() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wrong = file(&dir, "wrong.csv", "errors,requests\n1,2\n");
    let o = canaryd(&["judge", "error-rate", "--csv", &wrong]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("wrong.csv:1: expected the header"),
        "{}",
        stderr(&o)
    );

    let missing = dir
        .path()
        .join("missing.csv")
        .to_string_lossy()
        .into_owned();
    let o = canaryd(&["judge", "error-rate", "--csv", &missing]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("missing.csv: cannot read"),
        "{}",
        stderr(&o)
    );

    let reset = file(
        &dir,
        "reset.csv",
        &format!("{HEADER}5,1000,5,1000\n\n6,900,5,2000\n"),
    );
    let o = canaryd(&["judge", "error-rate", "--csv", &reset]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("reset.csv:4: look 2: canary_requests went down"),
        "{}",
        stderr(&o)
    );

    let empty = file(&dir, "empty.csv", HEADER);
    let o = canaryd(&["judge", "error-rate", "--csv", &empty]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no looks"), "{}", stderr(&o));
}

fn latencies(median: f64, shift: f64) -> String {
    // Deterministic spread around the median: quantiles of a lognormal-ish ladder.
    let mut text = String::from("# latency in ms\n");
    for i in 0..100 {
        let v = median * (0.6 + 0.8 * f64::from(i) / 99.0) + shift;
        text.push_str(&format!("{v}\n"));
        if i % 25 == 0 {
            text.push('\n');
        }
    }
    text
}

#[test]
fn distribution_prints_the_documented_json_fields_with_short_o_and_fails_a_slower_canary() {
    let dir = tempfile::tempdir().expect("temp dir");
    let canary = file(
        &dir,
        "canary.txt",
        &format!("{}NaN\n", latencies(100.0, 30.0)),
    );
    let baseline = file(&dir, "baseline.txt", &latencies(100.0, 0.0));
    let o = canaryd(&[
        "judge",
        "distribution",
        "--canary",
        &canary,
        "--baseline",
        &baseline,
        "-o",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&o)).expect("stdout is one JSON document");
    assert_eq!(json["verdict"], "fail");
    assert_eq!(json["canarySamples"], 100);
    assert_eq!(json["shift"], 30.0);
    for key in [
        "canaryMedian",
        "baselineMedian",
        "shiftLower",
        "shiftUpper",
        "pValue",
        "u",
        "baselineSamples",
    ] {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
    assert!(
        stderr(&o).contains("dropped 1 canary and 0 baseline samples"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn distribution_passes_equal_samples_and_is_inconclusive_below_min_samples() {
    let dir = tempfile::tempdir().expect("temp dir");
    let same = file(&dir, "same.txt", &latencies(100.0, 0.0));
    let o = canaryd(&[
        "judge",
        "distribution",
        "--canary",
        &same,
        "--baseline",
        &same,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).starts_with("verdict:          pass"),
        "{}",
        stdout(&o)
    );
    let o = canaryd(&[
        "judge",
        "distribution",
        "--canary",
        &same,
        "--baseline",
        &same,
        "--min-samples",
        "101",
    ]);
    assert_eq!(o.status.code(), Some(3));
}

#[test]
fn a_bad_sample_line_names_the_file_and_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = file(&dir, "good.txt", &latencies(100.0, 0.0));
    let bad = file(&dir, "bad.txt", "1.5\n# fine\n\n2,5\n");
    let o = canaryd(&[
        "judge",
        "distribution",
        "--canary",
        &good,
        "--baseline",
        &bad,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("bad.txt:4: expected a number, found `2,5`"),
        "{}",
        stderr(&o)
    );
    let o = canaryd(&[
        "judge",
        "distribution",
        "--canary",
        &good,
        "--baseline",
        &good,
        "--direction",
        "up",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn error_rate_without_flags_decides_as_the_shipped_templates() {
    // 150 canary errors against 90 on equal traffic: enough errors for the templates' planned look, which
    // fails it; the focused mixture alone, at its fifth of α, would not yet.
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = file(
        &dir,
        "looks.csv",
        "canary_errors,canary_requests,baseline_errors,baseline_requests\n150,10000,90,10000\n",
    );
    let defaults = canaryd(&["judge", "error-rate", "--csv", &csv]);
    let templates = canaryd(&[
        "judge",
        "error-rate",
        "--csv",
        &csv,
        "--max-relative-increase",
        "0.10",
        "--max-absolute-increase",
        "0",
        "--confidence",
        "0.95",
        "--min-requests",
        "500",
        "--mixture",
        "focused",
        "--design",
        "planned",
    ]);
    assert_eq!(defaults.status.code(), Some(1), "{}", stderr(&defaults));
    assert_eq!(stdout(&defaults), stdout(&templates));
    let bad = canaryd(&["judge", "error-rate", "--csv", &csv, "--mixture", "narrow"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad = canaryd(&["judge", "error-rate", "--csv", &csv, "--design", "fixed"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--design"), "{}", stderr(&bad));
}
