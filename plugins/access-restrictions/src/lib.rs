//! `access-restrictions`: `eu-access-only` for platform regions that require it.

use serde::Deserialize;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct AccessRestrictions;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Platform regions whose clusters are restricted to EU access.
    pub eu_access_platform_regions: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            eu_access_platform_regions: vec!["cf-eu11".into(), "cf-ch20".into()],
        }
    }
}

const EU_ACCESS_ONLY: &str = "eu-access-only";

impl ShootExtension for AccessRestrictions {
    const NAME: &'static str = "access-restrictions";
    const DESCRIPTION: &'static str = "eu-access-only for EU platform regions";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let platform_region = &input.runtime.spec.shoot.platform_region;
        let mut shoot = input.draft;
        if input
            .config
            .eu_access_platform_regions
            .contains(platform_region)
        {
            let list = shoot.spec.access_restrictions.get_or_insert_with(Vec::new);
            if !list.iter().any(|r| r["name"] == EU_ACCESS_ONLY) {
                list.push(serde_json::json!({ "name": EU_ACCESS_ONLY }));
            }
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(AccessRestrictions);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(AccessRestrictions);
