//! `extensions`: Gardener extensions Kyma clusters run — networking filter, certificates,
//! DNS, OIDC and (optionally) the registry cache. Upserted by type; on patch every other
//! extension on the Shoot stays untouched.

use serde::Deserialize;
use serde_json::{Value, json};
use tessera_sdk::models::Extension;
use tessera_sdk::{ExtendInput, ExtendOutput, Operation, PluginError, ShootExtension};

pub struct Extensions;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    pub networking_filter: bool,
    pub cert_service: bool,
    pub dns_service: bool,
    pub oidc_service: bool,
    /// Registry cache `providerConfig` (a `RegistryConfig`); unset: no registry cache.
    pub registry_cache: Option<Value>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            networking_filter: true,
            cert_service: true,
            dns_service: true,
            oidc_service: true,
            registry_cache: None,
        }
    }
}

fn extension(type_: &str, provider_config: Option<Value>, disabled: Option<bool>) -> Extension {
    Extension {
        type_: type_.into(),
        provider_config,
        disabled,
        extra: Default::default(),
    }
}

impl ShootExtension for Extensions {
    const NAME: &'static str = "extensions";
    const DESCRIPTION: &'static str =
        "Networking filter, cert, DNS, OIDC and registry-cache extensions";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let config = &input.config;
        let filter = &input.runtime.spec.security.networking.filter;
        let mut shoot = input.draft;
        if input.operation == Operation::Patch
            && let Some(current) = input
                .current
                .as_ref()
                .and_then(|s| s.spec.extensions.clone())
        {
            // Start from what Gardener has, then upsert ours.
            let mut merged = current;
            for ext in shoot.spec.extensions.take().unwrap_or_default() {
                match merged.iter_mut().find(|e| e.type_ == ext.type_) {
                    Some(slot) => *slot = ext,
                    None => merged.push(ext),
                }
            }
            shoot.spec.extensions = Some(merged);
        }
        let spec = &mut shoot.spec;
        if config.networking_filter {
            let ingress = filter.ingress.as_ref().is_some_and(|i| i.enabled);
            spec.upsert_extension(extension(
                "shoot-networking-filter",
                Some(json!({
                    "apiVersion": "shoot-networking-filter.extensions.gardener.cloud/v1alpha1",
                    "kind": "Configuration",
                    "egressFilter": { "blackholingEnabled": ingress },
                })),
                Some(!filter.egress.enabled),
            ));
        }
        if config.cert_service {
            spec.upsert_extension(extension(
                "shoot-cert-service",
                Some(json!({
                    "apiVersion": "service.cert.extensions.gardener.cloud/v1alpha1",
                    "kind": "CertConfig",
                    "shootIssuers": { "enabled": true },
                })),
                None,
            ));
        }
        if config.dns_service {
            spec.upsert_extension(extension(
                "shoot-dns-service",
                Some(json!({
                    "apiVersion": "service.dns.extensions.gardener.cloud/v1alpha1",
                    "kind": "DNSConfig",
                    "dnsProviderReplication": { "enabled": true },
                    "syncProvidersFromShootSpecDNS": true,
                })),
                None,
            ));
        }
        if config.oidc_service {
            spec.upsert_extension(extension("shoot-oidc-service", None, Some(false)));
        }
        if let Some(registry) = &config.registry_cache {
            spec.upsert_extension(extension("registry-cache", Some(registry.clone()), None));
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(Extensions);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Extensions);
