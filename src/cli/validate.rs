//! `canaryd validate PATH...`: reads every AnalysisTemplate, ClusterAnalysisTemplate, AnalysisRun, Rollout and
//! ApplicationSet in the given files and folders and prints one line per problem, `FILE:LINE: Kind/name: field.path: message`
//! (or the same findings as JSON). Services and router objects are read for the Rollouts' checks; other kinds
//! are skipped, and so is a whole file that is a Helm template (`helm_template`), with a note. The checks
//! themselves are `engine::template`'s (analysis kinds), `validate_rollout`'s (Rollouts) and `appset`'s; this
//! module reads files, decodes objects, dispatches on kind and places each finding on its line.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use k8s_openapi::api::core::v1::Service;

use super::appset;
use super::load::{self, SourceDoc};
use super::located::Located;
use super::{Exit, OutputFormat, helm_template, validate_rollout};
use crate::api::{self, AnalysisTemplateRef, AnalysisTemplateSpec};
use crate::engine::rollout::spec;
use crate::engine::routing::memory::is_router_object;
use crate::engine::template::{self, Finding, Severity, SpecView};
use crate::providers::registry::Providers;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or folders holding AnalysisTemplates, ClusterAnalysisTemplates, AnalysisRuns, Rollouts and
    /// ApplicationSets (folders are searched recursively for *.yaml and *.yml; other kinds are skipped).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// `text`: one line per problem; `json`: one JSON document with every finding.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// canaryd will progress these Rollouts (it runs with `--rollouts`): what its Rollout controller does not
    /// support is an error, not a warning.
    #[arg(long)]
    pub rollouts: bool,
    #[command(flatten)]
    pub inventory: appset::InventoryArgs,
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub valid: bool,
    pub files: usize,
    pub objects: usize,
    pub skipped: usize,
    pub findings: Vec<Located>,
    /// Files skipped whole, each with why (a Helm template), as printed on stderr.
    pub notes: Vec<String>,
}

/// An analysis object decoded from a document.
enum Object {
    Template(Box<api::AnalysisTemplate>),
    ClusterTemplate(Box<api::ClusterAnalysisTemplate>),
    Run(Box<api::AnalysisRun>),
    Rollout(Box<api::Rollout>),
}

const KINDS: &[&str] = &[
    "AnalysisTemplate",
    "ClusterAnalysisTemplate",
    "AnalysisRun",
    "Rollout",
];

/// Validates already-loaded documents; `progressed`: canaryd progresses the Rollouts (see
/// [`validate_rollout::Given`]). Split from [`run`] so other commands can reuse the same checks.
pub fn validate_documents(docs: &[SourceDoc], progressed: bool) -> (Vec<Located>, usize, usize) {
    let mut findings = Vec::new();
    let mut decoded: Vec<(&SourceDoc, Object)> = Vec::new();
    let mut services = Vec::new();
    let mut router_objects = Vec::new();
    let mut skipped = 0;
    for doc in docs {
        let Some(kind) = doc.kind().filter(|k| KINDS.contains(k)) else {
            read_referenced(doc, &mut services, &mut router_objects, &mut findings);
            skipped += 1;
            continue;
        };
        if let Some(object) = decode_document(doc, kind, &mut findings) {
            decoded.push((doc, object));
        }
    }

    let templates = templates_by_key(&decoded);
    let lookup = |r: &AnalysisTemplateRef| {
        let name = r.template_name.as_deref().unwrap_or_default();
        templates
            .get(&(r.cluster_scope == Some(true), name))
            .copied()
    };
    let template_names: Vec<(bool, &str)> = templates.keys().copied().collect();
    let given = validate_rollout::Given {
        templates: &template_names,
        services: &services,
        router_objects: &router_objects,
        progressed,
    };

    for (doc, object) in &decoded {
        let object_findings = match object {
            Object::Rollout(r) => validate_rollout::check(r, &lookup, &given),
            Object::Template(t) => {
                analysis_findings(&t.metadata, SpecView::of_template(&t.spec), &lookup)
            }
            Object::ClusterTemplate(t) => {
                analysis_findings(&t.metadata, SpecView::of_template(&t.spec.0), &lookup)
            }
            Object::Run(r) => analysis_findings(&r.metadata, SpecView::of_run(&r.spec), &lookup),
        };
        findings.extend(object_findings.into_iter().map(|f| {
            let mut located = Located::at(doc, f);
            if let Object::Rollout(r) = object {
                // Argo names a strategy's field one level up; its line is where it is written.
                located.line = doc.line_of(&spec::written_at(&located.path, r));
            }
            located
        }));
    }
    (findings, decoded.len(), skipped)
}

