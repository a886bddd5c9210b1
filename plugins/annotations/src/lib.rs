//! `annotations`: runtime id, runtime generation and licence type on the Shoot, and
//! Gardener's cleanup grace periods (KIM `pkg/gardener/shoot/extender/annotations.go`,
//! `getAnnotations`).

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct Annotations;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Annotation key prefix; KIM's by default so Shoots created by KIM are adopted as-is.
    pub prefix: String,
    /// Seconds Gardener waits for finalizers while cleaning up a deleted cluster
    /// (`shoot.gardener.cloud/cleanup-<kind>-finalize-grace-period-seconds`); KIM's
    /// constants by default. An empty map sets none.
    pub cleanup_grace_period_seconds: BTreeMap<CleanupKind, u32>,
}

/// What Gardener cleans up with a grace period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum CleanupKind {
    ExtendedApis,
    KubernetesResources,
    Webhooks,
}

impl CleanupKind {
    fn annotation(self) -> &'static str {
        match self {
            Self::ExtendedApis => {
                "shoot.gardener.cloud/cleanup-extended-apis-finalize-grace-period-seconds"
            }
            Self::KubernetesResources => {
                "shoot.gardener.cloud/cleanup-kubernetes-resources-finalize-grace-period-seconds"
            }
            Self::Webhooks => "shoot.gardener.cloud/cleanup-webhooks-finalize-grace-period-seconds",
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            prefix: "infrastructuremanager.kyma-project.io".into(),
            // KIM: DefaultShootCleanupExtendedApisGracePeriodValue and its two siblings.
            cleanup_grace_period_seconds: BTreeMap::from([
                (CleanupKind::ExtendedApis, 120),
                (CleanupKind::KubernetesResources, 120),
                (CleanupKind::Webhooks, 60),
            ]),
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
        // KIM's `getAnnotations` writes no licence annotation for an empty licence.
        if let Some(licence) = runtime
            .spec
            .shoot
            .licence_type
            .as_ref()
            .filter(|l| !l.is_empty())
        {
            annotations.insert(format!("{prefix}/licence-type"), licence.clone());
        }
        for (kind, seconds) in &input.config.cleanup_grace_period_seconds {
            annotations.insert(kind.annotation().into(), seconds.to_string());
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(Annotations);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Annotations);
