//! The one launcher of the `canaryd` binary for tests and benches: a command run from the repository root,
//! and its exit code and output. TEST FIXTURE ONLY.

#![allow(dead_code)] // Each test binary uses a different part of it.

use std::process::Command;

/// The `canaryd` binary built for this test run, started in the repository root.
pub fn canaryd() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_canaryd"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// How one run of the binary ended.
#[derive(Debug)]
pub struct Ran {
    /// `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `canaryd ARGS` to the end.
pub fn run(args: &[&str]) -> Ran {
    let out = canaryd()
        .args(args)
        .output()
        .expect("the canaryd binary runs");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `canaryd ARGS`, which must be refused as bad input (exit code 2, nothing on stdout); its stderr.
pub fn refused(args: &[&str]) -> String {
    let ran = run(args);
    assert_eq!(ran.code, Some(2), "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.is_empty(), "{}", ran.stdout);
    ran.stderr
}
