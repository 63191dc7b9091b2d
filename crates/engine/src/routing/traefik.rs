//! Traefik (`trafficRouting.traefik`), as Argo Rollouts drives it (its `rollout/trafficrouting/traefik`): the
//! weighted TraefikService `weightedTraefikServiceName` (`traefik.io/v1alpha1`, Traefik v3) gets the canary
//! Service's entry of `spec.weighted.services` at the desired weight and the stable Service's at 100 minus it;
//! every other entry and field is left as it is. Returns the whole object for an Update.

use serde_json::{Map, Value};

use super::{Desired, RoutingError};

pub const KIND: &str = "TraefikService";

/// The entry of `services` named `name`, as Argo's getService finds it: an entry that is not an object, or
/// one before it without a name, is an error.
fn service<'v>(
    services: &'v mut [Value],
    name: &str,
) -> Result<Option<&'v mut Map<String, Value>>, RoutingError> {
    for entry in services.iter_mut() {
        let Some(entry) = entry.as_object_mut() else {
            return Err(RoutingError::Mismatch(
                "Failed type assertion setting weight for traefik service".to_string(),
            ));
        };
        match entry.get("name").and_then(Value::as_str) {
            None => {
                return Err(RoutingError::Mismatch(
                    "name field was not found in service".to_string(),
                ));
            }
            Some(n) if n == name => return Ok(Some(entry)),
            Some(_) => {}
        }
    }
    Ok(None)
}

/// Sets `entry`'s weight to `weight`; whether it changed.
fn set_weight(entry: &mut Map<String, Value>, weight: i64) -> bool {
    if entry.get("weight").and_then(Value::as_i64) == Some(weight) {
        return false;
    }
    entry.insert("weight".to_string(), Value::from(weight));
    true
}

/// The TraefikService `current` (as read) at the desired weight, as Argo's SetWeight writes it: the stable
/// entry at `100 - weight`, whatever `maxTrafficWeight` says (Argo's validation refuses `maxTrafficWeight`
/// with Traefik, so the planner never gets here with one); `Ok(None)` when it already says so.
pub fn traefik_service(current: &Value, d: &Desired) -> Result<Option<Value>, RoutingError> {
    let mut out = current.clone();
    let Some(services) = out
        .pointer_mut("/spec/weighted/services")
        .and_then(Value::as_array_mut)
    else {
        return Err(RoutingError::Mismatch(
            "spec.weighted.services was not found in traefik service manifest".to_string(),
        ));
    };
    let canary = i64::from(d.canary_weight);
    let mut changed = match service(services, d.canary_service)? {
        Some(entry) => set_weight(entry, canary),
        None => {
            return Err(RoutingError::Mismatch(
                "traefik canary service was not found".to_string(),
            ));
        }
    };
    changed |= match service(services, d.stable_service)? {
        Some(entry) => set_weight(entry, 100 - canary),
        None => {
            return Err(RoutingError::Mismatch(
                "traefik stable service was not found".to_string(),
            ));
        }
    };
    Ok(changed.then_some(out))
}
