//! Secrets whose RuntimeKubeconfig is gone (deleted while no host ran, finalizer removed by
//! hand) are deleted at start-up. Only Secrets a RuntimeKubeconfig controlled: a Secret
//! that merely carries the label is someone else's, and stays.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, PartialObjectMeta};
use kube::{Client, ResourceExt};

use crate::api;
use crate::controllers::labels;
use crate::crd::RuntimeKubeconfig;

/// Delete kubeconfig Secrets whose controlling RuntimeKubeconfig is gone; returns how many.
/// Two lists whatever the fleet (a read per Secret made a new leader of 1,000 Runtimes wait
/// 40 s before it sharded): the Secrets first, then the RuntimeKubeconfigs — a Secret's
/// owner is made before it, so an owner missing from the later list is gone.
pub(crate) async fn remove_orphaned_secrets(
    client: &Client,
    namespace: Option<&str>,
) -> Result<usize, kube::Error> {
    let (secrets, kubeconfigs): (Api<Secret>, Api<RuntimeKubeconfig>) = match namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let selector = format!("{}=true", labels::KUBECONFIG);
    let listed = secrets
        .list_metadata(&ListParams::default().labels(&selector))
        .await?;
    let alive: HashSet<String> = kubeconfigs
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|k| k.metadata.uid)
        .collect();
    let mut removed = 0;
    for secret in listed {
        let orphaned = secret.owner_references().iter().any(|o| {
            o.controller == Some(true) && o.kind == "RuntimeKubeconfig" && !alive.contains(&o.uid)
        });
        if orphaned && delete(client, &secret).await? {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Delete `secret` at the version judged orphaned, not one rewritten since (the sweep runs
/// beside the controllers when replicas shard); whether this call deleted it.
async fn delete(client: &Client, secret: &PartialObjectMeta<Secret>) -> Result<bool, kube::Error> {
    let ns = secret.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: secret.uid(),
            resource_version: secret.resource_version(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&secret.name_any(), &params).await {
        Ok(_) => {
            tracing::info!(secret = %secret.name_any(), namespace = %ns, "orphaned kubeconfig Secret deleted");
            Ok(true)
        }
        Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
