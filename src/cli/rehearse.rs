//! `canaryd rehearse`: what a Rollout would have done had it shipped at `--from`. The Rollout, its templates
//! (and Services and router objects when given) are read from files and checked as `validate` checks them;
//! `rehearsal::play` plays the steps with the daemon's planner on a virtual clock, measuring against
//! Prometheus history; `rehearse_report` prints the timeline and the outcome and maps it onto the exit code
//! (0 promoted, 1 aborted, 3 waiting for a person, 2 bad input). `--every/--until` is `rehearse_many`'s.
//! This module owns the flags and reading the files into a [`Setup`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Service, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::load::{self, SourceDoc};
use super::located::Located;
use super::validate::validate_documents;
use super::{Exit, OutputFormat};
use crate::api::{self, AnalysisTemplateRef, Rollout};
use crate::engine::rollout::analysis::{self, Missing};
use crate::engine::rollout::reconcile_loop::{Templates, template_key};
use crate::engine::routing::memory::{Routers, is_router_object};
use crate::engine::template::{Finding, Severity};
use crate::measure::Providers;
use crate::rehearsal::{Options, Setup};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or folders holding the Rollout and the templates it names (Services, an Istio VirtualService or
    /// a Gateway API HTTPRoute are used when present).
    #[arg(short = 'f', long = "file", required = true)]
    pub files: Vec<PathBuf>,
    /// The Rollout to rehearse, when the files hold several.
    #[arg(long)]
    pub rollout: Option<String>,
    /// Prometheus address for every prometheus metric, overriding the templates'.
    #[arg(long)]
    pub prometheus: Option<String>,
    /// When the new revision ships (RFC 3339): the virtual clock starts here.
    #[arg(long)]
    pub from: Timestamp,
    /// Stop here if the rollout has not ended (it then counts as waiting).
    #[arg(long, conflicts_with = "every")]
    pub to: Option<Timestamp>,
    /// An arg value, NAME=VALUE (repeatable); wins over the Rollout's and the template's.
    #[arg(long = "arg", value_parser = super::analyze::parse_arg)]
    pub args: Vec<(String, String)>,
    /// How long new pods take to become available (a Go duration: 30s, 2m).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub ready_after: SignedDuration,
    /// Promote an indefinite pause or an Inconclusive analysis this long after it began; without it the
    /// rehearsal ends there, waiting for a person.
    #[arg(long, value_parser = parse_duration)]
    pub promote_after: Option<SignedDuration>,
    /// Rehearse one start per period from --from until --until, and print how many would have promoted,
    /// aborted or waited.
    #[arg(long, value_parser = parse_duration, requires = "until")]
    pub every: Option<SignedDuration>,
    /// The last start of --every (RFC 3339).
    #[arg(long, requires = "every")]
    pub until: Option<Timestamp>,
    /// `text`: the timeline and the outcome; `json`: one JSON object per line, the last the outcome with
    /// the Rollout's final status.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Also write the timeline and each analysis's charts to FILE as one self-contained HTML page.
    #[arg(long, value_name = "FILE", conflicts_with = "every")]
    pub report: Option<PathBuf>,
}

fn parse_duration(text: &str) -> Result<SignedDuration, String> {
    let d = api::duration::parse_duration(text).map_err(|e| e.to_string())?;
    SignedDuration::try_from(d).map_err(|e| format!("{text:?}: {e}"))
}

/// A bad-input problem, already phrased for the user (file, object, field where there is one).
#[derive(Debug)]
pub struct BadInput(pub String);

