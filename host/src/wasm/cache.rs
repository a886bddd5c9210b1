//! On-disk cache of precompiled components, keyed by (sha256 of the component bytes,
//! engine compatibility hash).
//!
//! `Component::deserialize` executes whatever machine code it is handed, so this cache only
//! ever loads files it wrote itself: a private directory (0700), files written atomically,
//! and a header binding each file to the component digest it was compiled from plus a
//! checksum of the artifact. Anything that does not check out is discarded and recompiled.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 16] = b"TESSERA-CWASM-1\n";

/// A directory of precompiled components for one engine configuration.
#[derive(Debug, Clone)]
pub struct PrecompiledCache {
    dir: PathBuf,
}

/// Feeds `Hash` output into sha256, so the engine hash is stable across processes.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Hex digest identifying the engine's code-generation settings.
pub fn engine_hash(engine: &Engine) -> String {
    let mut hasher = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex::encode(&hasher.0.finalize()[..12])
}

impl PrecompiledCache {
    /// Open (creating) `root/<engine hash>/`.
    pub fn open(root: &Path, engine: &Engine) -> Result<Self, String> {
        let dir = root.join(engine_hash(engine));
        fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create cache directory {}: {e}", dir.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
        }
        Ok(Self { dir })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}.cwasm"))
    }

    /// Load the precompiled component for `digest` (hex sha256), if a valid one exists.
    pub fn get(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.path(digest);
        let bytes = fs::read(&path).ok()?;
        let payload = match verify(&bytes, digest) {
            Some(payload) => payload,
            None => {
                tracing::warn!(path = %path.display(), "discarding a corrupt or foreign precompiled artifact");
                let _ = fs::remove_file(&path);
                return None;
            }
        };
        // SAFETY: the payload was produced by `Engine::precompile_component` in this cache
        // (checked by the header above) and wasmtime verifies the engine compatibility itself.
        match unsafe { Component::deserialize(engine, payload) } {
            Ok(component) => Some(component),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "precompiled artifact rejected; recompiling");
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Store the precompiled form of the component with `digest`.
    pub fn put(&self, digest: &str, artifact: &[u8]) -> std::io::Result<()> {
        let tmp = self
            .dir
            .join(format!(".{digest}.{}.tmp", std::process::id()));
        {
            let mut file = fs::File::create(&tmp)?;
            file.write_all(MAGIC)?;
            file.write_all(&hex_to_bytes(digest))?;
            file.write_all(&Sha256::digest(artifact))?;
            file.write_all(artifact)?;
            file.sync_all()?;
        }
        fs::rename(&tmp, self.path(digest))
    }
}

fn hex_to_bytes(digest: &str) -> Vec<u8> {
    hex::decode(digest).unwrap_or_default()
}

fn verify<'a>(bytes: &'a [u8], digest: &str) -> Option<&'a [u8]> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (stored_digest, rest) = rest.split_at_checked(32)?;
    let (checksum, payload) = rest.split_at_checked(32)?;
    (stored_digest == hex_to_bytes(digest).as_slice()
        && checksum == Sha256::digest(payload).as_slice())
    .then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_rejects_tampering() {
        let digest = hex::encode(Sha256::digest(b"component"));
        let mut file = MAGIC.to_vec();
        file.extend(hex_to_bytes(&digest));
        file.extend(Sha256::digest(b"artifact"));
        file.extend(b"artifact");
        assert_eq!(verify(&file, &digest), Some(&b"artifact"[..]));
        let other = hex::encode(Sha256::digest(b"other"));
        assert_eq!(verify(&file, &other), None, "bound to another component");
        let last = file.len() - 1;
        file[last] ^= 1;
        assert_eq!(verify(&file, &digest), None, "payload changed");
        assert_eq!(verify(b"garbage", &digest), None);
    }
}
