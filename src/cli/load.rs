//! Reading manifests from disk: finds `*.yaml`/`*.yml` files, splits multi-document streams, converts each
//! document to JSON the way Kubernetes reads YAML, and remembers the line of every field so that a problem can
//! be reported as `FILE:LINE`. Also decodes a document into a typed object and lists the fields the type does
//! not know (misspellings). It owns no semantics: `engine/` decides what is valid.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A problem in a file that is not tied to a typed field: unreadable, or not YAML.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}:{line}: {message}", file.display())]
pub struct LoadError {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

/// One YAML document, as JSON, with the line of each field path (`spec.metrics[0].interval`).
#[derive(Debug, Clone)]
pub struct SourceDoc {
    pub file: PathBuf,
    /// Line of the document's first node (1-based).
    pub line: usize,
    pub value: Value,
    lines: HashMap<String, usize>,
}

impl SourceDoc {
    /// A document that came from somewhere other than a file (tests, built-in scenarios).
    pub fn from_value(file: impl Into<PathBuf>, value: Value) -> SourceDoc {
        SourceDoc {
            file: file.into(),
            line: 1,
            value,
            lines: HashMap::new(),
        }
    }

    /// The line of `path`, or of its nearest ancestor that was written (a missing field is reported where
    /// its parent is).
    pub fn line_of(&self, path: &str) -> usize {
        let mut p = path;
        loop {
            if let Some(line) = self.lines.get(p) {
                return *line;
            }
            match p.rfind(['.', '[']) {
                Some(i) => p = &p[..i],
                None => return self.line,
            }
        }
    }

    pub fn kind(&self) -> Option<&str> {
        self.value.get("kind").and_then(Value::as_str)
    }

    pub fn name(&self) -> Option<&str> {
        let meta = self.value.get("metadata")?;
        meta.get("name")
            .or_else(|| meta.get("generateName"))
            .and_then(Value::as_str)
    }
}

/// A field the target type failed on, or does not know.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

/// Decodes a document into `T`. On success, also returns every field the document has that `T` does not
/// know: serializing `T` back must give every key the user wrote, or that key was dropped.
pub fn decode<T>(value: &Value) -> Result<(T, Vec<FieldError>), FieldError>
where
    T: DeserializeOwned + serde::Serialize,
{
    let typed: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        FieldError {
            path: if path == "." { String::new() } else { path },
            message,
        }
    })?;
    let back = serde_json::to_value(&typed).map_err(|e| FieldError {
        path: String::new(),
        message: e.to_string(),
    })?;
    let mut unknown = Vec::new();
    unknown_fields(value, &back, "", &mut unknown);
    Ok((typed, unknown))
}

