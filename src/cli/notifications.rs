//! `canaryd notifications template notify TEMPLATE ROLLOUT`, `trigger run TRIGGER ROLLOUT`, `template get
//! [TEMPLATE]` and `trigger get [TRIGGER]`, the notifications engine's CLI verbs (`pkg/cmd/template.go`, `pkg/cmd/trigger.go`, as
//! `kubectl argo rollouts notifications` ships them): read `argo-rollouts-notification-configmap`, its Secret
//! and the Rollout through the kubeconfig, and show what a template makes (or send it to a recipient) and
//! whether a trigger fires, without waiting for a real Event, or list what is configured. The rules are the daemon's (`crate::notify`).
//! Exit codes: 0 shown or sent (a trigger that fires), 1 a trigger that does not fire, 2 no such template,
//! trigger or Rollout, 4 no cluster, a refused read, or a notification that could not be made or sent.

use clap::{Args as ClapArgs, Subcommand};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use kube::Api;

use super::Exit;
use super::get::Failure;
use crate::engine::notify::config::{CONFIG_MAP, Config, SECRET};
use crate::engine::notify::run_trigger;
use crate::engine::notify::subscriptions::Destination;
use crate::notify::{analysis_runs, deliver, read, render_for, services, settings};

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
    /// The Rollout's namespace; the kubeconfig context's when left out.
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Where the ConfigMap and Secret are read: the Rollout's namespace when left out (as Argo's CLI reads
    /// them); the daemon's (`--notifications-namespace` of `canaryd run`) to try what it sends.
    #[arg(long, global = true)]
    pub config_namespace: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum What {
    /// Notification templates.
    #[command(subcommand)]
    Template(TemplateVerb),
    /// Notification triggers.
    #[command(subcommand)]
    Trigger(TriggerVerb),
}

