//! Additional OIDC providers as Gardener `OpenIDConnect` objects in the runtime cluster.

use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tessera_sdk::models::OidcConfig;

use super::super::machine::{Machine, Step, Transition};
use super::super::takeover;
use crate::controllers::{ReconcileError, runtime_cluster};
use crate::crd::ConditionStatus;
use crate::crd::{ConditionType, Reason};
use crate::gardener::FIELD_MANAGER;

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("authentication.gardener.cloud", "v1alpha1", "OpenIDConnect"),
        "openidconnects",
    )
}

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let template = &m.ctx.renderer.resolver.template;
    let api_server = &m.runtime.spec.inner.shoot.kubernetes.kube_api_server;
    let configs = wanted(
        api_server.additional_oidc_config.as_deref(),
        template.default_oidc_tenant.as_ref(),
    );
    let had_any = m
        .status
        .conditions
        .iter()
        .any(|c| c.is(ConditionType::OidcConfigured));
    let taking_over = takeover::takes_over(&m.runtime, &m.ctx.config.kim);
    if !oidc_extension_on(m.shoot.as_ref()) || (configs.is_empty() && !had_any && !taking_over) {
        return Ok(Transition::Next(Step::ApplyAdminBindings));
    }
    let client = m.cluster().await?;
    let api: Api<DynamicObject> = Api::all_with(client, &resource());
    let id = m.id();
    let existing = runtime_cluster::list_owned(&api, &id).await?;
    let kims = match taking_over {
        true => kim_objects(&api, &id).await?,
        false => Vec::new(),
    };
    let applied = apply(&api, &id, &configs, &existing, &kims).await?;
    for stale in kims.iter().filter(|k| !applied.contains(k)) {
        api.delete(stale, &DeleteParams::default())
            .await
            .map_err(runtime_cluster::failed(
                &id,
                &format!("OpenIDConnect {stale}"),
            ))?;
        tracing::info!(runtime = %id, name = %stale, "KIM's OpenIDConnect no longer wanted, deleted");
    }
    m.condition(
        ConditionType::OidcConfigured,
        ConditionStatus::True,
        Reason::OidcConfigured,
        format!("{} additional OIDC provider(s) configured", applied.len()),
    );
    Ok(Transition::Next(Step::ApplyAdminBindings))
}

/// The OIDC providers a runtime cluster gets as `OpenIDConnect` objects (KIM's
/// `additionalOidcEmptyOrUndefined`): the Runtime's `additionalOidcConfig`; when it is unset
/// or an entry lacks client id or issuer, the landscape's default tenant alone; `[]`, none.
fn wanted(additional: Option<&[OidcConfig]>, default: Option<&OidcConfig>) -> Vec<OidcConfig> {
    let complete = |c: &OidcConfig| c.client_id.is_some() && c.issuer_url.is_some();
    match additional {
        Some(configs) if configs.iter().all(complete) => configs.to_vec(),
        _ => default.cloned().into_iter().collect(),
    }
}

/// Whether the Shoot runs Gardener's OIDC extension, which serves `OpenIDConnect` (KIM's
/// `isOidcExtensionEnabled`: listed and not disabled).
fn oidc_extension_on(shoot: Option<&DynamicObject>) -> bool {
    let extensions = shoot.and_then(|s| s.data["spec"]["extensions"].as_array().cloned());
    extensions
        .into_iter()
        .flatten()
        .any(|e| e["type"] == "shoot-oidc-service" && e["disabled"].as_bool() != Some(true))
}

/// The names of KIM's `OpenIDConnect` objects (its managed-by label) no Runtime of Tessera
/// has adopted yet.
async fn kim_objects(api: &Api<DynamicObject>, id: &str) -> Result<Vec<String>, ReconcileError> {
    let params = kube::api::ListParams::default()
        .labels(&kim_managed())
        .match_any();
    let kims = api
        .list(&params)
        .await
        .map_err(runtime_cluster::failed(id, "KIM's OpenIDConnect objects"))?;
    Ok(kims
        .items
        .into_iter()
        .filter(|o| !o.labels().contains_key(crate::controllers::labels::RUNTIME))
        .filter_map(|o| o.metadata.name)
        .collect())
}

/// The object name of the `index`th provider: KIM's `kyma-oidc-<index>` when KIM made it or
/// this Runtime adopted it before (applied over, never deleted and recreated), else
/// Tessera's own.
fn object_name(id: &str, index: usize, kims: &[String], owned: &[DynamicObject]) -> String {
    let kim = format!("kyma-oidc-{index}");
    let adopted = owned.iter().any(|o| o.metadata.name.as_ref() == Some(&kim));
    match kims.contains(&kim) || adopted {
        true => kim,
        false => format!("tessera-oidc-{id}-{index}"),
    }
}

