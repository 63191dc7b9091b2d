//! `--report FILE`: `demo` and `rehearse` write one self-contained HTML page with the timeline as the
//! command prints it and each analysis's chart, which headless Chromium opens with the network cut off.

use std::path::{Path, PathBuf};

use canaryd_testkit::offline_page;

use crate::CANARYD;

fn html(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Nothing in the page is fetched: no script, style sheet, font or image from elsewhere. The one URL is
/// SVG's namespace name, which is never fetched.
fn assert_self_contained(page: &str) {
    for external in ["<script", "<link", "<img", "@import", "url(", "src="] {
        assert!(!page.contains(external), "{external} in an offline report");
    }
    let urls = page.matches("http://").count() + page.matches("https://").count();
    let namespaces = page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
    assert_eq!(urls, namespaces, "only SVG's namespace is a URL");
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn demo_report(dir: &Path) -> (PathBuf, String) {
    let path = dir.join("demo.html");
    let report = path.to_str().expect("a UTF-8 path");
    let ran = CANARYD.run(&["demo", "--report", report]);
    assert_eq!(
        ran.code,
        Some(1),
        "the demo's canary is rolled back: {}",
        ran.stderr
    );
    (path, ran.stdout)
}

#[test]
fn the_demo_report_holds_the_printed_timeline_the_ending_and_the_analysis_chart() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (path, stdout) = demo_report(dir.path());
    assert_eq!(
        stdout,
        CANARYD.run(&["demo"]).stdout,
        "--report changes nothing printed"
    );
    let page = html(&path);
    assert_self_contained(&page);
    assert!(
        page.contains(
            "<p class=\"ending\" id=\"ending\">aborted at step 3/7 after 8m (metric success-rate)"
        ),
        "{page}"
    );
    // Every line the command printed for the timeline is a line of the report's, in order.
    let printed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("2026-")).collect();
    let listed: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix("<li class=\""))
        .filter_map(|l| {
            l.split_once("\">")
                .map(|(_, rest)| rest.trim_end_matches("</li>"))
        })
        .collect();
    let unescaped: Vec<String> = listed.iter().map(|l| unescape(l)).collect();
    assert_eq!(unescaped, printed);
    assert!(page.contains("<li class=\"step\">2026-01-01T00:02:00Z  step 1/7  setWeight: 20"));
    assert!(page.contains("<li class=\"failed\">2026-01-01T00:09:00Z  success-rate"));
    // The analysis: its measurements drawn against the template's threshold (args.threshold = 0.99).
    assert!(
        page.contains(
            "<h3>metric success-rate <span class=\"phase phase-Failed\">Failed</span></h3>"
        )
    );
    assert!(
        page.contains(">success: result[0] &gt;= 0.99</text>"),
        "{page}"
    );
    assert!(page.contains(">failure: result[0] &lt; 0.99</text>"));
    assert_eq!(
        page.matches("<circle class=\"series-0 phase-Failed\"")
            .count(),
        2
    );
}

#[test]
fn the_analysis_only_demo_report_draws_every_measurement() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("analysis.html");
    let ran = CANARYD.run(&[
        "demo",
        "--analysis-only",
        "--report",
        path.to_str().expect("UTF-8"),
    ]);
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    let page = html(&path);
    assert_self_contained(&page);
    assert!(page.contains("<p class=\"ending\" id=\"ending\">Analysis success-rate: Failed"));
    let measured = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("2026-"))
        .count();
    assert!(measured > 0);
    assert_eq!(
        page.matches("<circle ").count(),
        measured,
        "a dot per measurement printed"
    );
}

#[test]
fn a_rehearsal_report_holds_its_timeline_and_ending() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("rehearsal.html");
    let ran = CANARYD.run(&[
        "rehearse",
        "-f",
        "tests/fixtures/rehearse/subset-only.yaml",
        "--from",
        "2026-01-01T00:00:00Z",
        "--ready-after",
        "1m",
        "--report",
        path.to_str().expect("UTF-8"),
    ]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let page = html(&path);
    assert_self_contained(&page);
    assert!(
        page.contains("<h1>canaryd rehearsal of Rollout shop/web</h1>"),
        "{page}"
    );
    assert!(
        page.contains("<p class=\"ending\" id=\"ending\">promoted after "),
        "{page}"
    );
    assert!(
        page.contains("routers held back: DestinationRule shop/web-dr"),
        "{page}"
    );
}

#[test]
fn a_report_that_cannot_be_written_is_bad_input_before_anything_runs() {
    let ran = CANARYD.run(&["demo", "--report", "/nonexistent-folder/demo.html"]);
    assert_eq!(ran.code, Some(2));
    assert!(
        ran.stderr
            .contains("canaryd demo: cannot write the report /nonexistent-folder/demo.html"),
        "{}",
        ran.stderr
    );
    assert_eq!(ran.stdout, "", "nothing was rehearsed");
    let refused = CANARYD.run(&[
        "rehearse",
        "-f",
        "x.yaml",
        "--from",
        "2026-01-01T00:00:00Z",
        "--every",
        "1h",
        "--until",
        "2026-01-02T00:00:00Z",
        "--report",
        "r.html",
    ]);
    assert_eq!(
        refused.code,
        Some(2),
        "--every rehearses many starts: one report cannot hold them"
    );
}

/// The offline report in a real browser: Chromium, with every request sent nowhere, renders the chart,
/// the timeline and the ending; the screenshot is kept under the target folder.
#[test]
fn the_demo_report_opens_in_chromium_without_a_network() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (path, _) = demo_report(dir.path());
    let dom = offline_page::dump_dom(&path);
    assert!(dom.contains("<svg class=\"chart\""), "{dom}");
    assert!(
        dom.contains("<ol class=\"timeline\" id=\"timeline\">"),
        "{dom}"
    );
    assert!(dom.contains("aborted at step 3/7 after 8m"), "{dom}");
    assert!(dom.contains("success: result[0] &gt;= 0.99"), "{dom}");
    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots/demo.png");
    offline_page::screenshot(&path, &png);
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 20_000,
        "a screenshot with something drawn in it: {size} bytes"
    );
}
