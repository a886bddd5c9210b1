//! The JSON boundary shared by the Wasm export and the native test runner, so that a
//! plugin sees exactly the same inputs in `cargo test` as in the host.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::PluginError;
use crate::shoot_extension::{ExtendInput, Operation, ShootExtension};

/// The WIT `extend-input`, with documents as JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawExtendInput {
    pub runtime: String,
    pub draft: String,
    pub operation: Operation,
    #[serde(default)]
    pub current_shoot: Option<String>,
    pub config: String,
}

/// The WIT `extend-output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawExtendOutput {
    pub shoot: String,
    pub warnings: Vec<String>,
}

/// Parse `json` as `T`, naming the field at fault under `root` on error.
pub fn parse_document<T: DeserializeOwned>(json: &str, root: &str) -> Result<T, PluginError> {
    // Path tracking is slow; only pay for it to explain a failure.
    if let Ok(value) = serde_json::from_str(json) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let field = if path == "." || path.is_empty() {
            root.to_string()
        } else if root.is_empty() {
            path
        } else {
            format!("{root}.{path}")
        };
        // serde_json positions refer to the JSON text the host made, not to the user's file.
        let mut message = err.into_inner().to_string();
        if let Some(at) = message.rfind(" at line ") {
            message.truncate(at);
        }
        PluginError::invalid_input(field, message)
    })
}

/// Parse a document the host produced (Runtime, draft, current Shoot) without path
/// tracking: the host validates the Runtime with full field paths before any plugin runs,
/// and a second, path-tracking copy of these large deserializers would add ~30% to every
/// plugin's size.
pub fn parse_trusted<T: DeserializeOwned>(json: &str, what: &str) -> Result<T, PluginError> {
    serde_json::from_str(json).map_err(|err| {
        let mut message = err.to_string();
        if let Some(at) = message.rfind(" at line ") {
            message.truncate(at);
        }
        PluginError::invalid_input(what, format!("{what}: {message}"))
    })
}

/// Run a shoot extension on raw JSON input.
pub fn extend_json<P: ShootExtension>(
    input: &RawExtendInput,
) -> Result<RawExtendOutput, PluginError> {
    let runtime = parse_trusted(&input.runtime, "runtime")?;
    let draft = parse_trusted(&input.draft, "draft")?;
    let current = match &input.current_shoot {
        Some(json) => Some(parse_trusted(json, "currentShoot")?),
        None => None,
    };
    let config_json = if input.config.trim().is_empty() || input.config.trim() == "null" {
        "{}"
    } else {
        input.config.as_str()
    };
    let config = parse_document(config_json, "config")?;
    let output = P::extend(ExtendInput {
        runtime,
        draft,
        operation: input.operation,
        current,
        config,
    })?;
    let shoot = serde_json::to_string(&output.shoot)
        .map_err(|err| PluginError::internal(format!("cannot serialize the Shoot: {err}")))?;
    Ok(RawExtendOutput {
        shoot,
        warnings: output.warnings,
    })
}
