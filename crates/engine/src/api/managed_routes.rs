//! Wire types of the routes a Rollout's steps add to its routers, with Argo Rollouts' field names and field
//! order (Argo prints them as JSON in its validation messages): the `setHeaderRoute` and `setMirrorRoute`
//! steps and `trafficRouting.managedRoutes`. The Rollout keeps these fields as raw JSON
//! (`CanaryStep::set_header_route`, `set_mirror_route`, `TrafficRouting::managed_routes`);
//! `engine::routing::managed_routes` reads them into these types. Shapes only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Go's `omitempty` on a list: neither an absent nor an empty one is written.
fn none_or_empty<T>(list: &Option<Vec<T>>) -> bool {
    list.as_ref().is_none_or(Vec::is_empty)
}

/// Argo's `StringMatch`: one of exact, prefix, regex.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct StringMatch {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub exact: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub regex: String,
}

/// A `setHeaderRoute` step: requests matching every header go to the canary; without `match` the route is
/// removed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SetHeaderRoute {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, rename = "match", skip_serializing_if = "none_or_empty")]
    pub matches: Option<Vec<HeaderRoutingMatch>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HeaderRoutingMatch {
    #[serde(default)]
    pub header_name: String,
    #[serde(default)]
    pub header_value: Option<StringMatch>,
}

/// A `setMirrorRoute` step: requests matching any of `match` are copied to the canary (`percentage` of
/// them, 100 when unset) and still served by the weighted route; without `match` the route is removed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SetMirrorRoute {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "match", skip_serializing_if = "none_or_empty")]
    pub matches: Option<Vec<RouteMatch>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<i32>,
}

/// One match of a mirror route: all that are set must match.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<StringMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<StringMatch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, StringMatch>>,
}

/// One entry of `trafficRouting.managedRoutes`: a route canaryd may add and remove, in precedence order.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagedRoute {
    #[serde(default)]
    pub name: String,
}
