use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, ShootRef};

/// The admin kubeconfig of one Runtime's cluster, kept fresh in a Secret. Created by the
/// host for every Runtime (KIM's GardenerCluster).
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "tessera.dev",
    version = "v1alpha1",
    kind = "RuntimeKubeconfig",
    namespaced,
    status = "RuntimeKubeconfigStatus",
    shortname = "rkc",
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Runtime","type":"string","jsonPath":".spec.runtime"}"#,
    printcolumn = r#"{"name":"Secret","type":"string","jsonPath":".spec.secret.name"}"#,
    printcolumn = r#"{"name":"Expires","type":"string","jsonPath":".status.expiry"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeKubeconfigSpec {
    /// The runtime id (name of the Runtime in this namespace, whose controller reference
    /// this object must carry).
    #[schemars(pattern(super::DNS_SUBDOMAIN), length(min = 1, max = 253))]
    pub runtime: String,
    pub shoot: ShootRef,
    pub secret: SecretRef,
}

/// Where the kubeconfig is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    #[schemars(pattern(super::DNS_SUBDOMAIN), length(min = 1, max = 253))]
    pub name: String,
    /// Must be the RuntimeKubeconfig's own namespace.
    #[schemars(pattern(super::DNS_LABEL), length(min = 1, max = 63))]
    pub namespace: String,
    #[schemars(pattern(super::SECRET_KEY), length(min = 1, max = 253))]
    pub key: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum KubeconfigState {
    Pending,
    Ready,
    Failed,
    Terminating,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeKubeconfigStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "state_schema")]
    pub state: Option<KubeconfigState>,
    /// When the kubeconfig was last fetched (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync: Option<String>,
    /// When the current kubeconfig stops working (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A plain string enum (see `runtime.rs`).
pub(super) fn state_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["Pending", "Ready", "Failed", "Terminating"],
    })
}
