//! The dashboard in a real browser: `canaryd dashboard` against the fake API server (through the kubeconfig it
//! writes), its pages loaded in Debian's headless Chromium (`canaryd_testkit::browser`). The list shows the
//! Rollout mid-canary, its page the steps and the weights, a change made in the fake API server appears without
//! a reload (server-sent events), abort from the page aborts the Rollout with actions on, and with them off
//! there is no button and a forged request is refused. Screenshots are saved under the target directory
//! (`$CARGO_TARGET_TMPDIR/web/`).

#![allow(clippy::disallowed_methods)] // Not the Clock: the dashboard and the browser run on real time.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use canaryd::api::{AnalysisRun, Rollout};
use canaryd_testkit::browser::Browser;
use canaryd_testkit::child_daemon;
use canaryd_testkit::cli::Canaryd;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer};
use canaryd_testkit::rollout::checkout::{
    NAME, NAMESPACE, advanced_rollout_object, from, owner, rollout_object, serve_fixture,
};
use serde_json::json;

/// The binary under test.
const CANARYD: Canaryd = canaryd_testkit::canaryd!();

/// How long a change may take to show in the browser.
const PATIENCE: Duration = Duration::from_secs(20);

/// `canaryd dashboard --addr 127.0.0.1:0 [EXTRA]` on `server`'s cluster; ends when dropped.
struct Dashboard {
    child: Child,
    url: String,
    _home: tempfile::TempDir,
}

