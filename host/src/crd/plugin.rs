use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::grants::Grants;

/// The two plugin worlds of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginKind {
    ShootExtension,
    ModuleReconciler,
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PluginKind::ShootExtension => "shoot-extension",
            PluginKind::ModuleReconciler => "module-reconciler",
        })
    }
}

/// Limits that override the defaults field by field (a Plugin's `spec.limits`, a chain
/// step's `limits`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsOverride {
    #[serde(rename = "memoryMiB", default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    #[serde(rename = "timeoutMs", default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(rename = "outputKiB", default, skip_serializing_if = "Option::is_none")]
    pub output_kib: Option<u64>,
    #[serde(rename = "logLines", default, skip_serializing_if = "Option::is_none")]
    pub log_lines: Option<u32>,
    #[serde(
        rename = "readObjects",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub read_objects: Option<u32>,
    #[serde(rename = "readKiB", default, skip_serializing_if = "Option::is_none")]
    pub read_kib: Option<u64>,
}

/// A plugin released through an OCI registry: its versions, which version each release
/// channel runs, and optionally a shadow version rendered next to it for comparison.
/// The resource name is the plugin name the chain (or a ModuleSet) refers to.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "tessera.dev",
    version = "v1alpha1",
    kind = "Plugin",
    status = "PluginStatus",
    shortname = "tplugin",
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".spec.kind"}"#,
    printcolumn = r#"{"name":"Channels","type":"string","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSpec {
    /// `shoot-extension` or `module-reconciler`; the component must export that world.
    #[schemars(schema_with = "kind_schema")]
    pub kind: PluginKind,
    /// Released versions. A tag reference is resolved to a digest, which status pins.
    pub versions: Vec<PluginVersion>,
    /// Release channels (e.g. `regular`, `fast`) and the version each one runs.
    pub channels: Vec<PluginChannel>,
    /// Limits for every call, over the host's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsOverride>,
    /// Configuration passed to the plugin (the host's chain configuration can override it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub config: Option<serde_json::Value>,
    /// Signature requirements; the trust policy of the host can require them for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// What happens when a version's tag moves to another digest: `Approve` (default) keeps
    /// running the pinned digest and shows the new one as pending until an operator
    /// approves it (annotation `approve.tessera.dev/<version>: <digest>`); `Automatic`
    /// follows the tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "update_policy_schema")]
    pub update_policy: Option<UpdatePolicy>,
    /// What the plugin may do: the objects a module reconciler may write and read, the
    /// Shoot paths a shoot extension may set. Nothing else is carried out on its behalf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<Grants>,
    /// Keys of `config` a ModuleSet's module `config` may not replace (e.g. `manifest`);
    /// the plugin's own declared locks apply as well.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locked_config: Vec<String>,
    /// Module reconcilers: offer the module only to ModuleSets whose labels match (a
    /// restricted module, e.g. for one landscape or tier). A set that asks for it without
    /// matching gets the module in Error, naming this selector. Unset: every set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "label_selector_schema")]
    pub module_set_selector: Option<LabelSelector>,
    /// Module reconcilers: install the module on every matching ModuleSet's target at this
    /// version, whether the set lists it or not (a security agent, a placement helper).
    /// Shown under the set's `status.mandatoryModules`; a set cannot remove, unmanage or
    /// re-version it. Removing this field retires it: it is uninstalled everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mandatory: Option<Mandatory>,
}

/// Where and at which version a mandatory module is installed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mandatory {
    /// The version every matching set gets: one of `spec.versions`.
    #[schemars(length(min = 1, max = 64))]
    pub version: String,
    /// The ModuleSets that get it, by label; unset: every ModuleSet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "label_selector_schema")]
    pub module_set_selector: Option<LabelSelector>,
}

/// One released version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginVersion {
    /// Semantic version, e.g. `1.4.0`; channels refer to it and downgrades are judged by it.
    #[schemars(pattern(super::SEMVER), length(max = 64))]
    pub version: String,
    /// `registry/repository:tag` or `registry/repository@sha256:…`.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = 1024))]
    pub reference: String,
    /// Module reconcilers: upgrading to this version takes the module down for a while, so
    /// an upgrade waits for the target's maintenance window (`tessera run
    /// --maintenance-windows`) unless the ModuleSet skips windows. A first install does
    /// not wait.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_downtime: bool,
}

/// One release channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginChannel {
    #[schemars(pattern(super::DNS_LABEL), length(min = 1, max = 63))]
    pub name: String,
    /// The version this channel runs (one of `versions`).
    #[schemars(pattern(super::SEMVER), length(max = 64))]
    pub version: String,
    /// A version rendered next to `version` whose output is only compared, never applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(super::SEMVER), length(max = 64))]
    pub shadow: Option<String>,
    /// Let Runtimes move to a lower version than the one they were rendered with.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_downgrade: bool,
}

/// See [`PluginSpec::update_policy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum UpdatePolicy {
    Approve,
    Automatic,
}

fn update_policy_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": ["Approve", "Automatic"] })
}

/// Signature requirements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Verification {
    /// Refuse versions without a signature that verifies with a key of the host's trust
    /// policy for the artifact's repository.
    #[serde(default)]
    pub required: bool,
}

/// What the host resolved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: every channel (and shadow) has a loaded version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<ResolvedVersion>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<ChannelStatus>,
    /// `regular=1.2.0 fast=1.3.0(shadow 1.4.0)`, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The last error, in words (empty once everything resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// What the loaded versions request next to what `spec.grants` grants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<GrantStatus>,
}

/// Requested against granted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantStatus {
    /// What the loaded versions declare they need (their `tessera:requests` sections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<Grants>,
    /// Requested but not granted, in words (the plugin may fail where it needs them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_granted: Vec<String>,
}

/// One version as resolved and pulled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedVersion {
    pub version: String,
    #[serde(rename = "ref")]
    pub reference: String,
    /// Manifest digest the reference resolved to (pinned until the tag moves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// `sha256:` of the component (the layer), as Runtimes record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_digest: Option<String>,
    /// Id of the key that verified the signature, when one was required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
    /// The digest the tag moved to, waiting for approval (see `spec.updatePolicy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_digest: Option<String>,
    /// Why this version is not usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One channel as the host runs it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelStatus {
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_digest: Option<String>,
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn kind_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": ["shoot-extension", "module-reconciler"] })
}

/// A `metav1.LabelSelector` (k8s-openapi's types carry no schema).
fn label_selector_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "properties": {
            "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
            "matchExpressions": {"type": "array", "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            }},
        },
    })
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}
