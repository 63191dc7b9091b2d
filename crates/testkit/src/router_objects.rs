//! The traffic routers' objects as a user would have written them before a Rollout first points at them: an
//! Istio VirtualService (`web-vsvc` in the tests) by host or by subset with its DestinationRule, an NGINX
//! stable Ingress `web` and a Gateway API HTTPRoute `web` with an extra backend, each sending everything to the
//! stable side. TEST FIXTURE ONLY: no assertions about canaryd.

use std::collections::BTreeMap;

use canaryd::routers::objects::{DestinationRule, HttpRoute, VirtualService};
use k8s_openapi::api::networking::v1::Ingress;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Traefik v3's TraefikService (`traefik.io/v1alpha1`), for the tests to put and read; canaryd itself reads
/// and writes it in the group and version its flags name.
#[derive(kube::CustomResource, serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
#[kube(
    group = "traefik.io",
    version = "v1alpha1",
    kind = "TraefikService",
    namespaced,
    schema = "disabled"
)]
pub struct TraefikServiceSpec {
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
}

/// Traefik v2's TraefikService (`traefik.containo.us/v1alpha1`).
#[derive(kube::CustomResource, serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
#[kube(
    group = "traefik.containo.us",
    version = "v1alpha1",
    kind = "TraefikService",
    root = "TraefikServiceV2",
    namespaced,
    schema = "disabled"
)]
pub struct TraefikServiceV2Spec {
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
}

/// The VirtualService `name` for host `app`: one route, all to `APP-stable`, none to `APP-canary`.
pub fn virtual_service(namespace: &str, name: &str, app: &str) -> VirtualService {
    serde_json::from_value(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hosts": [app], "http": [{"name": "primary", "route": [
            {"destination": {"host": format!("{app}-stable")}, "weight": 100},
            {"destination": {"host": format!("{app}-canary")}, "weight": 0}
        ]}]}
    }))
    .expect("a VirtualService")
}

/// The VirtualService `name` for host `app` split by subsets: all to `stable`, none to `canary`.
pub fn subset_virtual_service(namespace: &str, name: &str, app: &str) -> VirtualService {
    serde_json::from_value(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hosts": [app], "http": [{"name": "primary", "route": [
            {"destination": {"host": app, "subset": "stable"}, "weight": 100},
            {"destination": {"host": app, "subset": "canary"}, "weight": 0}
        ]}]}
    }))
    .expect("a VirtualService")
}

/// The DestinationRule `name` for host `app` with `canary` and `stable` subsets selecting every pod of `app`.
pub fn destination_rule(namespace: &str, name: &str, app: &str) -> DestinationRule {
    serde_json::from_value(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"host": app, "subsets": [{"name": "canary", "labels": {"app": app}},
                                          {"name": "stable", "labels": {"app": app}}]}
    }))
    .expect("a DestinationRule")
}

pub fn stable_ingress(namespace: &str) -> Ingress {
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"ingressClassName": "nginx", "rules": [{"host": "web.example.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix",
             "backend": {"service": {"name": "web-stable", "port": {"number": 80}}}}
        ]}}]}
    }))
    .expect("an Ingress")
}

/// The Ingress `APP` of Argo's ALB docs (`web` there): its one path goes to the action named for `APP-stable`
/// (`use-annotation`), which canaryd writes into the annotation `alb.ingress.kubernetes.io/actions.APP-stable`.
pub fn alb_ingress(namespace: &str, app: &str) -> Ingress {
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": app, "namespace": namespace,
                     "annotations": {"alb.ingress.kubernetes.io/scheme": "internet-facing"}},
        "spec": {"ingressClassName": "alb", "rules": [{"http": {"paths": [
            {"path": "/", "pathType": "Prefix",
             "backend": {"service": {"name": format!("{app}-stable"), "port": {"name": "use-annotation"}}}}
        ]}}]}
    }))
    .expect("an Ingress")
}

/// The weighted TraefikService `web` of Argo's Traefik docs, of Traefik v3 ([`TraefikService`]) or v2
/// ([`TraefikServiceV2`]): `web-stable` and `web-canary` without weights (so Argo CD keeps it in sync), and
/// `extra` at 5, which canaryd must leave alone.
pub fn traefik_service<K>(namespace: &str) -> K
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned,
{
    serde_json::from_value(json!({
        "apiVersion": K::api_version(&()), "kind": "TraefikService",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"weighted": {"services": [
            {"name": "web-stable", "port": 80},
            {"name": "web-canary", "port": 80},
            {"name": "extra", "port": 80, "weight": 5}
        ]}}
    }))
    .expect("a TraefikService")
}

/// `web-stable` at 100, `web-canary` at 0 and `extra` with no weight, which canaryd must leave alone.
pub fn http_route(namespace: &str) -> HttpRoute {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [
            {"name": "web-stable", "port": 80, "weight": 100},
            {"name": "web-canary", "port": 80, "weight": 0},
            {"name": "extra", "port": 80}
        ]}]}
    }))
    .expect("an HTTPRoute")
}
