//! `tolerations`: seed tolerations per region, set at creation and kept as they are on patch.

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_sdk::models::Toleration;
use tessera_sdk::{ExtendInput, ExtendOutput, Operation, PluginError, ShootExtension};

pub struct Tolerations;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Region → tolerations for Shoots created there.
    pub regions: BTreeMap<String, Vec<Toleration>>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            regions: BTreeMap::from([(
                "me-central2".into(),
                vec![Toleration {
                    key: "ksa-assured-workload".into(),
                    value: None,
                }],
            )]),
        }
    }
}

impl ShootExtension for Tolerations {
    const NAME: &'static str = "tolerations";
    const DESCRIPTION: &'static str = "Seed tolerations per region (create only)";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let mut shoot = input.draft;
        shoot.spec.tolerations = match input.operation {
            Operation::Create => input
                .config
                .regions
                .get(&input.runtime.spec.shoot.region)
                .cloned(),
            Operation::Patch => input.current.and_then(|s| s.spec.tolerations),
        };
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(Tolerations);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Tolerations);
