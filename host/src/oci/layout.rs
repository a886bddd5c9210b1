//! OCI image-layout directories (`oci-layout`, `index.json`, `blobs/sha256/…`) for
//! air-gapped installs: `save` copies plugins and their signatures out of a registry,
//! `load` pushes them into another one. Digests do not change on the way, so signatures
//! made for the original still verify.

use std::path::Path;

use oci_client::Reference;
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use serde::{Deserialize, Serialize};

use super::artifact::PluginArtifact;
use super::client::{Progress, Registry};
use super::error::OciError;
use super::signature::signature_tag;
use super::store::write_atomic;
use super::{sha256_digest, sha256_hex};

/// Annotation with the reference an entry was saved from.
const REFERENCE_ANNOTATION: &str = "dev.tessera.reference";
/// The tag, per the image-layout spec.
const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    schema_version: u8,
    #[serde(default)]
    manifests: Vec<IndexEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IndexEntry {
    media_type: String,
    digest: String,
    size: i64,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

/// One manifest written or read.
#[derive(Debug, Clone)]
pub struct Copied {
    pub reference: String,
    pub digest: String,
    /// A signature manifest, not a plugin.
    pub signature: bool,
}

fn blob_path(dir: &Path, digest: &str) -> Result<std::path::PathBuf, OciError> {
    let hex = sha256_hex(digest).ok_or_else(|| OciError::BadReference {
        reference: digest.to_string(),
        message: "not a sha256 digest".into(),
    })?;
    Ok(dir.join("blobs/sha256").join(hex))
}

fn read_index(dir: &Path) -> Result<Index, OciError> {
    let path = dir.join("index.json");
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| OciError::io(&path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Index {
            schema_version: 2,
            manifests: Vec::new(),
        }),
        Err(e) => Err(OciError::io(&path, e)),
    }
}

