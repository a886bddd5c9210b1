//! The reconcilers. Each kind has its own folder; the Runtime state machine keeps one file
//! per state in `runtime/states/`.

pub(crate) mod access;
pub mod context;
pub(crate) mod kit;
pub(crate) mod kubeconfig;
pub(crate) use crate::crd::labels;
pub(crate) mod moduleset;
pub(crate) mod plugin;
pub(crate) mod runtime;
pub(crate) mod runtime_cluster;

pub(crate) use context::{Clients, Context};
pub use context::{Controllers, KimTakeover, OperatorConfig, Renderer, RequeueTimes};
/// Replaying a recorded render (`tessera render --revision`).
pub use runtime::replay;

/// The liveness watchdogs of the controllers this host runs, each over the objects its
/// controller's watch sees (kept while the result is held). Started by the leader before
/// anything else, so that a host wedged before its controllers even start (a start-up
/// request hanging) is caught too.
pub(crate) fn watchdogs(ctx: &std::sync::Arc<Context>) -> Vec<kit::Watchdog> {
    use crate::crd::{ModuleSet, Plugin, Runtime, RuntimeAccess, RuntimeKubeconfig};
    use kit::{Controller, watch_progress};
    use kube::Api;
    fn scoped<K>(ctx: &Context) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match &ctx.config.namespace {
            Some(ns) => Api::namespaced(ctx.client.clone(), ns),
            None => Api::all(ctx.client.clone()),
        }
    }
    let shard = kit::shard::selector(ctx);
    let mut dogs = vec![watch_progress(
        ctx,
        Controller::ModuleSet,
        &scoped::<ModuleSet>(ctx),
        shard.as_deref(),
    )];
    if ctx.fetcher.is_some() {
        let plugins: Api<Plugin> = Api::all(ctx.client.clone());
        let selector = ctx.config.plugin_selector.as_deref();
        dogs.push(watch_progress(ctx, Controller::Plugin, &plugins, selector));
    }
    if ctx.config.controllers == Controllers::All {
        dogs.push(watch_progress(
            ctx,
            Controller::Runtime,
            &scoped::<Runtime>(ctx),
            shard.as_deref(),
        ));
        dogs.push(watch_progress(
            ctx,
            Controller::Kubeconfig,
            &scoped::<RuntimeKubeconfig>(ctx),
            shard.as_deref(),
        ));
        dogs.push(watch_progress(
            ctx,
            Controller::Access,
            &scoped::<RuntimeAccess>(ctx),
            shard.as_deref(),
        ));
    }
    dogs
}

/// Why a reconcile stopped early. Conflicts are expected and retried quietly.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReconcileError {
    #[error("Kubernetes API: {}", crate::report::kube_error(.0))]
    Kube(#[from] kube::Error),
    #[error("runtime cluster of {runtime}: {message}")]
    RuntimeCluster { runtime: String, message: String },
    #[error("rendering task failed: {0}")]
    Join(String),
    #[error("{0}")]
    ShootIdentity(String),
    /// The Gardener side failed: the Runtime waits with a condition, retrying with backoff.
    #[error("Gardener Shoot API: {}", crate::report::kube_error(.0))]
    Gardener(kube::Error),
    /// The render history (ControllerRevisions) could not be read or written.
    #[error("render history: {0}")]
    History(String),
    /// A state machine went from state to state without stopping, within one pass, as often
    /// as it ever should: two states that lead to each other. Retried with backoff.
    #[error("the state machine passed {steps} steps without stopping, the last at {step}")]
    StepBudget { steps: usize, step: &'static str },
}

impl From<crate::history::HistoryError> for ReconcileError {
    fn from(e: crate::history::HistoryError) -> Self {
        match e {
            crate::history::HistoryError::Kube(e) => Self::Kube(e),
            other => Self::History(other.to_string()),
        }
    }
}

impl From<crate::gardener::ShootError> for ReconcileError {
    fn from(e: crate::gardener::ShootError) -> Self {
        match e {
            crate::gardener::ShootError::Identity(message) => Self::ShootIdentity(message),
            crate::gardener::ShootError::Kube(e)
                if crate::api::is_conflict(&e) || crate::fence::refused(&e) =>
            {
                Self::Kube(e)
            }
            crate::gardener::ShootError::Kube(e) => Self::Gardener(e),
        }
    }
}

impl ReconcileError {
    /// An optimistic-concurrency conflict: someone else wrote first, try again soon.
    pub(crate) fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube(e) if crate::api::is_conflict(e))
    }

    /// The leader fence refused a write: the lease is being confirmed; try again soon (if
    /// the lease is lost, the process ends anyway).
    pub(crate) fn is_fenced(&self) -> bool {
        matches!(self, Self::Kube(e) if crate::fence::refused(e))
    }

    /// A short machine-readable reason for metrics.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::Kube(e) if crate::api::is_conflict(e) => "Conflict",
            e if e.is_fenced() => "Fenced",
            Self::Kube(e) if crate::api::is_not_found(e) => "NotFound",
            Self::Kube(kube::Error::Api(_)) => "ApiError",
            Self::Kube(_) => "ApiUnreachable",
            Self::RuntimeCluster { .. } => "RuntimeClusterError",
            Self::Join(_) => "RenderTaskFailed",
            Self::ShootIdentity(_) => "ShootIdentity",
            Self::Gardener(_) => "GardenerUnavailable",
            Self::History(_) => "HistoryUnreadable",
            Self::StepBudget { .. } => "StepBudgetExhausted",
        }
    }
}
