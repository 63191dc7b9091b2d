//! `canaryd dashboard [--addr 127.0.0.1:3100] [--actions]`: the dashboard on a workstation, reading (and, with
//! `--actions`, acting) through the kubeconfig as `canaryd get` and `canaryd abort` do. Exit codes: 4 when there
//! is no cluster or the address cannot be listened on; it serves until Ctrl-C, then exits 0.

use std::net::SocketAddr;

use super::Exit;
use crate::dashboard::{self, Settings};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to serve the pages. Anyone who can reach it sees what the kubeconfig's identity may read: keep it
    /// on the loopback address unless something that authenticates stands in front.
    #[arg(long, default_value = "127.0.0.1:3100")]
    pub addr: SocketAddr,
    /// Show the promote, abort, retry and pause buttons and make their requests as the kubeconfig's identity;
    /// without it the pages are read-only and every action is refused.
    #[arg(long)]
    pub actions: bool,
}

pub fn run(args: Args) -> Exit {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("canaryd dashboard: cannot start the runtime: {e}");
            return Exit::Error;
        }
    };
    runtime.block_on(async {
        let client = match super::cluster::connect().await {
            Ok(client) => client,
            Err(e) => {
                eprintln!("canaryd dashboard: {e}");
                return Exit::Error;
            }
        };
        let listener = match tokio::net::TcpListener::bind(args.addr).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("canaryd dashboard: cannot listen on {}: {e}", args.addr);
                return Exit::Error;
            }
        };
        let shown = listener.local_addr().unwrap_or(args.addr);
        let mode = if args.actions {
            "actions on"
        } else {
            "read-only"
        };
        eprintln!("canaryd dashboard: serving http://{shown}/ ({mode}); Ctrl-C stops it");
        let settings = Settings {
            actions: args.actions,
        };
        tokio::select! {
            () = dashboard::serve(listener, client, settings) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Exit::Ok
    })
}
