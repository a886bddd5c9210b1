//! The installation's configuration file (`tessera render|run|modules apply --config`).
//!
//! ```yaml
//! project: kyma-dev                 # Gardener project: Shoots live in garden-<project>
//! limits: {memoryMiB: 64, timeoutMs: 1000, outputKiB: 4096}   # defaults for every plugin
//! chain: [base, annotations, provider]                        # order; default: first-party
//! source: files                    # files (default) | registry: where steps come from
//! channel: regular                  # release channel of registry steps (default regular)
//! plugins:
//!   provider:
//!     file: ./my-provider.wasm        # default: <plugin dir>/<name>.wasm
//!     limits: {timeoutMs: 2000}
//!     config: {openstack: {floatingPoolName: FloatingIP-external-01}}
//!     grants: {shootPaths: [spec.provider]}   # what it may set (see `crate::grants`)
//!   dns:
//!     source: registry                # from the `Plugin` resource `dns` (or `plugin: NAME`)
//!     channel: fast
//! modules:                          # module reconcilers of `tessera modules apply`
//!   telemetry:
//!     grants: {write: [{apiGroups: [""], kinds: [ConfigMap], namespaces: [kyma-system]}]}
//! ```
//!
//! A step's grants are its `grants` here, else (registry steps) the `Plugin` resource's,
//! else (first-party plugins from the plugin directory) what the plugin declares. Nothing
//! else is granted.
//!
//! A Runtime can pick channels with the annotations `tessera.dev/channel` (every registry
//! step) and `channel.tessera.dev/<plugin>` (one step).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::catalog::FIRST_PARTY;
use super::identity::DEFAULT_PROJECT;
use crate::grants::Grants;
pub use crate::wasm::LimitsOverride;

/// Where a chain step's component comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// A `.wasm` file (the plugin directory, or `file`).
    #[default]
    Files,
    /// A `Plugin` resource: its channel's version, pulled from an OCI registry.
    Registry,
}

/// Settings of one plugin in the chain.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSettings {
    /// Component file; relative paths are relative to the config file.
    pub file: Option<PathBuf>,
    #[serde(default)]
    pub limits: LimitsOverride,
    /// The plugin's configuration, passed as JSON (over the Plugin resource's).
    pub config: Option<serde_json::Value>,
    /// Where the component comes from [default: the chain's `source`].
    pub source: Option<Source>,
    /// The `Plugin` resource of a registry step [default: the step name].
    pub plugin: Option<String>,
    /// Release channel of a registry step [default: the chain's `channel`].
    pub channel: Option<String>,
    /// What the plugin may set [default: the Plugin resource's grants for registry steps,
    /// the declared requests of first-party plugins from the plugin directory].
    pub grants: Option<Grants>,
}

/// Settings of one module reconciler for `tessera modules apply` (what a `Plugin`
/// resource says for the controller).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModuleSettings {
    #[serde(default)]
    pub limits: LimitsOverride,
    /// The operator's configuration; the ModuleSet's module config is merged over it.
    pub config: Option<serde_json::Value>,
    /// Keys of `config` a ModuleSet may not replace.
    #[serde(default)]
    pub locked_config: Vec<String>,
    /// What the module may write and read [default: the declared requests of the
    /// first-party module plugins from the plugin directory].
    pub grants: Option<Grants>,
}

/// A whole chain configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChainConfig {
    #[serde(default)]
    pub limits: LimitsOverride,
    pub chain: Option<Vec<String>>,
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginSettings>,
    /// Default source of steps.
    #[serde(default)]
    pub source: Source,
    /// Default release channel of registry steps [default: regular].
    pub channel: Option<String>,
    /// Gardener project Shoots live in (`garden-<project>`) [default: kyma-dev].
    pub project: Option<String>,
    /// Shoots name a CredentialsBinding called as the Runtime's `secretBindingName`
    /// instead of that SecretBinding (KIM's `gardener.enableCredentialBinding`); existing
    /// Shoots move over with their next patch [default: false].
    #[serde(default)]
    pub enable_credential_binding: bool,
    /// The OIDC provider every runtime cluster trusts when its Runtime lists no complete
    /// `additionalOidcConfig` (KIM's `cluster.defaultSharedIASTenant`), as an
    /// `OpenIDConnect` object; `additionalOidcConfig: []` opts out [default: none].
    #[serde(default, rename = "defaultSharedIASTenant")]
    pub default_shared_ias_tenant: Option<tessera_sdk::models::OidcConfig>,
    /// The OIDC provider of a Shoot's structured authentication when its Runtime sets no
    /// `oidcConfig` (KIM's `kubernetes.defaultOperatorOidc`) [default: none: such a
    /// Shoot's AuthenticationConfiguration has only the `additionalOidcConfig` ones].
    #[serde(default)]
    pub default_operator_oidc: Option<tessera_sdk::models::OidcConfig>,
    /// Module reconcilers run by `tessera modules apply`.
    #[serde(default)]
    pub modules: BTreeMap<String, ModuleSettings>,
    /// Directory the config file was read from (for relative `file` paths).
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

