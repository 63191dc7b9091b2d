//! `canaryd run` as a process: the flags' rules (`--check-config`, checked by the binary itself without
//! starting the daemon) and its logs.

#![allow(clippy::disallowed_methods)] // Not the Clock: the fixtures wait for real servers on real time.

use std::process::Stdio;
use std::time::Duration;

use crate::CANARYD;
use canaryd_testkit::fake_apiserver;
use canaryd_testkit::harness;
use serde_json::{Value, json};

/// Exit code and stderr of `canaryd run --check-config ARGS`.
fn check(args: &[&str]) -> (Option<i32>, String) {
    let ran = CANARYD.run(&[&["run", "--check-config"], args].concat());
    (ran.code, ran.stderr)
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
        stderr.contains("--prometheus-share-window (0.5s) must be at least 1s"),
        "{stderr}"
    );
}

#[test]
fn dashboard_actions_without_a_dashboard_address_are_refused() {
    let (code, stderr) = check(&["--dashboard-actions", "true"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--dashboard-addr"), "{stderr}");
    let both = [
        "--dashboard-addr",
        "0.0.0.0:3100",
        "--dashboard-actions",
        "true",
    ];
    assert_eq!(check(&both).0, Some(0));
}

/// Argo's flags for Traefik v2, as its docs give them, are accepted; a group or version no CRD could declare
/// is refused naming the flag, before the daemon starts.
#[test]
fn traefik_api_flags_take_argos_values_and_refuse_a_bad_one_naming_it() {
    let v2 = [
        "--traefik-api-group=traefik.containo.us",
        "--traefik-api-version=traefik.containo.us/v1alpha1",
    ];
    assert_eq!(check(&v2).0, Some(0));
    assert_eq!(check(&["--traefik-api-version=v1alpha1"]).0, Some(0));
    for (flag, value) in [
        ("--traefik-api-group", "traefik"),
        ("--traefik-api-group", ""),
        ("--traefik-api-group", "traefik.containo.us/v1alpha1"),
        ("--traefik-api-version", "traefik.containo.us/"),
        ("--traefik-api-version", "traefik.containo.us/V1alpha1"),
    ] {
        let (code, stderr) = check(&[&format!("{flag}={value}")]);
        assert_eq!(code, Some(2), "{flag}={value}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid value '{value}' for '{flag} "))
                && stderr.contains("is not an API"),
            "{stderr}"
        );
    }
}

#[test]
fn a_renew_deadline_not_shorter_than_the_lease_is_refused() {
    let (code, stderr) = check(&["--lease-duration", "10s", "--renew-deadline", "10s"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--renew-deadline"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_have_one_line_per_measurement_with_run_metric_value_and_phase() {
    // The binary where Argo Rollouts' CRDs are installed (the daemon tests run with both sets).
    let (server, client, prom) =
        harness::cluster(fake_apiserver::CrdSet::Argo, harness::Answer::Scalar(0.97)).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("stderr.log");
    let mut daemon = CANARYD
        .command()
        .args([
            "run",
            "--leader-elect",
            "false",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .args(["--log-format", "json", "--log-level", "canaryd=info,warn"])
        .env("KUBECONFIG", server.kubeconfig_path())
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .expect("canaryd run starts");
    harness::create(
        &client,
        &harness::run(
            "logged",
            &prom.uri(),
            json!({"interval": "1s", "count": 2, "successCondition": "result >= 0.95"}),
        ),
    )
    .await;
    let finished = tokio::time::timeout(
        Duration::from_secs(30),
        harness::finished(&server, "logged", Duration::from_secs(30)),
    )
    .await;
    // The daemon logs the completion after the status write the test saw: wait for the line, not the write.
    let logged = tokio::time::timeout(Duration::from_secs(10), async {
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("AnalysisRun completed")
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let _ = daemon.kill();
    let _ = daemon.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.is_ok(), "no completion line:\n{text}");
    assert!(
        finished.is_ok(),
        "the run did not finish; the daemon said:\n{text}"
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
        .collect();
    let measured: Vec<&Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "Measured")
        .collect();
    assert_eq!(measured.len(), 2, "{text}");
    for line in measured {
        let fields = &line["fields"];
        assert_eq!(fields["run"], "default/logged", "{line}");
        assert_eq!(fields["metric"], "rate", "{line}");
        assert_eq!(fields["phase"], "Successful", "{line}");
        assert_eq!(fields["value"], "0.97", "{line}");
        assert_eq!(line["level"], "INFO", "{line}");
    }
    // The run's own message is a field of its own: a second `message` would hide the event's.
    let completed = lines
        .iter()
        .find(|l| l["fields"]["message"] == "AnalysisRun completed")
        .unwrap_or_else(|| panic!("no completion line:\n{text}"));
    assert_eq!(
        (
            &completed["fields"]["phase"],
            &completed["fields"]["reason"]
        ),
        (&json!("Successful"), &json!("")),
        "{completed}"
    );
}
