//! `canaryd crds`: the CustomResourceDefinitions generated from `api/`, as one multi-document YAML stream.

use std::io::Write;

use super::Exit;

#[derive(Debug, clap::Args)]
pub struct Args {}

/// The CRDs as YAML documents separated by `---`, exactly as committed at `charts/canaryd/files/crds.yaml`.
pub fn render() -> Result<String, serde_json::Error> {
    let mut out = String::new();
    for crd in crate::api::crds() {
        let value = serde_json::to_value(&crd)?;
        out.push_str("---\n");
        out.push_str(&super::load::to_yaml(&value));
    }
    Ok(out)
}

pub fn run(_: Args) -> Exit {
    match render() {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            if stdout.write_all(text.as_bytes()).is_err() {
                return Exit::Error;
            }
            Exit::Ok
        }
        Err(e) => {
            eprintln!("canaryd crds: {e}");
            Exit::Error
        }
    }
}
