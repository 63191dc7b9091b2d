//! `canaryd validate` and `canaryd plan` on ApplicationSets end to end: the binary, the fixtures in
//! tests/fixtures/progressive (the incidents of issue 20 and their corrections) and the shipped example in
//! examples/progressive-sync (the incident the docs show, its cluster Secrets and ConfigMap), exit codes and
//! the exact lines users read.

use crate::CANARYD;

const F: &str = "tests/fixtures/progressive";

/// Runs `canaryd ARGS` from the repository root; returns (exit code, stdout lines).
fn canaryd(args: &[&str]) -> (i32, Vec<String>) {
    let ran = CANARYD.run(args);
    (
        ran.code.unwrap_or(-1),
        ran.stdout.lines().map(str::to_string).collect(),
    )
}

fn fixture(name: &str) -> String {
    format!("{F}/{name}")
}

/// The shipped example docs/progressive-sync.md runs.
const INCIDENT: &str = "examples/progressive-sync/incident.yaml";
const CLUSTERS: &str = "examples/progressive-sync/prod-clusters";
const FLAG_ON: &str = "examples/progressive-sync/argocd-cmd-params-cm.yaml";
const FLAG_OFF: &str = "tests/fixtures/progressive/argocd-cmd-params-off.yaml";

#[test]
fn the_unlabelled_env_incident_is_one_line_per_step_with_a_did_you_mean() {
    let file = INCIDENT.to_owned();
    let (code, lines) = canaryd(&[
        "validate",
        &file,
        "--clusters",
        CLUSTERS,
        "--argocd-config",
        FLAG_ON,
    ]);
    let at = |line: usize, rest: &str| format!("{file}:{line}: ApplicationSet/checkout: {rest}");
    assert_eq!(code, 1, "{lines:#?}");
    assert_eq!(
        lines,
        [
            at(
                35,
                "spec.strategy.rollingSync.steps[0].matchExpressions[0].key: no Application has the label \
                 \"env\" (did you mean \"environment\"?): step 1 matches no Application and completes at once"
            ),
            at(
                39,
                "spec.strategy.rollingSync.steps[1].matchExpressions[0].key: no Application has the label \
                 \"env\" (did you mean \"environment\"?): step 2 matches no Application and completes at once"
            ),
            at(
                43,
                "spec.strategy.rollingSync.steps[2].matchExpressions[0].key: no Application has the label \
                 \"env\" (did you mean \"environment\"?): NotIn is true for every Application without it, so \
                 this expression selects all of them"
            ),
        ]
    );
}

#[test]
fn plan_shows_the_incident_sending_all_four_prod_clusters_in_one_batch() {
    let file = INCIDENT.to_owned();
    let (code, lines) = canaryd(&[
        "plan",
        &file,
        "--clusters",
        CLUSTERS,
        "--argocd-config",
        FLAG_ON,
        "--max-batch",
        "1",
    ]);
    assert_eq!(code, 1, "validate fails, so plan does: {lines:#?}");
    assert_eq!(
        lines[..7],
        [
            "ApplicationSet/checkout: RollingSync, 4 Application(s)",
            "step 1: env In [dev]; maxUpdate unlimited",
            "  no Application: the step completes at once",
            "step 2: env In [staging]; maxUpdate unlimited",
            "  no Application: the step completes at once",
            "step 3: env NotIn [dev, staging]; maxUpdate unlimited",
            "  batch 1: checkout-prod-eu-1, checkout-prod-eu-2, checkout-prod-us-1, checkout-prod-us-2",
        ]
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some(
            format!(
                "{file}:42: ApplicationSet/checkout: spec.strategy.rollingSync.steps[2]: warning: batch 1 of \
                 step 3 syncs 4 Applications at once (more than --max-batch 1): checkout-prod-eu-1, \
                 checkout-prod-eu-2, checkout-prod-us-1, checkout-prod-us-2"
            )
            .as_str()
        )
    );
}

#[test]
fn the_corrected_region_by_region_strategy_is_valid_and_goes_one_cluster_at_a_time() {
    let file = fixture("region-by-region.yaml");
    let flags = ["--clusters", CLUSTERS, "--argocd-config", FLAG_ON];
    let (code, lines) = canaryd(&[&["validate", file.as_str()], &flags[..]].concat());
    assert_eq!((code, lines), (0, vec![]));
    let (code, lines) =
        canaryd(&[&["plan", file.as_str(), "--max-batch", "1"], &flags[..]].concat());
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(
        lines,
        [
            "ApplicationSet/checkout: RollingSync, 4 Application(s)",
            "step 1: environment In [prod] and region In [eu]; maxUpdate 1 (1 at a time)",
            "  batch 1: checkout-prod-eu-1",
            "  batch 2: checkout-prod-eu-2",
            "step 2: environment In [prod] and region In [us]; maxUpdate 1 (1 at a time)",
            "  batch 1: checkout-prod-us-1",
            "  batch 2: checkout-prod-us-2",
        ]
    );
}

