//! `access-restrictions`: `eu-access-only`, with its options, for platform regions that
//! require it (KIM's `restrictions.ExtendWithAccessRestriction`).

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct AccessRestrictions;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Platform regions whose clusters are restricted to EU access (KIM's `regions`).
    pub eu_access_platform_regions: Vec<String>,
    /// Options of the restriction (KIM sets both of Gardener's EU-access options).
    pub eu_access_options: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        let regions = ["cf-eu11", "cf-ch20", "cf-eu01", "cf-eu02", "cf-eu31"];
        let options = [
            "support.gardener.cloud/eu-access-for-cluster-addons",
            "support.gardener.cloud/eu-access-for-cluster-nodes",
        ];
        Self {
            eu_access_platform_regions: regions.map(String::from).to_vec(),
            eu_access_options: options.map(|o| (o.into(), "true".into())).into(),
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
            let options = &input.config.eu_access_options;
            if let Some(entry) = list.iter_mut().find(|r| r["name"] == EU_ACCESS_ONLY)
                && !options.is_empty()
            {
                let have = entry["options"].as_object().cloned().unwrap_or_default();
                let mut merged: serde_json::Map<_, _> = options
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::json!(v)))
                    .collect();
                merged.extend(have);
                entry["options"] = serde_json::Value::Object(merged);
            }
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(AccessRestrictions);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(AccessRestrictions);
