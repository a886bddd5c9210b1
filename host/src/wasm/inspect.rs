//! Static facts about a component: digest, size, kind, contract version, imports, exports.

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::PluginKind;
use super::SUPPORTED_CONTRACTS;
use super::sandbox::{compat_key, offered_imports};
use crate::grants::Requests;

/// What `tessera plugin inspect` shows, minus `info()` (which needs an instance).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Inspection {
    pub digest: String,
    pub size: usize,
    pub kind: Option<PluginKind>,
    /// From the export name `tessera:plugin/<kind>-api@<version>`.
    pub contract: Option<String>,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// Imports the host does not offer.
    pub missing_imports: Vec<String>,
    /// What the plugin asks the operator to grant (its `tessera:requests` section).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<Requests>,
    /// The JSON Schema of the plugin's configuration (its `tessera:config-schema` section).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<serde_json::Value>,
}

impl From<&Inspection> for crate::oci::ComponentSummary {
    fn from(inspection: &Inspection) -> Self {
        Self {
            exports: inspection.exports.clone(),
            imports: inspection.imports.clone(),
        }
    }
}

/// What a component declares about itself in custom sections.
#[derive(Debug, Clone, Default)]
pub struct Declared {
    pub requests: Option<Requests>,
    pub config_schema: Option<serde_json::Value>,
}

/// The custom section in which a plugin declares what it needs (YAML, see
/// [`Requests`]); the SDK's `declare_requests!` writes it.
pub const REQUESTS_SECTION: &str = "tessera:requests";

/// The custom section in which a plugin gives its configuration's JSON Schema; the SDK's
/// `declare_config_schema!` writes it.
pub const CONFIG_SCHEMA_SECTION: &str = "tessera:config-schema";

/// What the component declares in its custom sections (nested core modules included);
/// `Err` names a section that is there but does not parse.
pub fn declared(bytes: &[u8]) -> Result<Declared, String> {
    let mut out = Declared::default();
    if let Some(text) = section_text(bytes, REQUESTS_SECTION)? {
        let requests =
            Requests::parse(text).map_err(|e| format!("section {REQUESTS_SECTION}: {e}"))?;
        out.requests = Some(requests);
    }
    if let Some(text) = section_text(bytes, CONFIG_SCHEMA_SECTION)? {
        let schema: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| format!("section {CONFIG_SCHEMA_SECTION} is not JSON: {e}"))?;
        if !schema.is_object() {
            return Err(format!(
                "section {CONFIG_SCHEMA_SECTION} is not a JSON Schema object"
            ));
        }
        out.config_schema = Some(schema);
    }
    Ok(out)
}

/// The first custom section called `name`, as text.
fn section_text<'b>(bytes: &'b [u8], name: &str) -> Result<Option<&'b str>, String> {
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(wasmparser::Payload::CustomSection(section)) = payload else {
            continue;
        };
        if section.name() == name {
            return std::str::from_utf8(section.data())
                .map(Some)
                .map_err(|_| format!("section {name} is not UTF-8"));
        }
    }
    Ok(None)
}

/// `sha256:<hex>` is how digests are shown; the bare hex keys caches.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// True when `version` satisfies one of the supported contract versions.
pub fn contract_supported(version: &str) -> bool {
    let key = compat_key(&format!("x@{version}"));
    SUPPORTED_CONTRACTS
        .iter()
        .any(|supported| key == compat_key(&format!("x@{supported}.0")))
}

/// Read imports and exports off a compiled component.
pub fn inspect(
    engine: &Engine,
    component: &Component,
    digest: String,
    size: usize,
    declared: Declared,
) -> Inspection {
    let ty = component.component_type();
    let imports: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let (kind, contract) = exports
        .iter()
        .find_map(|name| {
            let (iface, version) = name.strip_prefix("tessera:plugin/")?.split_once('@')?;
            let kind = match iface {
                "shoot-extension-api" => PluginKind::ShootExtension,
                "module-reconciler-api" => PluginKind::ModuleReconciler,
                _ => return None,
            };
            Some((Some(kind), Some(version.to_string())))
        })
        .unwrap_or((None, None));
    let offered = offered_imports();
    let missing_imports = imports
        .iter()
        .filter(|name| !offered.contains(&compat_key(name)))
        .cloned()
        .collect();
    Inspection {
        digest,
        size,
        kind,
        contract,
        imports,
        exports,
        missing_imports,
        requests: declared.requests,
        config_schema: declared.config_schema,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty core module with one custom section.
    fn with_section(name: &str, payload: &[u8]) -> Vec<u8> {
        let mut body = vec![name.len() as u8];
        body.extend_from_slice(name.as_bytes());
        body.extend_from_slice(payload);
        let mut out = b"\0asm\x01\0\0\0\0".to_vec();
        out.push(body.len() as u8);
        out.extend(body);
        out
    }

    #[test]
    fn a_config_schema_section_is_read_and_a_broken_one_named() {
        let ok = with_section(CONFIG_SCHEMA_SECTION, br#"{"type":"object"}"#);
        let found = declared(&ok).unwrap();
        assert_eq!(found.config_schema.unwrap()["type"], "object");
        assert!(found.requests.is_none());
        for broken in [&b"{not json"[..], b"[1]"] {
            let err = declared(&with_section(CONFIG_SCHEMA_SECTION, broken)).unwrap_err();
            assert!(err.contains(CONFIG_SCHEMA_SECTION), "{err}");
        }
        assert!(
            declared(&with_section("other", b"x"))
                .unwrap()
                .config_schema
                .is_none()
        );
    }
}
