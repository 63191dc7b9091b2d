//! Whether a Grafana dashboard's queries (or alerting rules' expressions) resolve against what a daemon serves:
//! every PromQL expression of its panels and its `label_values(...)` variables is parsed with promql-parser (as canaryd parses PromQL), and
//! each vector selector in it must match at least one sample of the scrape (its metric name and every label
//! matcher), with the target labels Prometheus adds (`job`, `instance`). Template variables are substituted as
//! Grafana would on first load: a query variable takes the first value its `label_values` finds, Grafana's
//! interval variables a range. Also the checker's own tests: it reports what is not served.

use std::collections::BTreeMap;

use promql_parser::parser::{self, Expr, VectorSelector};
use serde_json::Value;

/// One sample: its name and labels.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// The samples of a text exposition, each with `target` labels added (as Prometheus adds its target's).
pub fn samples(exposition: &str, target: &[(&str, &str)]) -> Vec<Sample> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (series, _value) = line.rsplit_once(' ').expect("a sample line has a value");
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, parse_labels(rest.trim_end_matches('}'))),
                None => (series, BTreeMap::new()),
            };
            let mut labels = labels;
            for (k, v) in target {
                labels.insert(k.to_string(), v.to_string());
            }
            Sample {
                name: name.to_string(),
                labels,
            }
        })
        .collect()
}

/// `a="x",b="y\"z"` as a map, with the exposition's escapes undone.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert_eq!(chars.next(), Some('"'), "a quoted label value in {text}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').to_string(), value);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    labels
}

/// What of `dashboard`'s queries the `served` samples do not answer, one line each; empty when all resolve.
pub fn unserved(dashboard: &Value, served: &[Sample]) -> Vec<String> {
    let mut problems = Vec::new();
    let variables = substitute_variables(dashboard, served, &mut problems);
    let mut exprs = Vec::new();
    collect_exprs(&dashboard["panels"], &mut exprs);
    assert!(!exprs.is_empty(), "the dashboard has queries");
    let texts: Vec<String> = exprs.iter().map(|e| substituted(e, &variables)).collect();
    problems.extend(unserved_exprs(&texts, served));
    problems
}

/// What of the PromQL expressions `exprs` the `served` samples do not answer, one line each.
pub fn unserved_exprs(exprs: &[String], served: &[Sample]) -> Vec<String> {
    let mut problems = Vec::new();
    for text in exprs {
        match parser::parse(text) {
            Ok(ast) => {
                let mut selectors = Vec::new();
                selectors_of(&ast, &mut selectors);
                for s in selectors {
                    if matching(&s, served).next().is_none() {
                        problems.push(format!("{s} (in {text}) matches no served sample"));
                    }
                }
            }
            Err(e) => problems.push(format!("{text} does not parse: {e}")),
        }
    }
    problems
}

/// Each variable's value: a query variable's first `label_values` answer (variables in order, each substituted
/// into the next), Grafana's interval variables `5m`.
fn substitute_variables(
    dashboard: &Value,
    served: &[Sample],
    problems: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut values: BTreeMap<String, String> = ["__rate_interval", "__interval", "__range"]
        .into_iter()
        .map(|v| (v.to_string(), "5m".to_string()))
        .collect();
    let list = dashboard["templating"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for variable in list {
        let name = variable["name"].as_str().unwrap_or_default().to_string();
        if variable["type"] != "query" {
            continue;
        }
        let query = match &variable["query"] {
            Value::String(q) => q.clone(),
            q => q["query"].as_str().unwrap_or_default().to_string(),
        };
        let query = substituted(&query, &values);
        let Some((selector, label)) = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .and_then(|q| q.rsplit_once(','))
        else {
            problems.push(format!(
                "variable {name}: {query} is not label_values(selector, label)"
            ));
            continue;
        };
        let label = label.trim();
        let first = match parser::parse(selector) {
            Ok(Expr::VectorSelector(s)) => {
                let mut found: Vec<&str> = matching(&s, served)
                    .filter_map(|x| x.labels.get(label).map(String::as_str))
                    .filter(|v| !v.is_empty())
                    .collect();
                found.sort_unstable();
                found.first().map(|v| v.to_string())
            }
            _ => None,
        };
        match first {
            Some(v) => {
                values.insert(name, v);
            }
            None => problems.push(format!("variable {name}: {query} finds no value")),
        }
    }
    values
}

/// `text` with `$name`, `${name}` and `[[name]]` replaced, longest names first.
fn substituted(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut names: Vec<&String> = values.keys().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let mut out = text.to_string();
    for name in names {
        let v = &values[name];
        out = out
            .replace(&format!("${{{name}}}"), v)
            .replace(&format!("[[{name}]]"), v)
            .replace(&format!("${name}"), v);
    }
    out
}

/// Every `expr` of the panels (and of rows' nested panels).
fn collect_exprs(panels: &Value, out: &mut Vec<String>) {
    for panel in panels.as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str().filter(|e| !e.trim().is_empty()) {
                out.push(expr.to_string());
            }
        }
        collect_exprs(&panel["panels"], out);
    }
}

