//! How long rollout attempts took, under Argo Rollouts' names and buckets (`EmitRolloutDuration` in
//! `controller/metrics/metrics.go`): `rollout_duration_seconds` (start to end), `rollout_progression_duration_seconds`
//! (without the time spent waiting for a person) and `rollout_manual_pause_duration_seconds`, labelled with how the
//! attempt ended (`status.duration.completionStatus`). An attempt is counted once, when the status recording its end
//! has been written.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::api::rollout::RolloutDurationStatus;

use super::{Exposition, Histogram, family, write_histogram};

const TOTAL_BUCKETS: &[f64] = &[
    30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0,
];
const PROGRESSION_BUCKETS: &[f64] = &[30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0];
const MANUAL_PAUSE_BUCKETS: &[f64] = &[
    0.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0,
];

/// The three families: name, help, buckets.
const FAMILIES: [(&str, &str, &[f64]); 3] = [
    (
        "rollout_duration_seconds",
        "Total wall-clock time for a rollout from start to completion/abort/supersede",
        TOTAL_BUCKETS,
    ),
    (
        "rollout_progression_duration_seconds",
        "Active progression time for a rollout (excluding manual pause time)",
        PROGRESSION_BUCKETS,
    ),
    (
        "rollout_manual_pause_duration_seconds",
        "Time spent in manual pause waiting for human intervention",
        MANUAL_PAUSE_BUCKETS,
    ),
];

/// The histograms of each family, by completion status.
#[derive(Debug, Default)]
pub struct RolloutDurations {
    by_status: Mutex<BTreeMap<String, [Histogram; 3]>>,
}

impl RolloutDurations {
    /// A Rollout's status went from `before` to `written` (and was written): when `written` records the end of
    /// an attempt that `before` did not, that attempt is counted.
    pub fn written(
        &self,
        before: Option<&RolloutDurationStatus>,
        written: Option<&RolloutDurationStatus>,
    ) {
        let Some(written) = written else {
            return;
        };
        let Some((status, seconds)) = ended(written) else {
            return;
        };
        let recorded_before = before.is_some_and(|b| {
            ended(b).is_some()
                && b.rollout_started_at == written.rollout_started_at
                && b.finished_at == written.finished_at
        });
        if recorded_before {
            return;
        }
        let mut by_status = self
            .by_status
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let histograms = by_status
            .entry(status.to_string())
            .or_insert_with(|| FAMILIES.map(|(_, _, buckets)| Histogram::with_bounds(buckets)));
        for (h, value) in histograms.iter_mut().zip(seconds) {
            h.observe(value);
        }
    }

    pub fn write(&self, out: &mut Exposition) {
        let by_status = self
            .by_status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (i, (name, help, _)) in FAMILIES.iter().enumerate() {
            family(out, name, "histogram", help);
            for (status, histograms) in &by_status {
                if let Some(h) = histograms.get(i) {
                    write_histogram(out, name, &[("status", status)], h);
                }
            }
        }
    }
}

/// How an ended attempt ended, and its total, progression and manual-pause seconds (Argo's
/// `EmitRolloutDuration`: progression is the total less the manual pauses); `None` while it runs.
fn ended(d: &RolloutDurationStatus) -> Option<(&str, [f64; 3])> {
    let started = d.rollout_started_at.as_ref()?.0;
    let finished = d.finished_at.as_ref()?.0;
    let status = d.completion_status.as_deref().filter(|s| !s.is_empty())?;
    let total = finished.duration_since(started).as_secs_f64();
    let paused = d.total_manual_pause_duration_seconds.unwrap_or(0) as f64;
    Some((status, [total, total - paused, paused]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(s: i64) -> Option<Time> {
        jiff::Timestamp::from_second(1_767_225_600 + s)
            .ok()
            .map(Time)
    }

    fn running() -> RolloutDurationStatus {
        RolloutDurationStatus {
            rollout_started_at: at(0),
            total_manual_pause_duration_seconds: Some(100),
            ..Default::default()
        }
    }

    fn promoted() -> RolloutDurationStatus {
        RolloutDurationStatus {
            finished_at: at(400),
            completion_status: Some("Promoted".into()),
            ..running()
        }
    }

    #[test]
    fn an_attempt_is_counted_once_when_its_end_is_written_with_argos_buckets() {
        let d = RolloutDurations::default();
        d.written(Some(&running()), Some(&running()));
        d.written(Some(&running()), Some(&promoted()));
        // Later writes of the same ended attempt count nothing more.
        d.written(Some(&promoted()), Some(&promoted()));
        let mut out = Exposition::collect();
        d.write(&mut out);
        let out = out.finish();
        for line in [
            "rollout_duration_seconds_bucket{status=\"Promoted\",le=\"300\"} 0",
            "rollout_duration_seconds_bucket{status=\"Promoted\",le=\"600\"} 1",
            "rollout_duration_seconds_sum{status=\"Promoted\"} 400",
            "rollout_progression_duration_seconds_sum{status=\"Promoted\"} 300",
            "rollout_manual_pause_duration_seconds_bucket{status=\"Promoted\",le=\"60\"} 0",
            "rollout_manual_pause_duration_seconds_count{status=\"Promoted\"} 1",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
        }
    }

    #[test]
    fn a_next_attempt_ending_the_same_way_is_counted_again() {
        let d = RolloutDurations::default();
        d.written(None, Some(&promoted()));
        let later = RolloutDurationStatus {
            rollout_started_at: at(1000),
            finished_at: at(1400),
            ..promoted()
        };
        d.written(Some(&promoted()), Some(&later));
        let mut out = Exposition::collect();
        d.write(&mut out);
        let out = out.finish();
        assert!(
            out.contains("rollout_duration_seconds_count{status=\"Promoted\"} 2\n"),
            "{out}"
        );
    }
}
