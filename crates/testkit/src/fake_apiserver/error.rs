//! A failure as kube-apiserver reports it: the HTTP code, the `reason` and the message in its words, and the
//! `Status` object that carries them. Shared by storage, routing and watches; decides nothing.

use serde_json::{Value, json};

use super::ResourceDef;

/// A failure as kube-apiserver reports it: HTTP code, `reason`, and a message in its words.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details` of the Status: (name, group, kind as the resource's plural).
    pub details: Option<(String, String, String)>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn about(mut self, res: &ResourceDef, name: &str) -> Self {
        self.details = Some((name.to_owned(), res.group.to_owned(), res.plural.to_owned()));
        self
    }

    pub fn not_found(res: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", res.qualified()),
        )
        .about(res, name)
    }

    pub fn already_exists(res: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", res.qualified()),
        )
        .about(res, name)
    }

    pub fn conflict(res: &ResourceDef, name: &str, why: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": {why}",
            res.qualified()
        );
        Self::new(409, "Conflict", message).about(res, name)
    }

    pub fn invalid(res: &ResourceDef, name: &str, why: impl Into<String>) -> Self {
        let kind = if res.group.is_empty() {
            res.kind.to_owned()
        } else {
            format!("{}.{}", res.kind, res.group)
        };
        let message = format!("{kind} \"{name}\" is invalid: {}", why.into());
        Self::new(422, "Invalid", message).about(res, name)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// The `Status` object kube-apiserver sends for this failure.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some((name, group, kind)) = &self.details {
            status["details"] = json!({ "name": name, "group": group, "kind": kind });
        }
        status
    }
}
