//! The plugin artifact: the Wasm ecosystem's OCI layout (as written by `wkg` and
//! `oci-wasm`): config `application/vnd.wasm.config.v0+json`, one `application/wasm` layer,
//! plus Tessera's annotations. Artifacts in the older wasm-to-oci layout are accepted too.

use std::collections::BTreeMap;

use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use serde::{Deserialize, Serialize};

use super::error::OciError;
use super::sha256_digest;

/// Config media type of the Wasm OCI artifact layout.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Layer media type of the Wasm OCI artifact layout.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Accepted on pull: the wasm-to-oci layout that predates the Wasm OCI artifact spec.
const LEGACY_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";
const LEGACY_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";

/// Manifest annotations Tessera writes (all optional on pull: the component says the same).
pub mod annotations {
    pub const VERSION: &str = "org.opencontainers.image.version";
    pub const TITLE: &str = "org.opencontainers.image.title";
    pub const CREATED: &str = "org.opencontainers.image.created";
    pub const DESCRIPTION: &str = "org.opencontainers.image.description";
    pub const KIND: &str = "dev.tessera.plugin.kind";
    pub const CONTRACT: &str = "dev.tessera.plugin.contract";
    pub const NAME: &str = "dev.tessera.plugin.name";
}

/// What a plugin's manifest says about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactMeta {
    pub name: Option<String>,
    pub version: Option<String>,
    /// `shoot-extension` or `module-reconciler`.
    pub kind: Option<String>,
    pub contract: Option<String>,
    pub description: Option<String>,
    pub created: Option<String>,
}

impl ArtifactMeta {
    fn from_annotations(a: &BTreeMap<String, String>) -> Self {
        let get = |k: &str| a.get(k).cloned();
        Self {
            name: get(annotations::NAME),
            version: get(annotations::VERSION),
            kind: get(annotations::KIND),
            contract: get(annotations::CONTRACT),
            description: get(annotations::DESCRIPTION),
            created: get(annotations::CREATED),
        }
    }

    fn to_annotations(&self) -> BTreeMap<String, String> {
        [
            (annotations::NAME, &self.name),
            (annotations::TITLE, &self.name),
            (annotations::VERSION, &self.version),
            (annotations::KIND, &self.kind),
            (annotations::CONTRACT, &self.contract),
            (annotations::DESCRIPTION, &self.description),
            (annotations::CREATED, &self.created),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), v.clone()?)))
        .collect()
    }
}

/// The config blob of the Wasm OCI layout.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WasmConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<String>,
    architecture: String,
    os: String,
    layer_digests: Vec<String>,
    component: ComponentSummary,
}

/// What an artifact's config says of its component: the interfaces it exports and imports
/// (the host's inspection of it gives them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ComponentSummary {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
}

/// A plugin artifact as it sits in a registry: manifest (raw, as its digest covers the
/// exact bytes), config and the component layer's descriptor.
#[derive(Debug, Clone)]
pub struct PluginArtifact {
    /// `sha256:<hex>` of `manifest_bytes`.
    pub manifest_digest: String,
    pub manifest_bytes: Vec<u8>,
    pub manifest: OciImageManifest,
    pub layer: OciDescriptor,
    pub meta: ArtifactMeta,
}

/// The blobs of a new artifact, ready to push.
#[derive(Debug, Clone)]
pub struct NewArtifact {
    pub config: Vec<u8>,
    pub component: Vec<u8>,
    pub artifact: PluginArtifact,
}

