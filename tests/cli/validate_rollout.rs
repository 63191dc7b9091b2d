//! `canaryd validate` on Rollouts, end to end: the binary, real files, exit codes and the exact lines.

use crate::CANARYD;

/// What a warning about something canaryd's Rollout controller does not run adds without `--rollouts`.
const LEFT_TO_ARGO: &str =
    "Argo Rollouts progresses this Rollout (canaryd runs its analyses; with --rollouts, an error)";

/// Runs `canaryd validate PATH` from the repository root; returns (exit code, stdout lines).
fn validate(path: &str) -> (i32, Vec<String>) {
    validate_with(&[path])
}

/// Runs `canaryd validate ARGS...` from the repository root; returns (exit code, stdout lines).
fn validate_with(args: &[&str]) -> (i32, Vec<String>) {
    let ran = CANARYD.run(&[&["validate"], args].concat());
    (
        ran.code.unwrap_or(-1),
        ran.stdout.lines().map(str::to_string).collect(),
    )
}

#[test]
fn an_analysis_field_outside_its_analysis_is_pointed_to_where_it_belongs() {
    let f = "tests/fixtures/validate/rollout/misplaced-args.yaml";
    let (code, lines) = validate(f);
    assert_eq!(code, 1, "{lines:#?}");
    assert!(
        lines.contains(&format!(
            "{f}:32: Rollout/checkout: spec.strategy.canary.args: unknown field \"args\", did you mean to \
             indent it under an analysis (spec.strategy.canary.steps[].analysis or \
             spec.strategy.canary.analysis)?"
        )),
        "{lines:#?}"
    );
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
    // Argo names the canary strategy's fields under `spec.strategy`; each is on the line where it is written.
    let argo_steps = "Rollout/web: spec.strategy.steps";
    let steps = "Rollout/web: spec.strategy.canary.steps";
    assert_eq!(code, 1, "{lines:#?}");
    assert_eq!(
        lines,
        [
            format!(
                "{f}:30: {argo_steps}[0].setWeight: Invalid value: 120: SetWeight needs to be between 0 and 100"
            ),
            format!(
                "{f}:31: {argo_steps}[1]: Invalid value: \"step.Experiment: false step.Pause: true step.SetWeight: true step.Analysis: false\": Step must have one of the following set: experiment, setWeight, setCanaryScale, plugin or pause"
            ),
            format!(
                "{f}:33: {argo_steps}[2].pause.duration: Invalid value: -1: Duration needs to be greater than 0"
            ),
            format!(
                "{f}:34: {argo_steps}[3].setHeaderRoute: Invalid value: {{\"name\":\"h\"}}: SetHeaderRoute requires TrafficRouting, supports Istio and ALB and Apisix"
            ),
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

/// Argo's ValidateRolloutReferencedResources on what the files hold: the Services a Rollout names (Argo's
/// ValidateService), its VirtualService's routes (ValidateVirtualService), its stable Ingress's backend
/// (validateNginxIngress) and its HTTPRoute's backends, as the daemon's InvalidSpec and rehearse find them;
/// a template name one slip from a given template gets a did-you-mean.
#[test]
fn the_services_router_objects_and_templates_among_the_files_are_checked_as_a_run_would() {
    let f = "tests/fixtures/validate/rollout/references.yaml";
    let (code, lines) = validate(f);
    let routing = "spec.strategy.canary.trafficRouting";
    assert_eq!(code, 1, "{lines:#?}");
    assert_eq!(
        lines,
        [
            format!(
                "{f}:81: Rollout/istio: spec.strategy.canary.stableService: Invalid value: \"web-stable\": Service \"web-stable\" has unmatch label \"tier\" in rollout"
            ),
            format!(
                "{f}:85: Rollout/istio: {routing}.istio.virtualService.name: Invalid value: \"web-vsvc\": HTTP Route 'primary' is not found in the defined Virtual Service."
            ),
            format!(
                "{f}:91: Rollout/istio: spec.strategy.canary.steps[1].analysis.templates[0]: warning: AnalysisTemplate \"succes-rate\" is not among the given files (did you mean \"success-rate\"?); it must exist in the cluster"
            ),
            format!(
                "{f}:109: Rollout/nginx: {routing}.nginx.stableIngress: Invalid value: \"web\": ingress `web` has no rules using service web-stable backend"
            ),
            format!(
                "{f}:125: Rollout/gateway: spec.strategy.canary.canaryService: Invalid value: \"web-canry\": service \"web-canry\" not found"
            ),
            format!(
                "{f}:129: Rollout/gateway: {routing}.plugins.argoproj-labs/gatewayAPI: Invalid value: \"web\": backendRef was not found in httpRoute"
            ),
        ]
    );
}

/// Argo's ALB router writes header routes, so Argo's example with an exact match is valid with or without
/// `--rollouts`; what Argo's validation refuses with ALB (a prefix or regex match, a match without a value, a
/// mirror route) gets Argo's messages on the step's lines.
#[test]
fn alb_header_routes_are_accepted_and_refused_as_argo_validates_them() {
    let f = "tests/fixtures/validate/rollout/alb-header-routes.yaml";
    let at = "Rollout/mistakes: spec.strategy.steps";
    let alb_exact = "SetHeaderRoute match value invalid. ALB supports 'exact' value only";
    let expected = [
        format!(
            "{f}:72: {at}[0].setHeaderRoute.match[0]: Invalid value: {{\"prefix\":\"Mozilla\"}}: {alb_exact}"
        ),
        format!(
            "{f}:75: {at}[0].setHeaderRoute.match[1]: Invalid value: {{\"regex\":\"Mozilla(.*)\"}}: {alb_exact}"
        ),
        format!(
            "{f}:78: {at}[0].setHeaderRoute.match[2]: Invalid value: null: StringMatch value missed, match value must have one of the following: exact, regex, prefix"
        ),
        format!(
            "{f}:79: {at}[1].setMirrorRoute: Invalid value: {{\"name\":\"mirror-route\",\"match\":[{{\"method\":{{\"exact\":\"GET\"}}}}]}}: SetMirrorRoute requires TrafficRouting, supports Istio and Plugins"
        ),
    ];
    for args in [vec![f], vec!["--rollouts", f]] {
        let (code, lines) = validate_with(&args);
        assert_eq!(code, 1, "{lines:#?}");
        assert_eq!(lines, expected, "{args:?}");
    }
}

/// Without `--rollouts` canaryd runs a Rollout's analyses while Argo Rollouts progresses it, so an Ambassador
/// router or an experiment step is a warning; with it, canaryd would refuse the Rollout. A blue-green
/// `antiAffinity` is run, so nothing. Services named while the files hold none are warnings either way: they
/// may be in the cluster.
#[test]
fn what_canaryds_controller_does_not_run_is_an_error_only_with_rollouts() {
    let f = "tests/fixtures/validate/rollout/unsupported.yaml";
    let canary = "Rollout/ambassador: spec.strategy.canary";
    let lines = |suffix: &str| {
        vec![
            format!(
                "{f}:12: Rollout/blue-green: spec.strategy.blueGreen.activeService: warning: Service \"web-active\" is not among the given files; it must exist in the cluster"
            ),
            format!(
                "{f}:27: {canary}.canaryService: warning: Service \"web-canary\" is not among the given files; it must exist in the cluster"
            ),
            format!(
                "{f}:28: {canary}.stableService: warning: Service \"web-stable\" is not among the given files; it must exist in the cluster"
            ),
            format!(
                "{f}:30: {canary}.trafficRouting.ambassador: {}Forbidden: not supported by canaryd: it drives Istio, NGINX Ingress, ALB, SMI, Traefik and the Gateway API plugin{suffix}",
                if suffix.is_empty() { "" } else { "warning: " }
            ),
            format!(
                "{f}:35: {canary}.steps[1].experiment: {}Forbidden: this step is not supported by canaryd yet{suffix}",
                if suffix.is_empty() { "" } else { "warning: " }
            ),
        ]
    };
    assert_eq!(validate(f), (0, lines(&format!("; {LEFT_TO_ARGO}"))));
    assert_eq!(validate_with(&["--rollouts", f]), (1, lines("")));
}

/// A chart's template is not YAML until Helm renders it: a file with Go-template actions (`{{ include ...}}`,
/// `{{- range ...}}`, `{{ .Values.x }}`) is skipped with a note rather than reported as broken YAML, while a
/// manifest beside it holding only Argo's `{{ args.x }}` placeholders is still checked.
#[test]
fn a_helm_template_is_skipped_with_a_note_and_argo_placeholders_are_still_validated() {
    let dir = "tests/fixtures/validate/rollout/chart/templates";
    let ran = CANARYD.run(&["validate", dir]);
    assert_eq!(ran.code, Some(0), "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.stdout, "");
    assert_eq!(
        ran.stderr.lines().collect::<Vec<_>>(),
        [
            format!(
                "{dir}/rollout.yaml: skipped: Helm template; render it with `helm template` and validate the output"
            )
            .as_str(),
            "1 object(s) in 2 file(s): 0 error(s), 0 warning(s)",
        ]
    );
}
