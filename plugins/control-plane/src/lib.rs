//! `control-plane`: control-plane high availability. Gardener cannot lower or switch a
//! failure tolerance once set, so a patch keeps the existing one.

use serde::Deserialize;
use tessera_sdk::models::ControlPlane;
use tessera_sdk::{ExtendInput, ExtendOutput, Operation, PluginError, ShootExtension};

pub struct ControlPlanePlugin;

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct Config {}

const FIELD: &str = "spec.shoot.controlPlane.highAvailability.failureTolerance.type";

impl ShootExtension for ControlPlanePlugin {
    const NAME: &'static str = "control-plane";
    const DESCRIPTION: &'static str = "Control-plane high availability (zone or node)";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let desired = input
            .runtime
            .spec
            .shoot
            .control_plane
            .as_ref()
            .and_then(|cp| cp.high_availability.clone());
        if let Some(ha) = &desired
            && !matches!(ha.failure_tolerance.type_.as_str(), "zone" | "node")
        {
            return Err(PluginError::invalid_input(
                FIELD,
                format!(
                    "failure tolerance {:?} is neither zone nor node",
                    ha.failure_tolerance.type_
                ),
            ));
        }
        let current = match input.operation {
            Operation::Patch => input
                .current
                .as_ref()
                .and_then(|s| s.spec.control_plane.as_ref())
                .and_then(|cp| cp.high_availability.clone()),
            Operation::Create => None,
        };
        let mut warnings = Vec::new();
        let effective = match (current, desired) {
            (Some(cur), Some(want)) if cur != want => {
                return Err(PluginError::invalid_input(
                    FIELD,
                    format!(
                        "failure tolerance cannot change from {} to {} on an existing cluster",
                        cur.failure_tolerance.type_, want.failure_tolerance.type_
                    ),
                ));
            }
            (Some(cur), None) => {
                warnings.push(format!(
                    "the Runtime no longer asks for high availability; Gardener cannot turn it off, keeping failure tolerance {}",
                    cur.failure_tolerance.type_
                ));
                Some(cur)
            }
            (_, want) => want,
        };
        let mut shoot = input.draft;
        if let Some(ha) = effective {
            shoot
                .spec
                .control_plane
                .get_or_insert_with(ControlPlane::default)
                .high_availability = Some(ha);
        }
        Ok(ExtendOutput::with_warnings(shoot, warnings))
    }
}

tessera_sdk::export_shoot_extension!(ControlPlanePlugin);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(ControlPlanePlugin);
