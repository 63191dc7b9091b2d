//! `canaryd run`: the in-cluster daemon's flags. `--check-config` parses and checks them and exits, so the
//! Helm chart's rendered args are tested against the binary itself.

use std::net::SocketAddr;
use std::time::Duration;

use super::Exit;

fn duration(text: &str) -> Result<Duration, String> {
    crate::api::duration::parse_duration(text).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Namespace to watch (repeatable); all namespaces when absent.
    #[arg(long = "namespace", value_name = "NAMESPACE")]
    pub namespaces: Vec<String>,
    /// Own only objects labelled `argo-rollouts.argoproj.io/controller-instance-id: ID`; without it, only
    /// objects that carry no such label (so canaryd can share a cluster with Argo Rollouts).
    #[arg(long, value_name = "ID")]
    pub instance_id: Option<String>,
    /// Default Prometheus address for metrics whose template names none.
    #[arg(long, env = "CANARYD_PROMETHEUS_ADDRESS", value_name = "URL")]
    pub prometheus: Option<String>,
    /// Most queries in flight to one Prometheus address at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub prometheus_max_concurrency: u32,
    /// Where /metrics, /healthz and /readyz are served.
    #[arg(long, default_value = "0.0.0.0:8090")]
    pub metrics_addr: SocketAddr,
    /// Elect a leader through a coordination.k8s.io Lease; only the leader reconciles.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_elect: bool,
    #[arg(long, default_value = "canaryd")]
    pub lease_name: String,
    /// Namespace of the Lease; defaults to the pod's namespace (POD_NAMESPACE).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    #[arg(long, default_value = "15s", value_parser = duration)]
    pub lease_duration: Duration,
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub renew_deadline: Duration,
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub retry_period: Duration,
    /// Check the flags and exit: 0 when they are valid, 2 naming the bad one.
    #[arg(long)]
    pub check_config: bool,
}

impl Args {
    /// Rules between flags that clap cannot express.
    pub fn check(&self) -> Result<(), String> {
        if self.leader_elect && self.renew_deadline >= self.lease_duration {
            return Err(format!(
                "--renew-deadline ({:?}) must be shorter than --lease-duration ({:?})",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.leader_elect && self.retry_period >= self.renew_deadline {
            return Err(format!(
                "--retry-period ({:?}) must be shorter than --renew-deadline ({:?})",
                self.retry_period, self.renew_deadline
            ));
        }
        if let Some(address) = &self.prometheus {
            match url::Url::parse(address) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
                _ => return Err(format!("--prometheus {address:?} is not an http(s) URL")),
            }
        }
        if self.namespaces.iter().any(|n| n.trim().is_empty()) {
            return Err("--namespace must not be empty".to_string());
        }
        Ok(())
    }
}

pub fn run(args: Args) -> Exit {
    if let Err(message) = args.check() {
        eprintln!("canaryd run: {message}");
        return Exit::Usage;
    }
    if args.check_config {
        println!("canaryd run: configuration is valid");
        return Exit::Ok;
    }
    eprintln!(
        "canaryd run: the daemon is not implemented in this build yet; use --check-config to check flags"
    );
    Exit::Error
}
