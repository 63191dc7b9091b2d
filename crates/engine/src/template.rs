//! The static checks of an analysis spec (AnalysisTemplate, ClusterAnalysisTemplate or AnalysisRun): Argo's
//! own validation rules plus what canaryd needs to run it (a supported provider, compilable conditions,
//! declared args). Each problem is a [`Finding`] with the field path where it is; the caller adds file and
//! line. Pure: nested templates are looked up through a closure, never read from disk or the cluster.

use std::collections::{BTreeMap, BTreeSet};

use super::analysis::{LimitRule, Written, WrittenLimits, limit_rules};
use super::args::{self, Placeholder};
use super::condition::Condition;
use crate::api::compare::COMPARE_PLUGIN;
use crate::api::duration::parse_duration;
use crate::api::{
    AnalysisTemplateRef, AnalysisTemplateSpec, Argument, DryRun, MeasurementRetention, Metric,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// Field path from the object's root, e.g. `spec.metrics[0].interval`.
    pub path: String,
    pub message: String,
}

/// The checks of the providers canaryd runs, each of its own part of a metric's `provider`: the one place
/// those rules live (`providers/`), handed to [`check`] so this module stays pure.
pub trait ProviderRules {
    /// Checks `metric.provider` (which names exactly one provider), found at `path`.
    fn check(&self, metric: &Metric, path: &str, findings: &mut Vec<Finding>);
}

/// apimachinery's `field.Error` body: the error type, then `: <detail>` when the detail is not empty.
fn with_detail(kind: &str, detail: &str) -> String {
    if detail.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {detail}")
    }
}

impl Finding {
    pub fn warning(path: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Warning,
            path: path.into(),
            message: message.into(),
        }
    }

    /// Argo's `field.Invalid`: an error whose message shows the value found, as the API server words it
    /// (`Invalid value: "web-stable": ...`); `value` is already formatted (a string quoted, a number bare).
    pub fn invalid(
        path: impl Into<String>,
        value: &str,
        message: impl std::fmt::Display,
    ) -> Finding {
        Finding::error(path, format!("Invalid value: {value}: {message}"))
    }

    /// Argo's `field.Required`: `Required value`, then the detail when there is one.
    pub fn required(path: impl Into<String>, detail: &str) -> Finding {
        Finding::error(path, with_detail("Required value", detail))
    }

    /// Argo's `field.Forbidden`: `Forbidden: <detail>`, a value that is well formed but not allowed here.
    pub fn forbidden(path: impl Into<String>, detail: &str) -> Finding {
        Finding::error(path, with_detail("Forbidden", detail))
    }

    pub fn error(path: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Error,
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The parts of a spec that the checks read; templates and runs share them.
#[derive(Debug, Clone, Copy)]
pub struct SpecView<'a> {
    pub metrics: &'a [Metric],
    pub args: &'a [Argument],
    pub dry_run: &'a [DryRun],
    pub measurement_retention: &'a [MeasurementRetention],
    pub templates: &'a [AnalysisTemplateRef],
    /// An AnalysisRun runs now, so every arg must have a value; a template's args may be supplied later.
    pub is_run: bool,
}

