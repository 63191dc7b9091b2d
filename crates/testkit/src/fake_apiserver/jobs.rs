//! A simulated Job controller for the fake API server (canaryd creates Jobs; kube-controller-manager would run
//! them): every batch/v1 Job without conditions ends after a delay, Complete or Failed as the test's rule
//! says, with the status fields the real controller writes. It never touches other kinds, and Pods are not
//! simulated.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Shared;
use super::store::Key;

/// How the simulated Job controller ends Jobs.
#[derive(Clone)]
pub struct JobController {
    /// From the Job's creation to its end.
    pub delay: Duration,
    /// Whether a Job (as stored) succeeds.
    pub succeeds: Arc<dyn Fn(&Value) -> bool + Send + Sync>,
}

impl JobController {
    /// Jobs end after `delay`, as their containers' shell would: failed when a container's command or args
    /// say `exit N` with N other than 0 (Argo's examples' `exit 1`, `exit $FLIP`), complete otherwise.
    pub fn by_exit_code(delay: Duration) -> JobController {
        JobController {
            delay,
            succeeds: Arc::new(|job: &Value| !exits_nonzero(job)),
        }
    }
}

fn exits_nonzero(job: &Value) -> bool {
    let containers = job
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array);
    let words: Vec<&str> = containers
        .into_iter()
        .flatten()
        .flat_map(|c| ["command", "args"].map(|f| c.get(f)))
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let text = words.join(" ");
    text.split("exit ")
        .skip(1)
        .any(|rest| !rest.trim_start().starts_with('0'))
}

const JOBS: &str = "batch/v1/jobs";

/// Runs until the server shuts down.
pub(super) async fn run(shared: Arc<Shared>, controller: JobController) {
    let mut signal = shared.signal.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    let mut seen: HashSet<String> = HashSet::new();
    let mut pending: Vec<(tokio::time::Instant, Key, String)> = Vec::new();
    loop {
        let now = tokio::time::Instant::now();
        {
            let store = shared.lock_store();
            for job in store.list(JOBS, None) {
                let uid = job.pointer("/metadata/uid").and_then(Value::as_str);
                let ended = job.pointer("/status/conditions").is_some();
                if let Some(uid) = uid.filter(|uid| !ended && seen.insert(uid.to_string())) {
                    let key = (
                        JOBS.to_string(),
                        text(job, "/metadata/namespace"),
                        text(job, "/metadata/name"),
                    );
                    pending.push((now + controller.delay, key, uid.to_string()));
                }
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(at, _, _)| *at <= now);
        pending = later;
        for (_, key, uid) in due {
            finish(&shared, &controller, &key, &uid);
        }
        let next = pending.iter().map(|(at, _, _)| *at).min();
        tokio::select! {
            changed = signal.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
            () = tokio::time::sleep_until(next.unwrap_or(now)), if next.is_some() => {}
        }
    }
}

/// Ends the Job `key` (if it is still the one with `uid` and still running) as the rule says.
fn finish(shared: &Shared, controller: &JobController, key: &Key, uid: &str) {
    let Some(mut job) = shared.lock_store().get(key).map(|j| Value::clone(j)) else {
        return; // Deleted meanwhile.
    };
    if job.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid)
        || job.pointer("/status/conditions").is_some()
    {
        return;
    }
    let at = "2026-01-01T00:00:00Z";
    job["status"] = if (controller.succeeds)(&job) {
        json!({
            "startTime": at, "completionTime": at, "succeeded": 1, "ready": 0,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods"},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods"},
            ],
        })
    } else {
        json!({
            "startTime": at, "failed": 1, "ready": 0,
            "conditions": [
                {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit"},
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit"},
            ],
        })
    };
    let resource = shared.resource("batch", "v1", "jobs");
    if let Some(resource) = resource {
        let _ = shared.write(|store| store.put_direct(&resource, job));
    }
}

fn text(job: &Value, pointer: &str) -> String {
    job.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
