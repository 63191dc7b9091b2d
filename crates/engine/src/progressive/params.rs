//! Expanding an ApplicationSet's generators into parameter sets, as Argo CD does, for the generators whose
//! input canaryd can see: `list` elements written inline, `clusters` over the cluster Secrets the user
//! gave, and `matrix`/`merge` of those. A generator canaryd cannot evaluate (git, SCM, pull requests,
//! plugins, `elementsYaml`, clusters without Secrets) is a warning that names it and stands for one
//! parameter set whose missing parameters are unknown, never guessed. Pure: Secrets come in as values.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::param_set::ParamSet;
use super::render::{self, Engine, Rendered};
use crate::api::ClusterSecret;
use crate::api::appset::{Generator, LabelSelector, MatchExpression};
use crate::api::meta::requirement_holds;
use crate::template::Finding;

/// The local cluster Argo CD adds to an unfiltered cluster generator when no Secret describes it.
const IN_CLUSTER_SERVER: &str = "https://kubernetes.default.svc";

/// What generating needs besides the generators.
pub struct Inputs<'a> {
    pub engine: Engine,
    /// The cluster Secrets given with `--clusters`; None when none were given.
    pub clusters: Option<&'a [ClusterSecret]>,
}

/// The parameter sets of every generator, in order (Argo CD generates an Application per set).
pub fn generate(
    generators: &[Generator],
    path: &str,
    inputs: &Inputs<'_>,
    findings: &mut Vec<Finding>,
) -> Vec<ParamSet> {
    generators
        .iter()
        .enumerate()
        .flat_map(|(i, g)| one(g, &format!("{path}[{i}]"), inputs, findings))
        .collect()
}

const KINDS: &[&str] = &["list", "clusters", "matrix", "merge"];

fn one(
    g: &Generator,
    path: &str,
    inputs: &Inputs<'_>,
    findings: &mut Vec<Finding>,
) -> Vec<ParamSet> {
    let others: Vec<&String> = g.rest.keys().filter(|k| *k != "template").collect();
    if g.rest.contains_key("template") {
        findings.push(Finding::warning(
            format!("{path}.template"),
            "a generator's own template is not evaluated: names and labels it overrides are not checked",
        ));
    }
    let written = [
        g.list.is_some(),
        g.clusters.is_some(),
        g.matrix.is_some(),
        g.merge.is_some(),
    ]
    .iter()
    .filter(|s| **s)
    .count()
        + others.len();
    if written != 1 {
        findings.push(Finding::error(
            path,
            format!("a generator needs exactly one kind, found {written}"),
        ));
        return Vec::new();
    }
    let sets = if let Some(list) = &g.list {
        list_sets(list, path, findings)
    } else if let Some(clusters) = &g.clusters {
        cluster_sets(clusters, path, inputs, findings)
    } else if let Some(matrix) = &g.matrix {
        matrix_sets(
            matrix.generators.as_deref(),
            &format!("{path}.matrix"),
            inputs,
            findings,
        )
    } else if let Some(merge) = &g.merge {
        merge_sets(merge, &format!("{path}.merge"), inputs, findings)
    } else {
        let kind = others.first().map_or("unknown", |k| k.as_str());
        let what = format!("the {kind} generator");
        findings.push(Finding::warning(
            format!("{path}.{kind}"),
            format!(
                "{what} is not evaluated by canaryd (it reads {}): the Applications it generates are \
                 checked only for what the template says without its parameters",
                KINDS.join(", ")
            ),
        ));
        vec![ParamSet::unevaluated(what)]
    };
    match &g.selector {
        None => sets,
        Some(selector) => match serde_json::from_value::<LabelSelector>(selector.clone()) {
            Ok(sel) => sets
                .into_iter()
                .filter(|s| {
                    s.has_unevaluated()
                        || selects(&sel, |k| {
                            s.lookup(k).and_then(Value::as_str).map(str::to_string)
                        })
                })
                .collect(),
            Err(e) => {
                findings.push(Finding::error(format!("{path}.selector"), e.to_string()));
                sets
            }
        },
    }
}

fn list_sets(
    list: &crate::api::appset::ListGenerator,
    path: &str,
    findings: &mut Vec<Finding>,
) -> Vec<ParamSet> {
    let mut sets = Vec::new();
    for (i, element) in list.elements.iter().flatten().enumerate() {
        if element.is_object() {
            sets.push(ParamSet::known(element.clone()));
        } else {
            findings.push(Finding::error(
                format!("{path}.list.elements[{i}]"),
                "a list element must be a map of parameters",
            ));
        }
    }
    if list.elements_yaml.is_some() {
        findings.push(Finding::warning(
            format!("{path}.list.elementsYaml"),
            "elementsYaml is not evaluated by canaryd: the Applications it generates are not checked",
        ));
        sets.push(ParamSet::unevaluated("elementsYaml".to_string()));
    }
    sets
}

