use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tessera::modules::windows::MaintenanceWindows;

use anyhow::Context;
use clap::Args;
use tessera::controllers::{Controllers, KimTakeover, OperatorConfig, Renderer, RequeueTimes};
use tessera::kubeconfig::KubeconfigPolicy;
use tessera::oci::{ContentStore, TrustPolicy};
use tessera::operator::{LeaderElection, OperatorOptions, Stop, default_identity};
use tessera::plugins::template::Resolver;
use tessera::plugins::{
    Catalog, ChainConfig, ChainTemplate, DraftCache, Fetcher, ShootChain, default_plugin_dir,
};

use super::duration;
use super::registry::{RegistryArgs, default_store_dir};
use tessera::wasm::WasmRuntime;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Control-plane kubeconfig: Runtimes, RuntimeKubeconfigs and Secrets live there
    /// [default: in-cluster, else $KUBECONFIG, else ~/.kube/config].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Which controllers run: `all`, or `modules` (Plugins and ModuleSets only; no Gardener,
    /// no Shoot plugins, no plugin directory needed).
    #[arg(long, value_enum, default_value = "all")]
    controllers: Controllers,
    /// Gardener kubeconfig for Shoots and admin kubeconfigs [default: the control plane's].
    #[arg(long, env = "TESSERA_GARDENER_KUBECONFIG")]
    gardener_kubeconfig: Option<PathBuf>,
    /// Requests per second the host sends to Gardener, all Runtimes together (KIM's budget
    /// is 5): Gardener serves every project, and a restart or channel move must not flood
    /// it. Requests beyond it wait. 0: no limit.
    #[arg(long, default_value_t = 5)]
    gardener_requests_per_second: u32,
    /// Only reconcile Runtimes in this namespace [default: all namespaces].
    #[arg(long, env = "TESSERA_NAMESPACE")]
    namespace: Option<String>,
    /// Chain configuration: plugin order, per-plugin configuration and limits.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory with `<plugin>.wasm` components [default: $TESSERA_PLUGIN_DIR, or
    /// `plugins/` next to the binary].
    #[arg(long)]
    plugins: Option<PathBuf>,
    /// Address of /metrics, /healthz and /readyz (port 0 picks a free port, logged).
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Run without leader election (only when exactly one host runs).
    #[arg(long)]
    no_leader_election: bool,
    /// Name of the coordination.k8s.io Lease hosts compete for.
    #[arg(long, default_value = "tessera")]
    lease_name: String,
    /// The Lease is made by the installer (the Helm chart) and must exist: hosts never
    /// create it, so `helm uninstall` removes it for good.
    #[arg(long)]
    lease_exists: bool,
    /// Namespace of the Lease [default: --namespace, else `default`].
    #[arg(long)]
    lease_namespace: Option<String>,
    /// How long a lease holder stays leader without renewing; a standby takes over after it.
    #[arg(long, default_value = "15s", value_parser = duration)]
    lease_duration: Duration,
    /// Identity in the Lease [default: <hostname>-<pid>].
    #[arg(long)]
    identity: Option<String>,
    /// Shard Runtimes, RuntimeKubeconfigs, RuntimeAccesses and ModuleSets across every
    /// replica instead of one leader reconciling them all: each replica holds a Lease
    /// `<lease-name>-shard-<identity>` (made by the host, in the lease namespace) and
    /// reconciles the objects labelled `tessera.dev/shard=<identity>`; the leader assigns
    /// objects to the live shards by a consistent hash (a Runtime's kubeconfig, accesses
    /// and the ModuleSets on its cluster go with it) and moves them when replicas come and
    /// go. Needs leader election.
    #[arg(long, conflicts_with = "no_leader_election")]
    sharding: bool,
    /// Re-check interval while Gardener works on a Shoot (watches usually come first).
    #[arg(long, default_value = "60s", value_parser = duration)]
    requeue_pending: Duration,
    /// Wait after asking Gardener to retry a failed operation.
    #[arg(long, default_value = "30s", value_parser = duration)]
    requeue_retry: Duration,
    /// First retry after an error or a retryable wait (a plugin timed out, Gardener or a
    /// target is unreachable); each further failure of the same object doubles it, with up
    /// to 100 % random jitter, until --requeue-error-max.
    #[arg(long, default_value = "5s", value_parser = duration)]
    requeue_error: Duration,
    /// Longest wait between retries of a failing object.
    #[arg(long, default_value = "5m", value_parser = duration)]
    requeue_error_max: Duration,
    /// Re-check Ready Runtimes this often [default: only when something changes].
    #[arg(long, value_parser = duration)]
    requeue_ready: Option<Duration>,
    /// Pass settled ModuleSets this often without an event: their plugins run and every
    /// object is applied again, repairing drift the drift watches did not see (a cluster
    /// dropped after --target-idle has none). Each pass costs its target cluster a request
    /// per object: thousands of clusters served by few API servers may need it longer.
    #[arg(long, default_value = "10m", value_parser = duration)]
    requeue_modules: Duration,
    /// `/healthz` fails (and the kubelet restarts the host) once an object has waited this
    /// long for its controller (a generation not yet observed, a deletion our finalizer
    /// holds) with no reconcile of it ending: a watch that stopped delivering, a reconcile
    /// that hangs. A backlog is none: an object waiting while its controller's workers were
    /// busy all along and reconciles kept ending is excused. More than twice the longest
    /// requeue; 0 turns the check off.
    #[arg(long, default_value = "15m", value_parser = duration)]
    stall_timeout: Duration,
    /// Lifetime requested for admin kubeconfigs, at least 10m (Gardener refuses less; it
    /// lowers more than its maximum, 24h by default, and the host rotates by what it
    /// granted).
    #[arg(long, default_value = "24h", value_parser = duration)]
    kubeconfig_expiration: Duration,
    /// Rotate kubeconfigs once this fraction of their lifetime has passed (KIM: 0.57).
    #[arg(long, default_value_t = 0.57)]
    rotation_fraction: f64,
    /// Force-delete a Shoot whose deletion Gardener failed, once Gardener allows it (its last
    /// errors carry one of the five codes Gardener names): Gardener then skips waiting for
    /// hanging resources.
    #[arg(long)]
    force_deletion: bool,
    /// Reconciles running at once, per controller (0: unbounded).
    #[arg(long, default_value_t = 32)]
    workers: u16,
    /// Re-resolve the tags of Plugin resources this often; a moved tag is picked up
    /// within it, without a restart.
    #[arg(long, default_value = "60s", value_parser = duration)]
    plugin_resync: Duration,
    /// Memory for drafts of earlier renders, MiB (their JSON text deflated, charged
    /// exactly). A render whose inputs (Runtime, current Shoot, plugin digests,
    /// configurations, limits, grants) were seen before runs no plugin; a rollout of one
    /// plugin re-runs it and the steps after it. 0 turns the cache off.
    #[arg(long, default_value_t = 32)]
    render_cache_mib: usize,
    /// Only resolve Plugin resources matching this label selector.
    #[arg(long)]
    plugin_selector: Option<String>,
    /// Content-addressed store of pulled plugins [default: ~/.cache/tessera/plugins].
    #[arg(long, env = "TESSERA_PLUGIN_STORE")]
    plugin_store: Option<PathBuf>,
    /// Trust policy: public keys per registry/repository prefix, and whether every
    /// plugin must be signed (see docs/operator-guide.md).
    #[arg(long, env = "TESSERA_TRUST_POLICY")]
    trust_policy: Option<PathBuf>,
    /// Let kubeconfigs from Secrets (ModuleSet targets, runtime clusters) run exec plugins
    /// and auth providers, read files and use proxies [default: inline credentials only].
    #[arg(long)]
    allow_external_kubeconfigs: bool,
    /// API servers kubeconfigs from Secrets may point at, e.g.
    /// `https://api.*.shoots.example.com` (`*` matches anything; repeatable) [default: any].
    #[arg(long = "kubeconfig-server", value_name = "URL")]
    kubeconfig_servers: Vec<String>,
    /// A Secret (`namespace/name`, `*` globs; repeatable) ModuleSets of its namespace may use
    /// as target besides the kubeconfig Secrets Tessera writes for Runtimes.
    #[arg(long = "module-target", value_name = "NAMESPACE/SECRET")]
    module_targets: Vec<String>,
    /// A namespace (`*` globs; repeatable) whose ModuleSets may omit `spec.target` and
    /// install into the cluster the host runs in [default: none].
    #[arg(long = "local-modules", value_name = "NAMESPACE")]
    local_modules: Vec<String>,
    /// A namespace (repeatable) made in every runtime cluster once it is reachable
    /// (`kyma-system`: as KIM does); condition `KymaSystemNSCreated`. An existing one is left
    /// as it is, none is ever deleted [default: none: modules make the namespaces they own,
    /// and one made here would be foreign to them].
    #[arg(long = "runtime-namespace", value_name = "NAME")]
    runtime_namespaces: Vec<String>,
    /// Copy the credentials of Runtimes' registry caches (a Secret of the runtime cluster)
    /// into the Gardener project as `reg-cache-…` Secrets, as KIM's
    /// `--registry-cache-config-controller-enabled` does; needs `get`, `list`, `create`,
    /// `patch`, `delete` on Secrets there. Without it a cache with credentials is left out
    /// of the Shoot (condition `RegistryCacheConfigured` False, naming this flag).
    #[arg(long)]
    registry_cache_credentials: bool,
    /// Write `kyma-system/kyma-provisioning-info` (key `details`) into every runtime cluster
    /// once it is prepared, as KIM does: worker pools, the Runtime's KEB labels, regions (the
    /// Seed's too), infrastructure config, dual-stack and ACL. Needs `--runtime-namespace
    /// kyma-system`.
    #[arg(long)]
    kyma_provisioning_info: bool,
    /// Take over Shoots Kyma Infrastructure Manager made (written by a
    /// `--kim-field-manager`, annotated with the Runtime's id under
    /// `--kim-runtime-id-annotation`) for Runtimes in a `--kim-runtime-namespace`: they are
    /// adopted as they are, and written only when the Runtime's render differs from them.
    /// Without it such a Shoot is refused (reason `TakeoverDisabled`, naming this flag).
    #[arg(long)]
    takeover_kim: bool,
    /// A field manager of KIM's Shoot writes (repeatable) [default: kim, manager].
    #[arg(long = "kim-field-manager", value_name = "NAME")]
    kim_field_managers: Vec<String>,
    /// A namespace (repeatable) whose Runtimes may take over KIM's Shoots [default:
    /// kcp-system, where KIM keeps its Runtimes].
    #[arg(long = "kim-runtime-namespace", value_name = "NAMESPACE")]
    kim_runtime_namespaces: Vec<String>,
    /// KIM's Shoot annotation holding the runtime id.
    #[arg(
        long,
        default_value = "infrastructuremanager.kyma-project.io/runtime-id",
        value_name = "KEY"
    )]
    kim_runtime_id_annotation: String,
    /// KIM's Shoot annotation with the generation of KIM's Runtime: not compared when a
    /// Shoot is taken over (Tessera's Runtime is another object with its own generation).
    #[arg(
        long,
        default_value = "infrastructuremanager.kyma-project.io/runtime-generation",
        value_name = "KEY"
    )]
    kim_generation_annotation: String,
    /// A ModuleSet being deleted whose target Secret is gone (its cluster most likely
    /// deleted with its Runtime) waits this long for the Secret to come back, then lets
    /// its finalizer go with a Warning Event: its modules' objects on that cluster, if the
    /// cluster still exists, are left behind.
    #[arg(long, default_value = "10m", value_parser = duration)]
    module_target_gone_grace: Duration,
    /// ModuleSet passes that run against one target cluster at once; a set finding them
    /// all taken is looked at again after a short backoff, so that the sets of one slow or
    /// hanging cluster cannot hold every worker (0: no limit).
    #[arg(long, default_value_t = 16)]
    module_target_concurrency: usize,
    /// A target cluster no ModuleSet pass asked for this long loses its client, discovery
    /// cache and drift watches; the next pass of one of its sets connects again and
    /// applies everything (repairing what changed meanwhile). Settled sets pass every
    /// --requeue-modules (10 minutes), so the default keeps their clusters and drops those
    /// of deleted or moved sets; below that a host with thousands of clusters keeps only
    /// the busy ones connected, and drift on the others is repaired at their next pass
    /// (0: never drop).
    #[arg(long, default_value = "15m", value_parser = duration)]
    target_idle: Duration,
    /// Daily maintenance windows (YAML: `default`, `regions.<region>`, `sets.<ns>/<name>`,
    /// each a list of `{begin: "HH:MM", end: "HH:MM"}` in UTC) in which module upgrades to
    /// versions marked `requiresDowntime` run [default: no windows, upgrades run at once].
    #[arg(long, value_name = "FILE")]
    maintenance_windows: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// The flags no parser can check alone, refused before anything starts.
