//! The kinds the fake serves and the discovery documents that describe them (`/version`, `/apis`,
//! `/apis/GROUP/VERSION`): built-in kinds defined here, Argo's kinds from CRD files (`crd.rs`). No storage, no
//! HTTP.

use serde_json::{Value, json};

use super::CrdSet;
use super::schema::Schema;

/// One kind of object the fake serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    /// "" for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub status_subresource: bool,
    /// A custom resource: `metadata.generation` is kept.
    pub custom: bool,
    /// A PUT without `metadata.resourceVersion` is accepted (true for most built-in kinds; false for custom
    /// resources and Leases, which answer 422 "must be specified for an update").
    pub unconditional_update: bool,
    /// A PUT of an absent object creates it (Leases); otherwise it is 404.
    pub create_on_update: bool,
    /// The CRD's `openAPIV3Schema`: writes are pruned and validated against it. `None` for built-in kinds.
    pub schema: Option<&'static Schema>,
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage key's first part, e.g. `argoproj.io/v1alpha1/analysisruns` or `v1/secrets`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.api_version(), self.plural)
    }

    /// core/v1 Pods: served with the eviction subresource, and answering a DELETE with the pod.
    pub fn is_pods(&self) -> bool {
        self.id() == "v1/pods"
    }

    /// How kube-apiserver names the resource in messages: `analysisruns.argoproj.io`, `secrets`.
    /// Whether `metadata.generation` is kept (bumped on changes outside metadata and status): kube-apiserver
    /// does so for custom resources and the workload kinds of `apps/v1`, whose controllers report
    /// `status.observedGeneration` against it.
    pub fn keeps_generation(&self) -> bool {
        self.custom || self.group == "apps"
    }

    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// What canaryd reads and writes: Argo's kinds as canaryd's own CRDs define them, Secrets, Events (both
    /// APIs), ConfigMaps, Leases, what a Rollout drives: ReplicaSets, Services and Pods (with their eviction
    /// subresource), the Jobs of job metrics (all four with the status subresource, as kube-apiserver serves
    /// them), and the traffic routers' kinds:
    /// Ingresses, and Istio's VirtualService and DestinationRule, the Gateway API's HTTPRoute, SMI's
    /// TrafficSplit and Traefik's TraefikService (v3's `traefik.io` and v2's `traefik.containo.us`) from their
    /// published CRDs (schema admission included).
    pub fn defaults() -> Vec<ResourceDef> {
        let builtin = |group, version, plural, singular, kind| ResourceDef {
            group,
            version,
            plural,
            singular,
            kind,
            namespaced: true,
            status_subresource: false,
            custom: false,
            unconditional_update: true,
            create_on_update: false,
            schema: None,
        };
        let mut all = CrdSet::Canaryd.resources();
        all.extend([
            builtin("", "v1", "secrets", "secret", "Secret"),
            builtin("", "v1", "configmaps", "configmap", "ConfigMap"),
            builtin("", "v1", "events", "event", "Event"),
            builtin("events.k8s.io", "v1", "events", "event", "Event"),
            ResourceDef {
                status_subresource: true,
                ..builtin("apps", "v1", "replicasets", "replicaset", "ReplicaSet")
            },
            ResourceDef {
                status_subresource: true,
                ..builtin("", "v1", "services", "service", "Service")
            },
            ResourceDef {
                status_subresource: true,
                ..builtin("", "v1", "pods", "pod", "Pod")
            },
            ResourceDef {
                status_subresource: true,
                ..builtin("batch", "v1", "jobs", "job", "Job")
            },
            ResourceDef {
                unconditional_update: false,
                create_on_update: true,
                ..builtin("coordination.k8s.io", "v1", "leases", "lease", "Lease")
            },
            builtin("networking.k8s.io", "v1", "ingresses", "ingress", "Ingress"),
        ]);
        let root = crate::repo_root().join("tests/fixtures/crds");
        for file in [
            "istio-virtualservices-crd.yaml",
            "istio-destinationrules-crd.yaml",
            "gateway-api-httproutes-crd.yaml",
            "smi-trafficsplits-crd.yaml",
            "traefik-traefikservices-crd.yaml",
            "traefik-v2-traefikservices-crd.yaml",
        ] {
            all.extend(super::crd::load(&root.join(file)));
        }
        all
    }
}

/// Adds `resource` to `resources`, in place of the one with the same group, version and plural if any (a CRD
/// replaced by another).
pub fn define(resources: &mut Vec<ResourceDef>, resource: ResourceDef) {
    match resources.iter_mut().find(|r| r.id() == resource.id()) {
        Some(known) => *known = resource,
        None => resources.push(resource),
    }
}

pub fn version() -> Value {
    json!({
        "major": "1", "minor": "35", "gitVersion": "v1.35.0-fake",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25", "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn group_list(resources: &[ResourceDef]) -> Value {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for resource in resources.iter().filter(|r| !r.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == resource.group) {
            Some((_, versions)) if !versions.contains(&resource.version) => {
                versions.push(resource.version)
            }
            Some(_) => {}
            None => groups.push((resource.group, vec![resource.version])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| json!({ "groupVersion": format!("{group}/{v}"), "version": v }))
                .collect();
            json!({ "name": group, "versions": versions, "preferredVersion": versions.first() })
        })
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

pub fn resource_list(resources: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
    let mut entries = Vec::new();
    for r in resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        entries.push(json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }));
        if r.status_subresource {
            entries.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
                "kind": r.kind, "verbs": ["get", "patch", "update"],
            }));
        }
        if r.is_pods() {
            entries.push(json!({
                "name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy",
                "version": "v1", "kind": "Eviction", "verbs": ["create"],
            }));
        }
    }
    if entries.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries,
    }))
}
