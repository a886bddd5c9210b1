//! Clients for runtime clusters, built from the kubeconfig Secrets Tessera maintains.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::ReconcileError;

/// A client for the cluster of `runtime_id`, from Secret `kubeconfig-<id>` key `config`.
pub async fn client(
    control_plane: &Client,
    namespace: &str,
    runtime_id: &str,
) -> Result<Client, ReconcileError> {
    let fail = |message: String| ReconcileError::RuntimeCluster {
        runtime: runtime_id.to_string(),
        message,
    };
    let secrets: Api<Secret> = Api::namespaced(control_plane.clone(), namespace);
    let name = format!("kubeconfig-{runtime_id}");
    let secret = secrets
        .get_opt(&name)
        .await?
        .ok_or_else(|| fail(format!("Secret {namespace}/{name} does not exist")))?;
    let bytes = secret
        .data
        .and_then(|d| d.get("config").cloned())
        .ok_or_else(|| fail(format!("Secret {namespace}/{name} has no key config")))?;
    let text = String::from_utf8(bytes.0).map_err(|_| fail("kubeconfig is not UTF-8".into()))?;
    let kubeconfig =
        Kubeconfig::from_yaml(&text).map_err(|e| fail(format!("invalid kubeconfig: {e}")))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| fail(format!("unusable kubeconfig: {e}")))?;
    Client::try_from(config).map_err(|e| fail(format!("cannot build a client: {e}")))
}

/// Labels of every object Tessera owns in a runtime cluster; nothing else is ever changed
/// or deleted there.
pub fn owned_labels(runtime_id: &str) -> serde_json::Value {
    serde_json::json!({
        super::labels::MANAGED_BY: super::labels::MANAGED_BY_VALUE,
        super::labels::RUNTIME: runtime_id,
    })
}

/// The objects of `api`'s kind Tessera owns for `runtime_id`, from the API server's cache:
/// cheap, and one the cache does not show yet is applied again, which changes nothing.
pub async fn list_owned<K>(api: &kube::Api<K>, runtime_id: &str) -> Result<Vec<K>, ReconcileError>
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
    Ok(api.list(&params).await?.items)
}
