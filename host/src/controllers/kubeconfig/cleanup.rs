//! Secrets whose RuntimeKubeconfig is gone (deleted while no host ran, finalizer removed by
//! hand) are deleted at start-up. Only Secrets a RuntimeKubeconfig controlled: a Secret
//! that merely carries the label is someone else's, and stays.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Client, ResourceExt};

use crate::api;
use crate::controllers::labels;
use crate::crd::RuntimeKubeconfig;

/// Delete kubeconfig Secrets whose controlling RuntimeKubeconfig is gone; returns how many.
pub(crate) async fn remove_orphaned_secrets(
    client: &Client,
    namespace: Option<&str>,
) -> Result<usize, kube::Error> {
    let secrets: Api<Secret> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let selector = format!("{}=true", labels::KUBECONFIG);
    let mut removed = 0;
    for secret in secrets
        .list(&ListParams::default().labels(&selector))
        .await?
    {
        let ns = secret.namespace().unwrap_or_default();
        let Some(owner) = secret
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == "RuntimeKubeconfig")
        else {
            continue;
        };
        let kubeconfigs: Api<RuntimeKubeconfig> = Api::namespaced(client.clone(), &ns);
        let alive = kubeconfigs
            .get_opt(&owner.name)
            .await?
            .is_some_and(|k| k.uid().as_deref() == Some(owner.uid.as_str()));
        if !alive {
            let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
            // The version judged orphaned, not one rewritten since (the sweep runs beside
            // the controllers when replicas shard).
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
                    removed += 1;
                }
                Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(removed)
}