fn check_args(args: &RunArgs) -> anyhow::Result<()> {
    if !(0.0 < args.rotation_fraction && args.rotation_fraction <= 1.0) {
        anyhow::bail!(
            "--rotation-fraction must be in (0, 1], got {}",
            args.rotation_fraction
        );
    }
    // gardener pkg/api/authentication/validation: "may not specify a duration less than 10
    // minutes".
    if args.kubeconfig_expiration < Duration::from_secs(600) {
        anyhow::bail!(
            "--kubeconfig-expiration must be at least 10m: Gardener refuses admin kubeconfigs shorter than 600 s, got {}s",
            args.kubeconfig_expiration.as_secs()
        );
    }
    // Zero would pass every settled ModuleSet again at once, forever.
    if args.requeue_modules < Duration::from_secs(1) {
        anyhow::bail!(
            "--requeue-modules must be at least 1s, got {:?}",
            args.requeue_modules
        );
    }
    check_stall_timeout(args)?;
    args.registry.check_scoped().map_err(anyhow::Error::msg)
}

/// A failing object retries at most every `--requeue-error-max` (twice that with jitter),
/// a pending one every `--requeue-pending` or `--requeue-retry`: a shorter stall timeout
/// would take a host that waits as it should for one that hangs.
fn check_stall_timeout(args: &RunArgs) -> anyhow::Result<()> {
    let longest = args
        .requeue_error_max
        .max(args.requeue_pending)
        .max(args.requeue_retry);
    if !args.stall_timeout.is_zero() && args.stall_timeout <= 2 * longest {
        anyhow::bail!(
            "--stall-timeout must exceed twice the longest requeue ({}s: --requeue-error-max, --requeue-pending, --requeue-retry), got {}s",
            longest.as_secs(),
            args.stall_timeout.as_secs()
        );
    }
    Ok(())
}

