//! `canaryd validate` on Rollouts, end to end: the binary, real files, exit codes and the exact lines.

use crate::CANARYD;

/// Runs `canaryd validate PATH` from the repository root; returns (exit code, stdout lines).
fn validate(path: &str) -> (i32, Vec<String>) {
    let ran = CANARYD.run(&["validate", path]);
    (
        ran.code.unwrap_or(-1),
        ran.stdout.lines().map(str::to_string).collect(),
    )
}

#[test]
fn a_rollout_with_its_templates_and_args_supplied_is_valid() {
    assert_eq!(
        validate("tests/fixtures/validate/rollout/valid.yaml"),
        (0, vec![])
    );
}

#[test]
fn rollout_mistakes_are_each_named_on_their_line() {
    let (code, lines) = validate("tests/fixtures/validate/rollout/mistakes.yaml");
    let f = "tests/fixtures/validate/rollout/mistakes.yaml";
    let steps = "Rollout/web: spec.strategy.canary.steps";
    assert_eq!(code, 1, "{lines:#?}");
    assert_eq!(
        lines,
        [
            format!(
                "{f}:30: {steps}[0].setWeight: Invalid value: 120: SetWeight must be between 0 and 100"
            ),
            format!(
                "{f}:31: {steps}[1]: Step must have only one action set, found setWeight, pause"
            ),
            format!(
                "{f}:33: {steps}[2].pause.duration: invalid duration \"5 minutes\": unknown unit \" minutes\" (expected ns, us, ms, s, m or h)"
            ),
            format!("{f}:34: {steps}[3].setHeaderRoute: this step is not supported by canaryd yet"),
            format!(
                "{f}:35: {steps}[4].analysis.args: args.service was not resolved: the templates require it"
            ),
            format!(
                "{f}:36: {steps}[4].analysis.templates: metric \"rate\" runs indefinitely (an interval and no count): a step analysis must end"
            ),
            format!(
                "{f}:40: {steps}[5].analysis.templates[0]: warning: AnalysisTemplate \"elsewhere\" is not among the given files; it must exist in the cluster"
            ),
            format!(
                "{f}:54: Rollout/typo: spec.strategy.canary.canarySevice: unknown field \"canarySevice\", did you mean \"canaryService\"?"
            ),
        ]
    );
}
