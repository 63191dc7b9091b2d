//! `canaryd rehearse --every DURATION --until TIME`: one rehearsal per start from `--from` to `--until`, a
//! line per start, then the tally a team reads a template's false-rollback rate from: how many would have
//! promoted, aborted (by step and metric) or waited, and the median time to each. Exit 1 when any start
//! aborted, else 3 when any waited, else 0. Owns the starts, the tally and its table; each rehearsal is
//! `rehearsal::play`'s.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};

use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::rehearse_report::{exit_for, human, outcome_line};
use super::{Exit, OutputFormat};
use crate::measure::Providers;
use crate::rehearsal::{self, Ending, Options, Outcome, Setup};

/// Rehearsals played at once: they wait on Prometheus, not on the CPU.
const AT_ONCE: usize = 8;
/// Starts at most (every minute of ten weeks): `--every 1ns` would otherwise list more than memory holds.
const MAX_STARTS: i128 = 100_000;

/// One outcome's share of the starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Share {
    pub count: usize,
    /// Median virtual time from the start to the outcome; absent when no start had it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_seconds: Option<i64>,
}

/// Aborts at one step (a canary's) or one side of the switch (a blue-green Rollout's) by one metric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AbortCause {
    pub step: Option<usize>,
    /// A blue-green Rollout's: `PrePromotion` before the active Service's switch, `PostPromotion` after it
    /// (Argo's `rollout-type` of the analysis run there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promotion: Option<Promotion>,
    pub metric: Option<String>,
    pub count: usize,
}

/// A side of a blue-green Rollout's switch, in the order a rollout meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Promotion {
    PrePromotion,
    PostPromotion,
}

/// Which side of the switch a blue-green rehearsal ended on: after it once a post-promotion run was started
/// (its status is reset with each new revision), else before; `None` for a canary.
fn promotion(e: &Ending) -> Option<Promotion> {
    let blue_green = e.status.blue_green.as_ref()?;
    Some(match blue_green.post_promotion_analysis_run_status {
        Some(_) => Promotion::PostPromotion,
        None => Promotion::PrePromotion,
    })
}

/// What the starts came to.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    pub rehearsals: usize,
    pub promoted: Share,
    pub aborted: Share,
    pub aborted_by: Vec<AbortCause>,
    pub waiting: Share,
}

fn median(mut seconds: Vec<i64>) -> Option<i64> {
    seconds.sort_unstable();
    let n = seconds.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(seconds[n / 2]),
        _ => Some((seconds[n / 2 - 1] + seconds[n / 2]) / 2),
    }
}

impl Tally {
    pub fn of(endings: &[Ending]) -> Tally {
        let share = |outcome: Outcome| {
            let seconds: Vec<i64> = endings
                .iter()
                .filter(|e| e.outcome == outcome)
                .map(|e| e.seconds)
                .collect();
            Share {
                count: seconds.len(),
                median_seconds: median(seconds),
            }
        };
        type Cause = (Option<usize>, Option<Promotion>, Option<String>);
        let mut causes: BTreeMap<Cause, usize> = BTreeMap::new();
        for e in endings.iter().filter(|e| e.outcome == Outcome::Aborted) {
            *causes
                .entry((e.step, promotion(e), e.metric.clone()))
                .or_default() += 1;
        }
        Tally {
            rehearsals: endings.len(),
            promoted: share(Outcome::Promoted),
            aborted: share(Outcome::Aborted),
            aborted_by: causes
                .into_iter()
                .map(|((step, promotion, metric), count)| AbortCause {
                    step,
                    promotion,
                    metric,
                    count,
                })
                .collect(),
            waiting: share(Outcome::Waiting),
        }
    }

    /// The worst outcome decides: an abort, else a wait, else promoted.
    pub fn exit(&self) -> Exit {
        if self.aborted.count > 0 {
            exit_for(Outcome::Aborted)
        } else if self.waiting.count > 0 {
            exit_for(Outcome::Waiting)
        } else {
            exit_for(Outcome::Promoted)
        }
    }

    pub fn table(&self) -> String {
        let total = self.rehearsals.max(1) as f64;
        let row = |name: &str, s: &Share| {
            format!(
                "  {name:<9} {:>5}  {:>5.1}%  {}",
                s.count,
                100.0 * s.count as f64 / total,
                s.median_seconds
                    .map(|m| format!("median {}", human(m)))
                    .unwrap_or_default()
            )
        };
        let mut out = vec![
            format!("{} rehearsals:", self.rehearsals),
            row("promoted", &self.promoted),
            row("aborted", &self.aborted),
        ];
        for c in &self.aborted_by {
            let at = match (c.step, c.promotion) {
                (Some(step), _) => format!("at step {step}"),
                (None, Some(Promotion::PrePromotion)) => "before the switch".to_string(),
                (None, Some(Promotion::PostPromotion)) => "after the switch".to_string(),
                (None, None) => "at step -".to_string(),
            };
            out.push(format!(
                "    {:>5}  {at} by {}",
                c.count,
                c.metric
                    .as_deref()
                    .unwrap_or("(no metric: see the reasons above)")
            ));
        }
        out.push(row("waiting", &self.waiting));
        out.join("\n")
    }
}

