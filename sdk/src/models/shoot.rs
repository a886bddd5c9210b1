use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Extra, ObjectMeta, Worker};

/// The Gardener API version Tessera writes.
pub const SHOOT_API_VERSION: &str = "core.gardener.cloud/v1beta1";

/// A Gardener `Shoot`, typed where first-party plugins write and opaque elsewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shoot {
    #[serde(default = "shoot_api_version")]
    pub api_version: String,
    #[serde(default = "shoot_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ShootSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Default for Shoot {
    fn default() -> Self {
        Self {
            api_version: shoot_api_version(),
            kind: shoot_kind(),
            metadata: ObjectMeta::default(),
            spec: ShootSpec::default(),
            status: None,
            extra: Extra::new(),
        }
    }
}

fn shoot_api_version() -> String {
    SHOOT_API_VERSION.to_string()
}

fn shoot_kind() -> String {
    "Shoot".to_string()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShootSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The CloudProfile (`{kind: CloudProfile, name}`), Gardener's successor of
    /// `cloudProfileName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_profile: Option<CloudProfileReference>,
    /// Deprecated by Gardener (refused from Kubernetes 1.34): kept to read Shoots that have it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_profile_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_binding_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_binding_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exposure_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<ShootNetworking>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlane>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_selector: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_restrictions: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub provider: ShootProvider,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<Extension>>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub kubernetes: ShootKubernetes,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<Maintenance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<serde_json::Value>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.cloudProfile`: which CloudProfile (or NamespacedCloudProfile) the Shoot uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloudProfileReference {
    /// `CloudProfile` or `NamespacedCloudProfile`.
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShootNetworking {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<String>,
    /// `IPv4`, `IPv6`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_families: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.controlPlane`; also the Runtime's `spec.shoot.controlPlane`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-preserve-unknown-fields" = true))
)]
pub struct ControlPlane {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_availability: Option<HighAvailability>,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HighAvailability {
    pub failure_tolerance: FailureTolerance,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FailureTolerance {
    /// `zone` or `node`.
    #[serde(rename = "type")]
    pub type_: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShootProvider {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub workers: Vec<Worker>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_config: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_config: Option<serde_json::Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// An entry of `spec.extensions`, identified by its type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Extension {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_config: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ShootSpec {
    /// The extension of type `type_`, if the Shoot lists it.
    pub fn extension(&self, type_: &str) -> Option<&Extension> {
        self.extensions.iter().flatten().find(|e| e.type_ == type_)
    }

    /// Replace the extension of the same type, or append it; other extensions stay as they are.
    pub fn upsert_extension(&mut self, extension: Extension) {
        let list = self.extensions.get_or_insert_with(Vec::new);
        match list.iter_mut().find(|e| e.type_ == extension.type_) {
            Some(existing) => *existing = extension,
            None => list.push(extension),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShootKubernetes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(
        rename = "kubeAPIServer",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_api_server: Option<KubeApiServer>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeApiServer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc_config: Option<crate::models::OidcConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_authentication: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_config: Option<serde_json::Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Maintenance {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_update: Option<AutoUpdate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_window: Option<TimeWindow>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoUpdate {
    pub kubernetes_version: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_image_version: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TimeWindow {
    pub begin: String,
    pub end: String,
}

/// Annotations Gardener reads before deleting a Shoot.
pub mod annotations {
    pub const CONFIRM_DELETION: &str = "confirmation.gardener.cloud/deletion";
    pub const FORCE_DELETION: &str = "confirmation.gardener.cloud/force-deletion";
}

/// String maps that appear in many places.
pub type StringMap = BTreeMap<String, String>;

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}
