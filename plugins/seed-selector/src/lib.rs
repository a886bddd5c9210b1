//! `seed-selector`: pin the Shoot to seeds in its own region when the Runtime asks for it.

use serde::Deserialize;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct SeedSelector;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Seed label that carries the region.
    pub region_label: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            region_label: "seed.gardener.cloud/region".into(),
        }
    }
}

impl ShootExtension for SeedSelector {
    const NAME: &'static str = "seed-selector";
    const DESCRIPTION: &'static str = "Seed selector for enforceSeedLocation";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let rt = &input.runtime.spec.shoot;
        let mut shoot = input.draft;
        if rt.enforce_seed_location == Some(true) {
            shoot.spec.seed_selector = Some(serde_json::json!({
                "matchLabels": { input.config.region_label.as_str(): rt.region }
            }));
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(SeedSelector);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(SeedSelector);
