//! A blue-green Rollout's analyses (Argo's reconcileAnalysisRuns for blueGreen, rollout/analysis.go): the
//! pre-promotion run against the preview pods once they are all up, before the active Service's switch; the
//! post-promotion run after it, before the new ReplicaSet becomes stable. Inconclusive pauses, Failed or
//! Error aborts (an abort after the switch puts the active Service back on the stable pods, still up). Runs'
//! names, labels and specs are `analysis`'s; creating, judging and terminating them is `runs`'s.

use super::super::analysis::RunKind;
use super::super::conditions::{self as cond, INCONCLUSIVE_ANALYSIS};
use super::super::context::{Reconcile, RunState};
use super::Sides;
use crate::api::AnalysisPhase;
use crate::api::rollout::{BlueGreenStatus, BlueGreenStrategy, RolloutAnalysis};

/// The analysis before or after the switch.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Promotion {
    Pre,
    Post,
}

impl Promotion {
    fn kind(self) -> RunKind {
        match self {
            Promotion::Pre => RunKind::PrePromotion,
            Promotion::Post => RunKind::PostPromotion,
        }
    }

    /// Argo's rollout-type label, which names the run in its status Events.
    fn label(self) -> &'static str {
        match self {
            Promotion::Pre => "PrePromotion",
            Promotion::Post => "PostPromotion",
        }
    }

    /// What an abort's message starts with (setPauseOrAbortForBlueGreen), before "analysis phase error/failed".
    fn judged_as(self) -> &'static str {
        match self {
            Promotion::Pre => "Blue/green pre-promotion",
            Promotion::Post => "Blue/green post-promotion",
        }
    }

    fn spec(self, strategy: &BlueGreenStrategy) -> Option<&RolloutAnalysis> {
        let analysis = match self {
            Promotion::Pre => strategy.pre_promotion_analysis.as_ref(),
            Promotion::Post => strategy.post_promotion_analysis.as_ref(),
        };
        analysis.filter(|a| a.templates.as_ref().is_some_and(|t| !t.is_empty()))
    }

    fn recorded(self, status: &BlueGreenStatus) -> Option<&String> {
        let run = match self {
            Promotion::Pre => status.pre_promotion_analysis_run_status.as_ref(),
            Promotion::Post => status.post_promotion_analysis_run_status.as_ref(),
        };
        run.map(|r| &r.name)
    }
}

impl Reconcile<'_, '_> {
    /// The current run the status names for `which`, as read (Argo's currentArs).
    fn promotion_run(&self, which: Promotion) -> Option<RunState> {
        let status = self.prev_blue_green();
        self.find_run(which.recorded(&status)?)
    }

    /// Argo's completedPrePromotionAnalysis: none configured, or the current one Successful.
    pub(super) fn completed_pre_promotion(&self, strategy: &BlueGreenStrategy) -> bool {
        strategy.pre_promotion_analysis.is_none()
            || self
                .promotion_run(Promotion::Pre)
                .is_some_and(|r| r.phase == Some(AnalysisPhase::Successful))
    }

    /// Argo's skipPrePromotionAnalysisRun and skipPostPromotionAnalysisRun: no run for the stable template,
    /// before the first switch (pre), or before the switch to the new pods (post); one under way goes on;
    /// else none until the new ReplicaSet is at its count.
    fn skips(&self, which: Promotion, strategy: &BlueGreenStrategy, current: bool) -> bool {
        let hash = self.new_hash();
        let active = self.prev_blue_green().active_selector;
        let settled = match which {
            Promotion::Pre => active.is_empty() || active == hash,
            Promotion::Post => active != hash,
        };
        if self.prev.stable_rs == hash || hash.is_empty() || settled {
            return true;
        }
        if current {
            return false;
        }
        match (which, strategy.preview_replica_count) {
            (Promotion::Pre, Some(preview)) => !self.new_rs.is_some_and(|i| {
                self.rss[i].pods.spec == preview && self.rss[i].pods.available == preview
            }),
            _ => !self.saturated(),
        }
    }