impl<'a> SpecView<'a> {
    pub fn of_template(spec: &'a AnalysisTemplateSpec) -> SpecView<'a> {
        SpecView {
            metrics: spec.metrics.as_deref().unwrap_or_default(),
            args: spec.args.as_deref().unwrap_or_default(),
            dry_run: spec.dry_run.as_deref().unwrap_or_default(),
            measurement_retention: spec.measurement_retention.as_deref().unwrap_or_default(),
            templates: spec.templates.as_deref().unwrap_or_default(),
            is_run: false,
        }
    }

    pub fn of_run(spec: &'a crate::api::AnalysisRunSpec) -> SpecView<'a> {
        SpecView {
            metrics: &spec.metrics,
            args: spec.args.as_deref().unwrap_or_default(),
            dry_run: spec.dry_run.as_deref().unwrap_or_default(),
            measurement_retention: spec.measurement_retention.as_deref().unwrap_or_default(),
            templates: &[],
            is_run: true,
        }
    }
}

/// Looks up a nested template reference; `None` when it is not known here (it may exist in the cluster).
pub type Lookup<'a> = dyn Fn(&AnalysisTemplateRef) -> Option<&'a AnalysisTemplateSpec> + 'a;

/// Checks a spec. `lookup` resolves `spec.templates[]`; metric names and args of nested templates count
/// as this spec's own (Argo merges them). `providers` checks each metric's provider.
pub fn check(
    view: SpecView<'_>,
    lookup: &Lookup<'_>,
    providers: &dyn ProviderRules,
) -> Vec<Finding> {
    let mut findings = Vec::new();

    let (nested_metrics, nested_args) = check_nested(view, lookup, &mut findings);

    if view.metrics.is_empty() && view.templates.is_empty() {
        findings.push(Finding::error(
            "spec.metrics",
            "at least one metric is required",
        ));
    }

    let declared = check_args(view, &mut findings);
    let sample_args = sample_args(view, &declared, &nested_args);
    let names = check_metrics(
        view,
        &nested_metrics,
        &sample_args,
        providers,
        &mut findings,
    );
    let all_names: Vec<&str> = names.keys().copied().collect();
    check_metric_rules(view, &all_names, &mut findings);
    findings
}

/// The metrics (name, where it is) and arg names of the templates `spec.templates[]` nests, each reference
/// checked on the way.
fn check_nested(
    view: SpecView<'_>,
    lookup: &Lookup<'_>,
    findings: &mut Vec<Finding>,
) -> (Vec<(String, String)>, BTreeSet<String>) {
    let mut nested_metrics = Vec::new();
    let mut nested_args = BTreeSet::new();
    for (i, reference) in view.templates.iter().enumerate() {
        let path = format!("spec.templates[{i}]");
        let mut seen = BTreeSet::new();
        collect_nested(
            reference,
            lookup,
            &path,
            &mut seen,
            &mut nested_metrics,
            &mut nested_args,
            findings,
        );
    }
    (nested_metrics, nested_args)
}

/// Checks each declared arg (named, once); returns the declared names, each with whether it has a value.
fn check_args<'a>(view: SpecView<'a>, findings: &mut Vec<Finding>) -> BTreeMap<&'a str, bool> {
    let mut declared: BTreeMap<&str, bool> = BTreeMap::new();
    for (i, arg) in view.args.iter().enumerate() {
        let path = format!("spec.args[{i}]");
        if arg.name.is_empty() {
            findings.push(Finding::error(format!("{path}.name"), "required"));
            continue;
        }
        if declared
            .insert(&arg.name, arg.value.is_some() || arg.value_from.is_some())
            .is_some()
        {
            findings.push(Finding::error(
                format!("{path}.name"),
                format!("arg {:?} is declared twice", arg.name),
            ));
        }
        check_arg(arg, &path, view.is_run, findings);
    }
    declared
}

/// For compiling conditions that use args: each declared arg's default, or a number where it has none.
fn sample_args(
    view: SpecView<'_>,
    declared: &BTreeMap<&str, bool>,
    nested_args: &BTreeSet<String>,
) -> BTreeMap<String, Option<String>> {
    declared
        .keys()
        .map(|n| n.to_string())
        .chain(nested_args.iter().cloned())
        .map(|name| {
            let default = view
                .args
                .iter()
                .find(|a| a.name == name)
                .and_then(|a| a.value.clone());
            (name, Some(default.unwrap_or_else(|| "0".to_string())))
        })
        .collect()
}