/// Reads, checks and assembles what a rehearsal needs from documents. A problem in any document is
/// reported as `validate` reports it; a template the Rollout names but the files lack is an error here.
pub fn setup_from_docs(
    docs: &[SourceDoc],
    wanted: Option<&str>,
    args: &[(String, String)],
    prometheus: Option<&str>,
) -> Result<Setup, BadInput> {
    refuse_invalid(docs)?;
    let Decoded {
        templates,
        template_docs,
        rollouts,
        mut services,
        router_objects,
    } = decode_documents(docs)?;
    let (doc, rollout) = choose_rollout(rollouts, wanted)?;
    let named = named_templates(doc, &rollout, &templates)?;
    refuse_jobs(&named, &templates, &template_docs)?;
    let at = |f: Finding| BadInput(Located::at(doc, f).to_string());
    let routers = Routers::new(&rollout, router_objects).map_err(|e| match e {
        crate::engine::routing::RoutingError::Config { field, message } => {
            at(Finding::error(field, message))
        }
        other => BadInput(other.to_string()),
    })?;
    add_named_services(&rollout, &mut services);
    Ok(Setup {
        rollout,
        templates,
        services,
        routers,
        args: args.to_vec(),
        prometheus: prometheus.map(str::to_string),
    })
}

/// The errors `validate` finds in the documents, if any, as one bad input.
fn refuse_invalid(docs: &[SourceDoc]) -> Result<(), BadInput> {
    let (findings, _, _) = validate_documents(docs, true);
    let errors: Vec<String> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(ToString::to_string)
        .collect();
    if !errors.is_empty() {
        return Err(BadInput(errors.join("\n")));
    }
    Ok(())
}

/// What the documents hold that a rehearsal uses, decoded.
struct Decoded<'a> {
    templates: Templates,
    /// The document each of `templates` was read from, by the same key.
    template_docs: BTreeMap<(bool, String), &'a SourceDoc>,
    rollouts: Vec<(&'a SourceDoc, Rollout)>,
    services: Vec<Service>,
    /// The router objects (VirtualServices, HTTPRoutes, Ingresses), each with where it was read (file:line).
    router_objects: Vec<(String, serde_json::Value)>,
}

/// Decodes the templates, Rollouts, Services and router objects among the documents; the first that does
/// not decode is a bad input, located at its document and field.
fn decode_documents(docs: &[SourceDoc]) -> Result<Decoded<'_>, BadInput> {
    let mut templates = Templates::new();
    let mut template_docs: BTreeMap<(bool, String), &SourceDoc> = BTreeMap::new();
    let mut rollouts: Vec<(&SourceDoc, Rollout)> = Vec::new();
    let mut services: Vec<Service> = Vec::new();
    let mut router_objects = Vec::new();
    for doc in docs {
        let name = doc.name().unwrap_or_default().to_string();
        let decoded = match doc.kind() {
            Some("AnalysisTemplate") => api::decode::decode::<api::AnalysisTemplate>(&doc.value)
                .map(|(t, _)| {
                    template_docs.insert((false, name.clone()), doc);
                    templates.insert((false, name), t.spec);
                }),
            Some("ClusterAnalysisTemplate") => {
                api::decode::decode::<api::ClusterAnalysisTemplate>(&doc.value).map(|(t, _)| {
                    template_docs.insert((true, name.clone()), doc);
                    templates.insert((true, name), t.spec.0);
                })
            }
            Some("Rollout") => {
                api::decode::decode::<Rollout>(&doc.value).map(|(r, _)| rollouts.push((doc, r)))
            }
            Some("Service") => serde_path_to_error::deserialize::<_, Service>(&doc.value)
                .map(|s| services.push(s))
                .map_err(|e| api::decode::FieldError {
                    path: e.path().to_string(),
                    message: e.inner().to_string(),
                }),
            Some(_) if is_router_object(&doc.value) => {
                let origin = format!("{}:{}", doc.file.display(), doc.line);
                router_objects.push((origin, doc.value.clone()));
                Ok(())
            }
            _ => Ok(()),
        };
        decoded.map_err(|e| {
            BadInput(Located::at(doc, Finding::error(e.path, e.message)).to_string())
        })?;
    }
    Ok(Decoded {
        templates,
        template_docs,
        rollouts,
        services,
        router_objects,
    })
}

