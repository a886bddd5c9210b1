//! The one component loader: bytes become a checked, pre-instantiated plugin of the world
//! its component declares, compiled and checked once per component digest for both kinds
//! (one cache, as Kubewarden's evaluation environment keeps one per policy digest).

use std::sync::Arc;

use super::engine::WasmRuntime;
use super::inspect::Inspection;
use super::plugin::PluginInfo;
use super::{LoadError, LoadedModule, LoadedPlugin, PluginKind};
use crate::grants::Requests;

/// A compiled plugin of either world.
#[derive(Debug, Clone)]
pub enum Loaded {
    Extension(Arc<LoadedPlugin>),
    Module(Arc<LoadedModule>),
}

impl Loaded {
    pub fn kind(&self) -> PluginKind {
        match self {
            Self::Extension(_) => PluginKind::ShootExtension,
            Self::Module(_) => PluginKind::ModuleReconciler,
        }
    }

    /// What the component declares it needs.
    pub fn requests(&self) -> Option<&Requests> {
        self.inspection().requests.as_ref()
    }

    /// What the component is and declares.
    pub fn inspection(&self) -> &Inspection {
        match self {
            Self::Extension(p) => &p.inspection,
            Self::Module(m) => &m.inspection,
        }
    }

    /// Who the plugin says it is.
    pub fn info(&self) -> &PluginInfo {
        match self {
            Self::Extension(p) => &p.info,
            Self::Module(m) => &m.info,
        }
    }

    /// How long compiling (or deserializing) took, and whether it came from the
    /// precompiled cache.
    pub fn loading(&self) -> (std::time::Duration, bool) {
        match self {
            Self::Extension(p) => (p.load_time, p.from_cache),
            Self::Module(m) => (m.load_time, m.from_cache),
        }
    }
}

impl WasmRuntime {
    /// Load `bytes` as the kind its component declares (a component declaring neither is
    /// refused as a shoot extension would be, naming what it exports).
    pub fn load_any(&self, bytes: &[u8], source: &str) -> Result<Loaded, LoadError> {
        let kind = self.inspect(bytes, source)?.kind;
        self.load_kind(bytes, source, kind.unwrap_or(PluginKind::ShootExtension))
    }

    /// Load `bytes` as a plugin of `kind`; the same component loaded before (as this kind)
    /// is returned as it was.
    pub fn load_kind(
        &self,
        bytes: &[u8],
        source: &str,
        kind: PluginKind,
    ) -> Result<Loaded, LoadError> {
        let digest = super::inspect::sha256_hex(bytes);
        let known = self
            .loaded
            .lock()
            .expect("plugin map")
            .get(&digest)
            .cloned();
        if let Some(found) = known.filter(|l| l.kind() == kind) {
            return Ok(found);
        }
        let loaded = match kind {
            PluginKind::ShootExtension => {
                Loaded::Extension(Arc::new(self.load_uncached(bytes, source)?))
            }
            PluginKind::ModuleReconciler => {
                Loaded::Module(Arc::new(self.load_module_uncached(bytes, source)?))
            }
        };
        let mut cache = self.loaded.lock().expect("plugin map");
        cache.insert(digest, loaded.clone());
        Ok(loaded)
    }

    /// Load a shoot extension (see [`WasmRuntime::load_kind`]).
    pub fn load(&self, bytes: &[u8], source: &str) -> Result<Arc<LoadedPlugin>, LoadError> {
        match self.load_kind(bytes, source, PluginKind::ShootExtension)? {
            Loaded::Extension(plugin) => Ok(plugin),
            Loaded::Module(_) => Err(LoadError::Link {
                source_name: source.to_string(),
                message: "expected a shoot-extension plugin, found a module-reconciler plugin"
                    .into(),
            }),
        }
    }

    /// Load a module reconciler (see [`WasmRuntime::load_kind`]).
    pub fn load_module(&self, bytes: &[u8], source: &str) -> Result<Arc<LoadedModule>, LoadError> {
        match self.load_kind(bytes, source, PluginKind::ModuleReconciler)? {
            Loaded::Module(module) => Ok(module),
            Loaded::Extension(_) => Err(LoadError::Link {
                source_name: source.to_string(),
                message: "expected a module-reconciler plugin, found a shoot-extension plugin"
                    .into(),
            }),
        }
    }
}
