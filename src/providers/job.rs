//! Argo's `job` provider: a Kubernetes Job per measurement. The Job succeeding (condition Complete) is a
//! Successful measurement, failing (Failed) a Failed one with the Job's reason. Its rules, as Argo's: the
//! Job is named `<run uid>.<metric>.<n>` (n = the metric's count + errors + 1, so a restarted daemon names
//! the Job it may already have created the same, and adopts it instead of running a second); labelled with
//! the run's UID, annotated with the run's name, namespace and the metric; owned by the AnalysisRun; its
//! `spec` sent as written. A measurement stays Running (startedAt, no finishedAt, `job-name` in its metadata)
//! until the Job ends; a terminated run deletes it. Jobs past the metric's measurement retention are deleted
//! (Argo's garbage collection, per metric).
//!
//! This module owns the Job's shape, its checks and reading its outcome; the API calls and the watch are
//! `k8s/jobs.rs`'s, scheduling and counters the engine's.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

use super::ProviderError;
use super::provider::{MeasureAt, MetricProvider, Progress, RunRef};
use crate::api::Controlled;
use crate::api::{AnalysisPhase, JobMetric, Metric};
use crate::engine::args;
use crate::engine::template::Finding;
use crate::k8s::jobs::{Jobs, RUN_NAME_ANNOTATION, RUN_UID_LABEL};

/// The measurement's metadata key holding its Job's name (Argo's).
pub const JOB_NAME_KEY: &str = "job-name";
/// The measurement's metadata key holding its Job's namespace (Argo's).
pub const JOB_NAMESPACE_KEY: &str = "job-namespace";
const RUN_NAMESPACE_ANNOTATION: &str = "analysisrun.argoproj.io/namespace";
const METRIC_ANNOTATION: &str = "analysisrun.argoproj.io/metric-name";
/// A Job's name becomes a label value of its Pods, so it must fit in one.
const NAME_LIMIT: usize = 63;

/// Runs Jobs on the cluster `jobs` talks to; without one, every job metric is an Error saying so.
#[derive(Debug, Clone, Default)]
pub struct JobProvider {
    pub(super) jobs: Option<Arc<Jobs>>,
}

impl MetricProvider for JobProvider {
    fn name(&self) -> &'static str {
        "job"
    }

    fn validate(&self, metric: &Metric, path: &str, findings: &mut Vec<Finding>) {
        if let Some(job) = &metric.provider.job {
            check(job, &format!("{path}.job"), findings);
        }
    }

    fn measure<'a>(&'a self, metric: &'a Metric, at: MeasureAt<'a>) -> BoxFuture<'a, Progress> {
        Box::pin(async move {
            let jobs = match self.cluster() {
                Ok(jobs) => jobs,
                Err(e) => return Progress::Finished(Err(e)),
            };
            match at.in_flight() {
                Some(m) => match job_ref(m.metadata.as_ref(), at.run) {
                    Ok((namespace, name)) => collect(jobs, &namespace, &name, at).await,
                    Err(e) => Progress::Finished(Err(e)),
                },
                None => start(jobs, metric, at).await,
            }
        })
    }

    fn terminate<'a>(
        &'a self,
        _metric: &'a Metric,
        at: MeasureAt<'a>,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            let jobs = self.cluster()?;
            let flying = at.in_flight().and_then(|m| m.metadata.as_ref());
            let (namespace, name) = job_ref(flying, at.run)?;
            jobs.delete(&namespace, &name).await.map_err(api_error)?;
            tracing::info!(job = %format!("{namespace}/{name}"), "Job terminated");
            Ok(())
        })
    }

    fn garbage_collect<'a>(
        &'a self,
        metric: &'a Metric,
        at: MeasureAt<'a>,
        keep: usize,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            // Without a cluster no Job was ever created.
            let Some(jobs) = self.jobs.as_deref() else {
                return Ok(());
            };
            let cached = jobs.cached(&at.run.namespace);
            for job in past_retention(&cached, at.run, &metric.name, keep) {
                let (namespace, name) = (
                    &at.run.namespace,
                    job.metadata.name.as_deref().unwrap_or_default(),
                );
                jobs.delete(namespace, name).await.map_err(|e| {
                    ProviderError::Invalid(format!(
                        "deleting job.batch {namespace}/{name}: {}",
                        api_error(e)
                    ))
                })?;
                tracing::info!(job = %format!("{namespace}/{name}"), "Job garbage collected");
            }
            Ok(())
        })
    }
}

