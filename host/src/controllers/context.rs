//! What every reconcile shares: clients, the plugin chain, configuration, metrics, events.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use crate::fence::Fence;
use crate::gardener::ShootClient;
use crate::kubeconfig::KubeconfigPolicy;
use crate::metrics::{Metrics, StepResult};
use crate::plugins::template::Resolver;
use crate::plugins::{ChainOutput, DraftCache, Fetcher, ShootChain, ShootIdentity};
use crate::wasm::{CallError, WasmRuntime};

/// How long to wait before looking again. Shoot and RuntimeKubeconfig changes wake the
/// controllers through watches; these are safety nets and back-offs.
#[derive(Debug, Clone)]
pub struct RequeueTimes {
    /// While Gardener works on a Shoot.
    pub pending: Duration,
    /// After asking Gardener to retry a failed operation.
    pub retry: Duration,
    /// First retry after an error or a retryable wait; doubles (with jitter) per failure.
    pub error: Duration,
    /// Longest wait between retries.
    pub error_max: Duration,
    /// Re-check Ready Runtimes this often (`None`: only on change).
    pub ready: Option<Duration>,
    /// Pass settled ModuleSets this often even without events: their plugins run and their
    /// objects are applied again (drift on a cluster without drift watches is repaired then).
    pub modules: Duration,
}

impl Default for RequeueTimes {
    fn default() -> Self {
        Self {
            pending: Duration::from_secs(60),
            retry: Duration::from_secs(30),
            error: Duration::from_secs(5),
            error_max: Duration::from_secs(300),
            ready: None,
            modules: Duration::from_secs(600),
        }
    }
}

/// The controllers a host runs (`tessera run --controllers`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Controllers {
    /// Runtimes with their kubeconfigs and accesses, Plugins and ModuleSets.
    #[default]
    All,
    /// Plugins and ModuleSets only: no Gardener and no Shoot plugins are needed (a cluster
    /// of modules, or a module team's own cluster).
    Modules,
}

/// Operator settings (`tessera run` flags).
#[derive(Debug, Clone)]
pub struct OperatorConfig {
    /// Which controllers run.
    pub controllers: Controllers,
    pub requeue: RequeueTimes,
    /// `/healthz` fails once an object has waited this long with no reconcile of it ending
    /// (`None`: never).
    pub stall_timeout: Option<Duration>,
    /// Lifetime requested for admin kubeconfigs.
    pub kubeconfig_expiration: Duration,
    /// Rotate once this fraction of the lifetime has passed (KIM: 0.95 × 0.6).
    pub rotation_fraction: f64,
    /// Force-delete a Shoot whose deletion Gardener failed, once Gardener allows it.
    pub force_deletion: bool,
    /// Only reconcile Runtimes in this namespace.
    pub namespace: Option<String>,
    /// Reconciles running at once per controller (0: unbounded).
    pub workers: u16,
    /// Re-resolve Plugin tags this often (a moved tag is picked up within it).
    pub plugin_resync: Duration,
    /// Only reconcile the Runtimes, RuntimeKubeconfigs, RuntimeAccesses and ModuleSets
    /// labelled for this shard (set by `tessera run --sharding` to the replica's identity).
    pub shard: Option<String>,
    /// Only resolve Plugins matching this label selector (several installations, tests).
    pub plugin_selector: Option<String>,
    /// What kubeconfigs from Secrets may use.
    pub kubeconfigs: KubeconfigPolicy,
    /// Secrets (`namespace/name`, `*` globs) the operator allows as ModuleSet targets
    /// besides Tessera's own kubeconfig Secrets.
    pub module_targets: Vec<String>,
    /// Namespaces (`*` globs) whose ModuleSets may install into the host's own cluster.
    pub local_module_namespaces: Vec<String>,
    /// How long a ModuleSet being deleted waits for its gone target Secret before its
    /// finalizer is released.
    pub module_target_gone_grace: Duration,
    /// ModuleSet passes running against one target cluster at once (0: no limit).
    pub module_target_concurrency: usize,
    /// A target cluster no ModuleSet pass asked for this long loses its client, discovery
    /// cache and drift watches until the next pass (`None`: kept while the host runs).
    pub target_idle: Option<Duration>,
    /// When module upgrades that need downtime may run.
    pub maintenance_windows: crate::modules::windows::MaintenanceWindows,
    /// Namespaces made in every runtime cluster once it is reachable (KIM makes
    /// kyma-system).
    pub runtime_namespaces: Vec<String>,
    /// Copy registry caches' credentials into the Gardener project
    /// (`--registry-cache-credentials`).
    pub registry_cache_credentials: bool,
    /// Write KIM's `kyma-system/kyma-provisioning-info` into every runtime cluster
    /// (`--kyma-provisioning-info`).
    pub kyma_provisioning_info: bool,
    /// How Shoots made by Kyma Infrastructure Manager are recognised, and whether they are
    /// taken over.
    pub kim: KimTakeover,
}