/// Checks each metric (named, uniquely across the nested templates' `nested_metrics`); returns every
/// metric name with where it was first found.
fn check_metrics<'a>(
    view: SpecView<'a>,
    nested_metrics: &'a [(String, String)],
    sample_args: &BTreeMap<String, Option<String>>,
    providers: &dyn ProviderRules,
    findings: &mut Vec<Finding>,
) -> BTreeMap<&'a str, String> {
    let mut names: BTreeMap<&str, String> = BTreeMap::new();
    for (name, origin) in nested_metrics {
        names.entry(name.as_str()).or_insert_with(|| origin.clone());
    }
    for (i, metric) in view.metrics.iter().enumerate() {
        let path = format!("spec.metrics[{i}]");
        if metric.name.is_empty() {
            findings.push(Finding::error(format!("{path}.name"), "required"));
        } else if let Some(first) = names.get(metric.name.as_str()) {
            findings.push(Finding::error(
                format!("{path}.name"),
                format!("metric name {:?} is used twice (first at {first}); names must be unique across nested templates", metric.name),
            ));
        } else {
            names.insert(&metric.name, path.clone());
        }
        check_metric(metric, &path, sample_args, providers, findings);
    }
    names
}

/// The rules that name metrics by regex, dryRun and measurementRetention, against `all_names`; and each
/// retention's limit.
fn check_metric_rules(view: SpecView<'_>, all_names: &[&str], findings: &mut Vec<Finding>) {
    for (i, rule) in view.dry_run.iter().enumerate() {
        check_name_regex(
            &rule.metric_name,
            &format!("spec.dryRun[{i}].metricName"),
            all_names,
            findings,
        );
    }
    for (i, rule) in view.measurement_retention.iter().enumerate() {
        let path = format!("spec.measurementRetention[{i}]");
        check_name_regex(
            &rule.metric_name,
            &format!("{path}.metricName"),
            all_names,
            findings,
        );
        if rule.limit <= 0 {
            findings.push(Finding::error(
                format!("{path}.limit"),
                format!(
                    "must be a positive number of measurements, got {}",
                    rule.limit
                ),
            ));
        }
    }
}

fn collect_nested(
    reference: &AnalysisTemplateRef,
    lookup: &Lookup<'_>,
    path: &str,
    seen: &mut BTreeSet<(bool, String)>,
    metrics: &mut Vec<(String, String)>,
    args: &mut BTreeSet<String>,
    findings: &mut Vec<Finding>,
) {
    let Some(name) = reference.template_name.as_deref().filter(|n| !n.is_empty()) else {
        findings.push(Finding::error(format!("{path}.templateName"), "required"));
        return;
    };
    let kind = if reference.cluster_scope == Some(true) {
        "ClusterAnalysisTemplate"
    } else {
        "AnalysisTemplate"
    };
    if !seen.insert((reference.cluster_scope == Some(true), name.to_string())) {
        findings.push(Finding::error(
            format!("{path}.templateName"),
            format!("{kind} {name:?} is nested in itself"),
        ));
        return;
    }
    let Some(spec) = lookup(reference) else {
        findings.push(Finding {
            severity: Severity::Warning,
            path: format!("{path}.templateName"),
            message: format!(
                "{kind} {name:?} is not among the given files; it must exist in the cluster"
            ),
        });
        return;
    };
    for metric in spec.metrics.iter().flatten() {
        metrics.push((metric.name.clone(), format!("{kind}/{name}")));
    }
    args.extend(spec.args.iter().flatten().map(|a| a.name.clone()));
    for nested in spec.templates.iter().flatten() {
        collect_nested(nested, lookup, path, seen, metrics, args, findings);
    }
}

