//! On-disk cache of precompiled components, keyed by (sha256 of the component bytes,
//! engine compatibility hash).
//!
//! `Component::deserialize` executes whatever machine code it is handed, so this cache only
//! ever loads files it wrote itself: each file carries an HMAC-SHA256, under a key kept
//! outside the cache directory ([`CacheKey`]), over the component digest it was compiled
//! from and the artifact. Whoever can write the cache directory but not read the key cannot
//! make the host run their code: anything that does not check out is discarded and
//! recompiled.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use ring::hmac;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 16] = b"TESSERA-CWASM-2\n";

/// The secret that proves an artifact was written by this host (or one sharing its key).
#[derive(Clone)]
pub struct CacheKey(hmac::Key);

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheKey(…)")
    }
}

impl CacheKey {
    /// A key from secret bytes (at least 32).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < 32 {
            return Err(format!(
                "a cache key needs 32 bytes or more, got {}",
                bytes.len()
            ));
        }
        Ok(Self(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// The key in `path`, created (random, mode 0600) when missing. The file must not be
    /// inside `cache_root`: whoever can write the cache must not be able to read the key.
    pub fn load_or_create(path: &Path, cache_root: &Path) -> Result<Self, String> {
        let inside = |dir: &Path| {
            let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
            canonical(path.parent().unwrap_or(Path::new("."))).starts_with(canonical(dir))
        };
        if inside(cache_root) {
            return Err(format!(
                "the cache key {} must not be inside the cache directory {}",
                path.display(),
                cache_root.display()
            ));
        }
        match fs::read(path) {
            Ok(bytes) => Self::from_bytes(&bytes).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::create(path),
            Err(e) => Err(format!("cannot read the cache key {}: {e}", path.display())),
        }
    }

    fn create(path: &Path) -> Result<Self, String> {
        let fail = |e: &dyn std::fmt::Display| {
            format!("cannot create the cache key {}: {e}", path.display())
        };
        let mut bytes = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .map_err(|_| fail(&"no system randomness"))?;
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| fail(&e))?;
        }
        // Written whole under a private name (mode 0600), then linked into place: a host
        // starting at the same moment reads either no key or a complete one, never a
        // half-written file.
        let dir = path.parent().unwrap_or(Path::new("."));
        let written = tempfile::Builder::new()
            .prefix(".cache-key.")
            .tempfile_in(dir)
            .and_then(|mut file| file.write_all(&bytes).map(|()| file))
            .and_then(|file| file.persist_noclobber(path).map(drop).map_err(|e| e.error));
        match written {
            Ok(()) => Self::from_bytes(&bytes),
            // Another process created it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::from_bytes(&fs::read(path).map_err(|e| fail(&e))?)
            }
            Err(e) => Err(fail(&e)),
        }
    }

    fn tag(&self, digest: &[u8], artifact: &[u8]) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(digest);
        ctx.update(artifact);
        ctx.sign()
    }

    fn verify(&self, digest: &[u8], artifact: &[u8], tag: &[u8]) -> bool {
        let mut message = Vec::with_capacity(digest.len() + artifact.len());
        message.extend_from_slice(digest);
        message.extend_from_slice(artifact);
        hmac::verify(&self.0, &message, tag).is_ok()
    }
}

/// `$XDG_CONFIG_HOME/tessera/cache.key` or `~/.config/tessera/cache.key`.
pub fn default_key_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("tessera").join("cache.key"))
}

