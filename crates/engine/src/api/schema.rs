//! JSON-schema helpers for the generated CRDs: the places where Argo's CRDs keep arbitrary user data.

use schemars::{Schema, SchemaGenerator, json_schema};

/// An object whose content the API server must keep as written: `provider.plugin`, `jsonBody`, and the
/// providers canaryd does not run.
pub fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}
