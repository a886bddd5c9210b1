//! `dns`: the Shoot's DNS domain and provider, set at creation (skipped when no DNS is
//! configured) and kept as they are on patch.

use serde::Deserialize;
use tessera_sdk::{ExtendInput, ExtendOutput, Operation, PluginError, ShootExtension};

pub struct Dns;

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Base domain; the Shoot gets `<shoot name>.<domainPrefix>`. Empty: no DNS section.
    pub domain_prefix: String,
    /// Secret with the DNS provider's credentials in the project namespace.
    pub secret_name: String,
    /// DNS provider type, e.g. `aws-route53`.
    pub provider_type: String,
}

impl ShootExtension for Dns {
    const NAME: &'static str = "dns";
    const DESCRIPTION: &'static str = "Shoot DNS domain and provider (create only)";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let config = &input.config;
        let mut shoot = input.draft;
        match input.operation {
            Operation::Patch => {
                shoot.spec.dns = input.current.and_then(|s| s.spec.dns);
            }
            Operation::Create if config.domain_prefix.is_empty() => {}
            Operation::Create => {
                if config.secret_name.is_empty() || config.provider_type.is_empty() {
                    return Err(PluginError::invalid_input(
                        "config",
                        "domainPrefix needs secretName and providerType too",
                    ));
                }
                let domain = format!("{}.{}", input.runtime.spec.shoot.name, config.domain_prefix);
                shoot.spec.dns = Some(serde_json::json!({
                    "domain": domain,
                    "providers": [{
                        "domains": { "include": [domain] },
                        "primary": true,
                        "secretName": config.secret_name,
                        "type": config.provider_type,
                    }],
                }));
            }
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(Dns);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Dns);
