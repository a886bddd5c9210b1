//! `auditlog`: the audit log extension, its credentials resource and the API server's audit
//! policy, when a tenant is configured for the Runtime's (provider, region).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::json;
use tessera_sdk::models::{Extension, KubeApiServer};
use tessera_sdk::{ExtendInput, ExtendOutput, Operation, PluginError, ShootExtension};

pub struct Auditlog;

#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tenant {
    #[serde(rename = "tenantID")]
    pub tenant_id: String,
    #[serde(rename = "serviceURL")]
    pub service_url: String,
    /// Secret with the audit log service credentials in the project namespace.
    pub secret_name: String,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Provider → region → tenant. Installation-specific; empty by default.
    pub tenants: BTreeMap<String, BTreeMap<String, Tenant>>,
    /// ConfigMap with the audit policy in the project namespace.
    pub policy_config_map_name: String,
    /// Refuse Runtimes in regions without a tenant instead of warning (KIM's flag
    /// `-audit-log-mandatory`, true there; false here, as no tenants come configured).
    pub mandatory: bool,
    /// Honour KIM's annotation `operator.kyma-project.io/experimental-audit-policy: "true"`
    /// (policy ConfigMap `experimental-audit-policy`). Off by default: whoever may create a
    /// Runtime could otherwise choose their cluster's audit policy.
    pub allow_experimental_policy: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            tenants: BTreeMap::new(),
            policy_config_map_name: "policy-config-map".into(),
            mandatory: false,
            allow_experimental_policy: false,
        }
    }
}

const SECRET_REFERENCE: &str = "auditlog-credentials";

/// A Runtime annotated so (value `true`, any case) gets the audit policy ConfigMap of that
/// name instead of the configured one (KIM's `fixPolicyConfigMapName`).
const EXPERIMENTAL_POLICY_ANNOTATION: &str = "operator.kyma-project.io/experimental-audit-policy";
const EXPERIMENTAL_POLICY: &str = "experimental-audit-policy";

impl ShootExtension for Auditlog {
    const NAME: &'static str = "auditlog";
    const DESCRIPTION: &'static str =
        "Audit log extension, credentials and policy per provider/region";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let rt = &input.runtime.spec.shoot;
        let tenant = input
            .config
            .tenants
            .get(&rt.provider.type_)
            .and_then(|regions| regions.get(&rt.region));
        let mut shoot = input.draft;
        if input.operation == Operation::Patch && shoot.spec.resources.is_none() {
            // Resources are kept on patch: others may reference them.
            shoot.spec.resources = input
                .current
                .as_ref()
                .and_then(|s| s.spec.resources.clone());
        }
        let Some(tenant) = tenant else {
            let message = format!(
                "no audit log tenant configured for provider {} in region {}",
                rt.provider.type_, rt.region
            );
            if input.config.mandatory {
                return Err(PluginError::invalid_input("spec.shoot.region", message));
            }
            return Ok(ExtendOutput::new(shoot).warn(message));
        };
        let spec = &mut shoot.spec;
        spec.upsert_extension(Extension {
            type_: "shoot-auditlog-service".into(),
            provider_config: Some(json!({
                "apiVersion": "service.auditlog.extensions.gardener.cloud/v1alpha1",
                "kind": "AuditlogConfig",
                "type": "standard",
                "tenantID": tenant.tenant_id,
                "serviceURL": tenant.service_url,
                "secretReferenceName": SECRET_REFERENCE,
            })),
            disabled: None,
            extra: Default::default(),
        });
        let resources = spec.resources.get_or_insert_with(Vec::new);
        let resource = json!({
            "name": SECRET_REFERENCE,
            "resourceRef": { "apiVersion": "v1", "kind": "Secret", "name": tenant.secret_name },
        });
        match resources.iter_mut().find(|r| r["name"] == SECRET_REFERENCE) {
            Some(slot) => *slot = resource,
            None => resources.push(resource),
        }
        let policy = policy_name(&input.runtime, &input.config);
        spec.kubernetes
            .kube_api_server
            .get_or_insert_with(KubeApiServer::default)
            .audit_config = Some(json!({
            "auditPolicy": { "configMapRef": { "name": policy } }
        }));
        Ok(ExtendOutput::new(shoot))
    }
}

/// The audit policy ConfigMap: KIM's experimental one when the Runtime asks for it.
fn policy_name<'a>(runtime: &tessera_sdk::models::Runtime, config: &'a Config) -> &'a str {
    let experimental = config.allow_experimental_policy
        && runtime
            .metadata
            .annotations
            .get(EXPERIMENTAL_POLICY_ANNOTATION)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    match experimental {
        true => EXPERIMENTAL_POLICY,
        false => &config.policy_config_map_name,
    }
}

tessera_sdk::export_shoot_extension!(Auditlog);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Auditlog);
