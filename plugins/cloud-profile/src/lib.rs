//! `cloud-profile`: the Gardener cloud profile for the Runtime's provider, as a
//! `spec.cloudProfile` reference (`cloudProfileName` is deprecated and refused by Gardener
//! from Kubernetes 1.34: gardener pkg/api/core/validation/shoot.go
//! `ValidateCloudProfileReference`).

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_sdk::models::CloudProfileReference;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct CloudProfile;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Provider type → cloud profile name.
    pub profiles: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            profiles: BTreeMap::from([
                ("aws".into(), "aws".into()),
                ("azure".into(), "az".into()),
                ("gcp".into(), "gcp".into()),
                ("openstack".into(), "converged-cloud-kyma".into()),
                ("alicloud".into(), "alicloud".into()),
                ("gdch".into(), "cat".into()),
            ]),
        }
    }
}

impl ShootExtension for CloudProfile {
    const NAME: &'static str = "cloud-profile";
    const DESCRIPTION: &'static str = "Cloud profile reference per provider";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let provider = &input.runtime.spec.shoot.provider.type_;
        let profile = input.config.profiles.get(provider).ok_or_else(|| {
            PluginError::unsupported(
                "spec.shoot.provider.type",
                format!(
                    "unknown provider {provider:?}; configured providers: {}",
                    input
                        .config
                        .profiles
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        let mut shoot = input.draft;
        shoot.spec.cloud_profile = Some(CloudProfileReference {
            kind: "CloudProfile".into(),
            name: profile.clone(),
        });
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(CloudProfile);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(CloudProfile);
