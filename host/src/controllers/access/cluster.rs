//! What a RuntimeAccess changes in the runtime cluster: its ServiceAccount, roles and
//! bindings (server-side apply, only over objects it made), the Secrets its tokens are bound
//! to, and the removal of whatever it made and no longer wants.

use std::collections::BTreeSet;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, Preconditions,
};
use kube::{Client, ResourceExt};

use super::decide::{self, ACCESS_PART, ACCESS_PART_ANCHOR, ACCESS_UID, Kind, Wanted};
use crate::api;
use crate::controllers::kit::SecretBuilder;
use crate::crd::RuntimeAccess;

/// The field manager of what RuntimeAccesses apply in runtime clusters.
const FIELD_MANAGER: &str = "tessera-access";

/// Why the runtime cluster's objects are not as wanted (the host keeps its hands off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// An object of that name exists and was not made for this RuntimeAccess.
    NotOurs(String),
    /// A namespace named in the spec does not exist there.
    NoNamespace(String),
    /// The API server refused the object as invalid (a role name it does not take, say).
    Refused(String),
}

fn api(client: &Client, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let (group, version) = match kind.api_version().split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", kind.api_version()),
    };
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind.as_str()));
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Apply every wanted object; stop at one that is someone else's or has no namespace.
pub(crate) async fn apply(
    access: &RuntimeAccess,
    client: &Client,
    wanted: &[Wanted],
) -> Result<Result<(), Blocked>, kube::Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for w in wanted {
        let api = api(client, w.kind, w.namespace.as_deref());
        if let Some(existing) = api.get_opt(&w.name).await?
            && !decide::ours(access, existing.labels())
        {
            return Ok(Err(Blocked::NotOurs(w.label())));
        }
        match api.patch(&w.name, &params, &Patch::Apply(&w.doc)).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let why = format!("{}: {}", w.label(), e.message);
                return Ok(Err(Blocked::NoNamespace(why)));
            }
            Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 => {
                let why = format!(
                    "{}: the runtime cluster refused it: {}",
                    w.label(),
                    e.message
                );
                return Ok(Err(Blocked::Refused(why)));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Ok(()))
}

fn selector(access: &RuntimeAccess) -> String {
    format!("{ACCESS_UID}={}", access.uid().unwrap_or_default())
}

/// Delete what was made for `access` and is not in `keep` (every kind, every namespace);
/// returns what was deleted.
pub(crate) async fn prune(
    access: &RuntimeAccess,
    client: &Client,
    keep: &[Wanted],
) -> Result<Vec<String>, kube::Error> {
    let kept: BTreeSet<String> = keep.iter().map(Wanted::label).collect();
    let mut deleted = Vec::new();
    // Bindings first: a role or ServiceAccount is never left bound by a half-done removal.
    for kind in Kind::ALL.iter().rev() {
        let listed = api(client, *kind, None)
            .list(&ListParams::default().labels(&selector(access)))
            .await?;
        for item in listed.items {
            let ns = item.namespace();
            let label = decide::describe(*kind, ns.as_deref(), &item.name_any());
            if kept.contains(&label) || !decide::ours(access, item.labels()) {
                continue;
            }
            let api = api(client, *kind, ns.as_deref());
            delete_exactly(&api, &item.name_any(), item.uid()).await?;
            deleted.push(label);
        }
    }
    Ok(deleted)
}

async fn delete_exactly<K>(api: &Api<K>, name: &str, uid: Option<String>) -> Result<(), kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A token issued for the ServiceAccount and when it expires.
pub(crate) struct Issued {
    pub(crate) token: String,
    pub(crate) expiry: String,
    /// The Secret it is bound to: deleting it revokes the token.
    pub(crate) anchor: String,
    anchor_uid: Option<String>,
}

/// Revoke `issued` (a token that will not be handed out).
pub(crate) async fn revoke(
    access: &RuntimeAccess,
    client: &Client,
    issued: &Issued,
) -> Result<(), kube::Error> {
    let namespace = &access.spec.service_account.namespace;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    delete_exactly(&secrets, &issued.anchor, issued.anchor_uid.clone()).await
}

/// Issue a token for `access`'s ServiceAccount living `seconds`, bound to a new anchor
/// Secret next to it (so that the rotation after it can revoke it).
pub(crate) async fn issue(
    access: &RuntimeAccess,
    client: &Client,
    seconds: i64,
) -> Result<Issued, kube::Error> {
    let sa = &access.spec.service_account;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &sa.namespace);
    let labels = serde_json::from_value(decide::owned_labels(access)).unwrap_or_default();
    let anchor = SecretBuilder::generated(format!("tessera-access-{}-", access.name_any()))
        .labels(labels)
        .label(ACCESS_PART, ACCESS_PART_ANCHOR)
        .build();
    let anchor = secrets.create(&PostParams::default(), &anchor).await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Secret".into()),
                name: Some(anchor.name_any()),
                uid: anchor.uid(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &sa.namespace);
    let answer = match accounts
        .create_token_request(&sa.name, &PostParams::default(), &request)
        .await
    {
        Ok(answer) => answer,
        Err(e) => {
            // No token is bound to it: it would only pile up with every retry.
            let _ = delete_exactly(&secrets, &anchor.name_any(), anchor.uid()).await;
            return Err(e);
        }
    };
    let status = answer.status.unwrap_or_default();
    Ok(Issued {
        token: status.token.unwrap_or_default(),
        expiry: status
            .expiration_timestamp
            .map(|t| crate::time::format_rfc3339(t.0))
            .unwrap_or_default(),
        anchor: anchor.name_any(),
        anchor_uid: anchor.uid(),
    })
}

/// Delete the anchors of tokens (revoking them) but those named in `keep` (the current one,
/// and after a routine rotation the one before it; none on deletion).
pub(crate) async fn revoke_others(
    access: &RuntimeAccess,
    client: &Client,
    keep: &[&str],
) -> Result<usize, kube::Error> {
    let secrets: Api<Secret> = Api::all(client.clone());
    let selector = format!("{},{ACCESS_PART}={ACCESS_PART_ANCHOR}", selector(access));
    let mut revoked = 0;
    for anchor in secrets
        .list(&ListParams::default().labels(&selector))
        .await?
    {
        if keep.contains(&anchor.name_any().as_str()) || !decide::ours(access, anchor.labels()) {
            continue;
        }
        let ns = anchor.namespace().unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
        delete_exactly(&api, &anchor.name_any(), anchor.uid()).await?;
        revoked += 1;
    }
    Ok(revoked)
}