#[derive(Debug, Subcommand)]
pub enum TemplateVerb {
    /// Render TEMPLATE for ROLLOUT and print it (`--recipient console:stdout`, the default) or send it to
    /// each `--recipient SERVICE:RECIPIENT` through the configured service.
    Notify {
        template: String,
        rollout: String,
        /// `SERVICE:RECIPIENT`, e.g. `slack:my-channel`; repeatable.
        #[arg(long = "recipient", default_value = "console:stdout")]
        recipients: Vec<String>,
    },
    /// List the templates (or TEMPLATE): each name and the first line of its message.
    Get {
        template: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

/// How `get` prints.
#[derive(Debug, ClapArgs)]
pub struct Output {
    /// `wide` (a table, the default), `name` (names only) or `json` (the definitions).
    #[arg(short = 'o', long, default_value = "wide", value_parser = ["wide", "name", "json"])]
    output: String,
}

#[derive(Debug, Subcommand)]
pub enum TriggerVerb {
    /// Evaluate each condition of TRIGGER against ROLLOUT (now, with its AnalysisRuns) and print whether it
    /// fires: exit 0 when one does, 1 when none does.
    Run { trigger: String, rollout: String },
    /// List the triggers (or TRIGGER): each condition's templates and `when`.
    Get {
        trigger: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

pub fn run(args: Args) -> Exit {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("canaryd notifications: cannot start the runtime: {e}");
            return Exit::Error;
        }
    };
    match runtime.block_on(notifications(args)) {
        Ok(exit) => exit,
        Err(failure) => {
            eprintln!("canaryd notifications: {}", failure.message);
            failure.exit
        }
    }
}

/// What both verbs read: the configuration, and the Rollout as the daemon reads it.
struct Read {
    client: kube::Client,
    config: Config,
    reference: ObjectReference,
    rollout: serde_json::Value,
}

async fn notifications(args: Args) -> Result<Exit, Failure> {
    let client = super::cluster::connect().await.map_err(|message| Failure {
        message,
        exit: Exit::Error,
    })?;
    let namespace = args
        .namespace
        .unwrap_or_else(|| client.default_namespace().to_string());
    let config_namespace = args.config_namespace.unwrap_or_else(|| namespace.clone());
    let config = read_config(&client, &config_namespace).await?;
    match args.what {
        What::Template(TemplateVerb::Get { template, output }) => {
            Ok(template_get(&config, template.as_deref(), &output))
        }
        What::Trigger(TriggerVerb::Get { trigger, output }) => {
            Ok(trigger_get(&config, trigger.as_deref(), &output))
        }
        What::Template(TemplateVerb::Notify {
            template,
            rollout,
            recipients,
        }) => {
            let read = read_rollout(client, config, &namespace, &rollout).await?;
            notify(&read, &template, &recipients).await
        }
        What::Trigger(TriggerVerb::Run { trigger, rollout }) => {
            let read = read_rollout(client, config, &namespace, &rollout).await?;
            trigger_run(&read, &trigger).await
        }
    }
}

/// The Rollout `name` in `namespace`, as the daemon reads it, with the configuration.
async fn read_rollout(
    client: kube::Client,
    config: Config,
    namespace: &str,
    name: &str,
) -> Result<Read, Failure> {
    let reference = ObjectReference {
        api_version: Some("argoproj.io/v1alpha1".to_string()),
        kind: Some("Rollout".to_string()),
        namespace: Some(namespace.to_string()),
        name: Some(name.to_string()),
        ..ObjectReference::default()
    };
    let what = format!("rollout {name:?} in namespace {namespace:?}");
    let rollout = match read(&client, &reference).await {
        Ok(rollout) => rollout,
        Err(kube::Error::Api(status)) if status.code == 404 => {
            return Err(Failure {
                message: format!("{what} not found"),
                exit: Exit::Usage,
            });
        }
        Err(e) => return Err(Failure::api(&what, &e)),
    };
    Ok(Read {
        client,
        config,
        reference,
        rollout,
    })
}

/// `template get`: as the notifications engine prints them, an unknown name an empty list.
fn template_get(config: &Config, name: Option<&str>, output: &Output) -> Exit {
    let items = chosen(&config.templates, name);
    let rows = items
        .iter()
        .map(|(name, template)| vec![name.to_string(), preview(template)])
        .collect();
    print_items(&items, output, &["NAME", "PREVIEW"], rows)
}

/// `trigger get`: a row per condition, the trigger's name on its first.
fn trigger_get(config: &Config, name: Option<&str>, output: &Output) -> Exit {
    let items = chosen(&config.triggers, name);
    let mut rows = Vec::new();
    for (name, conditions) in &items {
        for (i, condition) in conditions.iter().enumerate() {
            let shown = if i == 0 { name } else { "" };
            let when = condition.when.as_ref().map_or("", |w| w.source());
            rows.push(vec![
                shown.to_string(),
                condition.send.join(", "),
                when.to_string(),
            ]);
        }
    }
    let definitions: std::collections::BTreeMap<&str, Vec<serde_json::Value>> = items
        .iter()
        .map(|(name, conditions)| {
            let each = conditions.iter().map(|c| {
                let when = c.when.as_ref().map_or("", |w| w.source());
                serde_json::json!({"when": when, "send": c.send})
            });
            (*name, each.collect())
        })
        .collect();
    print_items(
        &definitions,
        output,
        &["NAME", "TEMPLATE", "CONDITION"],
        rows,
    )
}

/// The entries of `all` named `name`, or every one.
fn chosen<'a, T>(
    all: &'a std::collections::BTreeMap<String, T>,
    name: Option<&str>,
) -> std::collections::BTreeMap<&'a str, &'a T> {
    all.iter()
        .filter(|(n, _)| name.is_none_or(|name| name == n.as_str()))
        .map(|(n, v)| (n.as_str(), v))
        .collect()
}

/// A template's preview, as the notifications engine's `Notification.Preview`: the first line of its message,
/// else of its definition as JSON, cut at 100 bytes.
fn preview(template: &serde_json::Value) -> String {
    let text = match template.get("message").and_then(serde_json::Value::as_str) {
        Some(message) if !message.is_empty() => message.to_string(),
        _ => template.to_string(),
    };
    let line = text.lines().next().unwrap_or_default();
    if line.len() > 100 {
        let mut end = 99;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &line[..end])
    } else {
        line.to_string()
    }
}

/// `items` as `output` asks: the table of `rows`, the names, or the JSON.
fn print_items<T: serde::Serialize>(
    items: &std::collections::BTreeMap<&str, T>,
    output: &Output,
    header: &[&str],
    rows: Vec<Vec<String>>,
) -> Exit {
    match output.output.as_str() {
        "name" => items.keys().for_each(|name| println!("{name}")),
        "json" => println!(
            "{}",
            serde_json::to_string_pretty(items).unwrap_or_default()
        ),
        _ => print_table(header, &rows),
    }
    Exit::Ok
}

