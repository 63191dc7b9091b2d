//! Desired router state: given a router object as the API server returned it, the Rollout's
//! `trafficRouting` configuration and what the planner wants ([`Desired`]: the canary weight, the Services,
//! the pod hashes), each router module returns the object to write, the merge patch to apply, or nothing when
//! the object already says it, or an error worded as Argo Rollouts words it. One module per router
//! ([`istio`], [`nginx`], [`gateway`]); this one owns the shared input, reading and checking the
//! configuration, and the errors. Pure and synchronous: no client, no clock; the edge (`routers/`) reads
//! and writes.

pub mod alb;
mod alb_managed;
pub mod alb_release;
pub mod gateway;
mod gateway_managed;
pub mod istio;
mod istio_destination_rule;
mod istio_managed;
pub mod managed_routes;
pub mod memory;
pub mod nginx;
pub mod smi;
mod targets;
pub mod traefik;

pub use managed_routes::ManagedRouteChange;
pub use targets::{Built, Moved, RouteFailure, RouterObject, Target, targets};

use serde_json::{Map, Value};

use crate::api::Rollout;
use crate::api::traffic_routing::{
    AlbTrafficRouting, GATEWAY_API_PLUGIN, GatewayApiTrafficRouting, IstioTrafficRouting,
    NginxTrafficRouting, SmiTrafficRouting, TraefikTrafficRouting,
};

const FIELD: &str = "spec.strategy.canary.trafficRouting";

/// Why a router object cannot be brought to the desired state. The messages are Argo's where Argo has one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RoutingError {
    /// The configuration names something canaryd does not drive, or is contradictory: InvalidSpec.
    #[error("{field}: {message}")]
    Config { field: String, message: String },
    /// The router object does not fit the configuration (Argo's reconcile-time errors, e.g. a route that is
    /// not there); the message is Argo's.
    #[error("{0}")]
    Mismatch(String),
    /// The object must not move yet (Argo's reconcile-time delay, e.g. the DestinationRule held back until the
    /// ReplicaSets are fully available): the reconcile stops here and is tried again.
    #[error("{0}")]
    Held(String),
    /// The router object is not shaped as its kind's schema says.
    #[error("{kind} `{name}`: {field}: {message}")]
    Malformed {
        kind: &'static str,
        name: String,
        field: String,
        message: String,
    },
}

/// A Rollout's traffic routing, read and checked: the routers canaryd drives, each at most once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Routing {
    pub istio: Option<IstioTrafficRouting>,
    pub nginx: Option<NginxTrafficRouting>,
    pub gateway_api: Option<GatewayApiTrafficRouting>,
    pub smi: Option<SmiTrafficRouting>,
    pub traefik: Option<TraefikTrafficRouting>,
    pub alb: Option<AlbTrafficRouting>,
    /// `maxTrafficWeight` as written; see [`Desired::max_weight`].
    pub max_traffic_weight: Option<i32>,
}

fn config(field: impl Into<String>, message: impl Into<String>) -> RoutingError {
    RoutingError::Config {
        field: field.into(),
        message: message.into(),
    }
}

