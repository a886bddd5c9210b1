//! Kubernetes objects for module reconcilers: build desired objects with typed metadata and
//! read observed ones (name, labels, conditions) without indexing JSON or formatting YAML
//! by hand.
//!
//! ```
//! use tessera_sdk::objects::{Object, config_file};
//! use serde_json::json;
//!
//! let map = Object::namespaced("v1", "ConfigMap", "kyma-system", "gateway")
//!     .label("app.kubernetes.io/name", "gateway")
//!     .with("data", json!({"gateway.yaml": config_file(&json!({"port": 4317}))}));
//! assert_eq!(map.name(), "gateway");
//!
//! let crd = Object::from_value(&json!({
//!     "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
//!     "metadata": {"name": "pipelines.example.dev"},
//!     "status": {"conditions": [{"type": "Established", "status": "True"}]},
//! })).unwrap();
//! assert!(crd.is_condition_true("Established"));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::PluginError;
use crate::models::ObjectMeta;

/// A Kubernetes object: typed identity and metadata, every other top-level field (`spec`,
/// `data`, `status`, …) as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Object {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

/// One entry of `status.conditions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

impl Condition {
    /// Whether the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

impl Object {
    /// A cluster-scoped object (Namespace, CRD, ClusterRole, PriorityClass …).
    pub fn cluster_scoped(api_version: &str, kind: &str, name: &str) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            fields: Map::new(),
        }
    }

    /// A namespaced object.
    pub fn namespaced(api_version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        let mut object = Self::cluster_scoped(api_version, kind, name);
        object.metadata.namespace = Some(namespace.into());
        object
    }

    /// Add a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.metadata.labels.insert(key.into(), value.into());
        self
    }

    /// Add an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.metadata.annotations.insert(key.into(), value.into());
        self
    }

    /// Set a top-level field such as `spec` or `data`.
    pub fn with(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(field.into(), value.into());
        self
    }

    /// A top-level field, when set.
    pub fn field(&self, field: &str) -> Option<&Value> {
        self.fields.get(field)
    }

    /// The object's name (empty when unset).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The object's namespace; `None` for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }

    /// Read an object the host observed (or any JSON object with `apiVersion` and `kind`).
    pub fn from_value(value: &Value) -> Result<Self, PluginError> {
        Self::deserialize(value).map_err(|err| {
            PluginError::invalid_input("observed", format!("not a Kubernetes object: {err}"))
        })
    }

    /// The entries of `status.conditions` that parse; none when there is no status.
    pub fn conditions(&self) -> Vec<Condition> {
        self.fields
            .get("status")
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .map(|c| {
                c.iter()
                    .filter_map(|c| Condition::deserialize(c).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The condition of `type_`, when reported.
    pub fn condition(&self, type_: &str) -> Option<Condition> {
        self.conditions().into_iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition `type_` is reported `True`.
    pub fn is_condition_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.is_true())
    }
}

impl From<Object> for Value {
    fn from(object: Object) -> Self {
        serde_json::to_value(object).unwrap_or(Value::Null)
    }
}

/// A Namespace.
pub fn namespace(name: &str) -> Object {
    Object::cluster_scoped("v1", "Namespace", name)
}

/// A ConfigMap with string data.
pub fn config_map<'a>(
    namespace: &str,
    name: &str,
    data: impl IntoIterator<Item = (&'a str, String)>,
) -> Object {
    let data: Map<String, Value> = data
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::String(v)))
        .collect();
    Object::namespaced("v1", "ConfigMap", namespace, name).with("data", data)
}

/// A configuration file's text, for a ConfigMap: JSON, which every YAML 1.2 reader also
/// reads, so values are quoted correctly and none can change the file's structure (a
/// `format!`-built YAML file breaks on the first value with a colon or a newline).
pub fn config_file(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builds_and_serializes_like_a_manifest() {
        let value: Value = Object::namespaced("apps/v1", "Deployment", "ns", "web")
            .label("app", "web")
            .with("spec", json!({"replicas": 2}))
            .into();
        assert_eq!(
            value,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
                   "spec": {"replicas": 2}})
        );
    }

    #[test]
    fn reads_conditions_and_refuses_what_is_not_an_object() {
        let crd = Object::from_value(&json!({
            "apiVersion": "v1", "kind": "X", "metadata": {"name": "a"},
            "status": {"conditions": [{"type": "Established", "status": "False", "reason": "Pending"}]},
        }))
        .unwrap();
        assert!(!crd.is_condition_true("Established"));
        assert_eq!(
            crd.condition("Established").unwrap().reason.as_deref(),
            Some("Pending")
        );
        assert_eq!(crd.condition("Ready"), None);
        assert!(Object::from_value(&json!({"kind": "X"})).is_err());
    }

    #[test]
    fn a_config_file_value_cannot_change_the_structure() {
        let text = config_file(&json!({"endpoint": "a: b\nservice: evil"}));
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["endpoint"], "a: b\nservice: evil");
        assert_eq!(back.as_object().unwrap().len(), 1);
    }
}
