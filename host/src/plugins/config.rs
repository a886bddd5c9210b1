//! The chain configuration file (`tessera render --config`, and later the host's config).
//!
//! ```yaml
//! limits: {memoryMiB: 64, timeoutMs: 1000, outputKiB: 4096}   # defaults for every plugin
//! chain: [base, annotations, provider]                        # order; default: first-party
//! source: files                    # files (default) | registry: where steps come from
//! channel: regular                  # release channel of registry steps (default regular)
//! plugins:
//!   provider:
//!     file: ./my-provider.wasm        # default: <plugin dir>/<name>.wasm
//!     limits: {timeoutMs: 2000}
//!     config: {openstack: {floatingPoolName: FloatingIP-external-01}}
//!   dns:
//!     source: registry                # from the `Plugin` resource `dns` (or `plugin: NAME`)
//!     channel: fast
//! ```
//!
//! A Runtime can pick channels with the annotations `tessera.dev/channel` (every registry
//! step) and `channel.tessera.dev/<plugin>` (one step).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::catalog::FIRST_PARTY;
use crate::wasm::Limits;

/// Limits that override the defaults field by field.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsOverride {
    #[serde(rename = "memoryMiB")]
    pub memory_mib: Option<u64>,
    #[serde(rename = "timeoutMs")]
    pub timeout_ms: Option<u64>,
    #[serde(rename = "outputKiB")]
    pub output_kib: Option<u64>,
}

impl LimitsOverride {
    /// Apply on top of `base`.
    pub fn apply(&self, base: Limits) -> Limits {
        Limits {
            memory_mib: self.memory_mib.unwrap_or(base.memory_mib),
            timeout_ms: self.timeout_ms.unwrap_or(base.timeout_ms),
            output_kib: self.output_kib.unwrap_or(base.output_kib),
        }
    }
}

/// Where a chain step's component comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// A `.wasm` file (the plugin directory, or `file`).
    #[default]
    Files,
    /// A `Plugin` resource: its channel's version, pulled from an OCI registry.
    Registry,
}

/// Settings of one plugin in the chain.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSettings {
    /// Component file; relative paths are relative to the config file.
    pub file: Option<PathBuf>,
    #[serde(default)]
    pub limits: LimitsOverride,
    /// The plugin's configuration, passed as JSON (over the Plugin resource's).
    pub config: Option<serde_json::Value>,
    /// Where the component comes from [default: the chain's `source`].
    pub source: Option<Source>,
    /// The `Plugin` resource of a registry step [default: the step name].
    pub plugin: Option<String>,
    /// Release channel of a registry step [default: the chain's `channel`].
    pub channel: Option<String>,
}

/// A whole chain configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChainConfig {
    #[serde(default)]
    pub limits: LimitsOverride,
    pub chain: Option<Vec<String>>,
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginSettings>,
    /// Default source of steps.
    #[serde(default)]
    pub source: Source,
    /// Default release channel of registry steps [default: regular].
    pub channel: Option<String>,
    /// Directory the config file was read from (for relative `file` paths).
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

/// The configuration file is unusable.
#[derive(Debug, thiserror::Error)]
#[error("configuration {path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

/// The channel registry steps use unless configured otherwise.
pub const DEFAULT_CHANNEL: &str = "regular";

impl ChainConfig {
    /// Read a YAML configuration file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let err = |message: String| ConfigError {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let mut config: ChainConfig =
            serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?;
        for name in config.plugins.keys() {
            let in_chain = config.order().iter().any(|n| n == name);
            if !in_chain {
                return Err(err(format!(
                    "plugins.{name} is configured but not in the chain ({})",
                    config.order().join(", ")
                )));
            }
        }
        config.base_dir = path.parent().map(|p| p.to_path_buf());
        Ok(config)
    }

    /// Plugin names in chain order.
    pub fn order(&self) -> Vec<String> {
        self.chain
            .clone()
            .unwrap_or_else(|| FIRST_PARTY.iter().map(|s| s.to_string()).collect())
    }
}
