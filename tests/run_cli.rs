//! `canaryd run --check-config`: the flags' rules, checked by the binary itself without starting the daemon.

use std::process::Command;

/// Exit code and stderr of `canaryd run --check-config ARGS`.
fn check(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_canaryd"))
        .args(["run", "--check-config"])
        .args(args)
        .output()
        .expect("canaryd runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_share_window_of_whole_seconds_is_accepted() {
    assert_eq!(check(&["--prometheus-share-window", "10s"]).0, Some(0));
    assert_eq!(check(&[]).0, Some(0));
}

#[test]
fn a_share_window_under_a_second_is_refused_naming_the_flag() {
    let (code, stderr) = check(&["--prometheus-share-window", "500ms"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("--prometheus-share-window") && stderr.contains("at least 1s"),
        "{stderr}"
    );
}

#[test]
fn a_renew_deadline_not_shorter_than_the_lease_is_refused() {
    let (code, stderr) = check(&["--lease-duration", "10s", "--renew-deadline", "10s"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--renew-deadline"), "{stderr}");
}