impl JobProvider {
    fn cluster(&self) -> Result<&Jobs, ProviderError> {
        self.jobs.as_deref().ok_or_else(|| {
            ProviderError::Invalid(
                "the job provider needs a Kubernetes cluster, and none is configured (kubeconfig or \
                 in-cluster)"
                    .to_string(),
            )
        })
    }
}

/// Creates the measurement's Job, or adopts the one a previous attempt of the same measurement created.
async fn start(jobs: &Jobs, metric: &Metric, at: MeasureAt<'_>) -> Progress {
    let Some(spec) = &metric.provider.job else {
        return Progress::Finished(Err(ProviderError::Invalid(
            "the metric has no job provider".to_string(),
        )));
    };
    let attempt = at
        .result
        .map_or(1, |r| (i64::from(r.count) + i64::from(r.error)).max(0) + 1);
    let name = job_name(&at.run.uid, &metric.name, attempt);
    let namespace = at.run.namespace.clone();
    let object = job_object(spec, &name, &metric.name, at.run);
    if let Err(created) = jobs.create(&namespace, object).await {
        if !crate::k8s::is_status(&created, 409) {
            return Progress::Finished(Err(api_error(created)));
        }
        // Created before a restart (or by the previous try of this tick): ours only if it carries this run.
        let existing = jobs.get(&namespace, &name).await;
        let ours =
            matches!(&existing, Ok(Some(job)) if owner_uid(job, at.run) == Some(&at.run.uid));
        if !ours {
            return Progress::Finished(Err(api_error(created)));
        }
        tracing::info!(job = %format!("{namespace}/{name}"), "Adopted the Job an earlier attempt created");
    }
    Progress::Running {
        // Look at once: a Job that ends quickly is collected on the next tick.
        resume_at: at.now,
        metadata: BTreeMap::from([
            (JOB_NAME_KEY.to_string(), name),
            (JOB_NAMESPACE_KEY.to_string(), namespace),
        ]),
    }
}

/// Argo's garbage collection, for one metric: of the Jobs `run` created for `metric` (its label and
/// annotation), all but the newest `keep` (by creation, then by the number in the name), oldest first. Jobs
/// already being deleted are left to finish going. Argo counts every Job of the run together, so a metric
/// with a short retention would delete the Jobs, even the one in flight, of another; each metric counts its
/// own here.
pub fn past_retention<'a>(
    jobs: &'a [Arc<Job>],
    run: &RunRef,
    metric: &str,
    keep: usize,
) -> Vec<&'a Job> {
    let mut own: Vec<&Job> = jobs
        .iter()
        .map(Arc::as_ref)
        .filter(|job| {
            let meta = &job.metadata;
            meta.deletion_timestamp.is_none()
                && meta.namespace.as_deref() == Some(run.namespace.as_str())
                && meta.labels.as_ref().and_then(|l| l.get(RUN_UID_LABEL)) == Some(&run.uid)
                && meta
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(METRIC_ANNOTATION))
                    .map(String::as_str)
                    == Some(metric)
                && meta.name.is_some()
        })
        .collect();
    own.sort_by_key(|job| {
        let meta = &job.metadata;
        let number = meta
            .name
            .as_deref()
            .and_then(|n| n.rsplit('.').next())
            .and_then(|n| n.parse::<i64>().ok());
        (meta.creation_timestamp.as_ref().map(|t| t.0), number)
    });
    let excess = own.len().saturating_sub(keep);
    own.truncate(excess);
    own
}