/// The Rollout to rehearse, with its document: the one `--rollout` names, or the only one the files hold.
fn choose_rollout<'a>(
    mut rollouts: Vec<(&'a SourceDoc, Rollout)>,
    wanted: Option<&str>,
) -> Result<(&'a SourceDoc, Rollout), BadInput> {
    let names: Vec<String> = rollouts
        .iter()
        .map(|(_, r)| r.metadata.name.clone().unwrap_or_default())
        .collect();
    let chosen = match wanted {
        Some(w) => rollouts
            .into_iter()
            .find(|(_, r)| r.metadata.name.as_deref() == Some(w))
            .ok_or_else(|| {
                BadInput(format!(
                    "--rollout {w}: not found; the files hold {}",
                    if names.is_empty() {
                        "no Rollout".to_string()
                    } else {
                        names.join(", ")
                    }
                ))
            })?,
        None if rollouts.len() == 1 => rollouts.remove(0),
        None if rollouts.is_empty() => {
            return Err(BadInput("the files hold no Rollout".to_string()));
        }
        None => {
            return Err(BadInput(format!(
                "the files hold several Rollouts ({}): choose one with --rollout NAME",
                names.join(", ")
            )));
        }
    };
    Ok(chosen)
}

/// The keys of the templates the Rollout (read from `doc`) names; a named template the files lack is a bad
/// input, located at the Rollout.
fn named_templates(
    doc: &SourceDoc,
    rollout: &Rollout,
    templates: &Templates,
) -> Result<BTreeSet<(bool, String)>, BadInput> {
    let named = std::cell::RefCell::new(BTreeSet::new());
    let lookup = |r: &AnalysisTemplateRef| {
        let key = template_key(r);
        let found = templates.get(&key);
        named.borrow_mut().insert(key);
        found
    };
    let missing: Vec<String> = analysis::template_findings(rollout, &lookup, Missing::Error)
        .into_iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| Located::at(doc, f).to_string())
        .collect();
    if !missing.is_empty() {
        return Err(BadInput(missing.join("\n")));
    }
    Ok(named.into_inner())
}

/// Refuses the `named` templates' Job metrics, each located at its template's document.
fn refuse_jobs(
    named: &BTreeSet<(bool, String)>,
    templates: &Templates,
    template_docs: &BTreeMap<(bool, String), &SourceDoc>,
) -> Result<(), BadInput> {
    // A Job cannot run in the past: measured, it would be an Error and the rehearsal a made-up abort.
    let jobs: Vec<String> = named
        .iter()
        .filter_map(|key| Some((templates.get(key)?, template_docs.get(key)?)))
        .flat_map(|(spec, template_doc)| {
            spec.metrics
                .iter()
                .flatten()
                .enumerate()
                .filter(|(_, m)| m.provider.job.is_some())
                .map(move |(i, m)| {
                    let message = format!(
                        "metric {:?} runs a Kubernetes Job, which a rehearsal cannot run",
                        m.name
                    );
                    let field = format!("spec.metrics[{i}].provider.job");
                    Located::at(template_doc, Finding::error(field, message)).to_string()
                })
        })
        .collect();
    if !jobs.is_empty() {
        return Err(BadInput(jobs.join("\n")));
    }
    Ok(())
}

/// The canary and stable Services the Rollout names and the files lack, selecting the Rollout's pods as a
/// user's Services would.
fn add_named_services(rollout: &Rollout, services: &mut Vec<Service>) {
    let canary = rollout.spec.canary();
    let named = [
        canary.and_then(|c| c.canary_service.clone()),
        canary.and_then(|c| c.stable_service.clone()),
    ];
    let selector = rollout
        .spec
        .selector
        .as_ref()
        .and_then(|s| s.match_labels.clone())
        .unwrap_or_default();
    for name in named.into_iter().flatten().filter(|n| !n.is_empty()) {
        if !services
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some(&name))
        {
            services.push(Service {
                metadata: ObjectMeta {
                    name: Some(name),
                    ..Default::default()
                },
                spec: Some(ServiceSpec {
                    selector: Some(selector.clone()),
                    ..Default::default()
                }),
                status: None,
            });
        }
    }
}