#[test]
fn four_stages_with_go_template_names_take_prod_half_at_a_time() {
    let file = fixture("four-stages.yaml");
    let (code, lines) = canaryd(&["plan", &file, "--argocd-config", FLAG_ON]);
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(
        lines,
        [
            "ApplicationSet/guestbook: RollingSync, 4 Application(s)",
            "step 1: env In [qa]; maxUpdate unlimited",
            "  batch 1: qa-guestbook",
            "step 2: env In [staging]; maxUpdate unlimited",
            "  batch 1: staging-guestbook",
            "step 3: env In [prod]; maxUpdate 50% (1 at a time)",
            "  batch 1: prod-east-guestbook",
            "  batch 2: prod-west-guestbook",
        ]
    );
}

#[test]
fn plan_json_carries_the_steps_and_batches() {
    let file = fixture("four-stages.yaml");
    let (code, lines) = canaryd(&["plan", &file, "--argocd-config", FLAG_ON, "-o", "json"]);
    assert_eq!(code, 0);
    let json: serde_json::Value =
        serde_json::from_str(&lines.join("\n")).expect("one JSON document");
    assert_eq!(json["valid"], true);
    let step = &json["applicationSets"][0]["plan"]["steps"][2];
    assert_eq!(step["maxUpdate"], "50% (1 at a time)");
    assert_eq!(
        step["batches"],
        serde_json::json!([["prod-east-guestbook"], ["prod-west-guestbook"]])
    );
}

#[test]
fn a_controller_flag_that_is_off_is_an_error_and_the_plan_is_all_at_once() {
    let file = fixture("four-stages.yaml");
    let (code, lines) = canaryd(&["validate", &file, "--argocd-config", FLAG_OFF]);
    assert_eq!(code, 1);
    assert_eq!(
        lines,
        [format!(
            "{file}:40: ApplicationSet/guestbook: spec.strategy: progressive syncs are off in {FLAG_OFF}:8 \
             (applicationsetcontroller.enable.progressive.syncs is not \"true\"): Argo CD ignores the \
             strategy and syncs every Application at once"
        )]
    );
    let (code, lines) = canaryd(&["plan", &file, "--argocd-config", FLAG_OFF]);
    assert_eq!(code, 1);
    assert_eq!(
        lines[..3],
        [
            "ApplicationSet/guestbook: AllAtOnce, 4 Application(s)".to_string(),
            format!(
                "  progressive syncs are off in {FLAG_OFF}:8: the strategy is ignored and every Application \
                 syncs at once"
            ),
            "  all at once: qa-guestbook, staging-guestbook, prod-east-guestbook, prod-west-guestbook"
                .to_string(),
        ]
    );
}

#[test]
fn without_the_controller_config_the_flag_is_a_warning_only() {
    let file = fixture("four-stages.yaml");
    let (code, lines) = canaryd(&["validate", &file]);
    assert_eq!(code, 0);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].starts_with(&format!(
            "{file}:40: ApplicationSet/guestbook: spec.strategy: warning: RollingSync takes effect only when"
        )),
        "{lines:#?}"
    );
}

#[test]
fn a_git_matrix_warns_about_the_git_half_and_checks_the_list_half() {
    let file = fixture("git-matrix.yaml");
    let (code, lines) = canaryd(&["plan", &file, "--argocd-config", FLAG_ON]);
    assert_eq!(code, 1, "{lines:#?}");
    let at = |line: usize, rest: &str| format!("{file}:{line}: ApplicationSet/platform: {rest}");
    assert_eq!(
        lines,
        [
            "ApplicationSet/platform: RollingSync, 2 Application(s) (some generated from generators canaryd \
             did not evaluate)"
                .to_string(),
            "step 1: env In [staging]; maxUpdate unlimited".to_string(),
            "  batch 1: {{path.basename}}-staging (from a generator canaryd did not evaluate)".to_string(),
            "step 2: env In [production]; maxUpdate unlimited".to_string(),
            "  no Application: the step completes at once".to_string(),
            "never synced (no step selects them): {{path.basename}}-prod (from a generator canaryd did not \
             evaluate)"
                .to_string(),
            at(
                12,
                "spec.generators[0].matrix.generators[0].git: warning: the git generator is not evaluated by \
                 canaryd (it reads list, clusters, matrix, merge): the Applications it generates are checked \
                 only for what the template says without its parameters"
            ),
            at(
                40,
                "spec.strategy.rollingSync.steps: no step selects 1 Application(s): \"{{path.basename}}-prod\": \
                 RollingSync never syncs them (their step is -1) until someone syncs them by hand"
            ),
            at(
                45,
                "spec.strategy.rollingSync.steps[1]: step 2 matches no Application: Argo CD counts it as \
                 complete at once and goes on"
            ),
        ]
    );
}