impl PluginArtifact {
    /// Package a component with what it exports and imports (from its inspection) and
    /// metadata.
    pub fn build(
        component: Vec<u8>,
        interface: impl Into<ComponentSummary>,
        meta: ArtifactMeta,
    ) -> NewArtifact {
        let layer_digest = sha256_digest(&component);
        let config = WasmConfig {
            created: meta.created.clone(),
            architecture: "wasm".into(),
            os: "wasip2".into(),
            layer_digests: vec![layer_digest.clone()],
            component: interface.into(),
        };
        let config = serde_json::to_vec(&config).expect("config serialises");
        let mut layer_annotations = BTreeMap::new();
        if let Some(name) = &meta.name {
            layer_annotations.insert(annotations::TITLE.to_string(), format!("{name}.wasm"));
        }
        let layer = OciDescriptor {
            media_type: WASM_LAYER_MEDIA_TYPE.into(),
            digest: layer_digest,
            size: component.len() as i64,
            annotations: (!layer_annotations.is_empty()).then_some(layer_annotations),
            ..Default::default()
        };
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
            config: OciDescriptor {
                media_type: WASM_CONFIG_MEDIA_TYPE.into(),
                digest: sha256_digest(&config),
                size: config.len() as i64,
                ..Default::default()
            },
            layers: vec![layer.clone()],
            subject: None,
            artifact_type: None,
            annotations: Some(meta.to_annotations()),
        };
        let manifest_bytes = serde_json::to_vec(&manifest).expect("manifest serialises");
        NewArtifact {
            config,
            component,
            artifact: PluginArtifact {
                manifest_digest: sha256_digest(&manifest_bytes),
                manifest_bytes,
                manifest,
                layer,
                meta,
            },
        }
    }

    /// Read a pulled manifest. `reference` only names the artifact in errors.
    pub fn parse(reference: &str, manifest_bytes: Vec<u8>) -> Result<Self, OciError> {
        let not_a_plugin = |message: String| OciError::NotAPlugin {
            reference: reference.to_string(),
            message,
        };
        let manifest: OciImageManifest = serde_json::from_slice(&manifest_bytes)
            .map_err(|e| not_a_plugin(format!("manifest is not an OCI image manifest: {e}")))?;
        let config_type = manifest.config.media_type.as_str();
        if config_type != WASM_CONFIG_MEDIA_TYPE && config_type != LEGACY_CONFIG_MEDIA_TYPE {
            return Err(not_a_plugin(format!(
                "config media type is {config_type}, expected {WASM_CONFIG_MEDIA_TYPE}"
            )));
        }
        let wasm: Vec<&OciDescriptor> = manifest
            .layers
            .iter()
            .filter(|l| {
                l.media_type == WASM_LAYER_MEDIA_TYPE || l.media_type == LEGACY_LAYER_MEDIA_TYPE
            })
            .collect();
        let layer = match wasm.as_slice() {
            [one] => (*one).clone(),
            [] => {
                return Err(not_a_plugin(format!(
                    "no {WASM_LAYER_MEDIA_TYPE} layer (layers: {})",
                    manifest
                        .layers
                        .iter()
                        .map(|l| l.media_type.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            more => {
                return Err(not_a_plugin(format!(
                    "{} Wasm layers; a plugin artifact has exactly one",
                    more.len()
                )));
            }
        };
        if super::sha256_hex(&layer.digest).is_none() {
            return Err(not_a_plugin(format!(
                "layer digest {} is not a sha256 digest",
                layer.digest
            )));
        }
        let meta = manifest
            .annotations
            .as_ref()
            .map(ArtifactMeta::from_annotations)
            .unwrap_or_default();
        Ok(Self {
            manifest_digest: sha256_digest(&manifest_bytes),
            manifest_bytes,
            manifest,
            layer,
            meta,
        })
    }

    /// `sha256:<hex>` of the component.
    pub fn component_digest(&self) -> &str {
        &self.layer.digest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inspection() -> ComponentSummary {
        ComponentSummary {
            exports: vec!["tessera:plugin/shoot-extension@0.1.0".into()],
            imports: vec![],
        }
    }

    #[test]
    fn build_then_parse_round_trips() {
        let meta = ArtifactMeta {
            name: Some("labels".into()),
            version: Some("1.2.3".into()),
            kind: Some("shoot-extension".into()),
            ..Default::default()
        };
        let new = PluginArtifact::build(b"\0asm".to_vec(), inspection(), meta.clone());
        let parsed =
            PluginArtifact::parse("r", new.artifact.manifest_bytes.clone()).expect("parses");
        assert_eq!(parsed.meta, meta);
        assert_eq!(parsed.component_digest(), sha256_digest(b"\0asm"));
        assert_eq!(parsed.manifest_digest, new.artifact.manifest_digest);
        assert_eq!(parsed.manifest.config.media_type, WASM_CONFIG_MEDIA_TYPE);
    }

    #[test]
    fn refuses_container_images() {
        let mut new = PluginArtifact::build(b"\0asm".to_vec(), inspection(), Default::default());
        new.artifact.manifest.layers[0].media_type =
            "application/vnd.oci.image.layer.v1.tar+gzip".into();
        new.artifact.manifest.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        let bytes = serde_json::to_vec(&new.artifact.manifest).unwrap();
        let err = PluginArtifact::parse("example.com/app:1", bytes).unwrap_err();
        assert!(err.to_string().contains("config media type"), "{err}");
    }
}
