//! `exposure-class`: the exposure class for providers that need one (OpenStack).

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct ExposureClass;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Provider type → exposure class name; providers not listed get none.
    pub classes: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            classes: BTreeMap::from([("openstack".into(), "converged-cloud-internet".into())]),
        }
    }
}

impl ShootExtension for ExposureClass {
    const NAME: &'static str = "exposure-class";
    const DESCRIPTION: &'static str = "Exposure class name per provider";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let mut shoot = input.draft;
        if let Some(class) = input
            .config
            .classes
            .get(&input.runtime.spec.shoot.provider.type_)
        {
            shoot.spec.exposure_class_name = Some(class.clone());
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(ExposureClass);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(ExposureClass);
