//! `annotations`: runtime id, runtime generation and licence type on the Shoot. The
//! generation annotation is how the host tells whether the Shoot is behind its Runtime.

use serde::Deserialize;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct Annotations;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Annotation key prefix; KIM's by default so Shoots created by KIM are adopted as-is.
    pub prefix: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            prefix: "infrastructuremanager.kyma-project.io".into(),
        }
    }
}

impl ShootExtension for Annotations {
    const NAME: &'static str = "annotations";
    const DESCRIPTION: &'static str = "Runtime id, generation and licence type annotations";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let prefix = &input.config.prefix;
        let runtime = &input.runtime;
        if runtime.id().is_empty() {
            return Err(PluginError::invalid_input(
                "metadata.name",
                "the Runtime has no name (its runtime id)",
            ));
        }
        let mut shoot = input.draft;
        let annotations = &mut shoot.metadata.annotations;
        annotations.insert(format!("{prefix}/runtime-id"), runtime.id().to_string());
        if let Some(generation) = runtime.metadata.generation {
            annotations.insert(
                format!("{prefix}/runtime-generation"),
                generation.to_string(),
            );
        }
        if let Some(licence) = &runtime.spec.shoot.licence_type {
            annotations.insert(format!("{prefix}/licence-type"), licence.clone());
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(Annotations);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Annotations);
