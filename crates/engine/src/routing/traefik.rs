//! Traefik (`trafficRouting.traefik`), as Argo Rollouts drives it (its `rollout/trafficrouting/traefik`): the
//! weighted TraefikService `weightedTraefikServiceName` (`traefik.io/v1alpha1`, Traefik v3) gets the canary
//! Service's entry of `spec.weighted.services` at the desired weight and the stable Service's at 100 minus it;
//! every other entry and field is left as it is. Returns the whole object for an Update. Which API serves the
//! TraefikService is the daemon's ([`TraefikApi`]: Argo's `--traefik-api-group` and `--traefik-api-version`,
//! `traefik.containo.us` for Traefik v2); the object is the same in both.

use serde_json::{Map, Value};

use super::{Desired, RoutingError};
use crate::rollout::pod_template::dns1123_label;

pub const KIND: &str = "TraefikService";
pub const PLURAL: &str = "traefikservices";
/// The reason of the Warning Event Argo's Traefik router records when its update of the TraefikService fails.
pub const UPDATE_ERROR: &str = "TraefikServiceUpdateError";

/// The group and version the TraefikService is read and written through, as Argo's flags set them. Argo's
/// Traefik router asks the API server for `traefikservices` in `--traefik-api-group` at the part of
/// `--traefik-api-version` after its last `/` (so the group written before it is not used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraefikApi {
    pub group: String,
    /// The version alone (`v1alpha1`).
    pub version: String,
}

impl TraefikApi {
    /// Argo's defaults: Traefik v3.
    pub const DEFAULT_GROUP: &str = "traefik.io";
    pub const DEFAULT_VERSION: &str = "traefik.io/v1alpha1";

    /// `--traefik-api-group`: a group as a CRD may declare it (a DNS subdomain with at least one dot), else
    /// why not. Argo takes any text and fails at every weight instead.
    pub fn group(text: &str) -> Result<String, String> {
        let labels_fit = text.split('.').all(|l| dns1123_label(l).is_empty());
        if !text.contains('.') || text.len() > 253 || !labels_fit {
            return Err(format!(
                "{text:?} is not an API group: a lowercase DNS subdomain with at least one dot, such as \
                 traefik.io (Traefik v3) or traefik.containo.us (Traefik v2)"
            ));
        }
        Ok(text.to_string())
    }

    /// `--traefik-api-version`, `GROUP/VERSION` or `VERSION`: the version, as Argo reads it (after the last
    /// `/`), which must be a version a CRD may declare (a DNS-1035 label such as `v1alpha1`), else why not.
    pub fn version(text: &str) -> Result<String, String> {
        let (group, version) = match text.split_once('/') {
            Some((group, version)) => (Some(group), version),
            None => (None, text),
        };
        let fits = version.starts_with(|c: char| c.is_ascii_lowercase())
            && dns1123_label(version).is_empty()
            && group.is_none_or(|g| !g.is_empty());
        if !fits {
            return Err(format!(
                "{text:?} is not an API version: GROUP/VERSION or VERSION, VERSION a lowercase name starting \
                 with a letter, such as traefik.io/v1alpha1 (Traefik v3) or traefik.containo.us/v1alpha1 \
                 (Traefik v2)"
            ));
        }
        Ok(version.to_string())
    }
}

impl Default for TraefikApi {
    fn default() -> TraefikApi {
        TraefikApi {
            group: Self::DEFAULT_GROUP.to_string(),
            version: "v1alpha1".to_string(),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_part_after_the_group_as_argo_reads_it() {
        for (flag, version) in [
            ("traefik.io/v1alpha1", "v1alpha1"),
            ("traefik.containo.us/v1alpha1", "v1alpha1"),
            ("v1alpha1", "v1alpha1"),
        ] {
            assert_eq!(TraefikApi::version(flag).as_deref(), Ok(version));
        }
        let default = TraefikApi::version(TraefikApi::DEFAULT_VERSION).unwrap();
        assert_eq!(default, TraefikApi::default().version);
    }

    #[test]
    fn a_flag_no_crd_could_declare_is_refused() {
        for bad in [
            "",
            "traefik.io/",
            "/v1alpha1",
            "a/b/v1",
            "V1alpha1",
            "1alpha1",
            "v1_alpha",
        ] {
            assert!(TraefikApi::version(bad).is_err(), "{bad:?}");
        }
        for bad in [
            "",
            "traefik",
            "Traefik.io",
            "traefik..io",
            "traefik.io/v1alpha1",
            "-traefik.io",
        ] {
            assert!(TraefikApi::group(bad).is_err(), "{bad:?}");
        }
        for good in ["traefik.io", "traefik.containo.us"] {
            assert_eq!(TraefikApi::group(good).as_deref(), Ok(good));
        }
    }
}
