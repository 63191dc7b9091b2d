//! The Kubernetes edge of `canaryd run`: which AnalysisRuns this process owns (label selectors), reading
//! Secrets for args, writing status with the resourceVersion precondition (through the status subresource where
//! the CRD declares one, else through the object), deleting expired runs, publishing Events, and the leader
//! Lease, and a Rollout's reads (`rollout_reads`) and writes (`rollout_writes`). Nothing here decides an analysis outcome or a
//! Rollout's next step; it moves what `engine/` computed to and from the API server.

pub mod event_queue;
pub mod event_rate;
pub mod event_series;
pub mod events;
pub mod jobs;
pub mod lease;
pub mod managed_fields;
pub mod recent;
pub mod rollout_actions;
pub mod rollout_reads;
pub mod rollout_writes;
pub mod runs;
pub mod status;
pub mod versions;

pub use crate::api::INSTANCE_LABEL;

/// The label selector of the runs this process owns: those labelled with `instance_id`, or, without one,
/// only those carrying no instance label (the ones a default Argo Rollouts install would also leave alone
/// when it runs with an instance id of its own).
pub fn owner_selector(instance_id: Option<&str>) -> String {
    match instance_id {
        Some(id) => format!("{INSTANCE_LABEL}={id}"),
        None => format!("!{INSTANCE_LABEL}"),
    }
}

/// Whether the API server answered with HTTP `code`.
pub fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_instance_id_only_unlabelled_runs_are_owned() {
        assert_eq!(
            owner_selector(None),
            "!argo-rollouts.argoproj.io/controller-instance-id"
        );
        assert_eq!(
            owner_selector(Some("blue")),
            "argo-rollouts.argoproj.io/controller-instance-id=blue"
        );
    }
}
