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
    #[error("{source_name} declares what the host cannot read: {message}")]
    Declared {
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
    #[error("timed out: exceeded its time budget of {} ms", budget.as_millis())]
    Timeout { budget: Duration },
    /// Every instance slot of the pooling allocator is in use: the host is busy.
    #[error("not started, every sandbox slot is busy ({detail})")]
    Busy { detail: String },
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

/// Who has to act before the same call can succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The input (the Runtime, the module's configuration) is wrong.
    Input,
    /// The plugin's own configuration (`Plugin.spec.config` or the chain's) is wrong.
    Config,
    /// The output does something the plugin was not granted.
    Grant,
    /// The plugin itself (a trap, a bug, bad output): waits for a new plugin version.
    Plugin,
    /// Nobody: the host was busy or slow; retrying heals it.
    Transient,
}

impl Fault {
    /// The word `tessera_plugin_call_failures_total` labels the failure with.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Config => "config",
            Self::Grant => "grant",
            Self::Plugin => "plugin",
            Self::Transient => "transient",
        }
    }
}

impl CallError {
    /// Classify the failure: deterministic ones fail the object, the others wait and retry.
    pub fn fault(&self) -> Fault {
        use tessera_sdk::ErrorKind;
        match &self.cause {
            Failure::Timeout { .. } | Failure::Busy { .. } => Fault::Transient,
            Failure::Plugin(_) if self.config_field().is_some() => Fault::Config,
            Failure::Plugin(e) if e.kind == ErrorKind::Internal => Fault::Plugin,
            Failure::Plugin(_) => Fault::Input,
            Failure::NotGranted(_) | Failure::Identity { .. } => Fault::Grant,
            Failure::MemoryLimit { .. }
            | Failure::Trap { .. }
            | Failure::CapabilityDenied { .. }
            | Failure::InvalidOutput(_)
            | Failure::OutputTooLarge { .. } => Fault::Plugin,
        }
    }

    /// The field of the plugin's own configuration at fault (`config`, `config.x`).
    pub fn config_field(&self) -> Option<&str> {
        self.field()
            .filter(|f| *f == "config" || f.starts_with("config.") || f.starts_with("config["))
    }

    /// The Runtime field at fault, when the plugin named one.
    pub fn field(&self) -> Option<&str> {
        match &self.cause {
            Failure::Plugin(err) => err.field.as_deref(),
            _ => None,
        }
    }
}
