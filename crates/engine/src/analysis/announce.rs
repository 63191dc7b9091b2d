//! How a run's step is announced, as Argo Rollouts' AnalysisRun controller announces it: an Event for each
//! metric the step completed (`assessRunStatus`: reason `Metric<Phase>`, "Metric 'NAME' Completed. Result:
//! PHASE"), then one for the run when the step completed it (`recordAnalysisRunCompletionEvent`: reason
//! `AnalysisRun<Phase>`, "Analysis Completed. Result: PHASE"). Only Failed and Error are Warnings; a run
//! starting or measuring is not announced. Part of a step's decision, beside the status and the wake-up; the
//! edge only addresses and sends them.

use crate::api::reasons;
use crate::api::{AnalysisPhase, AnalysisRunStatus};

/// One Event of a step, before it is addressed to the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub reason: &'static str,
    pub note: String,
    pub warning: bool,
}

impl Announcement {
    fn completed(reason: &'static str, note: String, phase: AnalysisPhase) -> Announcement {
        Announcement {
            reason,
            note,
            warning: matches!(phase, AnalysisPhase::Failed | AnalysisPhase::Error),
        }
    }
}

/// The Events of a step that took a run's status from `before` to `after`, in Argo's order: the metrics that
/// completed (in the status's order), then the run if it completed.
pub fn announcements(
    before: Option<&AnalysisRunStatus>,
    after: &AnalysisRunStatus,
) -> Vec<Announcement> {
    let had = |name: &str| {
        before
            .and_then(|s| s.metric_results.as_ref())
            .and_then(|results| results.iter().find(|r| r.name == name))
            .map(|r| r.phase)
    };
    let metrics = after
        .metric_results
        .iter()
        .flatten()
        .filter(|r| r.phase.is_completed() && had(&r.name) != Some(r.phase))
        .map(|r| {
            let note = reasons::metric_completed(&r.name, r.phase);
            Announcement::completed(reasons::metric(r.phase), note, r.phase)
        });
    let run = after
        .phase
        .filter(|p| p.is_completed() && before.and_then(|s| s.phase) != Some(*p))
        .map(|p| Announcement::completed(reasons::analysis_run(p), reasons::run_completed(p), p));
    metrics.chain(run).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MetricResult;

    fn status(phase: AnalysisPhase, metrics: &[(&str, AnalysisPhase)]) -> AnalysisRunStatus {
        let results = metrics.iter().map(|(name, phase)| {
            let result = serde_json::json!({"name": name, "phase": phase});
            serde_json::from_value::<MetricResult>(result).expect("a metric result")
        });
        AnalysisRunStatus {
            phase: Some(phase),
            metric_results: Some(results.collect()),
            ..Default::default()
        }
    }

    fn said(announced: &[Announcement]) -> Vec<(&str, &str, bool)> {
        announced
            .iter()
            .map(|a| (a.reason, a.note.as_str(), a.warning))
            .collect()
    }

    #[test]
    fn each_metric_completed_then_the_run_as_argos_analysis_controller_records_them() {
        use AnalysisPhase::*;
        let before = status(Running, &[("rate", Successful), ("latency", Running)]);
        let after = status(
            Failed,
            &[("rate", Successful), ("latency", Failed), ("errors", Error)],
        );
        assert_eq!(
            said(&announcements(Some(&before), &after)),
            [
                (
                    "MetricFailed",
                    "Metric 'latency' Completed. Result: Failed",
                    true
                ),
                (
                    "MetricError",
                    "Metric 'errors' Completed. Result: Error",
                    true
                ),
                (
                    "AnalysisRunFailed",
                    "Analysis Completed. Result: Failed",
                    true
                ),
            ]
        );
    }

    #[test]
    fn inconclusive_and_successful_are_normal_events() {
        use AnalysisPhase::*;
        let before = status(Running, &[("rate", Running)]);
        let inconclusive = status(Inconclusive, &[("rate", Inconclusive)]);
        assert_eq!(
            said(&announcements(Some(&before), &inconclusive)),
            [
                (
                    "MetricInconclusive",
                    "Metric 'rate' Completed. Result: Inconclusive",
                    false
                ),
                (
                    "AnalysisRunInconclusive",
                    "Analysis Completed. Result: Inconclusive",
                    false
                ),
            ]
        );
        let successful = status(Successful, &[]);
        assert_eq!(
            said(&announcements(None, &successful)),
            [(
                "AnalysisRunSuccessful",
                "Analysis Completed. Result: Successful",
                false
            )]
        );
    }

    #[test]
    fn a_run_starting_measuring_or_unchanged_is_not_announced() {
        use AnalysisPhase::*;
        let pending = status(Pending, &[]);
        let running = status(Running, &[("rate", Running)]);
        assert_eq!(announcements(None, &pending), []);
        assert_eq!(announcements(Some(&pending), &running), []);
        let done = status(Successful, &[("rate", Successful)]);
        assert_eq!(announcements(Some(&done), &done), []);
    }
}
