//! The analysis part of a reconcile (Argo's reconcileAnalysisRuns): which AnalysisRuns are current, creating
//! the current step's run and the background run, terminating the rest, and turning a finished run into a
//! pause (Inconclusive) or an abort (Failed, Error). The runs' names, labels and specs are `analysis`'s.

use super::analysis::{self, RunContext, RunKind};
use super::conditions::{BLUE_GREEN_PAUSE, CANARY_PAUSE_STEP, INCONCLUSIVE_ANALYSIS};
use super::context::{Reconcile, RunState};
use super::{Write, conditions as cond};
use crate::api::rollout::RolloutAnalysisRunStatus;
use crate::api::{AnalysisPhase, AnalysisRun};

impl Reconcile<'_, '_> {
    /// Argo's reconcileAnalysisRuns: terminates runs that no longer count, creates the current step's and
    /// the background run, and turns a finished run into a pause or an abort.
    pub(super) fn analysis(&mut self) -> Result<(), String> {
        if self.new_rs.is_none() {
            return Ok(());
        }
        let aborted = self.pause.aborted(&self.prev);
        let fast_rollback = self.fast_rollback();
        let initial = self.prev.stable_rs.is_empty();
        let promoted = cond::fully_promoted(&self.prev);
        let find = |name: Option<&String>| self.find_run(name?);
        let canary_status = &self.prev.canary;
        let mut step_run = find(
            canary_status
                .current_step_analysis_run_status
                .as_ref()
                .map(|s| &s.name),
        );
        let mut background = find(
            canary_status
                .current_background_analysis_run_status
                .as_ref()
                .map(|s| &s.name),
        );
        let mut keep: Vec<String> = Vec::new();
        if promoted || aborted || self.prev.promote_full || fast_rollback || initial {
            step_run = None;
            background = None;
        } else {
            step_run = self.step_analysis(step_run)?;
            background = self.background_analysis(background)?;
        }
        for run in [&step_run, &background].into_iter().flatten() {
            keep.push(run.name.clone());
        }
        self.terminate_others(&keep);
        self.run_history(&keep);
        let prev = (
            self.prev.canary.current_step_analysis_run_status.clone(),
            self.prev
                .canary
                .current_background_analysis_run_status
                .clone(),
        );
        self.run_status_changed(prev.0.as_ref(), step_run.as_ref(), "Step");
        self.run_status_changed(prev.1.as_ref(), background.as_ref(), "Background");
        self.step_run = step_run;
        Ok(())
    }

