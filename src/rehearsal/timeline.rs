//! What a rehearsal reports: the timeline's entries ([`Entry`]) as they happen and how it ended ([`Ending`]),
//! with the JSON shape `canaryd rehearse --output json` prints. Owns the shape, never what happens.

use jiff::Timestamp;
use serde::Serialize;

use crate::api::rollout::RolloutStatus;
use crate::api::{AnalysisRun, Measurement, MetricResult};
use crate::engine::routing::memory::RouterWeights;

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Entry {
    /// The rollout is at a new step or weight; `routers` holds what the routers show then.
    #[serde(rename_all = "camelCase")]
    Step {
        #[serde(serialize_with = "rfc3339")]
        time: Timestamp,
        /// 1-based; `steps + 1` once every step is done.
        step: usize,
        steps: usize,
        /// The step as Argo names it ("setWeight: 20", "pause: 5m", "analysis"), "done" or "aborted".
        name: String,
        weight: i32,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        routers: Vec<RouterWeights>,
    },
    /// A measurement of an AnalysisRun's metric (Argo's fields), and the metric's result after it (its
    /// counters; the measurements left out).
    #[serde(rename_all = "camelCase")]
    Measurement {
        #[serde(serialize_with = "rfc3339")]
        time: Timestamp,
        analysis_run: String,
        result: Box<MetricResult>,
        measurement: Box<Measurement>,
    },
    /// An Event the planner recorded on the Rollout: its decisions and their reasons, in Argo's words.
    #[serde(rename_all = "camelCase")]
    Event {
        #[serde(serialize_with = "rfc3339")]
        time: Timestamp,
        reason: String,
        message: String,
        warning: bool,
    },
    /// The routers are held back, as the daemon's would be (Argo's DestinationRule switch waits until the
    /// ReplicaSets to receive traffic are fully available): nothing after the route moves until they are.
    #[serde(rename_all = "camelCase")]
    Held {
        #[serde(serialize_with = "rfc3339")]
        time: Timestamp,
        message: String,
    },
    /// The rehearsal promoted a pause for the person `--promote-after` stands for.
    #[serde(rename_all = "camelCase")]
    Promote {
        #[serde(serialize_with = "rfc3339")]
        time: Timestamp,
        reason: String,
    },
}

pub(crate) fn shown(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn rfc3339<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&shown(*t))
}

impl Entry {
    pub(super) fn measured(at: Timestamp, run: &str, r: &MetricResult, m: &Measurement) -> Entry {
        Entry::Measurement {
            time: at,
            analysis_run: run.to_string(),
            result: Box::new(MetricResult {
                measurements: Vec::new(),
                ..r.clone()
            }),
            measurement: Box::new(m.clone()),
        }
    }

    pub fn time(&self) -> Timestamp {
        match self {
            Entry::Step { time, .. }
            | Entry::Measurement { time, .. }
            | Entry::Event { time, .. }
            | Entry::Held { time, .. }
            | Entry::Promote { time, .. } => *time,
        }
    }
}

/// How a rehearsal ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Promoted,
    Aborted,
    /// Paused for a person (an indefinite pause, an Inconclusive analysis), or not finished by `--to`.
    Waiting,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ending {
    pub outcome: Outcome,
    pub started: String,
    pub ended: String,
    /// From the start to the end, in seconds of virtual time.
    pub seconds: i64,
    /// The 1-based step the rollout was at when it aborted or began to wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// The metric whose analysis aborted or paused the rollout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    pub reason: String,
    /// The Rollout's final status, with Argo's field names.
    pub status: RolloutStatus,
    /// The AnalysisRuns as they stood at the end, for the report's charts (not in the JSON line: the
    /// timeline's measurement entries already tell them).
    #[serde(skip)]
    pub analysis_runs: Vec<AnalysisRun>,
}
