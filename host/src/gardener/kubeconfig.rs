//! `POST shoots/{name}/adminkubeconfig`: a short-lived admin kubeconfig for a Shoot.

use base64::Engine as _;
use kube::Client;
use serde_json::json;

/// A kubeconfig issued by Gardener.
#[derive(Debug, Clone)]
pub(crate) struct AdminKubeconfig {
    pub(crate) kubeconfig: String,
    /// When Gardener says it stops working.
    pub(crate) expiry: jiff::Timestamp,
}

/// Request an admin kubeconfig valid for `expiration_seconds`.
pub(crate) async fn request_admin_kubeconfig(
    client: &Client,
    namespace: &str,
    shoot: &str,
    expiration_seconds: i64,
) -> Result<AdminKubeconfig, kube::Error> {
    let body = json!({
        "apiVersion": "authentication.gardener.cloud/v1alpha1",
        "kind": "AdminKubeconfigRequest",
        "spec": { "expirationSeconds": expiration_seconds },
    });
    let request = http::Request::post(format!(
        "/apis/core.gardener.cloud/v1beta1/namespaces/{namespace}/shoots/{shoot}/adminkubeconfig"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&body).expect("JSON"))
    .map_err(kube::Error::HttpError)?;
    let response: serde_json::Value = client.request(request).await?;
    let invalid = |what: &str| {
        kube::Error::Service(
            format!("Gardener's AdminKubeconfigRequest for {namespace}/{shoot}: {what}").into(),
        )
    };
    let encoded = response["status"]["kubeconfig"]
        .as_str()
        .ok_or_else(|| invalid("status.kubeconfig is missing"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| invalid(&format!("status.kubeconfig is not base64: {e}")))?;
    let kubeconfig =
        String::from_utf8(bytes).map_err(|_| invalid("status.kubeconfig is not UTF-8"))?;
    let expiry = crate::time::parse_rfc3339(response["status"]["expirationTimestamp"].as_str())
        .unwrap_or_else(|| {
            jiff::Timestamp::now() + jiff::SignedDuration::from_secs(expiration_seconds)
        });
    Ok(AdminKubeconfig { kubeconfig, expiry })
}
