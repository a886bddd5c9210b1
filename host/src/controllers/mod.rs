//! The reconcilers. Each kind has its own folder; the Runtime state machine keeps one file
//! per state in `runtime/states/`.

pub mod context;
pub mod kit;
pub mod kubeconfig;
pub mod labels;
pub mod moduleset;
pub mod plugin;
pub mod runtime;
pub mod runtime_cluster;

pub use context::{Clients, Context, InitialSync, OperatorConfig, Renderer, Requeue};

/// Why a reconcile stopped early. Conflicts are expected and retried quietly.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("runtime cluster of {runtime}: {message}")]
    RuntimeCluster { runtime: String, message: String },
    #[error("rendering task failed: {0}")]
    Join(String),
    #[error("{0}")]
    ShootIdentity(String),
}

impl From<crate::gardener::ShootError> for ReconcileError {
    fn from(e: crate::gardener::ShootError) -> Self {
        match e {
            crate::gardener::ShootError::Identity(message) => Self::ShootIdentity(message),
            crate::gardener::ShootError::Kube(e) => Self::Kube(e),
        }
    }
}

impl ReconcileError {
    /// An optimistic-concurrency conflict: someone else wrote first, try again soon.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube(kube::Error::Api(e)) if e.code == 409)
    }

    /// A short machine-readable reason for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Kube(kube::Error::Api(e)) if e.code == 409 => "Conflict",
            Self::Kube(kube::Error::Api(e)) if e.code == 404 => "NotFound",
            Self::Kube(kube::Error::Api(_)) => "ApiError",
            Self::Kube(_) => "ApiUnreachable",
            Self::RuntimeCluster { .. } => "RuntimeClusterError",
            Self::Join(_) => "RenderTaskFailed",
            Self::ShootIdentity(_) => "ShootIdentity",
        }
    }
}
