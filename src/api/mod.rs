//! Wire types only: serde + schemars structs with Argo Rollouts' field names, and Go-style durations.
//! Nothing here validates, defaults or performs I/O; `engine/` gives the fields their meaning.

pub mod analysis;
pub mod appset;
pub mod compare;
pub mod decode;
pub mod duration;
pub mod rollout;
mod schema;

pub use analysis::*;
pub use appset::{ApplicationSet, ApplicationSetSpec, ClusterSecret};
pub use rollout::{Rollout, RolloutSpec};

/// The API group and version of every Argo kind canaryd reads.
pub const API_VERSION: &str = "argoproj.io/v1alpha1";

/// Generated CustomResourceDefinitions for the analysis kinds, in the order `canaryd crds` prints them.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    use kube::CustomResourceExt;
    vec![
        AnalysisTemplate::crd(),
        ClusterAnalysisTemplate::crd(),
        AnalysisRun::crd(),
    ]
}
