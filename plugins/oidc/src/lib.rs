//! `oidc`: the API server's OIDC settings — structured authentication backed by a
//! ConfigMap the host maintains (KIM's only mode since 2025-03), or, as an explicit legacy
//! setting for Gardener landscapes older than 2026-04, the classic `oidcConfig` (the
//! Runtime's, or the configured defaults when it sets neither client id nor issuer), which
//! Gardener forbids from Kubernetes 1.32 and no longer knows at all since 2026-04.

use std::cmp::Ordering;

use serde::Deserialize;
use tessera_sdk::models::{KubeApiServer, OidcConfig};
use tessera_sdk::util::compare_versions;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct Oidc;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Structured authentication (`structured-auth-config-<shoot>` ConfigMap). `false` is
    /// the legacy classic `oidcConfig`, only for Gardener landscapes that still have the
    /// field and Kubernetes below 1.32 (refused otherwise).
    pub structured_authentication: bool,
    /// Classic mode only: used when the Runtime's `oidcConfig` sets neither `clientID` nor
    /// `issuerURL`.
    pub default_oidc: OidcConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            structured_authentication: true,
            default_oidc: OidcConfig {
                client_id: Some("9bd05ed7-a930-44e6-8c79-e6defeb7dec9".into()),
                issuer_url: Some("https://kymatest.accounts400.ondemand.com".into()),
                groups_claim: Some("groups".into()),
                groups_prefix: None,
                username_claim: Some("sub".into()),
                username_prefix: Some("-".into()),
                signing_algs: Some(vec!["RS256".into()]),
                required_claims: None,
                jwks: None,
            },
        }
    }
}

const OIDC_FIELD: &str = "spec.shoot.kubernetes.kubeAPIServer.oidcConfig";

/// Gardener forbids `oidcConfig` from this Kubernetes version on (gardener
/// pkg/api/core/validation/shoot.go before commit 0025fc1765, which then removed the field).
const CLASSIC_OIDC_UNTIL: &str = "1.32";

const NO_AUTHENTICATOR: &str = "structured authentication: the Runtime sets no oidcConfig nor additionalOidcConfig, so the AuthenticationConfiguration has no JWT authenticator unless the configuration's defaultOperatorOidc is set (defaultOidc applies to the classic oidcConfig only)";

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

/// The classic `oidcConfig` only where Gardener takes it: the Runtime names a Kubernetes
/// version below 1.32 (this plugin sees neither the version a later plugin defaults to nor
/// the Shoot's).
fn check_classic_version(version: Option<&str>) -> Result<(), PluginError> {
    let field = "spec.shoot.kubernetes.version";
    match version {
        Some(v) if compare_versions(v, CLASSIC_OIDC_UNTIL) == Ordering::Less => Ok(()),
        Some(v) => Err(PluginError::invalid_input(
            field,
            format!(
                "Kubernetes {v}: Gardener refuses the classic oidcConfig from Kubernetes {CLASSIC_OIDC_UNTIL} (and has no such field since 2026-04); remove structuredAuthentication: false from the oidc plugin's configuration to use structured authentication"
            ),
        )),
        None => Err(PluginError::invalid_input(
            field,
            format!(
                "the classic oidcConfig (oidc plugin configured with structuredAuthentication: false) needs a Kubernetes version below {CLASSIC_OIDC_UNTIL}, and the Runtime sets none"
            ),
        )),
    }
}

impl ShootExtension for Oidc {
    const NAME: &'static str = "oidc";
    const DESCRIPTION: &'static str =
        "OIDC: structured authentication (classic oidcConfig as a legacy setting)";
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
            check_classic_version(rt.kubernetes.version.as_deref())?;
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
