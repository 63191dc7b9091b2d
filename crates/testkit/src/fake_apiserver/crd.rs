//! CustomResourceDefinitions as the fake serves them: read from YAML files (as published or generated), each
//! CRD's storage version becomes a [`ResourceDef`] whose status subresource and schema are what the CRD
//! declares. Owns the two CRD sets canaryd must work with; knows nothing of HTTP or storage.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use super::ResourceDef;
use super::schema::Schema;

/// The definitions of Argo's kinds a cluster may have installed: only one CRD per kind can exist, and canaryd
/// must work with either set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrdSet {
    /// What `canaryd crds` generates and the chart installs (`charts/canaryd/files/crds.yaml`).
    Canaryd,
    /// What Argo Rollouts publishes (`tests/fixtures/crds/argo-rollouts-*.yaml`).
    Argo,
}

impl CrdSet {
    pub fn files(self) -> Vec<PathBuf> {
        let root = crate::repo_root();
        match self {
            CrdSet::Canaryd => vec![root.join("charts/canaryd/files/crds.yaml")],
            CrdSet::Argo => [
                "analysis-run",
                "analysis-template",
                "cluster-analysis-template",
                "rollout",
            ]
            .iter()
            .map(|kind| root.join(format!("tests/fixtures/crds/argo-rollouts-{kind}-crd.yaml")))
            .collect(),
        }
    }

    pub fn resources(self) -> Vec<ResourceDef> {
        self.files().iter().flat_map(|file| load(file)).collect()
    }
}

/// The kinds the CRDs in `file` define. Read once per process: Argo's CRDs are large, and many fake servers may
/// start in one test binary. The definitions live as long as the process, so they are handed out as `'static`.
/// A file that cannot be read or holds no valid CRD fails the test with its name and the reason.
pub fn load(file: &Path) -> Vec<ResourceDef> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, Vec<ResourceDef>>>> = OnceLock::new();
    let cache = LOADED.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry(file.to_path_buf())
        .or_insert_with(|| parse(file))
        .clone()
}

fn parse(file: &Path) -> Vec<ResourceDef> {
    let (documents, error) = canaryd::cli::load::load_file(file);
    if let Some(error) = error {
        panic!("the fake API server cannot read its CRDs: {error}");
    }
    let defs: Vec<ResourceDef> = documents
        .iter()
        .filter(|d| d.kind() == Some("CustomResourceDefinition"))
        .map(|d| {
            definition(&d.value).unwrap_or_else(|why| {
                panic!("{}: CRD {}: {why}", file.display(), d.name().unwrap_or("?"))
            })
        })
        .collect();
    assert!(
        !defs.is_empty(),
        "{}: holds no CustomResourceDefinition",
        file.display()
    );
    defs
}

fn definition(crd: &Value) -> Result<ResourceDef, String> {
    let text = |pointer: &str| {
        crd.pointer(pointer)
            .and_then(Value::as_str)
            .map(leak)
            .ok_or_else(|| format!("no {pointer}"))
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .ok_or("no /spec/versions")?;
    let version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .ok_or("no storage version")?;
    let plural = text("/spec/names/plural")?;
    let kind = text("/spec/names/kind")?;
    let schema = version
        .pointer("/schema/openAPIV3Schema")
        .ok_or("the storage version has no openAPIV3Schema")?;
    Ok(ResourceDef {
        group: text("/spec/group")?,
        version: version
            .get("name")
            .and_then(Value::as_str)
            .map(leak)
            .ok_or("a version without a name")?,
        plural,
        singular: text("/spec/names/singular").unwrap_or_else(|_| leak(&kind.to_lowercase())),
        kind,
        namespaced: text("/spec/scope")? == "Namespaced",
        status_subresource: version.pointer("/subresources/status").is_some(),
        custom: true,
        unconditional_update: false,
        create_on_update: false,
        schema: Some(Box::leak(Box::new(Schema::from(schema)))),
    })
}

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}
