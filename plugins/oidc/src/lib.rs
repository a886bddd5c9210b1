//! `oidc`: the API server's OIDC settings — classic `oidcConfig` (the Runtime's, or the
//! configured defaults when it sets neither client id nor issuer) or structured
//! authentication backed by a ConfigMap the host maintains.

use serde::Deserialize;
use tessera_sdk::models::{KubeApiServer, OidcConfig};
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct Oidc;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Use structured authentication (`structured-auth-config-<shoot>` ConfigMap) instead of
    /// the classic `oidcConfig`.
    pub structured_authentication: bool,
    /// Used when the Runtime's `oidcConfig` sets neither `clientID` nor `issuerURL`.
    pub default_oidc: OidcConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            structured_authentication: false,
            default_oidc: OidcConfig {
                client_id: Some("9bd05ed7-a930-44e6-8c79-e6defeb7dec9".into()),
                issuer_url: Some("https://kymatest.accounts400.ondemand.com".into()),
                groups_claim: Some("groups".into()),
                groups_prefix: None,
                username_claim: Some("sub".into()),
                username_prefix: Some("-".into()),
                signing_algs: Some(vec!["RS256".into()]),
                required_claims: None,
            },
        }
    }
}

const OIDC_FIELD: &str = "spec.shoot.kubernetes.kubeAPIServer.oidcConfig";

const NO_AUTHENTICATOR: &str = "structured authentication: the Runtime sets no oidcConfig nor additionalOidcConfig, so the AuthenticationConfiguration has no JWT authenticator (defaultOidc applies to the classic oidcConfig only)";

fn check(config: &OidcConfig, field: &str) -> Result<(), PluginError> {
    match &config.issuer_url {
        Some(url) if !url.starts_with("https://") => Err(PluginError::invalid_input(
            format!("{field}.issuerURL"),
            format!("issuer URL {url:?} must use https"),
        )),
        None => Err(PluginError::invalid_input(
            format!("{field}.issuerURL"),
            "issuerURL is required when clientID is set",
        )),
        Some(_) if config.client_id.as_deref().unwrap_or_default().is_empty() => {
            Err(PluginError::invalid_input(
                format!("{field}.clientID"),
                "clientID is required when issuerURL is set",
            ))
        }
        Some(_) => Ok(()),
    }
}

impl ShootExtension for Oidc {
    const NAME: &'static str = "oidc";
    const DESCRIPTION: &'static str = "OIDC: classic oidcConfig or structured authentication";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let rt = &input.runtime.spec.shoot;
        let api = &rt.kubernetes.kube_api_server;
        for (i, extra) in api.additional_oidc_config.iter().flatten().enumerate() {
            check(
                extra,
                &format!("spec.shoot.kubernetes.kubeAPIServer.additionalOidcConfig[{i}]"),
            )?;
        }
        let mut shoot = input.draft;
        let server = shoot
            .spec
            .kubernetes
            .kube_api_server
            .get_or_insert_with(KubeApiServer::default);
        if input.config.structured_authentication {
            server.oidc_config = None;
            server.structured_authentication = Some(serde_json::json!({
                "configMapName": format!("structured-auth-config-{}", rt.name)
            }));
            // The host builds the ConfigMap from the Runtime's settings alone: check them
            // here, and say so when there are none (the defaults are the classic mode's).
            if !api.oidc_config.is_unset() {
                check(&api.oidc_config, OIDC_FIELD)?;
            } else if api.additional_oidc_config.iter().flatten().next().is_none() {
                return Ok(ExtendOutput::new(shoot).warn(NO_AUTHENTICATOR));
            }
        } else {
            let oidc = if api.oidc_config.is_unset() {
                input.config.default_oidc.clone()
            } else {
                check(&api.oidc_config, OIDC_FIELD)?;
                api.oidc_config.clone()
            };
            server.oidc_config = Some(oidc);
        }
        Ok(ExtendOutput::new(shoot))
    }
}

tessera_sdk::export_shoot_extension!(Oidc);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Oidc);
