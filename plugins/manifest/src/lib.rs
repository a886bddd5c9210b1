//! `manifest`: the generic module. Its configuration carries YAML documents and values.
//! The documents are parsed first; then `${name}` in any string (keys included) is
//! replaced by the value `name` (or the built-ins `module`, `version`,
//! `kubernetesVersion`), and `$${` stands for a literal `${`. Values are data: a string
//! that is exactly `${name}` becomes the value with its type, anywhere else the value's
//! text — never YAML that is parsed again, so no value can add a document or change one's
//! structure. The bundle is set once in the `Plugin`'s `config` and locked there (see
//! `requests.yaml`); each ModuleSet only sets `values`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use tessera_sdk::{ModuleInput, ModuleOutput, ModuleReconciler, PluginError};

/// The module's configuration.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// YAML documents, separated by `---`.
    pub manifest: String,
    /// Values for `${name}` placeholders.
    pub values: BTreeMap<String, Value>,
    /// Modules that must be Ready first.
    pub requires: Vec<String>,
}

pub struct Manifest;

impl ModuleReconciler for Manifest {
    const NAME: &'static str = "manifest";
    const DESCRIPTION: &'static str =
        "Applies a bundle of YAML documents with ${value} substitution";
    type Config = Config;

    fn dependencies(config: &Config) -> Vec<String> {
        config.requires.clone()
    }

    fn reconcile(input: ModuleInput<Config>) -> Result<ModuleOutput, PluginError> {
        if input.config.manifest.trim().is_empty() {
            return Err(PluginError::invalid_input(
                "config.manifest",
                "no documents: set config.manifest on the Plugin or the module",
            ));
        }
        let mut values = input.config.values.clone();
        values.insert("module".into(), Value::String(input.module.clone()));
        values.insert("version".into(), Value::String(input.version.clone()));
        if let Some(v) = &input.cluster.kubernetes_version {
            values.insert("kubernetesVersion".into(), Value::String(v.clone()));
        }
        let documents = parse_documents(&input.config.manifest)?
            .into_iter()
            .map(|doc| substitute_value(doc, &values))
            .collect::<Result<Vec<_>, _>>()?;
        check_documents(&documents)?;
        Ok(ModuleOutput::ready(documents))
    }
}

/// Substitute placeholders in every string of `value`, keys included: a string that is
/// exactly one `${name}` becomes that value (keeping its type), any other string gets the
/// values' text spliced in.
pub fn substitute_value(
    value: Value,
    values: &BTreeMap<String, Value>,
) -> Result<Value, PluginError> {
    Ok(match value {
        Value::String(text) => match exact_placeholder(&text) {
            Some(name) => lookup(values, name)?.clone(),
            None => Value::String(substitute(&text, values)?),
        },
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| substitute_value(v, values))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = serde_json::Map::with_capacity(map.len());
            for (key, v) in map {
                out.insert(substitute(&key, values)?, substitute_value(v, values)?);
            }
            Value::Object(out)
        }
        other => other,
    })
}

/// `name` when `text` is exactly `${name}`.
fn exact_placeholder(text: &str) -> Option<&str> {
    let name = text.strip_prefix("${")?.strip_suffix('}')?;
    (!name.contains(['$', '{', '}'])).then(|| name.trim())
}

fn lookup<'v>(values: &'v BTreeMap<String, Value>, name: &str) -> Result<&'v Value, PluginError> {
    values.get(name).ok_or_else(|| {
        PluginError::invalid_input(
            format!("config.values.{name}"),
            format!("the manifest uses ${{{name}}} but no value {name} is set"),
        )
    })
}

/// Replace `${name}` by the text of `values[name]`; an unknown name is an error naming it.
pub fn substitute(text: &str, values: &BTreeMap<String, Value>) -> Result<String, PluginError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let end = after.find('}').ok_or_else(|| {
                PluginError::invalid_input("config.manifest", "unterminated ${ placeholder")
            })?;
            let name = after[..end].trim();
            match lookup(values, name)? {
                Value::String(s) => out.push_str(s),
                other => out.push_str(&other.to_string()),
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Every non-empty YAML document as JSON.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, PluginError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| {
        PluginError::invalid_input("config.manifest", format!("not valid YAML: {e}"))
    })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Each document must have apiVersion, kind and a name.
pub fn check_documents(docs: &[Value]) -> Result<(), PluginError> {
    for (i, doc) in docs.iter().enumerate() {
        for field in ["apiVersion", "kind"] {
            if !doc[field].is_string() {
                return Err(PluginError::invalid_input(
                    format!("config.manifest[{i}].{field}"),
                    format!("document {i} has no {field}"),
                ));
            }
        }
        if !doc["metadata"]["name"].is_string() {
            return Err(PluginError::invalid_input(
                format!("config.manifest[{i}].metadata.name"),
                format!("document {i} has no metadata.name"),
            ));
        }
    }
    Ok(())
}

tessera_sdk::export_module_reconciler!(Manifest);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::module_golden_tests!(Manifest);
tessera_sdk::declare_requests!("requests.yaml");

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_sdk::{ClusterFacts, ModuleState};

    fn input(config: serde_json::Value) -> ModuleInput<Config> {
        ModuleInput {
            module: "crds".into(),
            version: "1.0.0".into(),
            config: serde_json::from_value(config).unwrap(),
            cluster: ClusterFacts {
                kubernetes_version: Some("1.20.2".into()),
                ..Default::default()
            },
            observed: vec![],
        }
    }

    #[test]
    fn substitutes_values_and_builtins() {
        let out = Manifest::reconcile(input(serde_json::json!({
            "manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${module}\n  namespace: ${ns}\ndata:\n  k8s: \"${kubernetesVersion}\"\n  literal: \"$${x}\"\n---\n",
            "values": {"ns": "kyma-system"}
        })))
        .unwrap();
        assert_eq!(out.state, ModuleState::Ready);
        assert_eq!(out.desired.len(), 1);
        assert_eq!(out.desired[0]["metadata"]["name"], "crds");
        assert_eq!(out.desired[0]["metadata"]["namespace"], "kyma-system");
        assert_eq!(out.desired[0]["data"]["k8s"], "1.20.2");
        assert_eq!(out.desired[0]["data"]["literal"], "${x}");
    }

    #[test]
    fn unknown_value_names_the_field() {
        let err = Manifest::reconcile(input(serde_json::json!({
            "manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${missing}\n"
        })))
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("config.values.missing"));
    }

    #[test]
    fn values_are_data_not_yaml() {
        // A value that would add a document and a field if pasted into the YAML text.
        let injected = "x\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: pwned}";
        let out = Manifest::reconcile(input(serde_json::json!({
            "manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: n}\ndata:\n  title: '${title}'\n  line: 'title is ${title}'\n  replicas: '${replicas}'\n",
            "values": {"title": injected, "replicas": 3}
        })))
        .unwrap();
        assert_eq!(out.desired.len(), 1);
        assert_eq!(out.desired[0]["data"]["title"], injected);
        assert_eq!(
            out.desired[0]["data"]["line"],
            format!("title is {injected}")
        );
        assert_eq!(out.desired[0]["data"]["replicas"], 3);
    }

    #[test]
    fn documents_need_a_kind_and_name() {
        let err = Manifest::reconcile(input(serde_json::json!({
            "manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n"
        })))
        .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("config.manifest[1].kind"));
        let err = Manifest::reconcile(input(serde_json::json!({}))).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("config.manifest"));
    }
}
