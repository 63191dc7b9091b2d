//! Reading an object's controller from its metadata: the ownerReference with `controller: true`, which the
//! daemon, the planner and the in-memory cluster all follow from an object to what controls it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

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