/// Reads the outcome of the measurement's Job.
async fn collect(jobs: &Jobs, namespace: &str, name: &str, at: MeasureAt<'_>) -> Progress {
    let job = match jobs.get(namespace, name).await {
        Ok(Some(job)) => job,
        Ok(None) => {
            return Progress::Finished(Err(ProviderError::Invalid(format!(
                "job.batch {name:?} not found"
            ))));
        }
        // A moment without an answer (Argo reads its informer's cache, which never fails so): ending the
        // measurement would leave the Job running and start the next one beside it. Look again shortly.
        Err(e) if passing(&e) => {
            tracing::warn!(job = %format!("{namespace}/{name}"), error = %e, "Cannot read the Job; looking again");
            return Progress::Running {
                resume_at: at
                    .now
                    .checked_add(crate::engine::analysis::ERROR_RETRY_INTERVAL)
                    .unwrap_or(at.now),
                metadata: BTreeMap::new(),
            };
        }
        Err(e) => return Progress::Finished(Err(api_error(e))),
    };
    if let Some((phase, message)) = outcome(&job) {
        tracing::info!(job = %format!("{namespace}/{name}"), phase = %phase, "Job completed");
        return Progress::Ended { phase, message };
    }
    // Argo's growing delay: the square root of twice the seconds since the Job started (read from the
    // watch's cache, so a look costs no request). A Job that ends is collected at the next look, not sooner:
    // Argo enqueues the run when a Job completes, but that reconcile too waits for the measurement's resumeAt.
    let started = at
        .in_flight()
        .and_then(|m| m.started_at.as_ref())
        .map_or(at.now, |t| t.0);
    let elapsed = at.now.duration_since(started).as_secs_f64().max(0.0);
    let delay = jiff::SignedDuration::from_secs_f64((2.0 * elapsed).sqrt());
    Progress::Running {
        resume_at: at.now.checked_add(delay).unwrap_or(at.now),
        metadata: BTreeMap::new(),
    }
}

/// The phase a Job's conditions give its measurement: Complete → Successful, Failed → Failed with the
/// Job's reason and message; `None` while it runs.
pub fn outcome(job: &Job) -> Option<(AnalysisPhase, Option<String>)> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .filter(|c| c.status == "True")
        .filter_map(|c| match c.type_.as_str() {
            "Complete" => Some((AnalysisPhase::Successful, None)),
            "Failed" => {
                let said: Vec<&str> = [&c.reason, &c.message]
                    .into_iter()
                    .filter_map(|t| t.as_deref().filter(|t| !t.is_empty()))
                    .collect();
                Some((
                    AnalysisPhase::Failed,
                    Some(said.join(": ")).filter(|m| !m.is_empty()),
                ))
            }
            _ => None,
        })
        .next_back()
}

/// Argo's Job name: `<run uid>.<metric>.<attempt>`, the metric's name shortened so the whole fits in 63
/// characters.
pub fn job_name(uid: &str, metric: &str, attempt: i64) -> String {
    let full = format!("{uid}.{metric}.{attempt}");
    let over = full.len().saturating_sub(NAME_LIMIT);
    if over == 0 {
        return full;
    }
    let mut keep = metric.len().saturating_sub(over);
    while !metric.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{uid}.{}.{attempt}", &metric[..keep])
}

/// The Job to create: the user's labels and annotations, Argo's, the owner, and the spec as written (its Pod
/// template labelled with the run's UID too, as Argo labels it).
pub fn job_object(spec: &JobMetric, name: &str, metric: &str, run: &RunRef) -> Value {
    let metadata = spec.metadata.clone().unwrap_or_default();
    let mut labels = metadata.labels.unwrap_or_default();
    labels.insert(RUN_UID_LABEL.to_string(), run.uid.clone());
    let mut annotations = metadata.annotations.unwrap_or_default();
    annotations.insert(RUN_NAME_ANNOTATION.to_string(), run.name.clone());
    annotations.insert(RUN_NAMESPACE_ANNOTATION.to_string(), run.namespace.clone());
    annotations.insert(METRIC_ANNOTATION.to_string(), metric.to_string());
    let mut job_spec = spec.spec.clone();
    if let Some(template) = job_spec.get_mut("template").and_then(Value::as_object_mut) {
        let meta = template.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            let pod_labels = meta.entry("labels").or_insert_with(|| json!({}));
            if let Some(pod_labels) = pod_labels.as_object_mut() {
                pod_labels.insert(RUN_UID_LABEL.to_string(), json!(run.uid));
            }
        }
    }
    let mut object = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": run.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": job_spec,
    });
    if run.owned {
        object["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisRun",
            "name": run.name,
            "uid": run.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }]);
    }
    object
}

/// The UID of the run a Job was created for: its controller's, or (no owner: `canaryd analyze`) its label.
fn owner_uid<'a>(job: &'a Job, run: &RunRef) -> Option<&'a String> {
    if run.owned {
        job.metadata.controller().map(|o| &o.uid)
    } else {
        job.metadata.labels.as_ref()?.get(RUN_UID_LABEL)
    }
}