pub fn run(rt: WasmRuntime, args: RunArgs) -> anyhow::Result<ExitCode> {
    check_args(&args)?;
    tracing::info!(version = super::VERSION, "tessera run starting");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Heard from now on: compiling the plugins below takes a while.
    let stop = {
        let _in_runtime = runtime.enter();
        Stop::listen().context("cannot listen for SIGTERM and SIGINT")?
    };
    let config = match &args.config {
        Some(path) => ChainConfig::from_file(path)?,
        None => ChainConfig::default(),
    };
    let template = chain_template(&rt, &args, &config)?;
    let policy = match &args.trust_policy {
        Some(path) => TrustPolicy::from_file(path)?,
        None => TrustPolicy::default(),
    };
    let store_dir = args.plugin_store.clone().unwrap_or_else(default_store_dir);
    let store = ContentStore::open(&store_dir)?;
    let wasm = Arc::new(rt);
    let fetcher = Arc::new(Fetcher {
        registry: args.registry.registry(),
        store,
        policy,
        wasm: wasm.clone(),
    });
    let leader_election = leader_election(&args);
    let render_cache_mib = args.render_cache_mib;
    let sharding = args.sharding;
    let options = OperatorOptions {
        kubeconfig: args.kubeconfig.clone(),
        gardener_kubeconfig: args.gardener_kubeconfig.clone(),
        gardener_requests_per_second: std::num::NonZeroU32::new(args.gardener_requests_per_second),
        metrics_addr: args.metrics_addr,
        leader_election,
        config: operator_config(args)?,
        renderer: Renderer {
            wasm,
            resolver: Resolver {
                template: Arc::new(template),
                catalog: Catalog::new(),
            },
            memo: Arc::new(DraftCache::new(render_cache_mib << 20)),
        },
        fetcher: Some(fetcher),
        stop,
        sharding,
    };
    runtime.block_on(tessera::operator::run(options))?;
    Ok(ExitCode::SUCCESS)
}