fn check_arg(arg: &Argument, path: &str, is_run: bool, findings: &mut Vec<Finding>) {
    if let Some(from) = &arg.value_from {
        match (&from.secret_key_ref, &from.field_ref) {
            (Some(s), None) => {
                if s.name.is_empty() {
                    findings.push(Finding::error(
                        format!("{path}.valueFrom.secretKeyRef.name"),
                        "required",
                    ));
                }
                if s.key.is_empty() {
                    findings.push(Finding::error(
                        format!("{path}.valueFrom.secretKeyRef.key"),
                        "required",
                    ));
                }
            }
            (None, Some(f)) => {
                if f.field_path.is_empty() {
                    findings.push(Finding::error(
                        format!("{path}.valueFrom.fieldRef.fieldPath"),
                        "required",
                    ));
                }
            }
            _ => findings.push(Finding::error(
                format!("{path}.valueFrom"),
                "exactly one of secretKeyRef or fieldRef is required",
            )),
        }
        if arg.value.is_some() {
            findings.push(Finding::error(
                format!("{path}.value"),
                "value and valueFrom are mutually exclusive",
            ));
        }
    } else if arg.value.is_none() && is_run {
        findings.push(Finding::error(
            path.to_string(),
            format!("arg {:?} has no value", arg.name),
        ));
    }
}

fn check_name_regex(pattern: &str, path: &str, names: &[&str], findings: &mut Vec<Finding>) {
    match regex::Regex::new(pattern) {
        Err(e) => findings.push(Finding::error(
            path,
            format!(
                "invalid regular expression {pattern:?}: {}",
                e.to_string()
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .trim_start_matches("error: ")
            ),
        )),
        Ok(re) => {
            if !names.iter().any(|n| re.is_match(n)) {
                findings.push(Finding::error(
                    path,
                    format!("{pattern:?} matches no metric name"),
                ));
            }
        }
    }
}

/// A count or limit as written; text that is neither a number nor a placeholder is reported and left out.
fn limit(field: &Option<IntOrString>, path: &str, findings: &mut Vec<Finding>) -> Written {
    match field {
        None => Written::Absent,
        Some(IntOrString::Int(n)) => Written::Value(i64::from(*n)),
        Some(IntOrString::String(s)) if args::is_templated(s) => Written::Placeholder,
        Some(IntOrString::String(s)) => match s.trim().parse::<i64>() {
            Ok(n) => Written::Value(n),
            Err(_) => {
                findings.push(Finding::error(
                    path,
                    format!("{s:?} is not an integer or {{{{args.NAME}}}}"),
                ));
                Written::Absent
            }
        },
    }
}

fn check_metric(
    metric: &Metric,
    path: &str,
    sample_args: &BTreeMap<String, Option<String>>,
    providers: &dyn ProviderRules,
    findings: &mut Vec<Finding>,
) {
    for (field, value) in [
        ("interval", &metric.interval),
        ("initialDelay", &metric.initial_delay),
    ] {
        if let Some(text) = value
            && !args::is_templated(text)
            && let Err(e) = parse_duration(text)
        {
            findings.push(Finding::error(format!("{path}.{field}"), e.to_string()));
        }
    }

    let field = |name: &str| format!("{path}.{name}");
    let limits = WrittenLimits {
        count: limit(&metric.count, &field("count"), findings),
        failure: limit(&metric.failure_limit, &field("failureLimit"), findings),
        inconclusive: limit(
            &metric.inconclusive_limit,
            &field("inconclusiveLimit"),
            findings,
        ),
        consecutive_error: limit(
            &metric.consecutive_error_limit,
            &field("consecutiveErrorLimit"),
            findings,
        ),
        consecutive_success: limit(
            &metric.consecutive_success_limit,
            &field("consecutiveSuccessLimit"),
            findings,
        ),
        has_interval: metric.interval.is_some(),
    };
    for rule in limit_rules(&limits) {
        findings.push(match rule {
            LimitRule::TooSmall { field: name, value, min: -1 } => Finding::error(
                field(name),
                format!("must be -1 (off) or more, got {value}"),
            ),
            LimitRule::TooSmall { field: name, value, .. } => {
                Finding::error(field(name), format!("must not be negative, got {value}"))
            }
            LimitRule::CountWithoutInterval { count } => Finding::error(
                field("count"),
                format!("count {count} takes more than one measurement, so interval is required"),
            ),
            LimitRule::NoLimitApplies => Finding::error(
                field("failureLimit"),
                "failureLimit -1 turns failure counting off, so consecutiveSuccessLimit must be > 0 to ever decide",
            ),
            // Argo's rule: with failureLimit -1 only the consecutiveSuccessLimit is held against the count.
            LimitRule::CountBelowLimits { count, failure: -1, consecutive_success } => Finding::error(
                field("count"),
                format!("count ({count}) must be >= consecutiveSuccessLimit ({consecutive_success}) when failureLimit is -1, or the limit can never be reached"),
            ),
            LimitRule::CountBelowLimits { count, failure, consecutive_success } => Finding::error(
                field("count"),
                format!("count ({count}) must be >= failureLimit ({failure}) + consecutiveSuccessLimit ({consecutive_success}), or the limits can never be reached"),
            ),
            LimitRule::CountBelowInconclusive { count, inconclusive } => Finding::error(
                field("count"),
                format!("count ({count}) must be >= inconclusiveLimit ({inconclusive})"),
            ),
        });
    }

    for (field, condition) in [
        ("successCondition", &metric.success_condition),
        ("failureCondition", &metric.failure_condition),
    ] {
        // Placeholder problems are reported once, by check_placeholders; compile what the run would see.
        if let Some(text) = condition
            && let Ok(resolved) = args::substitute(text, sample_args, &|_| None)
            && let Err(e) = Condition::compile(&resolved)
        {
            findings.push(Finding::error(format!("{path}.{field}"), e.to_string()));
        }
    }

    check_provider(metric, path, providers, findings);
    check_placeholders(metric, path, sample_args, findings);
}

