//! `tessera run`: connect, serve metrics and health, win the leader lease, run controllers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::config::Kubeconfig;
use kube_lease_manager::{LeaseCreateMode, LeaseManagerBuilder};

use crate::controllers::{
    Clients, Context, Controllers, OperatorConfig, Renderer, access, kubeconfig, moduleset, plugin,
    runtime,
};
use crate::crd::Plugin;
use crate::fence::Fence;
use crate::metrics::{Health, Metrics, serve};

mod sharded;
mod sharder;
mod sharding;
mod shards;
mod stop;
mod trim;
pub use stop::Stop;

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
    /// The installer made the Lease (the chart does): never create it, so that once the
    /// installer removes it, a host shutting down cannot bring it back.
    pub existing: bool,
}

/// Everything `tessera run` needs.
pub struct OperatorOptions {
    /// Control-plane kubeconfig (`None`: in-cluster or `$KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
    /// Gardener kubeconfig (`None`: the control plane is also the Gardener API).
    pub gardener_kubeconfig: Option<PathBuf>,
    /// Requests per second to Gardener, all Runtimes together (`None`: no limit).
    pub gardener_requests_per_second: Option<std::num::NonZeroU32>,
    pub metrics_addr: SocketAddr,
    pub leader_election: Option<LeaderElection>,
    pub config: OperatorConfig,
    pub renderer: Renderer,
    /// Pulls plugins for `Plugin` resources (`None`: registry plugins are not used).
    pub fetcher: Option<Arc<crate::plugins::Fetcher>>,
    /// The stop signal, listened for since the process started.
    pub stop: Stop,
    /// Shard the objects across every replica (needs `leader_election`): each holds a shard
    /// Lease and reconciles the objects labelled for it; the leader assigns them.
    pub sharding: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("Kubernetes client: {}", crate::report::kube_error(.0))]
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

/// Build a client from a kubeconfig file, or from the environment; its writes pass the
/// leader `fence` when one is given.
pub async fn client(
    path: Option<&PathBuf>,
    fence: Option<&Arc<Fence>>,
) -> Result<Client, OperatorError> {
    Ok(client_with_url(path, fence, None).await?.0)
}

/// A client as [`client`] builds it, with a budget of `per_second` requests when given,
/// and the API server URL it talks to (for messages).
async fn client_with_url(
    path: Option<&PathBuf>,
    fence: Option<&Arc<Fence>>,
    per_second: Option<std::num::NonZeroU32>,
) -> Result<(Client, String), OperatorError> {
    let fail = |message: String| OperatorError::Kubeconfig {
        path: path.map_or("(in-cluster or $KUBECONFIG)".into(), |p| {
            p.display().to_string()
        }),
        message,
    };
    let kubeconfig = match path {
        Some(path) => Some(Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?),
        None => None,
    };
    crate::kubeconfig::build_limited_client(kubeconfig, fence, per_second)
        .await
        .map_err(|e| fail(e.to_string()))
}

/// Read the Lease once: while it names this host, hold the fence open until half a lease
/// duration after its last renewal; `Err` when another host holds it. A reading that fails
/// leaves the fence to close by itself.
async fn confirm_lease(
    leases: &Api<Lease>,
    election: &LeaderElection,
    fence: &Fence,
) -> Result<(), OperatorError> {
    let duration = std::time::Duration::from_secs(election.duration);
    let sent = std::time::Instant::now();
    // A read that hangs (its connection gone silent) is given up with its connection, so
    // that the next one, on a new connection, can open the fence again.
    let read = tokio::time::timeout(
        crate::fence::confirm_every(duration),
        leases.get(&election.lease_name),
    )
    .await
    .unwrap_or_else(|_| {
        Err(kube::Error::Service(
            "no answer within a quarter of the lease".into(),
        ))
    });
    match read {
        Ok(lease) => {
            let spec = lease.spec.unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(election.identity.as_str()) {
                return Err(OperatorError::LostLease);
            }
            let age = spec
                .renew_time
                .map(|t| jiff::Timestamp::now().duration_since(t.0).unsigned_abs())
                .unwrap_or(duration);
            if let Some(left) = crate::fence::hold_for(duration).checked_sub(age) {
                fence.hold_until(sent + left);
            }
        }
        // Deleted (an uninstall, or the leader removed a shard Lease it judged dead): the
        // lease manager would wait for it for ever.
        Err(e) if crate::api::is_not_found(&e) => return Err(OperatorError::LostLease),
        Err(e) => {
            tracing::warn!(error = %e, lease = %election.lease_name, "cannot read the leader lease; writes stop when the fence closes")
        }
    }
    Ok(())
}

