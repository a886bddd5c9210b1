//! Structured authentication (KIM): when the rendered Shoot names a ConfigMap
//! (`spec.kubernetes.kubeAPIServer.structuredAuthentication.configMapName`, set by the
//! `oidc` plugin), the host writes it into the Shoot's project before the Shoot is applied —
//! Gardener refuses a Shoot naming a ConfigMap that does not exist — holding the
//! `AuthenticationConfiguration` built from the Runtime's OIDC settings. It is deleted with
//! the Shoot (and when a patched Shoot no longer names it). Used by the create, patch and
//! deletion states; only a ConfigMap labelled with this Runtime (or, taking over, the one
//! KIM's Shoot names) is ever changed.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use tessera_sdk::models::{OidcConfig, RuntimeSpec};

use super::super::machine::{Machine, Transition};
use super::super::takeover;
use crate::api;
use crate::controllers::{ReconcileError, labels};
use crate::crd::{FIELD_MANAGER, Reason};

/// The data key Gardener reads.
const KEY: &str = "config.yaml";

/// The ConfigMap the rendered Shoot `desired` names, if any.
pub(crate) fn config_map_name(desired: &Value) -> Option<String> {
    desired["spec"]["kubernetes"]["kubeAPIServer"]["structuredAuthentication"]["configMapName"]
        .as_str()
        .map(String::from)
}

/// The `AuthenticationConfiguration` of a Runtime: one JWT authenticator per OIDC setting
/// it names (`oidcConfig` — or, when it sets none, the operator's `default`, KIM's
/// `GetOIDCConfigOrDefault` — then `additionalOidcConfig`), as KIM builds it. Prefix `-`
/// is the classic "no prefix".
pub(crate) fn authentication_configuration(
    spec: &RuntimeSpec,
    default: Option<&OidcConfig>,
) -> Value {
    let api = &spec.shoot.kubernetes.kube_api_server;
    let primary = match default {
        Some(default) if api.oidc_config.is_unset() => default,
        _ => &api.oidc_config,
    };
    let configs = std::iter::once(primary).chain(api.additional_oidc_config.iter().flatten());
    let jwt: Vec<Value> = configs.filter(|c| !c.is_unset()).map(jwt).collect();
    json!({
        "apiVersion": "apiserver.config.k8s.io/v1beta1",
        "kind": "AuthenticationConfiguration",
        "jwt": jwt,
    })
}

fn jwt(config: &OidcConfig) -> Value {
    let prefix = |p: &Option<String>| match p.as_deref() {
        None | Some("-") => String::new(),
        Some(p) => p.to_string(),
    };
    let mut mappings = json!({
        "username": {
            "claim": config.username_claim.clone().unwrap_or_else(|| "sub".into()),
            "prefix": prefix(&config.username_prefix),
        },
    });
    if let Some(claim) = &config.groups_claim {
        mappings["groups"] = json!({ "claim": claim, "prefix": prefix(&config.groups_prefix) });
    }
    let rules: Vec<Value> = config
        .required_claims
        .iter()
        .flatten()
        .map(|(claim, value)| json!({ "claim": claim, "requiredValue": value }))
        .collect();
    let mut out = json!({
        "issuer": {
            "url": config.issuer_url,
            "audiences": [config.client_id.clone().unwrap_or_default()],
        },
        "claimMappings": mappings,
    });
    if !rules.is_empty() {
        out["claimValidationRules"] = Value::Array(rules);
    }
    out
}

fn api(m: &Machine, namespace: &str) -> Api<ConfigMap> {
    Api::namespaced(m.ctx.shoots.client().clone(), namespace)
}

/// Whether the ConfigMap was written for this Runtime, or is the one (unlabelled: KIM sets
/// no labels) that a Shoot being taken over from KIM names.
fn ours(m: &Machine, config_map: &ConfigMap) -> bool {
    let l = config_map.labels();
    let labelled = l.get(labels::RUNTIME) == Some(&m.id())
        && l.get(labels::RUNTIME_NAMESPACE) == Some(&m.namespace());
    labelled || (!l.contains_key(labels::RUNTIME) && named_by_kim_shoot(m, config_map))
}

/// Whether the live Shoot is KIM's, taken over for this Runtime, and names `config_map`.
fn named_by_kim_shoot(m: &Machine, config_map: &ConfigMap) -> bool {
    let kim = &m.ctx.config.kim;
    let Some(shoot) = m.shoot.as_ref() else {
        return false;
    };
    let named = config_map_name(&serde_json::to_value(shoot).unwrap_or_default());
    let owner = takeover::owner(shoot, &m.runtime, kim);
    owner == takeover::Owner::Kim
        && takeover::claims(owner, &m.runtime, kim)
        && named.as_deref() == config_map.metadata.name.as_deref()
}