/// The Shoot plugins, compiled (or loaded precompiled) before touching the cluster; none
/// when only the module controllers run.
fn chain_template(
    rt: &WasmRuntime,
    args: &RunArgs,
    config: &ChainConfig,
) -> anyhow::Result<ChainTemplate> {
    if args.controllers == Controllers::Modules {
        return Ok(ChainTemplate::fixed(&ShootChain { steps: Vec::new() }));
    }
    let plugin_dir = args.plugins.clone().or_else(default_plugin_dir).context(
        "no plugin directory: pass --plugins DIR or set TESSERA_PLUGIN_DIR (build them with `cargo xtask build-plugins`), or run only the module controllers (--controllers modules)",
    )?;
    Ok(ChainTemplate::load(rt, config, &plugin_dir)?)
}

/// The Lease hosts compete for, unless leader election is off.
fn leader_election(args: &RunArgs) -> Option<LeaderElection> {
    (!args.no_leader_election).then(|| LeaderElection {
        lease_name: args.lease_name.clone(),
        namespace: args
            .lease_namespace
            .clone()
            .or_else(|| args.namespace.clone())
            .unwrap_or_else(|| "default".into()),
        duration: args.lease_duration.as_secs().max(1),
        identity: args.identity.clone().unwrap_or_else(default_identity),
        existing: args.lease_exists,
    })
}

