use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// A desired Gardener cluster. The spec is KIM's `Runtime` spec (see the SDK's models); the
/// resource name is the runtime id.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "tessera.dev",
    version = "v1alpha1",
    kind = "Runtime",
    namespaced,
    status = "RuntimeStatus",
    shortname = "rt",
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Shoot","type":"string","jsonPath":".status.shoot.name"}"#,
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".spec.shoot.provider.type"}"#,
    printcolumn = r#"{"name":"Region","type":"string","jsonPath":".spec.shoot.region"}"#,
    printcolumn = r#"{"name":"Step","type":"string","priority":1,"jsonPath":".status.step"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct RuntimeSpec {
    #[serde(flatten)]
    pub inner: tessera_sdk::models::RuntimeSpec,
}

/// Every step of the Runtime state machine (one file each in the controller's `states/`),
/// as `status.step` names the one that ran last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RuntimeStep {
    Initialise,
    CreateShoot,
    SelectProcessing,
    PatchShoot,
    ShadowRender,
    WaitForShoot,
    HandleKubeconfig,
    CreateNamespaces,
    ConfigureOidc,
    ApplyAdminBindings,
    ProvisioningInfo,
    Ready,
    DeleteKubeconfig,
    DeleteShoot,
    RemoveFinalizer,
}

impl RuntimeStep {
    const ALL: [RuntimeStep; 15] = [
        Self::Initialise,
        Self::CreateShoot,
        Self::SelectProcessing,
        Self::PatchShoot,
        Self::ShadowRender,
        Self::WaitForShoot,
        Self::HandleKubeconfig,
        Self::CreateNamespaces,
        Self::ConfigureOidc,
        Self::ApplyAdminBindings,
        Self::ProvisioningInfo,
        Self::Ready,
        Self::DeleteKubeconfig,
        Self::DeleteShoot,
        Self::RemoveFinalizer,
    ];

    /// As written in status and in metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Self::Initialise => "Initialise",
            Self::CreateShoot => "CreateShoot",
            Self::SelectProcessing => "SelectProcessing",
            Self::PatchShoot => "PatchShoot",
            Self::ShadowRender => "ShadowRender",
            Self::WaitForShoot => "WaitForShoot",
            Self::HandleKubeconfig => "HandleKubeconfig",
            Self::CreateNamespaces => "CreateNamespaces",
            Self::ConfigureOidc => "ConfigureOidc",
            Self::ApplyAdminBindings => "ApplyAdminBindings",
            Self::ProvisioningInfo => "ProvisioningInfo",
            Self::Ready => "Ready",
            Self::DeleteKubeconfig => "DeleteKubeconfig",
            Self::DeleteShoot => "DeleteShoot",
            Self::RemoveFinalizer => "RemoveFinalizer",
        }
    }
}

/// The coarse lifecycle state shown in `kubectl get runtimes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RuntimeState {
    Pending,
    Provisioning,
    Updating,
    Ready,
    Failed,
    Terminating,
}

impl RuntimeState {
    pub const ALL: [RuntimeState; 6] = [
        Self::Pending,
        Self::Provisioning,
        Self::Updating,
        Self::Ready,
        Self::Failed,
        Self::Terminating,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Provisioning => "Provisioning",
            Self::Updating => "Updating",
            Self::Ready => "Ready",
            Self::Failed => "Failed",
            Self::Terminating => "Terminating",
        }
    }
}

/// Where the Runtime's Shoot lives on the Gardener side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShootRef {
    pub name: String,
    pub namespace: String,
}

/// One plugin of the chain that produced the last applied Shoot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PluginStamp {
    pub name: String,
    pub version: String,
    /// `sha256:<hex>` of the component.
    pub digest: String,
    /// Release channel, for plugins from `Plugin` resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
}

/// How a shadow version's render compares with the applied version's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ShadowOutcome {
    Same,
    Differs,
    Failed,
}

impl ShadowOutcome {
    /// `Same` or `Differs` by whether there is a difference.
    pub fn of(diff: &[String]) -> Self {
        if diff.is_empty() {
            Self::Same
        } else {
            Self::Differs
        }
    }

    /// As written in status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Same => "Same",
            Self::Differs => "Differs",
            Self::Failed => "Failed",
        }
    }

    /// Lower-case, for metric labels and sentences.
    pub fn as_lower(self) -> &'static str {
        match self {
            Self::Same => "same",
            Self::Differs => "differs",
            Self::Failed => "failed",
        }
    }
}

impl std::fmt::Display for ShadowOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The last render with a shadow version: what it would have changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShadowResult {
    pub plugin: String,
    pub channel: String,
    /// The shadow version and its component digest.
    pub version: String,
    pub digest: String,
    /// The version that was applied instead.
    pub current_version: String,
    pub result: ShadowOutcome,
    /// Changed fields, one per line (`~ path: old → new`, `+ path: new`, `- path: old`),
    /// at most 40; or the shadow's error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "state_schema")]
    pub state: Option<RuntimeState>,
    /// The state-machine step that ran last (e.g. `WaitForShoot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "step_schema")]
    pub step: Option<RuntimeStep>,
    /// Provisioned, KubeconfigReady, KymaSystemNSCreated, OidcConfigured, Configured,
    /// PluginsAvailable, PluginVersions, GardenerReachable, Deprovisioned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shoot: Option<ShootRef>,
    /// The chain that produced the last applied Shoot, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<PluginStamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_version: Option<String>,
    /// `sha256:<hex>` of the last applied Shoot manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shoot_hash: Option<String>,
    /// For a Shoot taken over from KIM and not written since: the Runtime generation its
    /// render was found to match (the Shoot does not carry Tessera's annotation yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_generation: Option<i64>,
    /// Shadow versions rendered next to the chain (`tessera shadow` shows them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadow: Vec<ShadowResult>,
}

/// A plain string enum: the derived schema of `Option<enum>` lists `null`, which
/// apiextensions v1 rejects.
/// The steps, as a string enum (not a nullable one: the field is left out instead).
fn step_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = RuntimeStep::ALL.iter().map(|s| s.name()).collect();
    schemars::json_schema!({
        "type": "string",
        "enum": names,
        "description": "The state-machine step that ran last (e.g. `WaitForShoot`).",
    })
}

fn state_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let names: Vec<&str> = RuntimeState::ALL.iter().map(|s| s.as_str()).collect();
    schemars::json_schema!({ "type": "string", "enum": names })
}
