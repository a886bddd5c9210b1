//! The plugins resolved from `Plugin` resources, by name, channel and version: what the
//! Plugin controller publishes and Runtime (and module) reconciles read. Entries are
//! replaced whole, so a call that started on one version finishes on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use super::config::LimitsOverride;
use super::fetch::Loaded;
use crate::grants::Grants;
use crate::wasm::PluginKind;

/// One loaded version.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub version: String,
    pub reference: String,
    pub manifest_digest: String,
    /// `sha256:` of the component.
    pub component_digest: String,
    /// Key id that verified the signature, if one was checked.
    pub verified_by: Option<String>,
    pub loaded: Loaded,
}

/// What a channel runs.
#[derive(Debug, Clone)]
pub struct ChannelEntry {
    pub current: Resolved,
    /// Rendered for comparison, never applied.
    pub shadow: Option<Resolved>,
    pub allow_downgrade: bool,
}

/// One `Plugin` resource as the host runs it.
#[derive(Debug, Clone)]
pub struct PluginEntry {
    pub kind: PluginKind,
    pub config: Option<serde_json::Value>,
    pub limits: LimitsOverride,
    /// What the operator granted the plugin (the Plugin's `spec.grants`).
    pub grants: Grants,
    /// Configuration keys a ModuleSet may not replace (the Plugin's `spec.lockedConfig`).
    pub locked_config: Vec<String>,
    /// Every listed version that loaded, by version.
    pub versions: BTreeMap<String, Resolved>,
    pub channels: BTreeMap<String, ChannelEntry>,
    /// Channels without a runnable version, and why.
    pub channel_errors: BTreeMap<String, String>,
}

impl PluginEntry {
    /// The channel `name`, or why it cannot be used.
    pub fn channel(&self, plugin: &str, name: &str) -> Result<&ChannelEntry, String> {
        if let Some(entry) = self.channels.get(name) {
            return Ok(entry);
        }
        match self.channel_errors.get(name) {
            Some(error) => Err(format!("Plugin {plugin} channel {name}: {error}")),
            None => Err(format!(
                "Plugin {plugin} has no channel {name} (channels: {})",
                self.channels
                    .keys()
                    .chain(self.channel_errors.keys())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// A loaded version with this component digest (to keep a version a Runtime has).
    pub fn by_component(&self, digest: &str) -> Option<&Resolved> {
        self.versions
            .values()
            .find(|r| r.component_digest == digest)
    }

    /// What a consumer's result depends on: per channel the version and digests, and the
    /// Plugin's configuration (module configuration is merged over it), limits and grants.
    fn fingerprint(&self) -> Fingerprint {
        let channels = self
            .channels
            .iter()
            .map(|(name, c)| {
                (
                    name.clone(),
                    c.current.version.clone(),
                    c.current.component_digest.clone(),
                    c.shadow.as_ref().map(|s| s.component_digest.clone()),
                    c.allow_downgrade,
                )
            })
            .collect();
        let config = self
            .config
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default();
        let rules = format!("{:?}{:?}{:?}", self.grants, self.locked_config, self.limits);
        (channels, config, rules)
    }
}

/// Per channel (name, version, digest, shadow digest, allowDowngrade), the config, and the
/// grants, locked keys and limits.
type Fingerprint = (
    Vec<(String, String, String, Option<String>, bool)>,
    String,
    String,
);

/// All resolved plugins of the host.
pub struct Catalog {
    plugins: RwLock<HashMap<String, Arc<PluginEntry>>>,
    /// Why a plugin has no entry at all (never resolved, invalid spec).
    errors: RwLock<HashMap<String, String>>,
    /// Configurations a plugin refused while rendering: plugin → (the configuration, why).
    /// Reported on the Plugin; forgotten once its configuration changes.
    refused_configs: RwLock<HashMap<String, (String, String)>>,
    changed: tokio::sync::watch::Sender<u64>,
    /// Ticks when a plugin refused its configuration (wakes the Plugin controller).
    refused: tokio::sync::watch::Sender<u64>,
}

impl Default for Catalog {
    fn default() -> Self {
        Self {
            plugins: RwLock::default(),
            errors: RwLock::default(),
            refused_configs: RwLock::default(),
            changed: tokio::sync::watch::Sender::new(0),
            refused: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Catalog {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The entry of plugin `name`, or why there is none.
    pub fn get(&self, name: &str) -> Result<Arc<PluginEntry>, String> {
        if let Some(entry) = self.plugins.read().expect("catalog lock").get(name) {
            return Ok(entry.clone());
        }
        Err(self
            .errors
            .read()
            .expect("catalog lock")
            .get(name)
            .map(|e| format!("Plugin {name}: {e}"))
            .unwrap_or_else(|| format!("Plugin {name} does not exist or is not resolved yet")))
    }

    /// Replace plugin `name`'s entry; Runtimes and ModuleSets are woken when a channel's
    /// version or digests, or the Plugin's configuration, changed.
    pub fn publish(&self, name: &str, entry: PluginEntry) {
        let fingerprint = entry.fingerprint();
        let before = self
            .plugins
            .write()
            .expect("catalog lock")
            .insert(name.to_string(), Arc::new(entry));
        self.errors.write().expect("catalog lock").remove(name);
        if before.is_none_or(|b| b.fingerprint() != fingerprint) {
            self.changed.send_modify(|g| *g += 1);
        }
    }

    /// Record why plugin `name` has no entry (an existing entry is kept: last good wins).
    pub fn set_error(&self, name: &str, error: String) {
        self.errors
            .write()
            .expect("catalog lock")
            .insert(name.to_string(), error);
    }

    /// Plugin `name` refused its own configuration while rendering: the fault is the
    /// Plugin's, so it is reported there (once per configuration).
    pub fn refuse_config(&self, name: &str, why: &str) {
        let Some(config) = self.config_text(name) else {
            return;
        };
        let entry = (config, why.to_string());
        let mut refused = self.refused_configs.write().expect("catalog lock");
        if refused.get(name) != Some(&entry) {
            refused.insert(name.to_string(), entry);
            self.refused.send_modify(|g| *g += 1);
        }
    }

    /// Why plugin `name` refused the configuration it has now, if it did.
    pub fn refused_config(&self, name: &str) -> Option<String> {
        let config = self.config_text(name)?;
        let refused = self.refused_configs.read().expect("catalog lock");
        refused
            .get(name)
            .filter(|(c, _)| *c == config)
            .map(|(_, why)| why.clone())
    }

    /// Ticks whenever a plugin refused its configuration.
    pub fn subscribe_refusals(&self) -> tokio::sync::watch::Receiver<u64> {
        self.refused.subscribe()
    }

    fn config_text(&self, name: &str) -> Option<String> {
        let plugins = self.plugins.read().expect("catalog lock");
        let entry = plugins.get(name)?;
        Some(
            entry
                .config
                .as_ref()
                .map(|c| c.to_string())
                .unwrap_or_default(),
        )
    }

    /// Forget plugin `name` (its resource is gone).
    pub fn remove(&self, name: &str) {
        let removed = self.plugins.write().expect("catalog lock").remove(name);
        self.errors.write().expect("catalog lock").remove(name);
        if removed.is_some() {
            self.changed.send_modify(|g| *g += 1);
        }
    }

    /// Ticks whenever a channel of some plugin changed.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Number of plugins with an entry.
    pub fn len(&self) -> usize {
        self.plugins.read().expect("catalog lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
