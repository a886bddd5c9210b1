//! Kubernetes objects for module reconcilers: build desired objects with typed metadata and
//! read observed ones (name, labels, conditions) without indexing JSON or formatting YAML
//! by hand.
//!
//! A module with a workload, its Service, a CRD and a custom resource of it. The custom
//! resource can only be applied once the API server serves its kind, so the plugin asks
//! for the CRD (a requirement) and renders the resource when the CRD is established:
//!
//! ```
//! use serde_json::json;
//! use tessera_sdk::objects::{Object, custom_resource_definition, deployment, namespace, service};
//! use tessera_sdk::{ModuleInput, ModuleOutput, PluginError, Selector};
//!
//! fn render(input: &ModuleInput<serde_json::Value>) -> Result<ModuleOutput, PluginError> {
//!     let crd = custom_resource_definition("example.dev", "Greeting", "greetings", "v1alpha1");
//!     let mut desired = vec![
//!         namespace("greeter").into(),
//!         deployment("greeter", "web", "registry.example/web:1.2.0", 2)
//!             .label("app.kubernetes.io/part-of", "greeter")
//!             .into(),
//!         service("greeter", "web", 8080).into(),
//!         crd.clone().into(),
//!     ];
//!     let wanted = Selector::named(
//!         "apiextensions.k8s.io/v1", "CustomResourceDefinition", None, crd.name(),
//!     );
//!     let Some(found) = input.observed(&wanted) else {
//!         return Ok(ModuleOutput::require(vec![wanted]));
//!     };
//!     let established = found
//!         .iter()
//!         .filter_map(|o| Object::from_value(o).ok())
//!         .any(|o| o.is_condition_true("Established"));
//!     if !established {
//!         return Ok(ModuleOutput::processing(desired, "waiting for the Greeting CRD", 2));
//!     }
//!     desired.push(
//!         Object::namespaced("example.dev/v1alpha1", "Greeting", "greeter", "hello")
//!             .with("spec", json!({"text": "hello"}))
//!             .into(),
//!     );
//!     Ok(ModuleOutput::ready(desired))
//! }
//! # let input = ModuleInput {
//! #     module: "greeter".into(), version: "1.0.0".into(), config: json!({}),
//! #     cluster: Default::default(), observed: vec![],
//! # };
//! # assert!(render(&input).unwrap().requirements.len() == 1);
//! ```
//!
//! What "Ready" means for each (the host checks the applied objects after every pass; a
//! module is Ready only when its plugin says so **and** every object passes):
//!
//! - Deployment, StatefulSet: the controller saw the latest generation and all
//!   `spec.replicas` are updated and available (ready). Needs a node that runs Pods
//!   (`tessera dev up --node`); without one the module stays Processing with
//!   "Deployment web: 0/2 replicas ready".
//! - DaemonSet: every scheduled Pod ready.
//! - CustomResourceDefinition: condition `Established` true.
//! - Service, ConfigMap, Namespace, RBAC and custom resources: ready once applied; a plugin
//!   that needs more (a custom resource's own `status`) asks for the object and judges it
//!   with [`Object::conditions`].
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

/// The label [`deployment`] puts on its Pods and [`service`] selects.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";

/// A Deployment of `replicas` Pods of one container `name` running `image`, its Pods
/// labelled `app.kubernetes.io/name: <name>`. Change the rest with [`Object::with`] (the
/// whole `spec`) after reading [`Object::field`].
pub fn deployment(namespace: &str, name: &str, image: &str, replicas: u32) -> Object {
    let labels = serde_json::json!({ NAME_LABEL: name });
    Object::namespaced("apps/v1", "Deployment", namespace, name)
        .label(NAME_LABEL, name)
        .with(
            "spec",
            serde_json::json!({
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": name, "image": image}]},
                },
            }),
        )
}

/// A Service for the Pods of [`deployment`] `name`: one TCP port, the same on the Pods.
pub fn service(namespace: &str, name: &str, port: u16) -> Object {
    Object::namespaced("v1", "Service", namespace, name)
        .label(NAME_LABEL, name)
        .with(
            "spec",
            serde_json::json!({
                "selector": { NAME_LABEL: name },
                "ports": [{"name": "tcp", "port": port, "targetPort": port, "protocol": "TCP"}],
            }),
        )
}

/// A namespaced CustomResourceDefinition `<plural>.<group>` serving `kind` at one version,
/// whose objects may hold any fields (`x-kubernetes-preserve-unknown-fields`); give it a
/// real schema with [`Object::with`] on `spec`.
pub fn custom_resource_definition(group: &str, kind: &str, plural: &str, version: &str) -> Object {
    let open = serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    Object::cluster_scoped(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        &format!("{plural}.{group}"),
    )
    .with(
        "spec",
        serde_json::json!({
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.to_lowercase(),
                "listKind": format!("{kind}List"),
            },
            "versions": [{"name": version, "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": open}}],
        }),
    )
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
    fn the_service_selects_the_deployments_pods() {
        let d: Value = deployment("ns", "web", "img:1", 2).into();
        let s: Value = service("ns", "web", 8080).into();
        assert_eq!(
            d["spec"]["template"]["metadata"]["labels"],
            s["spec"]["selector"]
        );
        assert_eq!(d["spec"]["selector"]["matchLabels"], s["spec"]["selector"]);
        assert_eq!(d["spec"]["replicas"], 2);
        let crd: Value =
            custom_resource_definition("example.dev", "Greeting", "greetings", "v1").into();
        assert_eq!(crd["metadata"]["name"], "greetings.example.dev");
        assert_eq!(crd["spec"]["names"]["listKind"], "GreetingList");
    }

    #[test]
    fn a_config_file_value_cannot_change_the_structure() {
        let text = config_file(&json!({"endpoint": "a: b\nservice: evil"}));
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["endpoint"], "a: b\nservice: evil");
        assert_eq!(back.as_object().unwrap().len(), 1);
    }
}
