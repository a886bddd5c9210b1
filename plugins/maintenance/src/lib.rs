//! `maintenance`: auto-update flags, and a maintenance window by region for production
//! clusters (others get Gardener's random window).

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_sdk::models::{AutoUpdate, Maintenance, TimeWindow};
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct MaintenancePlugin;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    pub kubernetes_version_auto_update: bool,
    pub machine_image_version_auto_update: bool,
    /// Region → window (`HHMMSS+ZZZZ`), only used for purpose `production`.
    pub windows: BTreeMap<String, TimeWindow>,
}

fn window(begin: &str, end: &str) -> TimeWindow {
    TimeWindow {
        begin: begin.into(),
        end: end.into(),
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            kubernetes_version_auto_update: true,
            machine_image_version_auto_update: false,
            windows: BTreeMap::from([
                ("eu-central-1".into(), window("210000+0000", "000000+0000")),
                ("eu-west-1".into(), window("210000+0000", "000000+0000")),
                ("us-east-1".into(), window("030000+0000", "060000+0000")),
                ("westeurope".into(), window("210000+0000", "000000+0000")),
                ("europe-west3".into(), window("210000+0000", "000000+0000")),
                ("eu-de-1".into(), window("210000+0000", "000000+0000")),
            ]),
        }
    }
}

impl ShootExtension for MaintenancePlugin {
    const NAME: &'static str = "maintenance";
    const DESCRIPTION: &'static str = "Auto-update flags and production maintenance windows";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let rt = &input.runtime.spec.shoot;
        let config = &input.config;
        let mut warnings = Vec::new();
        let time_window = if rt.purpose == "production" {
            let found = config.windows.get(&rt.region).cloned();
            if found.is_none() {
                warnings.push(format!(
                    "no maintenance window configured for region {}; Gardener picks one",
                    rt.region
                ));
            }
            found
        } else {
            None
        };
        let mut shoot = input.draft;
        let maintenance = shoot
            .spec
            .maintenance
            .get_or_insert_with(Maintenance::default);
        maintenance.auto_update = Some(AutoUpdate {
            kubernetes_version: config.kubernetes_version_auto_update,
            machine_image_version: Some(config.machine_image_version_auto_update),
        });
        maintenance.time_window = time_window;
        Ok(ExtendOutput::with_warnings(shoot, warnings))
    }
}

tessera_sdk::export_shoot_extension!(MaintenancePlugin);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(MaintenancePlugin);
