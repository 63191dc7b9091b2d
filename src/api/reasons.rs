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

/// The message of a run stopped by `spec.terminate` (or by the end of a backtest), as Argo writes it.
pub const RUN_TERMINATED: &str = "Run Terminated";
/// The message of an in-flight measurement closed because the run is terminating, as Argo writes it.
pub const METRIC_TERMINATED: &str = "Metric Terminated";