/// Keeps a document a Rollout's reconcile reads: a Service (one that does not decode is an error on its
/// field) or a router object, with where it was read.
fn read_referenced(
    doc: &SourceDoc,
    services: &mut Vec<Service>,
    router_objects: &mut Vec<(String, serde_json::Value)>,
    findings: &mut Vec<Located>,
) {
    if doc.kind() == Some("Service") {
        match serde_path_to_error::deserialize::<_, Service>(&doc.value) {
            Ok(service) => services.push(service),
            Err(e) => findings.push(Located::at(
                doc,
                Finding::error(e.path().to_string(), e.inner().to_string()),
            )),
        }
    } else if is_router_object(&doc.value) {
        let origin = format!("{}:{}", doc.file.display(), doc.line);
        router_objects.push((origin, doc.value.clone()));
    }
}

/// Decodes one document of `kind` (one of [`KINDS`]); what stops it (a wrong apiVersion, a field that does
/// not decode) and what it carries that canaryd ignores or the API server rejects (unknown fields, unquoted
/// arg values) go to `findings`, placed on their lines.
fn decode_document(doc: &SourceDoc, kind: &str, findings: &mut Vec<Located>) -> Option<Object> {
    let place = |path: &str, severity, message: String| Located {
        file: doc.file.display().to_string(),
        line: doc.line_of(path),
        kind: Some(kind.to_string()),
        name: doc.name().map(str::to_string),
        path: path.to_string(),
        severity,
        message,
    };
    if let Some(message) = doc.wrong_api_version() {
        findings.push(place("apiVersion", Severity::Error, message));
        return None;
    }
    // A missing metadata is reported as a missing name, below, rather than as a decoding failure.
    let mut value = doc.value.clone();
    if let Some(map) = value.as_object_mut() {
        map.entry("metadata")
            .or_insert_with(|| serde_json::json!({}));
    }
    let args = value.pointer("/spec/args").and_then(|a| a.as_array());
    for (i, arg) in args.into_iter().flatten().enumerate() {
        if let Some(v) = arg.get("value").filter(|v| v.is_number() || v.is_boolean()) {
            findings.push(place(
                &format!("spec.args[{i}].value"),
                Severity::Warning,
                format!(
                    "{v} is not a string; canaryd reads it as \"{v}\", but the Kubernetes API server \
                     rejects it: quote it"
                ),
            ));
        }
    }
    let result = match kind {
        "AnalysisTemplate" => {
            crate::api::decode::decode(&value).map(|(o, u)| (Object::Template(Box::new(o)), u))
        }
        "ClusterAnalysisTemplate" => crate::api::decode::decode(&value)
            .map(|(o, u)| (Object::ClusterTemplate(Box::new(o)), u)),
        "Rollout" => {
            crate::api::decode::decode(&value).map(|(o, u)| (Object::Rollout(Box::new(o)), u))
        }
        _ => crate::api::decode::decode(&value).map(|(o, u)| (Object::Run(Box::new(o)), u)),
    };
    match result {
        Err(e) => {
            findings.push(place(&e.path, Severity::Error, e.message));
            None
        }
        Ok((object, unknown)) => {
            for u in unknown {
                findings.push(place(&u.path, Severity::Error, u.message));
            }
            Some(object)
        }
    }
}

