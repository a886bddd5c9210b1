//! Reading what people write: YAML files (`--set`, `--config`, `--runtime`, `--current-shoot`)
//! and objects of our own kinds. One document per file, the kind the command expects, no
//! field the schema does not have (named, with a "did you mean"), and every error in words:
//! never serde's API hints or a Rust debug dump.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_saphyr::budget::BudgetBreach;
use tessera_sdk::util::{reword_unknown_field, unknown_field_message};

/// A file or object that cannot be used as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {}{message}", field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct InputError {
    /// The file (or object) read.
    pub source_name: String,
    /// The field at fault, as a path (`spec.modules[0].confg`); `None` for the whole file.
    pub field: Option<String>,
    pub message: String,
}

impl InputError {
    fn new(source_name: &str, field: Option<String>, message: impl Into<String>) -> Self {
        Self {
            source_name: source_name.to_string(),
            field,
            message: message.into(),
        }
    }
}

/// The top-level fields of every Kubernetes object.
const OBJECT_FIELDS: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];

/// Parse one YAML (or JSON) document into a JSON value.
pub fn yaml_value(text: &str, source_name: &str) -> Result<Value, InputError> {
    serde_saphyr::from_str(text).map_err(|e| InputError::new(source_name, None, yaml_words(&e)))
}

/// Parse one YAML document as `T`, naming the field at fault.
pub fn from_yaml<T: DeserializeOwned>(text: &str, source_name: &str) -> Result<T, InputError> {
    from_value(yaml_value(text, source_name)?, source_name)
}

/// Deserialize `value` as `T`; an error names the field by its path and rewords serde's
/// "unknown field ..., expected one of ..." into a "did you mean".
pub fn from_value<T: DeserializeOwned>(value: Value, source_name: &str) -> Result<T, InputError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let path = (path != "." && !path.is_empty()).then_some(path);
        let message = err.into_inner().to_string();
        match reword_unknown_field(&message) {
            Some((field, words)) => {
                // The path may or may not end at the unknown key already.
                let full = match path {
                    Some(p) if p == field || p.ends_with(&format!(".{field}")) => p,
                    Some(p) => format!("{p}.{field}"),
                    None => field,
                };
                InputError::new(source_name, Some(full), words)
            }
            None => InputError::new(source_name, path, message),
        }
    })
}

/// Why `value` is not a `kind` object, if it is not: the field at fault (`None`: the whole
/// document) and the words, naming what was expected and what was found.
pub fn kind_mismatch(value: &Value, kind: &str) -> Option<(Option<&'static str>, String)> {
    let Some(object) = value.as_object() else {
        return Some((
            None,
            format!("expected a {kind} object, found {}", describe(value)),
        ));
    };
    let found = object.get("kind").and_then(Value::as_str);
    (found != Some(kind)).then(|| {
        let found = found.map_or("no kind".to_string(), |k| format!("a {k}"));
        (Some("kind"), format!("expected a {kind}, found {found}"))
    })
}

/// Refuse a document that is not a `kind` of `api_version`, naming both.
pub fn expect_kind(
    value: &Value,
    source_name: &str,
    api_version: &str,
    kind: &str,
) -> Result<(), InputError> {
    if let Some((field, message)) = kind_mismatch(value, kind) {
        return Err(InputError::new(source_name, field.map(Into::into), message));
    }
    let found = value.get("apiVersion").and_then(Value::as_str);
    if found != Some(api_version) {
        return Err(InputError::new(
            source_name,
            Some("apiVersion".into()),
            format!("expected {api_version}, found {}", found.unwrap_or("none")),
        ));
    }
    Ok(())
}

/// Refuse top-level fields a Kubernetes object does not have (`spc:`).
pub fn known_object_fields(value: &Value, source_name: &str) -> Result<(), InputError> {
    let unknown = value
        .as_object()
        .and_then(|o| o.keys().find(|k| !OBJECT_FIELDS.contains(&k.as_str())));
    match unknown {
        Some(key) => Err(InputError::new(
            source_name,
            Some(key.clone()),
            unknown_field_message(key, OBJECT_FIELDS.iter().copied()),
        )),
        None => Ok(()),
    }
}

/// Read an object of one of our kinds from a file's text: one document, of `K`'s kind and
/// API version, without unknown fields in the parts we define.
pub fn object<K>(text: &str, source_name: &str) -> Result<K, InputError>
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned,
{
    let value = yaml_value(text, source_name)?;
    expect_kind(&value, source_name, &K::api_version(&()), &K::kind(&()))?;
    known_object_fields(&value, source_name)?;
    from_value(value, source_name)
}