/// The starts: `from`, then every `every`, up to and including `until`; bad input when there are none or
/// more than a tally holds (checked before anything is asked of Prometheus).
pub fn starts(
    from: Timestamp,
    every: SignedDuration,
    until: Timestamp,
) -> Result<Vec<Timestamp>, String> {
    if !every.is_positive() {
        return Err("--every must be longer than zero".to_string());
    }
    if until < from {
        return Err(format!("--until {until} is before --from {from}"));
    }
    let count = until.duration_since(from).as_nanos() / every.as_nanos() + 1;
    if count > MAX_STARTS {
        return Err(format!(
            "--every {every:#} from {from} until {until} is {count} starts, more than {MAX_STARTS}: \
             choose a longer --every or a nearer --until"
        ));
    }
    let mut out = Vec::new();
    let mut t = from;
    while t <= until {
        out.push(t);
        match t.checked_add(every) {
            Ok(next) => t = next,
            Err(_) => break,
        }
    }
    Ok(out)
}

/// Plays the Rollout from each of `starts` and prints the tally.
pub async fn run(
    setup: &Setup,
    providers: &Providers,
    opts: &Options,
    starts: &[Timestamp],
    output: OutputFormat,
) -> Exit {
    let steps = crate::engine::rollout::steps::steps(&setup.rollout).len();
    let progress = std::io::stderr().is_terminal();
    let mut plays = futures::stream::iter(starts.iter().map(|&from| async move {
        let opts = Options { from, ..*opts };
        rehearsal::play(setup, providers, &opts, &mut |_| {}).await
    }))
    .buffered(AT_ONCE);
    let mut endings = Vec::with_capacity(starts.len());
    while let Some(ended) = plays.next().await {
        let ending = match ended {
            Ok(e) => e,
            Err(e) => {
                eprintln!("canaryd rehearse: {e}");
                return Exit::Usage;
            }
        };
        if progress {
            eprint!("\r\x1b[2K");
        }
        match output {
            OutputFormat::Text => say!("{}  {}", ending.started, outcome_line(&ending, steps)),
            OutputFormat::Json => {
                let mut value = serde_json::to_value(&ending).unwrap_or_default();
                if let Some(map) = value.as_object_mut() {
                    // The status of every start is more than a tally needs; one rehearsal prints it.
                    map.remove("status");
                    map.insert("type".to_string(), "outcome".into());
                }
                say!("{value}");
            }
        }
        endings.push(ending);
        if progress {
            eprint!("rehearsal {}/{}", endings.len(), starts.len());
            let _ = std::io::stderr().flush();
        }
    }
    if progress {
        eprint!("\r\x1b[2K");
    }
    let tally = Tally::of(&endings);
    match output {
        OutputFormat::Text => say!("\n{}", tally.table()),
        OutputFormat::Json => {
            let mut value = serde_json::to_value(&tally).unwrap_or_default();
            if let Some(map) = value.as_object_mut() {
                map.insert("type".to_string(), "summary".into());
            }
            say!("{value}");
        }
    }
    tally.exit()
}

#[cfg(test)]
mod tests {
    use crate::api::rollout::{BlueGreenStatus, RolloutAnalysisRunStatus, RolloutStatus};

    use super::*;

    fn aborted(step: Option<usize>, blue_green: Option<BlueGreenStatus>) -> Ending {
        Ending {
            outcome: Outcome::Aborted,
            started: String::new(),
            ended: String::new(),
            seconds: 60,
            step,
            metric: Some("success-rate".into()),
            reason: String::new(),
            status: RolloutStatus {
                blue_green,
                ..Default::default()
            },
            analysis_runs: Vec::new(),
        }
    }

    #[test]
    fn a_blue_green_abort_is_counted_by_its_side_of_the_switch_not_a_step() {
        let post = BlueGreenStatus {
            post_promotion_analysis_run_status: Some(RolloutAnalysisRunStatus {
                name: "web-6b59f54746-2-post".into(),
                status: "Failed".into(),
                message: String::new(),
            }),
            ..Default::default()
        };
        let tally = Tally::of(&[
            aborted(Some(2), None),
            aborted(None, Some(BlueGreenStatus::default())),
            aborted(None, Some(BlueGreenStatus::default())),
            aborted(None, Some(post)),
        ]);
        let table = tally.table();
        let causes: Vec<&str> = table.lines().skip(3).take(3).collect();
        assert_eq!(
            causes,
            [
                "        2  before the switch by success-rate",
                "        1  after the switch by success-rate",
                "        1  at step 2 by success-rate",
            ]
        );
        let json = serde_json::to_value(&tally.aborted_by).unwrap_or_default();
        assert_eq!(json[0]["promotion"], "PrePromotion");
        assert_eq!(json[1]["promotion"], "PostPromotion");
        assert!(json[2].get("promotion").is_none(), "a canary's has none");
    }
}
