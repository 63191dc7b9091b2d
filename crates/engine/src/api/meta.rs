//! Reading an object's controller from its metadata: the ownerReference with `controller: true`, which the
//! daemon, the planner and the in-memory cluster all follow from an object to what controls it; a label
//! selector written as the API's `labelSelector` text; and what one of a selector's expressions asks of a label.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

/// The controller of an object, as Kubernetes marks it.
pub trait Controlled {
    /// The ownerReference with `controller: true`, if any (Kubernetes allows one).
    fn controller(&self) -> Option<&OwnerReference>;

    /// Whether the object with `uid` controls this one.
    fn controlled_by(&self, uid: &str) -> bool {
        self.controller().is_some_and(|o| o.uid == uid)
    }
}

impl Controlled for ObjectMeta {
    fn controller(&self) -> Option<&OwnerReference> {
        self.owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
    }
}

/// A label selector as text, `app=web,tier in (a,b)` (apimachinery's `LabelSelectorAsSelector(...).String()`):
/// the labels, then the expressions; empty when it selects everything.
pub fn selector_string(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            other => format!("{} {other} ({values})", e.key),
        });
    }
    parts.join(",")
}

/// Whether a label whose value is `value` (`None` when the object lacks it) meets a selector expression with
/// `operator` and `values` (apimachinery's `Requirement.Matches`); `None` for an operator Kubernetes does not
/// know, which no label meets.
pub fn requirement_holds(operator: &str, values: &[String], value: Option<&str>) -> Option<bool> {
    let listed = || value.is_some_and(|v| values.iter().any(|w| w == v));
    Some(match operator {
        "In" => listed(),
        "NotIn" => !listed(),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => return None,
    })
}
