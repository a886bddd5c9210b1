//! The module-reconciler plugin kind: turns a module's configuration and what it observed
//! on the target cluster into desired objects, Crossplane-function style. The host does
//! every read and write; a plugin asks for objects through [`ModuleOutput::requirements`]
//! and is called again with them.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::PluginError;

/// What the host knows about the target cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterFacts {
    /// `major.minor.patch` without the `v`, e.g. `1.20.2`.
    pub kubernetes_version: Option<String>,
    pub provider: Option<String>,
    pub region: Option<String>,
}

impl ClusterFacts {
    /// `(major, minor)` of the Kubernetes version, when known.
    pub fn kubernetes_minor(&self) -> Option<(u32, u32)> {
        let version = self.kubernetes_version.as_deref()?;
        let mut parts = version.trim_start_matches('v').split('.');
        let major = parts.next()?.parse().ok()?;
        let minor: String = parts
            .next()?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Some((major, minor.parse().ok()?))
    }
}

/// A set of objects to observe: one by name, or all matching a label selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

impl Selector {
    /// Exactly one object (`namespace` `None` for cluster-scoped kinds).
    pub fn named(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            name: Some(name.into()),
            label_selector: None,
        }
    }

    /// Every object of a kind matching `labels` (`None`: all namespaces).
    pub fn labelled(api_version: &str, kind: &str, namespace: Option<&str>, labels: &str) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            name: None,
            label_selector: Some(labels.into()),
        }
    }
}

/// What the host found for one requirement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    pub selector: Selector,
    /// The objects found; empty when none exist.
    pub objects: Vec<Value>,
}

/// The state a module reports; the ModuleSet aggregates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModuleState {
    Ready,
    Processing,
    Warning,
    Error,
    Deleting,
}

/// What a module reconciler receives, typed.
#[derive(Debug, Clone)]
pub struct ModuleInput<C> {
    /// The module's name in the ModuleSet.
    pub module: String,
    /// The module version being reconciled.
    pub version: String,
    pub config: C,
    pub cluster: ClusterFacts,
    /// Objects observed for the requirements of earlier answers in this reconcile.
    pub observed: Vec<Observed>,
}

impl<C> ModuleInput<C> {
    /// The objects observed for `selector`, or `None` when it was not asked for yet.
    pub fn observed(&self, selector: &Selector) -> Option<&[Value]> {
        self.observed
            .iter()
            .find(|o| &o.selector == selector)
            .map(|o| o.objects.as_slice())
    }
}

/// The answer to a reconcile call.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleOutput {
    /// Desired objects, applied with server-side apply.
    pub desired: Vec<Value>,
    pub state: ModuleState,
    pub message: Option<String>,
    pub requeue_after_seconds: Option<u32>,
    /// More objects to observe: the host calls again with them and ignores `desired`.
    pub requirements: Vec<Selector>,
}

impl ModuleOutput {
    /// Apply `desired`; the module is Ready once the host's generic checks pass.
    pub fn ready(desired: Vec<Value>) -> Self {
        Self {
            desired,
            state: ModuleState::Ready,
            message: None,
            requeue_after_seconds: None,
            requirements: Vec::new(),
        }
    }

    /// Apply `desired` and report Processing, looking again after `seconds`.
    pub fn processing(desired: Vec<Value>, message: impl Into<String>, seconds: u32) -> Self {
        Self {
            desired,
            state: ModuleState::Processing,
            message: Some(message.into()),
            requeue_after_seconds: Some(seconds),
            requirements: Vec::new(),
        }
    }

    /// Ask to observe `selectors` first.
    pub fn require(selectors: Vec<Selector>) -> Self {
        Self {
            desired: Vec::new(),
            state: ModuleState::Processing,
            message: None,
            requeue_after_seconds: None,
            requirements: selectors,
        }
    }

    pub fn with_state(mut self, state: ModuleState, message: impl Into<String>) -> Self {
        self.state = state;
        self.message = Some(message.into());
        self
    }
}

/// The answer to a delete call.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteOutput {
    /// Objects to remove before the host prunes the module's inventory.
    pub remove: Vec<Selector>,
    /// `Deleting` while waiting for something, `Ready` when done.
    pub state: ModuleState,
    pub message: Option<String>,
    pub requirements: Vec<Selector>,
}

impl DeleteOutput {
    /// Nothing beyond the inventory: the host prunes what the module applied.
    pub fn done() -> Self {
        Self {
            remove: Vec::new(),
            state: ModuleState::Ready,
            message: None,
            requirements: Vec::new(),
        }
    }
}

/// A module reconciler: pure functions from (config, cluster facts, observed objects) to
/// desired objects and a state.
pub trait ModuleReconciler {
    /// Stable plugin name.
    const NAME: &'static str;
    /// One line for `tessera plugin inspect`.
    const DESCRIPTION: &'static str;
    /// The module's configuration; `{}` must deserialize.
    type Config: DeserializeOwned;

