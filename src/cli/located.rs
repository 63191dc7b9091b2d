//! A finding placed in its file: the one-line `FILE:LINE: Kind/name: field.path: message` every checking command
//! prints (validate, plan). Owns the placing and the format, not the rules that find anything.

use serde::Serialize;

use super::load::SourceDoc;
use crate::engine::template::{Finding, Severity};

/// One problem, placed in its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Located {
    pub file: String,
    pub line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub path: String,
    pub severity: Severity,
    pub message: String,
}

impl std::fmt::Display for Located {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: ", self.file, self.line)?;
        if let Some(kind) = &self.kind {
            write!(
                f,
                "{kind}/{}: ",
                self.name.as_deref().unwrap_or("<unnamed>")
            )?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        if self.severity == Severity::Warning {
            f.write_str("warning: ")?;
        }
        f.write_str(&self.message)
    }
}

impl Located {
    /// A finding about `doc`, on the line of its field.
    pub fn at(doc: &SourceDoc, f: Finding) -> Located {
        Located {
            file: doc.file.display().to_string(),
            line: doc.line_of(&f.path),
            kind: doc.kind().map(str::to_string),
            name: doc.name().map(str::to_string),
            path: f.path,
            severity: f.severity,
            message: f.message,
        }
    }
}