/// A directory of precompiled components for one engine configuration.
#[derive(Debug, Clone)]
pub struct PrecompiledCache {
    dir: PathBuf,
    key: CacheKey,
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
    /// Open (creating) `root/<engine hash>/`, checking and signing artifacts with `key`.
    pub fn open(root: &Path, engine: &Engine, key: CacheKey) -> Result<Self, String> {
        let dir = root.join(engine_hash(engine));
        fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create cache directory {}: {e}", dir.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
        }
        Ok(Self { dir, key })
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
        let payload = match verify(&self.key, &bytes, digest) {
            Some(payload) => payload,
            None => {
                tracing::warn!(path = %path.display(), "discarding a precompiled artifact this host did not write (corrupt, foreign or another key); recompiling");
                let _ = fs::remove_file(&path);
                return None;
            }
        };
        // SAFETY: the payload was produced by `Engine::precompile_component` in a cache
        // holding our key (the HMAC above) and wasmtime checks the engine compatibility.
        match unsafe { Component::deserialize(engine, payload) } {
            Ok(component) => Some(component),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "precompiled artifact rejected; recompiling");
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Store the precompiled form of the component with `digest`. Written to a file of its
    /// own, then renamed: hosts sharing the directory (every pod's host is PID 1, so a name
    /// made of the process id is not unique) never write into each other's file.
    pub fn put(&self, digest: &str, artifact: &[u8]) -> std::io::Result<()> {
        let mut file = tempfile::Builder::new()
            .prefix(&format!(".{digest}."))
            .suffix(".tmp")
            .tempfile_in(&self.dir)?;
        let bytes = hex_to_bytes(digest);
        file.write_all(MAGIC)?;
        file.write_all(&bytes)?;
        file.write_all(self.key.tag(&bytes, artifact).as_ref())?;
        file.write_all(artifact)?;
        file.as_file().sync_all()?;
        file.persist(self.path(digest))
            .map(drop)
            .map_err(|e| e.error)
    }
}

fn hex_to_bytes(digest: &str) -> Vec<u8> {
    hex::decode(digest).unwrap_or_default()
}

fn verify<'a>(key: &CacheKey, bytes: &'a [u8], digest: &str) -> Option<&'a [u8]> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (stored_digest, rest) = rest.split_at_checked(32)?;
    let (tag, payload) = rest.split_at_checked(32)?;
    (stored_digest == hex_to_bytes(digest).as_slice() && key.verify(stored_digest, payload, tag))
        .then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_rejects_tampering_and_other_keys() {
        let key = CacheKey::from_bytes(&[7u8; 32]).unwrap();
        let digest = hex::encode(Sha256::digest(b"component"));
        let mut file = MAGIC.to_vec();
        file.extend(hex_to_bytes(&digest));
        file.extend(key.tag(&hex_to_bytes(&digest), b"artifact").as_ref());
        file.extend(b"artifact");
        assert_eq!(verify(&key, &file, &digest), Some(&b"artifact"[..]));
        let other_key = CacheKey::from_bytes(&[8u8; 32]).unwrap();
        assert_eq!(
            verify(&other_key, &file, &digest),
            None,
            "written under another key"
        );
        let other = hex::encode(Sha256::digest(b"other"));
        assert_eq!(
            verify(&key, &file, &other),
            None,
            "bound to another component"
        );
        let last = file.len() - 1;
        file[last] ^= 1;
        assert_eq!(verify(&key, &file, &digest), None, "payload changed");
        assert_eq!(verify(&key, b"garbage", &digest), None);
        assert!(CacheKey::from_bytes(b"short").is_err());
    }

    #[test]
    fn the_key_lives_outside_the_cache_and_is_created_once() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        fs::create_dir_all(&cache).unwrap();
        assert!(CacheKey::load_or_create(&cache.join("cache.key"), &cache).is_err());
        let path = dir.path().join("config/cache.key");
        CacheKey::load_or_create(&path, &cache).unwrap();
        let first = fs::read(&path).unwrap();
        CacheKey::load_or_create(&path, &cache).unwrap();
        assert_eq!(fs::read(&path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }

    #[test]
    fn writers_sharing_the_directory_do_not_spoil_each_others_artifact() {
        let dir = tempfile::tempdir().unwrap();
        let key = CacheKey::from_bytes(&[7u8; 32]).unwrap();
        let cache = PrecompiledCache {
            dir: dir.path().to_path_buf(),
            key: key.clone(),
        };
        let digest = hex::encode(Sha256::digest(b"component"));
        let artifact = vec![42u8; 4 << 20];
        // Threads share a process id, as the hosts of two pods (each PID 1) do.
        std::thread::scope(|scope| {
            let writers: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| cache.put(&digest, &artifact)))
                .collect();
            for writer in writers {
                writer.join().unwrap().expect("every write succeeds");
            }
        });
        let stored = fs::read(cache.path(&digest)).unwrap();
        assert_eq!(verify(&key, &stored, &digest), Some(&artifact[..]));
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left: {left:?}");
    }
}