/// What marks a Shoot Kyma Infrastructure Manager made, and whether the host takes such
/// Shoots over (`--takeover-kim`). Without it they are refused, naming the flag.
#[derive(Debug, Clone, PartialEq)]
pub struct KimTakeover {
    pub enabled: bool,
    /// Field managers of KIM's Shoot writes: `kim` for its patches, `manager` (its
    /// binary's name) for the create, which names none.
    pub field_managers: Vec<String>,
    /// Namespaces whose Runtimes may take over KIM's Shoots (KIM keeps its Runtimes in
    /// `kcp-system`): a tenant elsewhere cannot claim a Shoot by naming its runtime id.
    pub runtime_namespaces: Vec<String>,
    /// KIM's Shoot annotation naming the runtime id (the Runtime's name).
    pub runtime_id_annotation: String,
    /// KIM's Shoot annotation with the generation of KIM's Runtime object: another object
    /// than Tessera's Runtime, so its value is no reason to write a Shoot taken over.
    pub generation_annotation: String,
}

impl Default for KimTakeover {
    fn default() -> Self {
        Self {
            enabled: false,
            field_managers: vec!["kim".into(), "manager".into()],
            runtime_namespaces: vec!["kcp-system".into()],
            runtime_id_annotation: "infrastructuremanager.kyma-project.io/runtime-id".into(),
            generation_annotation: "infrastructuremanager.kyma-project.io/runtime-generation"
                .into(),
        }
    }
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            controllers: Controllers::All,
            requeue: RequeueTimes::default(),
            stall_timeout: Some(Duration::from_secs(15 * 60)),
            kubeconfig_expiration: Duration::from_secs(24 * 3600),
            rotation_fraction: 0.57,
            force_deletion: false,
            namespace: None,
            workers: 32,
            plugin_resync: Duration::from_secs(60),
            shard: None,
            plugin_selector: None,
            kubeconfigs: KubeconfigPolicy::default(),
            module_targets: Vec::new(),
            local_module_namespaces: Vec::new(),
            module_target_gone_grace: Duration::from_secs(600),
            module_target_concurrency: 16,
            target_idle: Some(Duration::from_secs(900)),
            maintenance_windows: Default::default(),
            runtime_namespaces: Vec::new(),
            registry_cache_credentials: false,
            kyma_provisioning_info: false,
            kim: KimTakeover::default(),
        }
    }
}

/// The chain template, the catalog of registry plugins and the engine they run on.
#[derive(Clone)]
pub struct Renderer {
    pub wasm: Arc<WasmRuntime>,
    pub resolver: Resolver,
    /// Drafts of earlier renders: unchanged inputs are not rendered again.
    pub memo: Arc<DraftCache>,
}

impl Renderer {
    /// Run `chain` off the async threads (plugin calls are CPU-bound).
    pub async fn render(
        &self,
        chain: ShootChain,
        runtime_json: String,
        identity: ShootIdentity,
        runtime_id: String,
        current: Option<String>,
        metrics: &Metrics,
    ) -> Result<Result<ChainOutput, CallError>, tokio::task::JoinError> {
        let this = self.clone();
        let metrics = metrics.clone();
        tokio::task::spawn_blocking(move || {
            let out = chain.run_memo(
                &this.wasm,
                Some(&this.memo),
                &runtime_json,
                &identity,
                &runtime_id,
                current.as_deref(),
            );
            if let Ok(out) = &out {
                metrics.render_steps(StepResult::Cached, out.cached_steps);
                metrics.render_steps(StepResult::Run, out.timings.len());
                for (plugin, duration) in &out.timings {
                    metrics.plugin_call_took(plugin, *duration);
                }
            }
            out
        })
        .await
    }
}

/// The clients of the host, all writing through the leader fence.
pub(crate) struct Clients {
    /// The control plane: Runtimes, RuntimeKubeconfigs, Secrets, Events.
    pub(crate) control: Client,
    /// Gardener: Shoots and admin kubeconfigs.
    pub(crate) gardener: Client,
    /// The API server `gardener` talks to, for messages.
    pub(crate) gardener_url: String,
    /// Closed when this host may no longer be the leader; clients built later (target and
    /// runtime clusters) pass it too.
    pub(crate) fence: Arc<Fence>,
    /// The control plane again, for the liveness watchdog alone: its connections are not
    /// the controllers', so connections of theirs gone silent do not silence it too.
    pub(crate) watchdog: Client,
}

