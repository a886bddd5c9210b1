use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Extra;
use crate::util::unknown_field_message;

/// Gardener's `Worker` fields (`core.gardener.cloud/v1beta1`): the model names the ones
/// plugins read; the others pass through `extra` to the Shoot untouched.
pub const WORKER_FIELDS: &[&str] = &[
    "annotations",
    "caBundle",
    "cri",
    "kubernetes",
    "labels",
    "name",
    "machine",
    "maximum",
    "minimum",
    "maxSurge",
    "maxUnavailable",
    "providerConfig",
    "taints",
    "volume",
    "dataVolumes",
    "kubeletDataVolumeName",
    "zones",
    "systemComponents",
    "machineControllerManager",
    "sysctls",
    "clusterAutoscaler",
    "priority",
    "updateStrategy",
    "controlPlane",
];
/// Gardener's `Machine` fields.
pub const MACHINE_FIELDS: &[&str] = &["type", "image", "architecture"];
/// Gardener's `ShootMachineImage` fields.
pub const MACHINE_IMAGE_FIELDS: &[&str] = &["name", "version", "providerConfig"];
/// Gardener's `Volume` fields.
pub const VOLUME_FIELDS: &[&str] = &["name", "type", "size", "encrypted"];

/// The first key of `extra` that is not one of `known`, as (path, message).
fn unknown_in(extra: &Extra, prefix: &str, known: &[&str]) -> Option<(String, String)> {
    extra
        .keys()
        .find(|k| !known.contains(&k.as_str()))
        .map(|k| {
            (
                format!("{prefix}{k}"),
                unknown_field_message(k, known.iter().copied()),
            )
        })
}

/// A Gardener worker pool (`core.gardener.cloud/v1beta1` `Worker`), used verbatim in the
/// Runtime spec as KIM does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-preserve-unknown-fields" = true))
)]
pub struct Worker {
    pub name: String,
    pub machine: Machine,
    #[serde(default)]
    pub minimum: i32,
    #[serde(default)]
    pub maximum: i32,
    /// int-or-string, e.g. `1` or `"10%"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::schema::int_or_string")
    )]
    pub max_surge: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::schema::int_or_string")
    )]
    pub max_unavailable: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<Volume>,
    #[serde(default)]
    pub zones: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<Taint>>,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: Extra,
}

impl Worker {
    /// The first field of this pool (or of its machine, image or volume) that Gardener does
    /// not define, as the path under the pool and a message (with a "did you mean").
    /// `extra` keeps Gardener's fields the model does not name, so a typo such as
    /// `maxumum` would otherwise travel into the Shoot unnoticed.
    pub fn unknown_field(&self) -> Option<(String, String)> {
        let image = self.machine.image.as_ref();
        unknown_in(&self.extra, "", WORKER_FIELDS)
            .or_else(|| unknown_in(&self.machine.extra, "machine.", MACHINE_FIELDS))
            .or_else(|| {
                image.and_then(|i| unknown_in(&i.extra, "machine.image.", MACHINE_IMAGE_FIELDS))
            })
            .or_else(|| {
                let volume = self.volume.as_ref()?;
                unknown_in(&volume.extra, "volume.", VOLUME_FIELDS)
            })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-preserve-unknown-fields" = true))
)]
pub struct Machine {
    #[serde(rename = "type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<MachineImage>,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-preserve-unknown-fields" = true))
)]
pub struct MachineImage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-preserve-unknown-fields" = true))
)]
pub struct Volume {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub size: String,
    #[serde(flatten)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(json: serde_json::Value) -> Worker {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn gardener_fields_pass_and_typos_are_named() {
        let ok = worker(serde_json::json!({
            "name": "cpu", "machine": {"type": "m5.large", "architecture": "amd64",
                "image": {"name": "gardenlinux", "providerConfig": {}}},
            "maximum": 3, "updateStrategy": "AutoRollingUpdate", "providerConfig": {},
            "volume": {"size": "50Gi", "encrypted": true}
        }));
        assert_eq!(ok.unknown_field(), None);
        let typo = worker(
            serde_json::json!({"name": "cpu", "machine": {"type": "m5.large"}, "maxumum": 3}),
        );
        assert_eq!(
            typo.unknown_field(),
            Some((
                "maxumum".into(),
                "unknown field; did you mean maximum?".into()
            ))
        );
        let deep = worker(serde_json::json!({"name": "cpu",
            "machine": {"type": "m5.large", "image": {"verison": "1.0"}}}));
        assert_eq!(
            deep.unknown_field(),
            Some((
                "machine.image.verison".into(),
                "unknown field; did you mean version?".into()
            ))
        );
    }
}
