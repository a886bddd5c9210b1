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

/// A kubeconfig Secret a RuntimeKubeconfig controls, as much as the sweep needs of it.
struct Controlled {
    namespace: String,
    name: String,
    uid: Option<String>,
    resource_version: Option<String>,
    owner: String,
}

impl Controlled {
    fn of(secret: PartialObjectMeta<Secret>) -> Option<Self> {
        let owner = secret
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == "RuntimeKubeconfig")?
            .uid
            .clone();
        Some(Self {
            namespace: secret.namespace().unwrap_or_default(),
            name: secret.name_any(),
            uid: secret.metadata.uid,
            resource_version: secret.metadata.resource_version,
            owner,
        })
    }
}

/// Delete kubeconfig Secrets whose controlling RuntimeKubeconfig is gone; returns how many.
/// Two paged lists whatever the fleet (a read per Secret made a new leader of 1,000
/// Runtimes wait 40 s before it sharded; one page for all held 22 MiB): the Secrets first,
/// then the RuntimeKubeconfigs — a Secret's owner is made before it, so an owner missing
/// from the later list is gone.
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
    let mut controlled = Vec::new();
    let secret_page = |params: ListParams| {
        let secrets = secrets.clone();
        async move { secrets.list_metadata(&params).await }
    };
    let params = ListParams::default().labels(&selector);
    api::for_each_page(&params, secret_page, |secret| {
        controlled.extend(Controlled::of(secret));
    })
    .await?;
    let mut alive = HashSet::new();
    let kubeconfig_page = |params: ListParams| {
        let kubeconfigs = kubeconfigs.clone();
        async move { kubeconfigs.list_metadata(&params).await }
    };
    api::for_each_page(&ListParams::default(), kubeconfig_page, |k| {
        alive.extend(k.metadata.uid);
    })
    .await?;
    let mut removed = 0;
    for secret in controlled.iter().filter(|s| !alive.contains(&s.owner)) {
        if delete(client, secret).await? {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Delete `secret` at the version judged orphaned, not one rewritten since (the sweep runs
/// beside the controllers when replicas shard); whether this call deleted it.
async fn delete(client: &Client, secret: &Controlled) -> Result<bool, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: secret.uid.clone(),
            resource_version: secret.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&secret.name, &params).await {
        Ok(_) => {
            tracing::info!(secret = %secret.name, namespace = %secret.namespace, "orphaned kubeconfig Secret deleted");
            Ok(true)
        }
        Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use http::Method;
    use serde_json::{Value, json};

    use crate::api::mock::{Exchange, serve};

    fn secret(name: &str, owner: Option<&str>) -> Value {
        let owners: Vec<Value> = owner
            .map(|uid| {
                json!({"apiVersion": "tessera.dev/v1alpha1", "kind": "RuntimeKubeconfig",
                "name": "k", "uid": uid, "controller": true})
            })
            .into_iter()
            .collect();
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "resourceVersion": "7", "ownerReferences": owners}})
    }

    fn page(items: Vec<Value>, next: &str) -> Value {
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
            "metadata": {"continue": next}, "items": items})
    }

    #[tokio::test]
    async fn the_sweep_reads_a_page_at_a_time_and_deletes_only_orphans_at_their_version() {
        let secrets = "/api/v1/namespaces/ns/secrets";
        let kubeconfigs = "/apis/tessera.dev/v1alpha1/namespaces/ns/runtimekubeconfigs";
        let (client, server) = serve(vec![
            Exchange::ok(
                Method::GET,
                secrets,
                page(
                    vec![secret("alive", Some("k1")), secret("foreign", None)],
                    "more",
                ),
            ),
            Exchange::ok(
                Method::GET,
                secrets,
                page(vec![secret("orphan", Some("gone"))], ""),
            ),
            Exchange::ok(
                Method::GET,
                kubeconfigs,
                page(vec![json!({"metadata": {"name": "k", "uid": "k1"}})], ""),
            ),
            Exchange::ok(
                Method::DELETE,
                &format!("{secrets}/orphan"),
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}}),
            ),
        ]);
        let removed = super::remove_orphaned_secrets(&client, Some("ns")).await;
        drop(client);
        assert_eq!(removed.expect("swept"), 1);
        let received = server.received().await;
        assert!(
            received[0].query.contains("limit=100"),
            "{}",
            received[0].query
        );
        assert!(
            received[1].query.contains("continue=more"),
            "{}",
            received[1].query
        );
        let preconditions = &received[3].body["preconditions"];
        assert_eq!(preconditions["uid"], "uid-orphan");
        assert_eq!(preconditions["resourceVersion"], "7");
    }
}
