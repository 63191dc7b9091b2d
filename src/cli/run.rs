//! `canaryd run`: the in-cluster daemon's flags, and starting it (`controller`). `--check-config` parses and
//! checks them and exits, so the Helm chart's rendered args are tested against the binary itself.

use std::net::SocketAddr;
use std::time::Duration;

use super::Exit;
use crate::controller::{Clients, Config, Daemon};
use crate::engine::routing::traefik::TraefikApi;
use crate::k8s::lease::LeaseConfig;
use crate::routers::RouterApis;

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
    /// How long a successful Prometheus answer also serves later measurements of the identical query (other
    /// runs' included): 1s shares only between measurements due in the same second; 10s lets one query per
    /// 10 s serve every run asking it, each answer then being up to 9 s older than its measurement.
    #[arg(long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    pub prometheus_share_window: Duration,
    /// Most Rollout reconciles in flight at once (Argo Rollouts' flag of the same name; its default is 10,
    /// for workers that read an in-memory cache, where canaryd's read the API server). The earliest due go
    /// first; unbounded, thousands of Rollouts stepping together each waited behind all the others' reads.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub rollout_threads: u32,
    /// Watch Ingresses from the start (in the namespaces watched), as Argo's ingress controller does, so an ALB
    /// Ingress whose managed annotation names a Rollout deleted while canaryd was not running is released at once;
    /// without it, an Ingress is watched in a namespace from the first time a Rollout there reads one. Needs
    /// get/list/watch/update on Ingresses (the chart sets it with `rbac.routers.alb`).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub watch_alb_ingresses: bool,
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
    /// Also progress Rollouts: the Rollouts this process owns (see --instance-id) get their ReplicaSets,
    /// Services, steps, AnalysisRuns and status from canaryd. Off by default, so a canaryd that shares a
    /// cluster with Argo Rollouts never acts on a Rollout unless told to.
    #[arg(long, env = "CANARYD_ROLLOUTS", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub rollouts: bool,
    /// Where `argo-rollouts-notification-configmap` and `argo-rollouts-notification-secret` are read: the
    /// pod's namespace (POD_NAMESPACE) by default.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "default",
        value_name = "NAMESPACE"
    )]
    pub notifications_namespace: String,
    /// Send Argo Rollouts' notifications to the subscribers of the Events canaryd records; false sends none.
    #[arg(long, env = "CANARYD_NOTIFICATIONS", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub notifications: bool,
    /// The TrafficSplit API version SMI's router writes (split.smi-spec.io): v1alpha1, v1alpha2 or v1alpha3,
    /// as the cluster's TrafficSplit CRD serves. Argo Rollouts' flag of the same name, with its default.
    #[arg(long, default_value = "v1alpha1", value_name = "VERSION")]
    pub traffic_split_api_version: crate::engine::routing::smi::SmiApiVersion,
    /// The API group of Traefik's TraefikService: traefik.io (Traefik v3) or traefik.containo.us (Traefik v2).
    /// Argo Rollouts' flag of the same name, with its default.
    #[arg(long, default_value = TraefikApi::DEFAULT_GROUP, value_parser = TraefikApi::group, value_name = "GROUP")]
    pub traefik_api_group: String,
    /// Its version, GROUP/VERSION or VERSION, as Argo Rollouts' flag of the same name takes it: only the part
    /// after the `/` is used (traefik.containo.us/v1alpha1 for Traefik v2).
    #[arg(long, default_value = TraefikApi::DEFAULT_VERSION, value_parser = TraefikApi::version, value_name = "VERSION")]
    pub traefik_api_version: String,
    /// Also read those two objects in the namespace of the Rollout or AnalysisRun an Event is about, and send
    /// with that configuration too (Argo's self-service notifications); needs reading them cluster-wide. Alone,
    /// as Argo's controller takes it, the flag is true.
    #[arg(long, env = "CANARYD_SELF_SERVICE_NOTIFICATION_ENABLED", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub self_service_notification_enabled: bool,
    /// Also serve the dashboard's pages here (e.g. 0.0.0.0:3100), read through the daemon's service account;
    /// off by default. Put something that authenticates in front before exposing it beyond port-forwarding.
    #[arg(long, env = "CANARYD_DASHBOARD_ADDR", value_name = "ADDR")]
    pub dashboard_addr: Option<SocketAddr>,
    /// Let the dashboard's buttons promote, abort, retry and pause Rollouts as the daemon's service account
    /// (which then needs `patch` on rollouts and rollouts/status); read-only without it.
    #[arg(long, env = "CANARYD_DASHBOARD_ACTIONS", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL", requires = "dashboard_addr")]
    pub dashboard_actions: bool,
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
        if self.prometheus_share_window < Duration::from_secs(1) {
            return Err(format!(
                "--prometheus-share-window ({}s) must be at least 1s: answers are always shared within a second",
                self.prometheus_share_window.as_secs_f64()
            ));
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
        say!("canaryd run: configuration is valid");
        return Exit::Ok;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("canaryd run: cannot start the runtime: {e}");
            return Exit::Error;
        }
    };
    runtime.block_on(daemon(args))
}

