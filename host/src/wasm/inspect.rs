//! Static facts about a component: digest, size, kind, contract version, imports, exports.

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::SUPPORTED_CONTRACTS;
use super::plugin::PluginKind;
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
}

/// The custom section in which a plugin declares what it needs (YAML, see
/// [`Requests`]); the SDK's `declare_requests!` writes it.
pub const REQUESTS_SECTION: &str = "tessera:requests";

/// The plugin's declared requests, read from its components' custom sections (nested
/// core modules included); `Err` when the section is there but does not parse.
pub fn declared_requests(bytes: &[u8]) -> Result<Option<Requests>, String> {
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(wasmparser::Payload::CustomSection(section)) = payload else {
            continue;
        };
        if section.name() == REQUESTS_SECTION {
            let text = std::str::from_utf8(section.data())
                .map_err(|_| format!("section {REQUESTS_SECTION} is not UTF-8"))?;
            return Requests::parse(text)
                .map(Some)
                .map_err(|e| format!("section {REQUESTS_SECTION}: {e}"));
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
    requests: Option<Requests>,
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
        requests,
    }
}