fn load(args: &Args) -> Result<Setup, BadInput> {
    let files = load::collect_files(&args.files).map_err(|e| BadInput(e.to_string()))?;
    let mut docs: Vec<SourceDoc> = Vec::new();
    for file in &files {
        let (file_docs, error) = load::load_file(file);
        if let Some(e) = error {
            return Err(BadInput(e.to_string()));
        }
        docs.extend(file_docs);
    }
    setup_from_docs(
        &docs,
        args.rollout.as_deref(),
        &args.args,
        args.prometheus.as_deref(),
    )
}

/// The metrics of every template the Rollout's analyses name, with their Prometheus address resolved as far
/// as the files tell before anything runs: the template's default, the Rollout's literal value, `--arg`
/// (in that order of precedence, as a run resolves them). An address that needs what only a run knows stays
/// templated, and the preflight leaves it to the run.
fn known_metrics(setup: &Setup) -> Vec<api::Metric> {
    let supplied: BTreeMap<&str, &str> = setup
        .args
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut metrics = Vec::new();
    for named in setup
        .rollout
        .spec
        .canary()
        .into_iter()
        .flat_map(|c| c.analyses())
    {
        let given = named.analysis.args.iter().flatten();
        for reference in named.analysis.templates.iter().flatten() {
            let Some(template) = setup.templates.get(&template_key(reference)) else {
                continue;
            };
            let mut values: BTreeMap<String, Option<String>> = template
                .args
                .iter()
                .flatten()
                .map(|a| (a.name.clone(), a.value.clone()))
                .collect();
            for arg in given.clone().filter(|a| a.value.is_some()) {
                values.insert(arg.name.clone(), arg.value.clone());
            }
            for (name, value) in &supplied {
                values.insert((*name).to_string(), Some((*value).to_string()));
            }
            for metric in template.metrics.iter().flatten() {
                let mut metric = metric.clone();
                if let Some(address) = metric
                    .provider
                    .prometheus
                    .as_mut()
                    .and_then(|p| p.address.as_mut())
                    && let Ok(resolved) =
                        crate::engine::args::substitute(address, &values, &|_| None)
                {
                    *address = resolved;
                }
                metrics.push(metric);
            }
        }
    }
    metrics
}

pub fn run(args: Args) -> Exit {
    let setup = match load(&args) {
        Ok(s) => s,
        Err(BadInput(message)) => {
            eprintln!("canaryd rehearse: {message}");
            return Exit::Usage;
        }
    };
    if let Some(to) = args.to
        && to <= args.from
    {
        eprintln!(
            "canaryd rehearse: --to {to} must be after --from {}",
            args.from
        );
        return Exit::Usage;
    }
    let opts = Options {
        from: args.from,
        to: args.to,
        ready_after: args.ready_after,
        promote_after: args.promote_after,
    };
    let providers = Providers::new(crate::providers::default_address_from_env())
        .with_batched_prometheus(args.to);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("canaryd rehearse: cannot start the runtime: {e}");
            return Exit::Error;
        }
    };
    let starts = match (args.every, args.until) {
        (Some(every), Some(until)) => match super::rehearse_many::starts(args.from, every, until) {
            Ok(starts) => Some(starts),
            Err(message) => {
                eprintln!("canaryd rehearse: {message}");
                return Exit::Usage;
            }
        },
        _ => None,
    };
    let metrics = known_metrics(&setup);
    let checked =
        runtime.block_on(providers.check_prometheus(&metrics, setup.prometheus.as_deref()));
    if let Err(message) = checked {
        eprintln!("canaryd rehearse: {message} (nothing was rehearsed)");
        return Exit::Usage;
    }
    let report = match super::report_file::open("rehearse", args.report.as_deref()) {
        Ok(report) => report,
        Err(exit) => return exit,
    };
    match starts {
        Some(starts) => runtime.block_on(super::rehearse_many::run(
            &setup,
            &providers,
            &opts,
            &starts,
            args.output,
        )),
        None => runtime.block_on(super::rehearse_report::show(
            &setup,
            &providers,
            &opts,
            args.output,
            report,
        )),
    }
}