/// The first field of `value` that `schema` (a CRD's OpenAPI schema) does not define, as
/// (path, message): what the API server would silently prune. Parts marked
/// `x-kubernetes-preserve-unknown-fields` (foreign fields kept on purpose, such as
/// Gardener's worker fields) and objects without declared properties (`metadata`) are not
/// judged here.
pub fn unknown_in_schema(
    value: &Value,
    schema: &JSONSchemaProps,
    path: &str,
) -> Option<(String, String)> {
    let at = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::Object(map) => {
            let preserve = schema.x_kubernetes_preserve_unknown_fields == Some(true);
            if let Some(properties) = &schema.properties {
                for (key, item) in map {
                    match properties.get(key) {
                        Some(inner) => {
                            if let Some(found) = unknown_in_schema(item, inner, &at(key)) {
                                return Some(found);
                            }
                        }
                        None if !preserve => {
                            let known = properties.keys().map(String::as_str);
                            return Some((at(key), unknown_field_message(key, known)));
                        }
                        None => {}
                    }
                }
                return None;
            }
            let Some(JSONSchemaPropsOrBool::Schema(inner)) = &schema.additional_properties else {
                return None;
            };
            map.iter()
                .find_map(|(key, item)| unknown_in_schema(item, inner, &at(key)))
        }
        Value::Array(items) => {
            let Some(JSONSchemaPropsOrArray::Schema(inner)) = &schema.items else {
                return None;
            };
            items
                .iter()
                .enumerate()
                .find_map(|(i, item)| unknown_in_schema(item, inner, &format!("{path}[{i}]")))
        }
        _ => None,
    }
}

/// [`unknown_in_schema`] for a whole object: the fields every object has, then what its
/// kind's schema defines below them (`spec`, `status`).
pub fn unknown_in_object(value: &Value, schema: &JSONSchemaProps) -> Option<(String, String)> {
    let map = value.as_object()?;
    let properties = schema.properties.as_ref();
    map.iter().find_map(|(key, item)| {
        if !OBJECT_FIELDS.contains(&key.as_str()) {
            let message = unknown_field_message(key, OBJECT_FIELDS.iter().copied());
            return Some((key.clone(), message));
        }
        let inner = properties.and_then(|p| p.get(key))?;
        unknown_in_schema(item, inner, key)
    })
}

/// The OpenAPI schema the API server checks objects of kind `K` against.
pub fn crd_schema<K: kube::CustomResourceExt>() -> JSONSchemaProps {
    K::crd()
        .spec
        .versions
        .into_iter()
        .next()
        .and_then(|v| v.schema)
        .and_then(|s| s.open_api_v3_schema)
        .unwrap_or_default()
}

/// What a document is, for "expected X, found Y".
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "an empty document",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The YAML reader's error in words: its API hints and budget dumps mean nothing to the
/// person who wrote the file.
fn yaml_words(err: &serde_saphyr::Error) -> String {
    match err.without_snippet() {
        serde_saphyr::Error::MultipleDocuments { .. } => {
            "more than one YAML document (separated by ---); give one per file".into()
        }
        serde_saphyr::Error::Budget { breach, .. } => format!(
            "too large to read safely: {} (a limit against YAML bombs)",
            budget_words(breach)
        ),
        _ => format!("not valid YAML: {err}"),
    }
}