fn unknown_fields(written: &Value, kept: &Value, path: &str, out: &mut Vec<FieldError>) {
    match (written, kept) {
        (Value::Object(w), Value::Object(k)) => {
            for (key, wv) in w {
                let child = join(path, key);
                match k.get(key) {
                    Some(kv) => unknown_fields(wv, kv, &child, out),
                    // An explicit null for an optional field is "not set", which Kubernetes treats the same.
                    None if wv.is_null() => {}
                    None => out.push(FieldError {
                        message: format!("unknown field {key:?}{}", suggestion(key)),
                        path: child,
                    }),
                }
            }
        }
        (Value::Array(w), Value::Array(k)) => {
            for (i, (wv, kv)) in w.iter().zip(k).enumerate() {
                unknown_fields(wv, kv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// ", did you mean \"interval\"?" when a known field name is one or two edits away.
fn suggestion(key: &str) -> String {
    match closest_field(key) {
        Some(s) => format!(", did you mean {s:?}?"),
        None => String::new(),
    }
}

/// Every field name canaryd's analysis types know, for "did you mean".
const KNOWN_FIELDS: &[&str] = &[
    "metrics",
    "args",
    "dryRun",
    "measurementRetention",
    "templates",
    "templateName",
    "clusterScope",
    "name",
    "interval",
    "initialDelay",
    "count",
    "successCondition",
    "failureCondition",
    "failureLimit",
    "inconclusiveLimit",
    "consecutiveErrorLimit",
    "consecutiveSuccessLimit",
    "provider",
    "prometheus",
    "web",
    "plugin",
    "address",
    "query",
    "authentication",
    "timeout",
    "insecure",
    "headers",
    "rangeQuery",
    "start",
    "end",
    "step",
    "method",
    "url",
    "body",
    "jsonBody",
    "timeoutSeconds",
    "jsonPath",
    "value",
    "valueFrom",
    "secretKeyRef",
    "fieldRef",
    "fieldPath",
    "key",
    "metricName",
    "limit",
    "terminate",
    "ttlStrategy",
    "sigv4",
    "oauth2",
    "basicAuth",
    "tokenUrl",
    "clientId",
    "clientSecret",
    "scopes",
    "username",
    "password",
    "region",
    "profile",
    "roleArn",
    "secondsAfterCompletion",
    "secondsAfterFailure",
    "secondsAfterSuccess",
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "status",
    "labels",
    "annotations",
    "namespace",
    "generateName",
];

fn closest_field(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    KNOWN_FIELDS
        .iter()
        .copied()
        .map(|f| (edit_distance(&lower, &f.to_ascii_lowercase()), f))
        .filter(|(d, f)| *d <= 2 && *d < f.len() / 2 + 1)
        .min_by_key(|(d, _)| *d)
        .map(|(_, f)| f)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Expands files and folders (recursively, `*.yaml` and `*.yml`, sorted) into the files to read.
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|e| LoadError {
            file: path.clone(),
            line: 0,
            message: format!("cannot read: {e}"),
        })?;
        if meta.is_dir() {
            walk(path, &mut out)?;
        } else {
            out.push(path.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let err = |e: std::io::Error| LoadError {
        file: dir.to_path_buf(),
        line: 0,
        message: format!("cannot read: {e}"),
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(err)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, out)?;
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        ) {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads a file and parses every document in it. Documents before a syntax error are still returned, next
/// to the error, so one typo does not hide the findings in the rest of the file.
pub fn load_file(path: &Path) -> (Vec<SourceDoc>, Option<LoadError>) {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_documents(path, &text),
        Err(e) => (
            Vec::new(),
            Some(LoadError {
                file: path.to_path_buf(),
                line: 0,
                message: format!("cannot read: {e}"),
            }),
        ),
    }
}

/// Parses a YAML stream into documents. Empty documents are dropped.
pub fn parse_documents(file: &Path, text: &str) -> (Vec<SourceDoc>, Option<LoadError>) {
    let mut builder = Builder::new(file);
    let mut parser = Parser::new_from_str(text);
    let outcome = parser.load(&mut builder, true);
    let mut error = builder.error.take();
    if let Err(e) = outcome {
        error.get_or_insert(LoadError {
            file: file.to_path_buf(),
            line: e.marker().line(),
            message: format!(
                "invalid YAML: {} (column {})",
                e.info(),
                e.marker().col() + 1
            ),
        });
    }
    (builder.docs, error)
}

enum Frame {
    Map {
        map: Map<String, Value>,
        path: String,
        key: Option<String>,
    },
    Seq {
        items: Vec<Value>,
        path: String,
    },
}

struct Builder {
    file: PathBuf,
    docs: Vec<SourceDoc>,
    stack: Vec<Frame>,
    lines: HashMap<String, usize>,
    anchors: HashMap<usize, Value>,
    pending_anchor: Vec<usize>,
    doc_line: usize,
    root: Option<Value>,
    error: Option<LoadError>,
}

impl Builder {
    fn new(file: &Path) -> Builder {
        Builder {
            file: file.to_path_buf(),
            docs: Vec::new(),
            stack: Vec::new(),
            lines: HashMap::new(),
            anchors: HashMap::new(),
            pending_anchor: Vec::new(),
            doc_line: 1,
            root: None,
            error: None,
        }
    }

    fn fail(&mut self, line: usize, message: String) {
        if self.error.is_none() {
            self.error = Some(LoadError {
                file: self.file.clone(),
                line,
                message,
            });
        }
    }

    /// The path the next node will have, recording its line. For a mapping key, returns None: the scalar is
    /// stored as the pending key instead of a value.
    fn next_path(&mut self, line: usize) -> Option<String> {
        match self.stack.last() {
            None => Some(String::new()),
            Some(Frame::Seq { items, path }) => {
                let p = format!("{path}[{}]", items.len());
                self.lines.insert(p.clone(), line);
                Some(p)
            }
            Some(Frame::Map {
                key: Some(k), path, ..
            }) => Some(join(path, k)),
            Some(Frame::Map { key: None, .. }) => None,
        }
    }

    fn push_value(&mut self, value: Value, line: usize) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => match key.take() {
                Some(k) => {
                    map.insert(k, value);
                }
                None => {
                    let k = match value {
                        Value::String(s) => s,
                        Value::Null => "null".to_string(),
                        other => other.to_string(),
                    };
                    if map.contains_key(&k) {
                        self.fail(
                            line,
                            format!("invalid YAML: mapping key {k:?} is defined twice"),
                        );
                    }
                    // Record where the key is: a problem in its value is reported on the key's line.
                    if let Some(Frame::Map { path, key, .. }) = self.stack.last_mut() {
                        let p = join(path, &k);
                        self.lines.insert(p, line);
                        *key = Some(k);
                    }
                }
            },
        }
    }

    fn is_key_position(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::DocumentStart => {
                self.doc_line = line;
                self.lines.clear();
                self.anchors.clear();
                self.root = None;
            }
            Event::DocumentEnd => {
                if let Some(value) = self.root.take() {
                    if !value.is_null() {
                        self.docs.push(SourceDoc {
                            file: self.file.clone(),
                            line: self.lines.get("").copied().unwrap_or(self.doc_line),
                            value,
                            lines: std::mem::take(&mut self.lines),
                        });
                    }
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let key_position = self.is_key_position();
                if !key_position && let Some(p) = self.next_path(line) {
                    self.lines.entry(p).or_insert(line);
                }
                let value = resolve_scalar(text, style, tag.as_ref());
                if anchor > 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push_value(value, line);
            }
            Event::Alias(id) => {
                if self.is_key_position() {
                    self.fail(
                        line,
                        "invalid YAML: an alias cannot be a mapping key here".to_string(),
                    );
                    return;
                }
                let _ = self.next_path(line);
                let value = self.anchors.get(&id).cloned().unwrap_or(Value::Null);
                self.push_value(value, line);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if self.is_key_position() {
                    self.fail(
                        line,
                        "invalid YAML: a mapping key must be a plain value, not a list or map"
                            .to_string(),
                    );
                }
                let path = self.next_path(line).unwrap_or_default();
                self.lines.entry(path.clone()).or_insert(line);
                self.pending_anchor.push(anchor);
                if matches!(ev, Event::SequenceStart(..)) {
                    self.stack.push(Frame::Seq {
                        items: Vec::new(),
                        path,
                    });
                } else {
                    self.stack.push(Frame::Map {
                        map: Map::new(),
                        path,
                        key: None,
                    });
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let value = match self.stack.pop() {
                    Some(Frame::Seq { items, .. }) => Value::Array(items),
                    Some(Frame::Map { map, .. }) => Value::Object(map),
                    None => return,
                };
                if let Some(anchor) = self.pending_anchor.pop()
                    && anchor > 0
                {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push_value(value, line);
            }
            Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
        }
    }
}

/// Resolves a scalar as Kubernetes' YAML reader (go-yaml, YAML 1.1 rules) does: quoted text is a string;
/// plain text may be null, a boolean, an integer or a float.
fn resolve_scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Value {
    if let Some(tag) = tag {
        match tag.suffix.as_str() {
            "str" => return Value::String(text),
            "int" | "float" | "bool" | "null" => {}
            _ => return Value::String(text),
        }
    }
    if style != TScalarStyle::Plain {
        return Value::String(text);
    }
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
            return Value::Bool(true);
        }
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n" | "N" => {
            return Value::Bool(false);
        }
        _ => {}
    }
    if let Some(n) = parse_int(&text) {
        return Value::Number(n.into());
    }
    if looks_like_float(&text)
        && let Ok(f) = text.replace('_', "").parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text)
}

fn parse_int(text: &str) -> Option<i64> {
    let (neg, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    let digits = digits.replace('_', "");
    let magnitude = if let Some(hex) = digits.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if let Some(oct) = digits.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()?
    } else if digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()?
    } else {
        return None;
    };
    Some(if neg { -magnitude } else { magnitude })
}

fn looks_like_float(text: &str) -> bool {
    let t = text.trim_start_matches(['-', '+']);
    let mut saw_digit = false;
    for (i, c) in t.char_indices() {
        match c {
            '0'..='9' => saw_digit = true,
            '.' | '_' => {}
            'e' | 'E' => {
                return saw_digit
                    && t[i + 1..]
                        .trim_start_matches(['-', '+'])
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                    && i + 1 < t.len();
            }
            _ => return false,
        }
    }
    saw_digit
}

/// Renders JSON as block-style YAML (for `canaryd crds` and for printing objects).
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    let yaml = json_to_yaml(value);
    let mut emitter = yaml_rust2::YamlEmitter::new(&mut out);
    // Emitting to a String cannot fail for trees built from JSON.
    let _ = emitter.dump(&yaml);
    let body = out.strip_prefix("---\n").unwrap_or(&out).to_string();
    body + "\n"
}