/// Shared by every reconcile.
pub(crate) struct Context {
    /// The control plane: Runtimes, RuntimeKubeconfigs, Secrets, Events.
    pub(crate) client: Client,
    /// The leader fence every client the host builds passes.
    pub(crate) fence: Arc<Fence>,
    /// Gardener: Shoots and admin kubeconfigs.
    pub(crate) shoots: ShootClient,
    pub(crate) renderer: Renderer,
    pub(crate) config: OperatorConfig,
    pub(crate) metrics: Metrics,
    /// The one Event sink.
    pub(crate) events: super::kit::EventSink,
    /// Retry state of every object (backoff with jitter, log cap).
    pub(crate) retries: super::kit::Retries,
    /// One client per cluster credential (kubeconfig Secret version).
    pub(crate) clusters: Arc<crate::kubeconfig::ClientCache>,
    /// Pulls registry plugins (`None`: the Plugin controller does not run).
    pub(crate) fetcher: Option<Arc<Fetcher>>,
    /// The first resolution of the Plugins present at start-up.
    pub(crate) initial_sync: InitialSync,
    /// When each object's last reconcile ended, for the watchdog behind `/healthz`.
    pub(crate) progress: super::kit::Progress,
    /// The watchdog's own client (see [`Clients::watchdog`]).
    pub(crate) watchdog_client: Client,
    /// Why the watch of Shoots fails, in words (`None`: it works); Runtimes say so in
    /// `GardenerReachable`.
    pub(crate) shoot_watch: std::sync::Mutex<Option<String>>,
    /// With sharding: whether this replica holds the leader Lease (see [`Context::leads`]);
    /// the Plugin controller passes over every Plugin when it turns true.
    pub(crate) leading: tokio::sync::watch::Sender<bool>,
}

/// Logs once every Plugin that existed at start-up was resolved (how start-up time is
/// measured) and tells /readyz.
#[derive(Default)]
pub(crate) struct InitialSync {
    pending: std::sync::Mutex<Option<std::collections::HashSet<String>>>,
    started: std::sync::OnceLock<std::time::Instant>,
}

impl InitialSync {
    /// The Plugins to wait for.
    pub(crate) fn expect(&self, names: impl IntoIterator<Item = String>) {
        let _ = self.started.set(std::time::Instant::now());
        let names: std::collections::HashSet<String> = names.into_iter().collect();
        let empty = names.is_empty();
        *self.pending.lock().expect("sync lock") = Some(names);
        if empty {
            self.done("");
        }
    }

    /// Plugin `name` was resolved (successfully or not).
    pub(crate) fn done(&self, name: &str) {
        let mut pending = self.pending.lock().expect("sync lock");
        if let Some(set) = pending.as_mut() {
            set.remove(name);
            if set.is_empty() {
                *pending = None;
                let elapsed = self.started.get().map(|s| s.elapsed()).unwrap_or_default();
                tracing::info!(
                    elapsed_ms = elapsed.as_millis() as u64,
                    "plugin catalog ready"
                );
            }
        }
    }

    /// Whether the start-up resolution is over.
    pub(crate) fn is_done(&self) -> bool {
        self.pending.lock().expect("sync lock").is_none()
    }
}

impl Context {
    pub(crate) fn new(
        clients: Clients,
        renderer: Renderer,
        config: OperatorConfig,
        metrics: Metrics,
        instance: String,
        fetcher: Option<Arc<Fetcher>>,
    ) -> Arc<Self> {
        let events = super::kit::EventSink::new(clients.control.clone(), instance);
        let retries = super::kit::Retries::new(config.requeue.error, config.requeue.error_max);
        let clusters = crate::kubeconfig::ClientCache::counted(metrics.cluster_clients.clone());
        let clusters = Arc::new(clusters);
        Arc::new(Self {
            client: clients.control,
            fence: clients.fence,
            shoots: ShootClient::new(clients.gardener, clients.gardener_url),
            renderer,
            config,
            metrics,
            events,
            retries,
            clusters,
            fetcher,
            initial_sync: InitialSync::default(),
            progress: super::kit::Progress::default(),
            watchdog_client: clients.watchdog,
            shoot_watch: std::sync::Mutex::new(None),
            leading: tokio::sync::watch::Sender::new(false),
        })
    }

    /// Whether this host writes what every replica computes alike (Plugin status, its
    /// finalizer and Events): without sharding the one host running the controllers, with
    /// it the leader only, so that replicas whose views differ for a moment (a render
    /// refused on one of them, a pull failed on another) do not write in turn.
    pub(crate) fn leads(&self) -> bool {
        self.config.shard.is_none() || *self.leading.borrow()
    }
}