fn budget_words(breach: &BudgetBreach) -> String {
    match breach {
        BudgetBreach::Depth { depth } => format!("nested {depth} levels deep"),
        BudgetBreach::Aliases { aliases } => format!("{aliases} aliases"),
        BudgetBreach::Anchors { anchors } => format!("{anchors} anchors"),
        BudgetBreach::Nodes { nodes } => format!("{nodes} values"),
        BudgetBreach::Events { events } => format!("{events} parser events"),
        BudgetBreach::Documents { documents } => format!("{documents} documents"),
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => {
            format!("{aliases} aliases of {anchors} anchors")
        }
        BudgetBreach::ScalarBytes { total_scalar_bytes } => {
            format!("{total_scalar_bytes} bytes of text")
        }
        BudgetBreach::MergeKeys { merge_keys } => format!("{merge_keys} merge keys"),
        _ => "too many elements".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ModuleSet;

    const SET: &str = "apiVersion: tessera.dev/v1alpha1\nkind: ModuleSet\nmetadata: {name: s}\n";

    #[test]
    fn a_misspelt_module_field_is_named_with_a_suggestion() {
        let text = format!("{SET}spec:\n  modules:\n    - name: manifest\n      confg: {{}}\n");
        let err = object::<ModuleSet>(&text, "set.yaml").unwrap_err();
        assert_eq!(err.field.as_deref(), Some("spec.modules[0].confg"));
        assert_eq!(err.message, "unknown field; did you mean config?");
        assert_eq!(
            err.to_string(),
            "set.yaml: spec.modules[0].confg: unknown field; did you mean config?"
        );
    }

    #[test]
    fn misspelt_fields_of_the_object_and_its_spec_are_named() {
        let err = object::<ModuleSet>(&format!("{SET}spc: {{}}\n"), "s").unwrap_err();
        assert_eq!(err.to_string(), "s: spc: unknown field; did you mean spec?");
        let err = object::<ModuleSet>(&format!("{SET}spec: {{chanel: fast}}\n"), "s").unwrap_err();
        assert_eq!(
            err.to_string(),
            "s: spec.chanel: unknown field; did you mean channel?"
        );
        let text = format!("{SET}spec: {{target: {{secretName: k, region: x, zone: y}}}}\n");
        let err = object::<ModuleSet>(&text, "s").unwrap_err();
        assert_eq!(err.to_string(), "s: spec.target.zone: unknown field");
    }

    #[test]
    fn a_file_of_another_kind_is_refused_naming_both() {
        let runtime = include_str!("../../examples/runtime-aws.yaml");
        let err = object::<ModuleSet>(runtime, "rt.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "rt.yaml: kind: expected a ModuleSet, found a Runtime"
        );
        let err = object::<ModuleSet>("kind: ModuleSet\n", "s").unwrap_err();
        assert_eq!(
            err.to_string(),
            "s: apiVersion: expected tessera.dev/v1alpha1, found none"
        );
        let err = object::<ModuleSet>("[1]", "s").unwrap_err();
        assert_eq!(
            err.to_string(),
            "s: expected a ModuleSet object, found a list"
        );
    }

    #[test]
    fn the_schema_names_fields_it_would_prune_and_passes_preserved_ones() {
        let schema = crd_schema::<crate::crd::Runtime>();
        let example = yaml_value(include_str!("../../examples/runtime-aws.yaml"), "rt").unwrap();
        assert_eq!(unknown_in_object(&example, &schema), None);
        let with = |path: &[&str], key: &str| {
            let mut doc = example.clone();
            let mut at = &mut doc;
            for p in path {
                at = match p.parse::<usize>() {
                    Ok(i) => &mut at[i],
                    Err(_) => &mut at[*p],
                };
            }
            at[key] = serde_json::json!(1);
            unknown_in_object(&doc, &schema)
        };
        assert_eq!(
            with(&["spec", "shoot"], "regoin"),
            Some((
                "spec.shoot.regoin".into(),
                "unknown field; did you mean region?".into()
            ))
        );
        assert_eq!(
            with(&["spec", "shoot", "networking"], "service"),
            Some((
                "spec.shoot.networking.service".into(),
                "unknown field; did you mean services?".into()
            ))
        );
        // Gardener's worker fields pass through (the provider plugin judges them).
        assert_eq!(
            with(&["spec", "shoot", "provider", "workers", "0"], "sysctls"),
            None
        );
        assert_eq!(with(&["metadata"], "labelz"), None);
        assert_eq!(
            with(&[], "sepc"),
            Some(("sepc".into(), "unknown field; did you mean spec?".into()))
        );
    }

    #[test]
    fn yaml_errors_are_in_words() {
        let err = yaml_value("a: 1\n---\nb: 2\n", "two.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "two.yaml: more than one YAML document (separated by ---); give one per file"
        );
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let err = yaml_value(&deep, "deep.yaml").unwrap_err().to_string();
        assert!(
            err.starts_with("deep.yaml: too large to read safely: nested"),
            "{err}"
        );
        assert!(!err.contains('{') && !err.contains("from_str"), "{err}");
        let err = yaml_value("a: [", "bad.yaml").unwrap_err().to_string();
        assert!(err.starts_with("bad.yaml: not valid YAML"), "{err}");
    }
}