impl Dashboard {
    fn start(server: &FakeApiServer, extra: &[&str]) -> Dashboard {
        let home = tempfile::tempdir().expect("a home");
        let mut child = CANARYD
            .command_on_cluster(server.kubeconfig_path(), home.path())
            .args(["dashboard", "--addr", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the canaryd binary runs");
        let stderr = child.stderr.take().expect("its stderr");
        let mut first = String::new();
        BufReader::new(stderr)
            .read_line(&mut first)
            .expect("a line on stderr");
        let url = first
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("the address on stderr: {first:?}"))
            .trim_end_matches('/')
            .to_string();
        Dashboard {
            child,
            url,
            _home: home,
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn screenshot(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("web")
        .join(name)
}

/// The fixture's Rollout moved on to its third step (setWeight: 50), as its controller would write it.
fn advance(server: &FakeApiServer) {
    let mut rollout = advanced_rollout_object();
    rollout["status"]["canary"]["weights"]["canary"]["weight"] = json!(50);
    rollout["status"]["canary"]["weights"]["stable"]["weight"] = json!(50);
    server.put::<Rollout>(&from(rollout));
}

/// Four times the baseline's error rate on 300 requests per side per look: the judge fails at look 4.
const FAILS_AT_FOUR: &str = "12:300:3:300,24:600:6:600,36:900:9:900,48:1200:12:1200";

/// The canary of revision 3 failed by the `canaryd/compare` judge at its fourth look, and the Rollout aborted
/// for it, as the daemon would have written them.
fn abort_on_errors(server: &FakeApiServer) {
    let rollout = server.get::<Rollout>(NAMESPACE, NAME).expect("the Rollout");
    let uid = rollout.metadata.uid.clone().expect("a uid");
    server.put::<AnalysisRun>(&from(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {
            "name": "checkout-7c9d5f6b8-3-2", "namespace": NAMESPACE, "labels": {"app": NAME},
            "annotations": {"rollout.argoproj.io/revision": "3"},
            "ownerReferences": owner("Rollout", NAME, &uid),
        },
        "spec": {"metrics": [{"name": "errors", "interval": "1m", "provider": {"plugin": {"canaryd/compare": {
            "errorRate": {
                "canary": {"errors": "sum(e{v=\"c\"})", "requests": "sum(r{v=\"c\"})"},
                "baseline": {"errors": "sum(e{v=\"b\"})", "requests": "sum(r{v=\"b\"})"},
                "maxRelativeIncrease": 0.1, "confidence": 0.95
            }}}}}]},
        "status": {"phase": "Failed", "startedAt": "2026-12-05T00:01:00Z", "metricResults": [{
            "name": "errors", "phase": "Failed", "count": 4, "failed": 1, "inconclusive": 3,
            "metadata": {"canaryd.io/compare-looks": FAILS_AT_FOUR},
        }]},
    })));
    let mut aborted = rollout_object();
    aborted["status"]["abort"] = json!(true);
    aborted["status"]["phase"] = json!("Degraded");
    aborted["status"]["message"] = json!(
        "RolloutAborted: Rollout aborted update to revision 3: Metric \"errors\" assessed Failed due to failed (1) > failureLimit (0)"
    );
    aborted["status"]["pauseConditions"] = json!([]);
    aborted["status"]["controllerPause"] = json!(false);
    server.put::<Rollout>(&from(aborted));
}

fn aborted(server: &FakeApiServer) -> bool {
    let rollout = server.get::<Rollout>(NAMESPACE, NAME).expect("the Rollout");
    rollout.status.is_some_and(|s| s.abort)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_show_the_canary_and_follow_a_change_without_a_reload() {
    let server = serve_fixture(CrdSet::Argo).await;
    let dashboard = Dashboard::start(&server, &[]);
    let browser = Browser::start().await;

    browser.open(&format!("{}/", dashboard.url)).await;
    let row = browser
        .texts(&format!("tr[data-rollout=\"{NAMESPACE}/{NAME}\"]"))
        .await;
    assert_eq!(row.len(), 1, "{row:?}");
    for shown in ["Paused", "1/4", "20", "CanaryPauseStep"] {
        assert!(row[0].contains(shown), "{shown} in {row:?}");
    }
    browser.screenshot(&screenshot("rollouts.png")).await;

    browser
        .open(&format!("{}/?namespace=elsewhere", dashboard.url))
        .await;
    assert_eq!(browser.count("tr[data-rollout]").await, 0);

    browser
        .open(&format!("{}/rollouts/{NAMESPACE}/{NAME}", dashboard.url))
        .await;
    let states: Vec<String> = browser
        .script("return [...document.querySelectorAll('#steps li')].map(li => li.dataset.state + ' ' + li.textContent)")
        .await
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect();
    assert_eq!(
        states,
        [
            "done setWeight: 20 20%",
            "current pause 20%",
            "to-come setWeight: 50 50%",
            "to-come pause: 30s 50%",
        ]
    );
    assert_eq!(browser.texts("#weights").await, ["set 20%, actual 20%"]);
    assert_eq!(browser.count("button[data-action]").await, 0);
    browser.screenshot(&screenshot("rollout.png")).await;

    // The page is marked; a reload would lose the mark.
    browser
        .script("window.notReloaded = true; return null")
        .await;
    advance(&server);
    browser
        .wait_for_text("#step", "2/4 (setWeight: 50)", PATIENCE)
        .await;
    browser
        .wait_for_text("#weights", "set 50%, actual 50%", PATIENCE)
        .await;
    assert_eq!(
        browser.script("return window.notReloaded === true").await,
        json!(true),
        "the page was reloaded"
    );
    assert_eq!(
        browser.texts("#steps li[data-state=current]").await,
        ["setWeight: 50 50%"]
    );

    browser.click("a[href$=\"/checkout-7c9d5f6b8-3-1\"]").await;
    browser
        .wait_for_text(
            "section.analysis-run h2",
            "AnalysisRun checkout-7c9d5f6b8-3-1",
            PATIENCE,
        )
        .await;
    assert_eq!(browser.count("section.analysis-run .metric").await, 2);
    browser.screenshot(&screenshot("analysisrun.png")).await;
}

/// The "done when": on the page of a Rollout being aborted, which metric failed, when, by how much and
/// why the judge decided, arriving live on a page opened before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_rollouts_page_shows_which_metric_failed_and_why() {
    let server = serve_fixture(CrdSet::Argo).await;
    let dashboard = Dashboard::start(&server, &[]);
    let browser = Browser::start().await;
    browser
        .open(&format!("{}/rollouts/{NAMESPACE}/{NAME}", dashboard.url))
        .await;
    abort_on_errors(&server);
    browser.wait_for_text("#phase", "Degraded", PATIENCE).await;
    assert!(
        browser.texts("#message").await[0].contains("Metric \"errors\" assessed Failed"),
        "{:?}",
        browser.texts("#message").await
    );
    let why = browser
        .wait_for_text(
            "#run-checkout-7c9d5f6b8-3-2 .why",
            "the canary's error rate exceeds the baseline's by more than 10% with 95% confidence after 4 looks",
            PATIENCE,
        )
        .await;
    assert!(
        why.contains("canary 4% of 1200 requests, baseline 1% of 1200"),
        "{why}"
    );
    let charts = browser.count("#run-checkout-7c9d5f6b8-3-2 svg.chart").await;
    assert!(charts > 0, "the failed metric is not drawn");
    browser
        .script(
            "document.getElementById('run-checkout-7c9d5f6b8-3-2').scrollIntoView(); return null",
        )
        .await;
    browser.screenshot(&screenshot("aborted-rollout.png")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_actions_on_abort_from_the_page_aborts_the_rollout() {
    let server = serve_fixture(CrdSet::Argo).await;
    let dashboard = Dashboard::start(&server, &["--actions"]);
    let browser = Browser::start().await;
    browser
        .open(&format!("{}/rollouts/{NAMESPACE}/{NAME}", dashboard.url))
        .await;
    assert_eq!(
        browser.texts("button[data-action]").await,
        ["promote", "abort", "retry", "pause"]
    );
    assert!(!aborted(&server));
    browser.click("button[data-action$=\"/abort\"]").await;
    browser.accept_dialog().await;
    browser
        .wait_for_text("#action-result", "abort: done", PATIENCE)
        .await;
    assert!(aborted(&server), "status.abort was not set");
    browser.screenshot(&screenshot("aborted.png")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_actions_off_a_forged_abort_is_refused() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    let dashboard = Dashboard::start(&server, &[]);
    let answer = reqwest::Client::new()
        .post(format!(
            "{}/rollouts/{NAMESPACE}/{NAME}/abort",
            dashboard.url
        ))
        .header("x-canaryd-action", "1")
        .send()
        .await
        .expect("an answer");
    assert_eq!(answer.status(), reqwest::StatusCode::FORBIDDEN);
    assert!(!aborted(&server), "status.abort was set");
}

/// `canaryd run --dashboard-addr` (the daemon, without --rollouts or leader election) serves the same list, and
/// refuses an action without --dashboard-actions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_serves_the_pages_read_only_behind_dashboard_addr() {
    let server = serve_fixture(CrdSet::Argo).await;
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port");
    let log = tempfile::NamedTempFile::new().expect("a log file");
    let args = ["--dashboard-addr".to_string(), addr.to_string()];
    let (daemon, _) = child_daemon::spawn(CANARYD, &server, &args, &log);
    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + PATIENCE;
    let page = loop {
        match http.get(format!("http://{addr}/")).send().await {
            Ok(answer) if answer.status().is_success() => {
                break answer.text().await.expect("the page");
            }
            _ if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("the daemon's dashboard did not answer: {other:?}"),
        }
    };
    assert!(
        page.contains(&format!("data-rollout=\"{NAMESPACE}/{NAME}\"")),
        "{page}"
    );
    let action = http
        .post(format!("http://{addr}/rollouts/{NAMESPACE}/{NAME}/abort"))
        .header("x-canaryd-action", "1")
        .send()
        .await
        .expect("an answer");
    assert_eq!(action.status(), reqwest::StatusCode::FORBIDDEN);
    assert!(!aborted(&server), "status.abort was set");
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_actions_on_a_cross_site_abort_is_refused() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    let dashboard = Dashboard::start(&server, &["--actions"]);
    let url = format!("{}/rollouts/{NAMESPACE}/{NAME}/abort", dashboard.url);
    let http = reqwest::Client::new();
    let without_header = http.post(&url).send().await.expect("an answer");
    assert_eq!(without_header.status(), reqwest::StatusCode::FORBIDDEN);
    let other_origin = http
        .post(&url)
        .header("x-canaryd-action", "1")
        .header("origin", "http://evil.example")
        .send()
        .await
        .expect("an answer");
    assert_eq!(other_origin.status(), reqwest::StatusCode::FORBIDDEN);
    assert!(!aborted(&server), "status.abort was set");
}
