//! The host's chain with registry steps left open: each Runtime gets a concrete chain from
//! the catalog, by the channels it asks for, with downgrades held back and shadow versions
//! set aside for comparison.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::chain::{ChainError, ChainStep, ShootChain, file_step};
use super::channels::{Catalog, CatalogWake, PluginEntry, Resolved};
use super::config::{ChainConfig, DEFAULT_CHANNEL, LimitsOverride, Source};
use super::identity::DEFAULT_PROJECT;
use crate::crd::PluginStamp;
use crate::grants::Grants;
use crate::wasm::Loaded;
use crate::wasm::{Limits, WasmRuntime};

/// A step whose component comes from a `Plugin` resource.
#[derive(Debug, Clone)]
pub struct RegistryStep {
    /// The step's name in the chain (the component's own name).
    pub name: String,
    /// The `Plugin` resource.
    pub plugin: String,
    /// Channel configured by the host (the Runtime may choose another).
    pub channel: Option<String>,
    /// Host configuration over the Plugin's own.
    pub config: Option<serde_json::Value>,
    pub limits: LimitsOverride,
    /// Host grants instead of the Plugin's own.
    pub grants: Option<Grants>,
}

/// One step of the template.
#[derive(Debug, Clone)]
pub enum TemplateStep {
    Fixed(ChainStep),
    Registry(RegistryStep),
}

/// The configured chain.
#[derive(Debug, Clone)]
pub struct ChainTemplate {
    pub steps: Vec<TemplateStep>,
    pub default_channel: String,
    /// The Gardener project Shoots live in.
    pub project: String,
    /// `enableCredentialBinding` of the configuration.
    pub credentials_binding: bool,
    /// `defaultSharedIASTenant` of the configuration.
    pub default_oidc_tenant: Option<tessera_sdk::models::OidcConfig>,
    /// `defaultOperatorOidc` of the configuration.
    pub default_operator_oidc: Option<tessera_sdk::models::OidcConfig>,
    defaults: Limits,
}

/// Channels a Runtime asks for (from its annotations).
#[derive(Debug, Clone, Default)]
pub struct ChannelChoice {
    /// `tessera.dev/channel`.
    pub all: Option<String>,
    /// `channel.tessera.dev/<plugin>`.
    pub per_plugin: BTreeMap<String, String>,
    /// `tessera.dev/allow-downgrade: "true"`.
    pub allow_downgrade: bool,
}

/// A version kept back instead of a lower one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldBack {
    pub plugin: String,
    pub channel: String,
    pub kept: String,
    pub refused: String,
}

/// A shadow version of one step.
#[derive(Debug, Clone)]
pub struct Shadow {
    /// Index of the step it replaces.
    pub index: usize,
    pub channel: String,
    pub step: ChainStep,
    pub digest: String,
}

/// The concrete chain for one Runtime.
#[derive(Debug, Clone)]
pub struct ResolvedChain {
    pub chain: ShootChain,
    pub shadows: Vec<Shadow>,
    pub held_back: Vec<HeldBack>,
}

/// A registry step cannot be resolved.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Unavailable {
    pub plugin: String,
    pub message: String,
}

fn semver_lower(candidate: &str, applied: &str) -> bool {
    crate::version::is_downgrade(applied, candidate)
}

impl ChainTemplate {
    /// Load the file steps; registry steps are resolved per Runtime.
    pub fn load(
        rt: &WasmRuntime,
        config: &ChainConfig,
        plugin_dir: &Path,
    ) -> Result<Self, ChainError> {
        let defaults = config.limits.apply(Limits::default());
        let mut steps = Vec::new();
        for name in config.order() {
            let settings = config.plugins.get(&name).cloned().unwrap_or_default();
            match settings.source.unwrap_or(config.source) {
                Source::Files => steps.push(TemplateStep::Fixed(file_step(
                    rt, config, plugin_dir, &name, &settings, defaults,
                )?)),
                Source::Registry => steps.push(TemplateStep::Registry(RegistryStep {
                    plugin: settings.plugin.clone().unwrap_or_else(|| name.clone()),
                    name,
                    channel: settings.channel.clone(),
                    config: settings.config.clone(),
                    limits: settings.limits,
                    grants: settings.grants.clone(),
                })),
            }
        }
        Ok(Self {
            steps,
            default_channel: config
                .channel
                .clone()
                .unwrap_or_else(|| DEFAULT_CHANNEL.to_string()),
            project: config.project().to_string(),
            credentials_binding: config.enable_credential_binding,
            default_oidc_tenant: config.default_shared_ias_tenant.clone(),
            default_operator_oidc: config.default_operator_oidc.clone(),
            defaults,
        })
    }

    /// A template of file steps only.
    pub fn fixed(chain: &ShootChain) -> Self {
        Self {
            steps: chain
                .steps
                .iter()
                .cloned()
                .map(TemplateStep::Fixed)
                .collect(),
            default_channel: DEFAULT_CHANNEL.to_string(),
            project: DEFAULT_PROJECT.to_string(),
            credentials_binding: false,
            default_oidc_tenant: None,
            default_operator_oidc: None,
            defaults: Limits::default(),
        }
    }