/// The label KIM puts on what it makes in a runtime cluster.
fn kim_managed() -> String {
    use crate::crd::labels::{KIM_MANAGED_BY_VALUE, KIM_OPERATOR_MANAGED_BY};
    format!("{KIM_OPERATOR_MANAGED_BY}={KIM_MANAGED_BY_VALUE}")
}

/// The `OpenIDConnect` object of each of `configs`, applied where it differs from
/// `existing`; those of `existing` no longer wanted deleted. Their names.
async fn apply(
    api: &Api<DynamicObject>,
    id: &str,
    configs: &[OidcConfig],
    existing: &[DynamicObject],
    kims: &[String],
) -> Result<Vec<String>, ReconcileError> {
    let mut wanted = Vec::new();
    for (i, oidc) in configs.iter().enumerate() {
        let name = object_name(id, i, kims, existing);
        let mut doc = json!({
            "apiVersion": "authentication.gardener.cloud/v1alpha1",
            "kind": "OpenIDConnect",
            "metadata": {
                "name": name,
                "labels": runtime_cluster::owned_labels(id),
            },
            "spec": {
                "issuerURL": oidc.issuer_url,
                "clientID": oidc.client_id,
                "usernameClaim": oidc.username_claim,
                "usernamePrefix": oidc.username_prefix,
                "groupsClaim": oidc.groups_claim,
                "groupsPrefix": oidc.groups_prefix,
                "supportedSigningAlgs": oidc.signing_algs,
                "requiredClaims": oidc.required_claims,
            },
        });
        if let Some(keys) = &oidc.jwks {
            doc["spec"]["jwks"] = json!({ "keys": keys });
        }
        let unchanged = existing.iter().any(|o| {
            o.metadata.name.as_deref() == Some(name.as_str()) && o.data["spec"] == doc["spec"]
        });
        if !unchanged {
            api.patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&doc),
            )
            .await
            .map_err(runtime_cluster::failed(
                id,
                &format!("OpenIDConnect {name}"),
            ))?;
        }
        wanted.push(name);
    }
    for stale in existing.iter().filter_map(|o| o.metadata.name.as_ref()) {
        if !wanted.contains(stale) {
            api.delete(stale, &DeleteParams::default())
                .await
                .map_err(runtime_cluster::failed(
                    id,
                    &format!("OpenIDConnect {stale}"),
                ))?;
        }
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(client: Option<&str>, issuer: Option<&str>) -> OidcConfig {
        serde_json::from_value(json!({"clientID": client, "issuerURL": issuer})).unwrap()
    }

    /// KIM's `additionalOidcEmptyOrUndefined` (runtime_fsm_configure_skr.go): unset or
    /// incomplete → the default tenant, `[]` → none, complete → as listed.
    #[test]
    fn the_default_tenant_fills_in_unless_the_runtime_opts_out() {
        let tenant = config(Some("shared"), Some("https://ias.example.com"));
        let own = config(Some("own"), Some("https://own.example.com"));
        let default = Some(&tenant);
        assert_eq!(wanted(None, default), vec![tenant.clone()]);
        assert_eq!(
            wanted(Some(&[own.clone(), config(None, None)]), default),
            vec![tenant.clone()]
        );
        assert_eq!(wanted(Some(&[]), default), []);
        assert_eq!(
            wanted(Some(std::slice::from_ref(&own)), default),
            vec![own.clone()]
        );
        assert_eq!(wanted(None, None), []);
    }

    /// An adopted `kyma-oidc-<i>` keeps its name on every later reconcile (it then carries
    /// this Runtime's labels and is no longer among KIM's).
    #[test]
    fn an_adopted_object_keeps_its_name() {
        let owned: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1",
            "kind": "OpenIDConnect", "metadata": {"name": "kyma-oidc-0"}}))
        .unwrap();
        let kims = ["kyma-oidc-0".to_string()];
        assert_eq!(object_name("rt", 0, &kims, &[]), "kyma-oidc-0");
        assert_eq!(
            object_name("rt", 0, &[], std::slice::from_ref(&owned)),
            "kyma-oidc-0"
        );
        assert_eq!(object_name("rt", 1, &kims, &[owned]), "tessera-oidc-rt-1");
        assert_eq!(object_name("rt", 0, &[], &[]), "tessera-oidc-rt-0");
    }

    #[test]
    fn oidc_objects_need_the_extension() {
        let shoot = |ext: serde_json::Value| -> DynamicObject {
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Shoot", "metadata": {},
                "spec": {"extensions": ext}}))
            .unwrap()
        };
        assert!(oidc_extension_on(Some(&shoot(
            json!([{"type": "shoot-oidc-service"}])
        ))));
        assert!(!oidc_extension_on(Some(&shoot(
            json!([{"type": "shoot-oidc-service", "disabled": true}])
        ))));
        assert!(!oidc_extension_on(Some(&shoot(json!([])))));
        assert!(!oidc_extension_on(None));
    }
}
