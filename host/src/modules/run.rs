//! One module's run on one target: who asks (the set and module), where (the target),
//! with which plugin version and configuration. The plugin conversation
//! (`conversation.rs`), the grant check (`check.rs`) and the install and
//! removal (`engine.rs`) are its steps.

use std::sync::Arc;

use super::source::Candidate;
use super::target::Target;
use super::types::Owner;
use crate::wasm::WasmRuntime;

/// One module to reconcile.
pub(crate) struct ModuleRun<'a> {
    pub(crate) target: &'a Target,
    pub(crate) wasm: &'a Arc<WasmRuntime>,
    /// `<namespace>/<name>` of the set.
    pub(crate) set: &'a str,
    pub(crate) module: &'a str,
    pub(crate) candidate: &'a Candidate,
    /// The module's configuration (the Plugin's defaults merged with the set's), JSON.
    pub(crate) config: String,
    /// The set allows taking over existing objects Tessera did not create.
    pub(crate) adopt: bool,
}

impl ModuleRun<'_> {
    pub(crate) fn owner(&self) -> Owner<'_> {
        Owner {
            set: self.set,
            module: self.module,
        }
    }

    /// `plugin <name> <version>`, for messages.
    pub(crate) fn plugin(&self) -> String {
        let info = &self.candidate.plugin.info;
        format!("plugin {} {}", info.name, info.version)
    }
}