fn selectors_of(expr: &Expr, out: &mut Vec<VectorSelector>) {
    match expr {
        Expr::Aggregate(a) => {
            selectors_of(&a.expr, out);
            if let Some(p) = &a.param {
                selectors_of(p, out);
            }
        }
        Expr::Unary(u) => selectors_of(&u.expr, out),
        Expr::Binary(b) => {
            selectors_of(&b.lhs, out);
            selectors_of(&b.rhs, out);
        }
        Expr::Paren(p) => selectors_of(&p.expr, out),
        Expr::Subquery(s) => selectors_of(&s.expr, out),
        Expr::VectorSelector(v) => out.push(v.clone()),
        Expr::MatrixSelector(m) => out.push(m.vs.clone()),
        Expr::Call(c) => c.args.args.iter().for_each(|a| selectors_of(a, out)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// The served samples `selector` selects: its name, and every matcher (a missing label is the empty value, as
/// Prometheus takes it).
fn matching<'a>(
    selector: &'a VectorSelector,
    served: &'a [Sample],
) -> impl Iterator<Item = &'a Sample> + 'a {
    served.iter().filter(move |s| {
        selector.name.as_ref().is_none_or(|n| *n == s.name)
            && selector.matchers.matchers.iter().all(|m| {
                let value = if m.name == "__name__" {
                    s.name.as_str()
                } else {
                    s.labels.get(&m.name).map_or("", String::as_str)
                };
                m.is_match(value)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dashboard(expr: &str) -> Value {
        json!({
            "panels": [{"type": "row", "panels": [{"targets": [{"expr": expr}]}]}],
            "templating": {"list": [
                {"name": "ns", "type": "query", "query": {"query": "label_values(up, namespace)"}},
            ]},
        })
    }

    fn served() -> Vec<Sample> {
        samples(
            "# HELP up x\nup{namespace=\"shop\",name=\"a \\\"b\\\"\"} 1\nrollout_info{phase=\"Paused\"} 1\n",
            &[("job", "canaryd")],
        )
    }

    #[test]
    fn a_query_whose_metric_and_matchers_are_served_resolves_with_variables_substituted() {
        let d = dashboard(
            r#"sum(rate(up{namespace="$ns",job="canaryd"}[$__rate_interval])) / count(rollout_info{phase=~"Paused|Error"} == 1)"#,
        );
        assert_eq!(unserved(&d, &served()), Vec::<String>::new());
        assert_eq!(served()[0].labels["name"], "a \"b\"");
    }

    #[test]
    fn a_metric_a_label_value_or_a_target_label_not_served_is_reported() {
        for expr in [
            "rollout_reconcile_count",
            r#"rollout_info{phase="Error"}"#,
            r#"up{job="argo-rollouts-metrics"}"#,
            "sum(up{namespace=\"$ns\"}) by (",
        ] {
            let problems = unserved(&dashboard(expr), &served());
            assert_eq!(problems.len(), 1, "{expr}: {problems:?}");
        }
        let mut d = dashboard("up");
        d["templating"]["list"][0]["query"] = json!("label_values(up, missing)");
        assert_eq!(unserved(&d, &served()).len(), 1);
    }
}
