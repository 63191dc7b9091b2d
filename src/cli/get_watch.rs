//! `canaryd get rollout NAME --watch`: watches (never polls) the Rollout, the ReplicaSets, pods and
//! AnalysisRuns its selector labels, and shows the view again after each change that alters it. On a terminal
//! the view is redrawn in place on the alternate screen, which Ctrl-C leaves for the screen as it was; without
//! one, each snapshot is printed after a `---` line (JSON: one document per line).

use std::io::{IsTerminal, Write};
use std::pin::pin;

use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;

use super::get::Failure;
use super::{Exit, OutputFormat};
use crate::api::{AnalysisRun, Rollout};
use crate::k8s::rollout_writes::owned_selector;
use crate::view::{self, Owned};

/// The alternate screen on, the cursor hidden; and back.
const ENTER_SCREEN: &str = "\x1b[?1049h\x1b[?25l";
const LEAVE_SCREEN: &str = "\x1b[?25h\x1b[?1049l";
/// Home, then clear the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// Each kind watched: whether its first list is in (the view waits for all four).
const KINDS: usize = 4;

/// What was watched, kept current by its watchers.
struct Stores {
    rollout: Store<Rollout>,
    replica_sets: Store<ReplicaSet>,
    pods: Store<Pod>,
    analysis_runs: Store<AnalysisRun>,
}

/// Watches `rollout` and what it owns until Ctrl-C (exit 0) or a watch the API server refuses (exit 4).
pub async fn watch(
    client: kube::Client,
    rollout: Rollout,
    output: OutputFormat,
) -> Result<Exit, Failure> {
    let namespace = rollout.metadata.namespace.clone().unwrap_or_default();
    let name = rollout.metadata.name.clone().unwrap_or_default();
    let owned = watcher::Config::default().labels(&owned_selector(&rollout));
    let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let (rollout_store, rollout_writer) = reflector::store();
    let (rs_store, rs_writer) = reflector::store();
    let (pod_store, pod_writer) = reflector::store();
    let (run_store, run_writer) = reflector::store();
    let ns = namespace.as_str();
    let mut events = futures::stream::select_all([
        changes(
            0,
            (Api::namespaced(client.clone(), ns), "rollouts"),
            by_name,
            rollout_writer,
        ),
        changes(
            1,
            (Api::namespaced(client.clone(), ns), "replicasets"),
            owned.clone(),
            rs_writer,
        ),
        changes(
            2,
            (Api::namespaced(client.clone(), ns), "pods"),
            owned.clone(),
            pod_writer,
        ),
        changes(
            3,
            (Api::namespaced(client, ns), "analysisruns"),
            owned,
            run_writer,
        ),
    ]);
    let stores = Stores {
        rollout: rollout_store,
        replica_sets: rs_store,
        pods: pod_store,
        analysis_runs: run_store,
    };
    let mut screen = Screen::open(output);
    let mut listed = [false; KINDS];
    let mut stop = pin!(tokio::signal::ctrl_c());
    let what = format!("rollout {name:?} in namespace {namespace:?}");
    loop {
        let change = tokio::select! {
            _ = &mut stop => return Ok(Exit::Ok),
            change = events.next() => change,
        };
        match change {
            None => return Ok(Exit::Ok),
            Some(Ok((kind, list_done))) => {
                listed[kind] |= list_done;
                if listed.iter().all(|l| *l) {
                    let shown = show(&stores, &what, output);
                    if screen.draw(shown).is_err() {
                        return Ok(Exit::Error);
                    }
                }
            }
            // A refusal before everything is listed would leave the view empty for good; later ones, and any
            // other failure, the watchers retry with their backoff.
            Some(Err((kind, e))) if !listed.iter().all(|l| *l) => {
                if let Some(refused) = refusal(&e) {
                    drop(screen);
                    return Err(Failure::api(&format!("{kind} of {what}"), refused));
                }
            }
            Some(Err(_)) => {}
        }
    }
}

/// A stream of [`changes`].
type Changes = BoxStream<'static, Result<(usize, bool), (&'static str, watcher::Error)>>;

/// The changes to the objects `api` lists with `config`, kept in `writer`'s store: the index of the kind and
/// whether the event ends a (re)list; errors with the kind's name.
fn changes<K>(
    index: usize,
    (api, kind): (Api<K>, &'static str),
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
) -> Changes
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .map_ok(move |event| (index, matches!(event, watcher::Event::InitDone)))
        .map_err(move |e| (kind, e))
        .boxed()
}

/// The API server's refusal inside a watcher's error: 401, 403 or 404 (the kind is not served).
fn refusal(e: &watcher::Error) -> Option<&kube::Error> {
    let inner = match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        _ => return None,
    };
    matches!(inner, kube::Error::Api(s) if [401, 403, 404].contains(&s.code)).then_some(inner)
}

/// The view of what the stores hold now, as text or one line of JSON.
fn show(stores: &Stores, what: &str, output: OutputFormat) -> String {
    let Some(rollout) = stores.rollout.state().into_iter().next() else {
        return match output {
            OutputFormat::Text => format!("{what} not found: deleted, or not created yet\n"),
            OutputFormat::Json => "null\n".to_string(),
        };
    };
    let replica_sets: Vec<ReplicaSet> = clone_all(stores.replica_sets.state());
    let pods: Vec<Pod> = clone_all(stores.pods.state());
    let analysis_runs: Vec<AnalysisRun> = clone_all(stores.analysis_runs.state());
    let owned = Owned {
        replica_sets: &replica_sets,
        pods: &pods,
        analysis_runs: &analysis_runs,
    };
    let view = view::rollout_view(&rollout, &owned);
    match output {
        OutputFormat::Text => view::text::rollout(&view, crate::time::Clock::Wall.now()),
        OutputFormat::Json => match serde_json::to_string(&view) {
            Ok(json) => json + "\n",
            Err(e) => format!("{{\"error\": {:?}}}\n", e.to_string()),
        },
    }
}

fn clone_all<K: Clone>(items: Vec<std::sync::Arc<K>>) -> Vec<K> {
    items.iter().map(|o| K::clone(o)).collect()
}

/// Where the snapshots go: the alternate screen of a terminal, redrawn in place, or a stream of snapshots.
struct Screen {
    terminal: bool,
    output: OutputFormat,
    /// What was shown last: a change that leaves the view as it was is not shown again.
    last: Option<String>,
}

impl Screen {
    fn open(output: OutputFormat) -> Screen {
        let terminal = std::io::stdout().is_terminal();
        if terminal {
            // Nothing to do if it fails: the next draw reports a closed stdout.
            let _ = write_all(ENTER_SCREEN);
        }
        Screen {
            terminal,
            output,
            last: None,
        }
    }

    /// Shows `view` unless it is what is shown already. An error means stdout is gone.
    fn draw(&mut self, view: String) -> std::io::Result<()> {
        if self.last.as_ref() == Some(&view) {
            return Ok(());
        }
        let framed = if self.terminal {
            format!("{CLEAR}{view}")
        } else if self.last.is_some() && self.output == OutputFormat::Text {
            format!("---\n{view}")
        } else {
            view.clone()
        };
        self.last = Some(view);
        write_all(&framed)
    }
}

impl Drop for Screen {
    /// Leaves the alternate screen, so the terminal shows what it showed before the watch.
    fn drop(&mut self) {
        if self.terminal {
            let _ = write_all(LEAVE_SCREEN);
        }
    }
}

fn write_all(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}
