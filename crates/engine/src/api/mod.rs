//! Wire types only: serde + schemars structs with Argo Rollouts' field names, and Go-style durations.
//! Nothing here validates, defaults or performs I/O; `engine/` gives the fields their meaning.

pub mod analysis;
pub mod appset;
pub mod compare;
mod crd;
pub mod decode;
pub mod duration;
pub mod managed_routes;
pub mod meta;
pub mod reasons;
pub mod rollout;
mod schema;
pub mod traffic_routing;

pub use analysis::*;
pub use appset::{ApplicationSet, ApplicationSetSpec, ClusterSecret};
pub use crd::crds;
pub use meta::Controlled;
pub use rollout::{Rollout, RolloutSpec};

/// Argo Rollouts' label that assigns an object to one controller instance.
pub const INSTANCE_LABEL: &str = "argo-rollouts.argoproj.io/controller-instance-id";

/// The API group and version of every Argo kind canaryd reads.
pub const API_VERSION: &str = "argoproj.io/v1alpha1";
