//! `canaryd eval` as users and scripts run it: the built binary, its stdout, stderr and exit codes
//! (docs/architecture.md, "Exit codes": 0 true or a phase — Error included, 1 false, 2 bad input, 4 evaluation error of --condition).

use crate::CANARYD;
use canaryd_testkit::cli::Ran as Run;

fn eval(args: &[&str]) -> Run {
    CANARYD.run(&[&["eval"], args].concat())
}

fn json(run: &Run) -> serde_json::Value {
    match serde_json::from_str(&run.stdout) {
        Ok(v) => v,
        Err(e) => panic!("stdout is not one JSON document ({e}): {:?}", run.stdout),
    }
}

#[test]
fn a_true_condition_prints_true_and_exits_0() {
    let r = eval(&["--condition", "result[0] >= 0.95", "--result", "[0.97]"]);
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), "true\n"));
}

#[test]
fn a_false_condition_prints_false_and_exits_1() {
    let r = eval(&["--condition", "result[0] >= 0.95", "--result", "[NaN]"]);
    assert_eq!((r.code, r.stdout.as_str()), (Some(1), "false\n"));
}

#[test]
fn an_evaluation_error_is_printed_in_the_users_terms_and_exits_4() {
    let r = eval(&["--condition", "result[0] >= 0.95", "--result", "[]"]);
    assert_eq!(r.code, Some(4));
    assert_eq!(r.stdout, "");
    assert!(
        r.stderr.contains(
            "result is an array of 0 numbers; result[0] is out of range — guard with len(result) > 0"
        ),
        "{}",
        r.stderr
    );
}

#[test]
fn a_condition_that_does_not_compile_is_bad_input_and_exits_2() {
    let r = eval(&["--condition", "results[0] >= 0.95", "--result", "[1]"]);
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr.contains(
            "--condition: column 1: unknown name `results` (the value is called `result`)"
        ),
        "{}",
        r.stderr
    );
}

#[test]
fn a_result_that_is_not_json_is_bad_input_and_exits_2() {
    let r = eval(&["--condition", "true", "--result", "{oops"]);
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr.contains("--result: not valid JSON"),
        "{}",
        r.stderr
    );
}

#[test]
fn success_and_failure_print_the_measurement_phase_and_exit_0() {
    let both = [
        "--success",
        "result[0] >= 0.9",
        "--failure",
        "result[0] < 0.5",
    ];
    for (value, phase) in [
        ("[0.95]", "Successful\n"),
        ("[0.7]", "Inconclusive\n"),
        ("[0.1]", "Failed\n"),
    ] {
        let r = eval(&[&both[..], &["--result", value]].concat());
        assert_eq!((r.code, r.stdout.as_str()), (Some(0), phase), "{value}");
    }
    let only_success = eval(&["--success", "result > 1", "--result", "0"]);
    assert_eq!(only_success.stdout, "Failed\n");
    let neither = eval(&["--result", "null"]);
    assert_eq!(neither.stdout, "Successful\n");
}

#[test]
fn a_phase_that_is_an_error_is_printed_with_its_reason_and_exits_0() {
    for (success, value, reason) in [
        ("result[0] >= 0.95", "null", "result is nil"),
        ("result[0] >= 0.95", "[]", "result[0] is out of range"),
        (
            "result == 10",
            "[10]",
            "cannot compare an array of 1 number with the number 10",
        ),
    ] {
        let r = eval(&["--success", success, "--result", value]);
        assert_eq!(r.code, Some(0), "{success} with {value}: {}", r.stderr);
        assert!(
            r.stdout.starts_with("Error: ") && r.stdout.contains(reason),
            "{success} with {value}: {:?}",
            r.stdout
        );
    }
    let r = eval(&[
        "--success",
        "true",
        "--failure",
        "result > 1",
        "--result",
        "[1]",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, Some(0));
    let out = json(&r);
    assert_eq!(out["phase"], "Error");
    let message = out["message"].as_str().unwrap_or_default();
    assert!(message.contains("result is an array of 1 number"), "{out}");
}

#[test]
fn a_phase_condition_that_does_not_compile_is_an_error_phase_naming_the_flag_and_exits_0() {
    let r = eval(&[
        "--success",
        "results[0] >= 0.95",
        "--failure",
        "result[0] < 0.5",
        "--result",
        "[1]",
    ]);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (
            Some(0),
            "Error: --success: column 1: unknown name `results` (the value is called `result`)\n"
        )
    );
    let r = eval(&[
        "--success",
        "true",
        "--failure",
        "result >",
        "--result",
        "1",
    ]);
    assert_eq!(r.code, Some(0));
    assert!(
        r.stdout.starts_with("Error: --failure: column 9"),
        "{:?}",
        r.stdout
    );
}

#[test]
fn a_phase_with_a_result_that_is_not_json_is_still_bad_input() {
    let r = eval(&["--success", "true", "--result", "{oops"]);
    assert_eq!(r.code, Some(2));
    assert_eq!(r.stdout, "");
}

#[test]
fn values_starting_with_a_minus_are_values_not_flags() {
    for (condition, value) in [
        ("isInf(result) && result < 0", "-Infinity"),
        ("result < 0", "-1"),
        ("-result > 0", "-1"),
        ("result[0] < 0", "[-1]"),
    ] {
        let r = eval(&["--condition", condition, "--result", value]);
        assert_eq!(
            (r.code, r.stdout.as_str()),
            (Some(0), "true\n"),
            "{condition} with {value}: {}",
            r.stderr
        );
    }
    let r = eval(&[
        "--success",
        "-result > 0",
        "--failure",
        "-result < 0",
        "--result",
        "-2",
    ]);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (Some(0), "Successful\n"),
        "{}",
        r.stderr
    );
}

#[test]
fn json_output_puts_only_one_json_object_on_stdout() {
    let r = eval(&[
        "--condition",
        "result == 'It worked!'",
        "--result",
        "\"It worked!\"",
        "--output",
        "json",
    ]);
    assert_eq!(r.code, Some(0));
    assert_eq!(json(&r), serde_json::json!({"result": true}));

    let r = eval(&[
        "--success",
        "isNaN(result[0])",
        "--result",
        "[NaN]",
        "-o",
        "json",
    ]);
    assert_eq!(json(&r), serde_json::json!({"phase": "Successful"}));

    let r = eval(&[
        "--condition",
        "result > 1",
        "--result",
        "[1, 2]",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, Some(4));
    let message = json(&r)["error"].as_str().map(str::to_string);
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("all(result, # > 1)")),
        "{message:?}"
    );
}

#[test]
fn bare_nan_and_infinities_are_accepted_in_the_result() {
    let r = eval(&[
        "--condition",
        "isInf(result[1]) && result[2] < 0 && isNaN(result[0])",
        "--result",
        "[NaN, Infinity, -Infinity]",
    ]);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (Some(0), "true\n"),
        "{}",
        r.stderr
    );
}

#[test]
fn condition_and_success_together_are_a_usage_error() {
    let r = eval(&["--condition", "true", "--success", "true", "--result", "1"]);
    assert_eq!(r.code, Some(2));
}
