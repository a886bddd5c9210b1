//! OCI registries: plugin artifacts in the Wasm ecosystem's layout, a content-addressed
//! on-disk store, cosign-style signatures and OCI image-layout directories.
//!
//! Data flow of a pull: reference → [`client`] resolves the digest → [`signature`] checks it
//! when required → manifest and layer fetched by digest, sha256-checked → [`store`].

pub mod artifact;
pub mod client;
pub mod error;
pub mod layout;
pub mod signature;
pub mod store;

pub use artifact::{ArtifactMeta, ComponentSummary, PluginArtifact};
pub use client::{NoProgress, Progress, Registry, RegistryOptions, parse_reference};
pub use error::OciError;
pub use signature::{TrustPolicy, VerifyOutcome};
pub use store::ContentStore;

use sha2::{Digest, Sha256};

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The hex part of a `sha256:<hex>` digest, if it is one.
pub fn sha256_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}
