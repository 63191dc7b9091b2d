//! A backtest or a rehearsal whose Prometheus does not answer, or that names none, is bad input (exit 2,
//! naming the address or the metric) before the first look: never five Error looks and a "roll back" verdict
//! about the network rather than the canary.

use crate::CANARYD;

/// An address on this machine where nothing listens: a port the OS just gave out, closed again.
fn refusing_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

const ANALYZE: [&str; 11] = [
    "analyze",
    "-f",
    "analysis-templates/success-rate.yaml",
    "--arg",
    "service=checkout",
    "--arg",
    "namespace=shop",
    "--from",
    "2026-01-01T00:00:00Z",
    "--to",
    "2026-01-01T00:10:00Z",
];

const REHEARSE: [&str; 7] = [
    "rehearse",
    "-f",
    "examples/rehearse/checkout.yaml",
    "-f",
    "analysis-templates/success-rate.yaml",
    "--from",
    "2026-01-01T00:03:00Z",
];

#[test]
fn a_backtest_against_a_prometheus_that_refuses_connections_is_bad_input() {
    let address = refusing_address();
    let err = CANARYD.refused(&[&ANALYZE[..], &["--prometheus", &address]].concat());
    assert!(
        err.contains(&format!("Prometheus at {address} does not answer")),
        "{err}"
    );
    assert!(err.contains("nothing was measured"), "{err}");
}

#[test]
fn a_backtest_with_no_prometheus_address_at_all_names_the_metric() {
    let err = CANARYD.refused(&ANALYZE);
    assert!(
        err.contains("metric \"success-rate\" names no Prometheus address and none is configured"),
        "{err}"
    );
}

#[test]
fn a_rehearsal_against_a_prometheus_that_refuses_connections_is_bad_input() {
    let address = refusing_address();
    let err = CANARYD.refused(&[&REHEARSE[..], &["--prometheus", &address]].concat());
    assert!(
        err.contains(&format!("Prometheus at {address} does not answer")),
        "{err}"
    );
    let many = [
        &REHEARSE[..],
        &[
            "--prometheus",
            &address,
            "--every",
            "2m",
            "--until",
            "2026-01-01T00:10:00Z",
        ],
    ]
    .concat();
    let err = CANARYD.refused(&many);
    assert!(
        err.contains("nothing was rehearsed"),
        "--every tallies no rollbacks: {err}"
    );
}

/// The Rollout's own value for the address arg is what the run would ask, so it is what is checked.
#[test]
fn a_rehearsal_checks_the_address_the_rollout_passes_to_its_template() {
    let address = refusing_address();
    let dir = tempfile::tempdir().expect("a scratch folder");
    let rollout = std::fs::read_to_string(
        canaryd_testkit::repo_root().join("examples/rehearse/checkout.yaml"),
    )
    .expect("the fixture");
    let service = "          - name: service\n";
    let with_address = rollout.replace(
        service,
        &format!("          - name: prometheus-address\n            value: {address}\n{service}"),
    );
    assert_ne!(
        with_address, rollout,
        "the fixture's analyses pass a service arg"
    );
    let file = dir.path().join("rollout.yaml");
    std::fs::write(&file, with_address).expect("written");
    let file = file.display().to_string();
    let mut args = REHEARSE.to_vec();
    args[2] = &file;
    let err = CANARYD.refused(&args);
    assert!(
        err.contains(&format!("Prometheus at {address} does not answer")),
        "{err}"
    );
}