/// Rows under `header` in columns as Go's tabwriter aligns them (two spaces apart, at least five wide).
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let all: Vec<&Vec<String>> = std::iter::once(&header).chain(rows).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            let widest = all.iter().map(|r| r.get(c).map_or(0, String::len)).max();
            (widest.unwrap_or(0) + 2).max(5)
        })
        .collect();
    for row in all {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}", width = widths[c]));
            }
        }
        println!("{line}");
    }
}

/// The configuration in `namespace`; the keys that cannot be read are said on stderr, as the daemon logs them.
async fn read_config(client: &kube::Client, namespace: &str) -> Result<Config, Failure> {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let config_map = config_maps
        .get_opt(CONFIG_MAP)
        .await
        .map_err(|e| Failure::api(&format!("configmap {CONFIG_MAP:?}"), &e))?;
    let secret = secrets
        .get_opt(SECRET)
        .await
        .map_err(|e| Failure::api(&format!("secret {SECRET:?}"), &e))?;
    if config_map.is_none() {
        return Err(Failure {
            message: format!("configmap {CONFIG_MAP:?} not found in namespace {namespace:?}"),
            exit: Exit::Usage,
        });
    }
    let (config, errors) = settings::read(config_map.as_ref(), secret.as_ref());
    for error in errors {
        eprintln!("canaryd notifications: {error}; the other keys apply");
    }
    Ok(config)
}

/// `names`, comma-separated, for a message that lists what exists.
fn listed<'a>(names: impl Iterator<Item = &'a String>) -> String {
    names.map(String::as_str).collect::<Vec<_>>().join(", ")
}

async fn notify(read: &Read, template: &str, recipients: &[String]) -> Result<Exit, Failure> {
    let config = &read.config;
    if !config.templates.contains_key(template) {
        return Err(Failure {
            message: format!(
                "template '{template}' does not exist (found {})",
                listed(config.templates.keys())
            ),
            exit: Exit::Usage,
        });
    }
    let templates = [template.to_string()];
    let runs = analysis_runs(&read.client, &read.reference, &read.rollout).await;
    let http = services::http_client();
    let mut exit = Exit::Ok;
    for recipient in recipients {
        let (service, to) = recipient.split_once(':').unwrap_or((recipient, ""));
        let destination = Destination {
            service: service.to_string(),
            recipient: to.to_string(),
        };
        let outcome = if service == "console" {
            render_for(config, &read.rollout, &runs, &destination, &templates).map(|notification| {
                let text = serde_json::to_string_pretty(&notification).unwrap_or_default();
                println!("{text}");
            })
        } else {
            deliver(
                &http,
                config,
                &read.rollout,
                &runs,
                &destination,
                &templates,
            )
            .await
        };
        if let Err(e) = outcome {
            let e = crate::engine::scrub::text(e, &config.secrets.0);
            eprintln!("canaryd notifications: failed to notify '{recipient}': {e}");
            exit = Exit::Error;
        }
    }
    Ok(exit)
}

async fn trigger_run(read: &Read, trigger: &str) -> Result<Exit, Failure> {
    let config = &read.config;
    let runs = analysis_runs(&read.client, &read.reference, &read.rollout).await;
    let now = crate::time::Clock::Wall.now();
    let results =
        run_trigger(config, trigger, &read.rollout, &runs, now).map_err(|message| Failure {
            message: format!("failed to execute trigger {trigger}: {message}"),
            exit: Exit::Error,
        })?;
    let Some(results) = results else {
        return Err(Failure {
            message: format!(
                "trigger with name '{trigger}' does not exist (found {})",
                listed(config.triggers.keys())
            ),
            exit: Exit::Usage,
        });
    };
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|(condition, fires)| {
            let when = condition.when.as_ref().map_or("", |w| w.source());
            vec![when.to_string(), fires.to_string()]
        })
        .collect();
    print_table(&["CONDITION", "RESULT"], &rows);
    Ok(if results.iter().any(|(_, fires)| *fires) {
        Exit::Ok
    } else {
        Exit::Negative
    })
}