/// The configuration file is unusable.
#[derive(Debug, thiserror::Error)]
#[error("configuration {path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

/// The channel registry steps use unless configured otherwise.
pub const DEFAULT_CHANNEL: &str = "regular";

impl ChainConfig {
    /// Read a YAML configuration file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let err = |message: String| ConfigError {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let mut config: ChainConfig = crate::input::from_yaml(&text, "").map_err(|e| {
            err(match e.field {
                Some(field) => format!("{field}: {}", e.message),
                None => e.message,
            })
        })?;
        for name in config.plugins.keys() {
            let in_chain = config.order().iter().any(|n| n == name);
            if !in_chain {
                return Err(err(format!(
                    "plugins.{name} is configured but not in the chain ({})",
                    config.order().join(", ")
                )));
            }
        }
        config.validate().map_err(err)?;
        config.base_dir = path.parent().map(|p| p.to_path_buf());
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        for (name, settings) in &self.plugins {
            if let Some(grants) = &settings.grants {
                grants.validate(&format!("plugins.{name}.grants"))?;
            }
        }
        for (name, settings) in &self.modules {
            if let Some(grants) = &settings.grants {
                grants.validate(&format!("modules.{name}.grants"))?;
            }
        }
        let project = self.project();
        if !crate::plugins::identity::is_dns_label(project) {
            return Err(format!(
                "project: {project:?} is not a Gardener project name (lower-case letters, digits and '-')"
            ));
        }
        let defaults = [
            (
                "defaultSharedIASTenant",
                &self.default_shared_ias_tenant,
                "every runtime cluster would get an OIDC provider without it",
            ),
            (
                "defaultOperatorOidc",
                &self.default_operator_oidc,
                "Shoots without OIDC settings would get an authenticator without it",
            ),
        ];
        for (name, tenant, why) in defaults {
            let Some(tenant) = tenant else { continue };
            let missing = [
                ("clientID", &tenant.client_id),
                ("issuerURL", &tenant.issuer_url),
            ]
            .into_iter()
            .find(|(_, v)| v.as_deref().is_none_or(str::is_empty));
            if let Some((key, _)) = missing {
                return Err(format!("{name}.{key} is missing: {why}"));
            }
        }
        Ok(())
    }

    /// The Gardener project Shoots live in.
    pub fn project(&self) -> &str {
        self.project.as_deref().unwrap_or(DEFAULT_PROJECT)
    }

    /// Plugin names in chain order.
    pub fn order(&self) -> Vec<String> {
        self.chain
            .clone()
            .unwrap_or_else(|| FIRST_PARTY.iter().map(|s| s.to_string()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<ChainConfig, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tessera.yaml");
        std::fs::write(&path, text).unwrap();
        ChainConfig::from_file(&path).map_err(|mut e| {
            e.path = "tessera.yaml".into();
            e
        })
    }

    #[test]
    fn misspelt_fields_are_named_with_a_suggestion() {
        for (text, expected) in [
            (
                "chain: [provider]\nplugins:\n  provider:\n    confg: {}\n",
                "configuration tessera.yaml: plugins.provider.confg: unknown field; did you mean config?",
            ),
            (
                "limits: {timeoutMS: 10}\n",
                "configuration tessera.yaml: limits.timeoutMS: unknown field; did you mean timeoutMs?",
            ),
            (
                "chian: [base]\n",
                "configuration tessera.yaml: chian: unknown field; did you mean chain?",
            ),
            (
                "modules:\n  telemetry:\n    lockedConfg: [a]\n",
                "configuration tessera.yaml: modules.telemetry.lockedConfg: unknown field; did you mean lockedConfig?",
            ),
        ] {
            assert_eq!(load(text).unwrap_err().to_string(), expected);
        }
    }

    #[test]
    fn two_documents_are_refused_in_words() {
        let err = load("chain: [base]\n---\nchain: [dns]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than one YAML document"), "{err}");
        assert!(!err.contains("from_str"), "{err}");
    }

    /// KIM requires the default tenant's fields (`pkg/config/config.go` `OidcProvider`,
    /// `validate:"required"`); without client id or issuer the file is refused at start,
    /// naming the field, not every Runtime later.
    #[test]
    fn an_incomplete_default_tenant_is_refused_at_load() {
        let err =
            load("defaultSharedIASTenant: {clientId: typo, issuerURL: https://ias.example.com}\n")
                .unwrap_err()
                .to_string();
        assert!(
            err.contains("defaultSharedIASTenant.clientID is missing"),
            "{err}"
        );
        let err = load("defaultSharedIASTenant: {issuerURL: https://ias.example.com}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("defaultSharedIASTenant.clientID is missing"),
            "{err}"
        );
        let err = load("defaultOperatorOidc: {clientID: c}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("defaultOperatorOidc.issuerURL is missing"),
            "{err}"
        );
        let ok =
            load("defaultSharedIASTenant: {clientID: c, issuerURL: https://ias.example.com}\n");
        assert!(ok.unwrap().default_shared_ias_tenant.is_some());
    }
}
