//! A content-addressed on-disk store of blobs (`blobs/sha256/<hex>`), as in an OCI image
//! layout. Every read re-hashes the content, so a file changed on disk is discarded
//! instead of compiled. Signatures seen at pull time are kept next to the manifests they
//! sign, so a restarted host can re-verify them without the registry.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::OciError;
use super::{sha256_digest, sha256_hex};

/// One cosign simple-signing signature: the signed payload and its base64 signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSignature {
    pub payload: Vec<u8>,
    pub signature: String,
}

/// Blobs by sha256 under one directory.
#[derive(Debug, Clone)]
pub struct ContentStore {
    root: PathBuf,
}

impl ContentStore {
    /// Open (creating) a store at `root`.
    pub fn open(root: &Path) -> Result<Self, OciError> {
        for dir in ["blobs/sha256", "signatures"] {
            fs::create_dir_all(root.join(dir)).map_err(|e| OciError::io(root, e))?;
        }
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blob_path(&self, digest: &str) -> Option<PathBuf> {
        Some(self.root.join("blobs/sha256").join(sha256_hex(digest)?))
    }

    /// Whether a blob is present (not checked).
    pub fn contains(&self, digest: &str) -> bool {
        self.blob_path(digest).is_some_and(|p| p.is_file())
    }

    /// Store `bytes`; returns their digest.
    pub fn put(&self, bytes: &[u8]) -> Result<String, OciError> {
        let digest = sha256_digest(bytes);
        let path = self.blob_path(&digest).expect("sha256 digest");
        if !path.is_file() {
            write_atomic(&path, bytes)?;
        }
        Ok(digest)
    }

    /// The blob with `digest`, if present and intact.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.blob_path(digest)?;
        let bytes = fs::read(&path).ok()?;
        if sha256_digest(&bytes) != digest {
            tracing::warn!(path = %path.display(), "stored blob does not match its digest; discarding it");
            let _ = fs::remove_file(&path);
            return None;
        }
        Some(bytes)
    }

    /// Remember the signatures that came with manifest `digest`.
    pub fn put_signatures(
        &self,
        digest: &str,
        signatures: &[StoredSignature],
    ) -> Result<(), OciError> {
        let Some(hex) = sha256_hex(digest) else {
            return Ok(());
        };
        let path = self.root.join("signatures").join(format!("{hex}.json"));
        write_atomic(
            &path,
            &serde_json::to_vec(signatures).expect("signatures serialise"),
        )
    }

    /// Signatures stored for manifest `digest`.
    pub fn signatures(&self, digest: &str) -> Vec<StoredSignature> {
        sha256_hex(digest)
            .and_then(|hex| fs::read(self.root.join("signatures").join(format!("{hex}.json"))).ok())
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }
}

/// Write through a temporary file of its own and rename, so readers never see half a blob
/// and two writers of the same blob at once (two Plugins naming one digest) do not trip
/// over each other's temporary file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let result = (|| {
        let mut file = tempfile::NamedTempFile::new_in(dir)?;
        file.write_all(bytes)?;
        file.as_file().sync_all()?;
        file.persist(path).map_err(|e| e.error)?;
        Ok::<_, std::io::Error>(())
    })();
    result.map_err(|e| OciError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_and_tamper() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        let digest = store.put(b"component").unwrap();
        assert_eq!(store.get(&digest).as_deref(), Some(&b"component"[..]));
        let path = store.blob_path(&digest).unwrap();
        fs::write(&path, b"c0mponent").unwrap();
        assert_eq!(store.get(&digest), None, "a changed file is refused");
        assert!(!path.exists(), "and removed");
        assert_eq!(store.get("sha256:nothex"), None);
    }

    #[test]
    fn writers_of_one_blob_at_once_all_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        let bytes = vec![7u8; 1 << 20];
        let path = store.blob_path(&sha256_digest(&bytes)).unwrap();
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..8)
                .map(|_| s.spawn(|| write_atomic(&path, &bytes)))
                .collect();
            for w in writers {
                w.join().unwrap().unwrap();
            }
        });
        assert_eq!(store.get(&sha256_digest(&bytes)), Some(bytes));
    }
}
