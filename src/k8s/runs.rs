//! Reading and writing one AnalysisRun: the Secrets its args name, its status (a merge patch carrying
//! `metadata.resourceVersion`, so the API server refuses it with 409 when the object changed since it was
//! read, sent where `status.rs` finds the CRD keeps status), its deletion when its TTL runs out, and the Events
//! of its phase changes.
//! Secret values never leave this module except into the measuring code; what is written is scrubbed.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::events::Reporter;
use kube::{Resource, ResourceExt};

use super::is_status;
pub use super::status::WriteError;
use super::status::{Conditional, StatusWriter};
use crate::api::{
    AnalysisPhase, AnalysisRun, AnalysisRunStatus, Argument, MetricResult, RunSummary, SecretKeyRef,
};
use crate::engine::analysis::Announcement;

/// The values of every `valueFrom.secretKeyRef` an arg without a value names, read from `namespace`. A
/// Secret or key that does not exist is kept as the reason (the run then ends Error); any other API error
/// is returned, so the reconcile is retried.
pub async fn read_secrets(
    client: &kube::Client,
    namespace: &str,
    args: &[Argument],
) -> Result<BTreeMap<(String, String), Result<String, String>>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut out = BTreeMap::new();
    let refs = args
        .iter()
        .filter(|a| a.value.is_none())
        .filter_map(|a| a.value_from.as_ref()?.secret_key_ref.as_ref());
    for r in refs {
        let key = (r.name.clone(), r.key.clone());
        if out.contains_key(&key) {
            continue;
        }
        let value = match api.get_opt(&r.name).await? {
            None => Err(format!("Secret {namespace}/{} not found", r.name)),
            Some(secret) => secret_value(&secret, &r.key).ok_or_else(|| {
                format!(
                    "Secret {namespace}/{} has no key {:?} (or it is not UTF-8)",
                    r.name, r.key
                )
            }),
        };
        out.insert(key, value);
    }
    Ok(out)
}

fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    if let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(key)) {
        return String::from_utf8(bytes.0.clone()).ok();
    }
    secret.string_data.as_ref()?.get(key).cloned()
}

/// Looks a reference up in what [`read_secrets`] returned.
pub fn lookup(
    read: &BTreeMap<(String, String), Result<String, String>>,
    r: &SecretKeyRef,
) -> Result<String, String> {
    read.get(&(r.name.clone(), r.key.clone()))
        .cloned()
        .unwrap_or_else(|| Err(format!("Secret {} was not read", r.name)))
}

/// A run's status as it is written: every field, `null` where the new status has none (a merge patch keeps
/// the fields it does not mention).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusFields<'a> {
    phase: &'a Option<AnalysisPhase>,
    message: &'a Option<String>,
    metric_results: &'a Option<Vec<MetricResult>>,
    started_at: &'a Option<Time>,
    completed_at: &'a Option<Time>,
    run_summary: &'a Option<RunSummary>,
    dry_run_summary: &'a Option<RunSummary>,
}

impl<'a> StatusFields<'a> {
    fn of(status: &'a AnalysisRunStatus) -> Self {
        // Spelled out field by field, so a field added to the status cannot be left out of the write.
        let AnalysisRunStatus {
            phase,
            message,
            metric_results,
            started_at,
            completed_at,
            run_summary,
            dry_run_summary,
        } = status;
        StatusFields {
            phase,
            message,
            metric_results,
            started_at,
            completed_at,
            run_summary,
            dry_run_summary,
        }
    }
}

