//! `canaryd get rollout NAME` and `canaryd get rollouts`: read a Rollout with the ReplicaSets, pods and
//! AnalysisRuns it owns (or every Rollout of a namespace) through the kubeconfig, as kubectl does, and print
//! what `crate::view` makes of them; `--watch` is `get_watch`'s. Exit codes: 0 shown, 2 the Rollout does not
//! exist, 4 no cluster or the API server refused or failed.

use std::io::Write;

use clap::{Args as ClapArgs, Subcommand};
use kube::Api;
use kube::api::ListParams;

use super::{Exit, OutputFormat};
use crate::api::Rollout;
use crate::k8s::rollout_reads::{self, Listed};
use crate::view;

#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, Subcommand)]
pub enum What {
    /// One Rollout: its status, step and weights, images, replicas, and the tree of its revisions with their
    /// ReplicaSets, pods and AnalysisRuns (each metric's last measurements).
    Rollout(RolloutArgs),
    /// A table of the Rollouts of a namespace (or of all, with -A).
    Rollouts(ListArgs),
}

#[derive(Debug, ClapArgs)]
pub struct RolloutArgs {
    /// The Rollout's name.
    pub name: String,
    /// The namespace; the kubeconfig context's when left out.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Keep watching: redraw on every change of the Rollout, its ReplicaSets, pods or AnalysisRuns (in place
    /// on a terminal; otherwise one snapshot per change) until Ctrl-C.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// `text` (the view kubectl-argo-rollouts shows) or `json` (the view model, docs/schemas/get-rollout.schema.json;
    /// with --watch, one document per line).
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

#[derive(Debug, ClapArgs)]
pub struct ListArgs {
    /// The namespace; the kubeconfig context's when left out.
    #[arg(short = 'n', long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Every namespace, with a NAMESPACE column.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

/// A failure, said on stderr, and the exit code it maps onto.
pub struct Failure {
    pub message: String,
    pub exit: Exit,
}

impl Failure {
    /// What the API server's refusal or failure of a request about `what` means to the user: exit 4.
    pub fn api(what: &str, e: &kube::Error) -> Failure {
        let message = match e {
            kube::Error::Api(status) if status.code == 403 => {
                format!("not allowed to read {what}: {}", status.message)
            }
            _ => format!("cannot read {what}: {e}"),
        };
        Failure {
            message,
            exit: Exit::Error,
        }
    }
}

pub fn run(args: Args) -> Exit {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("canaryd get: cannot start the runtime: {e}");
            return Exit::Error;
        }
    };
    let outcome = runtime.block_on(async {
        let client = super::cluster::connect().await.map_err(|message| Failure {
            message,
            exit: Exit::Error,
        })?;
        match args.what {
            What::Rollout(args) => rollout(client, args).await,
            What::Rollouts(args) => rollouts(client, args).await,
        }
    });
    match outcome {
        Ok(exit) => exit,
        Err(failure) => {
            eprintln!("canaryd get: {}", failure.message);
            failure.exit
        }
    }
}

async fn rollout(client: kube::Client, args: RolloutArgs) -> Result<Exit, Failure> {
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let rollout = read_rollout(&client, &namespace, &args.name).await?;
    if args.watch {
        return super::get_watch::watch(client, rollout, args.output).await;
    }
    let owned = read_owned(&client, &rollout).await?;
    let view = view::rollout_view(&rollout, &owned.borrowed());
    let now = crate::time::Clock::Wall.now();
    let written = super::write_report(args.output, &view, |out| {
        out.write_all(view::text::rollout(&view, now).as_bytes())
    });
    Ok(if written.is_ok() {
        Exit::Ok
    } else {
        Exit::Error
    })
}

/// The Rollout `name` in `namespace`; exit 2 when there is none.
pub async fn read_rollout(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Rollout, Failure> {
    let what = format!("rollout {name:?} in namespace {namespace:?}");
    let api: Api<Rollout> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(name).await {
        Ok(Some(rollout)) => Ok(rollout),
        Ok(None) => Err(Failure {
            message: format!("{what} not found"),
            exit: Exit::Usage,
        }),
        Err(e) => Err(Failure::api(&what, &e)),
    }
}

async fn read_owned(client: &kube::Client, rollout: &Rollout) -> Result<Listed, Failure> {
    rollout_reads::owned(client, rollout)
        .await
        .map_err(|e| Failure::api(&e.what, &e.error))
}

async fn rollouts(client: kube::Client, args: ListArgs) -> Result<Exit, Failure> {
    let (api, what): (Api<Rollout>, String) = if args.all_namespaces {
        (Api::all(client.clone()), "rollouts".to_string())
    } else {
        let namespace = args
            .namespace
            .unwrap_or_else(|| client.default_namespace().to_string());
        let what = format!("rollouts in namespace {namespace:?}");
        (Api::namespaced(client.clone(), &namespace), what)
    };
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Failure::api(&what, &e))?;
    if listed.items.is_empty() {
        eprintln!("No resources found.");
        return Ok(Exit::Ok);
    }
    let mut rows: Vec<view::RolloutRow> = listed.items.iter().map(view::rollout_row).collect();
    rows.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let table = view::text::rollouts(&rows, args.all_namespaces);
    let mut out = std::io::stdout().lock();
    let written = out.write_all(table.as_bytes()).and_then(|()| out.flush());
    Ok(if written.is_ok() {
        Exit::Ok
    } else {
        Exit::Error
    })
}
