//! The one launcher of the `canaryd` binary for tests and benches: a command run from the repository root,
//! and its exit code and output. Cargo tells only a test or bench target where the binary it built is, and
//! only at that target's compile time (`CARGO_BIN_EXE_canaryd`), so each target makes its launcher once with
//! [`canaryd!`](crate::canaryd!) and every run of the binary goes through it.

use std::process::{Command, Output};

/// The launcher of the `canaryd` binary cargo built for the test or bench target that expands it, e.g.
/// `const CANARYD: Canaryd = canaryd_testkit::canaryd!();` once in a test binary's `main.rs`.
#[macro_export]
macro_rules! canaryd {
    () => {
        $crate::cli::Canaryd::new(env!("CARGO_BIN_EXE_canaryd"))
    };
}

/// Runs the `canaryd` binary at one path, always from the repository root, so that relative paths in its
/// arguments name the repository's files.
#[derive(Clone, Copy, Debug)]
pub struct Canaryd {
    executable: &'static str,
}

impl Canaryd {
    /// The binary at `executable`; [`canaryd!`](crate::canaryd!) gives the one cargo built.
    pub const fn new(executable: &'static str) -> Canaryd {
        Canaryd { executable }
    }

    /// Where the binary is, e.g. to put its folder on a shell's `PATH`.
    pub fn executable(self) -> &'static std::path::Path {
        std::path::Path::new(self.executable)
    }

    /// The binary, started in the repository root.
    pub fn command(self) -> Command {
        let mut command = Command::new(self.executable);
        command.current_dir(crate::repo_root());
        command
    }

    /// Runs `canaryd ARGS` to the end.
    pub fn run(self, args: &[&str]) -> Ran {
        self.command()
            .args(args)
            .output()
            .expect("the canaryd binary runs")
            .into()
    }

    /// Runs `canaryd ARGS` against the cluster `kubeconfig` names, as kubectl would reach it: no in-cluster
    /// settings and a home without `~/.kube`, so nothing else can answer. Off the async runtime's threads.
    pub async fn on_cluster(self, kubeconfig: &std::path::Path, args: &[&str]) -> Ran {
        let home = tempfile::tempdir().expect("a home without ~/.kube");
        let mut command = self.command_on_cluster(kubeconfig, home.path());
        command.args(args);
        tokio::task::spawn_blocking(move || command.output())
            .await
            .expect("joined")
            .expect("the canaryd binary runs")
            .into()
    }

    /// The binary set to reach the cluster `kubeconfig` names and nothing else: no in-cluster settings, and
    /// `home` (which must hold no `.kube`) as its home; for a command that keeps running, such as `dashboard`.
    pub fn command_on_cluster(
        self,
        kubeconfig: &std::path::Path,
        home: &std::path::Path,
    ) -> Command {
        let mut command = self.command();
        command
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env("KUBECONFIG", kubeconfig)
            .env("HOME", home);
        command
    }

    /// Runs `canaryd ARGS`, which must be refused as bad input (exit code 2, nothing on stdout); its stderr.
    pub fn refused(self, args: &[&str]) -> String {
        let ran = self.run(args);
        assert_eq!(ran.code, Some(2), "{}\n{}", ran.stdout, ran.stderr);
        assert!(ran.stdout.is_empty(), "{}", ran.stdout);
        ran.stderr
    }
}

/// How one run of the binary ended.
#[derive(Debug)]
pub struct Ran {
    /// `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Ran {
    fn from(out: Output) -> Ran {
        Ran {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}
