//! `tessera run`: connect, serve metrics and health, win the leader lease, run controllers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_lease_manager::LeaseManagerBuilder;

use crate::controllers::{
    Context, OperatorConfig, Renderer, kubeconfig, moduleset, plugin, runtime,
};
use crate::crd::Plugin;
use crate::metrics::{Health, Metrics, serve};

/// Leader election on a `coordination.k8s.io/v1` Lease.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    pub lease_name: String,
    /// Namespace of the Lease (defaults to the watched namespace, else `default`).
    pub namespace: String,
    /// Seconds a holder keeps the lease without renewing it.
    pub duration: u64,
    /// This process' identity in the lease.
    pub identity: String,
}

/// Everything `tessera run` needs.
pub struct OperatorOptions {
    /// Control-plane kubeconfig (`None`: in-cluster or `$KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
    /// Gardener kubeconfig (`None`: the control plane is also the Gardener API).
    pub gardener_kubeconfig: Option<PathBuf>,
    pub metrics_addr: SocketAddr,
    pub leader_election: Option<LeaderElection>,
    pub config: OperatorConfig,
    pub renderer: Renderer,
    /// Pulls plugins for `Plugin` resources (`None`: registry plugins are not used).
    pub fetcher: Option<Arc<crate::plugins::Fetcher>>,
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("Kubernetes client: {0}")]
    Kube(#[from] kube::Error),
    #[error("metrics endpoint {addr}: {source}")]
    Metrics {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("leader election: {0}")]
    Lease(String),
    #[error("lost the leader lease; exiting so a fresh process can stand by")]
    LostLease,
}

/// Build a client from a kubeconfig file, or from the environment.
pub async fn client(path: Option<&PathBuf>) -> Result<Client, OperatorError> {
    match path {
        None => Ok(Client::try_default().await?),
        Some(path) => {
            let fail = |message: String| OperatorError::Kubeconfig {
                path: path.display().to_string(),
                message,
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
            let config =
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| fail(e.to_string()))?;
            Client::try_from(config).map_err(|e| fail(e.to_string()))
        }
    }
}

/// Run until a shutdown signal (or the loss of the lease).
pub async fn run(options: OperatorOptions) -> Result<(), OperatorError> {
    let control = client(options.kubeconfig.as_ref()).await?;
    let gardener = match &options.gardener_kubeconfig {
        Some(path) => client(Some(path)).await?,
        None => control.clone(),
    };
    let version = control.apiserver_version().await?;
    tracing::info!(server = %version.git_version, "connected to the control plane");

    let metrics = Metrics::new();
    let health = Arc::new(Health::default());
    let bound = serve(options.metrics_addr, metrics.clone(), health.clone())
        .await
        .map_err(|source| OperatorError::Metrics {
            addr: options.metrics_addr,
            source,
        })?;
    // Tests and the demo read the port from here when they pass port 0.
    tracing::info!(addr = %bound, "serving /metrics, /healthz, /readyz");
    health.set_ready(true);

    let identity = options
        .leader_election
        .as_ref()
        .map(|l| l.identity.clone())
        .unwrap_or_else(default_identity);
    let ctx = Context::new(
        control.clone(),
        gardener,
        options.renderer,
        options.config,
        metrics.clone(),
        identity,
        options.fetcher,
    );

    let mut lease_rx = None;
    if let Some(election) = &options.leader_election {
        let manager = LeaseManagerBuilder::new(control.clone(), &election.lease_name)
            .with_namespace(&election.namespace)
            .with_identity(&election.identity)
            .with_duration(election.duration)
            .with_grace(election.duration.div_ceil(3).max(1))
            .with_field_manager("tessera")
            .build()
            .await
            .map_err(|e| OperatorError::Lease(e.to_string()))?;
        let (mut rx, _task) = manager.watch().await;
        tracing::info!(identity = %election.identity, lease = %election.lease_name, "waiting for the leader lease");
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                return Err(OperatorError::Lease("lease task ended".into()));
            }
        }
        tracing::info!(identity = %election.identity, "became leader");
        lease_rx = Some(rx);
    }
    metrics.leader.set(1);

    match kubeconfig::remove_orphaned_secrets(&control, ctx.config.namespace.as_deref()).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(removed = n, "removed orphaned kubeconfig Secrets"),
        Err(e) => tracing::warn!(error = %e, "could not sweep orphaned kubeconfig Secrets"),
    }

    if ctx.fetcher.is_some() {
        let mut params = kube::api::ListParams::default();
        if let Some(selector) = &ctx.config.plugin_selector {
            params = params.labels(selector);
        }
        match kube::Api::<Plugin>::all(control.clone())
            .list_metadata(&params)
            .await
        {
            Ok(plugins) => ctx
                .initial_sync
                .expect(plugins.items.into_iter().filter_map(|p| p.metadata.name)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot list Plugins (is the Plugin CRD installed?)");
                ctx.initial_sync.expect([]);
            }
        }
    }
    let controllers = async {
        let plugins = async {
            if ctx.fetcher.is_some() {
                plugin::run(ctx.clone()).await;
            }
        };
        tokio::join!(
            runtime::run(ctx.clone()),
            kubeconfig::run(ctx.clone()),
            plugins,
            moduleset::run(ctx.clone())
        );
    };
    match lease_rx {
        None => {
            controllers.await;
            Ok(())
        }
        Some(mut rx) => {
            tokio::select! {
                _ = controllers => Ok(()),
                _ = async {
                    loop {
                        if rx.changed().await.is_err() || !*rx.borrow() {
                            break;
                        }
                    }
                } => {
                    metrics.leader.set(0);
                    Err(OperatorError::LostLease)
                }
            }
        }
    }
}

/// `<hostname>-<pid>`: unique per process, readable in the Lease.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "tessera".into());
    format!("{host}-{}", std::process::id())
}