/// Copy one manifest and its blobs from the registry into `dir`.
async fn save_manifest(
    registry: &Registry,
    reference: &Reference,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<(Vec<u8>, String), OciError> {
    let (bytes, digest) = registry.pull_manifest(reference).await?;
    let manifest: OciImageManifest =
        serde_json::from_slice(&bytes).map_err(|e| OciError::NotAPlugin {
            reference: reference.whole(),
            message: e.to_string(),
        })?;
    for blob in std::iter::once(&manifest.config).chain(&manifest.layers) {
        let path = blob_path(dir, &blob.digest)?;
        if !path.is_file() {
            let data = registry.pull_blob(reference, blob, progress).await?;
            write_atomic(&path, &data)?;
        }
    }
    write_atomic(&blob_path(dir, &digest)?, &bytes)?;
    Ok((bytes, digest))
}

/// Save plugins (and their signatures, when present) into the layout at `dir`.
pub async fn save(
    registry: &Registry,
    references: &[Reference],
    dir: &Path,
    progress: &dyn Progress,
) -> Result<Vec<Copied>, OciError> {
    std::fs::create_dir_all(dir.join("blobs/sha256")).map_err(|e| OciError::io(dir, e))?;
    write_atomic(
        &dir.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )?;
    let mut index = read_index(dir)?;
    let mut copied = Vec::new();
    for reference in references {
        let (bytes, digest) = save_manifest(registry, reference, dir, progress).await?;
        PluginArtifact::parse(&reference.whole(), bytes.clone())?;
        let mut entries = vec![(reference.clone(), digest.clone(), bytes.len(), false)];
        let sig_ref = Reference::with_tag(
            reference.registry().to_string(),
            reference.repository().to_string(),
            signature_tag(&digest).expect("sha256 digest"),
        );
        match save_manifest(registry, &sig_ref, dir, progress).await {
            Ok((sig_bytes, sig_digest)) => {
                entries.push((sig_ref, sig_digest, sig_bytes.len(), true))
            }
            Err(OciError::NotFound { .. }) => {}
            Err(err) => return Err(err),
        }
        for (r, digest, size, signature) in entries {
            // A tagless (digest) reference is saved under its digest as the name.
            let name = r
                .tag()
                .map(str::to_string)
                .unwrap_or_else(|| digest.clone());
            index
                .manifests
                .retain(|e| e.annotations.get(REFERENCE_ANNOTATION) != Some(&r.whole()));
            index.manifests.push(IndexEntry {
                media_type: OCI_IMAGE_MEDIA_TYPE.into(),
                digest: digest.clone(),
                size: size as i64,
                annotations: [
                    (REF_NAME_ANNOTATION.to_string(), name),
                    (REFERENCE_ANNOTATION.to_string(), r.whole()),
                ]
                .into(),
            });
            copied.push(Copied {
                reference: r.whole(),
                digest,
                signature,
            });
        }
    }
    index.schema_version = 2;
    write_atomic(
        &dir.join("index.json"),
        &serde_json::to_vec_pretty(&index).expect("index serialises"),
    )?;
    Ok(copied)
}

fn read_blob(dir: &Path, digest: &str) -> Result<Vec<u8>, OciError> {
    let path = blob_path(dir, digest)?;
    let bytes = std::fs::read(&path).map_err(|e| OciError::io(&path, e))?;
    let actual = sha256_digest(&bytes);
    if actual != digest {
        return Err(OciError::DigestMismatch {
            reference: path.display().to_string(),
            expected: digest.to_string(),
            actual,
        });
    }
    Ok(bytes)
}

/// Push everything in the layout at `dir`. With `registry_host`, the registry part of
/// every saved reference is replaced (the repository path is kept).
pub async fn load(
    registry: &Registry,
    dir: &Path,
    registry_host: Option<&str>,
    progress: &dyn Progress,
) -> Result<Vec<Copied>, OciError> {
    let index = read_index(dir)?;
    if index.manifests.is_empty() {
        return Err(OciError::io(
            &dir.join("index.json"),
            "no manifests (is this an OCI image layout written by `tessera plugin save`?)",
        ));
    }
    let mut copied = Vec::new();
    // Plugins before signatures, so a registry never shows a signature without its subject.
    let mut entries = index.manifests.clone();
    entries.sort_by_key(|e| {
        e.annotations
            .get(REF_NAME_ANNOTATION)
            .is_some_and(|n| n.ends_with(".sig"))
    });
    for entry in entries {
        let saved = entry.annotations.get(REFERENCE_ANNOTATION).ok_or_else(|| {
            OciError::io(
                &dir.join("index.json"),
                format!(
                    "entry {} has no {REFERENCE_ANNOTATION} annotation",
                    entry.digest
                ),
            )
        })?;
        let original = super::client::parse_reference(saved)?;
        let registry_part = registry_host.unwrap_or(original.registry());
        let target = match original.tag() {
            Some(tag) => Reference::with_tag(
                registry_part.to_string(),
                original.repository().to_string(),
                tag.to_string(),
            ),
            None => Reference::with_digest(
                registry_part.to_string(),
                original.repository().to_string(),
                entry.digest.clone(),
            ),
        };
        let bytes = read_blob(dir, &entry.digest)?;
        let manifest: OciImageManifest =
            serde_json::from_slice(&bytes).map_err(|e| OciError::io(dir, e))?;
        for blob in std::iter::once(&manifest.config).chain(&manifest.layers) {
            let data = read_blob(dir, &blob.digest)?;
            registry
                .push_blob(&target, &data, &blob.digest, progress)
                .await?;
        }
        let media_type = manifest
            .media_type
            .clone()
            .unwrap_or_else(|| OCI_IMAGE_MEDIA_TYPE.to_string());
        let digest = registry.push_manifest(&target, &bytes, &media_type).await?;
        copied.push(Copied {
            reference: target.whole(),
            digest,
            signature: target.tag().is_some_and(|t| t.ends_with(".sig")),
        });
    }
    Ok(copied)
}
