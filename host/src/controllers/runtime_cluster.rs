//! Clients for runtime clusters, built from the kubeconfig Secrets Tessera maintains.

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;

use super::{Context, ReconcileError};

/// A client for the cluster of `runtime_id`, from Secret `kubeconfig-<id>` key `config`:
/// the Secret lives in the tenant's namespace, so its kubeconfig is checked like any other
/// (see `crate::kubeconfig`), and the client writes through the leader fence.
pub(crate) async fn client(
    ctx: &Context,
    namespace: &str,
    runtime_id: &str,
) -> Result<Client, ReconcileError> {
    let fail = |message: String| ReconcileError::RuntimeCluster {
        runtime: runtime_id.to_string(),
        message,
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let name = super::labels::kubeconfig_secret(runtime_id);
    let secret = secrets.get_opt(&name).await?.ok_or_else(|| {
        ctx.clusters.forget(namespace, &name);
        fail(format!("Secret {namespace}/{name} does not exist"))
    })?;
    client_of(ctx, runtime_id, &secret).await
}

/// A client for the cluster of `runtime_id` from its kubeconfig Secret as the caller read
/// it (checked like any other kubeconfig).
pub(crate) async fn client_of(
    ctx: &Context,
    runtime_id: &str,
    secret: &Secret,
) -> Result<Client, ReconcileError> {
    let (client, _) = ctx
        .clusters
        .client(&ctx.config.kubeconfigs, secret, "config", &ctx.fence)
        .await
        .map_err(|e| ReconcileError::RuntimeCluster {
            runtime: runtime_id.to_string(),
            message: e.to_string(),
        })?;
    Ok(client)
}

/// Drop the client of `runtime_id`'s cluster once the Runtime is prepared: a settled
/// Runtime reaches into its cluster again only when it changes, while a client kept until
/// `--target-idle` costs each settled Runtime ~27 KiB (rustls' session cache, kube's
/// request buffer; heap profile of `./x load --runtimes 1000 --replicas 3`). ModuleSets on
/// the cluster keep the handle they took.
pub(crate) fn release(ctx: &Context, namespace: &str, runtime_id: &str) {
    ctx.clusters
        .forget(namespace, &super::labels::kubeconfig_secret(runtime_id));
}

/// A request to the runtime cluster of `runtime_id` about `what` failed: the error names
/// the cluster (the Runtime's condition says it, not just the log).
pub(crate) fn failed(runtime_id: &str, what: &str) -> impl Fn(kube::Error) -> ReconcileError {
    let (runtime, what) = (runtime_id.to_string(), what.to_string());
    move |e| ReconcileError::RuntimeCluster {
        runtime: runtime.clone(),
        message: format!("{what}: {}", crate::report::kube_error(&e)),
    }
}

/// Labels of every object Tessera owns in a runtime cluster; nothing else is ever changed
/// or deleted there.
pub(crate) fn owned_labels(runtime_id: &str) -> serde_json::Value {
    serde_json::json!({
        super::labels::MANAGED_BY: super::labels::MANAGED_BY_VALUE,
        super::labels::RUNTIME: runtime_id,
    })
}

/// The objects of `api`'s kind Tessera owns for `runtime_id`, from the API server's cache:
/// cheap, and one the cache does not show yet is applied again, which changes nothing.
pub(crate) async fn list_owned<K>(
    api: &kube::Api<K>,
    runtime_id: &str,
) -> Result<Vec<K>, ReconcileError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let selector = format!(
        "{}={},{}={runtime_id}",
        super::labels::MANAGED_BY,
        super::labels::MANAGED_BY_VALUE,
        super::labels::RUNTIME
    );
    let params = kube::api::ListParams::default()
        .labels(&selector)
        .match_any();
    let listed = api.list(&params).await;
    Ok(listed
        .map_err(failed(runtime_id, "listing what Tessera owns"))?
        .items)
}
