//! `dns`: the Shoot's DNS domain and provider, and the `shoot-dns-service` extension that
//! replicates DNS providers into the cluster — both as KIM writes them
//! (`extender/dns.go`, `extender/extensions/dns.go`). Without a configured domain, Gardener's
//! own DNS: no `spec.dns`, and the extension's internal form.

use serde::Deserialize;
use serde_json::{Value, json};
use tessera_sdk::models::{Extension, Shoot};
use tessera_sdk::{ExtendInput, ExtendOutput, Operation, PluginError, ShootExtension};

pub struct Dns;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Base domain; the Shoot gets `<shoot name>.<domainPrefix>`. Empty: Gardener's DNS.
    pub domain_prefix: String,
    /// Secret with the DNS provider's credentials in the project namespace.
    pub secret_name: String,
    /// DNS provider type, e.g. `aws-route53`.
    pub provider_type: String,
    /// Add the `shoot-dns-service` extension (KIM always does).
    pub extension: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            domain_prefix: String::new(),
            secret_name: String::new(),
            provider_type: String::new(),
            extension: true,
        }
    }
}

const EXTENSION: &str = "shoot-dns-service";

impl ShootExtension for Dns {
    const NAME: &'static str = "dns";
    const DESCRIPTION: &'static str = "Shoot DNS domain, provider and the DNS service extension";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let config = &input.config;
        let external = !config.domain_prefix.is_empty();
        if external && (config.secret_name.is_empty() || config.provider_type.is_empty()) {
            return Err(PluginError::invalid_input(
                "plugin configuration secretName, providerType",
                "domainPrefix needs secretName and providerType too",
            ));
        }
        let domain = format!("{}.{}", input.runtime.spec.shoot.name, config.domain_prefix);
        let current = match input.operation {
            Operation::Patch => input.current.as_ref(),
            Operation::Create => None,
        };
        let mut shoot = input.draft;
        let mut warnings = Vec::new();
        shoot.spec.dns = match current.map(|c| &c.spec.dns) {
            // KIM's `NewDNSExtenderForPatch`: a Shoot made before custom domains keeps
            // its DNS as it is; Gardener's DNS is never given providers.
            Some(dns) if !external || is_some_without_providers(dns) => dns.clone(),
            // Gardener never lets a domain change: a new domainPrefix applies to new
            // Shoots, this one keeps its DNS (KIM would send the change and be refused).
            Some(Some(dns)) if dns["domain"].as_str().is_some_and(|d| d != domain) => {
                warnings.push(format!(
                    "spec.dns.domain stays {} (a Shoot's domain cannot change); domainPrefix {} applies to new Shoots",
                    dns["domain"], config.domain_prefix
                ));
                Some(dns.clone())
            }
            _ if external => Some(shoot_dns(&domain, config)),
            _ => None,
        };
        if config.extension {
            // The extension serves the domain the Shoot has.
            let live = shoot.spec.dns.as_ref().and_then(|d| d["domain"].as_str());
            let served = live.unwrap_or(&domain).to_string();
            let wanted = extension_config(external.then_some(served.as_str()), config);
            let kept = current.and_then(existing_without_providers);
            shoot.spec.upsert_extension(Extension {
                type_: EXTENSION.into(),
                provider_config: Some(kept.unwrap_or(wanted)),
                disabled: None,
                extra: Default::default(),
            });
        }
        Ok(ExtendOutput::with_warnings(shoot, warnings))
    }
}

fn is_some_without_providers(dns: &Option<Value>) -> bool {
    dns.as_ref().is_some_and(lists_no_providers)
}

/// KIM's `NewDNSExtenderForCreate`: the domain and one primary provider whose credentials
/// are a reference to the Secret.
fn shoot_dns(domain: &str, config: &Config) -> Value {
    json!({
        "domain": domain,
        "providers": [{
            "domains": { "include": [domain] },
            "primary": true,
            "type": config.provider_type,
            "credentialsRef": { "apiVersion": "v1", "kind": "Secret", "name": config.secret_name },
        }],
    })
}

/// KIM's `NewDNSExtensionInternal` / `NewDNSExtensionExternal`.
fn extension_config(domain: Option<&str>, config: &Config) -> Value {
    let mut value = json!({
        "apiVersion": "service.dns.extensions.gardener.cloud/v1alpha1",
        "kind": "DNSConfig",
        "dnsProviderReplication": { "enabled": true },
        "syncProvidersFromShootSpecDNS": true,
    });
    if let Some(domain) = domain {
        value["providers"] = json!([{
            "domains": { "include": [domain] },
            "type": config.provider_type,
            "credentials": format!("{EXTENSION}-{}", config.secret_name),
        }]);
    }
    value
}

/// KIM's `dnsExtensionForPatch`: the Shoot's extension config is kept when it lists no
/// providers (a cluster made before custom domains).
fn existing_without_providers(current: &Shoot) -> Option<Value> {
    let config = current
        .spec
        .extension(EXTENSION)?
        .provider_config
        .as_ref()?;
    lists_no_providers(config).then(|| config.clone())
}

/// A DNS section or DNS extension config without providers (made before custom domains).
fn lists_no_providers(config: &Value) -> bool {
    config["providers"].as_array().is_none_or(Vec::is_empty)
}

tessera_sdk::export_shoot_extension!(Dns);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Dns);
