//! The AnalysisRuns of a rehearsal: each run the planner creates on the in-memory cluster is prepared and
//! measured by the daemon's measuring loop (`runner::tick`) at the virtual time it is due, and its status is
//! written back for the planner to read, as canaryd's AnalysisRun controller would. Owns when a run is due
//! and what its measurements report; what the Rollout does with a finished run is the planner's.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::Entry;
use crate::api::{AnalysisPhase, AnalysisRun, SecretKeyRef};
use crate::engine::compose::RunSpec;
use crate::engine::rollout::memory::MemoryCluster;
use crate::measure::Providers;
use crate::providers::provider::RunRef;
use crate::runner::{self, PrepareError, PreparedRun};
use crate::time::Clock;

/// One run being measured: its preparation (or why it cannot run) and when it is next due.
struct Driven {
    prepared: Result<PreparedRun, PrepareError>,
    next: Option<Timestamp>,
}

/// The runs of one rehearsal, by name.
pub struct Runs<'a> {
    /// `--arg` values: they win over the values the Rollout gives.
    supplied: BTreeMap<String, String>,
    prometheus: Option<&'a str>,
    driven: BTreeMap<String, Driven>,
}

fn refuse_secret(s: &SecretKeyRef) -> Result<String, String> {
    Err(format!(
        "a rehearsal reads no Secrets (key {} of {}): pass --arg NAME=VALUE",
        s.key, s.name
    ))
}

impl<'a> Runs<'a> {
    pub fn new(supplied: &[(String, String)], prometheus: Option<&'a str>) -> Runs<'a> {
        Runs {
            supplied: supplied.iter().cloned().collect(),
            prometheus,
            driven: BTreeMap::new(),
        }
    }

    /// Steps every run of `cluster` that is due at the clock's time through the daemon's step
    /// ([`runner::step`]): a run that cannot be prepared ends Error with the reason, a terminated one is
    /// terminated, any other measures what is due.
    pub async fn measure_due(
        &mut self,
        cluster: &mut MemoryCluster,
        providers: &Providers,
        clock: &Clock,
        on: &mut dyn FnMut(&Entry),
    ) {
        let now = clock.stamp();
        for run in &mut cluster.analysis_runs {
            let name = run.metadata.name.clone().unwrap_or_default();
            if completed(run) {
                continue;
            }
            let driven = self.driven.entry(name.clone()).or_insert_with(|| Driven {
                prepared: PreparedRun::prepare(
                    &RunSpec::from_run(&run.spec),
                    &self.supplied,
                    &refuse_secret,
                    self.prometheus,
                    providers,
                ),
                next: None,
            });
            if driven.next.is_some_and(|t| t > now) {
                continue;
            }
            // The in-memory cluster creates a run with a bare Running phase; the step starts it as new.
            let status = run.status.take().filter(|s| s.started_at.is_some());
            let who = RunRef {
                namespace: run.metadata.namespace.clone().unwrap_or_default(),
                name: name.clone(),
                uid: run.metadata.uid.clone().unwrap_or_else(|| name.clone()),
                // The run exists only in memory: nothing it creates could be owned by it.
                owned: false,
            };
            let terminate = run.spec.terminate == Some(true);
            let ticked = runner::step(
                driven.prepared.as_ref(),
                &who,
                providers,
                status,
                clock,
                terminate,
            )
            .await;
            if let Ok(prepared) = &driven.prepared {
                for (_, _, result, m) in ticked.measured(prepared) {
                    on(&Entry::measured(ticked.now, &name, result, m));
                }
            }
            driven.next = ticked.assessment.next_wakeup;
            run.status = Some(ticked.status);
        }
    }

    /// When the next measurement of a run still going is due; `now` for a run not measured yet.
    pub fn next_due(&self, cluster: &MemoryCluster, now: Timestamp) -> Option<Timestamp> {
        cluster
            .analysis_runs
            .iter()
            .filter(|r| !completed(r))
            .filter_map(|r| match self.driven.get(r.metadata.name.as_deref()?) {
                Some(driven) => driven.next,
                None => Some(now),
            })
            .min()
    }
}

fn completed(run: &AnalysisRun) -> bool {
    run.status
        .as_ref()
        .and_then(|s| s.phase)
        .is_some_and(AnalysisPhase::is_completed)
}

/// The metric that ended a run badly (Failed, Error or Inconclusive), latest run first.
pub(super) fn deciding_metric(cluster: &MemoryCluster) -> Option<String> {
    cluster.analysis_runs.iter().rev().find_map(|run| {
        let status = run.status.as_ref()?;
        status
            .metric_results
            .iter()
            .flatten()
            .filter(|r| !r.dry_run)
            .find(|r| {
                matches!(
                    r.phase,
                    AnalysisPhase::Failed | AnalysisPhase::Error | AnalysisPhase::Inconclusive
                )
            })
            .map(|r| r.name.clone())
    })
}
