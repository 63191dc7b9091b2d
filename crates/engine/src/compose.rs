//! Turns what the user gave (a template and its nested templates, or an AnalysisRun, plus arg values) into
//! the spec of one run: metrics merged across `spec.templates[]`, args merged with supplied values, and each
//! metric with its `{{args.*}}` substituted. Pure: nested templates come through a lookup closure and
//! secret values through a reader the caller provides (the daemon reads Secrets, the CLI takes `--arg`).

use std::collections::{BTreeMap, BTreeSet};

use super::args::{self, ArgsError};
use crate::api::{
    AnalysisRunSpec, AnalysisTemplateRef, AnalysisTemplateSpec, Argument, DryRun,
    MeasurementRetention, Metric, SecretKeyRef,
};

/// The spec of one run, before arg values are known: exactly what an AnalysisRun created from the template
/// would hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSpec {
    pub metrics: Vec<Metric>,
    pub args: Vec<Argument>,
    pub dry_run: Vec<DryRun>,
    pub measurement_retention: Vec<MeasurementRetention>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ComposeError {
    #[error("{kind} {name:?} (nested in spec.templates) is not among the given files")]
    MissingTemplate { kind: &'static str, name: String },
    #[error("{kind} {name:?} is nested in itself")]
    Cycle { kind: &'static str, name: String },
    #[error("spec.templates[].templateName is required")]
    UnnamedTemplate,
    #[error("metric {0:?} is defined twice across the nested templates")]
    DuplicateMetric(String),
    #[error("arg {name:?} is declared twice with different values ({first:?} and {second:?})")]
    ConflictingArg {
        name: String,
        first: String,
        second: String,
    },
    #[error("--arg {0}: the template declares no such arg")]
    UnknownSuppliedArg(String),
    #[error("arg {name:?} reads Secret {secret}/{key}: {reason}")]
    Secret {
        name: String,
        secret: String,
        key: String,
        reason: String,
    },
    #[error(
        "arg {name:?} uses valueFrom.fieldRef ({field}), which only a Rollout can resolve: pass --arg {name}=VALUE"
    )]
    FieldRef { name: String, field: String },
    #[error("metric {metric:?}: {field}: {source}")]
    Args {
        metric: String,
        field: String,
        source: ArgsError,
    },
    #[error("metric {metric:?}: after substituting args: {message}")]
    Decode { metric: String, message: String },
}

pub type Lookup<'a> = dyn Fn(&AnalysisTemplateRef) -> Option<&'a AnalysisTemplateSpec> + 'a;

impl RunSpec {
    /// The run an AnalysisRun describes.
    pub fn from_run(spec: &AnalysisRunSpec) -> RunSpec {
        RunSpec {
            metrics: spec.metrics.clone(),
            args: spec.args.clone().unwrap_or_default(),
            dry_run: spec.dry_run.clone().unwrap_or_default(),
            measurement_retention: spec.measurement_retention.clone().unwrap_or_default(),
        }
    }

    /// The run a template describes, nested templates first (in the order listed), then its own metrics.
    pub fn from_template(
        spec: &AnalysisTemplateSpec,
        lookup: &Lookup<'_>,
    ) -> Result<RunSpec, ComposeError> {
        let mut out = RunSpec::default();
        let mut path = BTreeSet::new();
        merge(spec, lookup, &mut path, &mut out)?;
        Ok(out)
    }
}