/// Keep confirming the lease every quarter of its duration; returns when another host
/// holds it.
async fn hold_fence(
    leases: Api<Lease>,
    election: LeaderElection,
    fence: Arc<Fence>,
) -> OperatorError {
    loop {
        if let Err(lost) = confirm_lease(&leases, &election, &fence).await {
            return lost;
        }
        let duration = std::time::Duration::from_secs(election.duration);
        tokio::time::sleep(crate::fence::confirm_every(duration)).await;
    }
}

/// Gardener is shared by every Runtime (and every other user of it): its own client and
/// budget, also when the control plane serves the Shoots.
async fn gardener_client(
    options: &OperatorOptions,
    fence: &Arc<Fence>,
) -> Result<(Client, String), OperatorError> {
    let path = options
        .gardener_kubeconfig
        .as_ref()
        .or(options.kubeconfig.as_ref());
    client_with_url(path, Some(fence), options.gardener_requests_per_second).await
}

/// Run until a shutdown signal (or the loss of the lease). Until it leads the host has
/// nothing to finish, so a stop signal ends it at once (a standby, or a host still
/// connecting, is stopped on every rollout). With sharding, "leading" is holding its shard
/// Lease, and the leader Lease is contended for beside the controllers.
pub async fn run(mut options: OperatorOptions) -> Result<(), OperatorError> {
    let sharding = sharding::shard_mode(&mut options)?;
    let stop = options.stop.clone();
    let kubeconfig = options.kubeconfig.clone();
    let (ctx, lost) = tokio::select! {
        started = connect_and_lead(options) => started?,
        _ = stop.requested() => {
            tracing::info!("stopped before leading: nothing to finish");
            return Ok(());
        }
    };
    ctx.metrics.set_leader(sharding.is_none());
    if let Some(shard) = &sharding {
        shard.adopt(kubeconfig.as_ref()).await;
    }
    let _watchdogs = crate::controllers::watchdogs(&ctx);
    prepare(&ctx, sharding.is_none()).await;
    let controllers = async {
        tokio::select! {
            _ = run_until_stopped(ctx.clone(), &stop) => {}
            never = trim::give_back_forever() => match never {},
        }
    };
    let Some(lost) = lost else {
        controllers.await;
        return Ok(());
    };
    let leading = async {
        match &sharding {
            Some(shard) => shard.lead(&ctx, kubeconfig.as_ref()).await,
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        _ = controllers => Ok(()),
        error = lost => Err(error),
        error = leading => Err(error),
    };
    ctx.metrics.set_leader(false);
    if let (Ok(()), Some(shard)) = (&result, &sharding) {
        shard.release(kubeconfig.as_ref()).await;
    }
    result
}

/// Connect, serve health, and wait for the lease: the controllers' context, and (with
/// leader election) the future that ends when leadership is lost.
async fn connect_and_lead(
    options: OperatorOptions,
) -> Result<
    (
        Arc<Context>,
        Option<impl std::future::Future<Output = OperatorError>>,
    ),
    OperatorError,
> {
    // Every client the host writes with passes the fence; the lease's own does not.
    let fence = match options.leader_election {
        Some(_) => Fence::closed(),
        None => Fence::open(),
    };
    let lease_client = client(options.kubeconfig.as_ref(), None).await?;
    let (control, _) = client_with_url(options.kubeconfig.as_ref(), Some(&fence), None).await?;
    let (gardener, gardener_url) = gardener_client(&options, &fence).await?;
    let version = control.apiserver_version().await?;
    tracing::info!(server = %version.git_version, "connected to the control plane");
    let metrics = Metrics::new();
    serve_health(options.metrics_addr, &metrics).await?;
    let identity = options
        .leader_election
        .as_ref()
        .map(|l| l.identity.clone())
        .unwrap_or_else(default_identity);
    let clients = Clients {
        control,
        gardener,
        gardener_url,
        fence: fence.clone(),
        watchdog: client(options.kubeconfig.as_ref(), None).await?,
    };
    let ctx = Context::new(
        clients,
        options.renderer,
        options.config,
        metrics,
        identity,
        options.fetcher,
    );
    let lost = match options.leader_election {
        Some(election) => {
            let role = match options.sharding {
                true => Role::Shard,
                false => Role::Leader,
            };
            Some(lead(lease_client, election, fence, role).await?)
        }
        None => None,
    };
    Ok((ctx, lost))
}

/// How long the controllers may finish the reconciles they run after SIGTERM or SIGINT. A
/// pass that hangs (its connection gone silent, which is why the kubelet stops the host)
/// must not hold the process until the kubelet's SIGKILL: every pass resumes from what it
/// wrote, so ending it is safe.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Run the controllers until they stop after a signal, or [`SHUTDOWN_GRACE`] after it.
async fn run_until_stopped(ctx: Arc<Context>, stop: &Stop) {
    tokio::select! {
        _ = run_controllers(ctx) => {}
        _ = stop.after(SHUTDOWN_GRACE) => {
            tracing::warn!(grace_s = SHUTDOWN_GRACE.as_secs(), "reconciles still running after the grace that follows a stop signal; exiting without them (each resumes from what it wrote)");
        }
    }
}

/// Serve `/metrics`, `/healthz` and `/readyz`.
async fn serve_health(addr: SocketAddr, metrics: &Metrics) -> Result<(), OperatorError> {
    let health = Arc::new(Health::default());
    let bound = serve(addr, metrics.clone(), health.clone())
        .await
        .map_err(|source| OperatorError::Metrics { addr, source })?;
    // Tests and the demo read the port from here when they pass port 0.
    tracing::info!(addr = %bound, "serving /metrics, /healthz, /readyz");
    health.set_ready(true);
    Ok(())
}

/// Wait until the lease manager says the Lease is held, at most `patience`.
async fn held(
    rx: &mut tokio::sync::watch::Receiver<bool>,
    patience: std::time::Duration,
    lease: &str,
) -> Result<(), OperatorError> {
    let wait = async {
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                return Err(OperatorError::Lease("lease task ended".into()));
            }
        }
        Ok(())
    };
    tokio::time::timeout(patience, wait)
        .await
        .unwrap_or_else(|_| {
            Err(OperatorError::Lease(format!(
                "{lease} not taken within {}s",
                patience.as_secs()
            )))
        })
}

