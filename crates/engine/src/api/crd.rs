//! The CustomResourceDefinitions `canaryd crds` prints and the chart installs: kube's derive output brought to
//! the definitions Argo Rollouts publishes, since only one CRD per kind can exist in a cluster and both
//! controllers must work with whichever is installed. Argo's analysis kinds declare no subresources (status is
//! written with the object); the Rollout declares `status` and `scale`. Names, scope, short names and printer
//! columns come from the `#[kube]` attributes of the types; this module only adds what the derive cannot say.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use kube_core::CustomResourceExt;

use super::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate, Rollout};

/// Generated CustomResourceDefinitions, in the order `canaryd crds` prints them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut analysis = [
        AnalysisTemplate::crd(),
        ClusterAnalysisTemplate::crd(),
        AnalysisRun::crd(),
    ];
    for crd in &mut analysis {
        for version in &mut crd.spec.versions {
            // `subresources: {}` as Argo's: the derive ties the AnalysisRun's `status` field to a status
            // subresource, which Argo Rollouts' controller (writing status with the object) would lose writes to.
            version.subresources = Some(CustomResourceSubresources::default());
        }
    }
    let mut rollout = Rollout::crd();
    for version in &mut rollout.spec.versions {
        version.schema = Some(CustomResourceValidation {
            open_api_v3_schema: Some(rollout_schema()),
        });
    }
    let mut all = analysis.to_vec();
    all.push(rollout);
    all
}

/// The Rollout's schema. canaryd types only the parts of a Rollout it acts on and keeps the rest as written,
/// so the schema keeps every field (nothing Argo Rollouts or a user writes is pruned) and declares the fields
/// the `scale` subresource and the printer columns read.
fn rollout_schema() -> JSONSchemaProps {
    let typed = |type_: &str, format: Option<&str>| JSONSchemaProps {
        type_: Some(type_.to_string()),
        format: format.map(str::to_string),
        ..JSONSchemaProps::default()
    };
    let int32 = || typed("integer", Some("int32"));
    let open_object = |description: &str, fields: Vec<(&str, JSONSchemaProps)>| JSONSchemaProps {
        description: Some(description.to_string()),
        type_: Some("object".to_string()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        properties: Some(
            fields
                .into_iter()
                .map(|(name, schema)| (name.to_string(), schema))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..JSONSchemaProps::default()
    };
    let spec = open_object(
        "Argo Rollouts' RolloutSpec; fields canaryd does not act on are kept as written.",
        vec![("replicas", int32())],
    );
    let status = open_object(
        "Argo Rollouts' RolloutStatus; fields canaryd does not act on are kept as written.",
        vec![
            ("HPAReplicas", int32()),
            ("availableReplicas", int32()),
            ("replicas", int32()),
            ("selector", typed("string", None)),
            ("updatedReplicas", int32()),
        ],
    );
    JSONSchemaProps {
        description: Some(
            "A Deployment replaced step by step (canary), with analysis deciding each step."
                .to_string(),
        ),
        type_: Some("object".to_string()),
        required: Some(vec!["spec".to_string()]),
        properties: Some(BTreeMap::from([
            ("spec".to_string(), spec),
            ("status".to_string(), status),
        ])),
        ..JSONSchemaProps::default()
    }
}