/// Reads `spec.strategy.canary.trafficRouting`: `Ok(None)` without one; an error naming the first router
/// canaryd does not drive, or the first contradiction Argo's validation reports.
pub fn routing(rollout: &Rollout) -> Result<Option<Routing>, RoutingError> {
    let tr = rollout
        .spec
        .canary()
        .and_then(|c| c.traffic_routing.as_ref());
    let Some(tr) = tr else {
        return Ok(None);
    };
    let unsupported = [
        ("ambassador", tr.ambassador.is_some()),
        ("appMesh", tr.app_mesh.is_some()),
        ("apisix", tr.apisix.is_some()),
    ];
    for (name, set) in unsupported
        .into_iter()
        .chain(tr.rest.keys().map(|k| (k.as_str(), true)))
    {
        if set {
            return Err(config(
                format!("{FIELD}.{name}"),
                "not supported by canaryd: it drives Istio, NGINX Ingress, ALB, SMI, Traefik and the Gateway API plugin",
            ));
        }
    }
    managed_routes::read_list(Some(tr)).map_err(|e| config(format!("{FIELD}.managedRoutes"), e))?;
    if let Some(max) = tr.max_traffic_weight
        && max < 1
    {
        return Err(config(format!("{FIELD}.maxTrafficWeight"), "must be > 0"));
    }
    let mut gateway_api = None;
    for (name, value) in tr.plugins.iter().flatten() {
        if name != GATEWAY_API_PLUGIN {
            return Err(config(
                format!("{FIELD}.plugins.{name}"),
                format!(
                    "the traffic-router plugin {name:?} is not supported by canaryd; it runs {GATEWAY_API_PLUGIN:?}"
                ),
            ));
        }
        let field = format!("{FIELD}.plugins.{name}");
        let parsed: GatewayApiTrafficRouting = serde_path_to_error::deserialize(value)
            .map_err(|e| config(format!("{field}.{}", e.path()), e.inner().to_string()))?;
        gateway::check(&parsed, &field)?;
        gateway_api = Some(parsed);
    }
    if let Some(istio) = &tr.istio {
        istio::check(istio, &format!("{FIELD}.istio"))?;
    }
    if let Some(nginx) = &tr.nginx {
        nginx::check(nginx, &format!("{FIELD}.nginx"))?;
    }
    let smi = parsed(tr.smi.as_ref(), "smi")?;
    let traefik = parsed(tr.traefik.as_ref(), "traefik")?;
    let alb: Option<AlbTrafficRouting> = parsed(tr.alb.as_ref(), "alb")?;
    if let Some(alb) = &alb {
        alb::check(alb).map_err(|message| config(format!("{FIELD}.alb"), message))?;
    }
    Ok(Some(Routing {
        istio: tr.istio.clone(),
        nginx: tr.nginx.clone(),
        gateway_api,
        smi,
        traefik,
        alb,
        max_traffic_weight: tr.max_traffic_weight,
    }))
}

/// A router's configuration kept raw in the wire type (`trafficRouting.<name>`), read into its type; an error
/// names the field that does not read.
fn parsed<T: serde::de::DeserializeOwned>(
    value: Option<&Value>,
    name: &str,
) -> Result<Option<T>, RoutingError> {
    value
        .map(|v| {
            serde_path_to_error::deserialize(v).map_err(|e| {
                config(
                    format!("{FIELD}.{name}.{}", e.path()),
                    e.inner().to_string(),
                )
            })
        })
        .transpose()
}

/// What one reconcile wants the routers to show, from the planner.
#[derive(Debug, Clone, Copy)]
pub struct Desired<'a> {
    /// Name, namespace and uid: owner of the canary Ingress, the manager a DestinationRule names.
    pub rollout: &'a Rollout,
    /// `canaryService` / `stableService`; empty when not set (Istio subset-only routing).
    pub canary_service: &'a str,
    pub stable_service: &'a str,
    /// The canary's share, out of [`Desired::max_weight`].
    pub canary_weight: i32,
    pub max_traffic_weight: Option<i32>,
    /// `rollouts-pod-template-hash` of the canary and stable ReplicaSets; empty when there is none.
    pub canary_hash: &'a str,
    pub stable_hash: &'a str,
    /// What this reconcile does to the managed header and mirror routes; none unless
    /// [`Desired::with_managed`] says.
    pub managed: &'a ManagedRouteChange,
}

