//! The plugins resolved from `Plugin` resources, by name, channel and version: what the
//! Plugin controller publishes and Runtime (and module) reconciles read. Entries are
//! replaced whole, so a call that started on one version finishes on it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use super::config::LimitsOverride;
use crate::grants::Grants;
use crate::wasm::Loaded;
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
    /// The ModuleSets the module is offered to (the Plugin's `spec.moduleSetSelector`).
    pub module_set_selector: Option<LabelSelector>,
    /// Installed on every matching ModuleSet (the Plugin's `spec.mandatory`).
    pub mandatory: Option<crate::crd::Mandatory>,
    /// Versions whose upgrade waits for a maintenance window (`requiresDowntime`).
    pub downtime: std::collections::BTreeSet<String>,
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
                let print = (
                    c.current.version.clone(),
                    c.current.component_digest.clone(),
                    c.shadow.as_ref().map(|s| s.component_digest.clone()),
                    c.allow_downgrade,
                );
                (name.clone(), print)
            })
            .collect();
        let config = self
            .config
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default();
        let shared = format!(
            "{config}{:?}{:?}{:?}{:?}{:?}{:?}",
            self.grants,
            self.locked_config,
            self.limits,
            self.module_set_selector,
            self.mandatory,
            self.downtime
        );
        Fingerprint { channels, shared }
    }
}

/// One channel as its consumers see it: version, component digest, shadow digest and
/// allowDowngrade.
type ChannelPrint = (String, String, Option<String>, bool);

/// What consumers of one plugin depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    channels: BTreeMap<String, ChannelPrint>,
    /// The configuration, grants, locked keys and limits: every channel runs with them.
    shared: String,
}

impl Fingerprint {
    /// Which channels changed from `before` to `after` (`None`: no entry); `None` when
    /// nothing a consumer sees did.
    fn changes(before: Option<&Self>, after: Option<&Self>) -> Option<ChangedChannels> {
        let (before, after) = match (before, after) {
            (None, None) => return None,
            (Some(before), Some(after)) if before.shared == after.shared => (before, after),
            _ => return Some(ChangedChannels::All),
        };
        let changed: BTreeSet<String> = before
            .channels
            .keys()
            .chain(after.channels.keys())
            .filter(|name| before.channels.get(*name) != after.channels.get(*name))
            .cloned()
            .collect();
        (!changed.is_empty()).then_some(ChangedChannels::Some(changed))
    }
}

/// Which channels of a plugin a catalog change concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangedChannels {
    /// The plugin appeared or went away, or what every channel runs with changed (its
    /// configuration, grants, locked keys or limits).
    All,
    /// Only these channels' version, digests or allowDowngrade changed (or they appeared
    /// or went away).
    Some(BTreeSet<String>),
}

impl ChangedChannels {
    /// Whether a consumer of `channel` sees the change.
    pub fn contains(&self, channel: &str) -> bool {
        match self {
            Self::All => true,
            Self::Some(channels) => channels.contains(channel),
        }
    }
}

/// One plugin changed in the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogChange {
    /// The `Plugin` resource.
    pub plugin: String,
    pub channels: ChangedChannels,
}

impl CatalogChange {
    /// Whether a consumer of `plugin` on `channel` sees the change.
    pub fn touches(&self, plugin: &str, channel: &str) -> bool {
        self.plugin == plugin && self.channels.contains(channel)
    }
}

/// What a catalog subscriber hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogWake {
    Changed(CatalogChange),
    /// The subscriber fell behind and missed changes: anything may have changed, so
    /// every consumer looks again.
    Lagged,
}

impl CatalogWake {
    /// Whether a consumer of `plugin` on `channel` must look again.
    pub fn touches(&self, plugin: &str, channel: &str) -> bool {
        match self {
            Self::Changed(change) => change.touches(plugin, channel),
            Self::Lagged => true,
        }
    }

    /// Whether a consumer of `plugin` on any channel must look again.
    pub fn touches_plugin(&self, plugin: &str) -> bool {
        match self {
            Self::Changed(change) => change.plugin == plugin,
            Self::Lagged => true,
        }
    }
}