/// Which Lease [`lead`] takes.
#[derive(Debug, Clone, Copy)]
enum Role {
    /// The one Lease hosts compete for: its holder runs the controllers (or, with
    /// sharding, the sharder).
    Leader,
    /// A sharding replica's own Lease.
    Shard,
}

impl Role {
    /// What the log says while waiting, and once held.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Self::Leader => ("waiting for the leader lease", "became leader"),
            Self::Shard => ("taking the shard lease", "holding the shard lease"),
        }
    }

    /// How long to wait for the Lease. A standby waits for the leader Lease as long as it
    /// takes. Nobody contends for a shard Lease, but the leader holds it for up to a lease
    /// duration after it expired (a replica restarted under the same identity); longer, and
    /// the Lease is gone or stuck: exit, and a fresh start makes it.
    fn patience(self, duration: std::time::Duration) -> std::time::Duration {
        match self {
            Self::Leader => std::time::Duration::MAX,
            Self::Shard => 3 * duration,
        }
    }
}

/// The field manager a host takes a Lease with. Its own per identity: the lease manager
/// takes a free Lease with a server-side apply and counts on the API server refusing a
/// second taker's apply as a conflict, which it does only between different managers (with
/// one name for every host, two hosts once both became leader at the same moment).
pub fn lease_field_manager(identity: &str) -> String {
    const PREFIX: &str = "tessera-lease-";
    // The API server takes at most 128 characters; identities differ at their end (a
    // pod's random suffix, a pid), so that is the part kept.
    let room = 128 - PREFIX.len();
    let skip = identity.chars().count().saturating_sub(room);
    let kept: String = identity.chars().skip(skip).collect();
    format!("{PREFIX}{kept}")
}