    /// Whether any step comes from a registry.
    pub fn uses_registry(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, TemplateStep::Registry(_)))
    }

    /// The `Plugin` resource whose `spec.config` chain step `step` runs with (`None`: a
    /// fixed step, or one the chain configuration configures itself).
    pub fn config_owner(&self, step: &str) -> Option<&str> {
        self.steps.iter().find_map(|s| match s {
            TemplateStep::Registry(r) if r.name == step && r.config.is_none() => {
                Some(r.plugin.as_str())
            }
            _ => None,
        })
    }

    /// The channel registry step `step` runs on for a Runtime asking for `choice`: the
    /// step's own annotation, else the Runtime's channel, else the host's channel for the
    /// step, else the default. The one place this order is decided: resolving and waking
    /// must agree.
    pub fn channel_of<'a>(&'a self, step: &'a RegistryStep, choice: &'a ChannelChoice) -> &'a str {
        choice
            .per_plugin
            .get(&step.name)
            .or(choice.all.as_ref())
            .or(step.channel.as_ref())
            .unwrap_or(&self.default_channel)
    }

    /// Whether the chain of a Runtime asking for `choice` may differ after `wake`: a
    /// registry step runs the changed plugin on a changed channel.
    pub fn woken_by(&self, choice: &ChannelChoice, wake: &CatalogWake) -> bool {
        self.steps.iter().any(|step| match step {
            TemplateStep::Registry(step) => {
                wake.touches(&step.plugin, self.channel_of(step, choice))
            }
            TemplateStep::Fixed(_) => false,
        })
    }

    fn step_of(
        &self,
        step: &RegistryStep,
        resolved: &Resolved,
        channel: &str,
        entry: &PluginEntry,
    ) -> Result<ChainStep, Unavailable> {
        let Loaded::Extension(plugin) = &resolved.loaded else {
            return Err(Unavailable {
                plugin: step.plugin.clone(),
                message: format!(
                    "Plugin {} is a module reconciler, not a shoot extension",
                    step.plugin
                ),
            });
        };
        if plugin.name() != step.name {
            return Err(Unavailable {
                plugin: step.plugin.clone(),
                message: format!(
                    "Plugin {} version {} says its name is {:?}, but the chain step is {:?}",
                    step.plugin,
                    resolved.version,
                    plugin.name(),
                    step.name
                ),
            });
        }
        Ok(ChainStep {
            plugin: plugin.clone(),
            version: resolved.version.clone(),
            channel: Some(channel.to_string()),
            config: step
                .config
                .as_ref()
                .or(entry.config.as_ref())
                .map(|c| c.to_string())
                .unwrap_or_else(|| "{}".to_string()),
            limits: step.limits.apply(entry.limits.apply(self.defaults)),
            paths: Arc::new(
                step.grants
                    .as_ref()
                    .unwrap_or(&entry.grants)
                    .path_patterns(),
            ),
            memo_key: Default::default(),
            view: Default::default(),
        })
    }

    /// The chain for a Runtime that asks for `choice` and was last rendered with
    /// `applied`.
    pub fn resolve(
        &self,
        catalog: &Catalog,
        choice: &ChannelChoice,
        applied: &[PluginStamp],
    ) -> Result<ResolvedChain, Unavailable> {
        let mut steps = Vec::with_capacity(self.steps.len());
        let mut shadows = Vec::new();
        let mut held_back = Vec::new();
        for (index, step) in self.steps.iter().enumerate() {
            let step = match step {
                TemplateStep::Fixed(step) => {
                    steps.push(step.clone());
                    continue;
                }
                TemplateStep::Registry(step) => step,
            };
            let unavailable = |message: String| Unavailable {
                plugin: step.plugin.clone(),
                message,
            };
            let entry = catalog.get(&step.plugin).map_err(unavailable)?;
            let channel = self.channel_of(step, choice).to_string();
            let entry_channel = entry.channel(&step.plugin, &channel).map_err(unavailable)?;
            let mut current = &entry_channel.current;
            if let Some(PluginStamp {
                version, digest, ..
            }) = applied.iter().find(|a| a.name == step.name)
                && semver_lower(&current.version, version)
                && !(entry_channel.allow_downgrade || choice.allow_downgrade)
            {
                match entry.by_component(digest) {
                    Some(kept) => {
                        held_back.push(HeldBack {
                            plugin: step.name.clone(),
                            channel: channel.clone(),
                            kept: kept.version.clone(),
                            refused: current.version.clone(),
                        });
                        current = kept;
                    }
                    None => {
                        return Err(unavailable(format!(
                            "Plugin {} channel {channel} offers {} below the applied {version}, which is no longer listed; set allowDowngrade on the channel or tessera.dev/allow-downgrade on the Runtime",
                            step.plugin, current.version
                        )));
                    }
                }
            }
            let chain_step = self.step_of(step, current, &channel, &entry)?;
            if let Some(shadow) = &entry_channel.shadow
                && shadow.component_digest != current.component_digest
            {
                shadows.push(Shadow {
                    index,
                    channel: channel.clone(),
                    step: self.step_of(step, shadow, &channel, &entry)?,
                    digest: shadow.component_digest.clone(),
                });
            }
            steps.push(chain_step);
        }
        Ok(ResolvedChain {
            chain: ShootChain { steps },
            shadows,
            held_back,
        })
    }
}

