//! Reading manifests from disk: finds `*.yaml`/`*.yml` files, splits multi-document streams, converts each
//! document to JSON the way Kubernetes reads YAML, and remembers the line of every field so that a problem can
//! be reported as `FILE:LINE`. Also decodes a document into a typed object and lists the fields the type does
//! not know (misspellings). It owns no semantics: `engine/` decides what is valid.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use libyaml_safer::{Event, EventData, ScalarStyle};
use serde_json::{Map, Number, Value};

use crate::api::decode::join;

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

    /// Why this document is not of the `argoproj.io/v1alpha1` group and version every Argo kind canaryd reads
    /// has; `None` when it is.
    pub fn wrong_api_version(&self) -> Option<String> {
        let found = self.value.get("apiVersion").and_then(Value::as_str);
        let found = found.unwrap_or_default();
        (found != crate::api::API_VERSION)
            .then(|| format!("expected {:?}, got {found:?}", crate::api::API_VERSION))
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
    match read_file(path) {
        Ok(text) => parse_documents(path, &text),
        Err(e) => (Vec::new(), Some(e)),
    }
}

/// A file's text; an error (at line 0) when it cannot be read.
pub fn read_file(path: &Path) -> Result<String, LoadError> {
    std::fs::read_to_string(path).map_err(|e| LoadError {
        file: path.to_path_buf(),
        line: 0,
        message: format!("cannot read: {e}"),
    })
}

/// Parses a YAML stream into documents with libyaml's grammar (the one Kubernetes' go-yaml follows, so what
/// kubectl accepts is accepted here). Empty documents are dropped.
pub fn parse_documents(file: &Path, text: &str) -> (Vec<SourceDoc>, Option<LoadError>) {
    let mut builder = Builder::new(file);
    let mut parser = libyaml_safer::Parser::new();
    // libyaml-safer 0.3 panics ("unexpected end of input") on a block scalar that ends the file without a line
    // break; a final line break changes no line number and no value a file without one can have.
    let terminated;
    let text = if text.is_empty() || text.ends_with('\n') {
        text
    } else {
        terminated = format!("{text}\n");
        &terminated
    };
    let mut input = text.as_bytes();
    parser.set_input(&mut input);
    loop {
        match parser.parse() {
            Ok(event) => {
                let done = matches!(event.data, EventData::StreamEnd);
                builder.on_event(event.data, event.start_mark.line as usize + 1);
                if done || builder.error.is_some() {
                    break;
                }
            }
            Err(e) => {
                // Report where the construct that went wrong starts (an unclosed `[`), not the end of file.
                let at = |m: libyaml_safer::Mark| (m.line as usize + 1, m.column as usize + 1);
                let problem = e.problem_mark().map(at);
                let (line, message) = match (e.context(), e.context_mark().map(at)) {
                    (Some(context), Some((cl, cc))) => (
                        cl,
                        format!(
                            "invalid YAML: {} {context} that starts at column {cc}",
                            e.problem()
                        ),
                    ),
                    _ => {
                        let (pl, pc) = problem.unwrap_or((1, 1));
                        (pl, format!("invalid YAML: {} (column {pc})", e.problem()))
                    }
                };
                builder.fail(line, message);
                break;
            }
        }
    }
    (builder.docs, builder.error)
}

enum Frame {
    Map {
        map: Map<String, Value>,
        path: String,
        key: Option<String>,
        anchor: Option<String>,
    },
    Seq {
        items: Vec<Value>,
        path: String,
        anchor: Option<String>,
    },
}

struct Builder {
    file: PathBuf,
    docs: Vec<SourceDoc>,
    stack: Vec<Frame>,
    lines: HashMap<String, usize>,
    anchors: HashMap<String, Value>,
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

    /// The path the next value will have, recording its line; None when the next scalar is a mapping key.
    fn next_path(&mut self, line: usize) -> Option<String> {
        let path = match self.stack.last() {
            None => String::new(),
            Some(Frame::Seq { items, path, .. }) => format!("{path}[{}]", items.len()),
            Some(Frame::Map {
                key: Some(k), path, ..
            }) => join(path, k),
            Some(Frame::Map { key: None, .. }) => return None,
        };
        self.lines.entry(path.clone()).or_insert(line);
        Some(path)
    }