/// What the controllers are told: timings, policies and scope from the flags.
fn operator_config(args: RunArgs) -> anyhow::Result<OperatorConfig> {
    let provisioning = provisioning_info(args.kyma_provisioning_info, &args.runtime_namespaces)?;
    let windows = match &args.maintenance_windows {
        Some(path) => MaintenanceWindows::from_file(path).map_err(anyhow::Error::msg)?,
        None => MaintenanceWindows::default(),
    };
    Ok(OperatorConfig {
        controllers: args.controllers,
        requeue: RequeueTimes {
            pending: args.requeue_pending,
            retry: args.requeue_retry,
            error: args.requeue_error,
            error_max: args.requeue_error_max,
            ready: args.requeue_ready,
            modules: args.requeue_modules,
        },
        stall_timeout: (!args.stall_timeout.is_zero()).then_some(args.stall_timeout),
        kubeconfig_expiration: args.kubeconfig_expiration,
        rotation_fraction: args.rotation_fraction,
        force_deletion: args.force_deletion,
        namespace: args.namespace,
        workers: args.workers,
        plugin_resync: args.plugin_resync,
        // Set by the operator from the identity when sharding.
        shard: None,
        plugin_selector: args.plugin_selector,
        kubeconfigs: KubeconfigPolicy {
            allow_external: args.allow_external_kubeconfigs,
            servers: args.kubeconfig_servers,
        },
        module_targets: args.module_targets,
        local_module_namespaces: args.local_modules,
        module_target_gone_grace: args.module_target_gone_grace,
        module_target_concurrency: args.module_target_concurrency,
        target_idle: Some(args.target_idle).filter(|d| !d.is_zero()),
        maintenance_windows: windows,
        runtime_namespaces: runtime_namespaces(args.runtime_namespaces)?,
        registry_cache_credentials: args.registry_cache_credentials,
        kyma_provisioning_info: provisioning,
        kim: kim_takeover(
            args.takeover_kim,
            args.kim_field_managers,
            args.kim_runtime_namespaces,
            args.kim_runtime_id_annotation,
            args.kim_generation_annotation,
        ),
    })
}

/// The takeover settings; lists not given keep their defaults.
fn kim_takeover(
    enabled: bool,
    field_managers: Vec<String>,
    runtime_namespaces: Vec<String>,
    runtime_id_annotation: String,
    generation_annotation: String,
) -> KimTakeover {
    let defaults = KimTakeover::default();
    let or = |given: Vec<String>, default: Vec<String>| match given.is_empty() {
        true => default,
        false => given,
    };
    KimTakeover {
        enabled,
        field_managers: or(field_managers, defaults.field_managers),
        runtime_namespaces: or(runtime_namespaces, defaults.runtime_namespaces),
        runtime_id_annotation,
        generation_annotation,
    }
}

/// `--kyma-provisioning-info` writes into `kyma-system`: the host must make it.
fn provisioning_info(on: bool, namespaces: &[String]) -> anyhow::Result<bool> {
    if on && !namespaces.iter().any(|n| n == "kyma-system") {
        anyhow::bail!(
            "--kyma-provisioning-info writes into namespace kyma-system: add --runtime-namespace kyma-system"
        );
    }
    Ok(on)
}

/// `--runtime-namespace` values: names of namespaces (an empty one: none).
fn runtime_namespaces(names: Vec<String>) -> anyhow::Result<Vec<String>> {
    let mut seen = std::collections::HashSet::new();
    let names: Vec<String> = names
        .into_iter()
        .filter(|n| !n.is_empty() && seen.insert(n.clone()))
        .collect();
    match names
        .iter()
        .find(|n| !tessera::plugins::identity::is_dns_label(n))
    {
        Some(bad) => anyhow::bail!(
            "--runtime-namespace {bad:?}: not a namespace name (lowercase letters, digits and '-', at most 63)"
        ),
        None => Ok(names),
    }
}