/// The pod name (downward API `POD_NAME`), else the hostname: the base of this process's Lease identity.
fn identity_base() -> String {
    ["POD_NAME", "HOSTNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .unwrap_or_else(|| "canaryd".to_string())
}

impl Args {
    /// The daemon's configuration from the flags (after [`Args::check`]).
    pub fn config(&self, identity: String) -> Config {
        Config {
            namespaces: self.namespaces.clone(),
            instance_id: self.instance_id.clone(),
            prometheus: self
                .prometheus
                .clone()
                .or_else(crate::providers::default_address_from_env),
            prometheus_max_concurrency: self.prometheus_max_concurrency,
            prometheus_share_window: self.prometheus_share_window,
            metrics_addr: self.metrics_addr,
            leader_election: self.leader_elect.then(|| LeaseConfig {
                name: self.lease_name.clone(),
                namespace: self.lease_namespace.clone(),
                identity: identity.clone(),
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            }),
            identity,
            rollouts: self.rollouts,
            notifications_namespace: self
                .notifications
                .then(|| self.notifications_namespace.clone()),
            routers: RouterApis {
                smi: self.traffic_split_api_version,
                traefik: TraefikApi {
                    group: self.traefik_api_group.clone(),
                    version: self.traefik_api_version.clone(),
                },
            },
            self_service_notifications: self.self_service_notification_enabled,
            rollout_threads: self.rollout_threads as usize,
            watch_alb_ingresses: self.watch_alb_ingresses,
        }
    }
}

async fn daemon(args: Args) -> Exit {
    // In the cluster: the service account; outside: the kubeconfig (KUBECONFIG or ~/.kube/config).
    let kube_config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig);
    let clients = match kube_config.and_then(Clients::new) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("canaryd run: cannot configure a Kubernetes client: {e}");
            return Exit::Error;
        }
    };
    let dashboard = match args.dashboard_addr {
        None => None,
        Some(addr) => match dashboard(addr, &clients.api, args.dashboard_actions).await {
            Ok(server) => Some(server),
            Err(message) => {
                eprintln!("canaryd run: {message}");
                return Exit::Error;
            }
        },
    };
    let config = args.config(crate::k8s::lease::identity(&identity_base()));
    let daemon = match Daemon::bind(clients, config).await {
        Ok(d) => d,
        Err(e) => {
            eprintln!("canaryd run: {e}");
            return Exit::Error;
        }
    };
    tracing::info!(
        metrics = ?daemon.metrics_addr(),
        namespaces = ?args.namespaces,
        instance_id = ?args.instance_id,
        leader_elect = args.leader_elect,
        "canaryd run started"
    );
    daemon.run(termination()).await;
    if let Some(server) = dashboard {
        server.abort();
    }
    tracing::info!("canaryd run stopped");
    Exit::Ok
}

/// The dashboard served on `addr` beside the daemon, through its client (`--dashboard-addr`).
async fn dashboard(
    addr: SocketAddr,
    client: &kube::Client,
    actions: bool,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} for the dashboard: {e}"))?;
    let settings = crate::dashboard::Settings { actions };
    tracing::info!(%addr, actions, "dashboard served");
    Ok(tokio::spawn(crate::dashboard::serve(
        listener,
        client.clone(),
        settings,
    )))
}

/// SIGTERM (the kubelet stopping the pod) or Ctrl-C.
async fn termination() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let sigterm = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = sigterm => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
