//! Additional OIDC providers as Gardener `OpenIDConnect` objects in the runtime cluster.

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::super::machine::{Machine, Step, Transition};
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
    let configs = m
        .runtime
        .spec
        .inner
        .shoot
        .kubernetes
        .kube_api_server
        .additional_oidc_config
        .clone()
        .unwrap_or_default();
    let had_any = m
        .status
        .conditions
        .iter()
        .any(|c| c.is(ConditionType::OidcConfigured));
    if configs.is_empty() && !had_any {
        return Ok(Transition::Next(Step::ApplyAdminBindings));
    }
    let client = runtime_cluster::client(&m.ctx, &m.namespace(), &m.id()).await?;
    let api: Api<DynamicObject> = Api::all_with(client, &resource());
    let id = m.id();
    let existing = runtime_cluster::list_owned(&api, &id).await?;
    let wanted = apply(&api, &id, &configs, &existing).await?;
    m.condition(
        ConditionType::OidcConfigured,
        ConditionStatus::True,
        Reason::OidcConfigured,
        format!("{} additional OIDC provider(s) configured", wanted.len()),
    );
    Ok(Transition::Next(Step::ApplyAdminBindings))
}

/// The `OpenIDConnect` object of each of `configs`, applied where it differs from
/// `existing`; those of `existing` no longer wanted deleted. Their names.
async fn apply(
    api: &Api<DynamicObject>,
    id: &str,
    configs: &[tessera_sdk::models::OidcConfig],
    existing: &[DynamicObject],
) -> Result<Vec<String>, ReconcileError> {
    let mut wanted = Vec::new();
    for (i, oidc) in configs.iter().enumerate() {
        let name = format!("tessera-oidc-{id}-{i}");
        let doc = json!({
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
