//! Wire types for a Rollout's `spec.strategy.canary.trafficRouting`, with Argo Rollouts' field names: Istio
//! (`virtualService`/`virtualServices`, `destinationRule`), NGINX (`stableIngress`/`stableIngresses`,
//! annotations), `maxTrafficWeight`, and `plugins` (where the Gateway API plugin's configuration,
//! [`GatewayApiTrafficRouting`], lives under `argoproj-labs/gatewayAPI`). The routers canaryd does not drive
//! (ALB, SMI, Ambassador, App Mesh, Traefik, APISIX, managed header/mirror routes) are kept as raw JSON so they
//! can be named in the InvalidSpec condition. Every struct keeps fields it does not know in `rest`, so the
//! configuration round-trips without loss.
//!
//! The Rollout spec's `trafficRouting` field (`CanaryStrategy::traffic_routing`) has this type;
//! `engine::routing::routing` checks it. Shapes only: meaning, defaults and validation live in
//! `engine/routing`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The plugin key of the Gateway API traffic router (argoproj-labs/rollouts-plugin-trafficrouter-gatewayapi).
pub const GATEWAY_API_PLUGIN: &str = "argoproj-labs/gatewayAPI";

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrafficRouting {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub istio: Option<IstioTrafficRouting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nginx: Option<NginxTrafficRouting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alb: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smi: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ambassador: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_mesh: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traefik: Option<Value>,
    /// Header and mirror routes (`setHeaderRoute`, `setMirrorRoute` steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_routes: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apisix: Option<Value>,
    /// Traffic-router plugins by name; each value is the plugin's own configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<BTreeMap<String, Value>>,
    /// The total of all weights; Argo's default is 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_traffic_weight: Option<i32>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IstioTrafficRouting {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_service: Option<IstioVirtualService>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_rule: Option<IstioDestinationRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_services: Option<Vec<IstioVirtualService>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IstioVirtualService {
    /// `name` or `name.namespace`.
    #[serde(default)]
    pub name: String,
    /// Names of the HTTP routes to re-weight; inferred when the VirtualService has exactly one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_routes: Option<Vec<IstioTlsRoute>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_routes: Option<Vec<IstioTcpRoute>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IstioTlsRoute {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni_hosts: Option<Vec<String>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IstioTcpRoute {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IstioDestinationRule {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub canary_subset_name: String,
    #[serde(default)]
    pub stable_subset_name: String,
    /// Subsets (of other hosts) whose weights in the routes are left as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_subset_names: Option<Vec<String>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NginxTrafficRouting {
    /// Argo's default is `nginx.ingress.kubernetes.io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_ingress: Option<String>,
    /// Added to the canary Ingress under `<annotationPrefix>/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_ingress_annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_ingresses: Option<Vec<String>>,
    /// Added to the canary Ingress with their keys as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_ingress_annotations: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// The Gateway API plugin's configuration (`plugins."argoproj-labs/gatewayAPI"`), with the plugin's field
/// names, so a Rollout written for the plugin works unchanged. Route kinds other than HTTPRoute and label
/// selectors are kept raw to be named as unsupported.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayApiTrafficRouting {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_route: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_routes: Option<Vec<GatewayApiHttpRoute>>,
    /// The routes' namespace; the Rollout's when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_route: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_routes: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_route: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_routes: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_route: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_routes: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_route_selector: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_route_selector: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_route_selector: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_route_selector: Option<Value>,
    /// The plugin keeps header-route state in this ConfigMap; canaryd keeps none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_in_progress_label: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress_label_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress_label_value: Option<String>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayApiHttpRoute {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_header_routes: Option<bool>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `trafficRouting.smi`: the TrafficSplit the Rollout creates and owns. Read from the raw `smi` field by
/// `engine::routing::routing`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SmiTrafficRouting {
    /// The TrafficSplit's `spec.service`; the stable Service when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_service: Option<String>,
    /// The TrafficSplit's name; the Rollout's when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_split_name: Option<String>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `trafficRouting.traefik`: the weighted TraefikService whose services' weights the Rollout sets. Read from
/// the raw `traefik` field by `engine::routing::routing`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TraefikTrafficRouting {
    #[serde(default)]
    pub weighted_traefik_service_name: String,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `trafficRouting.alb`: the Ingresses whose AWS Load Balancer Controller action annotation the Rollout
/// sets. Read from the raw `alb` field by `engine::routing::routing`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AlbTrafficRouting {
    #[serde(default)]
    pub ingress: String,
    #[serde(default)]
    pub ingresses: Vec<String>,
    #[serde(default)]
    pub service_port: i32,
    #[serde(default)]
    pub root_service: String,
    #[serde(default)]
    pub annotation_prefix: String,
    #[serde(default)]
    pub stickiness_config: Option<AlbStickinessConfig>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// `trafficRouting.alb.stickinessConfig`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AlbStickinessConfig {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub duration_seconds: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_traffic_routing_with_fields_canaryd_does_not_know_round_trips_unchanged() {
        let written = json!({
            "istio": {
                "virtualService": {"name": "vs.mesh", "routes": ["primary"], "future": 1,
                                   "tlsRoutes": [{"port": 443, "sniHosts": ["a"], "x": true}]},
                "destinationRule": {"name": "dr", "canarySubsetName": "c", "stableSubsetName": "s", "y": "z"}
            },
            "nginx": {"stableIngress": "web", "annotationPrefix": "p", "z": [1]},
            "smi": {"rootService": "root"},
            "plugins": {"argoproj-labs/gatewayAPI": {"httpRoute": "r", "other": {}}},
            "maxTrafficWeight": 1000,
            "somethingNew": {"a": 1}
        });
        let routing: TrafficRouting = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(routing.max_traffic_weight, Some(1000));
        assert_eq!(serde_json::to_value(&routing).unwrap(), written);
        let plugin: GatewayApiTrafficRouting =
            serde_json::from_value(written["plugins"][GATEWAY_API_PLUGIN].clone()).unwrap();
        assert_eq!(plugin.http_route.as_deref(), Some("r"));
        assert_eq!(
            serde_json::to_value(&plugin).unwrap(),
            written["plugins"][GATEWAY_API_PLUGIN]
        );
    }
}
