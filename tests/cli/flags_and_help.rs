//! Flags in the order users type them, the same `-o` everywhere, and help that names what canaryd reads:
//! the command line as a new user meets it (each test is one of the rough edges found by following the
//! README literally).

use crate::CANARYD;

const PROGRESSIVE: &str = "tests/fixtures/progressive";
const CLUSTERS: &str = "examples/progressive-sync/prod-clusters";

fn stdout_of(args: &[&str]) -> (i32, String) {
    let ran = CANARYD.run(args);
    (ran.code.unwrap_or(-1), ran.stdout)
}

/// `--clusters DIR FILE`: the flag takes one value, so the positional file after it is the file to check
/// (it used to be read as a second cluster folder, leaving `<APPSET>` "not provided").
#[test]
fn clusters_takes_one_value_so_the_file_after_it_is_the_positional_argument() {
    let appset = format!("{PROGRESSIVE}/region-by-region.yaml");
    let (code, out) = stdout_of(&["plan", "--clusters", CLUSTERS, &appset]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("ApplicationSet/checkout: RollingSync, 4 Application(s)\n"),
        "{out}"
    );
    let ran = CANARYD.run(&["validate", "--clusters", CLUSTERS, &appset]);
    assert_ne!(ran.code, Some(2), "{}", ran.stderr);
}

/// Several folders are given by repeating the flag.
#[test]
fn clusters_is_repeatable() {
    let eu = format!("{CLUSTERS}/prod-eu-1.yaml");
    let us = format!("{CLUSTERS}/prod-us-1.yaml");
    let appset = format!("{PROGRESSIVE}/region-by-region.yaml");
    let (code, out) = stdout_of(&["plan", "--clusters", &eu, "--clusters", &us, &appset]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("ApplicationSet/checkout: RollingSync, 2 Application(s)\n"),
        "{out}"
    );
}

/// Without `--clusters` the clusters generator is not evaluated: plan must not claim a step "completes at
/// once" when it cannot know what the step selects.
#[test]
fn plan_without_an_inventory_says_what_a_step_syncs_is_not_known() {
    let (code, out) = stdout_of(&["plan", &format!("{PROGRESSIVE}/region-by-region.yaml")]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("completes at once"), "{out}");
    assert!(
        out.contains("  no Application known: what this step syncs depends on values canaryd did not evaluate"),
        "{out}"
    );
    assert!(
        out.contains("give the cluster Secrets with --clusters"),
        "{out}"
    );
}

/// Every `--output` flag says what each format prints.
#[test]
fn every_output_flag_is_described() {
    for command in [
        &["judge", "error-rate"][..],
        &["judge", "distribution"],
        &["demo"],
        &["analyze"],
        &["rehearse"],
        &["validate"],
        &["plan"],
        &["eval"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let (_, help) = stdout_of(&args);
        let described = help
            .split("-o, --output <OUTPUT>")
            .nth(1)
            .is_some_and(|rest| rest.trim_start().starts_with('`'));
        assert!(described, "{command:?}:\n{help}");
    }
}

/// The help names Rollouts and ApplicationSets where canaryd reads them.
#[test]
fn help_names_rollouts_where_canaryd_reads_them() {
    let (_, top) = stdout_of(&["--help"]);
    assert!(top.contains("Rollout"), "{top}");
    let (_, run) = stdout_of(&["run", "--help"]);
    assert!(
        run.lines().next().is_some_and(|l| l.contains("Rollouts")),
        "{run}"
    );
    let (_, validate) = stdout_of(&["validate", "--help"]);
    let first = validate.lines().next().unwrap_or_default();
    assert!(
        first.contains("Rollout") && first.contains("ApplicationSet"),
        "{validate}"
    );
}

/// `analyze` without the args a template needs names them all, with the flag that gives them.
#[test]
fn analyze_names_every_missing_arg_and_the_flag_that_gives_it() {
    let err = CANARYD.refused(&["analyze", "-f", "analysis-templates/success-rate.yaml"]);
    assert!(
        err.contains(
            "args \"service\", \"namespace\" have no value: give them with --arg service=VALUE --arg namespace=VALUE"
        ),
        "{err}"
    );
}
