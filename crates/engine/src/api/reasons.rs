//! The reasons and fixed messages canaryd writes where Argo Rollouts' tools read them (Event reasons, status
//! messages), with Argo's spelling: one module, so a name is spelled once. Owns no rule for when one is
//! written.

/// The Event reason of an AnalysisRun entering Running.
pub const ANALYSIS_RUN_RUNNING: &str = "AnalysisRunRunning";
/// The Event reason of an AnalysisRun ending Successful.
pub const ANALYSIS_RUN_SUCCESSFUL: &str = "AnalysisRunSuccessful";
/// The Event reason of an AnalysisRun ending Failed.
pub const ANALYSIS_RUN_FAILED: &str = "AnalysisRunFailed";
/// The Event reason of an AnalysisRun ending Error.
pub const ANALYSIS_RUN_ERROR: &str = "AnalysisRunError";
/// The Event reason of an AnalysisRun ending Inconclusive.
pub const ANALYSIS_RUN_INCONCLUSIVE: &str = "AnalysisRunInconclusive";

/// The Event reason of an AnalysisRun entering `phase` ("AnalysisRun" and the phase, as Argo Rollouts names
/// them, on the run itself and on the Rollout that owns it).
pub fn analysis_run(phase: crate::api::AnalysisPhase) -> &'static str {
    use crate::api::AnalysisPhase::*;
    match phase {
        Pending => "AnalysisRunPending",
        Running => ANALYSIS_RUN_RUNNING,
        Successful => ANALYSIS_RUN_SUCCESSFUL,
        Failed => ANALYSIS_RUN_FAILED,
        Error => ANALYSIS_RUN_ERROR,
        Inconclusive => ANALYSIS_RUN_INCONCLUSIVE,
    }
}

/// The Event reason of a metric of an AnalysisRun completing in `phase` ("Metric" and the phase, as Argo
/// Rollouts' `assessRunStatus` names them).
pub fn metric(phase: crate::api::AnalysisPhase) -> &'static str {
    use crate::api::AnalysisPhase::*;
    match phase {
        Pending => "MetricPending",
        Running => "MetricRunning",
        Successful => "MetricSuccessful",
        Failed => "MetricFailed",
        Error => "MetricError",
        Inconclusive => "MetricInconclusive",
    }
}

/// The note of the Event of an AnalysisRun completing in `phase` (Argo's
/// `recordAnalysisRunCompletionEvent`).
pub fn run_completed(phase: crate::api::AnalysisPhase) -> String {
    format!("Analysis Completed. Result: {phase}")
}

/// The note of the Event of a run's metric `name` completing in `phase` (Argo's `assessRunStatus`).
pub fn metric_completed(name: &str, phase: crate::api::AnalysisPhase) -> String {
    format!("Metric '{name}' Completed. Result: {phase}")
}

/// The message of a run stopped by `spec.terminate` (or by the end of a backtest), as Argo writes it.
pub const RUN_TERMINATED: &str = "Run Terminated";
/// The message of an in-flight measurement closed because the run is terminating, as Argo writes it.
pub const METRIC_TERMINATED: &str = "Metric Terminated";

/// A Rollout's condition types, reasons and fixed messages, and the Event reasons of its reconcile, as Argo
/// Rollouts writes them (`utils/conditions`): kubectl-argo-rollouts, Argo CD's health check and dashboards read
/// them.
pub mod rollout {
    pub const PROGRESSING: &str = "Progressing";
    pub const AVAILABLE: &str = "Available";
    pub const PAUSED: &str = "Paused";
    pub const HEALTHY: &str = "Healthy";
    pub const COMPLETED: &str = "Completed";
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// Copied from a ReplicaSet's own condition of that type (Argo's `getReplicaFailures`).
    pub const REPLICA_FAILURE: &str = "ReplicaFailure";

    pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
    pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
    pub const RS_UPDATED: &str = "ReplicaSetUpdated";
    pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
    pub const RS_NOT_AVAILABLE: &str = "ReplicaSetNotAvailable";
    pub const ROLLOUT_PAUSED: &str = "RolloutPaused";
    pub const ROLLOUT_RESUMED: &str = "RolloutResumed";
    pub const ROLLOUT_RETRY: &str = "RolloutRetry";
    pub const ROLLOUT_ABORTED: &str = "RolloutAborted";
    pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
    pub const AVAILABLE_REASON: &str = "AvailableReason";
    pub const ROLLOUT_HEALTHY: &str = "RolloutHealthy";
    pub const ROLLOUT_COMPLETED: &str = "RolloutCompleted";
    /// Argo's FailedRSCreateReason: the API server refused to create the new ReplicaSet. The reason of the
    /// Progressing condition (False) and of the Warning Event alike.
    pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";

    pub const PAUSED_MESSAGE: &str = "Rollout is paused";
    pub const RESUMED_MESSAGE: &str = "Rollout is resumed";
    pub const RETRY_MESSAGE: &str = "Retrying Rollout after abort";
    pub const AVAILABLE_MESSAGE: &str = "Rollout has minimum availability";
    pub const NOT_AVAILABLE_MESSAGE: &str = "Rollout does not have minimum availability";
    pub const HEALTHY_MESSAGE: &str = "Rollout is healthy";
    pub const NOT_HEALTHY_MESSAGE: &str = "Rollout is not healthy";

    /// Pause reasons.
    pub const CANARY_PAUSE_STEP: &str = "CanaryPauseStep";
    pub const INCONCLUSIVE_ANALYSIS: &str = "InconclusiveAnalysisRun";
    pub const BLUE_GREEN_PAUSE: &str = "BlueGreenPause";

    /// Event reasons of a Rollout's reconcile.
    pub const ROLLOUT_UPDATED: &str = "RolloutUpdated";
    pub const ROLLOUT_NOT_COMPLETED: &str = "RolloutNotCompleted";
    pub const ROLLOUT_STEP_COMPLETED: &str = "RolloutStepCompleted";
    pub const SCALING_REPLICA_SET: &str = "ScalingReplicaSet";
    pub const SWITCH_SERVICE: &str = "SwitchService";
    pub const SKIP_STEPS: &str = "SkipSteps";
    /// Argo's TrafficWeightUpdated; its message is "Traffic weight updated " + what changed.
    pub const TRAFFIC_WEIGHT_UPDATED: &str = "TrafficWeightUpdated";
    /// A Warning: a traffic router refused or failed the write; the message is the router's error.
    pub const TRAFFIC_ROUTING_ERROR: &str = "TrafficRoutingError";
    /// Argo's Rollout informer saw a Rollout for the first time (its `AddFunc`).
    pub const ROLLOUT_ADDED_TO_INFORMER: &str = "RolloutAddedToInformer";

    /// The message of [`ROLLOUT_ADDED_TO_INFORMER`].
    pub fn added_to_informer(namespace: &str, name: &str) -> String {
        format!("Rollout resource added to informer: {namespace}/{name}")
    }

    /// Argo's Istio router updated a DestinationRule's subsets (`UpdateHash`).
    pub const UPDATED_DESTINATION_RULE: &str = "UpdatedDestinationRule";
    /// Argo's Istio router updated a VirtualService (`SetWeight`); the space is Argo's.
    pub const UPDATED_VIRTUAL_SERVICE: &str = "Updated VirtualService";
    /// Argo's NGINX router creates the canary Ingress.
    pub const CREATING_CANARY_INGRESS: &str = "CreatingCanaryIngress";
    /// Argo's NGINX router patches the canary Ingress.
    pub const PATCHING_CANARY_INGRESS: &str = "PatchingCanaryIngress";
    /// Argo's ALB router patches an Ingress's action annotation.
    pub const PATCHING_ALB_INGRESS: &str = "PatchingALBIngress";
    /// Argo's SMI router created the TrafficSplit (`SetWeight`).
    pub const TRAFFIC_SPLIT_CREATED: &str = "TrafficSplitCreated";
}
