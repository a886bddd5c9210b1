//! Read access to Shoot JSON as Gardener's Go types see it: an absent field and `null`
//! are both Go's zero value / nil pointer.

use serde_json::Value;

/// The value at `path` (`Value::Null` when absent).
pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> &'a Value {
    let mut cur = v;
    for key in path {
        cur = match cur.get(key) {
            Some(next) => next,
            None => return &Value::Null,
        };
    }
    cur
}

/// The string at `path`, `""` when absent (Go's zero value).
pub(crate) fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    at(v, path).as_str().unwrap_or("")
}

/// The string at `path` if it is set (a Go `*string` that is not nil).
pub(crate) fn opt_str<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path).as_str()
}

/// The integer at `path`, 0 when absent.
pub(crate) fn int_at(v: &Value, path: &[&str]) -> i64 {
    at(v, path).as_i64().unwrap_or(0)
}

/// The array at `path`, empty when absent.
pub(crate) fn list<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path).as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// `metadata.name`.
pub(crate) fn name(shoot: &Value) -> &str {
    str_at(shoot, &["metadata", "name"])
}

/// An annotation of the object, if present.
pub(crate) fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    at(obj, &["metadata", "annotations", key]).as_str()
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn deleting(obj: &Value) -> bool {
    !at(obj, &["metadata", "deletionTimestamp"]).is_null()
}

/// `spec.kubernetes.version`.
pub(crate) fn k8s_version(shoot: &Value) -> &str {
    str_at(shoot, &["spec", "kubernetes", "version"])
}

/// `spec.provider.workers`.
pub(crate) fn workers(shoot: &Value) -> &[Value] {
    list(shoot, &["spec", "provider", "workers"])
}

/// The worker named `name` in `shoot` (Gardener `helper.FindWorkerByName`).
pub(crate) fn worker_named<'a>(shoot: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    let shoot = shoot?;
    workers(shoot).iter().find(|w| str_at(w, &["name"]) == name)
}

/// `metadata.finalizers`.
pub(crate) fn finalizers(obj: &Value) -> Vec<&str> {
    list(obj, &["metadata", "finalizers"])
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// A worker's `updateStrategy` after v1beta1 defaulting (`AutoRollingUpdate`).
pub(crate) fn update_strategy(worker: &Value) -> &str {
    opt_str(worker, &["updateStrategy"]).unwrap_or("AutoRollingUpdate")
}

/// Gardener `helper.IsUpdateStrategyInPlace`.
pub(crate) fn in_place(worker: &Value) -> bool {
    matches!(
        opt_str(worker, &["updateStrategy"]),
        Some("AutoInPlaceUpdate" | "ManualInPlaceUpdate")
    )
}

/// Set `metadata.annotations[key] = value`.
pub(crate) fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    let Some(meta) = ensure_object(obj, "metadata") else {
        return;
    };
    let entry = meta.entry("annotations").or_insert(Value::Null);
    if !entry.is_object() {
        *entry = Value::Object(Default::default());
    }
    if let Some(annotations) = entry.as_object_mut() {
        annotations.insert(key.into(), Value::String(value.into()));
    }
}

/// Remove `metadata.annotations[key]`.
pub(crate) fn remove_annotation(obj: &mut Value, key: &str) {
    if let Some(a) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        a.remove(key);
    }
}

/// The object member `key` of `v`, created (as `{}`) when absent or null.
pub(crate) fn ensure_object<'a>(
    v: &'a mut Value,
    key: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    let map = v.as_object_mut()?;
    let entry = map.entry(key).or_insert(Value::Null);
    if entry.is_null() {
        *entry = Value::Object(Default::default());
    }
    entry.as_object_mut()
}