/// The decoded templates and cluster templates, by (cluster-scoped, name), for nested references.
fn templates_by_key<'a>(
    decoded: &'a [(&SourceDoc, Object)],
) -> BTreeMap<(bool, &'a str), &'a AnalysisTemplateSpec> {
    let mut templates: BTreeMap<(bool, &str), &AnalysisTemplateSpec> = BTreeMap::new();
    for (_, object) in decoded {
        match object {
            Object::Template(t) => {
                templates.insert(
                    (false, t.metadata.name.as_deref().unwrap_or_default()),
                    &t.spec,
                );
            }
            Object::ClusterTemplate(t) => {
                templates.insert(
                    (true, t.metadata.name.as_deref().unwrap_or_default()),
                    &t.spec.0,
                );
            }
            Object::Run(_) | Object::Rollout(_) => {}
        }
    }
    templates
}

/// The findings of an analysis object: a name (or, for a run, a generateName), then `engine::template`'s.
fn analysis_findings(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    view: SpecView<'_>,
    lookup: &crate::engine::template::Lookup<'_>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let named = metadata.name.as_deref().is_some_and(|n| !n.is_empty())
        || (view.is_run
            && metadata
                .generate_name
                .as_deref()
                .is_some_and(|n| !n.is_empty()));
    if !named {
        findings.push(Finding {
            severity: Severity::Error,
            path: "metadata.name".to_string(),
            message: "required".to_string(),
        });
    }
    findings.extend(template::check(view, lookup, &Providers::new(None)));
    findings
}

/// Reads and validates the given paths; ApplicationSets against `inventory`; `progressed` as for
/// [`validate_documents`].
pub fn validate_paths(
    paths: &[PathBuf],
    inventory: &appset::Inventory,
    progressed: bool,
) -> Result<Report, load::LoadError> {
    let files = load::collect_files(paths)?;
    let mut docs = Vec::new();
    let mut findings = Vec::new();
    let mut notes = Vec::new();
    for file in &files {
        let text = load::read_file(file)?;
        if helm_template::first_action_line(&text).is_some() {
            notes.push(format!(
                "{}: skipped: Helm template; render it with `helm template` and validate the output",
                file.display()
            ));
            continue;
        }
        let (file_docs, error) = load::parse_documents(file, &text);
        if let Some(e) = error {
            if e.line == 0 {
                return Err(e);
            }
            findings.push(Located {
                file: e.file.display().to_string(),
                line: e.line,
                kind: None,
                name: None,
                path: String::new(),
                severity: Severity::Error,
                message: e.message,
            });
        }
        docs.extend(file_docs);
    }
    let (appsets, docs): (Vec<SourceDoc>, Vec<SourceDoc>) = docs
        .into_iter()
        .partition(|d| d.kind() == Some(appset::KIND));
    let (object_findings, objects, skipped) = validate_documents(&docs, progressed);
    findings.extend(object_findings);
    for doc in &appsets {
        findings.extend(appset::check(doc, inventory).findings);
    }
    let objects = objects + appsets.len();
    // Files in the order given, lines in order within a file (stable: one line's findings keep their order).
    let order: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    findings.sort_by_key(|f| (order.iter().position(|o| *o == f.file), f.line));
    let valid = !findings.iter().any(|f| f.severity == Severity::Error);
    Ok(Report {
        valid,
        files: files.len(),
        objects,
        skipped,
        findings,
        notes,
    })
}

pub fn run(args: Args) -> Exit {
    let inventory = match args.inventory.load() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("canaryd validate: {e}");
            return Exit::Usage;
        }
    };
    let report = match validate_paths(&args.paths, &inventory, args.rollouts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("canaryd validate: {e}");
            return Exit::Usage;
        }
    };
    let written = super::write_report(args.output, &report, |out| {
        report
            .findings
            .iter()
            .try_for_each(|f| writeln!(out, "{f}"))
    });
    if written.is_err() {
        return Exit::Error;
    }
    for note in &report.notes {
        eprintln!("{note}");
    }
    let errors = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = report.findings.len() - errors;
    eprintln!(
        "{} object(s) in {} file(s): {} error(s), {} warning(s){}",
        report.objects,
        report.files,
        errors,
        warnings,
        if report.skipped > 0 {
            format!(", {} other document(s) skipped", report.skipped)
        } else {
            String::new()
        }
    );
    if report.valid {
        Exit::Ok
    } else {
        Exit::Negative
    }
}