    /// The run named `name` as read: the current one a status field names.
    pub(super) fn find_run(&self, name: &str) -> Option<RunState> {
        let run = self
            .o
            .analysis_runs
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))?;
        Some(RunState {
            name: name.to_string(),
            phase: run.status.as_ref().and_then(|s| s.phase),
            step_index: run
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(analysis::STEP_INDEX_LABEL))
                .cloned(),
        })
    }

    /// Every run of this Rollout but those in `keep` that is still going is stopped (Argo's
    /// cancelAnalysisRuns).
    pub(super) fn terminate_others(&mut self, keep: &[String]) {
        for run in self.o.analysis_runs {
            let name = run.metadata.name.clone().unwrap_or_default();
            let finished = run
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .is_some_and(AnalysisPhase::is_completed);
            if !keep.contains(&name) && !finished && run.spec.terminate != Some(true) {
                self.writes.push(Write::TerminateAnalysisRun { name });
            }
        }
    }

    /// Argo's emitAnalysisRunStatusChanges: an Event on the Rollout when its current `kind` run has a phase
    /// the status did not record yet (a Warning for Failed and Error).
    pub(super) fn run_status_changed(
        &mut self,
        prev: Option<&RolloutAnalysisRunStatus>,
        run: Option<&RunState>,
        kind: &str,
    ) {
        let Some((run, phase)) = run.and_then(|r| Some((r, r.phase?))) else {
            return;
        };
        let before = match prev {
            None => "NoPreviousStatus",
            Some(p) if p.name == run.name && p.status != phase.as_str() => p.status.as_str(),
            Some(_) => return,
        };
        let message = format!(
            "{kind} Analysis Run '{}' Status New: '{}' Previous: '{before}'",
            run.name,
            phase.as_str()
        );
        let reason = crate::api::reasons::analysis_run(phase);
        if matches!(phase, AnalysisPhase::Failed | AnalysisPhase::Error) {
            self.warning(reason, message);
        } else {
            self.event(reason, message);
        }
    }

    pub(super) fn run_status(&self, name: &str) -> RolloutAnalysisRunStatus {
        let run = self
            .o
            .analysis_runs
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name));
        let status = run.and_then(|r| r.status.as_ref());
        RolloutAnalysisRunStatus {
            name: name.to_string(),
            status: status
                .and_then(|s| s.phase)
                .map(|p| p.as_str().to_string())
                .unwrap_or_default(),
            message: status.and_then(|s| s.message.clone()).unwrap_or_default(),
        }
    }

    /// Argo's needsNewAnalysisRun for an existing run: after a promote past an Inconclusive run, or a retry.
    /// A blue-green pause sets controllerPause too, so it counts as a step's pause does.
    pub(super) fn needs_new_run(&self, current: &RunState) -> bool {
        let has = |reason| {
            self.prev
                .pause_conditions
                .iter()
                .any(|p| p.reason == reason)
        };
        if self.prev.controller_pause && !has(CANARY_PAUSE_STEP) && !has(BLUE_GREEN_PAUSE) {
            return current.phase == Some(AnalysisPhase::Inconclusive);
        }
        self.prev.aborted_at.is_some()
    }

    fn run_context(&self) -> (String, String) {
        let new_hash = self.new_hash();
        let stable_hash = self
            .stable_rs
            .map(|i| self.rss[i].hash.clone())
            .unwrap_or_default();
        (new_hash, stable_hash)
    }

    pub(super) fn create_run(
        &mut self,
        a: &crate::api::rollout::RolloutAnalysis,
        kind: RunKind,
    ) -> Result<RunState, String> {
        let (new_hash, stable_hash) = self.run_context();
        let cx = RunContext {
            rollout: self.o.rollout,
            revision: &self.revision,
            new_hash: &new_hash,
            stable_hash: &stable_hash,
            instance_id: self.o.instance_id,
        };
        let mut run = analysis::build_run(a, kind, &cx, self.o.templates)?;
        // Argo's CreateWithCollisionCounter: a run of that name still going is this one, made before a
        // restart; a finished one is an earlier attempt's (before a retry, or an Inconclusive run resumed
        // past), so `NAME.1`, `NAME.2`, ... is tried next.
        let base = run.metadata.name.clone().unwrap_or_default();
        let named = |name: &str| {
            self.o
                .analysis_runs
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(name))
        };
        let finished = |r: &AnalysisRun| {
            r.status
                .as_ref()
                .and_then(|s| s.phase)
                .is_some_and(AnalysisPhase::is_completed)
        };
        let (mut name, mut collisions) = (base.clone(), 0);
        while named(&name).is_some_and(finished) {
            collisions += 1;
            name = format!("{base}.{collisions}");
        }
        let existing = named(&name);
        if existing.is_none() {
            run.metadata.name = Some(name.clone());
            self.writes.push(Write::CreateAnalysisRun(Box::new(run)));
        }
        Ok(RunState {
            phase: existing
                .and_then(|r| r.status.as_ref())
                .and_then(|s| s.phase),
            step_index: match kind {
                RunKind::Step(i) => Some(i.to_string()),
                _ => None,
            },
            name,
        })
    }

    fn step_analysis(&mut self, current: Option<RunState>) -> Result<Option<RunState>, String> {
        if !self.prev.pause_conditions.is_empty() || self.prev.abort {
            if let Some(c) = &current {
                self.new.canary.current_step_analysis_run_status = Some(self.run_status(&c.name));
            }
            return Ok(current);
        }
        let (step, index) = self.current_step();
        let step = step.and_then(|i| self.steps[i].analysis.as_ref().map(|a| (i, a)));
        let Some((i, a)) = step else { return Ok(None) };
        let from_previous_step = current
            .as_ref()
            .is_some_and(|c| c.step_index != index.map(|i| i.to_string()));
        if from_previous_step {
            return Ok(None);
        }
        let current = match current {
            Some(c) if !self.needs_new_run(&c) => c,
            _ => self.create_run(a, RunKind::Step(i))?,
        };
        self.new.canary.current_step_analysis_run_status = Some(self.run_status(&current.name));
        self.judge_run(&current, "Step-based");
        Ok(Some(current))
    }

    fn background_analysis(
        &mut self,
        current: Option<RunState>,
    ) -> Result<Option<RunState>, String> {
        let Some(b) = self.canary.and_then(|c| c.analysis.as_ref()) else {
            return Ok(None);
        };
        if b.analysis.templates.as_ref().is_none_or(|t| t.is_empty()) {
            return Ok(None);
        }
        let (_, index) = self.current_step();
        let before_start = b
            .starting_step
            .is_some_and(|s| index.is_some_and(|i| (i as i64) < i64::from(s)));
        if self.prev.current_pod_hash.is_empty() || before_start {
            return Ok(None);
        }
        if self
            .prev
            .pause_conditions
            .iter()
            .any(|p| p.reason == INCONCLUSIVE_ANALYSIS)
        {
            if let Some(c) = &current {
                self.new.canary.current_background_analysis_run_status =
                    Some(self.run_status(&c.name));
            }
            return Ok(current);
        }
        let current = match current {
            Some(c) if !self.needs_new_run(&c) => c,
            _ => self.create_run(&b.analysis, RunKind::Background)?,
        };
        self.new.canary.current_background_analysis_run_status =
            Some(self.run_status(&current.name));
        self.judge_run(&current, "Background");
        Ok(Some(current))
    }

    /// Inconclusive pauses; Failed and Error abort with the run's message, in Argo's words.
    pub(super) fn judge_run(&mut self, run: &RunState, kind: &str) {
        match run.phase {
            Some(AnalysisPhase::Inconclusive) => self.pause.add(INCONCLUSIVE_ANALYSIS),
            Some(AnalysisPhase::Failed | AnalysisPhase::Error) => {
                let mut message = format!("{kind} analysis phase error/failed");
                let text = self.run_status(&run.name).message;
                if !text.is_empty() {
                    message = format!("{message}: {text}");
                }
                self.pause.abort(message);
            }
            _ => {}
        }
    }
}
