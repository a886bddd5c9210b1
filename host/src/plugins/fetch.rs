//! From a reference to a compiled plugin: resolve the tag, verify the signature of that
//! digest (before any component byte is fetched), pull manifest and component by digest
//! with sha256 checks, keep them in the content store, compile through the Wasm cache.
//! A digest already in the store is used without the registry.

use std::sync::Arc;

use crate::oci::signature::{self, repository_of};
use crate::oci::{
    ContentStore, NoProgress, OciError, PluginArtifact, Registry, TrustPolicy, parse_reference,
};
use crate::wasm::{LoadError, Loaded, PluginKind, WasmRuntime};

/// A plugin version ready to run.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub manifest_digest: String,
    /// `sha256:` of the component.
    pub component_digest: String,
    /// Key id that verified the signature (when verification was required).
    pub verified_by: Option<String>,
    pub loaded: Loaded,
}

/// Why a version cannot run.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error("signature verification failed: {0}")]
    Verification(String),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("compilation was interrupted: {0}")]
    Join(String),
}

impl FetchError {
    /// The registry could not be reached or answered with an error (worth retrying).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Oci(OciError::Registry { .. }))
    }
}

/// Registry, store, trust policy and engine, shared by every resolution of the host.
pub struct Fetcher {
    pub registry: Registry,
    pub store: ContentStore,
    pub policy: TrustPolicy,
    pub wasm: Arc<WasmRuntime>,
}

impl Fetcher {
    /// The manifest digest `reference` points at now.
    pub async fn resolve(&self, reference: &str) -> Result<String, FetchError> {
        let parsed = parse_reference(reference)?;
        Ok(self.registry.resolve(&parsed).await?)
    }

    /// Make version `manifest_digest` of `reference` runnable.
    pub async fn fetch(
        &self,
        reference: &str,
        manifest_digest: &str,
        kind: PluginKind,
        require_signature: bool,
    ) -> Result<Fetched, FetchError> {
        let parsed = parse_reference(reference)?;
        let repository = repository_of(&parsed);
        let require = require_signature || self.policy.requires(&repository);
        let stored_manifest = self.store.get(manifest_digest);

        let mut verified_by = None;
        if require {
            // Signatures kept from an earlier pull verify offline; the registry is only
            // asked when they are missing or no longer verify (e.g. the key changed).
            let stored = self.store.signatures(manifest_digest);
            let offline = (stored_manifest.is_some() && !stored.is_empty())
                .then(|| {
                    self.policy
                        .verify(&repository, manifest_digest, &stored)
                        .ok()
                })
                .flatten();
            let outcome = match offline {
                Some(outcome) => outcome,
                None => {
                    let fresh = signature::fetch(&self.registry, &parsed, manifest_digest).await?;
                    let outcome = self
                        .policy
                        .verify(&repository, manifest_digest, &fresh)
                        .map_err(FetchError::Verification)?;
                    self.store.put_signatures(manifest_digest, &fresh)?;
                    outcome
                }
            };
            verified_by = Some(outcome.key);
        }

        let artifact = match stored_manifest {
            Some(bytes) => PluginArtifact::parse(reference, bytes)?,
            None => {
                let artifact = self
                    .registry
                    .pull_artifact(&parsed, manifest_digest)
                    .await?;
                self.store.put(&artifact.manifest_bytes)?;
                artifact
            }
        };
        let component_digest = artifact.component_digest().to_string();
        let component = match self.store.get(&component_digest) {
            Some(bytes) => bytes,
            None => {
                let pinned = parsed.clone_with_digest(manifest_digest.to_string());
                let bytes = self
                    .registry
                    .pull_blob(&pinned, &artifact.layer, &NoProgress)
                    .await?;
                self.store.put(&bytes)?;
                bytes
            }
        };
        let loaded = self.compile(reference, component, kind).await?;
        Ok(Fetched {
            manifest_digest: manifest_digest.to_string(),
            component_digest,
            verified_by,
            loaded,
        })
    }

    /// Compile (or load precompiled) off the async threads; loading checks the world.
    async fn compile(
        &self,
        reference: &str,
        component: Vec<u8>,
        kind: PluginKind,
    ) -> Result<Loaded, FetchError> {
        let wasm = self.wasm.clone();
        let source = reference.to_string();
        tokio::task::spawn_blocking(move || wasm.load_kind(&component, &source, kind))
            .await
            .map_err(|e| FetchError::Join(e.to_string()))?
            .map_err(FetchError::from)
    }
}
