//! The traffic routers' edge: brings the router objects a Rollout's `trafficRouting` names to the weight
//! and pod hashes the planner chose ([`Route`]). [`ApiRouter`] reads and writes them through the API server
//! (a write only when something changes, each conditional on the resourceVersion it read, a 409 re-read and
//! retried). Which objects, in which order, and what to write is `engine::routing`'s (`targets` and their
//! builders), which `rehearse` and `demo` apply to objects in memory; the weight and
//! `status.canary.weights` are the planner's. This module must not decide either.

mod api;
pub mod objects;

pub use self::api::ApiRouter;
use crate::engine::rollout::Event;
pub use crate::engine::rollout::Route;
#[cfg(doc)]
use crate::engine::routing::Target;
use crate::engine::routing::smi::SmiApiVersion;
use crate::engine::routing::traefik::{self, TraefikApi};
use crate::engine::routing::{RouteFailure, RoutingError};

/// The field manager of every router write, so Argo CD and `kubectl` see one stable name.
pub const FIELD_MANAGER: &str = "canaryd";

/// The APIs the routers whose kind has more than one read and write through, as the daemon's flags (Argo's)
/// say: the TrafficSplit version (`--traffic-split-api-version`) and the TraefikService group and version
/// (`--traefik-api-group`, `--traefik-api-version`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouterApis {
    pub smi: SmiApiVersion,
    pub traefik: TraefikApi,
}

/// One object a router wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub action: Action,
    /// The Events Argo's router records on the Rollout for this write ([`Target::written`]).
    pub announced: Vec<Event>,
    /// The resourceVersion the API server answered an update with, where the object was updated whole.
    pub version: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Created,
    Updated,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let action = match self.action {
            Action::Created => "created",
            Action::Updated => "updated",
        };
        write!(f, "{} {}/{} {action}", self.kind, self.namespace, self.name)
    }
}

/// Why the routers could not be brought to the route. Every variant names the object; none is fatal to
/// the process: the Rollout controller reports it (Event `TrafficRoutingError`) and retries.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// `trafficRouting` names something canaryd does not drive (the planner reports it as InvalidSpec).
    #[error("{0}")]
    Config(Box<RoutingError>),
    #[error("{kind} {namespace}/{name} not found")]
    Missing {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    /// The object does not fit the configuration, or is not shaped as its kind says (Argo's messages).
    #[error("{kind} {namespace}/{name}: {error}")]
    Unfit {
        kind: &'static str,
        namespace: String,
        name: String,
        error: Box<RoutingError>,
    },
    /// The API server refused the read or (`writing`) the write (admission webhook, schema, RBAC): its own
    /// message.
    #[error("the API server refused the {} of {kind} {namespace}/{name}: {message}", if *.writing { "write" } else { "read" })]
    Refused {
        kind: &'static str,
        namespace: String,
        name: String,
        message: String,
        writing: bool,
    },
    #[error("{kind} {namespace}/{name} changed under each of {attempts} attempts to update it")]
    Conflict {
        kind: &'static str,
        namespace: String,
        name: String,
        attempts: usize,
    },
    /// Anything else from the client (unreachable server, 5xx): retried by the caller.
    #[error("{kind} {namespace}/{name}: {source}")]
    Api {
        kind: &'static str,
        namespace: String,
        name: String,
        source: Box<kube::Error>,
        /// On the write, not the read.
        writing: bool,
    },
}

impl RouterError {
    /// The failure as the reconcile loop takes it: which object's (whether Argo announces it) and whether the
    /// object was only held back.
    pub fn failure(&self) -> RouteFailure {
        let (kind, held) = match self {
            RouterError::Config(_) => (None, false),
            RouterError::Unfit { kind, error, .. } => {
                (Some(*kind), matches!(**error, RoutingError::Held(_)))
            }
            RouterError::Missing { kind, .. }
            | RouterError::Refused { kind, .. }
            | RouterError::Conflict { kind, .. }
            | RouterError::Api { kind, .. } => (Some(*kind), false),
        };
        RouteFailure {
            router_warning: self.traefik_update_error(),
            ..RouteFailure::new(kind, held, self.to_string())
        }
    }

    /// Argo's Traefik router records a Warning of its own when its update of the TraefikService fails (its
    /// SetWeight), not when the read does: `TraefikServiceUpdateError`, "Error updating traefik service "web":
    /// <the error>".
    fn traefik_update_error(&self) -> Option<(&'static str, String)> {
        let (name, error) = match self {
            RouterError::Refused {
                kind: traefik::KIND,
                name,
                message,
                writing: true,
                ..
            } => (name, message.clone()),
            RouterError::Api {
                kind: traefik::KIND,
                name,
                source,
                writing: true,
                ..
            } => (name, source.to_string()),
            RouterError::Conflict {
                kind: traefik::KIND,
                name,
                ..
            } => (name, self.to_string()),
            _ => return None,
        };
        let message = format!("Error updating traefik service {name:?}: {error}");
        Some((traefik::UPDATE_ERROR, message))
    }
}