    /// Modules that must be Ready before this one is installed (and removed after it).
    fn dependencies(_config: &Self::Config) -> Vec<String> {
        Vec::new()
    }

    fn reconcile(input: ModuleInput<Self::Config>) -> Result<ModuleOutput, PluginError>;

    /// Called when the module is removed; the host prunes the module's objects afterwards.
    fn delete(_input: ModuleInput<Self::Config>) -> Result<DeleteOutput, PluginError> {
        Ok(DeleteOutput::done())
    }
}

/// The WIT `reconcile-input` with documents as JSON text (what crosses the boundary).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawModuleInput {
    pub module: String,
    pub version: String,
    pub config: String,
    pub cluster: ClusterFacts,
    pub observed: Vec<(Selector, Vec<String>)>,
}

/// Parse `config` (`{}` when empty), naming the field at fault.
pub fn parse_config<C: DeserializeOwned>(config: &str) -> Result<C, PluginError> {
    let json = match config.trim() {
        "" | "null" => "{}",
        text => text,
    };
    crate::glue::parse_document(json, "config")
}

/// Turn the raw input into the typed one.
pub fn typed_input<C: DeserializeOwned>(
    raw: RawModuleInput,
) -> Result<ModuleInput<C>, PluginError> {
    let config = parse_config(&raw.config)?;
    let mut observed = Vec::with_capacity(raw.observed.len());
    for (selector, objects) in raw.observed {
        let objects = objects
            .iter()
            .map(|o| crate::glue::parse_trusted(o, "observed"))
            .collect::<Result<Vec<Value>, _>>()?;
        observed.push(Observed { selector, objects });
    }
    Ok(ModuleInput {
        module: raw.module,
        version: raw.version,
        config,
        cluster: raw.cluster,
        observed,
    })
}

/// The WIT `reconcile-output`, with desired objects as JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawReconcileOutput {
    pub desired: Vec<String>,
    pub state: ModuleState,
    pub message: Option<String>,
    pub requeue_after_seconds: Option<u32>,
    pub requirements: Vec<Selector>,
}

/// The WIT `delete-output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawDeleteOutput {
    pub remove: Vec<Selector>,
    pub state: ModuleState,
    pub message: Option<String>,
    pub requirements: Vec<Selector>,
}

/// Run a module reconciler's `reconcile` on raw input: the Wasm export and the native test
/// runner both go through here, so a plugin sees the same input in `cargo test` as in the
/// host.
pub fn reconcile_json<P: ModuleReconciler>(
    raw: RawModuleInput,
) -> Result<RawReconcileOutput, PluginError> {
    let out = P::reconcile(typed_input(raw)?)?;
    Ok(RawReconcileOutput {
        desired: out.desired.iter().map(Value::to_string).collect(),
        state: out.state,
        message: out.message,
        requeue_after_seconds: out.requeue_after_seconds,
        requirements: out.requirements,
    })
}

/// Run a module reconciler's `delete` on raw input (see [`reconcile_json`]).
pub fn delete_json<P: ModuleReconciler>(
    raw: RawModuleInput,
) -> Result<RawDeleteOutput, PluginError> {
    let out = P::delete(typed_input(raw)?)?;
    Ok(RawDeleteOutput {
        remove: out.remove,
        state: out.state,
        message: out.message,
        requirements: out.requirements,
    })
}

/// How many times the host calls a module reconciler that keeps answering with
/// requirements before it gives up on the answer (the golden harness uses the same bound).
pub const MAX_REQUIREMENT_ROUNDS: usize = 5;

/// The module's dependencies from raw config; a config that does not parse has none (the
/// reconcile call reports the error with its field).
pub fn dependencies_json<P: ModuleReconciler>(config: &str) -> Vec<String> {
    parse_config::<P::Config>(config)
        .map(|c| P::dependencies(&c))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_minor() {
        let facts = |v: &str| ClusterFacts {
            kubernetes_version: Some(v.into()),
            ..Default::default()
        };
        assert_eq!(facts("1.20.2").kubernetes_minor(), Some((1, 20)));
        assert_eq!(facts("v1.31+k3s").kubernetes_minor(), Some((1, 31)));
        assert_eq!(facts("x").kubernetes_minor(), None);
        assert_eq!(ClusterFacts::default().kubernetes_minor(), None);
    }

    #[test]
    fn config_errors_name_the_field() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct C {
            #[serde(default)]
            replicas: u32,
        }
        let err = parse_config::<C>(r#"{"replicas": "x"}"#).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("config.replicas"));
        assert!(parse_config::<C>("").is_ok());
    }
}