#[test]
fn the_traps_visible_without_an_inventory_are_each_one_line() {
    let file = fixture("without-inventory.yaml");
    let (code, lines) = canaryd(&["validate", &file, "--argocd-config", FLAG_ON]);
    assert_eq!(code, 1);
    let paths: Vec<&str> = lines
        .iter()
        .map(|l| l.split(": ").nth(2).unwrap_or_default())
        .collect();
    assert_eq!(
        paths,
        [
            "spec.generators[0].clusters",
            "spec.template.spec.syncPolicy.automated",
            "spec.strategy.rollingSync.steps[0].matchExpressions[0].key",
            "spec.strategy.rollingSync.steps[0].matchExpressions[0].operator",
            "spec.strategy.rollingSync.steps[0].maxUpdate",
            "spec.strategy.rollingSync.steps[1].maxUpdates",
            "spec.strategy.rollingSync.steps[2].maxUpdate",
            "spec.strategy.rollingSync.steps",
            "spec.strategy.deletionOrder",
        ],
        "{lines:#?}"
    );
    let has = |needle: &str| lines.iter().any(|l| l.contains(needle));
    assert!(has(
        "\"Exists\" is not supported by RollingSync (Supported Operators are 'In' and 'NotIn')"
    ));
    assert!(has("every Application without it passes"));
    assert!(has(
        "Argo CD ignores it and syncs one Application of this step at a time"
    ));
    assert!(has("warning: 0 holds this step"));
    assert!(has("warning: RollingSync turns automated sync off"));
    assert!(has(
        "unknown field \"maxUpdates\" (did you mean \"maxUpdate\"?)"
    ));
    assert!(has(
        "ApplicationSet/frozen: spec.strategy.rollingSync.steps: RollingSync without steps"
    ));
    assert!(has(
        "ApplicationSet/reverse-alone: spec.strategy.deletionOrder: Reverse deletion takes effect only"
    ));
}

#[test]
fn a_clusters_path_that_does_not_exist_is_bad_input() {
    let (code, _) = canaryd(&[
        "validate",
        INCIDENT,
        "--clusters",
        "tests/fixtures/progressive/no-such-dir",
    ]);
    assert_eq!(code, 2);
}

const EXAMPLE: &str = "charts/canaryd/examples/progressive-sync";

#[test]
fn the_example_application_set_is_valid_and_rolls_out_one_prod_cluster_at_a_time() {
    let appset = format!("{EXAMPLE}/applicationset.yaml");
    let clusters = format!("{EXAMPLE}/clusters");
    let (code, lines) = canaryd(&[
        "validate",
        &appset,
        "--clusters",
        &clusters,
        "--argocd-config",
        FLAG_ON,
    ]);
    assert_eq!((code, lines), (0, vec![]));
    let (code, lines) = canaryd(&[
        "plan",
        &appset,
        "--clusters",
        &clusters,
        "--argocd-config",
        FLAG_ON,
        "--max-batch",
        "1",
    ]);
    assert_eq!(code, 0, "{lines:#?}");
    assert_eq!(
        lines,
        [
            "ApplicationSet/checkout: RollingSync, 4 Application(s)",
            "step 1: environment In [staging]; maxUpdate unlimited",
            "  batch 1: checkout-staging-eu",
            "step 2: environment In [prod] and region In [eu]; maxUpdate 1 (1 at a time)",
            "  batch 1: checkout-prod-eu-1",
            "  batch 2: checkout-prod-eu-2",
            "step 3: environment In [prod] and region In [us]; maxUpdate 1 (1 at a time)",
            "  batch 1: checkout-prod-us-1",
        ]
    );
}

#[test]
fn the_example_app_chart_ships_the_library_gate_unchanged() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect("readable");
    assert_eq!(
        read(&format!("{EXAMPLE}/app/files/progressive-sync-gate.yaml")),
        read("analysis-templates/progressive-sync-gate.yaml"),
        "copy analysis-templates/progressive-sync-gate.yaml into the example chart's files/"
    );
}
