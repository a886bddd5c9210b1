//! `RuntimeAccess`: a least-privilege kubeconfig for one consumer of a runtime cluster (a
//! broker, a lifecycle manager, a monitoring agent) instead of the admin one.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, KubeconfigState};

/// A ServiceAccount in a Runtime's cluster with the roles asked for, and a kubeconfig for it
/// (a token from the TokenRequest API, rotated before it expires) in a Secret of this
/// namespace. The host creates the ServiceAccount, roles and bindings, and removes them and
/// the Secret when this object is deleted; it never touches objects it did not create.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "tessera.dev",
    version = "v1alpha1",
    kind = "RuntimeAccess",
    plural = "runtimeaccesses",
    namespaced,
    status = "RuntimeAccessStatus",
    shortname = "rac",
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Runtime","type":"string","jsonPath":".spec.runtime"}"#,
    printcolumn = r#"{"name":"ServiceAccount","type":"string","jsonPath":".spec.serviceAccount.name"}"#,
    printcolumn = r#"{"name":"Secret","type":"string","jsonPath":".status.secretName"}"#,
    printcolumn = r#"{"name":"Expires","type":"string","jsonPath":".status.expiry"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeAccessSpec {
    /// The Runtime (in this namespace) whose cluster is accessed.
    #[schemars(pattern(super::DNS_SUBDOMAIN), length(min = 1, max = 253))]
    pub runtime: String,
    /// The ServiceAccount the kubeconfig acts as; the runtime cluster's audit log names it.
    pub service_account: ServiceAccountRef,
    /// What it may do: each entry is rules (the host creates a Role or ClusterRole with
    /// them), or an existing Role or ClusterRole to bind; with `namespace` in that
    /// namespace only, without it cluster-wide.
    #[serde(default)]
    pub grants: Vec<AccessGrant>,
    /// How long one token lives (Go duration: `30m`, `12h`; 10 minutes to 48 hours)
    /// [default: 12h]. It is renewed when most of it has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<String>,
    /// The Secret (in this namespace) the kubeconfig is written to, under key `config`
    /// [default: `<name>-kubeconfig`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(super::DNS_SUBDOMAIN), length(min = 1, max = 253))]
    pub secret_name: Option<String>,
}

/// A ServiceAccount of the runtime cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceAccountRef {
    #[schemars(pattern(super::DNS_SUBDOMAIN), length(min = 1, max = 253))]
    pub name: String,
    /// An existing namespace of the runtime cluster (the host does not create it).
    #[schemars(pattern(super::DNS_LABEL), length(min = 1, max = 63))]
    pub namespace: String,
}

/// One grant: exactly one of `rules`, `role`, `clusterRole`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessGrant {
    /// Where the grant holds; cluster-wide when unset (`role` needs one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(super::DNS_LABEL), length(min = 1, max = 63))]
    pub namespace: Option<String>,
    /// Rules of a Role (with `namespace`) or ClusterRole the host creates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<AccessRule>,
    /// An existing Role of `namespace` to bind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// An existing ClusterRole to bind (in `namespace`, or cluster-wide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_role: Option<String>,
}

/// An RBAC rule (as in a Role).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessRule {
    /// API groups; `""` is the core group.
    #[serde(default, deserialize_with = "groups")]
    #[schemars(schema_with = "groups_schema")]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    pub verbs: Vec<String>,
}

/// API groups, where a `null` item is the core group `""`: the 1.20 API server built here
/// stores `""` in a custom resource's string list as `null`.
fn groups<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let items: Vec<Option<String>> = Deserialize::deserialize(d)?;
    Ok(items.into_iter().map(Option::unwrap_or_default).collect())
}

fn groups_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "default": [],
        "items": { "type": "string", "nullable": true },
    })
}

/// What the host made of a RuntimeAccess.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeAccessStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Pending, Ready, Failed (the states of a RuntimeKubeconfig: the same work, for
    /// another consumer).
    #[schemars(schema_with = "super::kubeconfig::state_schema")]
    pub state: Option<KubeconfigState>,
    /// The Secret holding the kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// When the current token was issued and when it stops working (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<String>,
    /// The generation of the spec the current token was issued for (a new one is issued
    /// when the spec changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_generation: Option<i64>,
    /// The Runtime whose cluster holds the objects made (`spec.runtime` cannot move).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The objects the host made in the runtime cluster (`Kind namespace/name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
