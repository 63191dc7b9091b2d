//! The engine is pure by construction: its dependency tree, as Cargo resolves it, holds no runtime, client or
//! socket crate, so no code in it can reach one. Asked of Cargo itself (`cargo tree`), not by reading sources.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)] // Not engine code: this test asks Cargo.

use std::process::Command;

/// Crates whose presence would let the engine do I/O or depend on a runtime: tokio and its relatives, kube's
/// client and runtime (kube-core's client-less types are allowed), HTTP clients and servers, sockets.
const FORBIDDEN: [&str; 12] = [
    "tokio",
    "kube",
    "kube-client",
    "kube-runtime",
    "reqwest",
    "hyper",
    "hyper-util",
    "tower",
    "mio",
    "socket2",
    "async-std",
    "smol",
];

#[test]
fn the_engine_depends_on_no_runtime_client_or_socket_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "--locked", "-p", "canaryd-engine"])
        .args([
            "--edges",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).expect("cargo tree prints UTF-8");
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(
        names.contains(&"canaryd-engine") && names.contains(&"serde"),
        "cargo tree listed too little to judge:\n{tree}"
    );
    let found: Vec<&&str> = names.iter().filter(|n| FORBIDDEN.contains(n)).collect();
    assert!(
        found.is_empty(),
        "the engine's dependency tree holds {found:?}; it must stay free of runtimes, clients and sockets:\n{tree}"
    );
}