fn cluster_sets(
    gen_: &crate::api::appset::ClusterGenerator,
    path: &str,
    inputs: &Inputs<'_>,
    findings: &mut Vec<Finding>,
) -> Vec<ParamSet> {
    let path = format!("{path}.clusters");
    let Some(secrets) = inputs.clusters else {
        findings.push(Finding::warning(
            &path,
            "the clusters generator is not evaluated: give the cluster Secrets with --clusters to check \
             the Applications it generates",
        ));
        return vec![ParamSet::unevaluated("the clusters generator".to_string())];
    };
    if gen_.flat_list == Some(true) {
        findings.push(Finding::warning(
            format!("{path}.flatList"),
            "flatList is not evaluated by canaryd: the Application it generates is not checked",
        ));
        return vec![ParamSet::unevaluated("flatList".to_string())];
    }
    let selector = gen_.selector.clone().unwrap_or_default();
    let empty = selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty);
    let mut sets = Vec::new();
    for secret in secrets.iter().filter(|s| s.is_cluster()) {
        let labels = secret.metadata.labels.clone().unwrap_or_default();
        if !selects(&selector, |k| labels.get(k).cloned()) {
            continue;
        }
        let name = secret.field("name").unwrap_or_default();
        sets.push(cluster_params(
            &name,
            &secret.field("server").unwrap_or_default(),
            &secret.field("project").unwrap_or_default(),
            &labels,
            &secret.metadata.annotations.clone().unwrap_or_default(),
        ));
    }
    let local_known = secrets
        .iter()
        .any(|s| s.is_cluster() && s.field("server").as_deref() == Some(IN_CLUSTER_SERVER));
    if empty && !local_known {
        sets.push(cluster_params(
            "in-cluster",
            IN_CLUSTER_SERVER,
            "",
            &BTreeMap::new(),
            &BTreeMap::new(),
        ));
    }
    // `values` are templates over the cluster's own parameters.
    for set in &mut sets {
        let mut values = Map::new();
        for (k, text) in gen_.values.iter().flatten() {
            let mut problems = Vec::new();
            match render::render(text, inputs.engine, set, &mut problems) {
                Rendered::Known(v) => {
                    values.insert(k.clone(), Value::String(v));
                }
                Rendered::Unknown(_) => findings.extend(
                    problems
                        .into_iter()
                        .map(|m| Finding::warning(format!("{path}.values.{k}"), m)),
                ),
            }
        }
        set.insert("values", Value::Object(values));
    }
    sets
}

fn cluster_params(
    name: &str,
    server: &str,
    project: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> ParamSet {
    ParamSet::known(serde_json::json!({
        "name": name,
        "nameNormalized": normalized(name),
        "server": server,
        "project": project,
        "metadata": {"labels": labels, "annotations": annotations},
    }))
}

/// Argo CD's `nameNormalized`: lower case, characters a DNS name cannot hold replaced by `-`.
fn normalized(name: &str) -> String {
    name.to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn matrix_sets(
    children: Option<&[Generator]>,
    path: &str,
    inputs: &Inputs<'_>,
    findings: &mut Vec<Finding>,
) -> Vec<ParamSet> {
    let children = children.unwrap_or_default();
    if children.len() != 2 {
        findings.push(Finding::error(
            format!("{path}.generators"),
            format!(
                "a matrix combines exactly two generators, found {}",
                children.len()
            ),
        ));
        return Vec::new();
    }
    let first = one(
        &children[0],
        &format!("{path}.generators[0]"),
        inputs,
        findings,
    );
    let second = one(
        &children[1],
        &format!("{path}.generators[1]"),
        inputs,
        findings,
    );
    first
        .iter()
        .flat_map(|a| second.iter().map(move |b| a.combined(b)))
        .collect()
}

fn merge_sets(
    merge: &crate::api::appset::MergeGenerator,
    path: &str,
    inputs: &Inputs<'_>,
    findings: &mut Vec<Finding>,
) -> Vec<ParamSet> {
    let children = merge.generators.as_deref().unwrap_or_default();
    let keys = merge.merge_keys.clone().unwrap_or_default();
    if children.len() < 2 || keys.is_empty() {
        findings.push(Finding::error(
            path,
            "a merge needs at least two generators and mergeKeys",
        ));
        return Vec::new();
    }
    let mut base = one(
        &children[0],
        &format!("{path}.generators[0]"),
        inputs,
        findings,
    );
    for (i, child) in children.iter().enumerate().skip(1) {
        let sets = one(child, &format!("{path}.generators[{i}]"), inputs, findings);
        let key_of = |s: &ParamSet| -> Option<Vec<Value>> {
            keys.iter().map(|k| s.lookup(k).cloned()).collect()
        };
        for b in &mut base {
            // An unevaluated child may override any base set: its parameters become unknown.
            if let Some(u) = sets.iter().find(|s| s.has_unevaluated()) {
                b.unevaluated_from(u);
                continue;
            }
            let Some(bk) = key_of(b) else { continue };
            if let Some(over) = sets.iter().find(|s| key_of(s).as_ref() == Some(&bk)) {
                *b = b.combined(over);
            }
        }
    }
    base
}

/// A Kubernetes label selector over `get` (matchLabels and In/NotIn/Exists/DoesNotExist).
pub fn selects(selector: &LabelSelector, get: impl Fn(&str) -> Option<String>) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| get(k).as_ref() == Some(v));
    labels_ok
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|e: &MatchExpression| {
                let values = e.values.as_deref().unwrap_or_default();
                requirement_holds(&e.operator, values, get(&e.key).as_deref()).unwrap_or(false)
            })
}
