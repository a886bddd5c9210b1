//! `deletion`: Gardener's deletion confirmation annotation once the Runtime is being deleted
//! (or up front when configured). Force deletion is no plugin's business: Gardener refuses
//! the annotation unless the Shoot is being deleted and its last errors carry one of five
//! codes (gardener pkg/api/core/validation/shoot.go `ValidateForceDeletion`), so the host
//! sets it then, when its operator asked for it (`--force-deletion`).

use serde::Deserialize;
use tessera_sdk::models::annotations::CONFIRM_DELETION;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct Deletion;

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Confirm deletion on every Shoot up front, not only once the Runtime is deleted.
    pub always_confirm: bool,
}

impl ShootExtension for Deletion {
    const NAME: &'static str = "deletion";
    const DESCRIPTION: &'static str = "Deletion confirmation annotation";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let deleting = input.runtime.metadata.deletion_timestamp.is_some();
        let mut shoot = input.draft;
        let annotations = &mut shoot.metadata.annotations;
        if deleting || input.config.always_confirm {
            annotations.insert(CONFIRM_DELETION.into(), "true".into());
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(Deletion);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Deletion);