/// Changes kept for a subscriber that is behind; beyond them it hears [`CatalogWake::Lagged`].
const CHANGE_BACKLOG: usize = 1024;

/// All resolved plugins of the host.
pub struct Catalog {
    plugins: RwLock<HashMap<String, Arc<PluginEntry>>>,
    /// Why a plugin has no entry at all (never resolved, invalid spec).
    errors: RwLock<HashMap<String, String>>,
    /// Configurations a plugin refused while rendering: plugin → (the configuration, why).
    /// Reported on the Plugin; forgotten once its configuration changes.
    refused_configs: RwLock<HashMap<String, (String, String)>>,
    /// Each change of a plugin, for Runtimes and ModuleSets to wake the ones using it.
    changed: tokio::sync::broadcast::Sender<CatalogChange>,
    /// Ticks when a plugin refused its configuration (wakes the Plugin controller).
    refused: tokio::sync::watch::Sender<u64>,
}

impl Default for Catalog {
    fn default() -> Self {
        Self {
            plugins: RwLock::default(),
            errors: RwLock::default(),
            refused_configs: RwLock::default(),
            changed: tokio::sync::broadcast::Sender::new(CHANGE_BACKLOG),
            refused: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Catalog {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The mandatory modules: each Plugin that declares one, with where and at which
    /// version it is installed.
    pub fn mandatory(&self) -> Vec<(String, crate::crd::Mandatory)> {
        let plugins = self.plugins.read().expect("catalog lock");
        let mut out: Vec<_> = plugins
            .iter()
            .filter_map(|(name, e)| Some((name.clone(), e.mandatory.clone()?)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
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

    /// Replace plugin `name`'s entry; Runtimes and ModuleSets are told when a channel's
    /// version or digests, or the Plugin's configuration, changed.
    pub fn publish(&self, name: &str, entry: PluginEntry) {
        let after = entry.fingerprint();
        let before = self
            .plugins
            .write()
            .expect("catalog lock")
            .insert(name.to_string(), Arc::new(entry));
        self.errors.write().expect("catalog lock").remove(name);
        let before = before.map(|b| b.fingerprint());
        self.announce(name, Fingerprint::changes(before.as_ref(), Some(&after)));
    }

    /// Tell subscribers (there may be none: nothing to do then).
    fn announce(&self, plugin: &str, channels: Option<ChangedChannels>) {
        if let Some(channels) = channels {
            let plugin = plugin.to_string();
            let _ = self.changed.send(CatalogChange { plugin, channels });
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
        let before = removed.map(|r| r.fingerprint());
        self.announce(name, Fingerprint::changes(before.as_ref(), None));
    }

    /// Every change from now on; a subscriber that falls behind hears
    /// [`CatalogWake::Lagged`] instead of the changes it missed, never nothing.
    pub fn subscribe(&self) -> impl futures::Stream<Item = CatalogWake> + Send + 'static {
        use tokio::sync::broadcast::error::RecvError;
        futures::stream::unfold(self.changed.subscribe(), |mut rx| async move {
            let wake = match rx.recv().await {
                Ok(change) => CatalogWake::Changed(change),
                Err(RecvError::Lagged(_)) => CatalogWake::Lagged,
                Err(RecvError::Closed) => return None,
            };
            Some((wake, rx))
        })
    }

    /// Number of plugins with an entry.
    pub fn len(&self) -> usize {
        self.plugins.read().expect("catalog lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use serde_json::json;

    use super::*;

    fn print(channels: &[(&str, &str, &str)], shared: &str) -> Fingerprint {
        Fingerprint {
            channels: channels
                .iter()
                .map(|(name, version, digest)| {
                    let print = (version.to_string(), digest.to_string(), None, false);
                    (name.to_string(), print)
                })
                .collect(),
            shared: shared.to_string(),
        }
    }

    fn some(channels: &[&str]) -> Option<ChangedChannels> {
        Some(ChangedChannels::Some(
            channels.iter().map(|c| c.to_string()).collect(),
        ))
    }

    #[test]
    fn a_channel_that_moves_is_the_only_one_changed() {
        let before = print(&[("regular", "1.0.0", "a"), ("fast", "1.0.0", "a")], "");
        let after = print(&[("regular", "1.0.0", "a"), ("fast", "1.1.0", "b")], "");
        assert_eq!(
            Fingerprint::changes(Some(&before), Some(&after)),
            some(&["fast"])
        );
    }

    #[test]
    fn a_moved_digest_a_new_and_a_gone_channel_are_changes() {
        let before = print(&[("regular", "1.0.0", "a"), ("old", "1.0.0", "a")], "");
        let after = print(&[("regular", "1.0.0", "b"), ("new", "1.0.0", "a")], "");
        assert_eq!(
            Fingerprint::changes(Some(&before), Some(&after)),
            some(&["new", "old", "regular"])
        );
    }

    #[test]
    fn a_shadow_or_allow_downgrade_change_is_the_channels() {
        let before = print(&[("regular", "1.0.0", "a")], "");
        let mut after = before.clone();
        after.channels.get_mut("regular").unwrap().2 = Some("b".into());
        assert_eq!(
            Fingerprint::changes(Some(&before), Some(&after)),
            some(&["regular"])
        );
        let mut after = before.clone();
        after.channels.get_mut("regular").unwrap().3 = true;
        assert_eq!(
            Fingerprint::changes(Some(&before), Some(&after)),
            some(&["regular"])
        );
    }

    #[test]
    fn configuration_or_a_plugin_coming_or_going_changes_every_channel() {
        let before = print(&[("regular", "1.0.0", "a")], "{}");
        let after = print(&[("regular", "1.0.0", "a")], r#"{"x":1}"#);
        let all = Some(ChangedChannels::All);
        assert_eq!(Fingerprint::changes(Some(&before), Some(&after)), all);
        assert_eq!(Fingerprint::changes(None, Some(&after)), all);
        assert_eq!(Fingerprint::changes(Some(&before), None), all);
    }

    #[test]
    fn nothing_a_consumer_sees_changed_is_no_change() {
        let before = print(&[("regular", "1.0.0", "a")], "");
        assert_eq!(Fingerprint::changes(Some(&before), Some(&before)), None);
        assert_eq!(Fingerprint::changes(None, None), None);
    }

    fn entry(config: serde_json::Value) -> PluginEntry {
        PluginEntry {
            kind: PluginKind::ShootExtension,
            config: Some(config),
            limits: LimitsOverride::default(),
            grants: Grants::default(),
            locked_config: Vec::new(),
            module_set_selector: None,
            mandatory: None,
            downtime: Default::default(),
            versions: BTreeMap::new(),
            channels: BTreeMap::new(),
            channel_errors: BTreeMap::new(),
        }
    }

    #[tokio::test]
    async fn subscribers_hear_which_plugin_changed_and_nothing_for_a_same_entry() {
        let catalog = Catalog::new();
        let mut wakes = Box::pin(catalog.subscribe());
        catalog.publish("dash", entry(json!({})));
        catalog.publish("dash", entry(json!({})));
        catalog.remove("dash");
        let all = |plugin: &str| {
            CatalogWake::Changed(CatalogChange {
                plugin: plugin.into(),
                channels: ChangedChannels::All,
            })
        };
        assert_eq!(wakes.next().await, Some(all("dash")));
        assert_eq!(wakes.next().await, Some(all("dash")));
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_hears_lagged_not_nothing() {
        let catalog = Catalog::new();
        let mut wakes = Box::pin(catalog.subscribe());
        for n in 0..=CHANGE_BACKLOG {
            catalog.publish("dash", entry(json!({ "n": n })));
        }
        assert_eq!(wakes.next().await, Some(CatalogWake::Lagged));
        assert!(matches!(wakes.next().await, Some(CatalogWake::Changed(_))));
    }
}
