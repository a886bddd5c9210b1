//! The shoot-extension plugin kind: one step of the Runtime → Shoot chain.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::PluginError;
use crate::models::{Runtime, Shoot};

/// Whether the Shoot is being created or an existing one patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    #[default]
    Create,
    Patch,
}

/// What a shoot extension receives, parsed and typed.
#[derive(Debug, Clone)]
pub struct ExtendInput<C> {
    pub runtime: Runtime,
    /// The draft produced by the plugins before this one.
    pub draft: Shoot,
    pub operation: Operation,
    /// The Shoot on the Gardener side, when patching.
    pub current: Option<Shoot>,
    pub config: C,
}

/// What a shoot extension returns.
#[derive(Debug, Clone)]
pub struct ExtendOutput {
    pub shoot: Shoot,
    pub warnings: Vec<String>,
}

impl ExtendOutput {
    /// An output without warnings.
    pub fn new(shoot: Shoot) -> Self {
        Self {
            shoot,
            warnings: Vec::new(),
        }
    }

    /// An output with warnings.
    pub fn with_warnings(shoot: Shoot, warnings: Vec<String>) -> Self {
        Self { shoot, warnings }
    }

    /// Add a warning.
    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }
}

/// A shoot extension: a pure function from (Runtime, draft, current Shoot, config) to a new
/// draft. It must not drop fields it does not know: modify the typed draft in place.
pub trait ShootExtension {
    /// Stable plugin name, used in the chain configuration and in error messages.
    const NAME: &'static str;
    /// One line for `tessera plugin inspect`.
    const DESCRIPTION: &'static str;
    /// The plugin's configuration. `{}` (no configuration) must deserialize, so use
    /// `#[serde(default)]` with a `Default` holding the shipped defaults.
    type Config: DeserializeOwned;

    fn extend(input: ExtendInput<Self::Config>) -> Result<ExtendOutput, PluginError>;
}
