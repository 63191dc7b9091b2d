//! What the benches that run `canaryd run` in a child process share (tests/bench/daemon.rs, rollouts.rs): the
//! daemon started against the fake API server and stopped as Kubernetes stops a pod, its CPU time and peak
//! resident memory read from /proc, the benches' settings read from the environment, percentiles, and what
//! their JSON lines share (the fakes' CPU above which a run is not valid, rounding).
//!
//! `CANARYD_BENCH_WRAP` (opt-in, for profiling) prefixes the daemon's command with a program and its
//! arguments, split on whitespace: `CANARYD_BENCH_WRAP="heaptrack -o /tmp/ht"` or `"perf record -g -o
//! /tmp/perf.data --"`. The daemon's CPU, memory and SIGTERM are then still the daemon's own (the descendant of
//! the wrapper running the canaryd binary), not the wrapper's.
//! BENCH FIXTURE ONLY.

#![allow(clippy::disallowed_methods)] // Not the Clock: a benchmark measures real time.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli::Canaryd;
use crate::fake_apiserver::FakeApiServer;

const STOP_GRACE: Duration = Duration::from_secs(30);

/// The setting `name` from the environment, or `default` when absent or not a number.
pub fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `p` quantile (0..=1) of `sorted` by nearest rank; NaN when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The fakes' CPU (the bench process's), in cores, above which a run measures them rather than the daemon: its
/// figures are then not valid.
pub const FAKES_BOTTLENECK: f64 = 0.5;

/// Prints the bench process's CPU (the fakes') over `elapsed`, flagged when it is over [`FAKES_BOTTLENECK`],
/// and returns it in cores.
pub fn print_fakes_cpu(fakes_cpu: f64, elapsed: std::time::Duration) -> f64 {
    let fake_cores = fakes_cpu / elapsed.as_secs_f64().max(1e-9);
    println!(
        "  fakes' CPU (this process) {fakes_cpu:.1} s ({fake_cores:.2} core): the machine's other load{}",
        if fake_cores > FAKES_BOTTLENECK {
            format!(" -- over {FAKES_BOTTLENECK} core: the run measures the fakes, not valid")
        } else {
            String::new()
        }
    );
    fake_cores
}

/// `x` to two decimals, for a bench's JSON line.
pub fn hundredths(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A `/proc` size such as `78696 kB` ([`DaemonProcess::peak_rss`]), in kB.
pub fn kilobytes(field: &str) -> Option<f64> {
    field.split_whitespace().next()?.parse().ok()
}

/// How long a wrapper ([`WRAP`]) may take to start the daemon, and to end once it has stopped.
const WRAPPER_START: Duration = Duration::from_secs(30);
const WRAPPER_END: Duration = Duration::from_secs(600);

/// The environment variable naming a program to run the daemon under (see the module doc).
pub const WRAP: &str = "CANARYD_BENCH_WRAP";

/// The daemon's process; killed if the bench ends without [`DaemonProcess::stop`] (a panic), so it never
/// outlives the bench.
pub struct DaemonProcess {
    /// What the bench started: the daemon, or the wrapper ([`WRAP`]) running it.
    child: Child,
    /// The daemon's own process id.
    daemon: u32,
}

/// `canaryd run ARGS` (the binary cargo built for the bench) against `server`, without leader election,
/// logging JSON at info to `log`, serving /metrics on a free loopback port, which it returns.
pub fn spawn(
    canaryd: Canaryd,
    server: &FakeApiServer,
    args: &[String],
    log: &tempfile::NamedTempFile,
) -> (DaemonProcess, SocketAddr) {
    let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port");
    let wrap = std::env::var(WRAP).unwrap_or_default();
    let mut wrapper = wrap.split_whitespace();
    let mut command = match wrapper.next() {
        None => canaryd.command(),
        Some(program) => {
            let mut command = Command::new(program);
            command
                .args(wrapper)
                .arg(canaryd.executable())
                .current_dir(crate::repo_root());
            command
        }
    };
    let child = command
        .args(["run", "--leader-elect", "false", "--metrics-addr"])
        .arg(metrics_addr.to_string())
        .args(args)
        .env("KUBECONFIG", server.kubeconfig_path())
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("the daemon's log file"))
        .spawn()
        .expect("canaryd run starts");
    let daemon = if wrap.trim().is_empty() {
        child.id()
    } else {
        started_under(child.id(), canaryd.executable())
    };
    (DaemonProcess { child, daemon }, metrics_addr)
}

/// The process running `executable` among the descendants of `wrapper`, once the wrapper has started it.
fn started_under(wrapper: u32, executable: &std::path::Path) -> u32 {
    let executable = executable.canonicalize().unwrap_or(executable.into());
    let start = Instant::now();
    while start.elapsed() < WRAPPER_START {
        let mut family = vec![wrapper];
        let mut i = 0;
        while let Some(&parent) = family.get(i) {
            family.extend(children(parent));
            i += 1;
        }
        let running = |pid: &u32| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == executable)
        };
        if let Some(pid) = family.into_iter().find(running) {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{WRAP}: no process of {wrapper}'s ran {executable:?} within {WRAPPER_START:?}");
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // The parent is the second field after "pid (comm)"; the command may hold spaces.
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            rest.split_whitespace().nth(1) == Some(pid.to_string().as_str())
        })
        .collect()
}

impl DaemonProcess {
    /// The daemon's own process id (not a wrapper's).
    pub fn id(&self) -> u32 {
        self.daemon
    }

    /// utime + stime so far, in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        cpu_seconds(self.id())
    }

    /// VmHWM: the peak resident memory so far, as /proc prints it (`153544 kB`).
    pub fn peak_rss(&self) -> String {
        proc_field(&format!("/proc/{}/status", self.id()), "VmHWM:")
    }

    /// SIGTERM to the daemon, as Kubernetes stops a pod, then wait for the graceful stop: 30 s at most, as
    /// Kubernetes' default grace period, after which it is killed (and that said). A wrapper ([`WRAP`]) whose
    /// daemon has stopped is given [`WRAPPER_END`] more to finish (a profiler writing its file).
    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.id().to_string()])
            .status();
        let start = Instant::now();
        let wrapped = self.daemon != self.child.id();
        while start.elapsed() < STOP_GRACE + WRAPPER_END {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            let daemon_running =
                !wrapped || std::path::Path::new(&format!("/proc/{}", self.daemon)).exists();
            if start.elapsed() >= STOP_GRACE && daemon_running {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        println!("  the daemon did not stop within {STOP_GRACE:?} of SIGTERM: killed");
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn proc_field(file: &str, key: &str) -> String {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .map(|l| l[key.len()..].trim().to_string())
        .unwrap_or_default()
}

/// utime + stime of process `pid`, in seconds (clock ticks of 100 Hz, Linux' USER_HZ).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat; here indexes 11 and 12 after "pid (comm)".
    (tick(11) + tick(12)) / 100.0
}
