//! What a test sees of the requests the fake API server received and how it scripts faults: the recorded
//! requests, the patterns that select them, and the failures and delays to inject.

use std::time::Duration;

/// Which requests a fault or a count applies to: a method ("*" for any), a path substring, a query substring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestPattern {
    method: String,
    path_contains: String,
    query_contains: String,
}

impl RequestPattern {
    pub fn new(method: &str, path_contains: &str) -> Self {
        RequestPattern {
            method: method.to_uppercase(),
            path_contains: path_contains.into(),
            query_contains: String::new(),
        }
    }

    pub fn query(mut self, query_contains: &str) -> Self {
        self.query_contains = query_contains.into();
        self
    }

    /// Whether `request` is one this pattern selects.
    pub fn matches(&self, request: &RecordedRequest) -> bool {
        (self.method == "*" || self.method == request.method)
            && request.path.contains(&self.path_contains)
            && request.query.contains(&self.query_contains)
    }
}

/// A request as the fake received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// The raw query string, percent-encoded as sent.
    pub query: String,
    /// The media type of the body (`Content-Type` without its parameters), empty when none was sent.
    pub content_type: String,
    /// The body as sent (empty for a GET, a watch, a DELETE without options).
    pub body: String,
    /// When it arrived.
    pub at: jiff::Timestamp,
}

#[derive(Clone, Debug)]
pub(super) enum FaultAction {
    Status(u16),
    Delay(Duration),
}

#[derive(Clone, Debug)]
pub(super) struct Fault {
    pub pattern: RequestPattern,
    pub remaining: usize,
    pub action: FaultAction,
}

#[derive(Default)]
pub(super) struct Control {
    pub faults: Vec<Fault>,
    pub requests: Vec<RecordedRequest>,
}