impl ResolvedChain {
    /// The chain with one shadow step in place of the current one.
    pub fn with_shadow(&self, shadow: &Shadow) -> ShootChain {
        let mut chain = self.chain.clone();
        chain.steps[shadow.index] = shadow.step.clone();
        chain
    }
}

/// Shared pieces a Runtime reconcile needs to resolve chains.
#[derive(Clone)]
pub struct Resolver {
    pub template: Arc<ChainTemplate>,
    pub catalog: Arc<Catalog>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::{CatalogChange, ChangedChannels};

    fn registry(name: &str, plugin: &str, channel: Option<&str>) -> TemplateStep {
        TemplateStep::Registry(RegistryStep {
            name: name.into(),
            plugin: plugin.into(),
            channel: channel.map(Into::into),
            config: None,
            limits: LimitsOverride::default(),
            grants: None,
        })
    }

    /// Steps `stamp` (Plugin `stamp-plugin`, host channel none) and `dns` (Plugin `dns`,
    /// host channel `stable`); default `regular`.
    fn template() -> ChainTemplate {
        ChainTemplate {
            steps: vec![
                registry("stamp", "stamp-plugin", None),
                registry("dns", "dns", Some("stable")),
            ],
            default_channel: "regular".into(),
            project: DEFAULT_PROJECT.into(),
            credentials_binding: false,
            default_oidc_tenant: None,
            default_operator_oidc: None,
            defaults: Limits::default(),
        }
    }

    fn step(t: &ChainTemplate, index: usize) -> &RegistryStep {
        match &t.steps[index] {
            TemplateStep::Registry(step) => step,
            TemplateStep::Fixed(_) => unreachable!(),
        }
    }

    fn choice(all: Option<&str>, per_plugin: &[(&str, &str)]) -> ChannelChoice {
        ChannelChoice {
            all: all.map(Into::into),
            per_plugin: per_plugin
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            allow_downgrade: false,
        }
    }

    fn moved(plugin: &str, channels: &[&str]) -> CatalogWake {
        CatalogWake::Changed(CatalogChange {
            plugin: plugin.into(),
            channels: ChangedChannels::Some(channels.iter().map(|c| c.to_string()).collect()),
        })
    }

    #[test]
    fn the_step_annotation_wins_then_the_runtimes_then_the_hosts_then_the_default() {
        let t = template();
        let (stamp, dns) = (step(&t, 0), step(&t, 1));
        assert_eq!(t.channel_of(stamp, &choice(None, &[])), "regular");
        assert_eq!(t.channel_of(dns, &choice(None, &[])), "stable");
        assert_eq!(t.channel_of(dns, &choice(Some("fast"), &[])), "fast");
        let both = choice(Some("fast"), &[("dns", "rapid")]);
        assert_eq!(t.channel_of(dns, &both), "rapid");
        assert_eq!(t.channel_of(stamp, &both), "fast");
    }

    #[test]
    fn the_step_annotation_names_the_step_not_the_plugin() {
        let t = template();
        let by_plugin = choice(None, &[("stamp-plugin", "fast")]);
        assert_eq!(t.channel_of(step(&t, 0), &by_plugin), "regular");
        let by_step = choice(None, &[("stamp", "fast")]);
        assert_eq!(t.channel_of(step(&t, 0), &by_step), "fast");
    }

    #[test]
    fn a_moved_channel_wakes_only_runtimes_on_it() {
        let t = template();
        let fast = moved("stamp-plugin", &["fast"]);
        assert!(!t.woken_by(&choice(None, &[]), &fast));
        assert!(t.woken_by(&choice(None, &[("stamp", "fast")]), &fast));
        assert!(t.woken_by(&choice(Some("fast"), &[]), &fast));
        assert!(!t.woken_by(&choice(Some("fast"), &[("stamp", "regular")]), &fast));
        assert!(t.woken_by(&choice(None, &[]), &moved("dns", &["stable"])));
        assert!(!t.woken_by(&choice(None, &[]), &moved("dns", &["regular"])));
    }

    #[test]
    fn another_plugin_wakes_nobody_and_a_lag_or_a_whole_plugin_wakes_its_users() {
        let t = template();
        let nobody = choice(None, &[]);
        assert!(!t.woken_by(&nobody, &moved("other", &["regular"])));
        assert!(t.woken_by(&nobody, &CatalogWake::Lagged));
        let appeared = CatalogWake::Changed(CatalogChange {
            plugin: "stamp-plugin".into(),
            channels: ChangedChannels::All,
        });
        assert!(t.woken_by(&choice(Some("fast"), &[]), &appeared));
    }

    #[test]
    fn a_chain_of_files_is_woken_by_nothing() {
        let t = ChainTemplate {
            steps: Vec::new(),
            ..template()
        };
        assert!(!t.woken_by(&choice(None, &[]), &CatalogWake::Lagged));
    }
}
