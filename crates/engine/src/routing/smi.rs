//! SMI (`trafficRouting.smi`), as Argo Rollouts drives it (its `rollout/trafficrouting/smi`): one
//! TrafficSplit (`split.smi-spec.io`, `trafficSplitName` or the Rollout's name) created and controlled by the
//! Rollout, whose `spec.service` is `rootService` (the stable Service when unset) and whose backends are the
//! canary Service at the desired weight then the stable Service at the rest of 100. Later weights are a JSON
//! merge patch of the spec. The API version is the daemon's (`--traffic-split-api-version`, Argo's flag of the
//! same name): v1alpha1 writes weights as quantities (`"20"`), v1alpha2 and v1alpha3 as integers.

use serde_json::{Map, Value, json};

use super::{Desired, RoutingError};
use crate::api::Controlled;
use crate::api::traffic_routing::SmiTrafficRouting;
use crate::merge_patch;
use crate::rollout::analysis::owner_reference;

pub const GROUP: &str = "split.smi-spec.io";
pub const KIND: &str = "TrafficSplit";
pub const PLURAL: &str = "trafficsplits";

/// The TrafficSplit API version canaryd writes; Argo's default is v1alpha1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SmiApiVersion {
    #[default]
    V1alpha1,
    V1alpha2,
    V1alpha3,
}

impl SmiApiVersion {
    pub const ALL: [SmiApiVersion; 3] = [
        SmiApiVersion::V1alpha1,
        SmiApiVersion::V1alpha2,
        SmiApiVersion::V1alpha3,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SmiApiVersion::V1alpha1 => "v1alpha1",
            SmiApiVersion::V1alpha2 => "v1alpha2",
            SmiApiVersion::V1alpha3 => "v1alpha3",
        }
    }

    /// The spec fields Argo's TrafficSplit type of this version knows, the only ones its patch compares.
    fn spec_fields(self) -> &'static [&'static str] {
        match self {
            SmiApiVersion::V1alpha1 | SmiApiVersion::V1alpha2 => &["service", "backends"],
            SmiApiVersion::V1alpha3 => &["service", "backends", "matches"],
        }
    }

    /// A backend's weight as this version writes it: v1alpha1's `resource.Quantity` is a string.
    fn weight(self, weight: i64) -> Value {
        match self {
            SmiApiVersion::V1alpha1 => Value::from(weight.to_string()),
            SmiApiVersion::V1alpha2 | SmiApiVersion::V1alpha3 => Value::from(weight),
        }
    }
}

impl std::str::FromStr for SmiApiVersion {
    type Err = String;

    /// Argo's NewReconciler refuses any other version with this message.
    fn from_str(text: &str) -> Result<SmiApiVersion, String> {
        SmiApiVersion::ALL
            .into_iter()
            .find(|v| v.as_str() == text)
            .ok_or_else(|| format!("Unsupported TrafficSplit API version `{text}`"))
    }
}

impl std::fmt::Display for SmiApiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The TrafficSplit's name (Argo's SetWeight): `trafficSplitName`, else the Rollout's.
pub fn traffic_split_name<'a>(smi: &'a SmiTrafficRouting, d: &Desired<'a>) -> &'a str {
    smi.traffic_split_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(d.rollout_name())
}

/// What to do to the TrafficSplit.
#[derive(Debug, Clone, PartialEq)]
pub enum TrafficSplitWrite {
    Create(Value),
    /// A JSON merge patch of the existing TrafficSplit's spec.
    Patch(Value),
    Unchanged,
}

/// The TrafficSplit as Argo's generateTrafficSplits builds it: the canary at the desired weight, then the
/// stable Service at `100 - weight` (Argo's SMI router ignores `maxTrafficWeight`).
pub fn desired(smi: &SmiTrafficRouting, version: SmiApiVersion, d: &Desired) -> Value {
    let root = smi
        .root_service
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(d.stable_service);
    let canary = i64::from(d.canary_weight);
    json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": KIND,
        "metadata": {
            "name": traffic_split_name(smi, d),
            "namespace": d.rollout_namespace(),
            "ownerReferences": [owner_reference(d.rollout)],
        },
        "spec": {
            "service": root,
            "backends": [
                {"service": d.canary_service, "weight": version.weight(canary)},
                {"service": d.stable_service, "weight": version.weight(100 - canary)},
            ],
        },
    })
}

/// Creates the TrafficSplit, or patches `existing` (as read) to the desired spec; refuses one this Rollout
/// does not control, in Argo's words.
pub fn traffic_split(
    existing: Option<&Value>,
    smi: &SmiTrafficRouting,
    version: SmiApiVersion,
    d: &Desired,
) -> Result<TrafficSplitWrite, RoutingError> {
    let desired = desired(smi, version, d);
    let Some(existing) = existing else {
        return Ok(TrafficSplitWrite::Create(desired));
    };
    let name = traffic_split_name(smi, d);
    let uid = d.rollout.metadata.uid.as_deref().unwrap_or("");
    let metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta = existing
        .get("metadata")
        .cloned()
        .and_then(|m| serde_json::from_value(m).ok())
        .unwrap_or_default();
    if !metadata.controlled_by(uid) {
        return Err(RoutingError::Mismatch(format!(
            "Rollout does not own TrafficSplit `{name}`"
        )));
    }
    let known = |spec: Option<&Value>| -> Value {
        let mut out = Map::new();
        for field in version.spec_fields() {
            if let Some(value) = spec.and_then(|s| s.get(*field)) {
                out.insert(field.to_string(), normalized(value, version));
            }
        }
        Value::Object(out)
    };
    let patch = merge_patch::diff(&known(existing.get("spec")), &known(desired.get("spec")));
    Ok(if patch.as_object().is_none_or(|p| p.is_empty()) {
        TrafficSplitWrite::Unchanged
    } else {
        TrafficSplitWrite::Patch(json!({ "spec": patch }))
    })
}

/// A spec field as Argo's Go type reads it back: v1alpha1's quantities are strings however they were written.
fn normalized(value: &Value, version: SmiApiVersion) -> Value {
    let mut value = value.clone();
    if version == SmiApiVersion::V1alpha1
        && let Some(backends) = value.as_array_mut()
    {
        for weight in backends.iter_mut().filter_map(|b| b.get_mut("weight")) {
            if let Some(n) = weight.as_i64() {
                *weight = Value::from(n.to_string());
            }
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_argos_three_versions_are_accepted() {
        for v in SmiApiVersion::ALL {
            assert_eq!(v.as_str().parse::<SmiApiVersion>(), Ok(v));
        }
        assert_eq!(
            "v1alpha4".parse::<SmiApiVersion>(),
            Err("Unsupported TrafficSplit API version `v1alpha4`".to_string())
        );
    }
}