fn check_provider(
    metric: &Metric,
    path: &str,
    rules: &dyn ProviderRules,
    findings: &mut Vec<Finding>,
) {
    let configured = metric.provider.configured();
    let ppath = format!("{path}.provider");
    match configured.as_slice() {
        [] => findings.push(Finding::error(
            ppath,
            "a provider is required (canaryd runs prometheus, web, job and plugin \"canaryd/...\")",
        )),
        [_] => rules.check(metric, &ppath, findings),
        many => findings.push(Finding::error(
            ppath,
            format!("exactly one provider is allowed, found {}", many.join(", ")),
        )),
    }
}

/// A literal address must be an http(s) URL; one with `{{args...}}` is checked once the args are known.
pub fn check_url(text: &str, path: &str, findings: &mut Vec<Finding>) {
    if args::is_templated(text) {
        return;
    }
    match url::Url::parse(text) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
        Ok(u) => findings.push(Finding::error(
            path,
            format!("{text:?} is not an http(s) URL (scheme {:?})", u.scheme()),
        )),
        Err(e) => findings.push(Finding::error(path, format!("{text:?} is not a URL: {e}"))),
    }
}

fn check_placeholders(
    metric: &Metric,
    path: &str,
    declared: &BTreeMap<String, Option<String>>,
    findings: &mut Vec<Finding>,
) {
    let Ok(mut json) = serde_json::to_value(metric) else {
        return;
    };
    args::visit_strings(
        &mut json,
        path,
        &mut |field, text| match args::placeholders(text) {
            Err(e) => findings.push(Finding::error(field, e.to_string())),
            Ok(found) => {
                for p in found {
                    match p {
                    Placeholder::Arg(name) if !declared.contains_key(&name) => findings.push(Finding::error(
                        field,
                        format!("{{{{args.{name}}}}} refers to an arg that is not declared in spec.args"),
                    )),
                    Placeholder::Arg(_) => {}
                    // `{{window}}` is canaryd/compare's own: the time the analysis has covered so far.
                    Placeholder::Other(inner)
                        if inner == "window" && field.contains(&format!(".plugin.{COMPARE_PLUGIN}.")) => {}
                    Placeholder::Other(inner) => findings.push(Finding::error(
                        field,
                        format!("unknown placeholder {{{{{inner}}}}} (expected {{{{args.NAME}}}})"),
                    )),
                }
                }
            }
        },
    );
}
