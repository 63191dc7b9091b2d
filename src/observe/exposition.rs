//! The Prometheus text exposition format as `/metrics` writes it: families, samples and escaped label values,
//! written to an [`Exposition`] that hands its text on in chunks as it grows. At 50,000 AnalysisRuns the body is
//! about 100 MB; written whole, it was a string of that size (twice that while it grew) held by the process
//! for each scrape. It owns the format and the chunking, not what the families say (the other `observe`
//! modules).

use std::fmt::Write as _;

use hyper::body::Bytes;

/// About how much text a chunk holds when it is handed on (a line is never split).
const CHUNK: usize = 64 * 1024;

/// Where an exposition is written: into one string ([`Exposition::collect`]), or in chunks to a channel
/// ([`Exposition::streaming`]), whose reader sends them as it gets them.
pub struct Exposition {
    text: String,
    chunks: Option<tokio::sync::mpsc::Sender<Bytes>>,
    /// The reader is gone (the scraper hung up): the rest is not written.
    closed: bool,
}

impl Exposition {
    /// Everything in one string, [`Exposition::finish`] returns it.
    pub fn collect() -> Exposition {
        Exposition {
            text: String::new(),
            chunks: None,
            closed: false,
        }
    }

    /// Chunks to `chunks`, each sent once it is full, waiting while the channel is. Blocks: write it off the
    /// async runtime (`spawn_blocking`).
    pub fn streaming(chunks: tokio::sync::mpsc::Sender<Bytes>) -> Exposition {
        Exposition {
            text: String::with_capacity(CHUNK),
            chunks: Some(chunks),
            closed: false,
        }
    }

    /// Sends what is left; returns the whole text when collecting (empty when streaming).
    pub fn finish(mut self) -> String {
        self.send();
        self.text
    }

    /// Ends a line: a full chunk is sent.
    fn line_written(&mut self) {
        if self.text.len() >= CHUNK {
            self.send();
        }
    }

    fn send(&mut self) {
        let Some(chunks) = &self.chunks else {
            return;
        };
        if self.closed || self.text.is_empty() {
            return;
        }
        let chunk = std::mem::replace(&mut self.text, String::with_capacity(CHUNK));
        if chunks.blocking_send(Bytes::from(chunk)).is_err() {
            self.closed = true;
            self.text = String::new();
        }
    }

    fn push_str(&mut self, s: &str) {
        if !self.closed {
            self.text.push_str(s);
        }
    }

    fn push(&mut self, c: char) {
        if !self.closed {
            self.text.push(c);
        }
    }
}

impl std::fmt::Write for Exposition {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

/// A family's `# HELP` and `# TYPE` lines.
pub fn family(out: &mut Exposition, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    out.line_written();
}

/// One sample's line.
pub fn sample(out: &mut Exposition, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            escape_label_value(out, v);
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
    out.line_written();
}

/// A label value as the text format writes it: backslash, double quote and line feed escaped. Written piece by
/// piece, without a copy per value: a scrape of 50,000 runs writes millions of them.
fn escape_label_value(out: &mut Exposition, value: &str) {
    let mut rest = value;
    while let Some(at) = rest.find(['\\', '"', '\n']) {
        out.push_str(&rest[..at]);
        out.push_str(match rest.as_bytes()[at] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        });
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut out = Exposition::collect();
        sample(&mut out, "m", &[("reason", "a\"b\\c\nd")], 1.0);
        assert_eq!(out.finish(), "m{reason=\"a\\\"b\\\\c\\nd\"} 1\n");
    }

    #[test]
    fn a_streamed_exposition_arrives_whole_in_chunks_of_whole_lines() {
        let (sender, mut receiver) = tokio::sync::mpsc::channel(1);
        let writer = std::thread::spawn(move || {
            let mut out = Exposition::streaming(sender);
            family(&mut out, "m", "gauge", "A family.");
            for i in 0..20_000 {
                sample(
                    &mut out,
                    "m",
                    &[("name", &format!("run-{i}"))],
                    f64::from(i),
                );
            }
            out.finish()
        });
        let mut chunks = Vec::new();
        while let Some(chunk) = receiver.blocking_recv() {
            chunks.push(chunk);
        }
        assert_eq!(writer.join().expect("the writer ends"), "");
        assert!(chunks.len() > 2, "{} chunks", chunks.len());
        assert!(
            chunks
                .iter()
                .all(|c| c.ends_with(b"\n") && c.len() < 2 * CHUNK)
        );
        let text: String = chunks
            .iter()
            .map(|c| std::str::from_utf8(c).expect("UTF-8"))
            .collect();
        let mut whole = Exposition::collect();
        family(&mut whole, "m", "gauge", "A family.");
        for i in 0..20_000 {
            sample(
                &mut whole,
                "m",
                &[("name", &format!("run-{i}"))],
                f64::from(i),
            );
        }
        assert_eq!(text, whole.finish());
    }

    #[test]
    fn a_scraper_that_hangs_up_stops_the_writing() {
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        drop(receiver);
        let mut out = Exposition::streaming(sender);
        for i in 0..20_000 {
            sample(&mut out, "m", &[], f64::from(i));
        }
        assert!(out.closed);
        assert_eq!(out.text.len(), 0);
    }
}