fn merge(
    spec: &AnalysisTemplateSpec,
    lookup: &Lookup<'_>,
    path: &mut BTreeSet<(bool, String)>,
    out: &mut RunSpec,
) -> Result<(), ComposeError> {
    for reference in spec.templates.iter().flatten() {
        let name = reference
            .template_name
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or(ComposeError::UnnamedTemplate)?;
        let cluster = reference.cluster_scope == Some(true);
        let kind = if cluster {
            "ClusterAnalysisTemplate"
        } else {
            "AnalysisTemplate"
        };
        let nested = lookup(reference).ok_or_else(|| ComposeError::MissingTemplate {
            kind,
            name: name.clone(),
        })?;
        if !path.insert((cluster, name.clone())) {
            return Err(ComposeError::Cycle { kind, name });
        }
        merge(nested, lookup, path, out)?;
        path.remove(&(cluster, name));
    }
    for metric in spec.metrics.iter().flatten() {
        if out.metrics.iter().any(|m| m.name == metric.name) {
            return Err(ComposeError::DuplicateMetric(metric.name.clone()));
        }
        out.metrics.push(metric.clone());
    }
    for arg in spec.args.iter().flatten() {
        match out.args.iter_mut().find(|a| a.name == arg.name) {
            None => out.args.push(arg.clone()),
            // The same arg in two templates: one with a value wins over one without; two values must agree.
            Some(existing) => match (&existing.value, &arg.value) {
                (Some(a), Some(b)) if a != b => {
                    return Err(ComposeError::ConflictingArg {
                        name: arg.name.clone(),
                        first: a.clone(),
                        second: b.clone(),
                    });
                }
                (None, Some(_)) => *existing = arg.clone(),
                _ => {}
            },
        }
    }
    out.dry_run.extend(spec.dry_run.iter().flatten().cloned());
    out.measurement_retention
        .extend(spec.measurement_retention.iter().flatten().cloned());
    Ok(())
}

/// Arg values for one run. Secret values are kept apart so every output can hide them.
#[derive(Clone, Default, PartialEq)]
pub struct ArgValues {
    pub values: BTreeMap<String, Option<String>>,
    pub secrets: Vec<String>,
}

impl std::fmt::Debug for ArgValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: BTreeMap<&String, &str> = self
            .values
            .iter()
            .map(|(k, v)| {
                let v = v.as_deref().unwrap_or("<unset>");
                (
                    k,
                    if self.secrets.iter().any(|s| s == v) {
                        crate::scrub::REDACTED
                    } else {
                        v
                    },
                )
            })
            .collect();
        f.debug_struct("ArgValues").field("values", &shown).finish()
    }
}

/// Resolves every declared arg: a supplied value wins, then the declared value, then `valueFrom`.
/// `read_secret` returns a Secret's key (Err with the reason when it cannot).
pub fn resolve_args(
    declared: &[Argument],
    supplied: &BTreeMap<String, String>,
    read_secret: &dyn Fn(&SecretKeyRef) -> Result<String, String>,
) -> Result<ArgValues, ComposeError> {
    if let Some(unknown) = supplied
        .keys()
        .find(|k| !declared.iter().any(|a| &a.name == *k))
    {
        return Err(ComposeError::UnknownSuppliedArg(unknown.clone()));
    }
    let mut out = ArgValues::default();
    for arg in declared {
        let value = if let Some(v) = supplied.get(&arg.name) {
            Some(v.clone())
        } else if let Some(v) = &arg.value {
            Some(v.clone())
        } else if let Some(from) = &arg.value_from {
            if let Some(secret) = &from.secret_key_ref {
                let v = read_secret(secret).map_err(|reason| ComposeError::Secret {
                    name: arg.name.clone(),
                    secret: secret.name.clone(),
                    key: secret.key.clone(),
                    reason,
                })?;
                out.secrets.push(v.clone());
                Some(v)
            } else if let Some(field) = &from.field_ref {
                return Err(ComposeError::FieldRef {
                    name: arg.name.clone(),
                    field: field.field_path.clone(),
                });
            } else {
                None
            }
        } else {
            None
        };
        out.values.insert(arg.name.clone(), value);
    }
    Ok(out)
}

