use serde::{Deserialize, Serialize};

use super::{ControlPlane, ObjectMeta, Worker};

/// The API group and version of Tessera's `Runtime`.
pub const RUNTIME_API_VERSION: &str = "tessera.dev/v1alpha1";

/// A desired cluster. Field names and structure are KIM's (`infrastructuremanager.kyma-project.io`
/// `Runtime`), so a KIM manifest ports by changing its `apiVersion`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    #[serde(default = "runtime_api_version")]
    pub api_version: String,
    #[serde(default = "runtime_kind")]
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: RuntimeSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

fn runtime_api_version() -> String {
    RUNTIME_API_VERSION.to_string()
}

fn runtime_kind() -> String {
    "Runtime".to_string()
}

impl Runtime {
    /// The runtime id: the resource name, as in KIM.
    pub fn id(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// A label of the Runtime, empty when absent.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.get(key).map(String::as_str)
    }

    /// The main pool followed by the additional pools, in Runtime order.
    pub fn all_workers(&self) -> impl Iterator<Item = &Worker> {
        let provider = &self.spec.shoot.provider;
        provider
            .workers
            .iter()
            .chain(provider.additional_workers.iter().flatten())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuntimeSpec {
    pub shoot: RuntimeShoot,
    #[serde(default)]
    pub security: Security,
    /// Who asked for the cluster (KIM field, informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// Pull-through caches of image registries (Gardener's `registry-cache` extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_registry_cache: Option<Vec<ImageRegistryCache>>,
}

/// One registry cache, as KIM's Runtime lists them (from the runtime cluster's
/// `RegistryCache` resources).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ImageRegistryCache {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The cache: `upstream` (required), `remoteURL`, `volume`, `garbageCollection`,
    /// `secretReferenceName`, `proxy`, `http` (Gardener's `RegistryCache` fields).
    pub config: RegistryCacheConfig,
}

/// Gardener's `RegistryCache`; fields Tessera does not check are carried as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-preserve-unknown-fields" = true))
)]
pub struct RegistryCacheConfig {
    pub upstream: String,
    /// The name of a Secret reference (a `spec.resources` entry of the Shoot) with the
    /// upstream's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_reference_name: Option<String>,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuntimeShoot {
    pub name: String,
    pub purpose: String,
    pub platform_region: String,
    pub region: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub licence_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_binding_name: Option<String>,
    /// Gardener's successor of `secretBindingName`; wins when both are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_binding_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforce_seed_location: Option<bool>,
    #[serde(default)]
    pub kubernetes: RuntimeKubernetes,
    pub provider: RuntimeProvider,
    pub networking: RuntimeNetworking,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlane>,
    /// Run NVIDIA's OpenShell extension (`shoot-nvidia-openshell`); once enabled, turning
    /// it off disables the extension rather than removing it (as KIM does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_nvidia_openshell: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuntimeKubernetes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, rename = "kubeAPIServer")]
    pub kube_api_server: RuntimeApiServer,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuntimeApiServer {
    #[serde(default)]
    pub oidc_config: OidcConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_oidc_config: Option<Vec<OidcConfig>>,
    /// The API server is reachable only from these CIDRs (Gardener's ACL extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<Acl>,
}

/// `kubeAPIServer.acl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Acl {
    #[serde(rename = "allowedCIDRs", default)]
    pub allowed_cidrs: Vec<String>,
}

/// Gardener's `OIDCConfig`; every field optional, unset means "use the configured default".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OidcConfig {
    #[serde(rename = "clientID", default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(rename = "issuerURL", default, skip_serializing_if = "Option::is_none")]
    pub issuer_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_claim: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_algs: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_claims: Option<std::collections::BTreeMap<String, String>>,
    /// The issuer's JSON Web Key Set, base64 (KIM's `jwks`): tokens are verified with these
    /// keys instead of the issuer's discovery endpoint (`OpenIDConnect` `spec.jwks.keys`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks: Option<String>,
}

impl OidcConfig {
    /// KIM's rule: a config with neither client id nor issuer gets the defaults.
    pub fn is_unset(&self) -> bool {
        self.client_id.is_none() && self.issuer_url.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuntimeProvider {
    /// `aws`, `azure`, `gcp` or `openstack`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Exactly one main pool.
    pub workers: Vec<Worker>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_workers: Option<Vec<Worker>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuntimeNetworking {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub nodes: String,
    pub pods: String,
    pub services: String,
    /// IPv4 and IPv6 (aws and gcp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_stack: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Security {
    #[serde(default)]
    pub administrators: Vec<String>,
    #[serde(default)]
    pub networking: NetworkingSecurity,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NetworkingSecurity {
    #[serde(default)]
    pub filter: Filter,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Filter {
    #[serde(default)]
    pub egress: Toggle,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Toggle>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Toggle {
    #[serde(default)]
    pub enabled: bool,
}
