//! Typed failures. Every message names the plugin and its version so that it can go
//! straight into a Runtime condition.

use std::time::Duration;

use tessera_sdk::PluginError;

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read plugin {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{source_name} is not a valid WebAssembly component: {message}")]
    Compile {
        source_name: String,
        message: String,
    },
    #[error(
        "{source_name} exports no Tessera plugin interface (exports: {exports}); build it with tessera-sdk"
    )]
    NotAPlugin {
        source_name: String,
        exports: String,
    },
    #[error("{source_name} was built for plugin contract {found}; this host supports {supported}")]
    ContractMismatch {
        source_name: String,
        found: String,
        supported: String,
    },
    #[error(
        "{source_name} imports what the host does not offer: {missing}. Plugins get logging only (plus inert WASI stubs)"
    )]
    MissingImports {
        source_name: String,
        missing: String,
    },
    #[error("{source_name} cannot be linked: {message}")]
    Link {
        source_name: String,
        message: String,
    },
    #[error("{source_name} declares requests the host cannot read: {message}")]
    Requests {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: info() failed: {cause}")]
    Info { source_name: String, cause: Failure },
    #[error("cannot set up the Wasm engine: {0}")]
    Engine(String),
}

/// How one plugin call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Failure {
    #[error("timed out: exceeded its time budget of {budget:?}")]
    Timeout { budget: Duration },
    #[error("memory limit: exceeded its limit of {limit_mib} MiB")]
    MemoryLimit { limit_mib: u64 },
    #[error("trapped: {message}{}", panic.as_ref().map(|p| format!(" (plugin panicked: {p})")).unwrap_or_default())]
    Trap {
        message: String,
        /// The guest's panic message, from its stderr.
        panic: Option<String>,
    },
    #[error("capability denied: tried to use {capability}, which plugins are not granted")]
    CapabilityDenied { capability: String },
    #[error("invalid output: {0}")]
    InvalidOutput(String),
    #[error("output too large: {size} bytes, more than its limit of {limit} bytes")]
    OutputTooLarge { size: usize, limit: usize },
    #[error("{0}")]
    Plugin(PluginError),
    /// The host refused the output: the plugin did something it was not granted.
    #[error("{0}")]
    NotGranted(String),
    /// The output changes the Shoot's identity, which no plugin may.
    #[error(
        "changed {path}, part of the Shoot's identity (name, project namespace, credentials binding, seed), which the host pins and no plugin may change"
    )]
    Identity { path: String },
}

/// A failed call, naming the plugin.
#[derive(Debug, Clone, thiserror::Error)]
#[error("plugin {plugin} {version}: {cause}")]
pub struct CallError {
    pub plugin: String,
    pub version: String,
    pub cause: Failure,
}

impl CallError {
    /// The Runtime field at fault, when the plugin named one.
    pub fn field(&self) -> Option<&str> {
        match &self.cause {
            Failure::Plugin(err) => err.field.as_deref(),
            _ => None,
        }
    }
}
