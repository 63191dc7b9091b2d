//! `canaryd get rollout --watch`: a change made to the Rollout in the fake API server shows up, through a pipe
//! (one snapshot per change after a `---` line) and through a real terminal (tmux: redrawn in place, and
//! Ctrl-C leaves the screen as it was before the watch, the command ending with exit code 0).

#![allow(clippy::disallowed_methods)] // Not the Clock: the child process and tmux run on real time.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use canaryd::api::Rollout;
use canaryd_testkit::fake_apiserver::{CrdSet, FakeApiServer, RequestPattern};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::CANARYD;
use crate::get_rollout::get;
use canaryd_testkit::rollout::checkout::{
    NAME, NAMESPACE, advanced_rollout_object, from, serve_fixture,
};

/// How long a change may take to show.
const PATIENCE: Duration = Duration::from_secs(20);

/// The fixture's Rollout moved on to its third step (setWeight: 50), as its controller would write it.
fn advance(server: &FakeApiServer) {
    server.put::<Rollout>(&from(advanced_rollout_object()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_each_change_prints_a_snapshot() {
    let server = serve_fixture(CrdSet::Argo).await;
    let home = tempfile::tempdir().expect("a home");
    let mut child = CANARYD
        .command()
        .args(["get", "rollout", NAME, "-n", NAMESPACE, "--watch"])
        .env("KUBECONFIG", server.kubeconfig_path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", home.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the canaryd binary runs");
    let stdout = child.stdout.take().expect("its stdout");
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let first = lines_until(&received, |l| l.contains("delay:passed"));
    assert!(
        first.iter().any(|l| l == "  Step:          1/4 (pause)"),
        "{first:#?}"
    );
    advance(&server);
    let second = lines_until(&received, |l| l.contains("delay:passed"));
    assert_eq!(
        second.first().map(String::as_str),
        Some("---"),
        "{second:#?}"
    );
    assert!(
        second
            .iter()
            .any(|l| l == "  Step:          2/4 (setWeight: 50)"),
        "{second:#?}"
    );
    assert!(
        second.iter().any(|l| l == "Status:          ◌ Progressing"),
        "{second:#?}"
    );
    crash_the_canary_pod(&server);
    let third = lines_until(&received, |l| l.contains("delay:passed"));
    let _ = child.kill();
    let _ = child.wait();
    let pod = third
        .iter()
        .find(|l| l.contains("checkout-7c9d5f6b8-x7k2p"));
    let pod = pod.unwrap_or_else(|| panic!("{third:#?}"));
    assert!(
        pod.contains("✖ CrashLoopBackOff") && pod.ends_with("ready:0/1,restarts:3"),
        "{pod}"
    );
}

/// The canary's pod, as its kubelet would report it once its container crash-loops.
fn crash_the_canary_pod(server: &FakeApiServer) {
    let name = "checkout-7c9d5f6b8-x7k2p";
    let mut pod = server
        .get_json::<Pod>(NAMESPACE, name)
        .expect("the canary's pod");
    pod["status"]["containerStatuses"][0] = json!({
        "name": "web", "image": "shop/checkout:1.5.0", "imageID": "", "ready": false, "restartCount": 3,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
    });
    server.put::<Pod>(&from(pod));
}

/// The lines received until one for which `last` holds, that one included.
fn lines_until(received: &mpsc::Receiver<String>, last: impl Fn(&str) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match received.recv_timeout(left) {
            Ok(line) => {
                let done = last(&line);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(_) => break,
        }
    }
    panic!(
        "no such line within {PATIENCE:?}; received:\n{}",
        seen.join("\n")
    )
}

/// A tmux server of this test's own (its own socket), with one pane running a plain shell (prompt `$ `, the
/// binary as `$CANARYD`); killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(server: &FakeApiServer, home: &std::path::Path) -> Tmux {
        let version = Command::new("tmux").arg("-V").output();
        assert!(
            version.is_ok_and(|v| v.status.success()),
            "tmux is needed for the --watch terminal test: install it with `apt-get install -y tmux` \
             (tests/run.sh does)"
        );
        let tmux = Tmux {
            socket: format!("canaryd-get-watch-{}", std::process::id()),
        };
        let kubeconfig = format!("KUBECONFIG={}", server.kubeconfig_path().display());
        let home = format!("HOME={}", home.display());
        // tmux sets the pane's PATH itself: the binary is named by a variable of its own.
        let canaryd = format!("CANARYD={}", CANARYD.executable().display());
        tmux.run(&[
            "new-session",
            "-d",
            "-x",
            "160",
            "-y",
            "60",
            "-e",
            &kubeconfig,
            "-e",
            &home,
            "-e",
            &canaryd,
            "-e",
            "PS1=$ ",
            "bash",
            "--norc",
            "--noprofile",
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-u", "-f", "/dev/null", "-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn type_line(&self, line: &str) {
        self.run(&["send-keys", "-l", line]);
        self.run(&["send-keys", "Enter"]);
    }

    /// The screen once `shows` holds for it.
    fn screen_when(&self, shows: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.run(&["capture-pane", "-p"]);
            if shows(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "not shown within {PATIENCE:?}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_the_view_is_redrawn_in_place_and_ctrl_c_leaves_a_clean_screen() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    let home = tempfile::tempdir().expect("a home");
    let tmux = Tmux::start(&server, home.path());
    // Typed before the shell prompts, a line would be echoed twice: once by the terminal, once by the shell.
    tmux.screen_when(|s| s.lines().next() == Some("$"));
    tmux.type_line(&format!(
        "\"$CANARYD\" get rollout {NAME} -n {NAMESPACE} --watch"
    ));
    let screen = tmux.screen_when(|s| s.contains("Step:          1/4 (pause)"));
    assert!(
        screen.starts_with("Name:            checkout\n"),
        "drawn from the top:\n{screen}"
    );
    assert!(
        screen.contains("│  └──α checkout-7c9d5f6b8-3-1"),
        "{screen}"
    );
    let before = tmux.run(&["display-message", "-p", "#{history_size}"]);

    advance(&server);
    let screen = tmux.screen_when(|s| s.contains("Step:          2/4 (setWeight: 50)"));
    assert!(
        screen.starts_with("Name:            checkout\n"),
        "redrawn in place:\n{screen}"
    );
    assert!(
        !screen.contains("1/4 (pause)"),
        "the old view is gone:\n{screen}"
    );
    let after = tmux.run(&["display-message", "-p", "#{history_size}"]);
    assert_eq!(before, after, "a redraw scrolls nothing into the history");

    tmux.run(&["send-keys", "C-c"]);
    // As at the start, the next line is typed only once the shell prompts again.
    let screen = tmux.screen_when(|s| {
        !s.contains("Name:") && s.lines().rfind(|l| !l.trim().is_empty()) == Some("$")
    });
    assert!(
        !screen.contains("revision:"),
        "the view is left behind:\n{screen}"
    );
    tmux.type_line("echo exit=$?");
    let screen = tmux.screen_when(|s| s.contains("exit=0"));
    let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines,
        [
            "$ \"$CANARYD\" get rollout checkout -n shop --watch",
            "$ echo exit=$?",
            "exit=0",
            "$",
        ],
        "the screen as it was before the watch, then the exit code:\n{screen}"
    );
}

/// A watch the API server refuses before anything is shown ends the command, naming what it could not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_watch_is_named_and_exits_4() {
    let server = serve_fixture(CrdSet::Canaryd).await;
    let list = RequestPattern::new("GET", "/analysisruns");
    server.fail_next(list, 1, 403);
    let ran = get(
        &server,
        &["get", "rollout", NAME, "-n", NAMESPACE, "--watch"],
    )
    .await;
    assert_eq!(ran.code, Some(4), "{ran:?}");
    assert!(ran.stdout.is_empty(), "{ran:?}");
    let refused = "canaryd get: not allowed to read analysisruns of rollout \"checkout\" in namespace \"shop\"";
    // Before it, kube's watcher may have logged the refusal as a warning.
    let said = ran.stderr.lines().last().unwrap_or_default();
    assert!(said.starts_with(refused), "{ran:?}");
}
