//! How a run's phase change is announced: the Event reason Argo Rollouts names it with, its note (the phase and
//! the run's message) and whether it is a Warning. Part of a step's decision, beside the status and the
//! wake-up; the edge only addresses and sends it.

use crate::api::reasons;
use crate::api::{AnalysisPhase, AnalysisRunStatus};

/// The Event of a phase change, before it is addressed to the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub phase: AnalysisPhase,
    pub reason: &'static str,
    /// `AnalysisRun PHASE`, with the run's message after a colon when it has one (secret values not yet hidden).
    pub note: String,
    pub warning: bool,
}

/// The announcement of a run whose phase was `before` and whose status is now `after`: `None` when the phase
/// did not change, or changed to Pending (a run's own Events start at Running).
pub fn announcement(
    before: Option<AnalysisPhase>,
    after: &AnalysisRunStatus,
) -> Option<Announcement> {
    let phase = after.phase.filter(|p| before != Some(*p))?;
    if phase == AnalysisPhase::Pending {
        return None;
    }
    let note = match &after.message {
        Some(m) => format!("AnalysisRun {phase}: {m}"),
        None => format!("AnalysisRun {phase}"),
    };
    Some(Announcement {
        phase,
        reason: reasons::analysis_run(phase),
        note,
        warning: !matches!(phase, AnalysisPhase::Running | AnalysisPhase::Successful),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(phase: AnalysisPhase, message: Option<&str>) -> AnalysisRunStatus {
        AnalysisRunStatus {
            phase: Some(phase),
            message: message.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn a_phase_change_is_announced_with_argos_reason_and_the_runs_message() {
        let failed = status(AnalysisPhase::Failed, Some("Metric \"m\" assessed Failed"));
        assert_eq!(
            announcement(Some(AnalysisPhase::Running), &failed),
            Some(Announcement {
                phase: AnalysisPhase::Failed,
                reason: "AnalysisRunFailed",
                note: "AnalysisRun Failed: Metric \"m\" assessed Failed".to_string(),
                warning: true,
            })
        );
        let running = status(AnalysisPhase::Running, None);
        let announced = announcement(None, &running).expect("a run starting is announced");
        assert_eq!(
            (announced.reason, announced.note.as_str(), announced.warning),
            ("AnalysisRunRunning", "AnalysisRun Running", false)
        );
    }

    #[test]
    fn no_change_and_pending_are_not_announced() {
        let running = status(AnalysisPhase::Running, None);
        assert_eq!(announcement(Some(AnalysisPhase::Running), &running), None);
        let pending = status(AnalysisPhase::Pending, None);
        assert_eq!(announcement(None, &pending), None);
    }
}
