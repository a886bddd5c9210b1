//! A Gardener simulator: a process in front of a real kube-apiserver ("garden") that
//! passes every request through, except what Gardener itself answers:
//!
//! - `POST …/shoots/{name}/adminkubeconfig` returns a kubeconfig for the "runtime" API
//!   server, with a fresh token from a pool each time (so rotations are visible);
//! - `DELETE …/shoots/{name}` is refused without `confirmation.gardener.cloud/deletion`;
//! - a driver watches Shoots and moves `status.lastOperation` the way Gardener does
//!   (Create/Reconcile/Delete: Processing → Succeeded after configurable delays), fails
//!   operations as a script says, honours `gardener.cloud/operation: retry`, and removes
//!   its `gardener` finalizer once a confirmed deletion has run.
//!
//! The host talks to it exactly as to Gardener: through an ordinary kubeconfig.

mod driver;
mod proxy;
mod script;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

pub use script::{Failure, Script, ShootScript};

/// How the simulator is wired.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Where to listen (port 0: any free port).
    pub listen: SocketAddr,
    /// Kubeconfig of the garden API server.
    pub garden_kubeconfig: PathBuf,
    /// `https://…` of the API server Shoots "become".
    pub runtime_server: String,
    /// Tokens valid on the runtime API server, handed out in turn.
    pub runtime_tokens: Vec<String>,
    /// Delays and scripted failures; re-read whenever an operation ends.
    pub script: Option<PathBuf>,
}

/// Requests the simulator saw from clients (the host), for the load benchmark.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub requests: std::sync::atomic::AtomicU64,
    /// POST, PUT, PATCH, DELETE outside coordination.k8s.io (leases renew all the time).
    pub writes: std::sync::atomic::AtomicU64,
    pub lease_requests: std::sync::atomic::AtomicU64,
    pub watches: std::sync::atomic::AtomicU64,
    /// Admin kubeconfigs requested (`POST …/shoots/<name>/adminkubeconfig`).
    pub admin_kubeconfigs: std::sync::atomic::AtomicU64,
    /// Writes per `namespace/<ns>` (`shoot/<name>` for Shoots, whose project namespace all
    /// tests share), admin kubeconfigs and request arrival times per `shoot/<name>`, so that
    /// tests running side by side each count their own.
    pub by_object: std::sync::Mutex<std::collections::BTreeMap<String, serde_json::Value>>,
}

pub(crate) struct Sim {
    pub client: kube::Client,
    pub stats: Stats,
    pub config: SimConfig,
    pub next_token: AtomicUsize,
    pub consumed: std::sync::Mutex<std::collections::HashMap<(String, String), usize>>,
    /// Simulated outages: requests whose URI contains the key are answered with the HTTP
    /// status — Shoot API requests only when the flag is set (`/_sim/outage/<needle>/<code>`),
    /// any request otherwise (`/_sim/outage-any/<needle>/<code>`); code 999 holds them until
    /// the outage ends.
    pub outages: std::sync::Mutex<std::collections::BTreeMap<String, (u16, bool)>>,
}

impl Sim {
    pub fn script(&self) -> Script {
        self.config
            .script
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }
}

/// Start the proxy and the driver; returns the address the proxy listens on.
pub async fn start(config: SimConfig) -> anyhow::Result<SocketAddr> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&config.garden_kubeconfig)?;
    let mut kc = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    // Watches are streamed through: no client-side read timeout.
    kc.read_timeout = None;
    let client = kube::Client::try_from(kc)?;
    let sim = Arc::new(Sim {
        client,
        config,
        stats: Stats::default(),
        next_token: AtomicUsize::new(0),
        consumed: Default::default(),
        outages: Default::default(),
    });
    let addr = proxy::serve(sim.clone()).await?;
    tokio::spawn(driver::run(sim));
    Ok(addr)
}