/// Write the ConfigMap `desired` names into `namespace`; a transition to take instead when
/// another Runtime's ConfigMap has that name.
pub(crate) async fn write(
    m: &mut Machine,
    namespace: &str,
    desired: &Value,
) -> Result<Option<Transition>, ReconcileError> {
    let Some(name) = config_map_name(desired) else {
        return Ok(None);
    };
    let api = api(m, namespace);
    if let Some(existing) = api.get_opt(&name).await?
        && !ours(m, &existing)
    {
        let message = format!(
            "ConfigMap {namespace}/{name} (structured authentication) exists and belongs to another Runtime (field spec.shoot.name)"
        );
        return Ok(Some(m.fail(Reason::ShootNameTaken, message)));
    }
    let default = m
        .ctx
        .renderer
        .resolver
        .template
        .default_operator_oidc
        .as_ref();
    let text = serde_json::to_string_pretty(&authentication_configuration(
        &m.runtime.spec.inner,
        default,
    ))
    .unwrap_or_default();
    let doc = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
                labels::RUNTIME: m.id(),
                labels::RUNTIME_NAMESPACE: m.namespace(),
            },
        },
        "data": { KEY: text },
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(&doc)).await?;
    Ok(None)
}

/// Delete this Runtime's structured-authentication ConfigMap `name` of `namespace`, if it
/// is there and ours. Without the right to read ConfigMaps there (a Gardener kubeconfig
/// granted Shoots only) no ConfigMap was written either: nothing to do.
pub(crate) async fn remove(m: &Machine, namespace: &str, name: &str) -> Result<(), ReconcileError> {
    let api = api(m, namespace);
    let existing = match api.get_opt(name).await {
        Ok(found) => found,
        Err(e) if api::is_forbidden(&e) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let Some(existing) = existing else {
        return Ok(());
    };
    if !ours(m, &existing) {
        return Ok(());
    }
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: existing.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {
            tracing::info!(runtime = %m.id(), config_map = %name, "structured authentication ConfigMap deleted");
            Ok(())
        }
        Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The ConfigMap name the `oidc` plugin gives the Shoot `shoot`.
pub(crate) fn default_name(shoot: &str) -> String {
    format!("structured-auth-config-{shoot}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_jwt_authenticator_per_oidc_setting_the_runtime_names() {
        let mut spec: RuntimeSpec = serde_json::from_value(json!({
            "shoot": {
                "name": "c1", "purpose": "production", "platformRegion": "cf-eu10",
                "region": "eu-central-1",
                "kubernetes": {"kubeAPIServer": {
                    "oidcConfig": {"clientID": "a", "issuerURL": "https://a.example",
                        "groupsClaim": "groups", "usernameClaim": "email", "usernamePrefix": "-",
                        "requiredClaims": {"tenant": "t1"}},
                    "additionalOidcConfig": [{"clientID": "b", "issuerURL": "https://b.example",
                        "usernamePrefix": "b:"}],
                }},
                "provider": {"type": "aws", "workers": []},
                "networking": {"nodes": "10.0.0.0/16", "pods": "10.1.0.0/16", "services": "10.2.0.0/16"},
            },
        }))
        .unwrap();
        let config = authentication_configuration(&spec, None);
        assert_eq!(config["kind"], "AuthenticationConfiguration");
        let jwt = config["jwt"].as_array().unwrap();
        assert_eq!(jwt.len(), 2);
        assert_eq!(
            jwt[0]["issuer"],
            json!({"url": "https://a.example", "audiences": ["a"]})
        );
        assert_eq!(
            jwt[0]["claimMappings"]["username"],
            json!({"claim": "email", "prefix": ""})
        );
        assert_eq!(jwt[0]["claimMappings"]["groups"]["claim"], "groups");
        assert_eq!(
            jwt[0]["claimValidationRules"][0],
            json!({"claim": "tenant", "requiredValue": "t1"})
        );
        assert_eq!(
            jwt[1]["claimMappings"]["username"],
            json!({"claim": "sub", "prefix": "b:"})
        );
        assert!(jwt[1].get("claimValidationRules").is_none());
        spec.shoot.kubernetes.kube_api_server = Default::default();
        assert_eq!(authentication_configuration(&spec, None)["jwt"], json!([]));
        // KIM `structuredauth/oidcconfig.go` `GetOIDCConfigOrDefault` (no test there): no
        // oidcConfig → the operator's default.
        let default: OidcConfig = serde_json::from_value(json!({"clientID": "op",
            "issuerURL": "https://operator.example.com", "usernameClaim": "email"}))
        .unwrap();
        let jwt = &authentication_configuration(&spec, Some(&default))["jwt"];
        assert_eq!(
            jwt[0]["issuer"],
            json!({"url": "https://operator.example.com", "audiences": ["op"]})
        );
        let shoot = json!({"spec": {"kubernetes": {"kubeAPIServer": {
            "structuredAuthentication": {"configMapName": "structured-auth-config-c1"}}}}});
        assert_eq!(
            config_map_name(&shoot).as_deref(),
            Some(default_name("c1").as_str())
        );
        assert_eq!(config_map_name(&json!({"spec": {}})), None);
    }
}
