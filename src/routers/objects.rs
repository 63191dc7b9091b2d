//! The router kinds canaryd reads and writes that k8s-openapi lacks, typed only by their group, version and
//! kind: Istio's VirtualService and DestinationRule (`networking.istio.io/v1`, Istio 1.22 or newer) and
//! the Gateway API's HTTPRoute (`gateway.networking.k8s.io/v1`). Their specs stay JSON, as the
//! `engine::routing` builders read and return them, so no field is lost in a read-modify-update. SMI's
//! TrafficSplit and Traefik's TraefikService have no type here: their group or version is the daemon's flags',
//! so the edge asks for them as dynamic objects.

use std::collections::BTreeMap;

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "networking.istio.io",
    version = "v1",
    kind = "VirtualService",
    namespaced,
    schema = "disabled"
)]
pub struct VirtualServiceSpec {
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "networking.istio.io",
    version = "v1",
    kind = "DestinationRule",
    namespaced,
    schema = "disabled"
)]
pub struct DestinationRuleSpec {
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "HTTPRoute",
    root = "HttpRoute",
    plural = "httproutes",
    namespaced,
    schema = "disabled"
)]
pub struct HttpRouteSpec {
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
}
