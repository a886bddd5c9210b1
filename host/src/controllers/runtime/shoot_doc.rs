//! Documents exchanged with plugins and Gardener: the Runtime as plugins see it, and the
//! rendered Shoot as Tessera applies it.

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::controllers::labels;
use crate::crd::Runtime;
use crate::gardener::{CONFIRM_DELETION, FORCE_DELETION, OPERATION_ANNOTATION};

/// Annotations Gardener or operators set for one-off operations: never re-applied from a
/// rendered Shoot, or Tessera would repeat a retry or a deletion confirmation forever.
const TRANSIENT_ANNOTATIONS: &[&str] = &[
    OPERATION_ANNOTATION,
    CONFIRM_DELETION,
    FORCE_DELETION,
    "gardener.cloud/timestamp",
    "gardener.cloud/created-by",
];

/// The Runtime as plugins receive it: what the user wrote, without server bookkeeping.
pub(crate) fn runtime_json(runtime: &Runtime) -> String {
    let meta = &runtime.metadata;
    json!({
        "apiVersion": "tessera.dev/v1alpha1",
        "kind": "Runtime",
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "generation": meta.generation,
            "labels": meta.labels.clone().unwrap_or_default(),
            "annotations": meta.annotations.clone().unwrap_or_default(),
            "deletionTimestamp": meta.deletion_timestamp.as_ref().map(|t| t.0.to_string()),
        },
        "spec": runtime.spec,
    })
    .to_string()
}

/// The current Shoot as plugins receive it on patch.
pub(crate) fn current_json(shoot: &DynamicObject) -> String {
    let mut value = serde_json::to_value(shoot).unwrap_or(Value::Null);
    if let Some(meta) = value["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    value.to_string()
}

/// The Shoot to apply: the chain's output with Tessera's ownership labels and the Runtime
/// generation, and only the metadata Tessera manages.
pub(crate) fn desired(rendered: &Value, runtime: &Runtime) -> Value {
    let mut shoot = rendered.clone();
    let meta = rendered["metadata"].clone();
    let mut annotations = meta["annotations"].as_object().cloned().unwrap_or_default();
    annotations.retain(|k, _| !TRANSIENT_ANNOTATIONS.contains(&k.as_str()));
    annotations.insert(
        labels::RUNTIME_GENERATION.into(),
        runtime.metadata.generation.unwrap_or(0).to_string().into(),
    );
    let mut shoot_labels = meta["labels"].as_object().cloned().unwrap_or_default();
    shoot_labels.insert(labels::RUNTIME.into(), runtime.name_any().into());
    shoot_labels.insert(
        labels::RUNTIME_NAMESPACE.into(),
        runtime.namespace().unwrap_or_default().into(),
    );
    shoot["apiVersion"] = "core.gardener.cloud/v1beta1".into();
    shoot["kind"] = "Shoot".into();
    shoot["metadata"] = json!({
        "name": meta["name"],
        "namespace": meta["namespace"],
        "labels": shoot_labels,
        "annotations": annotations,
    });
    if let Some(obj) = shoot.as_object_mut() {
        obj.remove("status");
    }
    shoot
}

/// `sha256:<hex>` of a document.
pub(crate) fn hash(value: &Value) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Whether the Shoot was made for this Runtime.
pub(crate) fn is_ours(shoot: &DynamicObject, runtime: &Runtime) -> bool {
    let l = shoot.labels();
    l.get(labels::RUNTIME) == Some(&runtime.name_any())
        && l.get(labels::RUNTIME_NAMESPACE) == runtime.namespace().as_ref()
}

/// The Runtime generation the Shoot was rendered from.
pub(crate) fn rendered_generation(shoot: &DynamicObject) -> Option<i64> {
    shoot
        .annotations()
        .get(labels::RUNTIME_GENERATION)?
        .parse()
        .ok()
}

/// Label selector for the Shoots of one Runtime.
pub(crate) fn selector(runtime: &Runtime) -> String {
    format!(
        "{}={},{}={}",
        labels::RUNTIME,
        runtime.name_any(),
        labels::RUNTIME_NAMESPACE,
        runtime.namespace().unwrap_or_default()
    )
}
