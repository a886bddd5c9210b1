//! Runtime → Shoot: read and check a Runtime manifest, run the chain, produce the Shoot.

pub mod caches;
pub mod diff;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use tessera_sdk::models::{RUNTIME_API_VERSION, Runtime};

use crate::plugins::{ChainConfig, ChainOutput, ShootChain, ShootIdentity};
use crate::wasm::{CallError, WasmRuntime};

/// Why rendering failed; every variant says where.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// Not one readable YAML document (the message says why).
    #[error("{source_name}: {message}")]
    InvalidYaml {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: invalid Runtime at {field}: {message}")]
    InvalidRuntime {
        source_name: String,
        field: String,
        message: String,
    },
    #[error("{source_name}: invalid current Shoot: {message}")]
    InvalidShoot {
        source_name: String,
        message: String,
    },
    #[error(transparent)]
    Plugin(#[from] CallError),
}

/// A Runtime read from a manifest: the typed view and the JSON the plugins get.
#[derive(Debug, Clone)]
pub struct RuntimeDocument {
    pub runtime: Runtime,
    pub json: String,
}

fn yaml_to_json(text: &str, source_name: &str) -> Result<serde_json::Value, RenderError> {
    crate::input::yaml_value(text, source_name).map_err(|e| RenderError::InvalidYaml {
        source_name: source_name.to_string(),
        message: e.message,
    })
}

/// Parse and check a Runtime manifest (YAML or JSON).
pub fn parse_runtime(text: &str, source_name: &str) -> Result<RuntimeDocument, RenderError> {
    let value = yaml_to_json(text, source_name)?;
    let invalid = |field: &str, message: String| RenderError::InvalidRuntime {
        source_name: source_name.to_string(),
        field: field.to_string(),
        message,
    };
    if let Some((field, message)) = crate::input::kind_mismatch(&value, "Runtime") {
        return Err(invalid(field.unwrap_or("(document)"), message));
    }
    match value["apiVersion"].as_str() {
        Some(RUNTIME_API_VERSION) => {}
        Some(v) if v.starts_with("infrastructuremanager.kyma-project.io/") => {
            return Err(invalid(
                "apiVersion",
                format!(
                    "{v} is KIM's API; a KIM Runtime ports by setting apiVersion: {RUNTIME_API_VERSION}"
                ),
            ));
        }
        other => {
            return Err(invalid(
                "apiVersion",
                format!(
                    "expected {RUNTIME_API_VERSION}, found {}",
                    other.unwrap_or("none")
                ),
            ));
        }
    }
    // What the API server would prune without a word is refused here, with the field named.
    static SCHEMA: std::sync::OnceLock<JSONSchemaProps> = std::sync::OnceLock::new();
    let schema = SCHEMA.get_or_init(crate::input::crd_schema::<crate::crd::Runtime>);
    if let Some((field, message)) = crate::input::unknown_in_object(&value, schema) {
        return Err(invalid(&field, message));
    }
    let json = value.to_string();
    let runtime: Runtime = tessera_sdk::glue::parse_document(&json, "")
        .map_err(|e| invalid(e.field.as_deref().unwrap_or("(document)"), e.message))?;
    if runtime.id().is_empty() {
        return Err(invalid(
            "metadata.name",
            "the Runtime needs a name (its runtime id)".into(),
        ));
    }
    Ok(RuntimeDocument { runtime, json })
}

/// Parse the Shoot currently on the Gardener side (YAML or JSON) into JSON text.
pub fn parse_current_shoot(text: &str, source_name: &str) -> Result<String, RenderError> {
    let value = yaml_to_json(text, source_name)?;
    if let Some((_, message)) = crate::input::kind_mismatch(&value, "Shoot") {
        return Err(RenderError::InvalidShoot {
            source_name: source_name.to_string(),
            message,
        });
    }
    Ok(value.to_string())
}

/// Render a Runtime into a Shoot of the Gardener project `config` names with `chain`;
/// `current` (JSON) makes it a patch.
pub fn render(
    rt: &WasmRuntime,
    chain: &ShootChain,
    runtime: &RuntimeDocument,
    config: &ChainConfig,
    current: Option<&str>,
) -> Result<ChainOutput, RenderError> {
    let identity = ShootIdentity::of(&runtime.runtime.spec, config.project())
        .with_credentials_binding(config.enable_credential_binding);
    let (json, left_out) = resolve_caches(&runtime.json, current);
    let mut output = chain.run(rt, &json, &identity, runtime.runtime.id(), current)?;
    for upstream in left_out {
        output.warnings.push((
            "host".into(),
            format!("registry cache {upstream} left out: the running host copies its credentials into the project first"),
        ));
    }
    Ok(output)
}

/// The Runtime as the chain sees it offline: each cache with credentials names the copy
/// the current Shoot uses for its upstream, or is left out (its upstream returned).
fn resolve_caches(json: &str, current: Option<&str>) -> (String, Vec<String>) {
    let Ok(mut runtime) = serde_json::from_str::<serde_json::Value>(json) else {
        return (json.to_string(), Vec::new());
    };
    if runtime["spec"]["imageRegistryCache"].is_null() {
        return (json.to_string(), Vec::new());
    }
    let shoot = current
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or(serde_json::Value::Null);
    let names = caches::in_use(&runtime, &shoot);
    let left_out = caches::resolve(&mut runtime, &names);
    (runtime.to_string(), left_out)
}
