//! `labels`: account and subaccount labels on the Shoot, copied from the Runtime's labels;
//! Runtimes lacking a label the landscape requires are refused (KIM's
//! `Runtime.ValidateRequiredLabels`, checked before create and patch).

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
    /// Runtime labels that must be set and non-empty. KIM requires eight (those KEB sets;
    /// docs/kim-parity.md lists them); empty by default, as Runtimes need not come from KEB.
    pub required: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            labels: BTreeMap::from([
                ("account".into(), "kyma-project.io/global-account-id".into()),
                ("subaccount".into(), "kyma-project.io/subaccount-id".into()),
            ]),
            required: Vec::new(),
        }
    }
}

impl ShootExtension for Labels {
    const NAME: &'static str = "labels";
    const DESCRIPTION: &'static str = "Account and subaccount labels from the Runtime";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        if let Some(missing) = input
            .config
            .required
            .iter()
            .find(|key| input.runtime.label(key).is_none_or(str::is_empty))
        {
            return Err(PluginError::invalid_input(
                format!("metadata.labels.{missing}"),
                format!("missing required label {missing}"),
            ));
        }
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