/// A metric with every `{{args.NAME}}` replaced. `other` resolves canaryd's own placeholders (or refuses).
pub fn resolve_metric(
    metric: &Metric,
    args: &ArgValues,
    other: &dyn Fn(&str) -> Option<String>,
) -> Result<Metric, ComposeError> {
    let mut value = serde_json::to_value(metric).map_err(|e| ComposeError::Decode {
        metric: metric.name.clone(),
        message: e.to_string(),
    })?;
    args::substitute_value(&mut value, &args.values, other).map_err(|(field, source)| {
        ComposeError::Args {
            metric: metric.name.clone(),
            field,
            source,
        }
    })?;
    serde_json::from_value(value).map_err(|e| ComposeError::Decode {
        metric: metric.name.clone(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{PrometheusMetric, ValueFrom};

    fn metric(name: &str, query: &str) -> Metric {
        Metric {
            name: name.to_string(),
            provider: crate::api::MetricProvider {
                prometheus: Some(PrometheusMetric {
                    query: Some(query.to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn arg(name: &str, value: Option<&str>) -> Argument {
        Argument {
            name: name.to_string(),
            value: value.map(str::to_string),
            value_from: None,
        }
    }

    fn template(
        metrics: Vec<Metric>,
        args: Vec<Argument>,
        nested: &[&str],
    ) -> AnalysisTemplateSpec {
        AnalysisTemplateSpec {
            metrics: Some(metrics),
            args: Some(args),
            templates: Some(
                nested
                    .iter()
                    .map(|n| AnalysisTemplateRef {
                        template_name: Some(n.to_string()),
                        cluster_scope: None,
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn nested_templates_come_first_and_their_args_merge() {
        let inner = template(vec![metric("a", "up")], vec![arg("svc", None)], &[]);
        let outer = template(
            vec![metric("b", "up")],
            vec![arg("svc", Some("web"))],
            &["inner"],
        );
        let lookup = |r: &AnalysisTemplateRef| {
            (r.template_name.as_deref() == Some("inner")).then_some(&inner)
        };
        let spec = RunSpec::from_template(&outer, &lookup).unwrap();
        let names: Vec<_> = spec.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(spec.args, vec![arg("svc", Some("web"))]);
    }

    #[test]
    fn a_missing_or_cyclic_nested_template_is_an_error() {
        let lonely = template(vec![], vec![], &["gone"]);
        let none = |_: &AnalysisTemplateRef| None;
        assert!(matches!(
            RunSpec::from_template(&lonely, &none),
            Err(ComposeError::MissingTemplate { .. })
        ));
        let selfish = template(vec![metric("a", "up")], vec![], &["selfish"]);
        let copy = selfish.clone();
        let lookup = |_: &AnalysisTemplateRef| Some(&copy);
        assert!(matches!(
            RunSpec::from_template(&selfish, &lookup),
            Err(ComposeError::Cycle { .. })
        ));
    }

    #[test]
    fn supplied_values_win_and_secrets_are_hidden_from_debug() {
        let declared = vec![
            arg("svc", Some("default")),
            Argument {
                name: "token".into(),
                value: None,
                value_from: Some(ValueFrom {
                    secret_key_ref: Some(SecretKeyRef {
                        name: "creds".into(),
                        key: "t".into(),
                    }),
                    field_ref: None,
                }),
            },
        ];
        let supplied = BTreeMap::from([("svc".to_string(), "checkout".to_string())]);
        let values = resolve_args(&declared, &supplied, &|_| Ok("s3cr3t".to_string())).unwrap();
        assert_eq!(values.values["svc"].as_deref(), Some("checkout"));
        assert_eq!(values.values["token"].as_deref(), Some("s3cr3t"));
        assert!(!format!("{values:?}").contains("s3cr3t"));
        let err =
            resolve_args(&declared, &BTreeMap::new(), &|_| Err("not found".into())).unwrap_err();
        assert_eq!(
            err.to_string(),
            "arg \"token\" reads Secret creds/t: not found"
        );
        let unknown = BTreeMap::from([("nope".to_string(), "x".to_string())]);
        assert_eq!(
            resolve_args(&declared, &unknown, &|_| Ok(String::new())).unwrap_err(),
            ComposeError::UnknownSuppliedArg("nope".into())
        );
    }

    #[test]
    fn a_resolved_metric_has_its_args_substituted_everywhere() {
        let mut m = metric("rate", "up{svc=\"{{args.svc}}\"}");
        m.count = Some(
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("{{args.n}}".into()),
        );
        let values = ArgValues {
            values: BTreeMap::from([
                ("svc".into(), Some("web".into())),
                ("n".into(), Some("5".into())),
            ]),
            secrets: vec![],
        };
        let resolved = resolve_metric(&m, &values, &|_| None).unwrap();
        assert_eq!(
            resolved.provider.prometheus.unwrap().query.as_deref(),
            Some("up{svc=\"web\"}")
        );
        let missing = ArgValues {
            values: BTreeMap::from([("svc".into(), None)]),
            secrets: vec![],
        };
        let err = resolve_metric(&metric("rate", "{{args.svc}}"), &missing, &|_| None).unwrap_err();
        assert!(
            err.to_string().contains("arg \"svc\" has no value"),
            "{err}"
        );
    }
}