impl<'a> Desired<'a> {
    /// The Services come from the Rollout's canary strategy, the total from `routing`.
    pub fn new(
        rollout: &'a Rollout,
        routing: &Routing,
        canary_weight: i32,
        canary_hash: &'a str,
        stable_hash: &'a str,
    ) -> Desired<'a> {
        let canary = rollout.spec.canary();
        Desired {
            rollout,
            canary_service: canary
                .and_then(|c| c.canary_service.as_deref())
                .unwrap_or(""),
            stable_service: canary
                .and_then(|c| c.stable_service.as_deref())
                .unwrap_or(""),
            canary_weight,
            max_traffic_weight: routing.max_traffic_weight,
            canary_hash,
            stable_hash,
            managed: &managed_routes::NO_CHANGE,
        }
    }

    /// The same, with the managed routes changed as `managed` says (the planner's `Route::managed`).
    pub fn with_managed(self, managed: &'a ManagedRouteChange) -> Desired<'a> {
        Desired { managed, ..self }
    }

    /// The total every weight is out of: `maxTrafficWeight`, 100 when unset.
    pub fn max_weight(&self) -> i32 {
        self.max_traffic_weight.unwrap_or(100)
    }

    /// The stable side's share: whatever the canary (and `others`, kept as they are) leave, never negative.
    pub fn stable_weight(&self, others: i64) -> i64 {
        (i64::from(self.max_weight()) - i64::from(self.canary_weight) - others).max(0)
    }

    pub fn rollout_name(&self) -> &'a str {
        self.rollout.metadata.name.as_deref().unwrap_or("")
    }

    pub fn rollout_namespace(&self) -> &'a str {
        self.rollout.metadata.namespace.as_deref().unwrap_or("")
    }
}

/// Reads a router object's fields, reporting a wrong shape with the object and the field.
pub(crate) struct Reader<'a> {
    pub kind: &'static str,
    pub name: &'a str,
}

impl Reader<'_> {
    pub fn malformed(&self, field: impl Into<String>, message: impl Into<String>) -> RoutingError {
        RoutingError::Malformed {
            kind: self.kind,
            name: self.name.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// An optional list: absent and `null` are `None`, anything but an array is an error.
    pub fn list<'v>(
        &self,
        value: Option<&'v Value>,
        field: &str,
    ) -> Result<Option<&'v Vec<Value>>, RoutingError> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => Err(self.malformed(field, format!("expected a list, got {other}"))),
        }
    }

    pub fn object<'v>(
        &self,
        value: &'v Value,
        field: &str,
    ) -> Result<&'v Map<String, Value>, RoutingError> {
        value
            .as_object()
            .ok_or_else(|| self.malformed(field, format!("expected an object, got {value}")))
    }

    /// An optional string field of `object`.
    pub fn string<'v>(
        &self,
        object: &'v Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<&'v str, RoutingError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(""),
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.malformed(
                format!("{field}.{key}"),
                format!("expected a string, got {other}"),
            )),
        }
    }

    /// An optional integer field of `object`; absent is 0, as Argo's Go structs read it.
    pub fn integer(
        &self,
        object: &Map<String, Value>,
        key: &str,
        field: &str,
    ) -> Result<i64, RoutingError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(0),
            Some(v) => v.as_i64().ok_or_else(|| {
                self.malformed(
                    format!("{field}.{key}"),
                    format!("expected an integer, got {v}"),
                )
            }),
        }
    }
}

/// The object's `metadata.name`, for messages.
pub(crate) fn object_name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout(routing: Value) -> Rollout {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "prod"},
            "spec": {"strategy": {"canary": {"trafficRouting": routing}}}
        }))
        .unwrap()
    }

    #[test]
    fn every_router_canaryd_does_not_drive_is_named_in_the_error() {
        for (written, field) in [
            (
                json!({"ambassador": {"mappings": ["m"]}}),
                "spec.strategy.canary.trafficRouting.ambassador",
            ),
            (
                json!({"plugins": {"argoproj-labs/contour": {}}}),
                "spec.strategy.canary.trafficRouting.plugins.argoproj-labs/contour",
            ),
        ] {
            let err = routing(&rollout(written)).unwrap_err();
            assert!(
                matches!(&err, RoutingError::Config { field: f, .. } if f == field),
                "{err}"
            );
        }
    }

    #[test]
    fn a_rollout_without_traffic_routing_has_none() {
        let r: Rollout =
            serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {}})).unwrap();
        assert_eq!(routing(&r).unwrap(), None);
    }
}