    /// The old ReplicaSets wait while a post-promotion run that counts has not succeeded, unless
    /// `scaleDownDelaySeconds` is written (scaleDownOldReplicaSetsForBlueGreen).
    pub(super) fn waits_for_post_promotion(&self, strategy: &BlueGreenStrategy) -> bool {
        let current = self.promotion_run(Promotion::Post);
        strategy.post_promotion_analysis.is_some()
            && strategy.scale_down_delay_seconds.is_none()
            && !self.skips(Promotion::Post, strategy, current.is_some())
            && current.is_none_or(|r| r.phase != Some(AnalysisPhase::Successful))
    }

    /// Argo's reconcilePrePromotionAnalysisRun / reconcilePostPromotionAnalysisRun: the current run (kept
    /// in the status) and whether it may keep running.
    fn promotion_analysis(
        &mut self,
        which: Promotion,
        strategy: &BlueGreenStrategy,
    ) -> Result<(Option<RunState>, bool), String> {
        let current = self.promotion_run(which);
        let Some(spec) = which.spec(strategy) else {
            return Ok((None, false));
        };
        if self.skips(which, strategy, current.is_some()) {
            return Ok((current, false));
        }
        let inconclusive = self
            .prev
            .pause_conditions
            .iter()
            .any(|p| p.reason == INCONCLUSIVE_ANALYSIS);
        let run = match current {
            Some(c) if inconclusive || !self.needs_new_run(&c) => c,
            None if inconclusive => return Ok((None, true)),
            _ => self.create_run(spec, which.kind())?,
        };
        self.judge_run(&run, which.judged_as());
        Ok((Some(run), true))
    }

    /// Argo's reconcileAnalysisRuns for blueGreen: the post-promotion run it leaves current, which decides
    /// the promotion.
    pub(super) fn blue_green_analysis(
        &mut self,
        strategy: &BlueGreenStrategy,
        sides: &Sides,
    ) -> Result<Option<RunState>, String> {
        let cancel = cond::fully_promoted(&self.prev)
            || self.pause.aborted(&self.prev)
            || self.prev.promote_full
            || self.blue_green_fast_rollback(sides)
            || self.prev.stable_rs.is_empty();
        let mut runs = Vec::new();
        for which in [Promotion::Pre, Promotion::Post] {
            // Once cancelled, the runs stay current (Argo keeps blue-green's), only stopped.
            let (run, running) = if cancel {
                (self.promotion_run(which), false)
            } else {
                self.promotion_analysis(which, strategy)?
            };
            runs.push((which, run, running));
        }
        let keep: Vec<String> = runs
            .iter()
            .filter(|(_, _, running)| *running)
            .filter_map(|(_, run, _)| run.as_ref().map(|r| r.name.clone()))
            .collect();
        self.terminate_others(&keep);
        let current: Vec<String> = runs
            .iter()
            .filter_map(|(_, run, _)| run.as_ref().map(|r| r.name.clone()))
            .collect();
        self.run_history(&current);
        let prev = self.prev_blue_green();
        let mut status = BlueGreenStatus::default();
        let mut post = None;
        for (which, run, _) in runs {
            let recorded = match which {
                Promotion::Pre => prev.pre_promotion_analysis_run_status.as_ref(),
                Promotion::Post => prev.post_promotion_analysis_run_status.as_ref(),
            };
            self.run_status_changed(recorded, run.as_ref(), which.label());
            let run_status = run.as_ref().map(|r| self.run_status(&r.name));
            match which {
                Promotion::Pre => status.pre_promotion_analysis_run_status = run_status,
                Promotion::Post => {
                    status.post_promotion_analysis_run_status = run_status;
                    post = run;
                }
            }
        }
        self.new.blue_green = Some(status);
        Ok(post)
    }
}
