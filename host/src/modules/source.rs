//! Which plugin version runs a module. The controller reads the catalog the Plugin
//! controller fills (a module's plugin is the `Plugin` of the same name, resolved by
//! channel); `tessera modules apply` reads component files from a directory.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use crate::grants::Grants;
use crate::plugins::{Catalog, ModuleSettings, Resolved, first_party_requests};
use crate::wasm::Loaded;
use crate::wasm::inspect::Inspection;
use crate::wasm::{Limits, LoadedModule, WasmRuntime};

/// A plugin version that can run a module.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub(crate) version: String,
    /// `sha256:` of the component.
    pub(crate) digest: String,
    pub(crate) plugin: Arc<LoadedModule>,
    pub(crate) limits: Limits,
    /// The Plugin's configuration; the module's configuration is merged over it.
    pub(crate) defaults: Option<Value>,
    /// Keys of `defaults` the module's configuration may not replace.
    pub(crate) locked_config: Vec<String>,
    /// What the operator granted the plugin.
    pub(crate) grants: Arc<Grants>,
    /// The channel permits going below the installed version.
    pub(crate) allow_downgrade: bool,
    /// The ModuleSets the module is offered to; `None`: every set.
    pub(crate) module_set_selector: Option<LabelSelector>,
    /// Upgrading to this version waits for a maintenance window.
    pub(crate) requires_downtime: bool,
    /// The channel's shadow version: rendered and compared, never applied.
    pub(crate) shadow: Option<Box<Candidate>>,
}

/// Where module plugins come from.
pub trait ModuleSource: Send + Sync {
    /// The version `channel` offers for `module`, or why there is none.
    fn resolve(&self, module: &str, channel: &str) -> Result<Candidate, String>;
    /// One specific version, to keep an installed version when a downgrade is refused.
    fn version(&self, module: &str, version: &str) -> Option<Candidate>;
}

/// Plugins resolved from `Plugin` resources.
pub(crate) struct CatalogSource {
    pub(crate) catalog: Arc<Catalog>,
}

fn candidate(
    module: &str,
    resolved: &Resolved,
    entry: &crate::plugins::PluginEntry,
    allow_downgrade: bool,
) -> Result<Candidate, String> {
    let Loaded::Module(plugin) = &resolved.loaded else {
        return Err(format!(
            "Plugin {module} is a {} plugin, not a module-reconciler",
            resolved.loaded.kind()
        ));
    };
    Ok(Candidate {
        version: resolved.version.clone(),
        digest: resolved.component_digest.clone(),
        plugin: plugin.clone(),
        limits: entry.limits.apply(Limits::default()),
        defaults: entry.config.clone(),
        locked_config: locked(&entry.locked_config, &plugin.inspection),
        grants: Arc::new(entry.grants.clone()),
        allow_downgrade,
        module_set_selector: entry.module_set_selector.clone(),
        requires_downtime: entry.downtime.contains(&resolved.version),
        shadow: None,
    })
}

impl ModuleSource for CatalogSource {
    fn resolve(&self, module: &str, channel: &str) -> Result<Candidate, String> {
        let entry = self.catalog.get(module)?;
        let chosen = entry.channel(module, channel)?;
        let mut found = candidate(module, &chosen.current, &entry, chosen.allow_downgrade)?;
        found.shadow = chosen
            .shadow
            .as_ref()
            .and_then(|s| candidate(module, s, &entry, false).ok())
            .map(Box::new);
        Ok(found)
    }

    fn version(&self, module: &str, version: &str) -> Option<Candidate> {
        let entry = self.catalog.get(module).ok()?;
        let resolved = entry.versions.get(version)?;
        candidate(module, resolved, &entry, false).ok()
    }
}

/// The operator's locked keys and the ones the plugin declares for itself.
fn locked(operator: &[String], inspection: &Inspection) -> Vec<String> {
    let declared = inspection
        .requests
        .iter()
        .flat_map(|r| r.locked_config.iter().cloned());
    let mut all: Vec<String> = operator.iter().cloned().chain(declared).collect();
    all.sort();
    all.dedup();
    all
}

/// `<dir>/<module>.wasm` (or an explicit file per module); one version per module, every
/// channel. Settings (grants, limits, configuration) come from the configuration file's
/// `modules` section.
pub struct DirectorySource {
    pub(crate) dir: PathBuf,
    pub(crate) files: HashMap<String, PathBuf>,
    pub(crate) settings: BTreeMap<String, ModuleSettings>,
    pub(crate) wasm: Arc<WasmRuntime>,
    loaded: Mutex<HashMap<String, Candidate>>,
}

impl DirectorySource {
    pub fn new(
        dir: PathBuf,
        files: HashMap<String, PathBuf>,
        settings: BTreeMap<String, ModuleSettings>,
        wasm: Arc<WasmRuntime>,
    ) -> Self {
        Self {
            dir,
            files,
            settings,
            wasm,
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// The configured grants; a first-party plugin from the plugin directory gets what it
    /// declares.
    fn grants(&self, module: &str, plugin: &LoadedModule, from_dir: bool) -> Grants {
        match self.settings.get(module).and_then(|s| s.grants.clone()) {
            Some(grants) => grants,
            None if from_dir => first_party_requests(&plugin.info.name)
                .filter(|_| plugin.info.name == module)
                .map(|r| r.grants)
                .unwrap_or_default(),
            None => Grants::default(),
        }
    }
}

impl ModuleSource for DirectorySource {
    fn resolve(&self, module: &str, _channel: &str) -> Result<Candidate, String> {
        if let Some(found) = self.loaded.lock().expect("source lock").get(module) {
            return Ok(found.clone());
        }
        let from_dir = !self.files.contains_key(module);
        let path = self
            .files
            .get(module)
            .cloned()
            .unwrap_or_else(|| self.dir.join(format!("{module}.wasm")));
        let bytes = std::fs::read(&path)
            .map_err(|e| format!("module {module}: cannot read {}: {e}", path.display()))?;
        let plugin = self
            .wasm
            .load_module(&bytes, &path.display().to_string())
            .map_err(|e| format!("module {module}: {e}"))?;
        let settings = self.settings.get(module).cloned().unwrap_or_default();
        let found = Candidate {
            version: plugin.info.version.clone(),
            digest: plugin.inspection.digest.clone(),
            grants: Arc::new(self.grants(module, &plugin, from_dir)),
            locked_config: locked(&settings.locked_config, &plugin.inspection),
            plugin,
            limits: settings.limits.apply(Limits::default()),
            defaults: settings.config,
            allow_downgrade: false,
            module_set_selector: None,
            requires_downtime: false,
            shadow: None,
        };
        self.loaded
            .lock()
            .expect("source lock")
            .insert(module.to_string(), found.clone());
        Ok(found)
    }

    fn version(&self, module: &str, version: &str) -> Option<Candidate> {
        self.resolve(module, "")
            .ok()
            .filter(|c| c.version == version)
    }
}