/// Writes `status` over the status of the run `name` in `namespace`, provided the object is still at
/// `resource_version`, wherever the installed CRD keeps status. Top-level fields the new status lacks are
/// removed (a merge patch would keep them). Returns the updated object's metadata only: the caller has the spec
/// and the status it wrote, and reading just the metadata out of the reply spares decoding the whole object on
/// every measurement.
pub async fn patch_status(
    writer: &StatusWriter,
    namespace: &str,
    name: &str,
    resource_version: &str,
    status: &AnalysisRunStatus,
    secrets: &[String],
) -> Result<ObjectMeta, WriteError> {
    let body = Conditional::new(resource_version, StatusFields::of(status));
    let namespace = Some(namespace);
    // Written straight from the typed status; only a run with secrets goes through a JSON tree to scrub.
    if secrets.iter().any(|s| !s.is_empty()) {
        let mut value =
            serde_json::to_value(&body).map_err(|e| WriteError::Api(kube::Error::SerdeError(e)))?;
        // The last guard before anything is written, whatever a provider or message put there.
        crate::scrub::json(&mut value, secrets);
        writer
            .patch::<AnalysisRun, _>(namespace, name, resource_version, &value)
            .await
    } else {
        writer
            .patch::<AnalysisRun, _>(namespace, name, resource_version, &body)
            .await
    }
}

/// When a completed run is to be deleted (`spec.ttlStrategy`, counted from `status.completedAt`):
/// secondsAfterFailure for Failed and Error, secondsAfterSuccess for Successful, else
/// secondsAfterCompletion.
pub fn ttl_expiry(run: &AnalysisRun) -> Option<Timestamp> {
    let ttl = run.spec.ttl_strategy.as_ref()?;
    let status = run.status.as_ref()?;
    let completed = status.completed_at.as_ref()?.0;
    let specific = match status.phase? {
        AnalysisPhase::Failed | AnalysisPhase::Error => ttl.seconds_after_failure,
        AnalysisPhase::Successful => ttl.seconds_after_success,
        _ => None,
    };
    let seconds = specific.or(ttl.seconds_after_completion)?;
    completed
        .checked_add(jiff::SignedDuration::from_secs(i64::from(seconds.max(0))))
        .ok()
}

/// Deletes the run, only if it is still the object we judged (uid precondition).
pub async fn delete_run(api: &Api<AnalysisRun>, run: &AnalysisRun) -> Result<(), kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: run.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&run.name_any(), &params).await {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The events.k8s.io/v1 Event on `run` at `now` of one thing a step announced
/// ([`analysis::announcements`](crate::engine::analysis::announcements)), secret values hidden in its note.
pub fn step_event(
    reporter: &Reporter,
    run: &AnalysisRun,
    announced: &Announcement,
    secrets: &[String],
    now: Timestamp,
) -> Event {
    let what = super::events::Happened {
        action: "Analyze",
        reason: announced.reason,
        note: crate::scrub::text(announced.note.clone(), secrets),
        warning: announced.warning,
    };
    super::events::about(reporter, run.object_ref(&()), what, now, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TtlStrategy;
    use serde_json::json;

    #[test]
    fn a_status_write_names_every_field_and_nulls_the_ones_the_status_lacks() {
        let status = AnalysisRunStatus {
            phase: Some(AnalysisPhase::Running),
            ..Default::default()
        };
        let body = Conditional::new("7", StatusFields::of(&status));
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({
                "metadata": {"resourceVersion": "7"},
                "status": {
                    "phase": "Running", "message": null, "metricResults": null, "startedAt": null,
                    "completedAt": null, "runSummary": null, "dryRunSummary": null
                }
            })
        );
    }

    #[test]
    fn ttl_prefers_the_phase_specific_field() {
        let completed: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut run = AnalysisRun::new("r", Default::default());
        run.spec.ttl_strategy = Some(TtlStrategy {
            seconds_after_completion: Some(100),
            seconds_after_failure: Some(10),
            seconds_after_success: None,
        });
        run.status = Some(AnalysisRunStatus {
            phase: Some(AnalysisPhase::Failed),
            completed_at: Some(Time(completed)),
            ..Default::default()
        });
        assert_eq!(
            ttl_expiry(&run),
            Some(completed + jiff::SignedDuration::from_secs(10))
        );
        if let Some(s) = run.status.as_mut() {
            s.phase = Some(AnalysisPhase::Successful);
        }
        assert_eq!(
            ttl_expiry(&run),
            Some(completed + jiff::SignedDuration::from_secs(100))
        );
        run.spec.ttl_strategy = None;
        assert_eq!(ttl_expiry(&run), None);
    }
}
