//! `labels`: account and subaccount labels on the Shoot, copied from the Runtime's labels.

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct Labels;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Shoot label → Runtime label it is copied from.
    pub labels: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            labels: BTreeMap::from([
                ("account".into(), "kyma-project.io/global-account-id".into()),
                ("subaccount".into(), "kyma-project.io/subaccount-id".into()),
            ]),
        }
    }
}

impl ShootExtension for Labels {
    const NAME: &'static str = "labels";
    const DESCRIPTION: &'static str = "Account and subaccount labels from the Runtime";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let mut shoot = input.draft;
        let mut warnings = Vec::new();
        for (shoot_label, runtime_label) in &input.config.labels {
            match input.runtime.label(runtime_label) {
                Some(value) => {
                    shoot
                        .metadata
                        .labels
                        .insert(shoot_label.clone(), value.to_string());
                }
                None => warnings.push(format!(
                    "Runtime has no label {runtime_label}; Shoot label {shoot_label} not set"
                )),
            }
        }
        Ok(ExtendOutput::with_warnings(shoot, warnings))
    }
}

tessera_sdk::export_shoot_extension!(Labels);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Labels);
