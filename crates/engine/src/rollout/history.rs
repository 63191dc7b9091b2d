//! What a Rollout keeps of its past, as Argo prunes it: old ReplicaSets beyond `revisionHistoryLimit`
//! (reconcileRevisionHistoryLimit, with the AnalysisRuns of their pod hash), and finished AnalysisRuns
//! beyond `spec.analysis.successfulRunHistoryLimit` / `unsuccessfulRunHistoryLimit` (FilterAnalysisRunsToDelete).
//! Owns which objects are deleted; which runs are current is `runs`'s.

use std::collections::BTreeMap;

use super::Write;
use super::context::Reconcile;
use super::hash::HASH_LABEL;
use crate::api::{AnalysisPhase, AnalysisRun};

/// Argo's defaults for both run history limits.
const RUN_HISTORY_LIMIT: i32 = 5;

fn pod_hash(run: &AnalysisRun) -> Option<&String> {
    run.metadata.labels.as_ref()?.get(HASH_LABEL)
}

impl Reconcile<'_, '_> {
    /// The runs named in the status read (the current step and background runs).
    fn current_run_names(&self) -> Vec<&str> {
        let canary = &self.prev.canary;
        [
            &canary.current_step_analysis_run_status,
            &canary.current_background_analysis_run_status,
        ]
        .into_iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect()
    }

    fn delete_run(&mut self, run: &AnalysisRun) {
        if run.metadata.deletion_timestamp.is_some() {
            return;
        }
        let name = run.metadata.name.clone().unwrap_or_default();
        let already = self
            .writes
            .iter()
            .any(|w| matches!(w, Write::DeleteAnalysisRun { name: n } if *n == name));
        if !already {
            self.writes.push(Write::DeleteAnalysisRun { name });
        }
    }

    /// Argo's reconcileRevisionHistoryLimit: of the old ReplicaSets (neither new nor stable, not being
    /// deleted), the oldest beyond the limit are deleted with their AnalysisRuns; one that still has pods
    /// or whose controller lags is skipped, not replaced by a younger one.
    pub(super) fn revision_history(&mut self) {
        let limit = self.o.rollout.spec.revision_history_limit.unwrap_or(10);
        let mut old: Vec<usize> = (0..self.rss.len())
            .filter(|i| self.is_other(*i) && !self.rss[*i].deleting)
            .collect();
        let excess = i64::try_from(old.len()).unwrap_or(i64::MAX) - i64::from(limit);
        if excess <= 0 {
            return;
        }
        old.sort_by_key(|i| self.rss[*i].created);
        let current: Vec<String> = self
            .current_run_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        for &i in old
            .iter()
            .take(usize::try_from(excess).unwrap_or(usize::MAX))
        {
            let rs = &self.rss[i];
            if rs.pods.current != 0 || rs.pods.spec != 0 || !rs.observed {
                continue;
            }
            let (name, hash) = (rs.name.clone(), rs.hash.clone());
            self.writes.push(Write::DeleteReplicaSet { name });
            let runs = self.o.analysis_runs.iter().filter(|r| {
                pod_hash(r) == Some(&hash)
                    && !current.contains(r.metadata.name.as_ref().unwrap_or(&String::new()))
            });
            for run in runs {
                self.delete_run(run);
            }
        }
    }

    /// Argo's FilterAnalysisRunsToDelete over the runs that are not current (`keep`, or named in the status): newest first, a
    /// run without a pod hash or whose ReplicaSet is gone or going is deleted; finished ones are kept up to
    /// their limit (Successful; Failed, Error and Inconclusive), the rest deleted. Running ones stay.
    pub(super) fn run_history(&mut self, keep: &[String]) {
        let limits = self.o.rollout.spec.analysis.as_ref();
        let successful_limit = limits
            .and_then(|a| a.successful_run_history_limit)
            .unwrap_or(RUN_HISTORY_LIMIT);
        let unsuccessful_limit = limits
            .and_then(|a| a.unsuccessful_run_history_limit)
            .unwrap_or(RUN_HISTORY_LIMIT);
        let hashes: BTreeMap<String, bool> = self
            .rss
            .iter()
            .map(|r| (r.hash.clone(), r.deleting))
            .collect();
        // The runs the status read names are Argo's "current" ones even when no longer kept: they are
        // pruned from the next reconcile on.
        let current = self.current_run_names();
        let runs = self.o.analysis_runs;
        let mut others: Vec<&AnalysisRun> = runs
            .iter()
            .filter(|r| {
                let name = r.metadata.name.as_deref().unwrap_or_default();
                !keep.iter().any(|k| k == name) && !current.contains(&name)
            })
            .collect();
        others.sort_by_key(|r| {
            std::cmp::Reverse(r.metadata.creation_timestamp.as_ref().map(|t| t.0))
        });
        let (mut successful, mut unsuccessful) = (0, 0);
        let mut over_limit = Vec::new();
        for run in others {
            let deleting_rs = pod_hash(run).and_then(|h| hashes.get(h));
            let phase = run.status.as_ref().and_then(|s| s.phase);
            let over = match (deleting_rs, phase) {
                (None | Some(true), _) => true,
                (Some(false), Some(AnalysisPhase::Successful)) => {
                    successful += 1;
                    successful > successful_limit
                }
                (
                    Some(false),
                    Some(
                        AnalysisPhase::Failed | AnalysisPhase::Error | AnalysisPhase::Inconclusive,
                    ),
                ) => {
                    unsuccessful += 1;
                    unsuccessful > unsuccessful_limit
                }
                _ => false,
            };
            if over {
                over_limit.push(run);
            }
        }
        for run in over_limit {
            self.delete_run(run);
        }
    }
}