/// Wait for the leader lease; then the future that ends (with why) when leadership is lost,
/// holding the fence open meanwhile.
async fn lead(
    client: Client,
    election: LeaderElection,
    fence: Arc<Fence>,
    role: Role,
) -> Result<impl std::future::Future<Output = OperatorError>, OperatorError> {
    let manager = LeaseManagerBuilder::new(client.clone(), &election.lease_name)
        .with_namespace(&election.namespace)
        .with_identity(&election.identity)
        .with_duration(election.duration)
        .with_grace(
            crate::fence::renew_grace(std::time::Duration::from_secs(election.duration)).as_secs(),
        )
        .with_field_manager(lease_field_manager(&election.identity))
        .with_create_mode(match election.existing {
            true => LeaseCreateMode::UseExistent,
            false => LeaseCreateMode::AutoCreate,
        })
        .build()
        .await
        .map_err(|e| {
            let hint = match election.existing {
                true => " (--lease-exists: the installer makes the Lease; is it there?)",
                false => "",
            };
            OperatorError::Lease(format!(
                "Lease {}/{}: {e}{hint}",
                election.namespace, election.lease_name
            ))
        })?;
    let (mut rx, _task) = manager.watch().await;
    let (waiting, holding) = role.words();
    tracing::info!(identity = %election.identity, lease = %election.lease_name, "{waiting}");
    let patience = role.patience(std::time::Duration::from_secs(election.duration));
    held(&mut rx, patience, &election.lease_name).await?;
    tracing::info!(identity = %election.identity, "{holding}");
    let leases: Api<Lease> = Api::namespaced(client, &election.namespace);
    // Open the fence before anything else runs: start-up work writes too.
    confirm_lease(&leases, &election, &fence).await?;
    Ok(async move {
        tokio::select! {
            error = hold_fence(leases, election, fence) => error,
            _ = async {
                while rx.changed().await.is_ok() && *rx.borrow() {}
            } => OperatorError::LostLease,
        }
    })
}

/// Before the controllers start: sweep orphaned kubeconfig Secrets (when this host leads;
/// with sharding the leader does it once it leads), and note which Plugins the first
/// resolution waits for.
async fn prepare(ctx: &Arc<Context>, leading: bool) {
    if leading && ctx.config.controllers == Controllers::All {
        sweep_kubeconfig_secrets(ctx).await;
    }
    list_plugins(ctx).await;
}

pub(crate) async fn sweep_kubeconfig_secrets(ctx: &Arc<Context>) {
    let namespace = ctx.config.namespace.as_deref();
    match kubeconfig::remove_orphaned_secrets(&ctx.client, namespace).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(removed = n, "removed orphaned kubeconfig Secrets"),
        Err(e) => tracing::warn!(error = %e, "could not sweep orphaned kubeconfig Secrets"),
    }
}

/// The Plugins the first catalog waits for.
async fn list_plugins(ctx: &Arc<Context>) {
    if ctx.fetcher.is_none() {
        return;
    }
    let mut params = kube::api::ListParams::default();
    if let Some(selector) = &ctx.config.plugin_selector {
        params = params.labels(selector);
    }
    match Api::<Plugin>::all(ctx.client.clone())
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

async fn run_controllers(ctx: Arc<Context>) {
    let plugins = async {
        if ctx.fetcher.is_some() {
            plugin::run(ctx.clone()).await;
        }
    };
    let runtimes = async {
        if ctx.config.controllers == Controllers::All {
            tokio::join!(
                runtime::run(ctx.clone()),
                kubeconfig::run(ctx.clone()),
                access::run(ctx.clone()),
            );
        }
    };
    tokio::join!(runtimes, plugins, moduleset::run(ctx.clone()));
}

/// `<hostname>-<pid>`: unique per process, readable in the Lease.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "tessera".into());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_identity_takes_the_lease_as_a_manager_of_its_own() {
        assert_ne!(lease_field_manager("vm-1"), lease_field_manager("vm-2"));
        let long = |suffix: &str| format!("{}-{suffix}", "x".repeat(300));
        let (a, b) = (
            lease_field_manager(&long("7f9c")),
            lease_field_manager(&long("k2d4")),
        );
        assert!(a.len() <= 128 && b.len() <= 128, "{a}");
        assert_ne!(a, b);
    }
}
