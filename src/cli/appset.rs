//! ApplicationSets on the command line, shared by `validate` and `plan`: the inventory flags
//! (`--clusters PATH`, repeatable, `--argocd-config FILE`), reading cluster Secrets and the controller's flag from
//! files, decoding each ApplicationSet document and placing `engine::progressive`'s findings on their lines.
//! The checks themselves are the engine's.

use std::path::{Path, PathBuf};

use super::load::{self, SourceDoc};
use super::located::Located;
use crate::api::{self, ApplicationSet, ClusterSecret};
use crate::engine::progressive::{self, Analysis, Flag, Options};
use crate::engine::template::{Finding, Severity};

pub const KIND: &str = "ApplicationSet";

/// The ConfigMap key that turns Progressive Sync on in Argo CD's ApplicationSet controller.
const FLAG_KEY: &str = "applicationsetcontroller.enable.progressive.syncs";

#[derive(Debug, Clone, Default, clap::Args)]
pub struct InventoryArgs {
    /// Argo CD cluster Secrets (a file or folder; repeat the flag for several): what the ApplicationSets'
    /// clusters generators select.
    #[arg(long, value_name = "PATH")]
    pub clusters: Vec<PathBuf>,
    /// Argo CD's `argocd-cmd-params-cm` ConfigMap: whether the controller's Progressive Sync flag is on.
    #[arg(long, value_name = "FILE")]
    pub argocd_config: Option<PathBuf>,
}

/// What the inventory flags gave, read from disk.
#[derive(Debug, Clone)]
pub struct Inventory {
    pub clusters: Option<Vec<ClusterSecret>>,
    pub flag: Flag,
}

impl InventoryArgs {
    /// Reads the files; a file that cannot be read or decoded is bad input, named with its line.
    pub fn load(&self) -> Result<Inventory, String> {
        let clusters = if self.clusters.is_empty() {
            None
        } else {
            let mut secrets = Vec::new();
            for doc in documents(&self.clusters)? {
                if doc.kind() != Some("Secret") {
                    continue;
                }
                let secret: ClusterSecret = api::decode::decode(&doc.value)
                    .map(|(s, _)| s)
                    .map_err(|e| place(&doc, &e.path, &e.message))?;
                if secret.is_cluster() {
                    secrets.push(secret);
                }
            }
            Some(secrets)
        };
        let flag = match &self.argocd_config {
            None => Flag::Unknown,
            Some(file) => flag(file)?,
        };
        Ok(Inventory { clusters, flag })
    }
}

fn place(doc: &SourceDoc, path: &str, message: &str) -> String {
    format!(
        "{}:{}: {}/{}: {path}: {message}",
        doc.file.display(),
        doc.line_of(path),
        doc.kind().unwrap_or("<no kind>"),
        doc.name().unwrap_or("<unnamed>")
    )
}

fn documents(paths: &[PathBuf]) -> Result<Vec<SourceDoc>, String> {
    let mut docs = Vec::new();
    for file in load::collect_files(paths).map_err(|e| e.to_string())? {
        let (file_docs, error) = load::load_file(&file);
        if let Some(e) = error {
            return Err(e.to_string());
        }
        docs.extend(file_docs);
    }
    Ok(docs)
}

/// Argo CD reads the flag with Go's `strconv.ParseBool`.
fn flag(file: &Path) -> Result<Flag, String> {
    let docs = documents(&[file.to_path_buf()])?;
    let Some(config) = docs.iter().find(|d| d.kind() == Some("ConfigMap")) else {
        return Err(format!(
            "{}: no ConfigMap in the file (expected argocd-cmd-params-cm)",
            file.display()
        ));
    };
    let value = config
        .value
        .pointer("/data")
        .and_then(|d| d.get(FLAG_KEY))
        .and_then(|v| v.as_str());
    Ok(match value {
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Flag::On,
        _ => Flag::Off {
            source: format!(
                "{}:{}",
                file.display(),
                config.line_of(&format!("data.{FLAG_KEY}"))
            ),
        },
    })
}

/// One ApplicationSet document, decoded and analysed; decoding problems are findings.
pub struct Checked<'a> {
    pub doc: &'a SourceDoc,
    pub analysis: Option<Analysis>,
    pub findings: Vec<Located>,
}

pub fn check<'a>(doc: &'a SourceDoc, inventory: &Inventory) -> Checked<'a> {
    let at = |f: Finding| Located::at(doc, f);
    if let Some(message) = doc.wrong_api_version() {
        return Checked {
            doc,
            analysis: None,
            findings: vec![at(Finding::error("apiVersion", message))],
        };
    }
    let (appset, unknown) = match api::decode::decode::<ApplicationSet>(&doc.value) {
        Ok(decoded) => decoded,
        Err(e) => {
            return Checked {
                doc,
                analysis: None,
                findings: vec![at(Finding::error(e.path, e.message))],
            };
        }
    };
    let options = Options {
        clusters: inventory.clusters.as_deref(),
        flag: inventory.flag.clone(),
    };
    let analysis = progressive::analyze(&appset.spec, &options);
    let mut findings: Vec<Located> = unknown
        .into_iter()
        .map(|u| Finding::error(u.path, u.message))
        .chain(progressive::checks::misspelled(&appset.spec))
        .chain(analysis.findings.iter().cloned())
        .map(at)
        .collect();
    if appset.metadata.name.as_deref().is_none_or(str::is_empty) {
        findings.push(at(Finding::error("metadata.name", "required")));
    }
    findings.sort_by_key(|f| f.line);
    Checked {
        doc,
        analysis: Some(analysis),
        findings,
    }
}

/// Whether any finding is an error.
pub fn failed(findings: &[Located]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Error)
}
