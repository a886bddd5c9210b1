use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// The modules wanted on one cluster (KLM's Kyma resource). Each module's plugin is the
/// `Plugin` of the same name, at the version its release channel runs.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "tessera.dev",
    version = "v1alpha1",
    kind = "ModuleSet",
    namespaced,
    status = "ModuleSetStatus",
    shortname = "mset",
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Modules","type":"string","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Channel","type":"string","jsonPath":".spec.channel"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModuleSetSpec {
    /// The cluster to install on: a kubeconfig Secret in this namespace. Unset: the
    /// cluster the host runs in (single-cluster mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// Release channel of every module without its own (default `regular`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(super::DNS_LABEL), length(max = 63))]
    pub channel: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 200))]
    pub modules: Vec<ModuleSpec>,
    /// Upgrade to versions that need downtime at once instead of in the target's
    /// maintenance window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_maintenance_windows: Option<bool>,
}

/// Where the target cluster's kubeconfig is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// Secret name (in the ModuleSet's namespace), e.g. `kubeconfig-<runtime id>`.
    #[schemars(pattern(super::DNS_SUBDOMAIN), length(min = 1, max = 253))]
    pub secret_name: String,
    /// Key holding the kubeconfig (default `config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(super::SECRET_KEY), length(max = 253))]
    pub key: Option<String>,
    /// Cloud provider passed to plugins as a cluster fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Region passed to plugins as a cluster fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// One wanted module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModuleSpec {
    /// Module name: the `Plugin` that reconciles it.
    #[schemars(pattern(super::DNS_LABEL), length(min = 1, max = 63))]
    pub name: String,
    /// Release channel for this module (over the set's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(super::DNS_LABEL), length(max = 63))]
    pub channel: Option<String>,
    /// An exact version to run instead of the channel's: one the module's `Plugin` lists
    /// in `spec.versions`. It stays while the channel moves. Going below the installed
    /// version still needs the set's downgrade permission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub version: Option<String>,
    /// Module configuration, merged over the Plugin's `config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub config: Option<serde_json::Value>,
    /// `false`: stop managing the module and leave its objects as they are (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<bool>,
    /// Take over objects that already exist on the target but were not created by this
    /// module (e.g. installed by hand before). Never objects another module of Tessera
    /// manages. Default false: such an object is reported, not touched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<bool>,
    /// On removal: `CreateAndDelete` (default) deletes the module's own custom resources of
    /// its CRDs and then the CRDs, waiting while custom resources others created remain;
    /// `Ignore` keeps the CRDs and their custom resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "policy_schema")]
    pub custom_resource_policy: Option<CustomResourcePolicy>,
}

impl ModuleSpec {
    /// The module `name` with every setting left to its default.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_string(),
            channel: None,
            version: None,
            config: None,
            managed: None,
            adopt: None,
            custom_resource_policy: None,
        }
    }
}

/// What the host last saw and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Error > Warning > Processing > Ready; Deleting while the set is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "state_schema")]
    pub state: Option<State>,
    /// `3/4 Ready`, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<ModuleReport>,
    /// The mandatory modules the operator installs on this set's target (Plugins'
    /// `spec.mandatory`), apart from the set's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_modules: Vec<ModuleReport>,
    /// `Ready` (every module Ready) and `TargetReachable`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

/// Plain string enums: the derived schema of `Option<enum>` lists `null`, which
/// apiextensions v1 rejects.
fn policy_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "enum": ["CreateAndDelete", "Ignore"] })
}

fn state_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["Ready", "Processing", "Warning", "Error", "Deleting", "Unmanaged"]
    })
}

/// A module's (and the set's) state, as KLM reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum State {
    Ready,
    Processing,
    Warning,
    Error,
    Deleting,
    /// `managed: false`: left as installed, no longer reconciled (counts as Ready).
    Unmanaged,
}

impl State {
    /// The states of a set's `tessera_moduleset_state` (an unmanaged set reports none).
    pub const ALL: [State; 5] = [
        State::Ready,
        State::Processing,
        State::Warning,
        State::Error,
        State::Deleting,
    ];

    /// Ready, or Unmanaged (which blocks nothing: not the set's Ready, not a dependent).
    pub fn counts_as_ready(self) -> bool {
        matches!(self, State::Ready | State::Unmanaged)
    }

    /// How much a state counts when aggregating (the highest wins).
    pub(crate) fn weight(self) -> u8 {
        match self {
            State::Error => 4,
            State::Warning => 3,
            State::Deleting => 2,
            State::Processing => 1,
            State::Ready | State::Unmanaged => 0,
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// What happens to the custom resources of a module's CRDs when it is removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CustomResourcePolicy {
    /// Delete the module's own custom resources, then its CRDs; wait (and say so) while
    /// custom resources others created remain.
    #[default]
    CreateAndDelete,
    /// Leave the CRDs and their custom resources in place.
    Ignore,
}

/// One module in the set's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleReport {
    pub name: String,
    /// The channel the version came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The installed (or installing) version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The version is the one the set pins (`modules[].version`), not the channel's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// A mandatory module (the Plugin's `spec.mandatory`), not one the set lists.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mandatory: bool,
    /// An upgrade that waits for the target's maintenance window: the version and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_upgrade: Option<String>,
    /// What the channel offers now, when the module runs another version (pinned, or a
    /// downgrade refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_version: Option<String>,
    /// `sha256:` of the plugin component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many objects the module has applied.
    #[serde(default)]
    pub objects: u32,
    /// Custom resources others made that hold up the module's removal (the first few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<String>,
    /// The channel's shadow version, rendered next to this one and never applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ModuleShadow>,
}

/// How a shadow version's objects compare with the applied version's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleShadow {
    pub version: String,
    pub digest: String,
    pub result: super::ShadowOutcome,
    /// Changed fields, `<Kind namespace/name>.<path>`, at most 40; or the shadow's error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<String>,
}