/// The Job of a measurement in flight, from its metadata (the run's namespace when it names none).
fn job_ref(
    metadata: Option<&BTreeMap<String, String>>,
    run: &RunRef,
) -> Result<(String, String), ProviderError> {
    let name = metadata
        .and_then(|m| m.get(JOB_NAME_KEY))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ProviderError::Invalid("job metadata reference missing".to_string()))?;
    let namespace = metadata
        .and_then(|m| m.get(JOB_NAMESPACE_KEY))
        .filter(|n| !n.is_empty())
        .unwrap_or(&run.namespace);
    Ok((namespace.clone(), name.clone()))
}

/// An error that says nothing about the Job: no answer, or a 5xx or 429 (a refusal, 403 say, is final).
fn passing(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        _ => true,
    }
}

/// The API server's own words for a refused call (quota, admission webhook, RBAC).
fn api_error(e: kube::Error) -> ProviderError {
    match e {
        kube::Error::Api(status) => ProviderError::Invalid(status.message.clone()),
        other => ProviderError::Invalid(other.to_string()),
    }
}

/// What a Job needs before it is sent: a spec with a Pod template that has containers (each named, with an
/// image) and a restartPolicy of Never or OnFailure, and fields of the types a Job declares.
fn check(job: &JobMetric, path: &str, findings: &mut Vec<Finding>) {
    let mut error = |at: String, message: String| findings.push(Finding::error(at, message));
    let spec_path = format!("{path}.spec");
    let Some(spec) = job.spec.as_object() else {
        let message = match &job.spec {
            Value::Null => "required".to_string(),
            other => format!("must be a Job spec (an object), got {}", kind(other)),
        };
        return error(spec_path, message);
    };
    for field in [
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
        "completions",
        "parallelism",
    ] {
        if let Some(v) = spec.get(field)
            && !v.is_i64()
            && !v.as_str().is_some_and(args::is_templated)
        {
            error(
                format!("{spec_path}.{field}"),
                format!("must be an integer, got {}", kind(v)),
            );
        }
    }
    let template_path = format!("{spec_path}.template.spec");
    let pod = spec.get("template").and_then(|t| t.get("spec"));
    let Some(pod) = pod.and_then(Value::as_object) else {
        return error(
            template_path,
            present(
                pod,
                "required: the Pod template the Job runs",
                "a Pod spec (an object)",
            ),
        );
    };
    let policy = pod.get("restartPolicy");
    match policy.and_then(Value::as_str) {
        Some("Never" | "OnFailure") => {}
        Some(p) if args::is_templated(p) => {}
        Some(p) => error(
            format!("{template_path}.restartPolicy"),
            format!("{p:?} is not allowed for a Job: use Never or OnFailure"),
        ),
        None => error(
            format!("{template_path}.restartPolicy"),
            present(
                policy,
                "required for a Job: Never or OnFailure",
                "Never or OnFailure",
            ),
        ),
    }
    let containers = pod.get("containers");
    let Some(list) = containers
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    else {
        return error(
            format!("{template_path}.containers"),
            present(
                containers.filter(|c| !c.is_array()),
                "required: at least one container",
                "a list of containers",
            ),
        );
    };
    for (i, container) in list.iter().enumerate() {
        let at = format!("{template_path}.containers[{i}]");
        if !container.is_object() {
            error(at, present(Some(container), "", "a container (an object)"));
            continue;
        }
        for field in ["name", "image"] {
            let value = container.get(field);
            if value
                .and_then(Value::as_str)
                .is_none_or(|v| v.trim().is_empty())
            {
                let given = value.filter(|v| !v.is_string() && !v.is_null());
                error(
                    format!("{at}.{field}"),
                    present(given, "required", "a string"),
                );
            }
        }
    }
}

/// `missing` when the field is absent (or null), else that it must be `what`, saying what it is.
fn present(field: Option<&Value>, missing: &str, what: &str) -> String {
    match field.filter(|v| !v.is_null()) {
        None => missing.to_string(),
        Some(v) => format!("must be {what}, got {}", kind(v)),
    }
}

fn kind(v: &Value) -> &'static str {
    crate::api::decode::kind_of(v, "a list")
}

#[cfg(test)]
#[path = "job/tests.rs"]
mod tests;
