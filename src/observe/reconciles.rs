//! The per-object series the daemon counts as it works, under Argo Rollouts' names: the reconcile histograms
//! (`rollout_reconcile`, `analysis_run_reconcile`, with Argo's buckets), the failed reconciles
//! (`rollout_reconcile_error`, `analysis_run_reconcile_error`) and the Rollouts' Events (`rollout_events_total`).
//! Like Argo's `MetricsServer.Remove`, the series of an object that is gone are forgotten ([`Reconciles::forget_all_but`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};

use super::{Exposition, Histogram, family, sample, write_histogram};

/// Upper bounds (seconds) of Argo's reconcile histograms.
pub const RECONCILE_BUCKETS: &[f64] = &[0.01, 0.15, 0.25, 0.5, 1.0];

/// The kinds whose reconciles are counted, each under Argo's family prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Rollout,
    AnalysisRun,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Rollout => "rollout",
            Kind::AnalysisRun => "analysis_run",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Rollout => "the rollout",
            Kind::AnalysisRun => "the analysis run",
        }
    }
}

/// An object: its namespace and name.
pub type Object = (String, String);

/// The counts, per object.
#[derive(Debug, Default)]
pub struct Reconciles {
    durations: Mutex<BTreeMap<(Kind, Object), Histogram>>,
    errors: Mutex<BTreeMap<(Kind, Object), u64>>,
    /// Per Rollout, Event type and reason.
    events: Mutex<BTreeMap<(Object, String, String), u64>>,
}

impl Reconciles {
    /// One reconcile of `object` took `seconds`.
    pub fn reconciled(&self, kind: Kind, object: &Object, seconds: f64) {
        let mut durations = self
            .durations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        durations
            .entry((kind, object.clone()))
            .or_insert_with(|| Histogram::with_bounds(RECONCILE_BUCKETS))
            .observe(seconds);
    }

    /// One reconcile of `object` failed.
    pub fn failed(&self, kind: Kind, object: &Object) {
        let mut errors = self.errors.lock().unwrap_or_else(PoisonError::into_inner);
        *errors.entry((kind, object.clone())).or_default() += 1;
    }

    /// An Event of `type_` (Normal or Warning) and `reason` was recorded about the Rollout `rollout`.
    pub fn rollout_event(&self, rollout: &Object, type_: &str, reason: &str) {
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        *events
            .entry((rollout.clone(), type_.to_string(), reason.to_string()))
            .or_default() += 1;
    }

    /// Forgets every series of a `kind` object not in `live` (deleted ones).
    pub fn forget_all_but(&self, kind: Kind, live: &BTreeSet<Object>) {
        let keep = |k: &(Kind, Object)| k.0 != kind || live.contains(&k.1);
        self.durations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|k, _| keep(k));
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|k, _| keep(k));
        if kind == Kind::Rollout {
            self.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|(object, _, _), _| live.contains(object));
        }
    }

    pub fn write(&self, out: &mut Exposition) {
        let durations = self
            .durations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let errors = self
            .errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for kind in [Kind::Rollout, Kind::AnalysisRun] {
            let name = format!("{}_reconcile", kind.prefix());
            let help = match kind {
                Kind::Rollout => "Rollout reconciliation performance.",
                Kind::AnalysisRun => "Analysis Run reconciliation performance.",
            };
            family(out, &name, "histogram", help);
            for ((_, (namespace, object)), h) in durations.iter().filter(|((k, _), _)| *k == kind) {
                write_histogram(out, &name, &[("namespace", namespace), ("name", object)], h);
            }
            let name = format!("{}_reconcile_error", kind.prefix());
            let help = format!("Error occurring during {}", kind.what());
            family(out, &name, "counter", &help);
            for ((_, (namespace, object)), n) in errors.iter().filter(|((k, _), _)| *k == kind) {
                let labels = [("namespace", namespace.as_str()), ("name", object.as_str())];
                sample(out, &name, &labels, *n as f64);
            }
        }
        let events = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        family(
            out,
            "rollout_events_total",
            "counter",
            "Count of rollout events",
        );
        for (((namespace, name), type_, reason), n) in &events {
            let labels = [
                ("namespace", namespace.as_str()),
                ("name", name.as_str()),
                ("type", type_.as_str()),
                ("reason", reason.as_str()),
            ];
            sample(out, "rollout_events_total", &labels, *n as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str) -> Object {
        ("shop".to_string(), name.to_string())
    }

    #[test]
    fn the_series_of_deleted_objects_are_forgotten_and_only_of_their_kind() {
        let r = Reconciles::default();
        r.reconciled(Kind::Rollout, &object("web"), 0.2);
        r.reconciled(Kind::Rollout, &object("gone"), 0.2);
        r.failed(Kind::Rollout, &object("gone"));
        r.rollout_event(&object("gone"), "Normal", "RolloutUpdated");
        r.reconciled(Kind::AnalysisRun, &object("gone"), 0.005);
        r.forget_all_but(Kind::Rollout, &BTreeSet::from([object("web")]));
        let mut out = Exposition::collect();
        r.write(&mut out);
        let out = out.finish();
        assert!(
            out.contains("rollout_reconcile_count{namespace=\"shop\",name=\"web\"} 1\n"),
            "{out}"
        );
        assert!(
            !out.contains("rollout_reconcile_count{namespace=\"shop\",name=\"gone\"}"),
            "{out}"
        );
        assert!(!out.contains("rollout_reconcile_error{"), "{out}");
        assert!(!out.contains("rollout_events_total{"), "{out}");
        // An AnalysisRun of the same name is another object.
        assert!(
            out.contains(
                "analysis_run_reconcile_bucket{namespace=\"shop\",name=\"gone\",le=\"0.01\"} 1\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn errors_and_events_are_counted_with_argos_labels() {
        let r = Reconciles::default();
        r.failed(Kind::AnalysisRun, &object("run"));
        r.failed(Kind::AnalysisRun, &object("run"));
        r.rollout_event(&object("web"), "Warning", "RolloutAborted");
        let mut out = Exposition::collect();
        r.write(&mut out);
        let out = out.finish();
        assert!(
            out.contains("analysis_run_reconcile_error{namespace=\"shop\",name=\"run\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains(
                "rollout_events_total{namespace=\"shop\",name=\"web\",type=\"Warning\",reason=\"RolloutAborted\"} 1\n"
            ),
            "{out}"
        );
    }
}
