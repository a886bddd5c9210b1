//! Why a module could not be reconciled; every variant names the module or object at fault.

/// A module reconcile failure.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("Kubernetes API of the target: {}", crate::report::kube_error(.0))]
    Kube(#[from] kube::Error),
    #[error("{object}: {message}")]
    Object { object: String, message: String },
    #[error("module {module}: {message}")]
    Module { module: String, message: String },
    #[error("plugin task failed: {0}")]
    Join(String),
}

impl ModuleError {
    pub(crate) fn object(object: impl std::fmt::Display, message: impl Into<String>) -> Self {
        Self::Object {
            object: object.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn module(module: &str, message: impl Into<String>) -> Self {
        Self::Module {
            module: module.to_string(),
            message: message.into(),
        }
    }
}