fn json_to_yaml(value: &Value) -> yaml_rust2::Yaml {
    use yaml_rust2::Yaml;
    match value {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Yaml::Integer(i),
            None => Yaml::Real(n.to_string()),
        },
        Value::String(s) => Yaml::String(s.clone()),
        Value::Array(items) => Yaml::Array(items.iter().map(json_to_yaml).collect()),
        Value::Object(map) => Yaml::Hash(
            map.iter()
                .map(|(k, v)| (Yaml::String(k.clone()), json_to_yaml(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> (Vec<SourceDoc>, Option<LoadError>) {
        parse_documents(Path::new("t.yaml"), text)
    }

    #[test]
    fn remembers_the_line_of_every_field() {
        let (docs, err) =
            parse("kind: A\nspec:\n  metrics:\n  - name: x\n    interval: 5m\n  - name: y\n");
        assert!(err.is_none());
        let d = &docs[0];
        assert_eq!(d.line_of("kind"), 1);
        assert_eq!(d.line_of("spec.metrics[0].interval"), 5);
        assert_eq!(d.line_of("spec.metrics[1].name"), 6);
        // A field that is not there is reported at its parent.
        assert_eq!(d.line_of("spec.metrics[1].count"), 6);
    }

    #[test]
    fn splits_documents_and_keeps_the_ones_before_a_syntax_error() {
        let (docs, err) = parse("---\nkind: A\n---\n---\nkind: B\n---\nkind: [\n");
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].line, 5);
        let err = err.expect("broken third document");
        assert_eq!(err.line, 8);
        assert!(err.message.starts_with("invalid YAML"), "{}", err.message);
    }

    #[test]
    fn resolves_scalars_as_kubernetes_does() {
        let (docs, _) = parse(
            "a: 5\nb: '5'\nc: 0.95\nd: true\ne: ~\nf: 1h\ng: yes\nh: \"{{args.x}}\"\ni: -3\nj: 1e3\nk: .5\n",
        );
        assert_eq!(
            docs[0].value,
            json!({"a":5,"b":"5","c":0.95,"d":true,"e":null,"f":"1h","g":true,"h":"{{args.x}}","i":-3,"j":1000.0,"k":0.5})
        );
    }

    #[test]
    fn rejects_duplicate_keys_with_their_line() {
        let (_, err) = parse("a: 1\nb: 2\na: 3\n");
        let err = err.expect("duplicate key");
        assert_eq!(err.line, 3);
        assert!(err.message.contains("\"a\" is defined twice"));
    }

    #[test]
    fn expands_anchors_and_aliases() {
        let (docs, err) = parse("base: &b {x: 1}\ncopy: *b\n");
        assert!(err.is_none());
        assert_eq!(docs[0].value, json!({"base": {"x": 1}, "copy": {"x": 1}}));
    }

    #[test]
    fn decode_lists_fields_the_type_does_not_know_with_a_suggestion() {
        let value = json!({"name": "m", "intervall": "5m", "provider": {"prometheus": {"query": "up", "adress": "x"}}});
        let (_, unknown) = decode::<crate::api::Metric>(&value).expect("decodes");
        let paths: Vec<_> = unknown
            .iter()
            .map(|u| (u.path.as_str(), u.message.as_str()))
            .collect();
        assert_eq!(
            paths,
            vec![
                (
                    "intervall",
                    "unknown field \"intervall\", did you mean \"interval\"?"
                ),
                (
                    "provider.prometheus.adress",
                    "unknown field \"adress\", did you mean \"address\"?"
                ),
            ]
        );
    }

    #[test]
    fn decode_names_the_path_of_a_type_error() {
        let value = json!({"name": "m", "provider": {"prometheus": {"timeout": "soon"}}});
        let err = decode::<crate::api::Metric>(&value).expect_err("type error");
        assert_eq!(err.path, "provider.prometheus.timeout");
        assert!(err.message.contains("invalid type"), "{}", err.message);
    }
}
