//! The HTML document every page and report is written into: its shell, its one inline style sheet (no
//! external script, style, font or image, so a report opens without a network), and the escaping every string
//! from outside (names, messages, values) goes through before it reaches markup.

/// `text` made safe inside an element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole document: `title` is text (escaped here), `body` is markup already built from escaped parts.
pub fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n",
        escape(title)
    )
}

/// The one style sheet: system fonts only, colours that read on paper too. Chart classes: `canary`,
/// `baseline`, `allowed`, `series-N` for lines; `success`, `failure`, `margin` for thresholds; `bound` for
/// a confidence band; `decided` for the decision's look; `phase-<Phase>` for a measurement's dot.
const STYLE: &str = r#"
:root { --fg: #1d2330; --muted: #5b6475; --line: #d5d9e0; --ok: #1a7f37; --bad: #c62828; --warn: #b26a00;
  --canary: #d9480f; --baseline: #1c6fd1; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 0 auto;
  max-width: 1100px; padding: 1.5rem; }
h1 { font-size: 1.5rem; margin: 0 0 .5rem; } h2 { font-size: 1.2rem; margin: 2rem 0 .5rem; }
h3 { font-size: 1.05rem; margin: 1.5rem 0 .4rem; }
.muted { color: var(--muted); }
.phase { display: inline-block; padding: 0 .5em; border-radius: .6em; font-size: .85rem; font-weight: 600;
  background: #eef0f4; }
.phase-Successful { color: var(--ok); } .phase-Failed, .phase-Error { color: var(--bad); }
.phase-Inconclusive { color: var(--warn); }
.why { font-size: 1.05rem; border-left: 4px solid var(--muted); padding: .3rem .8rem; background: #f6f7f9; }
.why.fail { border-color: var(--bad); } .why.pass { border-color: var(--ok); }
.why.inconclusive { border-color: var(--warn); }
table { border-collapse: collapse; font-size: .85rem; margin: .5rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: .2rem .6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.decided td { font-weight: 700; }
ol.timeline { list-style: none; padding: 0; font-size: .9rem; }
ol.timeline li { border-left: 3px solid var(--line); padding: .15rem .8rem; white-space: pre-wrap; overflow-wrap: anywhere;
  font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .8rem; }
ol.timeline li.step { border-color: var(--baseline); font-weight: 600; }
ol.timeline li.warning, ol.timeline li.failed { border-color: var(--bad); }
.ending { font-size: 1.1rem; font-weight: 600; }
svg.chart { width: 100%; max-width: 760px; height: auto; font: 11px system-ui, sans-serif; }
svg.chart .axis { stroke: var(--muted); stroke-width: 1; }
svg.chart .grid { stroke: var(--line); stroke-width: 1; }
svg.chart text { fill: var(--muted); }
svg.chart path.line { fill: none; stroke-width: 2; }
svg.chart .canary { stroke: var(--canary); fill: var(--canary); }
svg.chart .baseline { stroke: var(--baseline); fill: var(--baseline); }
svg.chart .allowed { stroke: var(--muted); fill: var(--muted); stroke-dasharray: 5 4; }
svg.chart .series-0 { stroke: #5a3fc0; fill: #5a3fc0; } svg.chart .series-1 { stroke: #0b7a75; fill: #0b7a75; }
svg.chart .series-2 { stroke: #8a5a00; fill: #8a5a00; }
svg.chart line.success { stroke: var(--ok); stroke-dasharray: 6 4; stroke-width: 1.5; }
svg.chart line.failure { stroke: var(--bad); stroke-dasharray: 6 4; stroke-width: 1.5; }
svg.chart line.margin { stroke: var(--bad); stroke-dasharray: 6 4; stroke-width: 1.5; }
svg.chart text.success { fill: var(--ok); } svg.chart text.failure, svg.chart text.margin { fill: var(--bad); }
svg.chart path.bound { fill: var(--canary); fill-opacity: .15; stroke: none; }
svg.chart line.decided { stroke: var(--fg); stroke-width: 1.5; }
svg.chart text.decided { fill: var(--fg); font-weight: 600; }
svg.chart circle { stroke: #fff; stroke-width: 1; }
svg.chart circle.phase-Failed, svg.chart circle.phase-Error { fill: var(--bad); }
svg.chart circle.phase-Inconclusive { fill: var(--warn); }
svg.chart .legend text { fill: var(--fg); }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_from_outside_cannot_open_markup() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        let page = document("<script>bad()</script>", "<p>body</p>");
        assert!(page.contains("<title>&lt;script&gt;bad()&lt;/script&gt;</title>"));
        assert!(!page.contains("<script>"), "{page}");
    }
}