    fn push_value(&mut self, value: Value, line: usize) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, path, .. }) => match key.take() {
                Some(k) => {
                    map.insert(k, value);
                }
                None => {
                    let k = match value {
                        Value::String(s) => s,
                        Value::Null => "null".to_string(),
                        other => other.to_string(),
                    };
                    let duplicate = map.contains_key(&k);
                    // Where the key is: a problem in its value is reported on the key's line.
                    self.lines.insert(join(path, &k), line);
                    *key = Some(k.clone());
                    if duplicate {
                        self.fail(
                            line,
                            format!("invalid YAML: mapping key {k:?} is defined twice"),
                        );
                    }
                }
            },
        }
    }

    fn is_key_position(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    fn on_event(&mut self, ev: EventData, line: usize) {
        match ev {
            EventData::DocumentStart { .. } => {
                self.doc_line = line;
                self.lines.clear();
                self.anchors.clear();
                self.root = None;
            }
            EventData::DocumentEnd { .. } => {
                if let Some(value) = self.root.take()
                    && !value.is_null()
                {
                    self.docs.push(SourceDoc {
                        file: self.file.clone(),
                        line: self.lines.get("").copied().unwrap_or(self.doc_line),
                        value,
                        lines: std::mem::take(&mut self.lines),
                    });
                }
            }
            EventData::Scalar {
                anchor,
                tag,
                value,
                style,
                ..
            } => {
                if !self.is_key_position() {
                    self.next_path(line);
                }
                let value = resolve_scalar(value, style == ScalarStyle::Plain, tag.as_deref());
                if let Some(anchor) = anchor {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push_value(value, line);
            }
            EventData::Alias { anchor } => {
                if self.is_key_position() {
                    self.fail(
                        line,
                        "invalid YAML: an alias cannot be a mapping key".to_string(),
                    );
                    return;
                }
                self.next_path(line);
                let value = self.anchors.get(&anchor).cloned().unwrap_or(Value::Null);
                self.push_value(value, line);
            }
            EventData::SequenceStart { ref anchor, .. }
            | EventData::MappingStart { ref anchor, .. } => {
                let anchor = anchor.clone();
                if self.is_key_position() {
                    self.fail(
                        line,
                        "invalid YAML: a mapping key must be a plain value, not a list or map (a value \
                         that starts with {{ must be quoted: \"{{args.NAME}}\")"
                            .to_string(),
                    );
                    return;
                }
                let path = self.next_path(line).unwrap_or_default();
                if matches!(ev, EventData::SequenceStart { .. }) {
                    self.stack.push(Frame::Seq {
                        items: Vec::new(),
                        path,
                        anchor,
                    });
                } else {
                    self.stack.push(Frame::Map {
                        map: Map::new(),
                        path,
                        key: None,
                        anchor,
                    });
                }
            }
            EventData::SequenceEnd | EventData::MappingEnd => {
                let (value, anchor) = match self.stack.pop() {
                    Some(Frame::Seq { items, anchor, .. }) => (Value::Array(items), anchor),
                    Some(Frame::Map { map, anchor, .. }) => (Value::Object(map), anchor),
                    None => return,
                };
                if let Some(anchor) = anchor {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push_value(value, line);
            }
            EventData::StreamStart { .. } | EventData::StreamEnd => {}
        }
    }
}

/// Resolves a scalar as Kubernetes' YAML reader (go-yaml, YAML 1.1 rules) does: quoted text is a string;
/// plain text may be null, a boolean, an integer or a float.
fn resolve_scalar(text: String, plain: bool, tag: Option<&str>) -> Value {
    if let Some(tag) = tag {
        match tag
            .trim_start_matches("tag:yaml.org,2002:")
            .trim_start_matches('!')
        {
            "int" | "float" | "bool" | "null" => {}
            _ => return Value::String(text),
        }
    }
    if !plain {
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

/// Renders JSON as block-style YAML (for `canaryd crds` and for printing objects). Strings that YAML would
/// read back as something else (`"5"`, `"true"`, `""`) are quoted.
pub fn to_yaml(value: &Value) -> String {
    let mut out = Vec::new();
    let mut emitter = libyaml_safer::Emitter::new();
    emitter.set_output_string(&mut out);
    emitter.set_width(120);
    let mut events = vec![
        Event::stream_start(libyaml_safer::Encoding::Utf8),
        Event::document_start(None, &[], true),
    ];
    json_events(value, &mut events);
    events.push(Event::document_end(true));
    events.push(Event::stream_end());
    for event in events {
        // Emitting well-formed events built from JSON into memory does not fail.
        if emitter.emit(event).is_err() {
            break;
        }
    }
    drop(emitter);
    String::from_utf8_lossy(&out).into_owned()
}

fn json_events(value: &Value, out: &mut Vec<Event>) {
    use libyaml_safer::{MappingStyle, SequenceStyle};
    let scalar = |text: &str, style| Event::scalar(None, None, text, true, true, style);
    match value {
        Value::Null => out.push(scalar("null", ScalarStyle::Plain)),
        Value::Bool(b) => out.push(scalar(
            if *b { "true" } else { "false" },
            ScalarStyle::Plain,
        )),
        Value::Number(n) => out.push(scalar(&n.to_string(), ScalarStyle::Plain)),
        Value::String(s) => {
            let reads_back = resolve_scalar(s.clone(), true, None) == Value::String(s.clone());
            let style = if reads_back && !s.is_empty() {
                ScalarStyle::Any
            } else {
                ScalarStyle::DoubleQuoted
            };
            out.push(scalar(s, style));
        }
        Value::Array(items) => {
            out.push(Event::sequence_start(
                None,
                None,
                true,
                SequenceStyle::Block,
            ));
            items.iter().for_each(|v| json_events(v, out));
            out.push(Event::sequence_end());
        }
        Value::Object(map) => {
            out.push(Event::mapping_start(None, None, true, MappingStyle::Block));
            for (k, v) in map {
                json_events(&Value::String(k.clone()), out);
                json_events(v, out);
            }
            out.push(Event::mapping_end());
        }
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
}
